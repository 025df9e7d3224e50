"""How the reconciler takes a batch of pod events (operator/reconciler.py): different trials' outcomes at once,
one trial's events in order, and a run that fails mid-batch stops cleanly. What it launches first when an
earlier run's trial times are named (spec.launchOrder.learnFrom). And the Job-like status it keeps (with the API
answered at once, so each step's effect is checked exactly): suspend, a run that scored nothing, a failed run's
last counts, conditions' transition times, the failure streak after a restart, spec.activeDeadlineSeconds."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kopf
import pytest
from conftest import make_tiny_pack

from mcpfleet.operator import deletes
from mcpfleet.operator.manifests import ANN_TRIAL
from mcpfleet.operator.reconciler import Reconciler
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.operator.shared import Shared
from mcpfleet.runner.results.records import TrialResult, dumps, now_iso
from mcpfleet.runner.results.store import LocalStore
from mcpfleet.runner.spec.trial import TrialSpec

NS = "evals"


@pytest.fixture(autouse=True)
def prompt_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted tries' pods deleted in the step that counts them (deletes.py batches them for up to 1 s)."""
    monkeypatch.setattr(deletes, "DELETE_EVERY_SECONDS", 0.0)


class FakeKube:
    """The operator's API calls, answered at once and remembered."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.gone: set[str] = set()  # pods whose delete answers 404
        self.hold: dict[str, Callable[[], bool]] = {}  # pod -> its delete answers once this holds
        self.pods: list[dict[str, Any]] = []  # what list_pods answers (the run's pods an operator finds)

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None:
        self.created.append(pod)
        return None

    async def delete_pod(self, namespace: str, name: str) -> bool:
        await asyncio.sleep(0)  # a request: other coroutines run meanwhile
        while name in self.hold and not self.hold[name]():
            await asyncio.sleep(0.01)
        self.deleted.append(name)
        return name not in self.gone

    async def delete_pods(self, namespace: str, selector: str) -> list[str]:
        """A deletecollection by the operator's selector (``... <pod label> in (names)``): each named pod deleted."""
        names = selector.split(" in (", 1)[1].rstrip(")").split(",")
        return [name for name in names if await self.delete_pod(namespace, name)]

    async def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return list(self.pods)

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.status = status


def evalrun(pack: Path, out: Path, trials: int, backoff_limit: int | None = None, **spec: Any) -> kopf.Body:
    raw: Any = {  # kopf's RawBody type knows no metadata.generation
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "batch", "namespace": NS, "uid": "uid-1", "generation": 1},
        "spec": {
            "models": [{"name": "m", "model": "scripted/oracle"}],
            "tasks": {"path": str(pack)},
            "attempts": 1,
            "concurrency": {"total": trials},
            "retries": {"limit": 0, "backoffSeconds": 0, "backoffLimit": backoff_limit},
            "output": {"uri": str(out)},
            **spec,
        },
        "status": {},
    }
    return kopf.Body(raw)


def finished_pod(pod: dict[str, Any]) -> dict[str, Any]:
    return {**pod, "status": {"phase": "Succeeded"}}


def record(trial: TrialSpec, failure: str | None = None, at: str | None = None) -> bytes:
    now = at or now_iso()
    return dumps(
        TrialResult(
            **trial.record_identity(),
            passed=failure is None,
            failure=failure,
            started_at=now,
            finished_at=now,
        ).model_dump(mode="json")
    )


@pytest.fixture
def quiet_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf.info/warn post Kubernetes events through a running operator's queue; here there is none."""
    monkeypatch.setattr(kopf, "info", lambda *a, **k: None)
    monkeypatch.setattr(kopf, "warn", lambda *a, **k: None)


def reconciler(body: kopf.Body, kube: FakeKube) -> Reconciler:
    shared = Shared(settings=OperatorSettings(create_rate=1000.0, max_pods=1000), kube=kube)  # type: ignore[arg-type]
    shared.tokens = 1000.0
    return Reconciler(shared, body, logging.getLogger("test"))


async def launched_run(
    tmp_path: Path, trials: int, backoff_limit: int | None = None, **spec: Any
) -> tuple[Reconciler, FakeKube]:
    pack = make_tiny_pack(tmp_path / "pack", tasks=trials)
    kube = FakeKube()
    rec = reconciler(evalrun(pack, tmp_path / "out", trials, backoff_limit, **spec), kube)
    assert await rec.load()
    await rec.rebuild()
    await rec.step()
    assert rec.state is not None and len(kube.created) == trials == len(rec.state.in_flight)
    return rec, kube


