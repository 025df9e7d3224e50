"""A zygote for a Python stdio MCP server: import the server once, fork a pristine copy of it per trial.

Importing postgres-mcp costs ~2.3 s of CPU (openai, mcp, pydantic models), paid by every start: a run at
concurrency 8 spent most of a 2-core machine on it. This process imports the server's module once (gc off
during the import, then ``gc.freeze()`` so forked children do not touch those pages), listens on a Unix socket,
and per request forks a child that becomes the server: the requesting stub's stdin/stdout/stderr (passed with
SCM_RIGHTS), its argv, environment, working directory and umask, then the entry point, as a console script
runs it. A child starts from the post-import image, never from a previous trial's.

Runs under the *server's* interpreter (its own venv and ``mcp`` version): standard library only, never
imports mcpfleet. Started as ``python -I zygote.py --socket PATH --parent-pid PID (--script NAME | --entry
M:F)``. Lines on stdout: ``listening`` once bound (requests then queue), ``ready <seconds>`` once imported;
errors on stderr, one line, never an environment. It dies with its parent (parent-death signal, and a
check of the parent pid between requests); its children die with it (their own parent-death signal).

Wire protocol (one connection per server): the stub sends a 4-byte length and a JSON request with its fds
0, 1, 2 attached; the zygote answers ``pid N`` (or ``error WHY``), later ``exit CODE`` (negative: killed by
that signal). The stub may send ``signal N`` lines, forwarded to the child's process group. The stub
closing its end (its death) kills the child's group; so does the child's own watch of the stub's pidfd.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import gc
import importlib
import importlib.metadata
import json
import os
import select
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

PROTOCOL = 1
MAX_REQUEST = 1 << 20
REQUEST_TIMEOUT_S = 5.0
POLL_S = 0.5  # how often the parent pid is checked
_PR_SET_PDEATHSIG = 1
_HEADER = struct.Struct("!I")
STOPS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}  # what stops the zygote


def parent_death_signal(sig: int) -> None:
    """The kernel sends ``sig`` to this process when its parent dies (runner/_util/lifeline.py's, restated)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig))
    except (OSError, AttributeError):
        pass


def say(line: str) -> None:
    print(line, flush=True)


def fail(why: str) -> None:
    print(f"zygote: {why}", file=sys.stderr, flush=True)
    raise SystemExit(1)


# --- the server's entry point -------------------------------------------------------------------------------


def resolve(script: str | None, entry: str | None) -> tuple[str, str]:
    """(module, function) of a console script (from the interpreter's entry-point metadata) or of ``M:F``."""
    if entry:
        module, _, attr = entry.partition(":")
        if not module or not attr:
            fail(f"entry point must be module:function, got {entry!r}")
        return module, attr
    found = importlib.metadata.entry_points(group="console_scripts", name=script or "")
    if not found:
        fail(f"no console script {script!r} in {sys.prefix}")
    ep = next(iter(found))
    module, _, attr = ep.value.partition(":")
    return module.strip(), attr.split("[")[0].strip()


def load(module: str, attr: str) -> Callable[[], Any]:
    """Import the server (the expensive part, done once) with gc off, then freeze what it made."""
    gc.disable()
    try:
        fn = importlib.import_module(module)
        for part in attr.split("."):
            fn = getattr(fn, part)
    finally:
        gc.collect()
        gc.freeze()
    return cast(Callable[[], Any], fn)


def threads() -> int:
    """Threads of this process, native ones included: forking with a second thread is unsafe."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def exit_code(value: Any) -> int:
    """What ``sys.exit(value)`` makes the process's status."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def run_entry(fn: Callable[[], Any]) -> int:
    """Run the entry point as a console script's ``sys.exit(main())`` and an interpreter's exit would."""
    try:
        code = exit_code(fn())
    except SystemExit as exc:
        code = exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - reported like an uncaught exception
        traceback.print_exc()
        code = 1
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()  # join non-daemon threads, as the interpreter does before atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe: nothing left to say
            pass
    return code


# --- a forked child ----------------------------------------------------------------------------------------


@dataclass
class Request:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    umask: int
    server: str

    @classmethod
    def parse(cls, body: bytes) -> Request:
        doc = json.loads(body)
        if doc.get("v") != PROTOCOL:
            raise ValueError(f"protocol {doc.get('v')!r}, expected {PROTOCOL}")
        argv, env = doc["argv"], doc["env"]
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise ValueError("argv must be a non-empty list of strings")
        if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            raise ValueError("env must map strings to strings")
        return cls(argv, env, str(doc["cwd"]), int(doc["umask"]), str(doc["server"]))


def watch_stub(pidfd: int) -> None:
    """Kill this server (its whole process group) as soon as the stub that asked for it is gone."""

    def wait() -> None:
        select.select([pidfd], [], [])
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=wait, name="watch-stub", daemon=True).start()


