"""Helper processes die with the process that started them, even when it is killed with SIGKILL.

Two mechanisms, both needed: Linux's parent-death signal (immediate, but it fires when the *thread* that
forked exits, and is cleared by fork), and a watchdog thread polling the parent pid (a re-parented process
has lost its parent), which also covers a parent that died before the signal was armed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

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
