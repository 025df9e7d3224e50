"""``mcpfleet run``'s progress: trials done, passed, failed and not scored (infra, provider, config), in flight,
the spend. On a terminal a live rich bar; off one (CI, ``nohup``) plain lines at a steady pace
(``progress_lines``); or nothing."""

from __future__ import annotations

import sys
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress

from mcpfleet.runner.launch.progress_lines import Counts, Ticker
from mcpfleet.runner.results.outcome import is_scored


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Progress:
    """``enabled``: the live bar; ``lines_every``: plain lines instead, at least every that many seconds; ``cost``:
    what the trials finished before this invocation cost (their records)."""

    def __init__(
        self,
        total: int,
        already: int = 0,
        enabled: bool = True,
        lines_every: float | None = None,
        cost: float = 0.0,
    ):
        self.passed = self.failed = self.infra = 0
        self.in_flight = 0
        self.already = already
        self.total = total
        self.spend: str = ""  # spent so far, projected, the budget
        self.cost = cost  # what the finished trials' records say they cost (the resumed ones' included)
        self.ledgered = False  # a budget ledger reports the spend (its figure includes requests of trials in flight)
        self._bar = RichProgress(
            TextColumn("[bold]trials"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            disable=not enabled or lines_every is not None,
            transient=False,
        )
        self._task = self._bar.add_task(self._text(), total=total, completed=already)
        self._lines = Ticker(self.counts, _stderr_line, lines_every) if lines_every is not None else None

    def counts(self) -> tuple[Counts, str]:
        """Where the run is, and the spend in plain words (for a progress line)."""
        counts = Counts(self.total, self.already, self.passed, self.failed, self.infra, self.in_flight)
        return counts, self.spend

    def _text(self) -> str:
        resumed = f" [dim]({self.already} resumed)[/]" if self.already else ""
        skipped = f"[yellow]{self.infra} not scored[/]"
        spend = f" [cyan]{self.spend}[/]" if self.spend else ""
        return f"[green]{self.passed} passed[/] [red]{self.failed} failed[/] {skipped}{resumed}{spend}"

    def spent(self, usd: float, budget: float | None) -> None:
        """The run's spend so far (its budget ledger) and the total projected at this rate of spend per trial."""
        self.ledgered = True
        self.spend = spend_text(usd, self.passed + self.failed + self.infra + self.already, self.total, budget)
        self._bar.update(self._task, description=self._text())

    def flying(self, n: int) -> None:
        """How many trials are in flight now (the scheduler's count, retries waiting their backoff excluded)."""
        self.in_flight = n

    def advance(self, out: dict[str, Any]) -> None:
        if out["passed"]:
            self.passed += 1
        elif not is_scored(out.get("failure")):
            self.infra += 1
        else:
            self.failed += 1
        cost = out.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost += cost
        if not self.ledgered and self.cost > 0:  # prices are known: without a budget, the records' spend
            self.spend = spend_text(self.cost, self.passed + self.failed + self.infra + self.already, self.total)
        self._bar.update(self._task, advance=1, description=self._text())
        if self._lines is not None:
            self._lines.changed()

    def __enter__(self) -> Progress:
        self._bar.__enter__()
        if self._lines is not None:
            self._lines.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._lines is not None:
            self._lines.stop()
        self._bar.__exit__(*exc)


def spend_text(usd: float, done: int, total: int, budget: float | None = None) -> str:
    """The progress line's spend: so far, the total projected (spend so far / trials done x trials planned) and
    the budget, if any."""
    projected = f", ~${usd * total / done:.2f} projected" if done else ""
    of = f" of ${budget:g}" if budget is not None else ""
    return f"${usd:.2f} spent{projected}{of}"
