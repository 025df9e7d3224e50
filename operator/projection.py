"""What status shows of a run: conditions, its figures, the whole status patch, and how a complete run ends.

Pure: the reconciler keeps the run's phase, conditions and state, and writes what these functions project.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcpfleet.operator.phase import TERMINAL, Phase
from mcpfleet.operator.runstate import RunState


def condition(type_: str, ok: bool, reason: str, message: str, at: str) -> dict[str, Any]:
    """A condition as it is now, stamped ``at`` (``transition`` keeps an older stamp)."""
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message[:4000],
        "lastTransitionTime": at,
    }


def transition(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` replacing ``old``: its lastTransitionTime changes only when its status does (the Kubernetes
    convention), so a condition set again with another message keeps the time it became what it is."""
    if old is not None and old.get("status") == new["status"] and old.get("lastTransitionTime"):
        return {**new, "lastTransitionTime": old["lastTransitionTime"]}
    return new


def figures(st: RunState) -> dict[str, Any]:
    """What status shows of the run's state: bounded in size (counts and per model x service figures)."""
    counts = st.counts()
    return {
        "counts": counts,
        "notScored": st.not_scored(),  # infra, provider and config errors: left out of passAt1
        "progress": f"{counts['finished']}/{counts['total']}",
        "passAt1": st.pass_at_1(),
        "results": st.results(),
        "stoppedModels": dict(st.stopped) or None,  # None: a merge patch removes it once resumed
        "spend": st.spend(),  # LLM spend so far and the projected total (None: nothing priced yet)
    }


def status(
    *,
    phase: Phase,
    generation: int | None,
    conditions: Iterable[dict[str, Any]],
    started_at: str | None,
    finished_at: str | None,
    plan_hash: str | None,
    planned_spec: str | None,
    shown: dict[str, Any] | None,
    counts: dict[str, Any] | None,
) -> dict[str, Any]:
    """The status patch. ``planned_spec``: status.plannedSpec if it is to be written (a JSON string: a merge patch
    replaces it whole, a dict would be merged into); ``shown``: the run's ``figures`` (of its state, or of the state
    it had when it failed); ``counts``: status.counts as stored, for a run failed before it was planned again."""
    out: dict[str, Any] = {"phase": phase.value, "observedGeneration": generation, "conditions": list(conditions)}
    if started_at:
        out["startedAt"] = started_at
    if plan_hash:
        out["planHash"] = plan_hash
    if planned_spec is not None:
        out["plannedSpec"] = planned_spec
    out["finishedAt"] = finished_at if phase in TERMINAL else None  # null: removed (a run resumed)
    if shown is not None:
        out.update(shown)
    elif phase in TERMINAL and counts and counts.get("running"):
        # Failed before it was planned again (e.g. found invalid by a restarted operator), its pods deleted.
        out["counts"] = {**counts, "pending": counts.get("pending", 0) + counts["running"], "running": 0}
    return out


# -- a complete run ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    """A Kubernetes event on the run: a Warning, or Normal."""

    warning: bool
    reason: str
    message: str


@dataclass(frozen=True)
class Ending:
    """How a run whose trials are all done (or stopped) ends: its phase, the Complete condition's reason and message
    (and the Failed condition's, when it failed), and the event that announces it, if any."""

    phase: Phase
    reason: str
    message: str
    event: Event | None


def ending(st: RunState) -> Ending:
    """Succeeded when some trial was scored; Failed when models were stopped (their trials wait for a fixing edit)
    or when none was scored (infrastructure or provider errors after their retries: the run measured nothing)."""
    total = len(st.trials)
    if st.stopped:
        unrun = total - len(st.done)
        why = f"{unrun} trial(s) of {', '.join(sorted(st.stopped))} not run; fix the cause and edit the EvalRun"
        return Ending(Phase.FAILED, "ModelsStopped", why, None)
    unscored = st.not_scored()
    if total and not st.any_scored():
        # Some unscored trials among scored ones leave it Succeeded, with counts.infraErrors and status.notScored
        # (and the Complete message) saying how many.
        named = ", ".join(f"{n} {k}" for k, n in unscored.items() if n)
        why = (
            f"none of the {total} trials was scored ({named}); fix the cause, then raise "
            "spec.retries.limit to try them again, or create a new EvalRun"
        )
        return Ending(Phase.FAILED, "NoTrialScored", why, Event(True, "NoTrialScored", why[:1000]))
    skipped = sum(unscored.values())
    note = f", {skipped} not scored (status.notScored)" if skipped else ""
    return Ending(
        Phase.SUCCEEDED,
        "AllTrialsRecorded",
        f"{total} trials recorded{note}; summary.json written",
        Event(False, "Completed", f"{total} trials, pass@1 {st.pass_at_1()}"),
    )
