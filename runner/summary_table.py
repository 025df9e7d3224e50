"""The summary table printed after a run: one row per model x service."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def summary_table(summary: dict[str, Any]) -> Table:
    rows = summary["rows"]
    k = max((r["attempts"] for r in rows), default=1)
    t = Table(
        title=f"{summary['run']}  ({summary['trials_recorded']}/{summary['trials_planned']} trials, "
        f"spec {summary['spec_hash']})"
    )
    for col, just in [
        ("model", "left"),
        ("service", "left"),
        ("trials", "right"),
        ("pass@1", "right"),
        (f"pass@{k}", "right"),
        (f"pass^{k}", "right"),
        (f"pass@{k} unb.", "right"),
        (f"pass^{k} unb.", "right"),
        ("turns", "right"),
        ("tool calls", "right"),
        ("tokens", "right"),
        ("cost $", "right"),
        ("failures", "left"),
        ("not scored", "left"),
    ]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:  # pass rates over scored trials; "not scored" counts what measured nothing of the model
        std = r["pass_at_1_std"]
        p1 = _pct(r["pass_at_1"]) + (f" ±{std:.2f}" if std else "")
        fails = ", ".join(f"{c} {n}" for c, n in r["failures"].items()) or "-"
        skipped = ", ".join(f"{c} {n}" for c, n in (r.get("not_scored") or {}).items()) or "-"
        t.add_row(
            r["model"],
            r["service"],
            str(r["trials"]),
            p1,
            _pct(r["pass_at_k"]),
            _pct(r["pass_hat_k"]),
            _pct(r["pass_at_k_unbiased"]),
            _pct(r["pass_hat_k_unbiased"]),
            _num(r["avg_turns"]),
            _num(r["avg_tool_calls"]),
            _num(r["avg_tokens"], "{:.0f}"),
            _num(r["cost_usd"], "{:.4f}"),
            fails,
            skipped,
        )
    if summary.get("stopped"):
        t.caption = "stopped: " + "; ".join(f"{m} ({why})" for m, why in summary["stopped"].items())
    return t
