"""The pace store of a local run: a private redis-server (Debian's ``redis-server``) that dies with the run.

Started by ``mcpfleet run`` only when some model sets ``rateLimit`` or a budget applies, unless
``MCPFLEET_PACE_STORE_URL`` names a shared one. It listens on a Unix socket in a private folder only (no TCP
port), keeps nothing on disk (``--save '' --appendonly no``), and dies with its parent, SIGKILL included (the
kernel's parent-death signal, armed in the child; a parent already gone makes it exit at once).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from mcpfleet.runner._util import tmpdirs

START_TIMEOUT_S = 10.0
_PR_SET_PDEATHSIG = 1


class PaceStoreError(RuntimeError):
    """The local pace store could not be started; the message says why."""


def _die_with_parent(parent: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)


def redis_binary() -> str | None:
    return shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if os.access(p, os.X_OK)), None
    )


def _answers(sock: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            s.connect(str(sock))
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def local_store() -> Iterator[str]:
    """Start a private redis-server; yields its URL (unix://...). Stopped and its folder removed on exit."""
    binary = redis_binary()
    if binary is None:
        raise PaceStoreError(
            "a model sets rateLimit or a budget applies, and the pace store needs redis-server: install it "
            "(apt-get install redis-server, or bash scripts/setup.sh), or point MCPFLEET_PACE_STORE_URL at a Redis"
        )
    folder = Path(tempfile.mkdtemp(prefix=tmpdirs.owned_prefix("pace")))  # swept by the next run if this one is killed
    os.chmod(folder, 0o700)
    sock = folder / "redis.sock"
    cmd = [
        binary,
        "--port",
        "0",
        "--unixsocket",
        str(sock),
        "--unixsocketperm",
        "700",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(folder),
        "--logfile",
        str(folder / "redis.log"),
        "--daemonize",
        "no",
    ]
    parent = os.getpid()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=folder,
        start_new_session=True,  # a terminal's Ctrl-C is the run's to handle; the run stops it
        preexec_fn=lambda: _die_with_parent(parent),  # noqa: PLW1509 - prctl in the child
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(sock):
            if proc.poll() is not None:
                tail = _tail(folder / "redis.log")
                raise PaceStoreError(f"redis-server (the pace store) exited with {proc.returncode}: {tail}")
            if time.monotonic() > deadline:
                raise PaceStoreError(f"redis-server (the pace store) did not answer in {START_TIMEOUT_S:g} s")
            time.sleep(0.01)
        yield f"unix://{sock}"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _tail(log: Path) -> str:
    try:
        return log.read_text(errors="replace")[-500:].strip() or "(no log)"
    except OSError:
        return "(no log)"
