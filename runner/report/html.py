"""``mcpfleet report``: one self-contained HTML page (inline SVG, no scripts, no network) over one or more runs.

A run is read from its root, a local folder or ``s3://bucket/prefix/<run>[/<uid>]``: summary.json when it is
present and complete, and always the trial records (result.json), which give the distributions. Without a
complete summary.json (a run still going, or stopped early) the aggregates are recomputed from the records
with ``runner.scoring.summarize``, so a partial run can be reported too.

Plots follow the MCPMark paper: pass@1 with its std over attempts, pass@k against pass^k, the
cost-performance map, turns per trial for passed and failed trials, and the failure taxonomy. Every plot is
an ``<svg>`` in a ``<figure id="plot-...">``; every data mark carries its numbers as ``data-*`` attributes
(fractions and USD as full-precision floats, ``null`` when unknown) and as a ``<title>`` for screen readers.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mcpfleet.runner._util.overlap import inside, resolved
from mcpfleet.runner.report.scoring import ALL, ScoreRow, row_problem, summarize, value_problem
from mcpfleet.runner.report.summary import harness_counts, mixed_harness, still_planned
from mcpfleet.runner.results.outcome import CATEGORIES, is_scored
from mcpfleet.runner.results.records import now_iso
from mcpfleet.runner.results.store import LocalStore, ResultStore, S3Store, parse_s3_uri
from mcpfleet.runner.spec.evalrun import MAX_ATTEMPTS
from mcpfleet.runner.toolcalls.case_records import breakdown, expand

PLOT_IDS = ("plot-pass-at-1", "plot-pass-at-k", "plot-cost", "plot-turns", "plot-failures")

#: Record fields the report keeps (a result.json also holds per-turn details it does not need).
_KEEP = ("trial_id", "run", "model", "service", "task_id", "attempt", "passed", "failure", "totals", "timings")

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
}
PASS_COLOR, FAIL_COLOR = "#59a14f", "#e15759"
ALL_COLOR = "#555555"


class ReportError(ValueError):
    """A run could not be read; the message says which and why."""


# ------------------------------------------------------------------------------------------------ loading


@dataclass
class RunData:
    ref: str  # what the user gave
    location: str  # where it was read
    summary: dict[str, Any]  # summary.json, or one recomputed from the records
    records: list[dict[str, Any]]  # slimmed result.json records of the summarised trials
    source: str  # "summary.json" or "recomputed"
    notes: list[str] = field(default_factory=list)
    index: int = 0
    label: str = ""  # run name, made unique within the report


def open_run(ref: str, endpoint_url: str | None = None, region: str | None = None) -> ResultStore:
    """The store of a run root: a local folder or ``s3://bucket/prefix/<run>[/<uid>]``."""
    if ref.startswith("s3://"):
        bucket, key = parse_s3_uri(ref)
        if not key:
            raise ReportError(f"{ref}: give the run root, s3://<bucket>/<prefix>/<run>[/<uid>], not a bare bucket")
        return S3Store(bucket, "", key, None, endpoint_url, region)
    if "://" in ref:
        raise ReportError(f"{ref}: only local folders and s3:// URIs can be reported")
    path = _local_root(ref)
    if path.exists() and not path.is_dir():
        kind = "a file (an EvalRun?)" if path.is_file() else "not a folder"
        raise ReportError(f"{ref}: is {kind}, not a run folder; give the run folder, e.g. runs/<metadata.name>")
    if not path.is_dir():
        raise ReportError(f"{ref}: no such run folder")
    if not any((path / n).exists() for n in ("summary.json", "trials", "run.json")):
        subs = sorted(p.name for p in path.iterdir() if (p / "summary.json").exists() or (p / "trials").is_dir())
        hint = f"; it holds the run(s) {', '.join(subs[:5])}: give one of those" if subs else ""
        raise ReportError(f"{ref}: not a run folder (no summary.json or trials/){hint}")
    return LocalStore(path)


