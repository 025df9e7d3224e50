"""Run a task's verify.py under MCPMark's contract: exit 0 = pass, output kept, hard timeout.

The verifier runs as the runner's user: in a trial pod that is non-root (the pod's securityContext). Locally,
as root, it stays root: switching to an unprivileged user would need the interpreter, the task folder and the
trial's state all readable by that user, which a root-owned ~/.pyenv or a 0700 temp folder does not allow."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

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


def _read_clipped(f: IO[bytes]) -> str:
    """What a verifier wrote to one of its output files, clipped (a runaway's gigabytes are never read)."""
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    data = f.read(OUTPUT_LIMIT * 4)
    text = _clip(data)
    if size > len(data):
        text += f"\n[... {size - len(data)} more bytes cut by mcpfleet]"
    return text


def _kill_group(pgid: int) -> None:
    """SIGKILL the verifier's process group: whatever it started and left behind goes with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


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
    """Run verify.py in its own session and process group, with a clean environment, its output to files.

    Files, not pipes: a child the verifier leaves running (even one that escaped into its own session) may hold
    its stdout open forever, and reading a pipe to its end would then never end. When the verifier exits, times
    out or the trial is cancelled, its whole process group is killed."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = await asyncio.create_subprocess_exec(
            *verifier_command(script, args),
            cwd=str(script.parent),
            env=verifier_env(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
        finally:
            _kill_group(proc.pid)
        if timed_out:
            await proc.wait()
        code = None if timed_out else proc.returncode
        stdout, stderr = _read_clipped(out), _read_clipped(err)
    stderr += f"\n[mcpfleet: verifier killed after {timeout_s:g} s]" if timed_out else ""
    return VerifierResult(code, code == 0, stdout, stderr, timed_out, time.perf_counter() - start)
