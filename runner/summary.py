"""summary.json: the run's aggregates over its planned trials, the same for the launcher and the operator."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .outcome import is_scored
from .plan import TrialSpec
from .records import now_iso
from .scoring import summarize
from .spec import EvalRun, spec_hash
from .store import ResultStore
from .toolcalls.case_records import breakdown, expand


def build_summary(
    run: EvalRun, trials: list[TrialSpec], store: ResultStore, stopped: dict[str, str] | None = None
) -> dict[str, Any]:
    """Aggregate the stored records of the planned trials (records of trials no longer planned are ignored).

    ``stopped``: models whose launches were stopped (a configuration error, the retry budget), with why."""
    wanted = {t.trial_id: t.spec_hash for t in trials}
    results = [r for r in store.iter_results() if wanted.get(r.get("trial_id", "")) == r.get("spec_hash")]
    # A shard's cases count one by one (each a task of its own); every other result as it is.
    scored = list(expand(results))
    not_scored = Counter(r["failure"] for r in results if not is_scored(r.get("failure")))
    out = {
        "run": run.name,
        "spec_hash": spec_hash(run),
        "generated_at": now_iso(),
        "trials_planned": len(trials),
        "trials_recorded": len(results),
        "complete": len(results) == len(trials),
        "not_scored": dict(sorted(not_scored.items())),  # infra, provider and config errors: re-run on resume
        "stopped": dict(sorted((stopped or {}).items())),
        "rows": summarize(scored, run.spec.attempts),
        "harness": harness_counts(results),
    }
    if toolcall := breakdown(scored):
        out["toolcall"] = toolcall
    return out


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
