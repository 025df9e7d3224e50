"""summary.json: the run's aggregates over its planned trials, the same for the launcher and the operator."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from mcpfleet.runner._util.sharing import shared_all
from mcpfleet.runner.plan.trials import Planned
from mcpfleet.runner.report.planned import PLAN_FILE as PLAN_FILE  # re-exported: its readers import it here
from mcpfleet.runner.report.planned import planned as planned
from mcpfleet.runner.report.planned import still_planned as still_planned
from mcpfleet.runner.report.scoring import summarize
from mcpfleet.runner.results.outcome import is_scored
from mcpfleet.runner.results.records import now_iso
from mcpfleet.runner.results.store import ResultStore
from mcpfleet.runner.spec.evalrun import EvalRun
from mcpfleet.runner.spec.load import spec_hash
from mcpfleet.runner.spec.trial import TrialSpec
from mcpfleet.runner.toolcalls.case_records import breakdown, expand


def plan_file(run: EvalRun, trials: Iterable[TrialSpec | Planned]) -> dict[str, Any]:
    """What ``planned`` reads back: written by the launcher when it plans and by the operator when it
    summarises, so that an export or report counts the records summary.json counts, and no other."""
    return {"run": run.name, "spec_hash": spec_hash(run), "trials": {t.trial_id: t.spec_hash for t in trials}}


def build_summary(
    run: EvalRun, trials: Iterable[TrialSpec | Planned], store: ResultStore, stopped: dict[str, str] | None = None
) -> dict[str, Any]:
    """Aggregate the stored records of the planned trials (records of trials no longer planned are ignored).
    ``trials``: the trials, or just their ids and spec hashes (the operator's plan builds no TrialSpec for it).

    ``stopped``: models whose launches were stopped (a configuration error, the retry budget), with why."""
    wanted = {t.trial_id: t.spec_hash for t in trials}
    # Every record at once, its strings shared (a 100,000-trial run's records were 580 MB as decoded).
    results = shared_all(r for r in store.iter_results() if wanted.get(r.get("trial_id", "")) == r.get("spec_hash"))
    # A shard's cases count one by one (each a task of its own); every other result as it is.
    scored = list(expand(results))
    not_scored = Counter(r["failure"] for r in results if not is_scored(r.get("failure")))
    out = {
        "run": run.name,
        "spec_hash": spec_hash(run),
        "generated_at": now_iso(),
        "trials_planned": len(wanted),
        "trials_recorded": len(results),
        "complete": len(results) == len(wanted),
        "not_scored": dict(sorted(not_scored.items())),  # infra, provider and config errors: re-run on resume
        "stopped": dict(sorted((stopped or {}).items())),
        "rows": summarize(scored, run.spec.attempts),
        "harness": harness_counts(results),
    }
    if toolcall := breakdown(scored):
        out["toolcall"] = toolcall
    if any(r.get("variant") for r in scored):
        from mcpfleet.runner.report.compare import compare_all

        baselines: dict[str, str] = {}
        for v in run.spec.servers:  # each service's first listed variant is its baseline
            baselines.setdefault(v.service, v.name)
        out["comparisons"] = compare_all(scored, baselines)
        out["servers"] = server_counts(results)
    return out


def server_counts(records: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per service variant, the servers its records measured (name version tools-digest), with how many each:
    more than one means the server changed mid-run (an image rebuilt), and its scores mix two servers."""
    out: dict[str, dict[str, int]] = {}
    for r in records:
        server = r.get("server") if isinstance(r.get("server"), dict) else None
        if not isinstance(r.get("variant"), str) or server is None:
            continue
        named = f"{server.get('name')} {server.get('version')} {server.get('tools_digest')}"
        key = f"{r['service']}@{r['variant']}"
        out.setdefault(key, {})
        out[key][named] = out[key].get(named, 0) + 1
    return dict(sorted(out.items()))


def mixed_servers(summary: dict[str, Any]) -> list[str]:
    """A warning per variant whose trials measured more than one server (see ``server_counts``)."""
    notes = []
    for key, seen in (summary.get("servers") or {}).items():
        if isinstance(seen, dict) and len(seen) > 1:
            named = ", ".join(f"{k} ({n} trial{'s' if n != 1 else ''})" for k, n in seen.items())
            notes.append(f"{key}: its trials measured {len(seen)} different servers: {named}; scores may mix them")
    return notes


def harness_counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """What ran the records (records.harness_id), with how many each; more than one: see mixed_harness."""
    return dict(sorted(Counter(r["harness"] for r in records if isinstance(r.get("harness"), str)).items()))


def mixed_harness(summary: dict[str, Any]) -> str | None:
    """A warning when the run's records were written by more than one harness (a runner image edited mid-run,
    a resume under another mcpfleet version): its scores may mix two harnesses' behaviour. None otherwise."""
    harness = summary.get("harness")
    if not isinstance(harness, dict) or len(harness) < 2:
        return None
    named = ", ".join(f"{h} ({n} trial{'s' if n != 1 else ''})" for h, n in harness.items())
    return f"this run's trials were run by {len(harness)} harnesses: {named}; scores may not be comparable"
