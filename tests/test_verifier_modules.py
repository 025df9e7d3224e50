"""The interpreter that runs a pack's scripts (verify.py, MCPMark's prepare_environment.py) has what MCPMark's
own scripts import beyond the standard library: psycopg2 (its PostgreSQL verifiers) and numpy (its `vectors`
task builds its embeddings with it). Before, numpy was missing: that task's set-up failed on every try, an
infra error run again on every resume, so it could never be scored (parity audit, F4)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcpfleet.runner.environment.verifier import run_verifier

SCRIPT = """\
import numpy as np
import psycopg2  # noqa: F401

vectors = np.random.default_rng(7).normal(size=(4, 8))
print(round(float(np.linalg.norm(vectors / np.linalg.norm(vectors, axis=1, keepdims=True), axis=1).sum()), 6))
"""


def test_a_pack_script_can_import_numpy_and_psycopg2(tmp_path: Path) -> None:
    script = tmp_path / "prepare_environment.py"
    script.write_text(SCRIPT)
    result = asyncio.run(run_verifier(script, {}, [], timeout_s=60))
    assert result.exit_code == 0, result
    assert result.stdout.strip() == "4.0"
