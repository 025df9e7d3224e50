"""Which spec edits a run takes: what may change once trials exist, and what is kept as planned instead.

Pure: specs are parsed here (``parse_evalrun`` reads nothing); planning, which may fetch a pack, is the
reconciler's, and it acts on the decisions (status.plannedSpec, the Valid condition, Failed).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from mcpfleet.runner.spec.evalrun import FROZEN_OUTPUT, RESULT_FIELDS, EvalRun, Output
from mcpfleet.runner.spec.load import SpecError, parse_evalrun
from mcpfleet.runner.spec.task import TaskError


def spec_problems(exc: BaseException) -> list[str]:
    """What an exception from validating or planning an EvalRun says, for its InvalidSpec condition: the spec's
    problems, a pack's error as it is, anything else (a bug, a pack the checks missed) named with its type."""
    if isinstance(exc, SpecError):
        return list(exc.problems)
    if isinstance(exc, (TaskError, ValueError)):
        return [str(exc)]
    text = " ".join(str(exc).split())[:500]
    return [f"the run could not be planned: {type(exc).__name__}{': ' + text if text else ''}"]


def changed(before: EvalRun | None, after: EvalRun) -> list[str]:
    """The frozen fields (names of ``frozen_view``) ``after`` differs in from ``before``."""
    was = before.spec.frozen_view() if before is not None else {}
    return [f for f, v in after.spec.frozen_view().items() if v != was.get(f)]


def refused_message(fields: list[str], generation: object) -> str:
    """The Valid=False message of a refused edit (no fields named: every result field, the edit being unknown)."""
    named = ", ".join(f"spec.{f}" for f in fields or RESULT_FIELDS)
    return (
        f"{named} cannot change once trials exist (generation {generation} is not applied); revert the edit, or "
        "create a new EvalRun"
    )


def keep_frozen(spec: dict[str, Any], planned_spec: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    """The edited spec with its refused fields (names of ``frozen_view``) as planned: an edit that also touches a
    frozen field still applies what may change (suspend, concurrency, retries, deadlines, pod settings)."""
    out = copy.deepcopy(spec)
    for f in fields:
        if f == "output":  # only where the records are is frozen, not how they are reached
            mine, theirs = dict(out.get("output") or {}), planned_spec.get("output") or {}
            for key in (Output.model_fields[n].alias or n for n in FROZEN_OUTPUT):
                if key in theirs:
                    mine[key] = copy.deepcopy(theirs[key])
                else:
                    mine.pop(key, None)
            out["output"] = mine
        elif f in planned_spec:
            out[f] = copy.deepcopy(planned_spec[f])
        else:
            out.pop(f, None)
    return out


def merged_edit(
    raw: dict[str, Any], planned_spec: Any, refused: list[str], planned_run: EvalRun
) -> tuple[EvalRun, dict[str, Any]] | None:
    """The edited object with its refused frozen fields as planned (``keep_frozen``), parsed; None when that is
    not a valid spec with the planned frozen fields (then the whole edit is refused)."""
    if not isinstance(planned_spec, dict) or not isinstance(raw.get("spec"), dict):
        return None
    spec = keep_frozen(raw["spec"], planned_spec, refused)
    try:
        run = parse_evalrun({**raw, "spec": spec})
    except (ValueError, SpecError):
        return None
    if run.spec.frozen_view() != planned_run.spec.frozen_view():
        return None
    return run, spec


# -- an edit seen while the run goes ----------------------------------------------------------------
class EditKind(Enum):
    APPLY = "apply"  # the edit applies whole
    MERGED = "merged"  # its frozen fields stay as planned, the rest applies, if the plan stays the same
    REFUSED = "refused"  # refused whole (Valid=False): the run goes on as planned


@dataclass(frozen=True)
class Edit:
    """What an edit does. ``run``, ``spec``: the run as it goes on and its spec for status.plannedSpec (APPLY,
    MERGED); ``refused``: the frozen fields kept as planned; ``moves_output``: (APPLY) a new output before any
    trial, where the records are read from now on."""

    kind: EditKind
    run: EvalRun | None = None
    spec: Any = None
    refused: list[str] = field(default_factory=list)
    moves_output: bool = False


def edit(
    raw: dict[str, Any], run: EvalRun, planned: EvalRun, planned_spec: Any, *, plan_changed: bool, trials_exist: bool
) -> Edit:
    """An edit of a run planned as ``planned`` (its spec ``planned_spec``), the object ``raw`` parsed as ``run``.
    ``plan_changed``: its trials differ from the planned ones. Once trials exist what they measure, and where their
    records are, cannot change (records read from a new output would miss every one written to the old)."""
    fields = changed(planned, run)
    if (plan_changed or "output" in fields) and trials_exist:
        merged = merged_edit(raw, planned_spec, fields, planned) if fields else None
        if merged is None or merged[1] == planned_spec:  # nothing else changed (or no spec to keep them from)
            return Edit(EditKind.REFUSED, refused=fields or list(RESULT_FIELDS))
        return Edit(EditKind.MERGED, merged[0], merged[1], fields)
    return Edit(EditKind.APPLY, run, raw.get("spec"), moves_output="output" in fields)


# -- the spec a run is picked up with (a restart, a takeover) ----------------------------------------
@dataclass(frozen=True)
class Resumed:
    """A run that ran, picked up with the spec status.plannedSpec keeps: ``refused``, the frozen fields the object
    differs in (an edit the operator that watched refused, or one made while none did)."""

    run: EvalRun
    spec: Any
    refused: list[str]


def resumed(raw: dict[str, Any], planned_text: Any, run: EvalRun) -> Resumed | None:
    """The run as it goes on: the object's, with any frozen field it changed as planned (status.plannedSpec) and
    what else it changes applied (suspend, concurrency, ...); None when status has no planned spec, or one this
    operator cannot read: the plan hash alone then guards the run, as before plannedSpec existed."""
    if not isinstance(planned_text, str):
        return None
    try:
        spec = json.loads(planned_text)
        kept = parse_evalrun({**raw, "spec": spec})
    except (ValueError, SpecError):
        return None
    refused = changed(kept, run)
    if not refused:  # the object's spec is the planned one, but for what may change
        return Resumed(run, raw.get("spec"), [])
    if (merged := merged_edit(raw, spec, refused, kept)) is not None:
        return Resumed(*merged, refused)
    return Resumed(kept, spec, refused)


class Replan(Enum):
    PLAN = "plan"  # run as planned now
    UNCHANGED = "unchanged"  # it succeeded, and the edit does not change its results: nothing to redo
    PLAN_CHANGED = "plan_changed"  # planned from the same spec, yet its trials differ: the tasks changed under it
    REFUSED = "refused"  # edited while no operator watched, after trials ran, and no planned spec to keep


def replan(stored_hash: str | None, new_hash: str, *, ran: bool, kept: bool, succeeded: bool) -> Replan:
    """A run picked up again: ``stored_hash`` is status.planHash, ``new_hash`` its plan's now; ``ran``: trials ran;
    ``kept``: status.plannedSpec said which spec it was planned with; ``succeeded``: status.phase is Succeeded."""
    if stored_hash not in (None, new_hash) and ran:
        return Replan.PLAN_CHANGED if kept else Replan.REFUSED
    if succeeded and stored_hash == new_hash:
        return Replan.UNCHANGED
    return Replan.PLAN