def become_server(req: Request, fds: list[int], stub_pidfd: int, zygote_fds: list[int], zygote: int) -> None:
    """In the forked child: take the stub's stdio and the request's argv/env/cwd, detach from the zygote's
    bookkeeping, then run the entry point; never returns."""
    code = 1
    try:
        parent_death_signal(signal.SIGKILL)
        if os.getppid() != zygote:  # the zygote died before the signal was armed
            os._exit(1)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in zygote_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        os.setsid()  # a group of its own, as the SDK's start_new_session gives a directly started server
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)  # what arrived since the fork is the server's now
        os.chdir(req.cwd)
        os.umask(req.umask)
        os.environ.clear()
        os.environ.update(req.env)
        time.tzset()
        sys.argv = list(req.argv)
        watch_stub(stub_pidfd)
        gc.enable()
        code = run_entry(ENTRY)
    except BaseException:  # noqa: BLE001 - the child must never return into the zygote's loop
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        if code < 0:  # killed by a signal (an uncaught KeyboardInterrupt): die of it, as Python does
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code)


def _entry_unset() -> Any:
    raise RuntimeError("the zygote has not imported its server")


ENTRY: Callable[[], Any] = _entry_unset


# --- the zygote's loop --------------------------------------------------------------------------------------


@dataclass
class Child:
    pid: int
    pidfd: int
    conn: socket.socket | None
    inbox: bytearray = field(default_factory=bytearray)


