"""The summary table printed after a run: one row per model x service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from mcpfleet.runner._util.plural import plural
from mcpfleet.runner._util.printable import literal
from mcpfleet.runner.report.scoring import ALL
from mcpfleet.runner.results.records import service_label


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def run_k(summary: dict[str, Any]) -> int:
    """The run's k (attempts per task), as recorded in its rows."""
    return max((int(r.get("attempts") or 1) for r in summary["rows"]), default=1)


def _counts(counts: dict[str, int] | None) -> str:
    return ", ".join(f"{c} {n}" for c, n in (counts or {}).items())


@dataclass(eq=False)  # compared by identity
class _Column:
    header: str
    cells: list[str]
    left: bool = False  # text (left-aligned); numbers are right-aligned


@dataclass
class SummaryTable:
    """The table, laid out for the width it is printed at, with nothing shown cut: one table when every column
    fits; else the failures and not-scored counts as lines below it; else two tables, the scores and the usage
    (turns, tool calls, tokens, cost), each keyed by model and service. A column that fits in neither (a narrow
    terminal) is left out and named below; summary.json and the HTML report have every figure."""

    summary: dict[str, Any]

    def _table(self, columns: list[_Column], first: bool = True, last: bool = True, wider: int = 0) -> Table:
        """A table of ``columns``: the first one printed has the run's title, the last one its caption; ``wider``:
        how many cells wider its model column is than its longest name (to line up with the other table)."""
        # every text from the summary is shown literally: a provider's error may hold "[/...]" or escapes
        t = Table(title=self._title() if first else None, caption=self._caption() if last else None)
        for c in columns:  # only a model's name may wrap (folded when even the fewest columns are too wide)
            model = c.header == "model"
            t.add_column(
                c.header,
                justify="left" if c.left else "right",
                no_wrap=not model,
                overflow="fold",
                min_width=max(map(cell_len, [c.header, *c.cells])) + wider if model and wider else None,
            )
        for i in range(len(self.summary["rows"])):
            t.add_row(*(literal(c.cells[i]) for c in columns))
        return t

    def _title(self) -> Text:
        s = self.summary
        return literal(
            f"{s['run']}  ({s['trials_recorded']}/{plural(s['trials_planned'], 'trial')}, spec {s['spec_hash']}, "
            f"k={run_k(s)})"
        )

    def _caption(self) -> Text | None:
        stopped = self.summary.get("stopped")
        return literal("stopped: " + "; ".join(f"{m} ({why})" for m, why in stopped.items())) if stopped else None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows, k = self.summary["rows"], run_k(self.summary)

        def col(header: str, values: list[str], left: bool = False) -> _Column:
            return _Column(header, values, left)

        def rate(key: str) -> list[str]:
            return [_pct(r[key]) for r in rows]

        p1 = [_pct(r["pass_at_1"]) + (f" ±{r['pass_at_1_std']:.2f}" if r["pass_at_1_std"] else "") for r in rows]
        key = [
            col("model", [r["model"] for r in rows], left=True),
            col("service", [service_label(r) for r in rows], True),
        ]
        scores = [col("trials", [str(r["trials"]) for r in rows]), col("pass@1", p1)]
        unbiased: list[_Column] = []
        if k > 1:  # with k = 1 pass@k and pass^k are pass@1, so they are not repeated
            scores += [col(f"pass@{k}", rate("pass_at_k")), col(f"pass^{k}", rate("pass_hat_k"))]
            unbiased = [
                col(f"pass@{k} unb.", rate("pass_at_k_unbiased")),
                col(f"pass^{k} unb.", rate("pass_hat_k_unbiased")),
            ]
        turns = col("turns", [_num(r["avg_turns"]) for r in rows])
        calls = col("tool calls", [_num(r["avg_tool_calls"]) for r in rows])
        tokens = col("tokens", [_num(r["avg_tokens"], "{:.0f}") for r in rows])
        cost = col("cost $", [_num(r["cost_usd"], "{:.4f}") for r in rows])
        usage = [turns, calls, tokens, cost]
        counts = [
            col("failures", [_counts(r["failures"]) or "-" for r in rows], left=True),
            col("not scored", [_counts(r.get("not_scored")) or "-" for r in rows], left=True),
        ]
        wide = options.update_width(10_000)

        def fits(columns: list[_Column]) -> bool:
            return Measurement.get(console, wide, self._table(columns)).maximum <= options.max_width

        def fit(needed: list[_Column], optional: list[list[_Column]]) -> list[_Column]:
            """``needed`` and those groups of ``optional`` that fit, tried in their order (of importance)."""
            order = needed + [c for group in optional for c in group]
            shown = needed
            for group in optional:
                if fits(more := [x for x in order if x in shown or x in group]):
                    shown = more
            return shown

        figures = key + scores + unbiased + usage
        if not fits(key + scores):  # too narrow for a table: each row's figures as lines of text
            yield self._title()
            for i, r in enumerate(rows):
                yield literal(f"{r['model']} {r['service']}")
                yield Text("  ") + literal(", ".join(f"{c.header} {c.cells[i]}" for c in figures[2:] + counts))
            if caption := self._caption():
                yield caption
            return
        if fits(figures):
            tables = [figures + counts if fits(figures + counts) else figures]
        else:  # the scores, then the usage; the counts below
            tables = [fit(key + scores, [unbiased]), fit(key, [[cost], [tokens], [turns], [calls]])]
            tables[1].sort(key=(key + usage).index)
        widths = [Measurement.get(console, options, self._table(cols)).maximum for cols in tables]
        for i, cols in enumerate(tables):  # as wide as each other
            yield self._table(cols, first=i == 0, last=i == len(tables) - 1, wider=max(widths) - widths[i])
        shown = [c for cols in tables for c in cols]
        for c in counts:
            listed = [(r, text) for r, text in zip(rows, c.cells, strict=True) if text != "-" and r["service"] != ALL]
            if c in shown or not listed:
                continue
            yield Text(f"{c.header}:")
            for r, text in listed:
                yield Text("  ") + literal(f"{r['model']} {r['service']}: {text}")
        if left_out := [c.header for c in scores + unbiased + usage if c not in shown]:
            yield Text(f"not shown at this width: {', '.join(left_out)} (summary.json has them)", style="dim")


