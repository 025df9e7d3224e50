"""What the hostile-input tests share: the CLI run as a user would, and the shape of a clean refusal."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml
from conftest import REPO

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
SCRIPTED = {"name": "oracle", "model": "scripted/oracle"}


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [str(MCPFLEET), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**base, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def flat(text: str) -> str:
    return " ".join(text.split())


def write_run(folder: Path, spec: dict, name: str = "hostile") -> Path:
    path = folder / f"{name}.yaml"
    body = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": name}, "spec": spec}
    path.write_text(yaml.safe_dump(body))
    return path


def assert_clean_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stdout + out.stderr
    for needle in needles:
        assert needle in flat(out.stderr), out.stderr
