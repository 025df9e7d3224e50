"""Run a task's verify.py under MCPMark's contract: exit 0 = pass, output kept, hard timeout."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

OUTPUT_LIMIT = 64 * 1024  # per stream; a runaway verifier must not bloat every record


@dataclass
class VerifierResult:
    exit_code: int | None
    passed: bool
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


def _clip(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    if len(text) > OUTPUT_LIMIT:
        return text[:OUTPUT_LIMIT] + f"\n[... {len(text) - OUTPUT_LIMIT} more characters cut by mcpfleet]"
    return text


def verifier_env(extra: dict[str, str]) -> dict[str, str]:
    """A clean environment: the service's variables, UTC, and nothing secret from the runner's."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "TMPDIR", "PYTHONPATH") if k in os.environ}
    env.update({"TZ": "UTC", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"})
    env.update(extra)
    return env


def verifier_command(script: Path, args: list[str] | None = None) -> list[str]:
    """The verifier's argv: the runner's Python on verify.py, as MCPMark runs it."""
    return [sys.executable, str(script), *(args or [])]


async def run_verifier(script: Path, env: dict[str, str], args: list[str], timeout_s: float) -> VerifierResult:
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *verifier_command(script, args),
        cwd=str(script.parent),
        env=verifier_env(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    timed_out = False
    # communicate() keeps reading after a timeout, so what the verifier printed before it hung survives.
    comm = asyncio.ensure_future(proc.communicate())
    try:
        out, err = await asyncio.wait_for(asyncio.shield(comm), timeout_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        timed_out = isinstance(exc, TimeoutError)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not timed_out:
            comm.cancel()
            raise
        out, err = await comm
    code = None if timed_out else proc.returncode
    stderr = _clip(err) + (f"\n[mcpfleet: verifier killed after {timeout_s:g} s]" if timed_out else "")
    return VerifierResult(code, code == 0, _clip(out), stderr, timed_out, time.perf_counter() - start)
