"""Helper processes die with the process that started them, even when it is killed with SIGKILL.

Two mechanisms, both needed: Linux's parent-death signal (immediate, but it fires when the *thread* that
forked exits, and is cleared by fork), and a watchdog thread polling the parent pid (a re-parented process
has lost its parent), which also covers a parent that died before the signal was armed.

And the other way round: ``interrupts_held`` keeps a repeated Ctrl-C from cutting a process's own clean-up short.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

_PR_SET_PDEATHSIG = 1
POLL_S = 0.5


def parent_death_signal(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux; a no-op elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig))
    except (OSError, AttributeError):
        pass


def exit_with_parent(parent: int | None = None, sig: int = signal.SIGTERM, poll_s: float = POLL_S) -> None:
    """Arm the parent-death signal and start a daemon watchdog: once this process is re-parented, it sends
    itself ``sig`` (its normal, graceful stop), then SIGKILL if that did not end it within 5 s."""
    parent = os.getppid() if parent is None else parent
    parent_death_signal(sig)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), sig)
        time.sleep(5)
        os.kill(os.getpid(), signal.SIGKILL)

    if os.getppid() != parent:
        os.kill(os.getpid(), sig)
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


# --- clean-up that a repeated Ctrl-C must not cut short ----------------------------------------------------------

HOLD_LIMIT_S = 30.0  # how long a held clean-up may keep Ctrl-C from raising (one that hangs must not trap the user)
_HELD = (signal.SIGINT, signal.SIGTERM)
_holding = False


@contextlib.contextmanager
def interrupts_held(limit_s: float = HOLD_LIMIT_S) -> Iterator[None]:
    """Run a clean-up with SIGINT and SIGTERM noted instead of raised (main thread; elsewhere, and inside another
    hold, a no-op). An impatient user presses Ctrl-C several times: the second and third landed inside the wait
    for workers and inside the removal of the run's PostgreSQL folder in RAM, which both stayed undone.

    At the end a noted signal is delivered as usual (KeyboardInterrupt) unless an exception is already on its way
    out or being handled (the clean-up runs because of the first Ctrl-C): repeated presses are one. ``limit_s``
    after the start a signal is delivered at once, as before: a clean-up that hangs cannot make Ctrl-C useless."""
    if _holding or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {int(sig): signal.getsignal(sig) for sig in _HELD}
    noted: list[int] = []
    deadline = time.monotonic() + limit_s

    def note(signum: int, frame: FrameType | None) -> None:
        if time.monotonic() > deadline:
            _deliver(previous[signum], signum, frame)
        noted.append(signum)

    _hold(note, previous)
    try:
        yield
    finally:
        _release(previous)
        if noted and sys.exc_info()[1] is None:
            _deliver(previous[noted[0]], noted[0], None)


def _hold(note: Callable[[int, FrameType | None], None], previous: dict[int, Any]) -> None:
    global _holding
    _holding = True
    for sig in _HELD:
        if previous[sig] is not None:  # (None: a handler not set from Python, which could not be put back)
            signal.signal(sig, note)


def _release(previous: dict[int, Any]) -> None:
    global _holding
    for sig, handler in previous.items():
        if handler is not None:
            signal.signal(sig, handler)
    _holding = False


def _deliver(handler: Any, signum: int, frame: FrameType | None) -> None:
    """What ``signum`` would have done under ``handler`` (KeyboardInterrupt, for Python's and the CLI's)."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)
