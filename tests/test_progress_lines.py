"""Plain progress lines (``mcpfleet run`` off a terminal): when a line is due, what it says, and the ticker that
prints them at a steady pace. The real command's lines are tested in test_cli.py."""

from __future__ import annotations

import threading

from mcpfleet.runner.launch.progress_lines import Counts, Ticker, clock, eta, line_due, progress_line, step_of


def test_a_line_is_due_at_each_tenth_of_the_trials_and_after_the_interval() -> None:
    # 42 trials: tenths at 4.2, 8.4, ...: the 5th and 9th trials reach a new step, the 6th does not.
    assert [step_of(d, 42) for d in (0, 4, 5, 8, 9, 42)] == [0, 0, 1, 1, 2, 10]
    assert line_due(10.0, 5.0, 30.0, done=5, last_done=4, planned=42)
    assert not line_due(10.0, 5.0, 30.0, done=6, last_done=5, planned=42)
    assert line_due(35.0, 5.0, 30.0, done=6, last_done=6, planned=42)  # nothing finished, yet 30 s passed
    assert line_due(10.0, 9.0, 30.0, done=42, last_done=41, planned=42)  # the last trial: always a line
    assert [step_of(d, 3) for d in (0, 1, 2, 3)] == [0, 3, 6, 10]  # few trials: every one is a step


def test_a_line_counts_outcomes_in_flight_elapsed_and_eta() -> None:
    counts = Counts(planned=42, resumed=2, passed=6, failed=1, not_scored=1, in_flight=4)
    line = progress_line(counts, 125.0, "$0.40 spent of $5")
    assert line == (
        "progress: 10/42 trials done (23%) (2 resumed): 6 passed, 1 failed, 1 not scored, 4 in flight; "
        "elapsed 2m05s, ETA 8m20s, $0.40 spent of $5"
    )  # 8 finished here in 125 s: 32 left take 500 s (the resumed ones took no time here)
    assert line.isascii() and "\n" not in line and "\r" not in line
    assert eta(Counts(planned=3), 9.0) == "-" and eta(Counts(planned=3, resumed=3), 9.0) == "0s"
    assert [clock(s) for s in (0, 59.4, 61, 3600, 7621)] == ["0s", "59s", "1m01s", "1h00m", "2h07m"]


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_the_ticker_prints_on_steps_and_at_its_pace_never_twice_for_nothing() -> None:
    state = {"counts": Counts(planned=20)}
    lines: list[str] = []
    clock_ = FakeClock()
    printed = threading.Event()

    def write(text: str) -> None:
        lines.append(text)
        printed.set()

    ticker = Ticker(lambda: (state["counts"], ""), write, every=30.0, now=clock_)
    ticker.start()
    assert lines == [
        "progress: 0/20 trials done (0%): 0 passed, 0 failed, 0 not scored, 0 in flight; elapsed 0s, ETA -"
    ]
    state["counts"] = Counts(planned=20, passed=1, in_flight=4)
    clock_.t += 5
    ticker.changed()  # 1/20 is no new tenth, and 5 s is not 30: no line
    assert len(lines) == 1
    state["counts"] = Counts(planned=20, passed=1, failed=1, in_flight=4)
    clock_.t += 5
    ticker.changed()  # 2/20: the first tenth
    assert len(lines) == 2 and lines[-1].startswith("progress: 2/20 trials done (10%): 1 passed, 1 failed")
    printed.clear()
    clock_.t += 31  # nothing finished for 31 s: the ticker's own thread prints (18 left at 20.5 s each)
    assert printed.wait(5), lines
    assert lines[-1].startswith("progress: 2/20 trials done (10%)") and "elapsed 41s, ETA 6m09s" in lines[-1]
    ticker.stop()  # nothing changed since: no further line
    assert len(lines) == 3
