"""Pods the operator (a suspend, a failed run) or Kubernetes (a disruption) stopped, whose deletion lingers: a pod on a
lost node stays Terminating, an API call fails once, the operator restarts or the run is edited meanwhile. Like a Job
controller, the operator never takes a dying pod for a new try, never charges a try it stopped itself, and retries a
delete the API refused. The fake API here keeps a pod until it is removed (a lost node's pods never go)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import kopf
import pytest
from conftest import make_tiny_pack
from kubernetes_asyncio.client.exceptions import ApiException
from test_disruptions import disruption
from test_outcomes import edit, evalrun, reconciler, tid_of

from mcpfleet.operator.kube import ForeignPod, Kube
from mcpfleet.operator.manifests import LABEL_RUN_UID
from mcpfleet.operator.reconciler import Reconciler
from mcpfleet.runner.records import now_iso


class PodsKube:
    """Pods exist until ``remove``d; deleting a pod whose node is ``lost`` only marks it Terminating; a name in
    ``fail_delete`` answers its next delete with a 500. A create of an existing name answers as the real API
    client does (``Kube.create_pod``): ForeignPod for another run's pod or a dying one, else False (taken over)."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.taken_over: list[str] = []
        self.deleted: list[str] = []
        self.existing: dict[str, dict[str, Any]] = {}
        self.lost: set[str] = set()
        self.fail_delete: set[str] = set()

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> bool:
        self.created.append(pod)
        name = pod["metadata"]["name"]
        if name in self.existing:
            old = self.existing[name]["metadata"]
            if old["labels"].get(LABEL_RUN_UID) != pod["metadata"]["labels"].get(LABEL_RUN_UID):
                raise ForeignPod(name)
            if old.get("deletionTimestamp"):
                raise ForeignPod(f"{name} is still terminating")
            self.taken_over.append(name)
            return False
        self.existing[name] = {**pod, "status": {"phase": "Pending"}}
        return True

    async def delete_pod(self, namespace: str, name: str) -> bool:
        await asyncio.sleep(0)
        self.deleted.append(name)
        if name in self.fail_delete:
            self.fail_delete.discard(name)
            raise ApiException(status=500, reason="deleting failed")
        if name not in self.existing:
            return False
        if name in self.lost:
            meta = self.existing[name]["metadata"]
            self.existing[name]["metadata"] = {**meta, "deletionTimestamp": meta.get("deletionTimestamp") or now_iso()}
        return True

    def remove(self, name: str) -> dict[str, Any]:
        return self.existing.pop(name)

    async def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return list(self.existing.values())

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.status = status


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf, "info", lambda *a, **k: None)
    monkeypatch.setattr(kopf, "warn", lambda *a, **k: None)


async def running(tmp_path: Path, n: int, **spec: Any) -> tuple[Reconciler, PodsKube]:
    kube = PodsKube()
    rec = reconciler(evalrun(make_tiny_pack(tmp_path / "pack", tasks=n), tmp_path / "out", n, **spec), kube)  # type: ignore[arg-type]
    assert await rec.load()
    await rec.rebuild()
    await rec.step()
    for pod in list(kube.created):
        kube.existing[pod["metadata"]["name"]]["status"] = {"phase": "Running"}
        rec.queue.put_nowait(("MODIFIED", kube.existing[pod["metadata"]["name"]]))
    await rec.step()
    assert rec.state is not None and len(rec.state.in_flight) == n
    return rec, kube


async def again(rec: Reconciler, **spec: Any) -> None:
    """The edit that drives the run again (what the daemon does for a new generation)."""
    edit(rec, **spec)
    rec.drop_state()
    assert await rec.load()
    await rec.rebuild()
    await rec.step()


async def suspended_and_resumed(tmp_path: Path, trouble: str) -> tuple[Reconciler, PodsKube, str]:
    """One running trial whose pod is in ``trouble`` (``lost``: its node is gone; ``fail_delete``: the API refuses
    its next delete), suspended, then resumed a step later."""
    rec, kube = await running(tmp_path, 1, retries={"limit": 2, "backoffSeconds": 0})
    [name] = kube.existing
    getattr(kube, trouble).add(name)
    edit(rec, suspend=True)
    await rec.step()
    edit(rec, suspend=False)
    await rec.step()
    return rec, kube, name


