"""Run a task's verify.py under MCPMark's contract: exit 0 = pass, output kept, hard timeout.

The verifier runs as the runner's user: in a trial pod that is non-root (the pod's securityContext). Locally,
as root, it stays root: switching to an unprivileged user would need the interpreter, the task folder and the
trial's state all readable by that user, which a root-owned ~/.pyenv or a 0700 temp folder does not allow.

Nothing an agent-driven process could have left anywhere is imported into it (issue 48). It runs in Python's
isolated mode (``-I``: no PYTHON* variable, no user site-packages, no script or working folder on sys.path)
without writing bytecode (``-B``: the pack stays as it is), through a bootstrap that puts back exactly what
MCPMark's ``python verify.py`` gives a script: its own folder first on sys.path (sibling modules import), its
path as argv[0]. Its HOME and TMPDIR are folders made for this one run, 0700, in the runner's own temp folder
(in a trial pod, the grading volume no sidecar mounts), removed with it. A pack's other Python programs (state
generators, MCPMark's prepare_environment.py) run the same way."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from mcpfleet.runner._util import tmpdirs

OUTPUT_LIMIT = 64 * 1024  # per stream; a runaway verifier must not bloat every record


@dataclass
class VerifierResult:
    exit_code: int | None
    passed: bool
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


# The line _clip and _read_clipped end a cut output with: no line of the program's own.
CLIP_MARK = re.compile(r"\[\.\.\. [0-9]+ more (characters|bytes) cut by mcpfleet\]")


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


def _read_tail(f: IO[bytes], limit: int = 8192) -> str:
    """The end of what a program wrote (where psql and Python put their errors), never all of it."""
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - limit))
    return f.read().decode("utf-8", errors="replace")


def _kill_group(pgid: int) -> None:
    """SIGKILL the verifier's process group: whatever it started and left behind goes with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


# The verifier's runner: a child subreaper (prctl PR_SET_CHILD_SUBREAPER, no privilege needed), so whatever the
# verifier leaves behind, even a daemon that called setsid() and so left the process group, is re-parented to it
# and not to init. When the verifier exits, or on SIGTERM (the runner's timeout or cancellation, or the runner's
# death through the parent-death signal), it SIGKILLs and reaps every descendant until none is left, then exits
# as the verifier did. argv: the runner's pid, then the verifier's own argv. Stdlib only, no site (-I -S).
_REAPER = r"""
import ctypes, os, signal, sys
class Stop(BaseException):
    pass
armed = True
def stop(*_):
    global armed
    if armed:
        armed = False
        raise Stop
signal.signal(signal.SIGTERM, stop)
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)
libc.prctl(1, signal.SIGTERM, 0, 0, 0)
me = os.getpid()
def children():
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out
code = -signal.SIGKILL
try:
    if os.getppid() != int(sys.argv[1]):
        raise Stop
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.execvp(sys.argv[2], sys.argv[2:])
        except OSError as exc:
            os.write(2, f"mcpfleet: cannot run {sys.argv[2]}: {exc}\n".encode())
        finally:
            os._exit(127)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    armed = False
except Stop:
    pass
while True:
    kids = children()
    for k in kids:
        try:
            os.kill(k, signal.SIGKILL)
        except OSError:
            pass
    try:
        if os.waitpid(-1, 0 if kids else os.WNOHANG)[0] == 0:
            continue
    except ChildProcessError:
        break
sys.stdout.flush()
if code < 0:
    if -code not in (signal.SIGKILL, signal.SIGSTOP):  # (their disposition cannot be set, nor needs to be)
        signal.signal(-code, signal.SIG_DFL)
    os.kill(me, -code)
os._exit(code & 0xFF)
"""
REAPER_GRACE_S = 5.0  # after SIGTERM, the reaper's time to kill and reap everything before it is SIGKILLed itself


def reaped_command(command: list[str]) -> list[str]:
    """``command`` under the reaper: it and every process it starts die when it exits or is stopped."""
    return [sys.executable, "-I", "-S", "-c", _REAPER, str(os.getpid()), *command]


