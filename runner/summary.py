"""summary.json: the run's aggregates over its planned trials, the same for the launcher and the operator."""

from __future__ import annotations

from typing import Any

from .plan import TrialSpec
from .records import now_iso
from .scoring import summarize
from .spec import EvalRun, spec_hash
from .store import ResultStore
from .toolcalls.case_records import breakdown, expand


def build_summary(run: EvalRun, trials: list[TrialSpec], store: ResultStore) -> dict[str, Any]:
    """Aggregate the stored records of the planned trials (records of trials no longer planned are ignored)."""
    wanted = {t.trial_id: t.spec_hash for t in trials}
    results = [r for r in store.iter_results() if wanted.get(r.get("trial_id", "")) == r.get("spec_hash")]
    # A shard's cases count one by one (each a task of its own); every other result as it is.
    scored = list(expand(results))
    out = {
        "run": run.name,
        "spec_hash": spec_hash(run),
        "generated_at": now_iso(),
        "trials_planned": len(trials),
        "trials_recorded": len(results),
        "complete": len(results) == len(trials),
        "rows": summarize(scored, run.spec.attempts),
    }
    if toolcall := breakdown(scored):
        out["toolcall"] = toolcall
    return out