async def test_suspended_pods_stuck_on_a_lost_node_are_replaced_never_taken_over(tmp_path: Path) -> None:
    """Before: past their deadline the suspended tries were unlaunched while their pods still existed, and the resume
    took the dying pods for the new tries (409), which later cost an infrastructure retry each; three of them failed a
    run with backoffLimit 2. Now such a try counts for its trial (its pod may never go, so its name is not used again)
    but, stopped by the operator, not towards backoffLimit, and the resume runs it under the next name."""
    rec, kube = await running(tmp_path, 3, retries={"limit": 2, "backoffSeconds": 0, "backoffLimit": 2})
    first = sorted(kube.existing)
    kube.lost.update(first)
    edit(rec, suspend=True)
    await rec.step()
    assert rec.state is not None
    for inf in rec.state.in_flight.values():
        inf.started = (inf.started or 0) - 1e6  # long past the try's deadline: its node is not coming back
    rec.deadlines_at = 0.0
    await rec.step()
    assert rec.state is not None and not rec.state.in_flight and rec.state.infra_streak == 0
    assert sorted(rec.state.retries.values()) == [1, 1, 1]
    edit(rec, suspend=False)
    await rec.step()
    assert rec.phase != "Failed", rec.conditions.get("Failed")
    relaunched = [p["metadata"]["name"] for p in kube.created[3:]]
    assert len(relaunched) == 3 and not set(relaunched) & set(first), relaunched
    assert not kube.taken_over


async def test_a_resume_never_takes_over_a_dying_pod_of_the_same_name(tmp_path: Path) -> None:
    """Suspend, then resume within the suspended pod's deletion: the try stays in flight until its pod is gone, and a
    create of that name meanwhile (e.g. by an operator that lost the try) is refused as the API client refuses it."""
    rec, kube, name = await suspended_and_resumed(tmp_path, "lost")
    assert rec.state is not None and list(rec.state.in_flight) and len(kube.created) == 1
    rec.queue.put_nowait(("DELETED", kube.remove(name)))  # its node finally stopped it: no record
    await rec.step()
    assert [p["metadata"]["name"] for p in kube.created] == [name, name] and rec.state.retries == {}
    assert not kube.taken_over


async def test_an_operator_restart_between_suspend_and_resume_does_not_charge_the_suspended_try(
    tmp_path: Path,
) -> None:
    """The suspend's deletion is in progress when the operator restarts, and the run is resumed before the new operator
    ran a step: the dying pod it finds was stopped by the suspend (its status says Suspended), so its end is not an
    infrastructure failure. Before, it was one: an infra record, a retry, the streak at 1."""
    rec, kube = await running(tmp_path, 1, retries={"limit": 2, "backoffSeconds": 0})
    [name] = kube.existing
    kube.lost.add(name)
    edit(rec, suspend=True)
    await rec.step()
    assert rec.conditions["Suspended"]["status"] == "True"
    await again(rec, suspend=False)  # a new operator, the spec resumed meanwhile
    assert rec.state is not None and rec.state.in_flight[tid_of(kube.existing[name])].suspended
    rec.queue.put_nowait(("DELETED", kube.remove(name)))
    await rec.step()
    assert rec.state.retries == {} and rec.store is not None and rec.store.read_result(tid_of(kube.created[0])) is None
    assert [p["metadata"]["name"] for p in kube.created] == [name, name]  # the same try again


async def test_an_edit_after_a_failed_run_charges_neither_its_stopped_pods_nor_its_old_failures(
    tmp_path: Path,
) -> None:
    """ "Fix the cause and edit the EvalRun to resume it": the pods the failure stopped, still terminating, do not count
    as infrastructure failures of the resumed run, and the failures that failed it do not count again (before, the
    first flake after the edit failed it once more: the streak was rebuilt over the limit)."""
    rec, kube = await running(
        tmp_path, 3, retries={"limit": 2, "backoffSeconds": 0, "backoffLimit": 2}, activeDeadlineSeconds=30
    )
    first = sorted(kube.existing)
    kube.lost.update(first)
    rec.started_at = "2026-01-01T00:00:00.000Z"  # long past the deadline
    await rec.step()
    assert rec.state is None and rec.conditions["Failed"]["reason"] == "DeadlineExceeded"
    await again(rec, activeDeadlineSeconds=10**9)
    assert rec.state is not None and rec.phase == "Running"
    for name in first:
        rec.queue.put_nowait(("DELETED", kube.remove(name)))
    await rec.step()
    assert rec.phase != "Failed" and rec.state.retries == {} and rec.state.infra_streak == 0
    for pod in kube.created[3:]:  # the same tries again; now three of them vanish, over backoffLimit 2
        rec.queue.put_nowait(("DELETED", kube.remove(pod["metadata"]["name"])))
    await rec.step()
    assert rec.phase == "Failed" and rec.conditions["Failed"]["reason"] == "BackoffLimitExceeded"
    await again(rec, concurrency={"total": 1})
    assert rec.state is not None and rec.state.infra_streak == 0  # counted from the failure on
    [pod] = [p for p in kube.created[6:]]
    rec.queue.put_nowait(("DELETED", kube.remove(pod["metadata"]["name"])))  # one flake
    await rec.step()
    assert rec.phase != "Failed", rec.conditions.get("Failed")


