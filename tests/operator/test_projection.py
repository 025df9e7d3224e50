"""What status shows (operator/projection.py) and the Phase enum (operator/phase.py): conditions and their transition
times, the status patch, and how a complete run ends; on a RunState and plain values, no API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tiny import body, state, trials

from mcpfleet.operator.phase import POD_ENDED, TERMINAL, Phase, PodPhase
from mcpfleet.operator.projection import condition, ending, figures, status, transition
from mcpfleet.operator.runstate import RunState
from mcpfleet.runner.results.outcome import BUDGET_EXHAUSTED, CONFIG_ERROR, INFRA_ERROR, PROVIDER_ERROR


def run_state(tmp_path: Path) -> RunState:
    return state(trials(tmp_path, body(tmp_path, tasks=2)))  # 4 trials: 2 tasks x models a, b


def finish(st: RunState, tid: str, passed: bool = False, failure: str | None = None) -> None:
    t = st.trials[tid]
    st.finished(tid, {"passed": passed, "failure": failure, "model": t.model.name, "service": t.service, "attempt": 1})


def test_phases_are_the_strings_status_has_always_carried() -> None:
    assert [p.value for p in Phase] == ["Pending", "Running", "Suspended", "Succeeded", "Failed"]
    assert Phase.FAILED == "Failed" and "Succeeded" in TERMINAL and json.dumps(Phase.RUNNING) == '"Running"'
    assert Phase.read("Failed") is Phase.FAILED and Phase.read("Bogus") is None and Phase.read(None) is None
    assert Phase.FAILED.terminal and not Phase.SUSPENDED.terminal
    assert "Failed" in POD_ENDED and PodPhase.UNKNOWN not in POD_ENDED


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    first = condition("Valid", False, "ImmutableField", "spec.attempts cannot change", "T1")
    assert first == {
        "type": "Valid",
        "status": "False",
        "reason": "ImmutableField",
        "message": "spec.attempts cannot change",
        "lastTransitionTime": "T1",
    }
    again = transition(first, condition("Valid", False, "ImmutableField", "spec.models cannot change", "T2"))
    assert again["lastTransitionTime"] == "T1" and again["message"] == "spec.models cannot change"
    flipped = transition(again, condition("Valid", True, "Planned", "4 trials planned", "T3"))
    assert flipped["lastTransitionTime"] == "T3" and flipped["status"] == "True"
    assert transition(None, first) is first
    assert transition({"status": "False"}, first)["lastTransitionTime"] == "T1"  # an old one without a time
    assert len(condition("Failed", True, "X", "m" * 5000, "T")["message"]) == 4000


def test_figures_are_counts_and_rates_never_per_trial_lists(tmp_path: Path) -> None:
    st = run_state(tmp_path)
    a, b, c, _ = st.order
    finish(st, a, passed=True)
    finish(st, b, failure=INFRA_ERROR)
    st.launched(st.trials[c], "pod-c", 0, 1.0)
    st.stop_model("b", "config_error: no key")
    shown = figures(st)
    assert shown["counts"] == {
        "total": 4,
        "pending": 1,
        "waitingAdmission": 0,
        "running": 1,
        "finished": 2,
        "passed": 1,
        "failed": 0,
        "infraErrors": 1,
        "retries": 0,
    }
    assert shown["progress"] == "2/4" and shown["stoppedModels"] == {"b": "config_error: no key"}
    assert shown["notScored"] == {BUDGET_EXHAUSTED: 0, CONFIG_ERROR: 0, INFRA_ERROR: 1, PROVIDER_ERROR: 0}
    assert shown["passAt1"] == "1.00" and [r["model"] for r in shown["results"]] == ["a"]
    st.resume_models()
    assert figures(st)["stoppedModels"] is None  # a merge patch removes it


def patch(**kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "phase": Phase.RUNNING,
        "generation": 3,
        "conditions": [],
        "started_at": None,
        "finished_at": None,
        "plan_hash": None,
        "planned_spec": None,
        "shown": None,
        "counts": None,
    }
    return status(**{**args, **kw})


def test_the_status_patch() -> None:
    out = patch()
    assert out == {"phase": "Running", "observedGeneration": 3, "conditions": [], "finishedAt": None}
    assert type(out["phase"]) is str  # a plain string, whatever serialises it (json, yaml)
    out = patch(started_at="S", plan_hash="abc", planned_spec='{"a":1}', shown={"progress": "1/2"})
    assert (out["startedAt"], out["planHash"], out["plannedSpec"], out["progress"]) == ("S", "abc", '{"a":1}', "1/2")
    # finishedAt is written only in a terminal phase, else null (a resumed run loses it).
    assert patch(phase=Phase.SUSPENDED, finished_at="F")["finishedAt"] is None
    assert patch(phase=Phase.SUCCEEDED, finished_at="F")["finishedAt"] == "F"


def test_a_run_failed_before_it_was_planned_again_shows_its_pods_stopped() -> None:
    counts = {"total": 4, "pending": 1, "running": 2, "finished": 1}
    out = patch(phase=Phase.FAILED, counts=counts)
    assert out["counts"] == {"total": 4, "pending": 3, "running": 0, "finished": 1}
    assert counts["running"] == 2  # status as stored is left alone
    assert "counts" not in patch(phase=Phase.RUNNING, counts=counts)  # not failed: nothing to say
    assert patch(phase=Phase.FAILED, counts=counts, shown={"counts": {"x": 1}})["counts"] == {"x": 1}


def test_a_run_with_some_trial_scored_succeeds(tmp_path: Path) -> None:
    st = run_state(tmp_path)
    for i, tid in enumerate(st.order):
        finish(st, tid, passed=i == 0, failure=PROVIDER_ERROR if i == 3 else None)
    end = ending(st)
    assert (end.phase, end.reason) == (Phase.SUCCEEDED, "AllTrialsRecorded")
    assert end.message == "4 trials recorded, 1 not scored (status.notScored); summary.json written"
    assert end.event is not None and not end.event.warning and end.event.reason == "Completed"
    assert end.event.message == f"4 trials, pass@1 {st.pass_at_1()}"
    finish(st, st.order[3])
    assert ending(st).message == "4 trials recorded; summary.json written"


def test_a_run_that_measured_nothing_fails(tmp_path: Path) -> None:
    st = run_state(tmp_path)
    for i, tid in enumerate(st.order):
        finish(st, tid, failure=INFRA_ERROR if i else PROVIDER_ERROR)
    end = ending(st)
    assert (end.phase, end.reason) == (Phase.FAILED, "NoTrialScored")
    assert end.message.startswith("none of the 4 trials was scored (3 infra_error, 1 provider_error); fix the cause")
    assert end.event is not None and end.event.warning and end.event.reason == "NoTrialScored"


def test_a_run_with_stopped_models_fails_until_an_edit_resumes_them(tmp_path: Path) -> None:
    st = run_state(tmp_path)
    finish(st, st.order[0], passed=True)
    finish(st, st.order[2], passed=True)
    st.stop_model("b", "RetryBudget")
    end = ending(st)
    assert (end.phase, end.reason, end.event) == (Phase.FAILED, "ModelsStopped", None)
    assert end.message == "2 trial(s) of b not run; fix the cause and edit the EvalRun"


def test_a_run_of_no_trials_is_no_failure_to_score() -> None:
    end = ending(RunState.plan([], retry_limit=1))
    assert (end.phase, end.message) == (Phase.SUCCEEDED, "0 trials recorded; summary.json written")
