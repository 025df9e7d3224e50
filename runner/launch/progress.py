"""A live progress bar for ``mcpfleet run``: trials done, passed, failed and not scored (infra, provider, config)."""

from __future__ import annotations

from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress

from mcpfleet.runner.results.outcome import is_scored


class Progress:
    def __init__(self, total: int, already: int = 0, enabled: bool = True, cost: float = 0.0):
        self.passed = self.failed = self.infra = 0
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
            disable=not enabled,
            transient=False,
        )
        self._task = self._bar.add_task(self._text(), total=total, completed=already)

    def _text(self) -> str:
        resumed = f" [dim]({self.already} resumed)[/]" if self.already else ""
        skipped = f"[yellow]{self.infra} not scored[/]"
        return f"[green]{self.passed} passed[/] [red]{self.failed} failed[/] {skipped}{resumed}{self.spend}"

    def spent(self, usd: float, budget: float | None) -> None:
        """The run's spend so far (its budget ledger) and the total projected at this rate of spend per trial."""
        self.ledgered = True
        self.spend = spend_text(usd, self.passed + self.failed + self.infra + self.already, self.total, budget)
        self._bar.update(self._task, description=self._text())

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

    def __enter__(self) -> Progress:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.__exit__(*exc)


def spend_text(usd: float, done: int, total: int, budget: float | None = None) -> str:
    """The progress line's spend: so far, the total projected (spend so far / trials done x trials planned) and
    the budget, if any."""
    projected = f", ~${usd * total / done:.2f} projected" if done else ""
    of = f" of ${budget:g}" if budget is not None else ""
    return f" [cyan]${usd:.2f} spent{projected}{of}[/]"