def peer(conn: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the connected stub, from the kernel (SO_PEERCRED)."""
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


def read_request(conn: socket.socket) -> tuple[bytes, list[int]]:
    conn.settimeout(REQUEST_TIMEOUT_S)
    data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
    buf = bytearray(data)
    if len(buf) < _HEADER.size:
        for fd in fds:
            os.close(fd)
        raise ValueError("short request")
    (size,) = _HEADER.unpack_from(buf)
    if size > MAX_REQUEST:
        for fd in fds:
            os.close(fd)
        raise ValueError("request too large")
    while len(buf) < _HEADER.size + size:
        more = conn.recv(_HEADER.size + size - len(buf))
        if not more:
            break
        buf += more
    return bytes(buf[_HEADER.size : _HEADER.size + size]), fds


class Zygote:
    def __init__(self, listener: socket.socket, identity: str):
        self.listener, self.identity = listener, identity
        self.sel = selectors.DefaultSelector()
        self.children: dict[int, Child] = {}  # by pidfd
        self.by_conn: dict[int, Child] = {}  # by connection fd
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.stopping = False

    def fds(self) -> list[int]:
        """Everything of the zygote's a child must not keep."""
        own = [self.listener.fileno(), self.sel.fileno(), self.wake_r, self.wake_w]
        for child in self.children.values():
            own.append(child.pidfd)
            if child.conn is not None:
                own.append(child.conn.fileno())
        return own

    def serve(self, parent: int) -> None:
        signal.set_wakeup_fd(self.wake_w)
        for sig in STOPS:
            signal.signal(sig, lambda *_: None)  # wakes the loop through the wakeup fd
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        while not self.stopping:
            for key, _ in self.sel.select(POLL_S):
                try:
                    self.handle(key)
                except Exception as exc:  # noqa: BLE001 - one request's trouble must not take the others' servers
                    print(f"zygote: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            if os.getppid() != parent:
                self.stopping = True
        for child in list(self.children.values()):
            self.kill(child)
            os.waitpid(child.pid, 0)

    def handle(self, key: selectors.SelectorKey) -> None:
        if key.data == "accept":
            self.accept()
        elif key.data == "wake":
            os.read(self.wake_r, 512)
            self.stopping = True
        elif key.data == "child":
            self.reap(self.children[key.fd])
        else:
            self.message(self.by_conn[key.fd])

    def accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        fds: list[int] = []
        try:
            stub, uid = peer(conn)
            if uid != os.geteuid():
                raise PermissionError("the stub runs as another user")
            body, fds = read_request(conn)
            if len(fds) != 3:
                raise ValueError(f"expected 3 descriptors, got {len(fds)}")
            req = Request.parse(body)
            if req.server != self.identity:
                raise ValueError(f"this zygote serves {self.identity}, not {req.server}")
            stub_pidfd = os.pidfd_open(stub)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self.refuse(conn, fds, exc)
            return
        self.spawn(conn, req, fds, stub_pidfd)

    def refuse(self, conn: socket.socket, fds: list[int], exc: BaseException) -> None:
        for fd in fds:
            os.close(fd)
        why = f"{type(exc).__name__}: {exc}" if not isinstance(exc, json.JSONDecodeError) else "malformed request"
        try:
            conn.sendall(f"error {why}\n".encode())
        except OSError:
            pass
        conn.close()

    def spawn(self, conn: socket.socket, req: Request, fds: list[int], stub_pidfd: int) -> None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        gc.freeze()  # the zygote's own objects since the last fork too (gc stays off here; children enable it)
        zygote = os.getpid()
        # Until the child has its own handlers, a signal sent to it (a stop forwarded at once) would run the
        # zygote's and wake the zygote's loop through the shared wakeup pipe: held until then.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
            os.close(stub_pidfd)
            self.refuse(conn, fds, exc)
            return
        if pid == 0:
            become_server(req, fds, stub_pidfd, [*self.fds(), conn.fileno()], zygote)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
        os.close(stub_pidfd)
        for fd in fds:
            os.close(fd)
        child = Child(pid, os.pidfd_open(pid), conn)
        self.children[child.pidfd] = child
        self.by_conn[conn.fileno()] = child
        self.sel.register(child.pidfd, selectors.EVENT_READ, "child")
        try:
            conn.sendall(f"pid {pid}\n".encode())
        except OSError:
            self.hang_up(child)
            return
        conn.setblocking(False)
        self.sel.register(conn, selectors.EVENT_READ, "conn")

    def message(self, child: Child) -> None:
        """A line from the stub (``signal N``), or its end of the connection closing: it is gone."""
        assert child.conn is not None
        try:
            data = child.conn.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.hang_up(child)
            return
        child.inbox += data
        while b"\n" in child.inbox:
            line, _, rest = bytes(child.inbox).partition(b"\n")
            child.inbox = bytearray(rest)
            verb, _, arg = line.decode(errors="replace").partition(" ")
            if verb == "signal" and arg.isdigit() and 0 < int(arg) < signal.NSIG:
                self.signal(child, int(arg))

    def signal(self, child: Child, sig: int) -> None:
        """Its process group, as the SDK signals a directly started server's (the child is not reaped yet, so
        its pid is its own); the child alone if it has not made its group yet (each process gets it once)."""
        try:
            if os.getpgid(child.pid) == child.pid:
                os.killpg(child.pid, sig)
            else:
                signal.pidfd_send_signal(child.pidfd, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self, child: Child) -> None:
        self.signal(child, signal.SIGKILL)

    def hang_up(self, child: Child) -> None:
        """The stub is gone: so is its server."""
        self.kill(child)
        self.close_conn(child)

    def close_conn(self, child: Child) -> None:
        if child.conn is None:
            return
        fd = child.conn.fileno()
        self.by_conn.pop(fd, None)
        try:
            self.sel.unregister(child.conn)
        except (KeyError, ValueError):
            pass
        child.conn.close()
        child.conn = None

    def reap(self, child: Child) -> None:
        _, status = os.waitpid(child.pid, 0)
        self.sel.unregister(child.pidfd)
        del self.children[child.pidfd]
        os.close(child.pidfd)
        if child.conn is not None:
            try:
                child.conn.setblocking(True)
                child.conn.settimeout(1.0)
                child.conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            self.close_conn(child)


def listen(path: str) -> socket.socket:
    """The socket, owner-only (the folder is private too; the uid is checked per connection anyway)."""
    if os.path.exists(path):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(socket.SOMAXCONN)
    return sock


def main(argv: list[str] | None = None) -> None:
    global ENTRY
    p = argparse.ArgumentParser(description="fork a Python stdio MCP server per request")
    p.add_argument("--socket", required=True)
    p.add_argument("--parent-pid", type=int, required=True)
    p.add_argument("--identity", required=True)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--script", help="a console script of this interpreter's environment")
    what.add_argument("--entry", help="module:function")
    p.add_argument("--path", action="append", default=[], help="prepended to sys.path (a server not installed)")
    args = p.parse_args(argv)
    parent_death_signal(signal.SIGTERM)
    if os.getppid() != args.parent_pid:
        fail("its parent is gone")
    sys.path[:0] = args.path
    listener = listen(args.socket)
    try:
        say("listening")  # stubs may connect from now on: they wait in the backlog until the import is done
        t = time.perf_counter()
        try:
            module, attr = resolve(args.script, args.entry)
            ENTRY = load(module, attr)
        except SystemExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - one line; the server's own traceback is not ours to print
            fail(f"importing the server failed: {type(exc).__name__}: {exc}")
        if (n := threads()) > 1:
            fail(f"importing {module} started {n - 1} thread(s): forking it would be unsafe")
        say(f"ready {time.perf_counter() - t:.3f}")
        Zygote(listener, args.identity).serve(args.parent_pid)
    finally:
        listener.close()  # queued stubs are refused and start their server directly
        try:
            os.unlink(args.socket)
        except OSError:
            pass


if __name__ == "__main__":
    main()
