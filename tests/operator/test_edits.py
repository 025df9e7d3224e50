"""Which spec edits a run takes (operator/edits.py): frozen fields once trials exist, what of an edit still applies,
the spec a restarted operator picks a run up with, and whether it plans it again; on parsed specs, no API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tiny import body, edited, parsed

from mcpfleet.operator.edits import (
    EditKind,
    Replan,
    changed,
    edit,
    keep_frozen,
    merged_edit,
    refused_message,
    replan,
    resumed,
    spec_problems,
)
from mcpfleet.runner.spec.evalrun import RESULT_FIELDS
from mcpfleet.runner.spec.load import SpecError
from mcpfleet.runner.spec.task import TaskError


def test_spec_problems_name_what_is_wrong() -> None:
    assert spec_problems(SpecError(["spec.attempts: too big", "spec.models: empty"])) == [
        "spec.attempts: too big",
        "spec.models: empty",
    ]
    assert spec_problems(TaskError("no task matches")) == ["no task matches"]
    assert spec_problems(ValueError("spec.output.uri: relative")) == ["spec.output.uri: relative"]
    assert spec_problems(TypeError("string   indices\n must be integers")) == [
        "the run could not be planned: TypeError: string indices must be integers"
    ]
    assert spec_problems(KeyError()) == ["the run could not be planned: KeyError"]


def test_changed_lists_the_frozen_fields_an_edit_touches(tmp_path: Path) -> None:
    raw = body(tmp_path)
    run = parsed(raw)
    assert changed(run, parsed(edited(raw, concurrency={"total": 7}, suspend=True))) == []
    assert changed(run, parsed(edited(raw, attempts=2))) == ["attempts"]
    assert changed(run, parsed(edited(raw, output={"uri": str(tmp_path / "elsewhere")}))) == ["output"]
    # Not where records are, only how they are reached: not frozen.
    assert changed(run, parsed(edited(raw, output={**raw["spec"]["output"], "credentialsSecretRef": "s3"}))) == []
    assert set(changed(None, run)) == set(run.spec.frozen_view())


def test_keep_frozen_restores_refused_fields_and_keeps_the_rest() -> None:
    planned: dict[str, Any] = {
        "attempts": 1,
        "concurrency": {"total": 2},
        "output": {"uri": "s3://a/runs", "endpointUrl": "http://a"},
    }
    spec: dict[str, Any] = {
        "attempts": 3,
        "concurrency": {"total": 9},
        "toolcalls": {"x": 1},
        "output": {"uri": "s3://b/runs", "credentialsSecretRef": "new"},
    }
    out = keep_frozen(spec, planned, ["attempts", "toolcalls", "output"])
    assert out == {
        "attempts": 1,
        "concurrency": {"total": 9},  # not refused: the edit's
        "output": {"uri": "s3://a/runs", "endpointUrl": "http://a", "credentialsSecretRef": "new"},
    }
    assert spec["attempts"] == 3 and "toolcalls" in spec  # the edit itself is left as it was
    out["output"]["uri"] = "changed"
    assert planned["output"]["uri"] == "s3://a/runs"  # copies, not the planned spec's own objects


def test_merged_edit_is_the_edit_with_the_planned_frozen_fields(tmp_path: Path) -> None:
    raw = body(tmp_path)
    planned = parsed(raw)
    edit_raw = edited(raw, attempts=2, concurrency={"total": 5})
    merged = merged_edit(edit_raw, raw["spec"], ["attempts"], planned)
    assert merged is not None
    run, spec = merged
    assert run.spec.attempts == 1 and run.spec.concurrency.total == 5 and spec["attempts"] == 1
    assert merged_edit(edit_raw, None, ["attempts"], planned) is None  # no planned spec to keep them from
    # Keeping attempts as planned does not undo a models edit: not the planned frozen fields, refused whole.
    models = [{"name": "c", "model": "scripted/oracle"}]
    assert merged_edit(edited(raw, attempts=2, models=models), raw["spec"], ["attempts"], planned) is None


def test_an_edit_before_any_trial_exists_applies_whole(tmp_path: Path) -> None:
    raw = body(tmp_path)
    run = parsed(raw)
    new = edited(raw, attempts=2)
    change = edit(new, parsed(new), run, raw["spec"], plan_changed=True, trials_exist=False)
    assert change.kind is EditKind.APPLY and change.run is not None and change.run.spec.attempts == 2
    assert change.spec == new["spec"] and change.refused == [] and not change.moves_output
    moved = edited(raw, output={"uri": str(tmp_path / "elsewhere")})
    change = edit(moved, parsed(moved), run, raw["spec"], plan_changed=False, trials_exist=False)
    assert change.kind is EditKind.APPLY and change.moves_output


def test_an_edit_of_what_does_not_change_results_applies_once_trials_exist(tmp_path: Path) -> None:
    raw = body(tmp_path)
    new = edited(raw, concurrency={"total": 9}, suspend=True)
    change = edit(new, parsed(new), parsed(raw), raw["spec"], plan_changed=False, trials_exist=True)
    assert change.kind is EditKind.APPLY and change.refused == [] and change.spec == new["spec"]


def test_a_frozen_field_edit_once_trials_exist_keeps_it_as_planned_and_applies_the_rest(tmp_path: Path) -> None:
    raw = body(tmp_path)
    new = edited(raw, attempts=2, concurrency={"total": 9})
    change = edit(new, parsed(new), parsed(raw), raw["spec"], plan_changed=True, trials_exist=True)
    assert change.kind is EditKind.MERGED and change.refused == ["attempts"]
    assert change.run is not None and change.run.spec.attempts == 1 and change.run.spec.concurrency.total == 9
    moved = edited(raw, output={"uri": str(tmp_path / "elsewhere")}, suspend=True)
    change = edit(moved, parsed(moved), parsed(raw), raw["spec"], plan_changed=False, trials_exist=True)
    assert change.kind is EditKind.MERGED and change.refused == ["output"]
    assert change.run is not None and change.run.spec.output.uri == str(tmp_path / "out") and change.run.spec.suspend


def test_a_frozen_field_edit_once_trials_exist_and_nothing_else_is_refused(tmp_path: Path) -> None:
    raw = body(tmp_path)
    new = edited(raw, attempts=2)
    change = edit(new, parsed(new), parsed(raw), raw["spec"], plan_changed=True, trials_exist=True)
    assert (change.kind, change.refused, change.run) == (EditKind.REFUSED, ["attempts"], None)
    # The plan changed though no frozen field did (the tasks changed under the run): every result field is named.
    change = edit(raw, parsed(raw), parsed(raw), raw["spec"], plan_changed=True, trials_exist=True)
    assert (change.kind, change.refused) == (EditKind.REFUSED, list(RESULT_FIELDS))
    change = edit(new, parsed(new), parsed(raw), None, plan_changed=True, trials_exist=True)
    assert change.kind is EditKind.REFUSED  # no planned spec: nothing to keep the frozen fields from


def test_a_run_picked_up_again_keeps_the_spec_it_was_planned_with(tmp_path: Path) -> None:
    raw = body(tmp_path)
    planned = json.dumps(raw["spec"])
    # The object is the planned spec but for what may change: it is taken as it is.
    same = edited(raw, suspend=True)
    got = resumed(same, planned, parsed(same))
    assert got is not None and got.refused == [] and got.run.spec.suspend and got.spec == same["spec"]
    # An edit of a frozen field made while no operator watched: kept as planned, the rest applies.
    new = edited(raw, attempts=2, concurrency={"total": 9})
    got = resumed(new, planned, parsed(new))
    assert got is not None and got.refused == ["attempts"]
    assert got.run.spec.attempts == 1 and got.run.spec.concurrency.total == 9 and got.spec["attempts"] == 1
    # Whose rest is no valid spec with the planned frozen fields: the planned spec as it was.
    bad = edited(raw, attempts=2, concurrency={"total": 0})
    got = resumed(bad, planned, parsed(new))
    assert got is not None and got.refused == ["attempts"] and got.spec == json.loads(planned)
    assert got.run.spec.attempts == 1 and got.run.spec.concurrency.total != 0


@pytest.mark.parametrize("planned", [None, 42, "{not json", json.dumps({"attempts": "many"})])
def test_no_readable_planned_spec_leaves_the_plan_hash_alone_to_guard(tmp_path: Path, planned: object) -> None:
    raw = body(tmp_path)
    assert resumed(raw, planned, parsed(raw)) is None


def test_replan_decides_what_a_restarted_operator_does() -> None:
    assert replan(None, "h", ran=False, kept=False, succeeded=False) is Replan.PLAN
    assert replan("h", "h", ran=True, kept=True, succeeded=False) is Replan.PLAN
    assert replan("old", "h", ran=False, kept=True, succeeded=False) is Replan.PLAN  # no trial ran: plan afresh
    assert replan("h", "h", ran=True, kept=True, succeeded=True) is Replan.UNCHANGED
    assert replan(None, "h", ran=False, kept=False, succeeded=True) is Replan.PLAN
    assert replan("old", "h", ran=True, kept=True, succeeded=True) is Replan.PLAN_CHANGED
    assert replan("old", "h", ran=True, kept=False, succeeded=False) is Replan.REFUSED


def test_the_refused_message_names_the_fields_and_generation() -> None:
    assert refused_message(["attempts"], 4).startswith("spec.attempts cannot change once trials exist (generation 4")
    assert refused_message([], 2).startswith(", ".join(f"spec.{f}" for f in RESULT_FIELDS) + " cannot change")
