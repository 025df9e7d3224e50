"""Pods the operator (a suspend, a failed run) or Kubernetes (a disruption) stopped, whose deletion lingers: a pod on a
lost node stays Terminating, an API call fails once, the operator restarts or the run is edited meanwhile. Like a Job
controller, the operator never takes a dying pod for a new try, never charges a try it stopped itself, and retries a
delete the API refused. The fake API here keeps a pod until it is removed (a lost node's pods never go)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import kopf
import pytest
from conftest import make_tiny_pack
from test_disruptions import disruption
from test_outcomes import edit, evalrun, reconciler, record, tid_of

import mcpfleet.operator.reconciler as reconciler_module
from mcpfleet.operator import deletes
from mcpfleet.operator.kube import ApiError, ForeignPod, Kube, PodRefused
from mcpfleet.operator.manifests import LABEL_RUN_UID
from mcpfleet.operator.reconciler import Reconciler
from mcpfleet.runner.results.records import now_iso


@pytest.fixture(autouse=True)
def prompt_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted tries' pods deleted in the step that counts them (deletes.py batches them for up to 1 s)."""
    monkeypatch.setattr(deletes, "DELETE_EVERY_SECONDS", 0.0)


class PodsKube:
    """Pods exist until ``remove``d; deleting a pod whose node is ``lost`` only marks it Terminating; a name in
    ``fail_delete`` answers its next delete with a 500. A create of an existing name answers as the real API
    client does (``Kube.create_pod``): ForeignPod for another run's pod or a dying one, else the pod (taken over)."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.taken_over: list[str] = []
        self.deleted: list[str] = []
        self.existing: dict[str, dict[str, Any]] = {}
        self.lost: set[str] = set()
        self.fail_delete: set[str] = set()

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None:
        self.created.append(pod)
        name = pod["metadata"]["name"]
        if name in self.existing:
            old = self.existing[name]["metadata"]
            if old["labels"].get(LABEL_RUN_UID) != pod["metadata"]["labels"].get(LABEL_RUN_UID):
                raise ForeignPod(name)
            if old.get("deletionTimestamp"):
                raise ForeignPod(f"{name} is still terminating")
            self.taken_over.append(name)
            return self.existing[name]
        self.existing[name] = {**pod, "status": {"phase": "Pending"}}
        return None

    async def delete_pod(self, namespace: str, name: str) -> bool:
        await asyncio.sleep(0)
        self.deleted.append(name)
        if name in self.fail_delete:
            self.fail_delete.discard(name)
            raise ApiError(500, "deleting failed")
        if name not in self.existing:
            return False
        if name in self.lost:
            meta = self.existing[name]["metadata"]
            self.existing[name]["metadata"] = {**meta, "deletionTimestamp": meta.get("deletionTimestamp") or now_iso()}
        return True

    def remove(self, name: str) -> dict[str, Any]:
        return self.existing.pop(name)

    async def delete_pods(self, namespace: str, selector: str) -> list[str]:
        """A deletecollection by the operator's selector (``... <pod label> in (names)``): each named pod deleted."""
        names = selector.split(" in (", 1)[1].rstrip(")").split(",")
        return [name for name in names if await self.delete_pod(namespace, name)]

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


class _Api:
    """The two calls of a create that finds the name taken: 409, then the existing pod as read."""

    def __init__(self, existing: dict[str, Any]):
        self.existing = existing

    async def request(self, method: str, path: str, **_: Any) -> tuple[int, bytes]:
        return (409, b"") if method == "POST" else (200, json.dumps(self.existing).encode())


@pytest.mark.parametrize(
    ("meta", "outcome"),
    [
        ({"labels": {LABEL_RUN_UID: "uid-1"}}, None),  # ours and alive: a repeat create, harmless (the pod read)
        ({"labels": {LABEL_RUN_UID: "uid-1"}, "deletionTimestamp": "2026-11-28T00:00:30Z"}, ForeignPod),
        ({"labels": {LABEL_RUN_UID: "uid-0"}}, ForeignPod),  # another run's
    ],
)
async def test_the_api_client_never_takes_a_dying_pod_for_a_new_one(meta: dict[str, Any], outcome: Any) -> None:
    kube = Kube(_Api({"metadata": meta}))  # type: ignore[arg-type]
    pod = {"metadata": {"name": "batch-m-1", "labels": {LABEL_RUN_UID: "uid-1"}}}
    if outcome is ForeignPod:
        with pytest.raises(ForeignPod):
            await kube.create_pod("ns", pod)
    else:
        assert await kube.create_pod("ns", pod) == {"metadata": meta}


