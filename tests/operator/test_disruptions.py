"""Trial pods Kubernetes disrupts (a drain, a preemption, a taint or kubelet eviction, PodGC: the DisruptionTarget
condition) are replaced like a Job's under a podFailurePolicy ``Ignore`` on DisruptionTarget: the try does not count
(no retry charged, no infra record, the run's backoffLimit streak unchanged) and its trial runs again under the same
pod name once the old pod is gone; a record it stored first is still its outcome; and a trial disrupted more than
DISRUPTION_LIMIT times in a row counts the next one as an ordinary infrastructure failure, so a pod that evicts
itself cannot loop for ever. Step by step with the API answered at once (test_outcomes.py's fake), as that file
checks the reconciler's other accounting; test_job_semantics.py drains real pods through the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kopf
import pytest
from test_outcomes import NS, launched_run, record, tid_of

from mcpfleet.operator import deletes, metrics
from mcpfleet.operator.reconciler import Reconciler
from mcpfleet.operator.verdict import DISRUPTION_LIMIT
from mcpfleet.runner.results.records import now_iso

Events = list[tuple[str, str, str]]


@pytest.fixture(autouse=True)
def prompt_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted tries' pods deleted in the step that counts them (deletes.py batches them for up to 1 s)."""
    monkeypatch.setattr(deletes, "DELETE_EVERY_SECONDS", 0.0)


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> Events:
    """The Kubernetes events the reconciler posts: (type, reason, message)."""
    events: Events = []
    monkeypatch.setattr(kopf, "info", lambda body, reason, message: events.append(("Normal", reason, message)))
    monkeypatch.setattr(kopf, "warn", lambda body, reason, message: events.append(("Warning", reason, message)))
    return events


def disruption(reason: str = "EvictionByEvictionAPI") -> dict[str, Any]:
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": reason,
        "message": "Eviction API: evicting",
        "lastTransitionTime": now_iso(),
    }


def drain(rec: Reconciler, pod: dict[str, Any], reason: str = "EvictionByEvictionAPI") -> None:
    """The events of a drained pod: the condition is set, the pod is deleted (gracefully), its node stops it, then
    it is gone. Only the first two show the condition, as when the operator sees the final object without it."""
    running = {**pod, "status": {"phase": "Running", "conditions": [disruption(reason)]}}
    deleting = {**running, "metadata": {**pod["metadata"], "deletionTimestamp": now_iso()}}
    rec.queue.put_nowait(("MODIFIED", running))
    rec.queue.put_nowait(("MODIFIED", deleting))
    rec.queue.put_nowait(("DELETED", {**pod, "status": {"phase": "Failed"}}))


def disruptions(model: str = "m") -> float:
    return float(metrics.DISRUPTIONS.labels(NS, "batch", model)._value.get())  # noqa: SLF001


def infra_retries(model: str = "m") -> float:
    return float(metrics.INFRA_RETRIES.labels(NS, "batch", model)._value.get())  # noqa: SLF001


