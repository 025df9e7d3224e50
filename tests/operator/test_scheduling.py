"""Scheduling problems explained (operator/scheduling.py): what holds a Pending pod up, one aggregated cause per
reason with how many trials it affects, the PodsScheduled condition and its events; a container restarted under a
running trial (an OOM-killed MCP sidecar) ends the try as an infrastructure error, never scored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_podview import NOW, pod, waiting
from tiny import body, flight, state, trials

from mcpfleet.operator.causes import infra_cause
from mcpfleet.operator.podview import Act, failure_reason, seen
from mcpfleet.operator.scheduling import (
    PARK_AFTER_SECONDS,
    REPORT_AFTER_SECONDS,
    Blocked,
    Tracker,
    blocked,
    causes,
    condition,
    event_message,
    events_due,
    park_due,
    requeue_delay,
    restarted,
)
from mcpfleet.operator.verdict import Kind, judge

CPU = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims."
TAINT = "0/2 nodes are available: 2 node(s) had untolerated taint {pool: gpu}."
SELECTOR = "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."


def unschedulable(message: str, tid: str = "t") -> dict[str, Any]:
    cond = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]
    return pod(tid, phase="Pending", conditions=cond)


def test_a_pending_pod_says_what_holds_it_up() -> None:
    for message in (CPU, TAINT, SELECTOR):
        assert blocked(unschedulable(message)) == Blocked("Unschedulable", message)
    pulled = pod(phase="Pending", containerStatuses=waiting("ImagePullBackOff", 'Back-off pulling image "x:1"'))
    assert blocked(pulled) == Blocked("ImagePullBackOff", 'container runner: Back-off pulling image "x:1"')
    secret = pod(phase="Pending", containerStatuses=waiting("CreateContainerConfigError", 'secret "keys" not found'))
    assert blocked(secret) == Blocked("CreateContainerConfigError", 'container runner: secret "keys" not found')
    assert blocked(pod(phase="Pending")) is None and blocked(pod(phase="Running")) is None
    scheduled = [{"type": "PodScheduled", "status": "True"}]
    assert blocked(pod(phase="Pending", conditions=scheduled, containerStatuses=waiting("ContainerCreating"))) is None


def test_one_cause_per_reason_counting_the_trials_it_holds_up_past_the_threshold() -> None:
    late = NOW - REPORT_AFTER_SECONDS - 1
    seen_: dict[str, tuple[float, Blocked]] = {
        # The same cause in other words of number (cluster size changes): one cause.
        "a.1": (late, Blocked("Unschedulable", CPU)),
        "a.2": (late, Blocked("Unschedulable", CPU.replace("0/3", "0/4").replace(" 3 ", " 4 "))),
        "a.3": (NOW - 1, Blocked("Unschedulable", CPU)),  # Pending for a second: the scheduler may still place it
        "b.1": (late, Blocked("Unschedulable", TAINT)),
        "c.1": (NOW, Blocked("CreateContainerConfigError", 'container runner: secret "keys" not found')),
    }
    found = causes(seen_, NOW)
    assert [(c.reason, c.trials, c.example) for c in found] == [
        ("Unschedulable", 2, "a.1"),
        ("CreateContainerConfigError", 1, "c.1"),  # given up at once (and retried): never waits the threshold
        ("Unschedulable", 1, "b.1"),
    ]
    status, reason, message = condition(found)
    assert (status, reason) == ("False", "Unschedulable")
    assert message.startswith("4 trials held up Pending: Unschedulable (2 trials): 0/3 nodes are available: 3 Insu")
    assert 'CreateContainerConfigError (1 trial): container runner: secret "keys" not found' in message
    assert condition([]) == ("True", "Scheduled", "no trial pod is held up Pending")
    assert event_message(found[0]).startswith("2 trials held up Pending: Unschedulable: 0/3 nodes are available")


def test_an_event_per_cause_when_it_appears_and_when_its_count_changes_at_most_every_10_minutes() -> None:
    tracker = Tracker()
    for i in range(5):  # five pods, one cause: one event, not five
        tracker.see(f"m.{i}", unschedulable(SELECTOR, f"m.{i}"), started=False, now=NOW)
    cond, due = tracker.report(NOW + REPORT_AFTER_SECONDS)
    assert cond is not None and cond[0] == "False" and cond[2].startswith("5 trials held up Pending")
    assert [(c.trials, c.message) for c in due] == [(5, SELECTOR)]
    assert tracker.report(NOW + REPORT_AFTER_SECONDS + 1) == (None, [])  # nothing new: nothing written or posted
    tracker.see("m.0", pod("m.0", phase="Running"), started=True, now=NOW + 40)  # one got a node
    cond, due = tracker.report(NOW + 41)
    assert cond is not None and cond[2].startswith("4 trials") and due == []  # the count is news in 10 minutes
    assert [c.trials for c in tracker.report(NOW + 700)[1]] == [4]
    tracker.forget([f"m.{i}" for i in range(5)])
    cond, due = tracker.report(NOW + 701)
    assert cond == ("True", "Scheduled", "no trial pod is held up Pending") and due == []
    assert events_due([], {}, NOW) == []
    # A run whose pods never waited writes no condition at all.
    assert Tracker().report(NOW) == (None, [])


def oom(name: str = "mcp", count: int = 1) -> dict[str, Any]:
    return {
        "name": name,
        "restartCount": count,
        "state": {"running": {"startedAt": "1970-01-01T00:20:00Z"}},
        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
    }


def test_an_oom_killed_sidecar_restarted_under_the_agent_ends_the_try_naming_it(tmp_path: Path) -> None:
    trial = trials(tmp_path, body(tmp_path))[0]
    running = pod(phase="Running", initContainerStatuses=[oom()], containerStatuses=[{"name": "runner", "state": {}}])
    why = restarted(running)
    assert why == "container mcp OOMKilled (exit 137), restarted 1 time"
    event = seen("MODIFIED", running, flight(trial, started=1000.0), NOW)
    assert (event.act, event.reason) == (Act.END, why)
    assert infra_cause(why) == "oom_killed"
    crashed = {**oom("postgres-db", 2), "lastState": {"terminated": {"reason": "Error", "exitCode": 1}}}
    again = restarted(pod(phase="Running", initContainerStatuses=[crashed]))
    assert again == "container postgres-db Error (exit 1), restarted 2 times"
    assert infra_cause(again) == "container_restarted"
    assert restarted(pod(phase="Running", initContainerStatuses=[oom(count=0)])) is None
    # The runner OOM-killed (restartPolicy Never: the pod fails): its reason names it.
    runner = {"name": "runner", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}
    failed = failure_reason(pod(phase="Failed", containerStatuses=[runner]), None)
    assert "runner OOMKilled exit 137" in failed and infra_cause(failed) == "oom_killed"


def test_a_record_stored_after_a_restart_is_no_outcome() -> None:
    record = {"trial_id": "t", "spec_hash": "h", "failure": None, "passed": True}
    assert judge(record, "h", 1).kind is Kind.RECORDED
    v = judge(record, "h", 1, restarted="container mcp OOMKilled (exit 137), restarted 1 time")
    assert v.kind is Kind.INFRA and v.stored is None  # infrastructure: retried, never scored


def test_a_pending_deadline_of_an_unschedulable_pod_names_the_scheduler() -> None:
    assert infra_cause(f"pod unschedulable: Unschedulable: {CPU}; pod still Pending after 600 s") == "unschedulable"


def test_an_unschedulable_try_gives_its_slot_back_while_others_wait_until_its_pending_deadline() -> None:
    cpu = Blocked("Unschedulable", CPU)
    kw: dict[str, Any] = {"pending_timeout": 600, "others_waiting": True}
    created = NOW - PARK_AFTER_SECONDS
    assert park_due(cpu, created, created, NOW, **kw)
    assert not park_due(cpu, created + 1, created, NOW, **kw)  # not unschedulable long enough yet
    assert not park_due(cpu, created, created, NOW, pending_timeout=600, others_waiting=False)  # nobody to give to
    assert not park_due(cpu, created, NOW - 600, NOW, **kw)  # unschedulable for its whole Pending deadline: infra
    assert not park_due(Blocked("ImagePullBackOff", "x"), created, created, NOW, **kw)  # given up on already
    assert not park_due(None, created, created, NOW, **kw)
    assert [requeue_delay(n) for n in (1, 2, 3, 6, 7, 20)] == [10.0, 20.0, 40.0, 300.0, 300.0, 300.0]


def test_a_requeued_trial_waits_behind_the_others_and_is_not_counted(tmp_path: Path) -> None:
    ts = trials(tmp_path, body(tmp_path))
    st = state(ts)
    first = st.next_launches(1, {t.model.name: 9 for t in ts}, NOW)
    [(trial, retry)] = first
    st.launched(trial, "pod", retry, NOW)
    assert st.requeue(trial.trial_id, NOW + 10) == 1
    assert trial.trial_id not in st.in_flight and st.retries.get(trial.trial_id, 0) == 0 and st.infra_streak == 0
    free = {t.model.name: 9 for t in ts}
    soon = [t.trial_id for t, _ in st.next_launches(len(ts), free, NOW + 1)]
    assert trial.trial_id not in soon and len(soon) == len(ts) - 1  # every other trial first
    later = [t.trial_id for t, _ in st.next_launches(len(ts), free, NOW + 11)]
    assert later == [trial.trial_id]
    assert judge(None, "h", 1, parked=True).kind is Kind.UNCOUNTED
