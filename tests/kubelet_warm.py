"""The test kubelet's warm containers (tests/kubelet.py): the kubelet's end of tests/warm_zygote.py, which forks
each ``mcpfleet`` container from a process that has imported mcpfleet and LiteLLM once. Kept apart from the kubelet so
that each module stays one concern."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

_IMPORT_ENV = dict(os.environ)  # the warm zygote's: as the tests' process started, before a test changed any variable


class WarmProcess:
    """A container forked by the zygote: what the kubelet uses of an asyncio Process (pid, returncode, wait)."""

    def __init__(self, pid: int, exited: asyncio.Future[int]):
        self.pid = pid
        self.returncode: int | None = None
        self._exited = exited
        exited.add_done_callback(self._settle)

    def _settle(self, fut: asyncio.Future[int]) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self.returncode = fut.result()

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)


Proc = asyncio.subprocess.Process | WarmProcess


class WarmZygote:
    """The kubelet's end of tests/warm_zygote.py, one per test process and shared by its kubelets (each test has an
    event loop of its own, so a thread reads the zygote's answers and settles each spawn's futures on its loop).

    It is started with the environment this module was imported with, before any test changed it; a container gets
    only its own. A spawn cancelled before its pid came back (its pod went) is killed when the pid arrives."""

    ROOM = 65536  # bytes of command line and environment a child may take over (tests/warm_zygote.py)
    _shared: WarmZygote | None = None
    _lock = threading.Lock()

    @classmethod
    def shared(cls) -> WarmZygote:
        with cls._lock:
            if cls._shared is None or cls._shared.proc.poll() is not None:
                cls._shared = cls()
            return cls._shared

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("warm_zygote.py")), str(theirs.fileno()), "." * 8192],
                pass_fds=[theirs.fileno()],
                env={**_IMPORT_ENV, "WARM_ZYGOTE_ROOM": "." * self.ROOM},
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self.sock = ours
        self.ready = threading.Event()  # set once its imports are done: until then containers start with exec
        self.pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[int], asyncio.Future[int]]] = {}
        self.abandoned: set[int] = set()  # spawns whose caller went before their pid came
        self.next_id = 0
        self.mutex = threading.Lock()
        threading.Thread(target=self._read, name="warm-zygote", daemon=True).start()

    @staticmethod
    def _settle(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[int], value: int | BaseException) -> None:
        def now() -> None:
            if not fut.done():
                if isinstance(value, BaseException):
                    fut.set_exception(value)
                    fut.exception()  # retrieved: a container still running when its test ended has no exit
                else:
                    fut.set_result(value)

        with contextlib.suppress(RuntimeError):  # that test's loop is closed: nobody waits any more
            loop.call_soon_threadsafe(now)

    def _read(self) -> None:
        with self.sock.makefile("rb") as lines:
            for line in lines:
                msg = json.loads(line)
                if "ready" in msg:
                    self.ready.set()
                    continue
                with self.mutex:
                    rid = msg["id"]
                    if "pid" in msg and rid in self.abandoned:
                        self.abandoned.discard(rid)
                        self.pending.pop(rid, None)
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(msg["pid"], signal.SIGKILL)
                        continue
                    entry = self.pending.get(rid) if "pid" in msg else self.pending.pop(rid, None)
                if entry is not None:
                    loop, started, exited = entry
                    if "pid" in msg:
                        self._settle(loop, started, msg["pid"])
                    else:
                        self._settle(loop, exited, msg["exit"])
        gone = RuntimeError("the kubelet's warm zygote exited (tests/warm_zygote.py)")
        with self.mutex:
            for loop, started, exited in self.pending.values():
                self._settle(loop, started, gone)
                self._settle(loop, exited, gone)
            self.pending.clear()

    async def spawn(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> WarmProcess:
        loop = asyncio.get_running_loop()
        started: asyncio.Future[int] = loop.create_future()
        exited: asyncio.Future[int] = loop.create_future()
        request = {"argv": argv, "env": env, "cwd": str(cwd), "log": str(log)}
        with self.mutex:
            rid, self.next_id = self.next_id, self.next_id + 1
            self.pending[rid] = (loop, started, exited)
            self.sock.sendall(json.dumps({"id": rid, **request}).encode() + b"\n")
        try:
            pid = await asyncio.shield(started)
        except asyncio.CancelledError:  # the pod went while its container was forked: no ghost may run on
            with self.mutex:
                if started.done() and not started.cancelled() and started.exception() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(started.result(), signal.SIGKILL)
                else:
                    self.abandoned.add(rid)
            raise
        return WarmProcess(pid, exited)