async def test_a_suspend_whose_delete_failed_leaves_a_resumed_pod_uncounted(tmp_path: Path) -> None:
    """The suspend's delete fails (API 500) and the run is resumed before the next step tried again: the live pod is
    the try it was, with no deletion deadline (before: 60 s later it was counted as "still terminating")."""
    rec, kube, name = await suspended_and_resumed(tmp_path, "fail_delete")
    assert rec.state is not None
    [inf] = rec.state.in_flight.values()
    assert (inf.suspended, inf.ending, inf.kill_by, inf.reason) == (False, None, None, None), inf
    rec.deadlines_at = 0.0
    await rec.step()
    assert list(rec.state.in_flight) and rec.state.retries == {} and name in kube.existing


async def test_a_refused_delete_of_an_evicted_pod_is_tried_again(tmp_path: Path) -> None:
    """A pod its kubelet evicted is Failed and sends no further event; when the delete that replaces it fails, the
    event is taken again after a pause. Before, nothing tried again: the trial held its slot for over an hour, then
    its disruption was charged as an infrastructure failure."""
    rec, kube = await running(tmp_path, 1, retries={"limit": 2, "backoffSeconds": 0})
    [name] = kube.existing
    evicted = {
        **kube.existing[name],
        "status": {"phase": "Failed", "reason": "Evicted", "conditions": [disruption("TerminationByKubelet")]},
    }
    kube.existing[name] = evicted
    kube.fail_delete.add(name)
    rec.queue.put_nowait(("MODIFIED", evicted))
    await rec.step()  # the delete fails: no exception escapes, the event waits
    assert kube.deleted.count(name) == 1 and rec.deferred
    assert rec.store_retry_at == 0.0  # a refused pod call holds back neither the store nor spec edits
    await rec.step()
    assert kube.deleted.count(name) == 1  # the event waits its pause
    rec.deferred_until = 0.0
    await rec.step()
    assert kube.deleted.count(name) == 2
    rec.queue.put_nowait(("DELETED", kube.remove(name)))
    await rec.step()
    assert rec.state is not None and rec.state.retries == {}
    assert [p["metadata"]["name"] for p in kube.created] == [name, name]  # the same try again, once it was gone


class _Response:
    def __init__(self, status: int, body: dict[str, Any] | None = None):
        self.status, self.body = status, body or {}

    async def json(self) -> dict[str, Any]:
        return self.body

    def release(self) -> None:
        pass


class _Core:
    """The two CoreV1Api calls of a create that finds the name taken."""

    def __init__(self, existing: dict[str, Any]):
        self.existing = existing

    async def create_namespaced_pod(self, namespace: str, pod: dict[str, Any], **_: Any) -> _Response:
        return _Response(409)

    async def read_namespaced_pod(self, name: str, namespace: str, **_: Any) -> _Response:
        return _Response(200, self.existing)


@pytest.mark.parametrize(
    ("meta", "outcome"),
    [
        ({"labels": {LABEL_RUN_UID: "uid-1"}}, False),  # ours and alive: a repeat create, harmless
        ({"labels": {LABEL_RUN_UID: "uid-1"}, "deletionTimestamp": "2026-11-28T00:00:30Z"}, ForeignPod),
        ({"labels": {LABEL_RUN_UID: "uid-0"}}, ForeignPod),  # another run's
    ],
)
async def test_the_api_client_never_takes_a_dying_pod_for_a_new_one(meta: dict[str, Any], outcome: Any) -> None:
    kube = Kube.__new__(Kube)
    kube.core = _Core({"metadata": meta})  # type: ignore[assignment]
    pod = {"metadata": {"name": "batch-m-1", "labels": {LABEL_RUN_UID: "uid-1"}}}
    if outcome is ForeignPod:
        with pytest.raises(ForeignPod):
            await kube.create_pod("ns", pod)
    else:
        assert await kube.create_pod("ns", pod) is False
