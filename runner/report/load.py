"""Reading the runs a report shows: each run's summary, recomputed from its trial records when incomplete.

A run is read from its root, a local folder or ``s3://bucket/prefix/<run>[/<uid>]``: summary.json when it is
present and complete, and always the trial records (result.json), which give the distributions. Without a
complete summary.json (a run still going, or stopped early) the aggregates are recomputed from the records
with ``runner.scoring.summarize``, so a partial run can be reported too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mcpfleet.runner._util.overlap import inside, resolved
from mcpfleet.runner.report.roots import ReportError as ReportError  # re-exported: its callers import it here
from mcpfleet.runner.report.roots import local_root
from mcpfleet.runner.report.roots import open_run as open_run
from mcpfleet.runner.report.scoring import ALL, ScoreRow, row_problem, summarize, value_problem
from mcpfleet.runner.report.summary import harness_counts, mixed_harness, still_planned
from mcpfleet.runner.results.records import now_iso
from mcpfleet.runner.results.store import ResultStore
from mcpfleet.runner.spec.evalrun import MAX_ATTEMPTS
from mcpfleet.runner.toolcalls.case_records import breakdown, expand

#: Record fields the report keeps (a result.json also holds per-turn details it does not need).
_KEEP: tuple[str, ...] = ("trial_id", "run", "model", "service", "variant", "server", "task_id", "attempt")
_KEEP += ("passed", "failure", "totals", "timings")


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


def output_inside_run(output: Path, refs: Iterable[str]) -> Path | None:
    """The local run folder among ``refs`` (resolved) that ``output`` would land in, else None: a report or an
    export written there would replace or sit among the run's own records (result.json, summary.json,
    run.json). S3 runs cannot be reached by a local path."""
    for ref in refs:
        if "://" in ref:
            continue
        root = resolved(local_root(ref))
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
