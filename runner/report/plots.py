"""The report's five plots, one ``<figure>`` of inline SVG each, over one Series per model of each run.

Plots follow the MCPMark paper: pass@1 with its std over attempts, pass@k against pass^k, the
cost-performance map, turns per trial for passed and failed trials, and the failure taxonomy. Every plot is
an ``<svg>`` in a ``<figure id="plot-...">``; every data mark carries its numbers as ``data-*`` attributes
(fractions and USD as full-precision floats, ``null`` when unknown) and as a ``<title>`` for screen readers.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from mcpfleet.runner.report.load import RunData
from mcpfleet.runner.report.markup import attrs, num, pct, usd
from mcpfleet.runner.report.scoring import ALL
from mcpfleet.runner.report.svg import (
    FONT,
    W,
    clip,
    figure,
    jitter,
    legend,
    mark,
    nice_ticks,
    svg_open,
    text,
    tick_label,
    x_axis,
)
from mcpfleet.runner.results.outcome import CATEGORIES, is_scored

PLOT_IDS = ("plot-pass-at-1", "plot-pass-at-k", "plot-cost", "plot-turns", "plot-failures")

SERVICE_COLORS = ("#4e79a7", "#f28e2b", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
SERIES_COLORS = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
FAILURE_COLORS = {
    "verifier_failed": "#e15759",
    "context_overflow": "#b07aa1",
    "turn_limit": "#f28e2b",
    "abandoned": "#9c755f",
    "premature_stop": "#edc948",
    "malformed_tool_call": "#ff9da7",
    "timeout": "#76b7b2",
    "llm_api_error": "#4e79a7",
    "output_truncated": "#d37295",
    "content_filter": "#8cd17d",
    "infra_error": "#79706e",
    "provider_error": "#a0a0a0",
    "config_error": "#c8c8c8",
    "budget_exhausted": "#b0b0b0",
}
PASS_COLOR, FAIL_COLOR = "#59a14f", "#e15759"
ALL_COLOR = "#555555"


def _scored(row: dict[str, Any]) -> int:
    """Scored trials of a summary row (summaries written before not-scored outcomes existed: all of them)."""
    return int(row.get("scored", row["trials"]))


def _not_scored_note(row: dict[str, Any]) -> str:
    n = sum((row.get("not_scored") or {}).values())
    return f"; {n} not scored" if n else ""


@dataclass
class Series:
    """One model of one run: the unit of every plot."""

    run: RunData
    model: str
    rows: list[dict[str, Any]]  # per service, then "all" when the model spans several
    overall: dict[str, Any]  # the "all" row, or the only row
    color: str = ""
    single_run: bool = True

    @property
    def label(self) -> str:
        return self.model if self.single_run else f"{self.model} · {self.run.label}"

    def keys(self) -> dict[str, Any]:
        return {"data_run": self.run.label, "data_run_index": self.run.index, "data_model": self.model}


def build_series(runs: list[RunData]) -> list[Series]:
    out: list[Series] = []
    for run in runs:
        by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in run.summary["rows"]:
            by_model[r["model"]].append(r)
        for model in sorted(by_model):
            rows = sorted(by_model[model], key=lambda r: (r["service"] == ALL, r["service"]))
            overall = next((r for r in rows if r["service"] == ALL), rows[0])
            out.append(Series(run=run, model=model, rows=rows, overall=overall, single_run=len(runs) == 1))
    for i, s in enumerate(out):
        s.color = SERIES_COLORS[i % len(SERIES_COLORS)]
    return out


# ------------------------------------------------------------------------------------------------- plots


def _row_layout(
    series: list[Series], per: Any, row_h: float = 18, head_h: float = 18, gap: float = 10
) -> tuple[list[tuple[Series, float, list[tuple[Any, float]]]], float]:
    """Blocks of rows: a header line per series, then one row per item of per(series). Returns the blocks
    (series, header baseline, [(item, row centre)]) and the total height."""
    y = 0.0
    blocks = []
    for s in series:
        head = y + head_h - 5
        y += head_h
        rows = []
        for item in per(s):
            rows.append((item, y + row_h / 2))
            y += row_h
        blocks.append((s, head, rows))
        y += gap
    return blocks, y


def plot_pass_at_1(series: list[Series]) -> str:
    fid = "plot-pass-at-1"
    services = sorted({r["service"] for s in series for r in s.rows if r["service"] != ALL})
    color = {sv: SERVICE_COLORS[i % len(SERVICE_COLORS)] for i, sv in enumerate(services)}
    color[ALL] = ALL_COLOR
    label_w = max([FONT * len(r["service"]) for s in series for r in s.rows] + [60]) + 16
    left, right = 20 + label_w, 170
    blocks, plot_h = _row_layout(series, lambda s: s.rows)
    items = (
        [("rect", color[sv], sv) for sv in services]
        + ([("rect", ALL_COLOR, "all services")] if any(r["service"] == ALL for s in series for r in s.rows) else [])
        + [("errorbar", "#222", "± std over attempts")]
    )
    leg, leg_h = legend(left, 18, items)
    top = 18 + leg_h + 6
    height = top + plot_h + 50
    x0, x1 = left, W - right

    def sx(v: float) -> float:
        return x0 + (x1 - x0) * max(0.0, min(1.0, v))

    parts = [
        svg_open(fid, W, height, "pass@1 per model and service, with the std over attempts"),
        leg,
        f'<g transform="translate(0 {top:.1f})">',
    ]
    parts.append(x_axis(x0, x1, plot_h, 0, [i / 5 for i in range(6)], sx, "pass@1 (mean over attempts)", True))
    for s, head, rows in blocks:
        parts.append(text(12, head, s.label, cls="series-label", **s.keys()))
        for r, cy in rows:
            p, std = r["pass_at_1"], r["pass_at_1_std"]
            k = dict(s.keys(), data_service=r["service"])
            title = (
                f"{s.label} · {r['service']}: pass@1 {pct(p)}"
                + (f" ± {pct(std)}" if std is not None else "")
                + f" ({_scored(r)} scored trials, {r['attempts']} attempt(s))"
                + _not_scored_note(r)
            )
            parts.append(text(x0 - 8, cy + 4, r["service"], "end", "row-label"))
            w = sx(p or 0.0) - x0
            parts.append(
                mark(
                    "rect",
                    title,
                    x=f"{x0:.1f}",
                    y=f"{cy - 6:.1f}",
                    width=f"{w:.1f}",
                    height="12",
                    fill=color[r["service"]],
                    class_="bar",
                    data_metric="pass_at_1",
                    data_value=num(p),
                    data_std=num(std),
                    data_trials=r["trials"],
                    data_attempts=r["attempts"],
                    **k,
                )
            )
            end = sx(p or 0.0)
            if std:
                lo, hi = sx((p or 0.0) - std), sx((p or 0.0) + std)
                parts.append(
                    mark(
                        "path",
                        title,
                        d=f"M{lo:.1f} {cy:.1f}H{hi:.1f}M{lo:.1f} {cy - 5:.1f}v10M{hi:.1f} {cy - 5:.1f}v10",
                        class_="errorbar",
                        data_metric="pass_at_1_std",
                        data_value=num(std),
                        **k,
                    )
                )
                end = hi
            parts.append(text(end + 6, cy + 4, pct(p) + (f" ± {100 * std:.1f}" if std else ""), cls="value"))
    parts.append("</g></svg>")
    return figure(
        fid,
        "".join(parts),
        "Figure 1. pass@1 per model and service: the mean over attempts of each attempt's success rate "
        "across tasks; the error bar is the population std over attempts (MCPMark's definition).",
    )


def plot_pass_at_k(series: list[Series]) -> str:
    fid = "plot-pass-at-k"
    ks = sorted({r["attempts"] for s in series for r in s.rows})
    ktxt = ", ".join(str(k) for k in ks)
    label_w = max([FONT * len(r["service"]) for s in series for r in s.rows] + [60]) + 16
    left, right = 20 + label_w, 260
    leg, leg_h = legend(
        left,
        18,
        [
            ("circle", "#4e79a7", "pass@k: any of k attempts passed"),
            ("ring", "#e15759", "pass^k: all k attempts passed"),
            ("tick", "#333", "pass@1"),
        ],
    )
    top = 18 + leg_h + 6
    blocks, plot_h = _row_layout(series, lambda s: s.rows, row_h=20)
    height = top + plot_h + 50
    x0, x1 = left, W - right

    def sx(v: float) -> float:
        return x0 + (x1 - x0) * max(0.0, min(1.0, v))

    parts = [
        svg_open(fid, W, height, f"pass@k against pass^k per model (k = {ktxt})"),
        leg,
        f'<g transform="translate(0 {top:.1f})">',
    ]
    parts.append(
        x_axis(x0, x1, plot_h, 0, [i / 5 for i in range(6)], sx, f"share of tasks (k = {ktxt} attempts per task)", True)
    )
    for s, head, rows in blocks:
        parts.append(text(12, head, s.label, cls="series-label", **s.keys()))
        for r, cy in rows:
            k = r["attempts"]
            at, hat, p1 = r["pass_at_k"], r["pass_hat_k"], r["pass_at_1"]
            keys = dict(s.keys(), data_service=r["service"], data_k=k)
            parts.append(text(x0 - 8, cy + 4, r["service"], "end", "row-label"))
            parts.append(f'<g class="dumbbell"{attrs(**keys, data_pass_at_k=num(at), data_pass_hat_k=num(hat))}>')
            base = (
                f"{s.label} · {r['service']}, k={k} ({r['tasks_with_all_attempts']} of {r['tasks']} task(s) "
                f"with all {k} attempts)"
            )
            if at is not None and hat is not None:
                parts.append(f'<line x1="{sx(hat):.1f}" y1="{cy:.1f}" x2="{sx(at):.1f}" y2="{cy:.1f}" class="stem"/>')
            if p1 is not None:
                parts.append(
                    mark(
                        "line",
                        f"{base}: pass@1 {pct(p1)}",
                        x1=f"{sx(p1):.1f}",
                        y1=f"{cy - 6:.1f}",
                        x2=f"{sx(p1):.1f}",
                        y2=f"{cy + 6:.1f}",
                        class_="p1-tick",
                        data_metric="pass_at_1",
                        data_value=num(p1),
                        **keys,
                    )
                )
            if at is not None:
                parts.append(
                    mark(
                        "circle",
                        f"{base}: pass@{k} {pct(at)}",
                        cx=f"{sx(at):.1f}",
                        cy=f"{cy:.1f}",
                        r="5.5",
                        class_="pass-at-k",
                        data_metric="pass_at_k",
                        data_value=num(at),
                        data_unbiased=num(r.get("pass_at_k_unbiased")),
                        **keys,
                    )
                )
            if hat is not None:
                parts.append(
                    mark(
                        "circle",
                        f"{base}: pass^{k} {pct(hat)}",
                        cx=f"{sx(hat):.1f}",
                        cy=f"{cy:.1f}",
                        r="4.5",
                        class_="pass-hat-k",
                        data_metric="pass_hat_k",
                        data_value=num(hat),
                        data_unbiased=num(r.get("pass_hat_k_unbiased")),
                        **keys,
                    )
                )
            label = (
                f"k={k}: pass@{k} {pct(at)} · pass^{k} {pct(hat)}"
                if at is not None and hat is not None
                else f"k={k}: no task has all {k} attempts yet"
            )
            parts.append(text(x1 + 10, cy + 4, label, cls="value"))
            parts.append("</g>")
    parts.append("</g></svg>")
    return figure(
        fid,
        "".join(parts),
        f"Figure 2. pass@k against pass^k per model and service, k = {ktxt} (the attempts per task): a task "
        "counts for pass@k when any of its k attempts passed, for pass^k when all did; the gap between "
        "them is the model's inconsistency. Only tasks with all k attempts recorded count.",
    )


def plot_cost(series: list[Series]) -> str:
    fid = "plot-cost"
    known = [s.overall["avg_cost_usd"] for s in series if s.overall.get("avg_cost_usd") is not None]
    unknown = [s for s in series if s.overall.get("avg_cost_usd") is None]
    ticks = nice_ticks(max(known) if known else 0.0)
    left, right, top, plot_h = 70, 220, 20, 340
    height = top + plot_h + (78 if unknown else 60)
    x0, x1 = left, W - right
    y0, y1 = top + plot_h, top

    def sx(v: float) -> float:
        return x0 + (x1 - x0) * v / ticks[-1]

    def sy(v: float) -> float:
        return y0 - (y0 - y1) * max(0.0, min(1.0, v))

    parts = [svg_open(fid, W, height, "Cost against pass@1, one point per model")]
    parts.append(x_axis(x0, x1, y0, y1, ticks, sx, "average cost per trial (USD)", money=True))
    parts.append(f'<g class="axis y-axis"><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" class="axis-line"/>')
    for i in range(6):
        v = i / 5
        parts.append(f'<line x1="{x0}" y1="{sy(v):.1f}" x2="{x1}" y2="{sy(v):.1f}" class="grid"/>')
        parts.append(text(x0 - 8, sy(v) + 4, tick_label(v, True), "end", "tick"))
    parts.append(
        f'<text transform="translate(18 {(y0 + y1) / 2:.1f}) rotate(-90)" text-anchor="middle" '
        f'class="axis-label">pass@1</text></g>'
    )
    placed: list[tuple[float, float, list[str]]] = []  # (x, y, labels): points drawn at one spot share a label
    for s in series:
        o = s.overall
        c, p = o.get("avg_cost_usd"), o["pass_at_1"] or 0.0
        cx, cy = sx(c or 0.0), sy(p)
        title = (
            f"{s.label}: pass@1 {pct(o['pass_at_1'])}, cost per trial {usd(c)}, total {usd(o.get('cost_usd'))} "
            f"over {o['trials']} trials"
        )
        keys = dict(
            s.keys(),
            data_service=o["service"],
            data_pass_at_1=num(o["pass_at_1"]),
            data_std=num(o["pass_at_1_std"]),
            data_avg_cost_usd=num(c),
            data_cost_usd=num(o.get("cost_usd")),
            data_trials=o["trials"],
            data_cost_known="true" if c is not None else "false",
        )
        if c is None:
            parts.append(
                mark(
                    "circle",
                    title + " (cost unknown: drawn at x = 0)",
                    cx=f"{cx:.1f}",
                    cy=f"{cy:.1f}",
                    r="6",
                    fill="#fff",
                    stroke=s.color,
                    class_="point cost-unknown",
                    **keys,
                )
            )
            lab = f"{s.label} (cost unknown)"
        else:
            parts.append(
                mark("circle", title, cx=f"{cx:.1f}", cy=f"{cy:.1f}", r="6", fill=s.color, class_="point", **keys)
            )
            lab = s.label
        spot = next((q for q in placed if abs(q[0] - cx) < 4 and abs(q[1] - cy) < 4), None)
        if spot:
            spot[2].append(lab)
        else:
            placed.append((cx, cy, [lab]))
    boxes: list[tuple[float, float, float]] = []  # (x0, x1, baseline) of labels already placed
    for cx, cy, labs in sorted(placed, key=lambda q: (q[1], q[0])):
        lab = clip(", ".join(labs), 60)
        w = FONT * len(lab)
        lx, anchor = (cx + 9, "start") if cx + 9 + w <= W - 8 else (cx - 9, "end")
        bx0, bx1 = (lx, lx + w) if anchor == "start" else (lx - w, lx)
        ly = cy - 8
        while any(b[0] < bx1 and bx0 < b[1] and abs(b[2] - ly) < 14 for b in boxes):
            ly += 14
        boxes.append((bx0, bx1, ly))
        parts.append(text(lx, ly, lab, anchor, "point-label"))
    notes = []
    if unknown:
        notes.append(
            "cost unknown for "
            + ", ".join(s.label for s in unknown)
            + ": drawn hollow at x = 0 (LiteLLM has no price for the model, or it is scripted)."
        )
        parts.append(text(x1, y0 + 56, "hollow points: cost unknown, drawn at x = 0", "end", "note-text"))
    parts.append("</svg>")
    return figure(
        fid,
        "".join(parts),
        "Figure 3. Cost-performance map: pass@1 against the average cost of one trial (one task attempt) "
        "in USD, one point per model over all its services.",
        notes,
    )


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def plot_turns(series: list[Series]) -> str:
    fid = "plot-turns"
    recs: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for s in series:
        for r in s.run.records:
            if r["model"] == s.model and is_scored(r.get("failure")):  # what the model did, not its provider
                recs[(s.run.index, s.model)].append(r)

    def turns(r: dict[str, Any]) -> int:
        return int((r.get("totals") or {}).get("turns") or 0)

    hi = max((turns(r) for rs in recs.values() for r in rs), default=1)
    ticks = nice_ticks(max(hi, 1), integer=True)
    left, right = 150, 40
    leg, leg_h = legend(
        left,
        18,
        [
            ("circle", PASS_COLOR, "passed trial"),
            ("circle", FAIL_COLOR, "failed trial"),
            ("tick", "#222", "median (box: quartiles)"),
        ],
    )
    top = 18 + leg_h + 6
    lane_h = 26
    blocks, plot_h = _row_layout(series, lambda s: (True, False), row_h=lane_h)
    height = top + plot_h + 50
    x0, x1 = left, W - right

    def sx(v: float) -> float:
        return x0 + (x1 - x0) * v / ticks[-1]

    parts = [
        svg_open(fid, W, height, "Turns per trial, passed and failed trials, per model"),
        leg,
        f'<g transform="translate(0 {top:.1f})">',
    ]
    parts.append(x_axis(x0, x1, plot_h, 0, ticks, sx, "turns per trial (LLM calls)"))
    for s, head, lanes in blocks:
        mine = sorted(recs[(s.run.index, s.model)], key=lambda r: (r["task_id"], r["attempt"], r["service"]))
        parts.append(
            text(12, head, f"{s.label} ({len(mine)} trials)", cls="series-label", data_trials=len(mine), **s.keys())
        )
        for passed, cy in lanes:
            lane = [r for r in mine if bool(r["passed"]) is passed]
            name = "passed" if passed else "failed"
            color = PASS_COLOR if passed else FAIL_COLOR
            parts.append(text(x0 - 8, cy + 4, f"{name} ({len(lane)})", "end", "row-label"))
            parts.append(f'<g class="lane"{attrs(**s.keys(), data_passed=num(passed), data_count=len(lane))}>')
            if lane:
                vals = [float(turns(r)) for r in lane]
                q1, med, q3 = _quartiles(sorted(vals))
                parts.append(
                    mark(
                        "rect",
                        f"{s.label}, {name}: median {med:g} turns, quartiles {q1:g}-{q3:g}",
                        x=f"{sx(q1):.1f}",
                        y=f"{cy - 9:.1f}",
                        width=f"{max(sx(q3) - sx(q1), 1):.1f}",
                        height="18",
                        class_="box",
                        data_median=num(med),
                        data_q1=num(q1),
                        data_q3=num(q3),
                        data_passed=num(passed),
                        **s.keys(),
                    )
                )
                parts.append(
                    f'<line x1="{sx(med):.1f}" y1="{cy - 10:.1f}" x2="{sx(med):.1f}" y2="{cy + 10:.1f}" '
                    f'class="median"/>'
                )
            for r in lane:
                t = turns(r)
                dy = 7 * jitter(f"{s.run.index}/{r['trial_id']}")
                fail = "" if passed else f", {r.get('failure') or 'verifier_failed'}"
                parts.append(
                    mark(
                        "circle",
                        f"{s.label} · {r['task_id']} attempt {r['attempt']}: {t} turns, {name}{fail}",
                        cx=f"{sx(t):.1f}",
                        cy=f"{cy + dy:.1f}",
                        r="3",
                        fill=color,
                        class_="trial",
                        data_service=r["service"],
                        data_task=r["task_id"],
                        data_attempt=r["attempt"],
                        data_trial=r.get("trial_id"),
                        data_turns=t,
                        data_passed=num(passed),
                        data_failure=None if passed else (r.get("failure") or "verifier_failed"),
                        **s.keys(),
                    )
                )
            parts.append("</g>")
    parts.append("</g></svg>")
    return figure(
        fid,
        "".join(parts),
        "Figure 4. Turns per trial for each model, passed trials (green) apart from failed ones (red), "
        "one dot per scored trial from the trial records; boxes span the quartiles, the bar is the median.",
    )


def plot_failures(series: list[Series]) -> str:
    fid = "plot-failures"
    present = {c for s in series for c in (*s.overall["failures"], *s.overall.get("not_scored", {}))}
    cats = [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))
    color = {c: FAILURE_COLORS.get(c, SERIES_COLORS[i % len(SERIES_COLORS)]) for i, c in enumerate(cats)}
    left, right = 40, 200
    items = [("rect", color[c], c) for c in cats] or [("rect", "#ddd", "no failures")]
    leg, leg_h = legend(left, 18, items)
    top = 18 + leg_h + 6
    blocks, plot_h = _row_layout(series, lambda s: (s.overall,), row_h=20)
    height = top + plot_h + 50
    x0, x1 = left, W - right

    def sx(v: float) -> float:
        return x0 + (x1 - x0) * v

    parts = [svg_open(fid, W, height, "Failure breakdown per model"), leg, f'<g transform="translate(0 {top:.1f})">']
    parts.append(x_axis(x0, x1, plot_h, 0, [i / 5 for i in range(6)], sx, "share of the model's trials", True))
    for s, head, rows in blocks:
        parts.append(text(x0, head, s.label, cls="series-label", **s.keys()))
        for o, cy in rows:
            n = o["trials"]
            failed = sum(o["failures"].values())
            not_scored = o.get("not_scored") or {}
            skipped = sum(not_scored.values())
            bar = attrs(
                **s.keys(), data_service=o["service"], data_trials=n, data_failed=failed, data_not_scored=skipped
            )
            parts.append(f'<g class="failure-bar"{bar}>')
            x = x0
            for c in cats:
                cnt = o["failures"].get(c, 0) or not_scored.get(c, 0)
                if not cnt:
                    continue
                w = (x1 - x0) * cnt / n if n else 0
                what = "" if is_scored(c) else ", not scored"
                parts.append(
                    mark(
                        "rect",
                        f"{s.label}: {c} {cnt} of {n} trials ({pct(cnt / n if n else 0)}){what}",
                        x=f"{x:.1f}",
                        y=f"{cy - 7:.1f}",
                        width=f"{w:.1f}",
                        height="14",
                        fill=color[c],
                        class_="segment",
                        data_category=c,
                        data_count=cnt,
                        data_share=num(cnt / n if n else 0.0),
                        data_scored=num(is_scored(c)),
                        **s.keys(),
                    )
                )
                x += w
            label = f"{failed} of {n} trials failed ({pct(failed / n if n else 0)})"
            label += f", {skipped} not scored" if skipped else ""
            parts.append(text(x + 8, cy + 4, label, cls="value"))
            parts.append("</g>")
    parts.append("</g></svg>")
    return figure(
        fid,
        "".join(parts),
        "Figure 5. Failure breakdown per model over all its trials, in the MCPMark taxonomy: "
        "verifier_failed is the implicit failure (the agent finished but the end state is wrong); the "
        "others are explicit (context_overflow, turn_limit, abandoned, premature_stop, "
        "malformed_tool_call, timeout, llm_api_error, output_truncated, content_filter). infra_error, "
        "provider_error and config_error measured nothing of the model (a provider_error may also be a failure "
        "MCPMark runs again, its error says so): they are not scored (left out of every pass rate) and shown "
        "here in grey.",
    )
