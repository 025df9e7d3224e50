"""A live progress bar for ``mcpfleet run``: trials done, passed, failed and not scored (infra, provider, config)."""

from __future__ import annotations

from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress

from mcpfleet.runner.results.outcome import is_scored


class Progress:
    def __init__(self, total: int, already: int = 0, enabled: bool = True):
        self.passed = self.failed = self.infra = 0
        self.already = already
        self.total = total
        self.spend: str = ""  # what the run's budget ledger says: spent so far, projected, the budget
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
        done = self.passed + self.failed + self.infra + self.already
        projected = f", ~${usd * self.total / done:.2f} projected" if done else ""
        of = f" of ${budget:g}" if budget is not None else ""
        self.spend = f" [cyan]${usd:.2f} spent{projected}{of}[/]"
        self._bar.update(self._task, description=self._text())

    def advance(self, out: dict[str, Any]) -> None:
        if out["passed"]:
            self.passed += 1
        elif not is_scored(out.get("failure")):
            self.infra += 1
        else:
            self.failed += 1
        self._bar.update(self._task, advance=1, description=self._text())

    def __enter__(self) -> Progress:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.__exit__(*exc)
