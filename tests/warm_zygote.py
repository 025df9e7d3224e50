"""The test kubelet's warm start for ``mcpfleet`` containers: one process per kubelet imports mcpfleet's CLI, the
trial engine and LiteLLM once (~3.7 s of CPU), then forks a child per container that runs the real command line
(``mcpfleet.runner.cli.entry.main``) with the container's argv, environment, working folder and log.

Each pod still gets processes of its own, in a session of their own, killed by process group as before; only the
imports are shared. Started as ``python warm_zygote.py FD PADDING`` (FD: its end of a socket pair), with room
in its command line and environment that each child overwrites with its container's (``_retitle``), so that a
pod's processes, leftovers included, are found by their folders like any other (tests/proctree.py).

The protocol is JSON lines: ``{"ready": true}`` once the imports are done, then for each ``{"id", "argv", "env",
"cwd", "log"}`` in, ``{"id", "pid"}`` and later ``{"id", "exit"}`` (negative: killed by that signal) out. EOF on
the socket ends the zygote and whatever it still runs."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any

_PR_SET_PDEATHSIG = 1


def _preload() -> dict[str, str]:
    """Import what an ``mcpfleet trial`` or ``materialise`` imports; return the environment variables the imports
    set (mcpfleet's package sets LiteLLM's before importing it), which a child re-applies where its own
    environment lacks them, as its own imports would have."""
    before = dict(os.environ)
    import mcpfleet.runner.agent.metrics  # noqa: F401
    import mcpfleet.runner.cli.app  # noqa: F401
    import mcpfleet.runner.cli.entry  # noqa: F401
    import mcpfleet.runner.llm.client  # noqa: F401
    import mcpfleet.runner.plan.expand  # noqa: F401
    import mcpfleet.runner.results.store  # noqa: F401
    import mcpfleet.runner.tasks.materialise  # noqa: F401
    import mcpfleet.runner.trial.engine  # noqa: F401

    return {k: v for k, v in os.environ.items() if before.get(k) != v}


def _retitle(argv: list[str], env: dict[str, str]) -> None:
    """Make /proc/self/cmdline and /proc/self/environ show the container's, as after an exec: tests find a pod's
    processes (leftovers included) by a folder named there. Both are the areas the kernel set up at the zygote's
    exec, padded for this at its start (see WarmZygote.start); what does not fit is cut."""
    fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    arg_start, arg_end, env_start, env_end = (int(x) for x in fields[45:49])
    for start, end, items in (
        (arg_start, arg_end, argv),
        (env_start, env_end, [f"{k}={v}" for k, v in env.items()]),
    ):
        size = end - start
        data = b"".join(i.encode(errors="replace") + b"\0" for i in items)[: size - 1]
        ctypes.memmove(start, data.ljust(size, b"\0"), size)


def _child(req: dict[str, Any], preset: dict[str, str]) -> int:
    """In the forked child: become the container's process, run the command line, return its exit code."""
    os.setsid()
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    log = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    # Fresh standard streams as a new interpreter makes them for files: stdout block-buffered, stderr by line.
    streams = {
        "stdin": open(0, closefd=False),  # noqa: SIM115
        "stdout": open(1, "w", encoding="utf-8", closefd=False),  # noqa: SIM115
        "stderr": open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False),  # noqa: SIM115
    }
    for name, stream in streams.items():
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    for key, value in preset.items():
        os.environ.setdefault(key, value)
    argv = list(req["argv"])
    _retitle(argv, dict(os.environ))
    sys.argv = argv
    sys.path[0] = os.path.dirname(argv[0])  # what a console script's interpreter puts first
    from mcpfleet.runner.cli.entry import main

    try:
        main()
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def serve(fd: int) -> tuple[dict[str, Any], dict[str, str]] | None:
    """The zygote's loop; in a forked child it returns that child's request (the caller runs it)."""
    with contextlib.suppress(OSError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    preset = _preload()
    import threading

    if threading.active_count() != 1:  # a fork copies only the forking thread: the children would lack the rest
        raise SystemExit(f"warm_zygote: the imports started threads: {threading.enumerate()}")
    conn = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the kubelet stops it, not a Ctrl-C meant for pytest
    conn.sendall(b'{"ready": true}\n')  # (still blocking: the kubelet starts containers with exec until then)
    sel = selectors.DefaultSelector()
    conn.setblocking(False)
    sel.register(conn, selectors.EVENT_READ, "conn")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    running: dict[int, int] = {}  # pid -> request id
    buf = b""

    def send(msg: dict[str, Any]) -> None:
        conn.setblocking(True)
        try:
            conn.sendall(json.dumps(msg).encode() + b"\n")
        finally:
            conn.setblocking(False)

    while True:
        for key, _ in sel.select():
            if key.data == "wake":
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
            else:
                try:
                    data = conn.recv(65536)
                except BlockingIOError:
                    continue
                if not data:  # the kubelet is gone: so is what it started here
                    for pid in running:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(pid, signal.SIGKILL)
                    return None
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    req = json.loads(line)
                    pid = os.fork()
                    if pid == 0:
                        sel.close()
                        return req, preset
                    running[pid] = req["id"]
                    send({"id": req["id"], "pid": pid})
        while running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            rid = running.pop(pid, None)
            if rid is not None:
                send({"id": rid, "exit": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    os.environ.pop("WARM_ZYGOTE_ROOM", None)
    job = serve(int(sys.argv[1]))
    if job is not None:
        sys.exit(_child(*job))  # the interpreter's own exit: threads joined, atexit run, streams flushed