def summary_table(summary: dict[str, Any]) -> SummaryTable:
    """Columns named by the run's k; with k = 1 pass@k and pass^k are pass@1, so they are not repeated."""
    return SummaryTable(summary)


def comparison_table(comparisons: list[dict[str, Any]]) -> Table | None:
    """Server variants against their baseline, per model (report/compare.py); None when there are none."""
    if not comparisons:
        return None
    table = Table(title="server variants against their baseline (paired trials)", title_style="bold")
    for header in ("model", "service", "baseline", "variant", "pairs", "pass@1", "difference [95% CI]", "p", "flips"):
        table.add_column(header, justify="left" if header in ("model", "service", "baseline", "variant") else "right")
    table.add_column("Δ tokens", justify="right")
    table.add_column("Δ turns", justify="right")
    table.add_column("Δ calls", justify="right")
    for c in comparisons:
        low, high = c["ci95"]
        table.add_row(
            literal(c["model"]),
            literal(c["service"]),
            literal(c["baseline"]),
            literal(c["variant"]),
            str(c["pairs"]),
            f"{c['baseline_pass_at_1']:.2f} → {c['variant_pass_at_1']:.2f}",
            f"{c['difference']:+.2f} [{low:+.2f}, {high:+.2f}]",
            f"{c['mcnemar_p']:.3f}",
            f"↑{len(c['flipped_up'])} ↓{len(c['flipped_down'])}",
            f"{c['delta_tokens']:+.0f}",
            f"{c['delta_turns']:+.1f}",
            f"{c['delta_tool_calls']:+.1f}",
        )
    return table
