"""Reading trial pods (operator/podview.py): what one pod event means for its try, which listed pods a rebuild
adopts, which vanished without an event, and what a failed pod says, on the API's plain dicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tiny import body, flight, state, trials

from mcpfleet.operator.manifests import ANN_TRIAL, LABEL_RETRY
from mcpfleet.operator.podview import (
    Act,
    claims,
    disruption_seen,
    epoch,
    failure_reason,
    runner_started,
    scheduling_seconds,
    seen,
    termination_message,
    trial_of,
    vanished,
)
from mcpfleet.operator.runstate import InFlight
from mcpfleet.runner.results.outcome import INFRA_ERROR
from mcpfleet.runner.spec.trial import TrialSpec

NOW = 5000.0
DELETING = "1970-01-01T01:30:00Z"  # 5400 s


def pod(
    tid: str = "t", phase: str | None = None, deleting: str | None = None, retry: int | None = None, **status: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"pod-{tid}",
        "annotations": {ANN_TRIAL: tid},
        "creationTimestamp": "1970-01-01T00:10:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = deleting
    if retry is not None:
        meta["labels"] = {LABEL_RETRY: str(retry)}
    return {"metadata": meta, "status": {**({"phase": phase} if phase else {}), **status}}


def disruption(reason: str = "EvictionByEvictionAPI") -> list[dict[str, Any]]:
    return [{"type": "DisruptionTarget", "status": "True", "reason": reason}]


def waiting(reason: str, message: str = "") -> list[dict[str, Any]]:
    return [{"name": "runner", "state": {"waiting": {"reason": reason, "message": message}}}]


@pytest.fixture
def trial(tmp_path: Path) -> TrialSpec:
    return trials(tmp_path, body(tmp_path))[0]


def test_timestamps_read_as_epoch_seconds_or_now() -> None:
    assert epoch("1970-01-01T00:01:00Z", NOW) == 60.0
    assert epoch("1970-01-01T01:01:00+01:00", NOW) == 60.0
    for bad in (None, "", "yesterday", 12):
        assert epoch(bad, NOW) == NOW


def test_a_runner_started_by_its_phase_or_a_container_that_ran() -> None:
    assert runner_started({"phase": "Running"}) and runner_started({"phase": "Unknown"})
    assert not runner_started({"phase": "Pending"}) and not runner_started({})
    ran = {"state": {"terminated": {"startedAt": "1970-01-01T00:00:01Z", "exitCode": 1}}}
    assert runner_started({"phase": "Failed", "containerStatuses": [ran]})
    never = {"state": {"terminated": {"exitCode": 128}}}  # it never started (a failed image, say)
    assert not runner_started({"phase": "Failed", "containerStatuses": [never]})


def test_a_disruption_is_remembered_until_a_live_pod_drops_it() -> None:
    assert (
        disruption_seen(None, "MODIFIED", pod(conditions=disruption("PreemptionByScheduler")))
        == "PreemptionByScheduler"
    )
    assert disruption_seen("EvictionByEvictionAPI", "MODIFIED", pod(conditions=disruption("Other"))) == (
        "EvictionByEvictionAPI"  # the first reason seen stays
    )
    # The drain's last events need not carry the condition: deleting, gone, or stopped, it stays disrupted.
    assert disruption_seen("E", "MODIFIED", pod(deleting=DELETING)) == "E"
    assert disruption_seen("E", "DELETED", pod()) == "E"
    assert disruption_seen("E", "MODIFIED", pod("t", "Failed")) == "E"
    # A live pod whose DisruptionTarget was cleared (no deletion followed) was not disrupted after all.
    assert disruption_seen("E", "MODIFIED", pod("t", "Running")) is None
    assert disruption_seen(None, "MODIFIED", pod("t", "Running")) is None


def test_events_of_a_try_running_as_usual(trial: TrialSpec) -> None:
    inf = flight(trial)
    assert seen("MODIFIED", pod(phase="Running"), inf, NOW).act is Act.NOTHING
    done = seen("MODIFIED", pod(phase="Succeeded"), inf, NOW)
    assert (done.act, done.reason) == (Act.TAKE, None)  # its record decides
    gone = seen("DELETED", pod(phase="Running"), inf, NOW)
    assert (gone.act, gone.reason) == (Act.TAKE, "pod deleted before it finished")
    ending = seen("MODIFIED", pod(phase="Running", deleting=DELETING), inf, NOW)
    assert (ending.act, ending.reason, ending.kill_by) == (Act.ENDING, "pod deleted before it finished", 5400.0)
    inf.ending = NOW  # seen ending already: nothing new
    assert seen("MODIFIED", pod(phase="Running", deleting=DELETING), inf, NOW).act is Act.NOTHING


def test_a_reason_the_operator_gave_is_kept(trial: TrialSpec) -> None:
    inf = flight(trial, reason="pod still Pending after 600 s", ending=NOW)
    assert seen("DELETED", pod(), inf, NOW).reason == "pod still Pending after 600 s"
    assert seen("MODIFIED", pod(phase="Failed"), inf, NOW).reason == "pod still Pending after 600 s"


def test_a_pod_that_cannot_start_is_given_up_with_the_kubelet_s_message(trial: TrialSpec) -> None:
    inf = flight(trial)
    status: dict[str, Any] = {"containerStatuses": waiting("CreateContainerConfigError", 'secret "llm-keys" not found')}
    end = seen("MODIFIED", pod(phase="Pending", **status), inf, NOW)
    assert (end.act, end.gone_later) == (Act.END, False)
    assert end.reason == 'pod cannot start: CreateContainerConfigError: secret "llm-keys" not found'
    pulling: dict[str, Any] = {"initContainerStatuses": waiting("ContainerCreating")}  # it will pass by waiting
    assert seen("MODIFIED", pod(phase="Pending", **pulling), inf, NOW).act is Act.NOTHING
    inf.ending = NOW  # being given up already
    assert seen("MODIFIED", pod(phase="Pending", **status), inf, NOW).act is Act.NOTHING


def test_a_suspended_try_waits_for_its_pod_to_be_gone(trial: TrialSpec) -> None:
    inf = flight(trial, suspended=True, reason="pod deleted: the run was suspended", ending=NOW)
    assert seen("MODIFIED", pod(phase="Failed"), inf, NOW).act is Act.NOTHING
    assert seen("MODIFIED", pod(phase="Running", deleting=DELETING), inf, NOW).act is Act.NOTHING
    gone = seen("DELETED", pod(phase="Failed"), inf, NOW)
    assert (gone.act, gone.reason) == (Act.TAKE, "pod deleted: the run was suspended")


def test_a_disrupted_try_is_taken_once_its_pod_is_gone(trial: TrialSpec) -> None:
    inf = flight(trial, disrupted="EvictionByEvictionAPI")
    ending = seen("MODIFIED", pod(phase="Running", deleting=DELETING), inf, NOW)
    assert (ending.act, ending.reason, ending.kill_by) == (Act.ENDING, "pod disrupted (EvictionByEvictionAPI)", 5400.0)
    # Stopped on its node (a kubelet eviction), not deleted: the operator removes it, and waits for DELETED.
    stopped = seen("MODIFIED", pod(phase="Failed"), inf, NOW)
    assert (stopped.act, stopped.reason, stopped.gone_later) == (Act.END, "pod disrupted (EvictionByEvictionAPI)", True)
    gone = seen("DELETED", pod(phase="Failed"), inf, NOW)
    assert (gone.act, gone.reason) == (Act.TAKE, "pod disrupted (EvictionByEvictionAPI)")
    inf.ending = NOW
    assert seen("MODIFIED", pod(phase="Failed"), inf, NOW).act is Act.NOTHING


def test_a_rebuild_adopts_the_current_try_of_each_unfinished_trial(tmp_path: Path) -> None:
    ts = trials(tmp_path, body(tmp_path, tasks=2))
    st = state(ts)
    a, b, c, d = (t.trial_id for t in ts)
    st.done[a] = {"passed": True, "failure": None, "model": "a", "service": "filesystem", "attempt": 1}
    st.retries[b] = 1  # its first try failed: a pod of try 0 is an old one
    st.in_flight[d] = InFlight(ts[3], "pod-d", 0, 1.0)  # tracked already
    pods = [
        pod(a),  # recorded: drained
        pod(b, retry=0),  # an older try: drained
        pod(b, "Running", retry=1),  # its current try: adopted
        pod(c, deleting=DELETING),  # adopted, being deleted
        pod(c),  # a second pod of the same trial: drained
        pod(d),  # in flight already: drained
        pod("not-this-plan"),
        {"metadata": {"name": "no-annotation"}},
    ]
    got = [(p["metadata"]["name"], cl) for p, cl in claims(pods, st, NOW)]
    adopted = {name: cl for name, cl in got if cl is not None}
    assert [name for name, _ in got] == [p["metadata"]["name"] for p in pods]  # list order kept
    assert set(adopted) == {f"pod-{b}", f"pod-{c}"}
    cb, cc = adopted[f"pod-{b}"], adopted[f"pod-{c}"]
    assert (cb.tid, cb.retry, cb.created, cb.deleting) == (b, 1, 600.0, None)
    assert (cc.tid, cc.retry, cc.deleting) == (c, 0, 5400.0)
    assert got[4][1] is None  # the second pod of c


def test_a_pod_missing_from_two_lists_in_a_row_has_vanished() -> None:
    gone, unlisted = vanished({"a"}, ["a", "b", "c"], set())
    assert gone == [] and unlisted == {"b", "c"}
    gone, unlisted = vanished({"a", "c"}, ["a", "b", "c", "d"], unlisted)  # c is back; d missing for the first time
    assert gone == ["b"] and unlisted == {"d"}


def test_a_failure_reason_says_what_the_pod_and_runner_said() -> None:
    stopped = pod(
        phase="Failed",
        reason="Evicted",
        containerStatuses=[{"name": "runner", "state": {"terminated": {"exitCode": 137, "message": " OOM \n"}}}],
    )
    assert failure_reason(stopped, None) == "pod Failed; Evicted; runner exit 137; OOM; no stored record"
    assert failure_reason({"metadata": {}}, {"failure": None}) == "pod gone; record does not match the trial"
    reported = {"failure": INFRA_ERROR, "error": "MCP server did not start"}
    assert failure_reason(stopped, reported) == "runner reported: MCP server did not start"


def test_the_runner_s_termination_message_and_scheduling_time() -> None:
    summary = {"passed": True}
    term = {"name": "runner", "state": {"terminated": {"message": json.dumps(summary)}}}
    assert termination_message(pod(containerStatuses=[term])) == summary
    garbled = {"name": "runner", "state": {"terminated": {"message": "{not json"}}}
    assert termination_message(pod(containerStatuses=[garbled])) is None
    other = {"name": "mcp", "state": {"terminated": {"message": json.dumps(summary)}}}
    assert termination_message(pod(containerStatuses=[other])) is None
    assert scheduling_seconds(pod(startTime="1970-01-01T00:10:30Z"), NOW) == 30.0
    assert scheduling_seconds(pod(), NOW) is None
    assert trial_of(pod("x")) == "x" and trial_of({"metadata": {}}) == ""
