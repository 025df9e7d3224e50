"""Plain progress lines for ``mcpfleet run`` off a terminal (CI, ``nohup``, a pipe): one line of plain text at a
steady pace, no control codes. The decisions (when a line is due, what it says) are pure functions; ``Ticker``
is the clock and the printing around them."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_EVERY_SECONDS = 30.0  # a line at least this often while trials run
STEP_FRACTION = 0.1  # and one each time another tenth of the planned trials is done


@dataclass(frozen=True)
class Counts:
    """Where a run is: trials planned, resumed (recorded before this invocation), and this invocation's."""

    planned: int
    resumed: int = 0
    passed: int = 0
    failed: int = 0
    not_scored: int = 0
    in_flight: int = 0

    @property
    def finished(self) -> int:  # by this invocation
        return self.passed + self.failed + self.not_scored

    @property
    def done(self) -> int:
        return self.resumed + self.finished


def step_of(done: int, planned: int, step: float = STEP_FRACTION) -> int:
    """Which step of ``step`` (a fraction of the planned trials) ``done`` has reached: 0 .. 1/step."""
    if planned <= 0:
        return 0
    return math.floor(done / planned / step + 1e-9)


def line_due(
    now: float, last_at: float, every: float, done: int, last_done: int, planned: int, step: float = STEP_FRACTION
) -> bool:
    """Whether a line is due: ``every`` seconds since the last one, or ``done`` reached a step the last line's count
    had not (each tenth of the planned trials, the last one included)."""
    return now - last_at >= every or (done > last_done and step_of(done, planned, step) > step_of(last_done, planned))


def clock(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``: a duration as a progress line shows it."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta(counts: Counts, elapsed: float) -> str:
    """The time left at this invocation's rate so far (resumed trials took no time here); ``-`` before any trial
    finished, ``0s`` when every planned trial is done."""
    left = counts.planned - counts.done
    if left <= 0:
        return "0s"
    if counts.finished == 0:
        return "-"
    return clock(elapsed / counts.finished * left)


def progress_line(counts: Counts, elapsed: float, spend: str = "") -> str:
    """One plain line: done/planned, the outcomes, what is in flight, elapsed time and ETA (ASCII, one line)."""
    pct = 100 * counts.done // counts.planned if counts.planned else 100
    resumed = f" ({counts.resumed} resumed)" if counts.resumed else ""
    tail = f", {spend}" if spend else ""
    return (
        f"progress: {counts.done}/{counts.planned} trials done ({pct}%){resumed}: {counts.passed} passed, "
        f"{counts.failed} failed, {counts.not_scored} not scored, {counts.in_flight} in flight; "
        f"elapsed {clock(elapsed)}, ETA {eta(counts, elapsed)}{tail}"
    )


def nothing_left_line(planned: int, run: str, location: str) -> str:
    """What a re-run with every planned trial recorded says before its table."""
    return (
        f"nothing to run: all {planned} planned trials of run '{run}' are recorded in {location}; the table is "
        "theirs (pass --new-run to run them again under a fresh name)"
    )


class Ticker:
    """Prints a line through ``write`` when one is due: on each change (``changed()``) and from its own thread
    at least every ``every`` seconds. ``snapshot`` gives the counts and the spend text at the moment."""

    def __init__(
        self,
        snapshot: Callable[[], tuple[Counts, str]],
        write: Callable[[str], None],
        every: float = DEFAULT_EVERY_SECONDS,
        now: Callable[[], float] = time.monotonic,
    ):
        self.snapshot, self.write, self.every, self.now = snapshot, write, every, now
        self.started = now()
        self.last_at = self.started
        self.last_done = -1  # no line yet
        self.last_line: Counts | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _emit(self, counts: Counts, spend: str, at: float) -> None:
        self.write(progress_line(counts, at - self.started, spend))
        self.last_at, self.last_done, self.last_line = at, counts.done, counts

    def changed(self) -> None:
        """A trial finished (or the spend changed): print when a step was reached or the pace says so."""
        with self._lock:
            counts, spend = self.snapshot()
            at = self.now()
            if line_due(at, self.last_at, self.every, counts.done, self.last_done, counts.planned):
                self._emit(counts, spend, at)

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, max(0.05, self.last_at + self.every - self.now()))):
            with self._lock:
                at = self.now()
                if at - self.last_at >= self.every:
                    self._emit(*self.snapshot(), at)

    def start(self) -> None:
        with self._lock:
            self.started = self.now()  # elapsed from the first launch, not from the run's set-up
            self._emit(*self.snapshot(), self.now())  # the first line at once: what this invocation will run
        self._thread = threading.Thread(target=self._tick, name="mcpfleet-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread; a last line when something changed since the last one (an interrupted run's state)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            counts, spend = self.snapshot()
            if counts != self.last_line:
                self._emit(counts, spend, self.now())