async def test_a_finished_pod_whose_delete_failed_is_deleted_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The try is counted, then deleting its pod fails once (a 500). Before, the pod was never deleted: its event,
    taken again, found the trial no longer in flight. Now the delete is tried again from the periodic check, and
    the count stands (no second outcome, no exception out of the step)."""
    monkeypatch.setattr(reconciler_module, "STORE_RETRY_SECONDS", 0.0)
    rec, kube = await running(tmp_path, 1)
    [name] = kube.existing
    assert rec.store is not None and rec.state is not None
    tid = tid_of(kube.existing[name])
    rec.store.commit(tid, record(rec.state.trials[tid]))
    kube.fail_delete.add(name)
    rec.queue.put_nowait(("MODIFIED", {**kube.existing[name], "status": {"phase": "Succeeded"}}))
    await rec.step()
    assert rec.state.done[tid]["passed"] and rec.phase == "Succeeded" and kube.deleted == [name]
    rec.deadlines_at = 0.0
    await rec.step()
    assert kube.deleted == [name, name] and not rec.deletes.failed
    assert list(rec.state.done) == [tid] and rec.shared.inflight == 0


async def test_a_finished_pod_on_the_deadline_path_whose_delete_failed_is_deleted_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod on a lost node, counted failed past its deadline, whose delete then fails: no "reconcile step failed"
    (the exception escaped the step before), and the delete is tried again."""
    monkeypatch.setattr(reconciler_module, "STORE_RETRY_SECONDS", 0.0)
    rec, kube = await running(tmp_path, 1, retries={"limit": 1, "backoffSeconds": 0})
    [name] = kube.existing
    assert rec.state is not None
    [inf] = rec.state.in_flight.values()
    inf.started = 1.0  # long past its deadline
    kube.fail_delete.add(name)
    rec.deadlines_at = 0.0
    await rec.step()  # would raise if the delete's error escaped
    assert rec.state.retries == {inf.trial.trial_id: 1} and name in rec.deletes.failed
    rec.deadlines_at = 0.0
    await rec.step()
    assert kube.deleted.count(name) == 2 and name not in rec.deletes.failed


async def test_a_refused_pod_list_while_rebuilding_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 (API priority and fairness, many operators restarting) on the rebuild's pod list: drive() waits and
    lists again, and the run launches. Before, the error escaped drive() and kopf restarted the daemon 60 s later."""
    monkeypatch.setattr(reconciler_module, "STORE_RETRY_SECONDS", 0.01)

    class ListFailsOnce(PodsKube):
        lists = 0

        async def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
            self.lists += 1
            if self.lists == 1:
                raise ApiError(429, "Too Many Requests")
            return await super().list_pods(namespace, selector)

    kube = ListFailsOnce()
    rec = reconciler(evalrun(make_tiny_pack(tmp_path / "pack", tasks=1), tmp_path / "out", 1), kube)  # type: ignore[arg-type]

    class Stop:
        """As kopf.DaemonStopped: true once the test has seen the pod created."""

        def __bool__(self) -> bool:
            return bool(kube.created)

    await asyncio.wait_for(rec.drive(Stop()), 10)  # type: ignore[arg-type]
    assert kube.lists == 2 and len(kube.created) == 1 and rec.state is not None and len(rec.state.in_flight) == 1


class RefusingKube(PodsKube):
    """Creates answer 403 (a namespace quota) until ``refusing`` is cleared."""

    refusing = True

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None:
        if self.refusing:
            self.created.append(pod)
            name = pod["metadata"]["name"]
            raise PodRefused(403, f'pods "{name}" is forbidden: exceeded quota: compute-resources, requested: cpu=1')
        return await super().create_pod(namespace, pod)


class Clock:
    """time.time and time.monotonic for the reconciler module, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


