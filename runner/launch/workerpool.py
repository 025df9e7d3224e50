"""Warm worker processes in which a death costs one trial, not all of them.

One ``ProcessPoolExecutor`` with N workers breaks as a whole when any worker dies (an OOM kill, a SIGKILL): it
terminates the others and fails every trial in flight, so one bad trial at concurrency 8 threw away seven
innocent trials' LLM spend. Here each worker is a one-process executor of its own; a broken one is replaced on
the next submit and only the trial it held is lost (retried by the scheduler as an infrastructure error).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

SPAWN_ATTEMPTS = 5  # a worker that cannot be started (its forkserver died: the next try starts a new one)
SPAWN_RETRY_S = 0.5
SHUTDOWN_LIMIT_S = 20.0  # for the workers to end their trials at the run's end (past it they are SIGKILLed)


class WorkerSlots:
    """``n`` one-worker executors; ``submit`` runs on an idle one (the caller never has more than ``n`` in flight).

    A slot whose call failed with one of ``retire_on`` gets a fresh process for its next call: a worker stopped
    from outside (SIGTERM) cancels its trial and would refuse every later one."""

    def __init__(
        self,
        n: int,
        make_executor: Callable[[], ProcessPoolExecutor],
        retire_on: tuple[type[BaseException], ...] = (),
    ):
        self._make = make_executor
        self._slots: list[ProcessPoolExecutor] = [make_executor() for _ in range(n)]
        self._busy: set[int] = set()
        self._retire_on = retire_on
        self._retired: list[ProcessPoolExecutor] = []  # replaced: their processes are still waited for at shutdown
        self._held: dict[Future[Any], int] = {}  # a call in flight -> its slot

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        i = next((i for i in range(len(self._slots)) if i not in self._busy), None)
        if i is None:
            raise RuntimeError(f"all {len(self._slots)} workers are busy: the caller submitted over its limit")
        for attempt in range(SPAWN_ATTEMPTS):
            try:
                fut = self._slots[i].submit(fn, *args)
                break
            except (BrokenProcessPool, EOFError, OSError):
                # Its worker died with its last trial, or no process could be started for it (the forkserver was
                # killed; multiprocessing starts a new one once it sees the old one gone): a fresh executor.
                self._replace(i)
                if attempt + 1 == SPAWN_ATTEMPTS:
                    raise
                if attempt:
                    time.sleep(SPAWN_RETRY_S)
        self._busy.add(i)
        self._held[fut] = i
        fut.add_done_callback(lambda f: self._done(i, f))  # before any caller's callback: the slot is free
        return fut

    def _replace(self, i: int) -> None:
        old, self._slots[i] = self._slots[i], self._make()
        old.shutdown(wait=False, cancel_futures=True)
        self._retired.append(old)

    def _done(self, i: int, fut: Future[Any]) -> None:
        self._held.pop(fut, None)
        if not fut.cancelled() and isinstance(fut.exception(), self._retire_on):
            self._replace(i)  # (still busy: no submit picks the slot while it is replaced)
        self._busy.discard(i)

    def pids(self) -> list[int]:
        """The live worker processes (a slot not started yet has none)."""
        return _worker_pids(self._slots)

    def kill(self, fut: Future[Any]) -> list[int]:
        """SIGKILL the worker running ``fut`` and every process under it (a wedged worker: SIGSTOPped, stuck on a
        hung mount, deadlocked), as an OOM kill would end it; ``fut`` then fails with BrokenProcessPool and the
        slot gets a fresh worker. Returns the pids signalled (none: the call is over or its worker is gone)."""
        i = self._held.get(fut)
        if i is None:
            return []
        return kill_tree(_worker_pids([self._slots[i]]))

    def stop(self) -> None:
        """SIGTERM every worker (Ctrl-C): each cancels its trial and closes its servers."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def shutdown(self, limit_s: float = SHUTDOWN_LIMIT_S) -> None:
        """Wait for every worker to exit, replaced ones included (a Ctrl-C retires the slots of the workers it
        stopped: those still close their servers before the run's own resources go). More Ctrl-C/SIGTERM during
        the wait are held (lifeline.interrupts_held): a second Ctrl-C skipped it, and the run's resources went
        while trials still used them. Workers still there after ``limit_s`` (wedged) are SIGKILLed: the run
        still ends, its own resources removed."""
        import threading

        from mcpfleet.runner._util.lifeline import interrupts_held

        executors = [*self._slots, *self._retired]

        def kill() -> None:
            for pid in _worker_pids(executors):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        timer = threading.Timer(limit_s, kill)
        timer.daemon = True
        with interrupts_held():
            timer.start()
            try:
                for ex in executors:
                    ex.shutdown(wait=True, cancel_futures=True)
            finally:
                timer.cancel()


def _worker_pids(executors: list[ProcessPoolExecutor]) -> list[int]:
    """The pids of the executors' worker processes (copied first: the executors' threads edit the dicts)."""
    return [
        p.pid
        for ex in executors
        for p in list((ex._processes or {}).values())  # noqa: SLF001 - no public way to reach workers
        if p.pid is not None
    ]


def _children() -> dict[int, list[int]]:
    """Parent pid -> its live children's pids, from /proc."""
    out: dict[int, list[int]] = {}
    for d in os.scandir("/proc"):
        if not d.name.isdigit():
            continue
        try:
            with open(f"/proc/{d.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            out.setdefault(int(fields[1]), []).append(int(d.name))
    return out


def kill_tree(roots: list[int]) -> list[int]:
    """SIGKILL ``roots`` and all their descendants. Each is SIGSTOPped first, until no new one appears, so none
    can fork a child the kill would miss, and children are found before their parent's death re-parents them
    (the MCP servers, a browser and its sites would otherwise outlive a worker that is stuck itself)."""
    found: list[int] = []
    todo = list(roots)
    for _ in range(10):  # (a fork between a listing and its SIGSTOP is caught by the next listing)
        for pid in todo:
            try:
                os.kill(pid, signal.SIGSTOP)
                found.append(pid)
            except ProcessLookupError:
                pass
        tree = _children()
        seen = set(found)
        todo = [c for p in found for c in tree.get(p, []) if c not in seen]
        if not todo:
            break
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return found
