"""The images cannot be built here (no Docker engine); these checks keep their recipes pinned and
consistent with the project: pinned bases, the lock file installed as is, and every runtime dependency locked."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILES = [
    REPO / "runner" / "Dockerfile",
    REPO / "operator" / "Dockerfile",
    REPO / "servers" / "Dockerfile.filesystem",
    REPO / "servers" / "Dockerfile.playwright",
]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_base_images_are_pinned(path: Path) -> None:
    bases = re.findall(r"^FROM\s+(\S+)", path.read_text(), re.M)
    assert bases
    for base in bases:
        assert re.search(r":\d+\.\d+\.\d+", base) or "@sha256:" in base, f"{path.name}: {base} is not pinned"


def test_python_images_install_the_lock_without_resolving() -> None:
    for path in DOCKERFILES[:2]:
        text = path.read_text()
        assert "pip install --no-deps -r requirements.lock" in text
        assert "pip install --no-deps ." in text
        assert "COPY tasks ./tasks" in text and "MCPFLEET_APP_DIR=/opt/mcpfleet" in text
        assert "USER 10001" in text


def test_every_runtime_dependency_is_locked_to_one_version() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    locked = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: '{line}' is not pinned with =="
            locked[_norm(name)] = version
    for dep in deps:
        name = _norm(re.split(r"[<>=!~\[ ;]", dep, maxsplit=1)[0])
        assert name in locked, f"{name} is a runtime dependency missing from requirements.lock"


@pytest.mark.parametrize("name", ["Dockerfile.filesystem", "Dockerfile.playwright"])
def test_sidecar_uses_the_npm_lock(name: str) -> None:
    text = (REPO / "servers" / name).read_text()
    assert "npm ci" in text and "package-lock.json" in text and "USER 10001" in text
    assert (REPO / "servers" / "package-lock.json").is_file()


def test_playwright_sidecar_pins_chromium_and_never_downloads_a_browser() -> None:
    text = (REPO / "servers" / "Dockerfile.playwright").read_text()
    assert re.search(r"chromium=\d+\.\d+\.\d+\.\d+-\S+", text), "Debian's chromium is not pinned"
    assert "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1" in text and "PLAYWRIGHT_MCP_EXECUTABLE_PATH=/usr/bin/chromium" in text
