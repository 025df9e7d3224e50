"""scripts/prune_venv.py: setup.sh removes what mcpfleet[test] no longer requires, and nothing it does."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def _prune() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prune_venv", REPO / "scripts" / "prune_venv.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


prune = _prune()

VENV = {
    "mcpfleet": [
        "litellm>=1",
        "jsonschema[format-nongpl]>=4",
        "pytest>=8; extra == 'test'",
        "moto[server]; extra == 'test'",
        "sphinx; extra == 'docs'",
        "tomli; python_version < '3.0'",
    ],
    "litellm": ["httpx", "Jinja2"],
    "httpx": ["anyio", "brotli; extra == 'brotli'"],
    "anyio": [],
    "jinja2": ["MarkupSafe>=2"],
    "markupsafe": [],
    "jsonschema": ["attrs", "fqdn; extra == 'format-nongpl'", "rfc3987-syntax; extra == 'format-nongpl-old'"],
    "attrs": [],
    "fqdn": [],
    "rfc3987-syntax": ["lark"],  # left by an older checkout: only an extra nobody asks for wants it
    "lark": [],
    "pytest": ["iniconfig", "colorama; sys_platform == 'win32'"],
    "iniconfig": [],
    "colorama": [],
    "moto": ["boto3", "flask; extra == 'server'"],
    "boto3": [],
    "flask": ["Werkzeug"],
    "werkzeug": ["MarkupSafe"],
    "sphinx": [],
    "brotli": [],
    "tomli": [],
    "pip": [],
    "setuptools": [],
    "wheel": [],
}


def test_the_closure_follows_extras_markers_and_normalised_names() -> None:
    needed = prune.closure(VENV)
    assert {"mcpfleet", "litellm", "httpx", "anyio", "jinja2", "markupsafe", "werkzeug"} <= needed  # Jinja2 -> jinja2
    assert {"jsonschema", "attrs", "fqdn"} <= needed  # the extra's own lines
    assert {"pytest", "iniconfig", "moto", "boto3", "flask"} <= needed  # the test extra, and moto's server extra
    assert not {"sphinx", "brotli", "rfc3987-syntax", "lark"} & needed  # extras nobody asked for
    assert not {"tomli", "colorama"} & needed  # markers that do not hold on this interpreter


def test_only_what_nothing_requires_is_uninstalled_and_never_pips_tooling() -> None:
    assert prune.extraneous(VENV) == ["brotli", "colorama", "lark", "rfc3987-syntax", "sphinx", "tomli"]
    assert prune.extraneous({k: v for k, v in VENV.items() if k != "mcpfleet"}) == []  # nothing says what is needed


def test_this_venv_keeps_every_pin_of_the_lock() -> None:
    """Against the real installed metadata: every runtime pin the images install is reached from mcpfleet,
    so setup.sh never uninstalls one (a missed extra or marker would show here)."""
    pins = {
        prune.canonical(m.group(1))
        for line in (REPO / "requirements.lock").read_text().splitlines()
        if (m := re.match(r"([A-Za-z0-9_.-]+)==", line))
    }
    needed = prune.closure(prune.installed())
    assert pins and not pins - needed, f"lock pins setup.sh would uninstall: {sorted(pins - needed)}"
