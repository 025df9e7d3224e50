"""Warm worker processes in which a death costs one trial, not all of them.

One ``ProcessPoolExecutor`` with N workers breaks as a whole when any worker dies (an OOM kill, a SIGKILL): it
terminates the others and fails every trial in flight, so one bad trial at concurrency 8 threw away seven
innocent trials' LLM spend. Here each worker is a one-process executor of its own; a broken one is replaced on
the next submit and only the trial it held is lost (retried by the scheduler as an infrastructure error).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any


class WorkerSlots:
    """``n`` one-worker executors; ``submit`` runs on an idle one (the caller never has more than ``n`` in flight)."""

    def __init__(self, n: int, make_executor: Callable[[], ProcessPoolExecutor]):
        self._make = make_executor
        self._slots: list[ProcessPoolExecutor] = [make_executor() for _ in range(n)]
        self._busy: set[int] = set()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        i = next((i for i in range(len(self._slots)) if i not in self._busy), None)
        if i is None:
            raise RuntimeError(f"all {len(self._slots)} workers are busy: the caller submitted over its limit")
        try:
            fut = self._slots[i].submit(fn, *args)
        except BrokenProcessPool:  # its worker died with its last trial: a fresh process takes its place
            self._slots[i].shutdown(wait=False, cancel_futures=True)
            self._slots[i] = self._make()
            fut = self._slots[i].submit(fn, *args)
        self._busy.add(i)
        fut.add_done_callback(lambda _: self._busy.discard(i))  # before any caller's callback: the slot is free
        return fut

    def pids(self) -> list[int]:
        """The live worker processes (a slot not started yet has none)."""
        return [
            p.pid
            for ex in self._slots
            for p in list((ex._processes or {}).values())  # noqa: SLF001 - no public way to reach workers
            if p.pid is not None
        ]

    def stop(self) -> None:
        """SIGTERM every worker (Ctrl-C): each cancels its trial and closes its servers."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def shutdown(self) -> None:
        for ex in self._slots:
            ex.shutdown(wait=True, cancel_futures=True)
