"""Pre-forked Python stdio MCP servers: a run's zygote (zygote.py) and the stub a trial starts instead.

A service whose server is a Python program declares it (``ServerCommand.prefork``: its interpreter and entry
point). ``mcpfleet run`` then starts one zygote per such server with its run-scoped resource (``run_zygote``),
and the service routes its trials' commands through it (``route``): the trial starts a stub, the zygote
forks a copy of the already imported server. Everything else (the SDK's stdio transport, its stop logic,
spares) is unchanged. Without a zygote, or when it is gone, servers start directly.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from mcpfleet.runner._util.tmpdirs import MAX_SOCKET_PATH
from mcpfleet.runner.environment.server import SAFE_ENV, Prefork, ServerCommand

ZYGOTE = Path(__file__).with_name("zygote.py")
STUB = Path(__file__).with_name("zygote_stub.py")
SOCKET_NAME = "zygote.sock"
LISTEN_TIMEOUT_S = 15.0  # until it has bound its socket (interpreter start, no server import yet)
READY_TIMEOUT_S = 120.0  # until it has imported the server; queued stubs wait that long at most
STOP_TIMEOUT_S = 5.0


def console_script(exe: Path, env: dict[str, str] | None = None) -> Prefork | None:
    """The prefork of a pip/uv console script: its interpreter from its shebang (else the ``python`` beside
    it), its name for the zygote to find in that interpreter's entry-point metadata. None if it is no
    Python script (a binary, a shell wrapper)."""
    try:
        with open(exe, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    python = None
    if first.startswith(b"#!"):
        words = first[2:].decode(errors="replace").split()
        if words and Path(words[0]).name.startswith("python"):
            python = words[0]
    if python is None and (exe.parent / "python").exists():
        python = str(exe.parent / "python")
    return Prefork(python=python, script=exe.name, env=dict(env or {})) if python else None


def route(cmd: ServerCommand, socket: str | None) -> ServerCommand:
    """The command a trial starts: the stub asking ``socket``'s zygote for ``cmd`` (the stub starts ``cmd``
    itself if the zygote is unreachable), or ``cmd`` unchanged if it cannot be pre-forked or there is none."""
    if cmd.prefork is None or socket is None:
        return cmd
    args = ["-I", "-S", str(STUB), socket, cmd.prefork.identity, "--", *cmd.argv()]
    return replace(cmd, command=cmd.prefork.python, args=args, prefork=None)


@dataclass
class Zygote:
    """A running zygote, as its starter sees it."""

    name: str
    socket: str
    proc: subprocess.Popen[bytes]
    log: Path
    _ready: threading.Event = field(default_factory=threading.Event)
    _stopping: bool = False
    import_s: float | None = None  # its server's import, once ready
    failure: str | None = None  # why it is gone, if it went before the run's end

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> bool:
        """Whether the server is imported and forks are served (False: still importing, or gone)."""
        self._ready.wait(timeout)
        return self.import_s is not None and self.proc.poll() is None

    def watch(self) -> None:
        """Read its status lines; say once, on stderr, if it goes before the run's end (servers then start
        directly: its stubs fall back by themselves), or kill it if its import hangs."""
        assert self.proc.stdout is not None
        out = self.proc.stdout
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.import_s is None and self.proc.poll() is None:
            ready, _, _ = select.select([out], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self.failure = f"its server's import took longer than {READY_TIMEOUT_S:g} s"
                self.proc.kill()
                break
            line = out.readline().decode(errors="replace").split()
            if not line:
                break
            if line[0] == "ready":
                self.import_s = float(line[1])
        self._ready.set()
        self.proc.wait()
        if not self._stopping:
            self.failure = self.failure or _last_line(self.log) or f"exit status {self.proc.returncode}"
            print(
                f"mcpfleet: the {self.name} server zygote exited ({self.failure}); its servers start directly",
                file=sys.stderr,
                flush=True,
            )

    def stop(self) -> None:
        self._stopping = True
        if self.proc.poll() is None:
            self.proc.terminate()  # it kills the servers it forked, then exits
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _last_line(path: Path) -> str | None:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return None
    return lines[-1].removeprefix("zygote: ")[:300] if lines else None


def _socket_folder(preferred: Path) -> tuple[Path, bool]:
    """``preferred`` if a socket path in it fits sun_path, else a new private folder under /tmp (removed after)."""
    if len(str(preferred / SOCKET_NAME)) <= MAX_SOCKET_PATH:
        return preferred, False
    return Path(tempfile.mkdtemp(prefix="mcpfleet-zygote-", dir="/tmp")), True


def spawn(prefork: Prefork, folder: Path, name: str) -> Zygote:
    """Start a zygote and wait until its socket is bound (not for its import: requests queue meanwhile)."""
    socket = str(folder / SOCKET_NAME)
    what = ["--entry", prefork.entry] if prefork.entry else ["--script", str(prefork.script)]
    cmd = [prefork.python, "-I", str(ZYGOTE), "--socket", socket, "--parent-pid", str(os.getpid())]
    cmd += ["--identity", prefork.identity, *what, *(a for p in prefork.path for a in ("--path", p))]
    env = {k: os.environ[k] for k in SAFE_ENV if k in os.environ}
    env.update(prefork.env)
    log = folder / "zygote.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            bufsize=0,  # line by line, nothing read ahead past what select() saw
            stderr=err,
            env=env,
            cwd="/",
            start_new_session=True,  # a terminal's Ctrl-C is the run's to handle, not the zygote's
        )
    z = Zygote(name, socket, proc, log)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], LISTEN_TIMEOUT_S)
    line = proc.stdout.readline().decode(errors="replace").strip() if ready else ""
    if line != "listening":
        z.stop()
        raise RuntimeError(_last_line(log) or f"it did not start within {LISTEN_TIMEOUT_S:g} s")
    threading.Thread(target=z.watch, name=f"zygote-{name}", daemon=True).start()
    return z


@contextlib.contextmanager
def run_zygote(prefork: Prefork | None, folder: Path, name: str) -> Iterator[Zygote | None]:
    """A zygote for ``prefork``'s server, its socket in ``folder`` (the run's), stopped when the block ends
    (with the servers it forked). Yields None, after one line on stderr, if it cannot start: servers then
    start directly. Enter it from the thread that outlives the run (its parent-death signal follows it)."""
    if prefork is None:
        yield None
        return
    where, own = _socket_folder(folder)
    z = None
    try:
        try:
            z = spawn(prefork, where, name)
        except (OSError, RuntimeError) as exc:
            print(f"mcpfleet: no {name} server zygote ({exc}); its servers start directly", file=sys.stderr)
        yield z
    finally:
        if z is not None:
            z.stop()
            with contextlib.suppress(OSError):
                os.unlink(z.socket)
        if own:
            shutil.rmtree(where, ignore_errors=True)