# How ``python_command`` starts a pack's script under ``-I``: what ``python script.py`` would have given it (its
# folder first on sys.path, argv[0] its path, __name__ "__main__"), and UTF-8 output whatever the locale (what
# PYTHONIOENCODING did before: -I ignores it). Nothing else of the environment's reaches it.
_BOOT = r"""
import os, runpy, sys
del sys.argv[0]
sys.path.insert(0, os.path.dirname(os.path.realpath(sys.argv[0])))
for stream in (sys.stdout, sys.stderr):
    stream.reconfigure(encoding="utf-8")
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def python_command(script: Path | str, args: list[str] | None = None) -> list[str]:
    """The argv that runs a pack's Python ``script`` (a verifier, a state generator): the runner's Python in
    isolated mode, no bytecode written, through ``_BOOT``."""
    return [sys.executable, "-I", "-B", "-c", _BOOT, str(script), *(args or [])]


def verifier_env(extra: dict[str, str], private: Path | None = None) -> dict[str, str]:
    """A clean environment: PATH, UTC, the service's variables (``extra``), and nothing from the runner's: no
    key, no HOME or TMPDIR (``private``'s home/ and tmp/ folders instead, which ``extra`` cannot replace)."""
    env = {"PATH": os.environ.get("PATH") or os.defpath, "TZ": "UTC", "LANG": "C.UTF-8"}
    env.update(extra)
    return env if private is None else {**env, **private_home(private)}


def private_home(private: Path) -> dict[str, str]:
    """HOME and TMPDIR in a ``private_folders`` folder."""
    return {"HOME": str(private / "home"), "TMPDIR": str(private / "tmp")}


@contextlib.contextmanager
def private_folders(what: str = "verify") -> Iterator[Path]:
    """A folder of this run of a pack's program alone (its cwd unless it is given one), with home/ and tmp/, all
    0700, in the runner's temp folder (named for this process: a dead worker's is swept); removed afterwards with
    whatever the program left in it."""
    with tempfile.TemporaryDirectory(prefix=tmpdirs.owned_prefix(what), ignore_cleanup_errors=True) as root:
        base = Path(root)
        for name in ("home", "tmp"):
            (base / name).mkdir(mode=0o700)
        yield base


def verifier_command(script: Path, args: list[str] | None = None) -> list[str]:
    """The verifier's argv as MCPMark runs it, ``python verify.py [args]``: what its records name (a timeout's
    message). mcpfleet runs it as ``python_command`` does."""
    return [sys.executable, str(script), *(args or [])]


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Stop the reaper (it kills and reaps every descendant first); SIGKILL its group if it takes too long."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), REAPER_GRACE_S)
    except TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()


async def run_verifier(
    script: Path, env: dict[str, str], args: list[str], timeout_s: float, cwd: Path | None = None
) -> VerifierResult:
    """Run verify.py (or another script of the pack: MCPMark's prepare_environment.py, run in its task folder,
    ``cwd``) in its own session and process group, with a clean environment, its output to files.

    Files, not pipes: a child the verifier leaves running (even one that escaped into its own session) may hold
    its stdout open forever, and reading a pipe to its end would then never end. When the verifier exits, times
    out or the trial is cancelled, its whole process group is killed."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, private_folders() as scratch:
        proc = await asyncio.create_subprocess_exec(
            *reaped_command(python_command(script, args)),
            cwd=cwd or scratch,  # not the task folder: a verifier writing to its cwd must not change the pack
            env=verifier_env(env, scratch),
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
            await _stop(proc)
        finally:
            if proc.returncode is None:  # cancelled: the reaper clears up on its own once told to
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
            else:
                _kill_group(proc.pid)
        code = None if timed_out else proc.returncode
        stdout, stderr = _read_clipped(out), _read_clipped(err)
    stderr += f"\n[mcpfleet: verifier killed after {timeout_s:g} s]" if timed_out else ""
    return VerifierResult(code, code == 0, stdout, stderr, timed_out, time.perf_counter() - start)


def run_program(command: list[str], env: dict[str, str], cwd: str | Path, timeout_s: float) -> tuple[int | None, str]:
    """Run a pack's program to its end outside the trial's event loop (a state generator, psql or pg_restore on
    a state; a thread may call it), as a verifier runs: under the reaper (whatever it leaves running dies with
    it), ``env`` only (with a HOME and TMPDIR of this run's own), stdout and stderr to a file. Returns its exit
    status (None: killed after ``timeout_s``) and the end of its output (a runaway's gigabytes are never read into
    memory)."""
    with tempfile.TemporaryFile() as out, private_folders("program") as scratch:
        proc = subprocess.Popen(
            reaped_command(command),
            cwd=cwd,
            env={**env, **private_home(scratch)},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        code: int | None = None
        try:
            code = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if proc.returncode is None:  # timed out or interrupted: the reaper kills and reaps everything first
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(REAPER_GRACE_S)
                except subprocess.TimeoutExpired:
                    _kill_group(proc.pid)
                    proc.wait()
            else:
                _kill_group(proc.pid)
        return code, _read_tail(out)