def _slim(rec: dict[str, Any]) -> dict[str, Any]:
    out = {k: rec.get(k) for k in _KEEP}
    out.update({k: rec[k] for k in ("label", "class") if k in rec})  # a toolcall case's gold label and call class
    out["totals"] = dict(rec.get("totals") or {})
    out["timings"] = dict(rec.get("timings") or {})
    return out


class _LabelRow(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    cases: int
    passed: int
    pass_rate: float | None = None


class _ToolcallModel(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    by_label: dict[str, _LabelRow] = {}
    call_classes: dict[str, int] = {}


class _Summary(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    rows: list[ScoreRow]
    run: str | None = None
    spec_hash: str | None = None
    complete: bool | None = None
    trials_planned: int | None = None
    trials_recorded: int | None = None
    toolcall: dict[str, _ToolcallModel] | None = None


def _damaged(summary: dict[str, Any]) -> str | None:
    """Why summary.json cannot be shown as it is (a field of the wrong type, or a number no run computes: a NaN,
    infinite, negative or above-100% rate, a negative count or cost), else None."""
    try:
        _Summary.model_validate(summary)
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"summary.json is damaged ({'.'.join(str(p) for p in first['loc'])}: {first['msg']})"
    numbers: list[tuple[str, Any, float | None]] = [
        (key, summary.get(key), None) for key in ("trials_planned", "trials_recorded")
    ]
    for model, got in (summary.get("toolcall") or {}).items():
        for label, row in (got.get("by_label") or {}).items():
            where = f"toolcall.{model}.by_label.{label}"
            numbers += [(f"{where}.{k}", row.get(k), None) for k in ("cases", "passed")]
            numbers.append((f"{where}.pass_rate", row.get("pass_rate"), 1.0))
        numbers += [(f"toolcall.{model}.call_classes.{k}", v, None) for k, v in (got.get("call_classes") or {}).items()]
    problems = [f"{where}: {why}" for where, value, most in numbers if (why := value_problem(value, most=most))]
    problems += [f"rows.{i}.{why}" for i, row in enumerate(summary["rows"]) if (why := row_problem(row))]
    return f"summary.json is damaged ({problems[0]})" if problems else None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any, most: int | None = None) -> int | None:
    """A positive whole number (at most ``most``) from a file mcpfleet wrote, else None: a damaged field is not
    trusted (``attempts: 3000000`` in an edited run.json would make the report compute pass@3000000)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0 and (most is None or value <= most)
    return value if ok else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _run_name(
    summary: dict[str, Any] | None, run_json: dict[str, Any], records: list[dict[str, Any]], store: ResultStore
) -> str:
    return (
        _text((summary or {}).get("run"))
        or _text(run_json.get("run"))
        or (_text(records[0].get("run")) if records else None)
        or Path(store.location().rstrip("/")).name
    )


def _local_root(ref: str) -> Path:
    """The folder a local run reference names (its summary.json or run.json stands for the run folder)."""
    path = Path(ref)
    if path.is_file() and path.name in ("summary.json", "run.json"):
        path = path.parent
    return path


def output_inside_run(output: Path, refs: Iterable[str]) -> Path | None:
    """The local run folder among ``refs`` (resolved) that ``output`` would land in, else None: a report or an
    export written there would replace or sit among the run's own records (result.json, summary.json,
    run.json). S3 runs cannot be reached by a local path."""
    for ref in refs:
        if "://" in ref:
            continue
        root = resolved(_local_root(ref))
        if root.is_dir() and inside(output, root):
            return root
    return None


def load_run(ref: str, endpoint_url: str | None = None, region: str | None = None) -> RunData:
    store = open_run(ref, endpoint_url, region)
    summary = store.read_json("summary.json")
    on_file = summary is not None
    damaged = _damaged(summary) if isinstance(summary, dict) else "summary.json is no JSON object"
    if summary is not None and damaged:
        summary = None
    run_json = store.read_json("run.json")
    found = list(store.iter_results())
    if summary is None and not found:
        raise ReportError(f"{ref}: no summary.json and no trial records at {store.location()}")
    notes: list[str] = []
    if run_json is not None and not isinstance(run_json, dict):
        notes.append("run.json is no JSON object: set aside")
    run_json = _mapping(run_json)

    # The trials the run plans now, as summary.json counts them (plan.json; else run.json's models and
    # attempts, else the summary's models): records of dropped tasks, models, attempts or specs are left out.
    # run.json is rewritten from the records: a field of the wrong type in it is ignored, never trusted.
    spec = _mapping(_mapping(run_json.get("evalrun")).get("spec"))
    attempts = (
        _count(spec.get("attempts"), MAX_ATTEMPTS)
        or (_count(max((r["attempts"] for r in summary["rows"]), default=None), MAX_ATTEMPTS) if summary else None)
        or min(max((int(r["attempt"]) for r in found), default=1), MAX_ATTEMPTS)
    )
    keep = still_planned(store, {r["model"] for r in summary["rows"]} if summary else None, attempts)
    raw = [r for r in found if keep(r)]
    if len(raw) < len(found):
        notes.append(f"{len(found) - len(raw)} record(s) of trials no longer planned are left out")
    records = [_slim(r) for r in expand(raw)]  # a shard's cases count one by one, as in summary.json

    if summary is not None and summary.get("complete"):
        source = "summary.json"
    else:
        why = (
            (damaged if damaged and on_file else "summary.json is missing")
            if summary is None
            else f"summary.json is incomplete ({summary.get('trials_recorded')}/{summary.get('trials_planned')} trials)"
        )
        planned = (summary or {}).get("trials_planned") or _count(run_json.get("trials"))
        summary = {
            "run": _run_name(summary, run_json, records, store),
            "spec_hash": (summary or {}).get("spec_hash") or _text(run_json.get("spec_hash")) or "?",
            "generated_at": now_iso(),
            "trials_planned": planned,
            "trials_recorded": len(raw),
            "complete": planned is not None and len(raw) == planned,
            "rows": summarize(records, attempts),
            "harness": harness_counts(raw),
        }
        if toolcall := breakdown(records):
            summary["toolcall"] = toolcall
        source = "recomputed"
        notes.append(f"{why}: aggregates recomputed from {len(records)} trial record(s)")

    if not all(summary.get(k) for k in ("run", "spec_hash")) or "trials_recorded" not in summary:
        summary = {  # a summary.json short of what is shown: filled in from the records and run.json
            "trials_planned": None,
            "trials_recorded": len(raw),
            **summary,
            "run": summary.get("run") or _run_name(None, run_json, records, store),
            "spec_hash": summary.get("spec_hash") or _text(run_json.get("spec_hash")) or "?",
        }

    # Per model, the records behind the summary's counts (the distributions are drawn from them).
    counted: dict[str, int] = {}
    for r in summary["rows"]:
        if r["service"] == ALL or r["model"] not in counted:
            counted[r["model"]] = r["trials"]  # the "all" row comes last; a model with one service has no other
    have: dict[str, int] = defaultdict(int)
    for r in records:
        have[r["model"]] += 1
    for model, n in sorted(counted.items()):
        if have.get(model, 0) != n:
            notes.append(f"{model}: the summary counts {n} trial(s), {have.get(model, 0)} record(s) found")
    if mixed := mixed_harness(summary):
        notes.append(mixed)
    return RunData(ref=ref, location=store.location(), summary=summary, records=records, source=source, notes=notes)


def load_runs(refs: Iterable[str], endpoint_url: str | None = None, region: str | None = None) -> list[RunData]:
    runs = [load_run(ref, endpoint_url, region) for ref in refs]
    names: dict[str, int] = defaultdict(int)
    for r in runs:
        names[r.summary["run"]] += 1
    seen: dict[str, int] = defaultdict(int)
    for i, r in enumerate(runs):
        r.index = i
        name = str(r.summary["run"])
        seen[name] += 1
        r.label = name if names[name] == 1 else f"{name} #{seen[name]}"
    return runs


# ----------------------------------------------------------------------------------------------- helpers


def _scored(row: dict[str, Any]) -> int:
    """Scored trials of a summary row (summaries written before not-scored outcomes existed: all of them)."""
    return int(row.get("scored", row["trials"]))


def _not_scored_note(row: dict[str, Any]) -> str:
    n = sum((row.get("not_scored") or {}).values())
    return f"; {n} not scored" if n else ""


def esc(x: Any) -> str:
    return escape(str(x), quote=True)


def num(x: Any) -> str:
    """A number for a data attribute: full precision (repr round-trips), ``null`` when unknown."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    return repr(float(x))


def attrs(**kw: Any) -> str:
    """``data_model="x"`` -> `` data-model="x"``; None values are left out (use num() for ``null``)."""
    return "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in kw.items() if v is not None)


def pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def usd(x: float | None) -> str:
    if x is None:
        return "unknown"
    return f"${x:,.4f}" if x < 1 else f"${x:,.2f}"


def fmt(x: float | None, f: str = "{:.1f}") -> str:
    return "-" if x is None else f.format(x)


def mark(tag: str, title: str, **kw: Any) -> str:
    return f"<{tag}{attrs(**kw)}><title>{esc(title)}</title></{tag}>"


def text(x: float, y: float, s: str, anchor: str = "start", cls: str = "", **kw: Any) -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{attrs(class_=cls or None, **kw)}>{esc(s)}</text>'


def clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def nice_ticks(hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """Ticks from 0 to a round number >= hi."""
    if hi <= 0 or not math.isfinite(hi):
        hi = 1.0
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = mag
    for m in (1, 2, 2.5, 5, 10):
        step = m * mag
        if hi / step <= n:
            break
    if integer:
        step = max(1, math.ceil(step))
    top = math.ceil(hi / step - 1e-9) * step
    count = int(round(top / step))
    return [round(i * step, 10) for i in range(count + 1)]


def jitter(key: str) -> float:
    """A stable pseudo-random number in [-1, 1] for a mark (the same page for the same records)."""
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
    return h / 0xFFFFFFFF * 2 - 1


def tick_label(v: float, percent: bool, money: bool = False) -> str:
    if percent:
        return f"{100 * v:.0f}%"
    if money:
        return f"${v:g}"
    return f"{v:g}"


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


# --------------------------------------------------------------------------------------------- svg parts

W = 900  # every plot's width in user units (the page scales it down on narrow screens)
FONT = 7.0  # rough width of a 12px character, for margins


def svg_open(fig_id: str, width: float, height: float, title: str) -> str:
    return (
        f'<svg viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-labelledby="{fig_id}-title {fig_id}-caption">'
        f'<title id="{fig_id}-title">{esc(title)}</title>'
    )


def figure(fig_id: str, svg: str, caption: str, notes: list[str] | None = None) -> str:
    extra = "".join(f'<p class="note">{esc(n)}</p>' for n in notes or [])
    return (
        f'<figure id="{fig_id}" class="plot">{svg}<figcaption id="{fig_id}-caption">{esc(caption)}'
        f"</figcaption>{extra}</figure>"
    )


def x_axis(
    x0: float,
    x1: float,
    y: float,
    top: float,
    ticks: list[float],
    scale: Any,
    label: str,
    percent: bool = False,
    money: bool = False,
) -> str:
    parts = [f'<g class="axis x-axis"><line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" class="axis-line"/>']
    for t in ticks:
        x = scale(t)
        parts.append(f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(text(x, y + 16, tick_label(t, percent, money), "middle", "tick"))
    parts.append(text((x0 + x1) / 2, y + 36, label, "middle", "axis-label"))
    parts.append("</g>")
    return "".join(parts)


def legend(x: float, y: float, items: list[tuple[str, str, str]], max_width: float = W - 20) -> tuple[str, float]:
    """Items (kind, color, label) in rows from (x, y); returns the svg and the height used."""
    parts = ['<g class="legend">']
    cx, cy = x, y
    for kind, color, label in items:
        w = 22 + FONT * len(label) + 16
        if cx + w > max_width and cx > x:
            cx, cy = x, cy + 18
        if kind == "circle":
            parts.append(f'<circle cx="{cx + 6:.1f}" cy="{cy - 4:.1f}" r="5" fill="{color}"/>')
        elif kind == "ring":
            parts.append(
                f'<circle cx="{cx + 6:.1f}" cy="{cy - 4:.1f}" r="4.5" fill="#fff" stroke="{color}" stroke-width="2"/>'
            )
        elif kind == "tick":
            parts.append(
                f'<line x1="{cx + 6:.1f}" y1="{cy - 11:.1f}" x2="{cx + 6:.1f}" y2="{cy + 3:.1f}" '
                f'stroke="{color}" stroke-width="2"/>'
            )
        elif kind == "errorbar":
            parts.append(
                f'<path d="M{cx:.1f} {cy - 4:.1f}h12M{cx:.1f} {cy - 8:.1f}v8M{cx + 12:.1f} {cy - 8:.1f}v8" '
                f'stroke="{color}" stroke-width="1.5" fill="none"/>'
            )
        else:
            parts.append(f'<rect x="{cx:.1f}" y="{cy - 10:.1f}" width="12" height="12" fill="{color}"/>')
        parts.append(text(cx + 18, cy, label, cls="legend-label"))
        cx += w
    parts.append("</g>")
    return "".join(parts), cy - y + 18


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


# ------------------------------------------------------------------------------------------------ tables


def run_header(run: RunData) -> str:
    s = run.summary
    planned = s.get("trials_planned")
    status = "complete" if s.get("complete") else "partial"
    dl = [
        ("run", s["run"]),
        ("location", run.location),
        ("spec hash", s.get("spec_hash")),
        ("trials", f"{s.get('trials_recorded')} recorded / {'?' if planned is None else planned} planned ({status})"),
        ("generated", s.get("generated_at")),
        ("aggregates", "summary.json" if run.source == "summary.json" else "recomputed from the trial records"),
    ]
    body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in dl)
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in run.notes)
    rows = []
    for r in s["rows"]:
        fails = ", ".join(f"{c} {n}" for c, n in r["failures"].items()) or "-"
        skipped = ", ".join(f"{c} {n}" for c, n in (r.get("not_scored") or {}).items()) or "-"
        std = r["pass_at_1_std"]
        rows.append(
            f"<tr{attrs(data_model=r['model'], data_service=r['service'], data_pass_at_1=num(r['pass_at_1']))}>"
            f'<td>{esc(r["model"])}</td><td>{esc(r["service"])}</td><td class="n">{esc(r["trials"])}</td>'
            f'<td class="n">{pct(r["pass_at_1"])}{esc(f" ± {100 * std:.1f}") if std else ""}</td>'
            f'<td class="n">{pct(r["pass_at_k"])}</td><td class="n">{pct(r["pass_hat_k"])}</td>'
            f'<td class="n">{esc(r["attempts"])}</td><td class="n">{fmt(r["avg_turns"])}</td>'
            f'<td class="n">{fmt(r["avg_tool_calls"])}</td><td class="n">{fmt(r["avg_tokens"], "{:,.0f}")}</td>'
            f'<td class="n">{esc(usd(r["cost_usd"]))}</td><td>{esc(fails)}</td>'
            f'<td class="not-scored">{esc(skipped)}</td></tr>'
        )
    table = (
        '<table class="summary"><thead><tr><th>model</th><th>service</th><th>trials</th><th>pass@1</th>'
        "<th>pass@k</th><th>pass^k</th><th>k</th><th>turns</th><th>tool calls</th><th>tokens</th>"
        f"<th>cost</th><th>failures</th><th>not scored</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    stopped = "".join(
        f'<p class="note stopped" data-model="{esc(m)}">model {esc(m)} stopped: {esc(why)}</p>'
        for m, why in sorted((s.get("stopped") or {}).items())
    )
    notes += stopped
    data = attrs(
        data_run=run.label,
        data_run_index=run.index,
        data_spec_hash=s.get("spec_hash"),
        data_trials_recorded=s.get("trials_recorded"),
        data_trials_planned=num(planned),
        data_complete=num(bool(s.get("complete"))),
        data_source=run.source,
    )
    return (
        f'<section class="run" id="run-{run.index}"{data}>'
        f"<h2>{esc(run.label)}</h2><dl>{body}</dl>{notes}{table}{call_class_table(s['rows'])}"
        f"{toolcall_table(s.get('toolcall') or {})}</section>"
    )


def call_class_table(rows: list[dict[str, Any]]) -> str:
    """The agents' tool calls per model x service by class (checker, or judge where one was named): shares."""
    from mcpfleet.runner.toolcalls.models import CALL_CLASSES

    seen = [r for r in rows if r.get("call_classes")]
    if not seen:
        return ""
    present = {c for r in seen for c in r["call_classes"]}
    classes = [c for c in CALL_CLASSES if c in present] + sorted(present - set(CALL_CLASSES))
    body = []
    for r in seen:
        total = sum(r["call_classes"].values())
        cells = "".join(
            f'<td class="n"{attrs(data_class=c, data_calls=r["call_classes"].get(c, 0))}>'
            f"{pct(r['call_classes'].get(c, 0) / total)}</td>"
            for c in classes
        )
        body.append(
            f"<tr{attrs(data_model=r['model'], data_service=r['service'])}><td>{esc(r['model'])}</td>"
            f'<td>{esc(r["service"])}</td><td class="n">{total}</td>{cells}</tr>'
        )
    head = "".join(f"<th>{esc(c)}</th>" for c in classes)
    return (
        '<h3>Tool calls by class</h3><table class="summary call-classes"><thead><tr><th>model</th><th>service</th>'
        f"<th>calls</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def toolcall_table(by_model: dict[str, Any]) -> str:
    """Toolcall cases per model and gold label (passes, pass rate), and the checker's classes of the calls."""
    if not by_model:
        return ""
    rows = []
    for model, m in sorted(by_model.items()):
        classes = ", ".join(f"{c} {n}" for c, n in (m.get("call_classes") or {}).items()) or "-"
        for label, g in (m.get("by_label") or {}).items():
            rows.append(
                f"<tr{attrs(data_model=model, data_label=label, data_passed=g['passed'], data_cases=g['cases'])}>"
                f'<td>{esc(model)}</td><td>{esc(label)}</td><td class="n">{esc(g["cases"])}</td>'
                f'<td class="n">{esc(g["passed"])}</td><td class="n">{pct(g.get("pass_rate"))}</td>'
                f"<td>{esc(classes)}</td></tr>"
            )
    return (
        '<h3>Tool calls by gold label</h3><table class="summary toolcall"><thead><tr><th>model</th><th>label</th>'
        "<th>cases</th><th>passed</th><th>pass rate</th><th>classes of the calls (checker)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def leaderboard_rows(series: list[Series]) -> list[Series]:
    return sorted(
        series, key=lambda s: (-(s.overall["pass_at_1"] or 0.0), -(s.overall["pass_at_k"] or 0.0), s.run.index, s.model)
    )


def leaderboard(series: list[Series]) -> str:
    rows = []
    for rank, s in enumerate(leaderboard_rows(series), 1):
        o = s.overall
        k, std = o["attempts"], o["pass_at_1_std"]
        data = attrs(
            **s.keys(),
            data_rank=rank,
            data_pass_at_1=num(o["pass_at_1"]),
            data_std=num(std),
            data_pass_at_k=num(o["pass_at_k"]),
            data_pass_hat_k=num(o["pass_hat_k"]),
            data_k=k,
            data_cost_usd=num(o.get("cost_usd")),
            data_avg_turns=num(o.get("avg_turns")),
        )
        rows.append(
            f"<tr{data}>"
            f'<td class="n">{rank}</td><td>{esc(s.run.label)}</td><td>{esc(s.model)}</td>'
            f'<td class="n">{pct(o["pass_at_1"])}{esc(f" ± {100 * std:.1f}") if std else ""}</td>'
            f'<td class="n">{pct(o["pass_at_k"])} <span class="k">(k={k})</span></td>'
            f'<td class="n">{pct(o["pass_hat_k"])}</td><td class="n">{esc(usd(o.get("cost_usd")))}</td>'
            f'<td class="n">{fmt(o.get("avg_turns"))}</td><td class="n">{esc(o["trials"])}</td></tr>'
        )
    return (
        '<section id="leaderboard-section"><h2>Leaderboard</h2><table id="leaderboard" class="summary">'
        "<thead><tr><th>#</th><th>run</th><th>model</th><th>pass@1 ± std</th><th>pass@k</th><th>pass^k</th>"
        f"<th>cost (total)</th><th>turns (avg)</th><th>trials</th></tr></thead><tbody>{''.join(rows)}</tbody>"
        '</table><p class="note">One row per run and model (over all its services), by pass@1.</p></section>'
    )


CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;margin:24px auto;
max-width:960px;padding:0 16px;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:24px 0 8px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 8px}dt{color:#666}dd{margin:0}
table.summary{border-collapse:collapse;font-size:13px;margin:8px 0;width:100%}
table.summary th,table.summary td{border-bottom:1px solid #e4e4e4;padding:3px 6px;text-align:left}
table.summary td.n{text-align:right;font-variant-numeric:tabular-nums}.k{color:#777}
figure.plot{margin:28px 0;padding:0}figure.plot svg{max-width:100%;height:auto;display:block}
figcaption{color:#444;font-size:13px;margin-top:4px}.note{color:#8a5a00;font-size:13px;margin:4px 0}
svg text{font:12px system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;fill:#222}
svg .tick{fill:#555;font-size:11px}svg .axis-label{font-size:12px;fill:#333}svg .series-label{font-weight:600}
svg .row-label,svg .value{fill:#444;font-size:11px}svg .note-text{fill:#8a5a00;font-size:11px}
svg .grid{stroke:#eee}svg .axis-line{stroke:#888}svg .errorbar{stroke:#222;stroke-width:1.5;fill:none}
svg .stem{stroke:#999;stroke-width:2}
svg .pass-at-k{fill:#4e79a7}svg .pass-hat-k{fill:#fff;stroke:#e15759;stroke-width:2}
svg .p1-tick{stroke:#333;stroke-width:2}svg .box{fill:#f3f3f3;stroke:#bbb}svg .median{stroke:#222;stroke-width:2}
svg .trial{fill-opacity:.75}svg .cost-unknown{stroke-width:2;stroke-dasharray:3 2}
"""


def render_html(runs: list[RunData], title: str | None = None) -> str:
    series = build_series(runs)
    title = title or ("mcpfleet report: " + ", ".join(r.label for r in runs))
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">{len(runs)} run(s), {len(series)} model result(s); generated {esc(now_iso())} '
        "by mcpfleet report.</p>",
    ]
    if len(runs) > 1:
        body.append(leaderboard(series))
    body += [run_header(r) for r in runs]
    if series:
        body.append('<section id="plots"><h2>Plots</h2>')
        body += [
            plot_pass_at_1(series),
            plot_pass_at_k(series),
            plot_cost(series),
            plot_turns(series),
            plot_failures(series),
        ]
        body.append("</section>")
    else:
        body.append('<p class="note">No trial recorded yet: nothing to plot.</p>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write_report(
    refs: list[str], output: Path, endpoint_url: str | None = None, region: str | None = None, title: str | None = None
) -> list[RunData]:
    """Read the runs, write the HTML report; returns the runs (their summaries for the terminal tables)."""
    if output.is_dir():
        raise ReportError(f"--output {output}: is a folder; name the HTML file to write, e.g. {output / 'report.html'}")
    if not output.parent.is_dir():
        raise ReportError(f"--output {output}: no folder {output.parent}; create it, or write the report elsewhere")
    if (root := output_inside_run(output, refs)) is not None:
        raise ReportError(
            f"--output {output}: inside the run folder {root}, whose records it could replace; "
            f"write the report outside it, e.g. -o {root.parent / 'report.html'}"
        )
    runs = load_runs(refs, endpoint_url, region)
    html = render_html(runs, title)
    tmp = output.with_name(f".{output.name}.tmp")
    try:
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ReportError(f"--output {output}: cannot be written ({exc.strerror or exc}); choose another") from None
    return runs
