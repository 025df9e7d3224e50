"""The summary table printed after a run: one row per model x service."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from mcpfleet.runner._util.printable import literal


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def run_k(summary: dict[str, Any]) -> int:
    """The run's k (attempts per task), as recorded in its rows."""
    return max((int(r.get("attempts") or 1) for r in summary["rows"]), default=1)


def summary_table(summary: dict[str, Any]) -> Table:
    """Columns named by the run's k; with k = 1 pass@k and pass^k are pass@1, so they are not repeated."""
    rows = summary["rows"]
    k = run_k(summary)
    t = Table(  # every text from the summary is shown literally: a provider's error may hold "[/...]" or escapes
        title=literal(
            f"{summary['run']}  ({summary['trials_recorded']}/{summary['trials_planned']} trials, "
            f"spec {summary['spec_hash']}, k={k})"
        )
    )
    per_k = [f"pass@{k}", f"pass^{k}", f"pass@{k} unb.", f"pass^{k} unb."] if k > 1 else []
    columns = [
        "model",
        "service",
        "trials",
        "pass@1",
        *per_k,
        "turns",
        "tool calls",
        "tokens",
        "cost $",
        "failures",
        "not scored",
    ]
    for col in columns:
        t.add_column(col, justify="left" if col in ("model", "service", "failures", "not scored") else "right")
    for r in rows:  # pass rates over scored trials; "not scored" counts what measured nothing of the model
        std = r["pass_at_1_std"]
        p1 = _pct(r["pass_at_1"]) + (f" ±{std:.2f}" if std else "")
        fails = ", ".join(f"{c} {n}" for c, n in r["failures"].items()) or "-"
        skipped = ", ".join(f"{c} {n}" for c, n in (r.get("not_scored") or {}).items()) or "-"
        k_cells = (
            [
                _pct(r["pass_at_k"]),
                _pct(r["pass_hat_k"]),
                _pct(r["pass_at_k_unbiased"]),
                _pct(r["pass_hat_k_unbiased"]),
            ]
            if per_k
            else []
        )
        t.add_row(
            literal(r["model"]),
            literal(r["service"]),
            str(r["trials"]),
            p1,
            *k_cells,
            _num(r["avg_turns"]),
            _num(r["avg_tool_calls"]),
            _num(r["avg_tokens"], "{:.0f}"),
            _num(r["cost_usd"], "{:.4f}"),
            literal(fails),
            literal(skipped),
        )
    if summary.get("stopped"):
        t.caption = literal("stopped: " + "; ".join(f"{m} ({why})" for m, why in summary["stopped"].items()))
    return t