async def test_outcomes_of_different_trials_are_taken_concurrently(tmp_path: Path, quiet_events: None) -> None:
    """Each outcome waits on its record (an S3 GET in a cluster) and its pod's deletion; taken one after another,
    those waits capped a run's turnover. Here every record read waits until all of them have started: taken one at
    a time, the first read would wait alone until the barrier broke."""
    n = 4  # no more than the default thread pool has threads on a 2-core machine (min(32, cores + 4))
    rec, kube = await launched_run(tmp_path, n)
    assert rec.store is not None and rec.state is not None
    for trial in rec.state.trials.values():
        rec.store.commit(trial.trial_id, record(trial))
    together = threading.Barrier(n, timeout=5)
    read = rec.store.read_result
    outcome_reads = iter(range(n))  # the summary written at the end reads them all again, one by one

    def read_together(trial_id: str) -> dict[str, Any] | None:
        if next(outcome_reads, None) is not None:
            together.wait()
        return read(trial_id)

    rec.store.read_result = read_together  # type: ignore[method-assign]
    for pod in kube.created:
        rec.queue.put_nowait(("MODIFIED", finished_pod(pod)))
    await rec.step()
    assert not together.broken
    assert len(rec.state.done) == n and not rec.state.in_flight
    assert sorted(kube.deleted) == sorted(p["metadata"]["name"] for p in kube.created)
    assert rec.shared.inflight == 0


async def test_one_trials_events_are_taken_in_order(tmp_path: Path, quiet_events: None) -> None:
    """Running, then Succeeded, then gone, all in one batch: counted once, as finished, its slot freed once."""
    rec, kube = await launched_run(tmp_path, 2)
    assert rec.store is not None and rec.state is not None
    pod = kube.created[0]
    tid = pod["metadata"]["annotations"][ANN_TRIAL]
    rec.store.commit(tid, record(rec.state.trials[tid]))
    rec.queue.put_nowait(("MODIFIED", {**pod, "status": {"phase": "Running"}}))
    rec.queue.put_nowait(("MODIFIED", finished_pod(pod)))
    rec.queue.put_nowait(("DELETED", finished_pod(pod)))
    await rec.step()
    assert list(rec.state.done) == [tid] and rec.state.done[tid]["passed"] is True
    assert len(rec.state.in_flight) == 1 and rec.shared.inflight == 1
    assert kube.deleted == []  # its DELETED event came in the same batch: nothing left to delete (no API write)


