"""How the reconciler takes a batch of pod events (operator/reconciler.py): different trials' outcomes at once,
one trial's events in order, and a run that fails mid-batch stops cleanly. And what it launches first when an
earlier run's trial times are named (spec.launchOrder.learnFrom)."""

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

from mcpfleet.operator.manifests import ANN_TRIAL
from mcpfleet.operator.reconciler import Reconciler, Shared
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.plan import TrialSpec
from mcpfleet.runner.records import TrialResult, dumps, now_iso
from mcpfleet.runner.store import LocalStore

NS = "evals"


class FakeKube:
    """The operator's API calls, answered at once and remembered."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.gone: set[str] = set()  # pods whose delete answers 404
        self.hold: dict[str, Callable[[], bool]] = {}  # pod -> its delete answers once this holds

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> bool:
        self.created.append(pod)
        return True

    async def delete_pod(self, namespace: str, name: str) -> bool:
        await asyncio.sleep(0)  # a request: other coroutines run meanwhile
        while name in self.hold and not self.hold[name]():
            await asyncio.sleep(0.01)
        self.deleted.append(name)
        return name not in self.gone

    async def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return []

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.status = status


def evalrun(pack: Path, out: Path, trials: int, backoff_limit: int | None = None) -> kopf.Body:
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
        },
        "status": {},
    }
    return kopf.Body(raw)


def finished_pod(pod: dict[str, Any]) -> dict[str, Any]:
    return {**pod, "status": {"phase": "Succeeded"}}


def record(trial: TrialSpec, failure: str | None = None) -> bytes:
    now = now_iso()
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


async def launched_run(tmp_path: Path, trials: int, backoff_limit: int | None = None) -> tuple[Reconciler, FakeKube]:
    pack = make_tiny_pack(tmp_path / "pack", tasks=trials)
    kube = FakeKube()
    shared = Shared(settings=OperatorSettings(create_rate=1000.0, max_pods=1000), kube=kube)  # type: ignore[arg-type]
    shared.tokens = 1000.0
    rec = Reconciler(shared, evalrun(pack, tmp_path / "out", trials, backoff_limit), logging.getLogger("test"))
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
    assert kube.deleted == [pod["metadata"]["name"]]


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