async def test_refused_pod_creates_back_off_with_one_event_and_a_condition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five trials whose pods a quota refuses (403). Before: one PodCreateRefused event per refused create (the
    message named the trial), every trial created again every 2 s, and status said nothing. Now: one event for the
    cause, a PodsCreated=False condition with the API's message, launches backing off (2 s, 4 s, ...); the first
    create that passes sets the condition True and ends the backoff."""
    clock = Clock()
    monkeypatch.setattr(reconciler_module, "time", clock)
    warned: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "warn", lambda body, reason, message: warned.append((reason, message)))
    kube = RefusingKube()
    rec = reconciler(evalrun(make_tiny_pack(tmp_path / "pack", tasks=5), tmp_path / "out", 5), kube)  # type: ignore[arg-type]
    assert await rec.load()
    await rec.rebuild()
    await rec.step()
    assert len(kube.created) == 5
    cond = rec.conditions["PodsCreated"]
    assert (cond["status"], cond["reason"]) == ("False", "FailedCreate")
    assert cond["message"] == '403: pods "<pod>" is forbidden: exceeded quota: compute-resources, requested: cpu=1'
    clock.now += 2.5
    await rec.step()
    assert len(kube.created) == 10  # tried again after 2 s ...
    clock.now += 2.5
    await rec.step()
    assert len(kube.created) == 10  # ... then after 4 s, not 2
    clock.now += 2.0
    await rec.step()
    assert len(kube.created) == 15
    refused = [m for reason, m in warned if reason == "PodCreateRefused"]
    assert len(refused) == 1 and "exceeded quota" in refused[0], refused
    assert rec.state is not None and not any(tid in refused[0] for tid in rec.state.trials)
    assert not any(p["metadata"]["name"] in refused[0] for p in kube.created)  # one cause, whichever pod it was
    kube.refusing = False
    clock.now += 8.5
    await rec.step()
    assert len(kube.existing) == 5 and rec.state is not None and len(rec.state.in_flight) == 5
    cond = rec.conditions["PodsCreated"]
    assert (cond["status"], cond["reason"]) == ("True", "Created") and rec.create_backoff == 0.0


class LostAnswerKube(PodsKube):
    """The first create of each pod reaches the API server (the pod exists) but its answer is lost (a timeout)."""

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None:
        name = pod["metadata"]["name"]
        if name not in self.existing:
            await super().create_pod(namespace, pod)
            raise TimeoutError
        return await super().create_pod(namespace, pod)


async def test_a_pod_whose_create_answer_was_lost_and_that_finished_meanwhile_is_taken_at_once(tmp_path: Path) -> None:
    """The create times out though the pod was made; the pod runs, stores its record and ends while its trial is not
    in flight (its events lead nowhere). The next create finds it (409, ours): its status is taken as an event, so
    the trial is done. Before, it waited, in flight, for the Pending deadline (10 minutes by default)."""
    kube = LostAnswerKube()
    rec = reconciler(evalrun(make_tiny_pack(tmp_path / "pack", tasks=1), tmp_path / "out", 1), kube)  # type: ignore[arg-type]
    assert await rec.load()
    await rec.rebuild()
    await rec.step()  # the create's answer is lost: not in flight
    assert rec.state is not None and rec.store is not None and not rec.state.in_flight
    [name] = kube.existing
    tid = tid_of(kube.existing[name])
    rec.store.commit(tid, record(rec.state.trials[tid]))  # the pod ran and stored its record
    kube.existing[name] = {**kube.existing[name], "status": {"phase": "Succeeded"}}
    rec.queue.put_nowait(("MODIFIED", kube.existing[name]))  # its last event, while its trial is not in flight
    await rec.step()  # that event leads nowhere; the create again: 409, ours
    await rec.step()
    assert kube.taken_over == [name] and rec.state.done[tid]["passed"] and not rec.state.in_flight
    assert name in kube.deleted