async def test_a_run_failing_mid_batch_drops_the_rest_without_error(tmp_path: Path, quiet_events: None) -> None:
    """Pods that vanished without a record are infrastructure errors; past the failure budget the run fails
    (state dropped) while other outcomes of the same batch are still being read: they stop, nothing crashes."""
    rec, kube = await launched_run(tmp_path, 8, backoff_limit=2)
    *vanished, stuck = kube.created
    for pod in vanished:
        rec.queue.put_nowait(("DELETED", pod))  # gone before it finished, no record
    # The last cannot pull its image: the operator deletes it, and that delete answers (404, gone meanwhile)
    # only once the run has failed; its outcome is then moot.
    name = stuck["metadata"]["name"]
    kube.gone.add(name)
    kube.hold[name] = lambda: rec.state is None
    waiting = {"name": "runner", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
    rec.queue.put_nowait(("MODIFIED", {**stuck, "status": {"phase": "Pending", "containerStatuses": [waiting]}}))
    await rec.step()  # a step that raised would propagate here
    assert rec.state is None and rec.phase == "Failed"
    assert rec.conditions["Failed"]["reason"] == "BackoffLimitExceeded"
    assert rec.shared.inflight == 0  # every slot given back exactly once


async def test_a_pod_gone_without_a_deleted_event_is_taken_once_two_lists_miss_it(
    tmp_path: Path, quiet_events: None
) -> None:
    """kopf restarts an expired watch (410 Gone) from a fresh list: a pod deleted in between sends no DELETED
    event, and its try waited out its whole deadline (hours with the provider's give-back). The run's pods are
    listed every RESYNC_SECONDS; a try whose pod two lists in a row lack is taken as deleted, its stored record
    deciding. One list is not enough (its DELETED event may still be on its way)."""
    rec, kube = await launched_run(tmp_path, 3)
    assert rec.store is not None and rec.state is not None
    finished, vanished, alive = kube.created
    tid = finished["metadata"]["annotations"][ANN_TRIAL]
    rec.store.commit(tid, record(rec.state.trials[tid]))  # stored its record, then its pod went unseen
    kube.pods = [{**alive, "status": {"phase": "Running"}}]
    rec.resync_at = 0.0
    await rec.step()
    await rec.step()
    assert not rec.state.done and len(rec.state.in_flight) == 3  # one list: not yet
    rec.resync_at = 0.0
    await rec.step()  # the second list queues the DELETED events; this step takes them
    await rec.step()
    assert rec.state.done[tid]["passed"] is True  # its record is its outcome: no second, paid try
    lost = vanished["metadata"]["annotations"][ANN_TRIAL]
    assert rec.state.done[lost]["failure"] == "infra_error"  # no record (retries.limit 0): an infra error
    assert list(rec.state.in_flight) == [alive["metadata"]["annotations"][ANN_TRIAL]]
    assert rec.shared.inflight == 1


# ------------------------------------------------------------------- spec.launchOrder.learnFrom


def earlier_record(trial: TrialSpec, model: str, seconds: int) -> bytes:
    rec = TrialResult(
        **{**trial.record_identity(), "model": model},
        passed=True,
        started_at="2026-11-01T10:00:00Z",
        finished_at=f"2026-11-01T10:{seconds // 60:02d}:{seconds % 60:02d}Z",
    )
    return dumps(rec.model_dump(mode="json"))


async def test_a_run_launches_the_task_an_earlier_run_found_longest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One slot, three tasks. An earlier run ("pilot", another model, stored under its own UID) found the plan's
    last task the longest: it launches first, and an event says what the order learned. A named run that does
    not exist is a Warning event, never a failed run; an edit naming one more run is read at once."""
    events: list[tuple[str, str, str]] = []
    monkeypatch.setattr(kopf, "info", lambda body, reason, message: events.append(("Normal", reason, message)))
    monkeypatch.setattr(kopf, "warn", lambda body, reason, message: events.append(("Warning", reason, message)))
    pack = make_tiny_pack(tmp_path / "pack", tasks=3)
    out = tmp_path / "out"
    body = evalrun(pack, out, 1)
    body["spec"]["launchOrder"] = {"learnFrom": ["pilot", "absent"]}
    kube = FakeKube()
    shared = Shared(settings=OperatorSettings(create_rate=1000.0, max_pods=1000), kube=kube)  # type: ignore[arg-type]
    shared.tokens = 1000.0
    rec = Reconciler(shared, body, logging.getLogger("test"))
    assert await rec.load()
    assert rec.state is not None
    trials = list(rec.state.trials.values())
    pilot = LocalStore(out / "pilot" / "uid-0")
    for trial, seconds in zip(trials, (30, 40, 900), strict=True):
        pilot.commit(trial.trial_id, earlier_record(trial, "old-model", seconds))
    await rec.rebuild()
    await rec.step()
    assert [p["metadata"]["annotations"][ANN_TRIAL] for p in kube.created] == [trials[2].trial_id]
    assert rec.phase == "Running" and "Failed" not in rec.conditions
    learned = [m for kind, reason, m in events if reason == "LaunchHistory"]
    assert learned and "3 trial times of 3 tasks" in learned[0]
    assert any(
        kind == "Warning" and reason == "LaunchHistoryUnavailable" and "absent" in m for kind, reason, m in events
    )

    # An edit naming another earlier run is read at once, not at the next operator start.
    second = LocalStore(out / "second" / "uid-9")
    second.commit(trials[0].trial_id, earlier_record(trials[0], "old-model", 5))
    body["spec"]["launchOrder"] = {"learnFrom": ["pilot", "absent", "second"]}
    body["metadata"]["generation"] = 2
    await rec.check_spec()
    assert any(reason == "LaunchHistory" and "second" in m and "1 trial times" in m for _, reason, m in events)


# ------------------------------------------------------------------- Job-like status


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """The Kubernetes events the reconciler posts: (type, reason, message)."""
    events: list[tuple[str, str, str]] = []
    monkeypatch.setattr(kopf, "info", lambda body, reason, message: events.append(("Normal", reason, message)))
    monkeypatch.setattr(kopf, "warn", lambda body, reason, message: events.append(("Warning", reason, message)))
    return events


def edit(rec: Reconciler, **spec: Any) -> None:
    """An edit of the run's spec, as kopf's live body shows it (a new generation)."""
    rec.body["spec"].update(spec)
    rec.body["metadata"]["generation"] += 1


def tid_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["annotations"][ANN_TRIAL])


def with_status(pod: dict[str, Any], phase: str) -> dict[str, Any]:
    return {**pod, "status": {"phase": phase}}


async def test_suspend_deletes_the_pods_and_their_trials_wait_without_using_a_try(
    tmp_path: Path, posted: list[tuple[str, str, str]]
) -> None:
    """spec.suspend, as a Job's: every pod of the run is deleted and Suspended=True says so. A pod that stored its
    record before it stopped is that trial's outcome; the others' trials go back to pending, no retry charged, no
    infrastructure error, no record written, and each is taken only once its pod is gone (its name is used again).
    The resume sets Suspended=False (Resumed), restarts status.startedAt (the deadline's clock, as a Job's
    startTime) and launches the waiting trials under their first try's names."""
    rec, kube = await launched_run(tmp_path, 3)
    assert rec.state is not None and rec.store is not None
    first, second, third = kube.created
    started = rec.started_at
    edit(rec, suspend=True)
    await rec.step()
    assert sorted(kube.deleted) == sorted(p["metadata"]["name"] for p in kube.created)
    suspended = rec.conditions["Suspended"]
    assert (suspended["status"], suspended["reason"]) == ("True", "JobSuspended"), suspended
    assert [r for _, r, _ in posted].count("Suspended") == 1
    rec.store.commit(tid_of(first), record(rec.state.trials[tid_of(first)]))  # stored before its runner stopped
    for kind, pod in [
        ("MODIFIED", with_status(first, "Succeeded")),
        ("DELETED", with_status(first, "Succeeded")),
        ("MODIFIED", with_status(second, "Failed")),  # stopped by the deletion; the pod is not gone yet
        ("DELETED", with_status(third, "Running")),
    ]:
        rec.queue.put_nowait((kind, pod))
    await rec.step()
    assert list(rec.state.done) == [tid_of(first)]
    assert list(rec.state.in_flight) == [tid_of(second)]  # waits for its pod to be gone
    rec.queue.put_nowait(("DELETED", with_status(second, "Failed")))
    await rec.step()
    assert not rec.state.in_flight and rec.shared.inflight == 0
    assert rec.state.retries == {} and rec.state.infra_streak == 0
    status = rec.status()
    assert status["phase"] == "Suspended", status
    assert status["counts"] == {
        "total": 3,
        "pending": 2,
        "waitingAdmission": 0,
        "running": 0,
        "finished": 1,
        "passed": 1,
        "failed": 0,
        "infraErrors": 0,
        "retries": 0,
    }, status["counts"]
    assert rec.store.read_result(tid_of(second)) is None and rec.store.read_result(tid_of(third)) is None
    assert len(kube.created) == 3  # nothing launched while suspended
    await asyncio.sleep(0.01)
    edit(rec, suspend=False)
    await rec.step()
    resumed = rec.conditions["Suspended"]
    assert (resumed["status"], resumed["reason"]) == ("False", "Resumed"), resumed
    assert rec.status()["phase"] == "Running"
    assert started is not None and rec.started_at is not None and rec.started_at > started
    relaunched = kube.created[3:]
    assert sorted(p["metadata"]["name"] for p in relaunched) == sorted(p["metadata"]["name"] for p in (second, third))
    assert all(p["metadata"]["labels"]["mcpfleet.io/retry"] == "0" for p in relaunched)


async def test_a_restart_while_suspended_stops_the_pods_it_finds_without_charging_their_trials(
    tmp_path: Path, posted: list[tuple[str, str, str]]
) -> None:
    """The operator restarts while a suspended run's pods are still stopping (one still running, one stopped but not
    yet gone). The new one deletes them too and counts neither as a try; startedAt stays as it was."""
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    out = tmp_path / "out"
    kube = FakeKube()
    before = reconciler(evalrun(pack, out, 2), kube)
    assert await before.load()
    await before.rebuild()
    await before.step()
    running, stopped = kube.created
    body = evalrun(pack, out, 2, suspend=True)
    body["metadata"]["generation"] = 2
    since = "2026-01-01T00:00:00.000Z"
    body["status"].update(
        phase="Suspended",
        startedAt=since,
        observedGeneration=2,
        conditions=[{"type": "Suspended", "status": "True", "reason": "JobSuspended", "lastTransitionTime": since}],
    )
    kube.pods = [with_status(running, "Running"), with_status(stopped, "Failed")]
    kube.deleted.clear()
    rec = reconciler(body, kube)
    assert await rec.load()
    await rec.rebuild()
    await rec.step()
    assert sorted(kube.deleted) == sorted(p["metadata"]["name"] for p in kube.pods)
    assert rec.state is not None and len(rec.state.in_flight) == 2  # each waits for its pod to be gone
    for pod in kube.pods:
        rec.queue.put_nowait(("DELETED", pod))
    await rec.step()
    assert not rec.state.in_flight and not rec.state.done and rec.state.retries == {}
    status = rec.status()
    assert status["phase"] == "Suspended" and status["startedAt"] == since
    assert status["counts"]["pending"] == 2 and status["counts"]["infraErrors"] == 0, status["counts"]
    assert rec.conditions["Suspended"]["lastTransitionTime"] == since  # still suspended: no new transition
    assert not [r for _, r, _ in posted if r == "Suspended"]  # said once, by the operator that suspended it
    assert len(kube.created) == 2


async def test_a_run_created_suspended_starts_when_resumed(tmp_path: Path, posted: list[tuple[str, str, str]]) -> None:
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    kube = FakeKube()
    rec = reconciler(evalrun(pack, tmp_path / "out", 2, suspend=True), kube)
    assert await rec.load()
    await rec.rebuild()
    await rec.step()
    status = rec.status()
    assert status["phase"] == "Suspended" and "startedAt" not in status, status
    assert rec.conditions["Suspended"]["status"] == "True"
    assert not kube.created and "Started" not in [r for _, r, _ in posted]
    edit(rec, suspend=False)
    await rec.step()
    assert rec.status()["startedAt"] and [r for _, r, _ in posted].count("Started") == 1
    assert len(kube.created) == 2


async def test_a_failed_runs_last_status_shows_none_of_its_pods_running(tmp_path: Path, quiet_events: None) -> None:
    """Past backoffLimit the run fails and its pods are deleted: the status it ends with says none runs (their
    trials pending), not the count of before."""
    rec, kube = await launched_run(tmp_path, 8, backoff_limit=2)
    for pod in kube.created[:3]:
        rec.queue.put_nowait(("DELETED", pod))  # gone before it finished, no record
    await rec.step()
    assert rec.state is None and kube.status["phase"] == "Failed"
    counts = kube.status["counts"]
    assert (counts["running"], counts["pending"], counts["infraErrors"]) == (0, 5, 3), counts
    assert rec.status()["counts"] == counts  # written again (a failed write) the same


async def test_a_run_that_scored_no_trial_fails(tmp_path: Path, posted: list[tuple[str, str, str]]) -> None:
    """Every trial an infrastructure error: the run measured nothing, so it ends Failed (NoTrialScored), not
    Succeeded/Complete."""
    rec, kube = await launched_run(tmp_path, 2)
    for pod in kube.created:
        rec.queue.put_nowait(("DELETED", pod))
    await rec.step()
    assert rec.phase == "Failed" and kube.status["phase"] == "Failed"
    failed, complete = rec.conditions["Failed"], rec.conditions["Complete"]
    assert (failed["status"], failed["reason"]) == ("True", "NoTrialScored"), failed
    assert (complete["status"], complete["reason"]) == ("False", "NoTrialScored"), complete
    assert "none of the 2 trials was scored (2 infra_error)" in failed["message"], failed
    assert ("Warning", "NoTrialScored") in [(k, r) for k, r, _ in posted]


async def test_a_run_with_some_unscored_trials_succeeds_and_says_how_many(tmp_path: Path, quiet_events: None) -> None:
    rec, kube = await launched_run(tmp_path, 2)
    assert rec.store is not None and rec.state is not None
    ok, lost = kube.created
    rec.store.commit(tid_of(ok), record(rec.state.trials[tid_of(ok)]))
    rec.queue.put_nowait(("MODIFIED", finished_pod(ok)))
    rec.queue.put_nowait(("DELETED", lost))
    await rec.step()
    assert rec.phase == "Succeeded" and "Failed" not in rec.conditions
    complete = rec.conditions["Complete"]
    assert complete["status"] == "True" and "2 trials recorded, 1 not scored" in complete["message"], complete
    assert kube.status["counts"]["infraErrors"] == 1 and kube.status["notScored"]["infra_error"] == 1


async def test_a_condition_keeps_its_transition_time_while_its_status_holds(tmp_path: Path, quiet_events: None) -> None:
    """lastTransitionTime is when the status last changed (the Kubernetes convention), not when it was last set."""
    pack = make_tiny_pack(tmp_path / "pack", tasks=1)
    body = evalrun(pack, tmp_path / "out", 1)
    then = "2026-01-01T00:00:00.000Z"
    body["status"]["conditions"] = [
        {
            "type": "Valid",
            "status": "True",
            "reason": "Planned",
            "message": "1 trial planned",
            "lastTransitionTime": then,
        }
    ]
    rec = reconciler(body, FakeKube())
    assert await rec.load()  # sets Valid=True again
    assert rec.conditions["Valid"]["lastTransitionTime"] == then
    rec.set_condition("Valid", False, "TasksUnavailable", "the pack cannot be read")
    assert rec.conditions["Valid"]["lastTransitionTime"] > then
    assert rec.conditions["Valid"]["reason"] == "TasksUnavailable"


async def test_a_restart_counts_on_the_infrastructure_failures_in_a_row(tmp_path: Path, quiet_events: None) -> None:
    """backoffLimit counts infrastructure failures in a row; a restart rebuilds the count from the records (those
    stored after the last trial that ended otherwise), so it does not start again from zero."""
    pack = make_tiny_pack(tmp_path / "pack", tasks=5)
    out = tmp_path / "out"
    kube = FakeKube()
    rec = reconciler(evalrun(pack, out, 5, backoff_limit=2), kube)
    assert await rec.load()
    assert rec.state is not None and rec.store is not None
    old, passed, infra1, infra2, last = rec.state.trials.values()
    rec.store.commit(old.trial_id, record(old, "infra_error", "2026-01-01T10:00:00.000Z"))  # before the reset
    rec.store.commit(passed.trial_id, record(passed, None, "2026-01-01T10:01:00.000Z"))
    rec.store.commit(infra1.trial_id, record(infra1, "infra_error", "2026-01-01T10:02:00.000Z"))
    rec.store.commit(infra2.trial_id, record(infra2, "infra_error", "2026-01-01T10:03:00Z"))
    await rec.rebuild()
    assert rec.state.infra_streak == 2
    await rec.step()
    [pod] = kube.created
    assert tid_of(pod) == last.trial_id
    rec.queue.put_nowait(("DELETED", pod))  # a third in a row: over backoffLimit 2
    await rec.step()
    assert rec.phase == "Failed" and rec.conditions["Failed"]["reason"] == "BackoffLimitExceeded"


async def test_a_run_past_its_active_deadline_fails_and_stops_its_pods(tmp_path: Path, quiet_events: None) -> None:
    rec, kube = await launched_run(tmp_path, 2, activeDeadlineSeconds=30)
    kube.pods = list(kube.created)
    await rec.step()
    assert rec.state is not None and not kube.deleted  # within its deadline
    rec.started_at = "2026-01-01T00:00:00.000Z"  # active for long since
    await rec.step()
    assert rec.state is None and rec.phase == "Failed"
    failed = rec.conditions["Failed"]
    assert failed["reason"] == "DeadlineExceeded" and "over spec.activeDeadlineSeconds 30" in failed["message"]
    assert sorted(kube.deleted) == sorted(p["metadata"]["name"] for p in kube.created)
    assert kube.status["phase"] == "Failed" and kube.status["counts"]["running"] == 0, kube.status


async def test_a_suspended_run_is_not_failed_by_its_deadline(tmp_path: Path, quiet_events: None) -> None:
    rec, kube = await launched_run(tmp_path, 1, activeDeadlineSeconds=30)
    edit(rec, suspend=True)
    await rec.step()
    rec.started_at = "2026-01-01T00:00:00.000Z"
    await rec.step()
    assert rec.state is not None and rec.status()["phase"] == "Suspended"
    edit(rec, suspend=False)  # the resume restarts the clock
    await rec.step()
    assert rec.state is not None and rec.status()["phase"] == "Running"