def names(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


async def test_a_drain_of_more_pods_than_the_backoff_limit_charges_nothing(tmp_path: Path, posted: Events) -> None:
    """Four pods drained at once, with backoffLimit 2: the run goes on (as a Job with podFailurePolicy Ignore on
    DisruptionTarget), no trial is charged a retry, no infra record is written, the streak stays 0, each trial runs
    again at once under its first try's pod name, and each disruption is an event and a count. The condition is
    seen only before the pod's last event (remembered on the try); then every trial passes and the run succeeds."""
    rec, kube = await launched_run(tmp_path, 4, backoff_limit=2)
    assert rec.state is not None and rec.store is not None
    first = list(kube.created)
    before, retried_before = disruptions(), infra_retries()
    for pod in first:
        drain(rec, pod)
    await rec.step()
    assert rec.state is not None and rec.phase == "Running", rec.conditions.get("Failed")
    assert rec.state.retries == {} and rec.state.infra_streak == 0 and rec.state.retries_total == 0
    assert not rec.state.done and all(rec.store.read_result(tid_of(p)) is None for p in first)  # no infra record
    again = kube.created[4:]
    assert names(again) == names(first)  # the same try: the same pod names, created once the old pods were gone
    assert all(p["metadata"]["labels"]["mcpfleet.io/retry"] == "0" for p in again)
    assert disruptions() - before == 4 and infra_retries() == retried_before
    notes = [m for kind, r, m in posted if r == "Disrupted"]
    assert len(notes) == 4 and all("EvictionByEvictionAPI" in m and "same try" in m for m in notes), notes
    assert sorted(m.split(":")[0] for m in notes) == sorted(tid_of(p) for p in first)
    assert rec.shared.inflight == 4
    for pod in again:
        rec.store.commit(tid_of(pod), record(rec.state.trials[tid_of(pod)]))
        rec.queue.put_nowait(("MODIFIED", {**pod, "status": {"phase": "Succeeded"}}))
    await rec.step()
    assert rec.phase == "Succeeded", rec.conditions
    counts = kube.status["counts"]
    assert (counts["passed"], counts["infraErrors"], counts["retries"]) == (4, 0, 0), counts


async def test_a_pod_evicted_by_its_kubelet_is_replaced_only_once_it_is_gone(tmp_path: Path, posted: Events) -> None:
    """A kubelet eviction (TerminationByKubelet) leaves the pod Failed, not deleted: the operator deletes it and runs
    the trial again under the same name only once the old pod is gone (a create while it exists would adopt it)."""
    rec, kube = await launched_run(tmp_path, 1)
    [pod] = kube.created
    evicted = {
        **pod,
        "status": {"phase": "Failed", "reason": "Evicted", "conditions": [disruption("TerminationByKubelet")]},
    }
    rec.queue.put_nowait(("MODIFIED", evicted))
    await rec.step()
    assert rec.state is not None and kube.deleted == [pod["metadata"]["name"]]
    assert len(kube.created) == 1 and tid_of(pod) in rec.state.in_flight  # still its old pod's name
    rec.queue.put_nowait(("DELETED", evicted))
    await rec.step()
    assert names(kube.created[1:]) == names([pod]) and rec.state.retries == {}
    assert [m for _, r, m in posted if r == "Disrupted"][0].startswith(f"{tid_of(pod)}: ")
    assert "TerminationByKubelet" in [m for _, r, m in posted if r == "Disrupted"][0]


async def test_a_trial_disrupted_too_often_in_a_row_counts_the_next_disruption(tmp_path: Path, posted: Events) -> None:
    """A pod evicted over and over (by its own disk use, say) does not loop for ever: DISRUPTION_LIMIT disruptions of
    one trial in a row are run again as the same try, the next is an infrastructure failure (an infra record, a
    retry charged under a new pod name, a Warning). That count starts again: the retry may be disrupted too."""
    rec, kube = await launched_run(tmp_path, 1, retries={"limit": 1, "backoffSeconds": 0})
    assert rec.state is not None and rec.store is not None
    [pod] = kube.created
    tid, name = tid_of(pod), pod["metadata"]["name"]
    before, retried_before = disruptions(), infra_retries()
    for n in range(DISRUPTION_LIMIT):
        drain(rec, kube.created[-1], "TerminationByKubelet")
        await rec.step()
        assert len(kube.created) == n + 2 and kube.created[-1]["metadata"]["name"] == name
        assert rec.state.retries == {} and rec.store.read_result(tid) is None
    drain(rec, kube.created[-1], "TerminationByKubelet")
    await rec.step()
    assert rec.state.retries == {tid: 1} and rec.state.infra_streak == 1
    infra = rec.store.read_result(tid)
    assert infra is not None and infra["failure"] == "infra_error" and infra["infra_attempts"] == 1, infra
    assert "pod disrupted (TerminationByKubelet)" in infra["error"], infra
    assert kube.created[-1]["metadata"]["name"] == f"{name}-r1"
    assert disruptions() - before == DISRUPTION_LIMIT + 1 and infra_retries() - retried_before == 1
    warned = [m for kind, r, m in posted if (kind, r) == ("Warning", "Disrupted")]
    assert len(warned) == 1 and f"{DISRUPTION_LIMIT + 1} times in a row" in warned[0], warned
    drain(rec, kube.created[-1])  # the retry's first disruption: not counted again
    await rec.step()
    assert kube.created[-1]["metadata"]["name"] == f"{name}-r1" and rec.state.retries == {tid: 1}
    assert len(kube.created) == DISRUPTION_LIMIT + 3


async def test_a_disrupted_pod_that_stored_its_record_has_that_outcome(tmp_path: Path, posted: Events) -> None:
    """The runner stored its record before the drain stopped it: the record is the trial's outcome, as always; no
    run again, and no disruption counted (nothing was lost)."""
    rec, kube = await launched_run(tmp_path, 2)
    assert rec.state is not None and rec.store is not None
    done, other = kube.created
    rec.store.commit(tid_of(done), record(rec.state.trials[tid_of(done)]))
    before = disruptions()
    drain(rec, done)
    await rec.step()
    assert rec.state.done[tid_of(done)]["passed"] is True and tid_of(done) not in rec.state.in_flight
    assert len(kube.created) == 2 and list(rec.state.in_flight) == [tid_of(other)]
    assert disruptions() == before and not [r for _, r, _ in posted if r == "Disrupted"]


async def test_a_disruption_kubernetes_withdrew_does_not_excuse_a_later_failure(tmp_path: Path, posted: Events) -> None:
    """Kubernetes clears a DisruptionTarget whose deletion did not follow: the pod ran on, and when it later fails
    without a record that is an infrastructure failure like any other."""
    rec, kube = await launched_run(tmp_path, 1, retries={"limit": 1, "backoffSeconds": 0})
    [pod] = kube.created
    rec.queue.put_nowait(("MODIFIED", {**pod, "status": {"phase": "Running", "conditions": [disruption()]}}))
    rec.queue.put_nowait(("MODIFIED", {**pod, "status": {"phase": "Running", "conditions": []}}))
    rec.queue.put_nowait(("MODIFIED", {**pod, "status": {"phase": "Failed"}}))
    await rec.step()
    assert rec.state is not None and rec.state.retries == {tid_of(pod): 1}
    assert kube.created[-1]["metadata"]["name"].endswith("-r1")


async def test_a_disrupted_pod_stuck_on_a_lost_node_counts_when_its_deadline_passes(
    tmp_path: Path, posted: Events
) -> None:
    """A drained pod whose node is lost stays Terminating: once the operator stops waiting for it, the try counts
    (its pod still exists, so its name cannot be used again): a retry under a new name, as before."""
    rec, kube = await launched_run(tmp_path, 1, retries={"limit": 1, "backoffSeconds": 0})
    assert rec.state is not None
    [pod] = kube.created
    tid = tid_of(pod)
    meta = {**pod["metadata"], "deletionTimestamp": now_iso()}
    rec.queue.put_nowait(
        ("MODIFIED", {**pod, "metadata": meta, "status": {"phase": "Pending", "conditions": [disruption()]}})
    )
    await rec.step()
    inf = rec.state.in_flight[tid]
    assert inf.disrupted == "EvictionByEvictionAPI" and inf.ending is not None
    inf.kill_by = 0.0  # its node should have stopped it long ago
    rec.deadlines_at = 0.0
    await rec.step()
    assert rec.state.retries == {tid: 1}
    assert kube.created[-1]["metadata"]["name"] == f"{pod['metadata']['name']}-r1"
