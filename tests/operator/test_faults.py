"""The operator under faults, with real parts only: the API emulator, the test kubelet running real
`mcpfleet materialise` / supergateway / `mcpfleet trial` processes, moto S3 (behind a FaultProxy where S3
fails), and the real operator in a kopf thread (its errors re-raised when the thread stops).

Runs are tiny (1 to 3 trials) wherever the property does not need more; the restart test keeps the
2 models x 3 tasks x 2 attempts shape so that pods are in flight, finished and waiting when it restarts.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from s3server import FaultProxy
from support import NS, evalrun, s3_keys, status_of, wait_until

from mcpfleet.operator.manifests import LABEL_RUN_UID, pod_name, trial_pod
from mcpfleet.operator.reconciler import infra_record
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.results.records import dumps
from mcpfleet.runner.results.store import open_store
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.spec.trial import TrialSpec
from mcpfleet.runner.tasks.discovery import bundled_root

REPO = Path(__file__).resolve().parents[2]
ORACLE_SLOW = {"name": "oracle", "model": "scripted/oracle?latency=0.3"}
IDLE = {"name": "idle", "model": "scripted/noop"}
ONE_TASK = "filesystem/standard/tiny/move_todo_0"


# -- helpers ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def operator(kube: RunningEmulator) -> Iterator[Any]:
    with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS) as op:
        yield op


def records(s3: str, bucket: str) -> dict[str, dict[str, Any]]:
    """Every trial record in the bucket, by trial id."""
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    out = {}
    for key in s3_keys(s3, bucket):
        if key.endswith("/result.json") and "/trials/" in key:
            rec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            out[rec["trial_id"]] = rec
    return out


def trials_of(body: dict[str, Any], uid: str | None = None) -> list[TrialSpec]:
    meta = dict(body["metadata"], uid=uid) if uid else body["metadata"]
    return plan(parse_evalrun(dict(body, metadata=meta)), bundled_root())


def pod_creations(kube: RunningEmulator) -> int:
    return kube.call(lambda: kube.emulator.request_counts[("create", "pods")])


def events(kube: RunningEmulator, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.objects("events", NS) if e.get("reason") == reason]


def succeeded(kube: RunningEmulator, name: str) -> dict[str, Any] | None:
    st = status_of(kube, name)
    return st if st.get("phase") == "Succeeded" else None


def pod_phase(kube: RunningEmulator, name: str) -> str | None:
    pod = kube.get("pods", NS, name)
    return ((pod or {}).get("status") or {}).get("phase")


async def finished_run(kube: RunningEmulator, name: str, timeout: float = 120) -> dict[str, Any]:
    status = await wait_until(lambda: succeeded(kube, name), timeout, f"{name} to succeed")
    await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to be deleted")
    return status


async def unscored_run(
    kube: RunningEmulator, name: str, timeout: float = 120, named: str = "1 infra_error"
) -> dict[str, Any]:
    """A run whose every trial ended unscored (here ``named``: an infrastructure error by default): it measured
    nothing, so it ends Failed (NoTrialScored), never Succeeded; its pods are deleted all the same."""
    status = await wait_until(
        lambda: (st := status_of(kube, name)).get("phase") in ("Succeeded", "Failed") and st, timeout, f"{name} to end"
    )
    await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to be deleted")
    failed: dict[str, Any] = next((c for c in status["conditions"] if c["type"] == "Failed"), {})
    complete: dict[str, Any] = next((c for c in status["conditions"] if c["type"] == "Complete"), {})
    assert status["phase"] == "Failed" and failed.get("reason") == "NoTrialScored", status
    assert complete.get("status") == "False", complete  # never Complete=True
    assert f"was scored ({named})" in failed["message"], failed
    return status


def one_trial(name: str, pack: Path, s3: str, bucket: str, model: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return evalrun(
        name, pack, s3, bucket, models=[model], attempts=1, tasks={"path": str(pack), "include": [ONE_TASK]}, **spec
    )


# -- 1. operator restart ------------------------------------------------------------------------------


async def test_operator_restart_mid_run(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """Stop the operator with pods in flight and start a new one: the run completes, no trial runs twice."""
    body = evalrun("restart", image_pack, s3, bucket, models=[ORACLE_SLOW, IDLE])
    async with Kubelet(kube.url) as kubelet:
        stack = contextlib.ExitStack()
        stack.enter_context(operator(kube))
        kube.create(body)
        await wait_until(
            lambda: (
                status_of(kube, "restart").get("counts", {}).get("finished", 0) >= 4
                and any(pod_phase(kube, p["metadata"]["name"]) == "Running" for p in kube.objects("pods", NS))
            ),
            120,
            "4 finished trials and one running",
        )
        started_at = status_of(kube, "restart")["startedAt"]
        # Stop in a thread: the kubelet on this loop keeps running the pods meanwhile.
        await asyncio.to_thread(stack.close)
        in_flight = {p["metadata"]["name"] for p in kube.objects("pods", NS)}
        assert in_flight, "the operator must stop while pods are in flight"
        await asyncio.sleep(2)  # some pods finish while no operator is watching
        with operator(kube):
            status = await finished_run(kube, "restart")
    trials = trials_of(body)
    expected = {pod_name("restart", t.trial_id) for t in trials}
    assert len(expected) == 12
    # Every trial's pod was created exactly once: the kubelet ran each name once and nobody tried to create more.
    assert sorted(kubelet.started) == sorted(expected), sorted(kubelet.started)
    assert pod_creations(kube) == 12
    assert in_flight <= expected
    recs = records(s3, bucket)
    assert sorted(recs) == sorted(t.trial_id for t in trials)
    assert all(r["failure"] != "infra_error" and r["infra_attempts"] == 1 for r in recs.values()), recs
    assert sum(r["passed"] for r in recs.values()) == 6
    assert status["counts"] == {
        "total": 12,
        "pending": 0,
        "waitingAdmission": 0,
        "running": 0,
        "finished": 12,
        "passed": 6,
        "failed": 6,
        "infraErrors": 0,
        "retries": 0,
    }
    assert status["progress"] == "12/12" and status["startedAt"] == started_at
    assert kubelet.max_seen <= 3


async def test_restart_after_crash_between_infra_record_and_pod_delete(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """An operator that died after recording a try's infra error but before deleting its pod: the new one must
    not count that try again (it would give up without ever running the retry)."""
    body = one_trial(
        "stale",
        image_pack,
        s3,
        bucket,
        {"name": "oracle", "model": "scripted/oracle"},
        retries={"limit": 1, "backoffSeconds": 0},
    )
    uid = kube.create(body)["metadata"]["uid"]
    run = parse_evalrun(dict(body, metadata=dict(body["metadata"], uid=uid)))
    [trial] = plan(run, bundled_root())
    store = open_store(run.spec.output, run.name, bundled_root(), run_uid=uid)
    store.commit(
        trial.trial_id,
        dumps(infra_record(run, trial, 1, "pod Failed; state exit 1; no stored record").model_dump(mode="json")),
    )
    stale = trial_pod(run, trial, OperatorSettings.from_env(), 0)
    kube.create(stale)
    kube.patch("pods", NS, stale["metadata"]["name"], {"status": {"phase": "Failed"}}, subresource="status")
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            status = await finished_run(kube, "stale")
    assert kubelet.started == [pod_name("stale", trial.trial_id, 1)]
    rec = records(s3, bucket)[trial.trial_id]
    assert rec["passed"] is True and rec["failure"] is None and rec["infra_attempts"] == 2, rec
    assert status["counts"]["passed"] == 1 and status["counts"]["infraErrors"] == 0
    assert status["counts"]["retries"] == 1  # recovered from the stored record, not lost with the old operator


# -- 2. infrastructure failures of a pod ------------------------------------------------------------


def add_stateless_task(pack: Path) -> str:
    """A task whose initial state folder is missing: the pod's init container (materialise) exits 2."""
    src = pack / "filesystem" / "standard" / "tiny" / "move_todo_0"
    dst = pack / "filesystem" / "standard" / "nostate" / "broken"
    shutil.copytree(src, dst)
    assert not (pack / "filesystem" / "states" / "nostate").exists()
    return "filesystem/standard/nostate/broken"


async def test_pod_failing_without_record_is_retried_then_infra_error(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    task = add_stateless_task(image_pack)
    body = evalrun(
        "broken",
        image_pack,
        s3,
        bucket,
        models=[IDLE],
        attempts=1,
        tasks={"path": str(image_pack), "include": [task]},
        retries={"limit": 1, "backoffSeconds": 1.5},
    )
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(body)
            status = await unscored_run(kube, "broken")
            await wait_until(lambda: events(kube, "InfraError"), 10, "the InfraError event")  # kopf posts it later
    [trial] = trials_of(body)
    first, retry = pod_name("broken", trial.trial_id), pod_name("broken", trial.trial_id, 1)
    assert kubelet.started == [first, retry] and retry == first + "-r1"
    ended = next(t for t, p, e in kubelet.timeline if p == first and e == "end")
    began = next(t for t, p, e in kubelet.timeline if p == retry and e == "start")
    assert began - ended >= 1.5, "the retry must wait for spec.retries.backoffSeconds"
    rec = records(s3, bucket)[trial.trial_id]
    assert rec["failure"] == "infra_error" and rec["passed"] is False and rec["infra_attempts"] == 2, rec
    assert "state exit 2" in rec["error"] and "no stored record" in rec["error"], rec["error"]
    assert status["counts"] == {
        "total": 1,
        "pending": 0,
        "waitingAdmission": 0,
        "running": 0,
        "finished": 1,
        "passed": 0,
        "failed": 0,
        "infraErrors": 1,
        "retries": 1,
    }
    warnings = [e for e in events(kube, "InfraError") if e.get("type") == "Warning"]
    assert len(warnings) == 1 and trial.trial_id in warnings[0]["message"], warnings
    assert "gave up after 2 tries" in warnings[0]["message"]


async def test_pod_deleted_while_running_is_retried(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    body = one_trial("deleted", image_pack, s3, bucket, ORACLE_SLOW, retries={"limit": 1, "backoffSeconds": 0})
    [trial] = trials_of(body)
    first = pod_name("deleted", trial.trial_id)
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(body)
            await wait_until(lambda: pod_phase(kube, first) == "Running", 60, "the pod to run")
            kube.delete("pods", NS, first)
            status = await finished_run(kube, "deleted")
    assert kubelet.started == [first, first + "-r1"]
    rec = records(s3, bucket)[trial.trial_id]
    assert rec["passed"] is True and rec["infra_attempts"] == 2, rec  # the retry's own record
    assert status["counts"] == {
        "total": 1,
        "pending": 0,
        "waitingAdmission": 0,
        "running": 0,
        "finished": 1,
        "passed": 1,
        "failed": 0,
        "infraErrors": 0,
        "retries": 1,
    }
    assert not events(kube, "InfraError")


async def test_image_pull_backoff_is_an_infra_error_at_once(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    image = "registry.invalid/mcpfleet/runner:missing"
    body = one_trial(
        "nopull", image_pack, s3, bucket, IDLE, retries={"limit": 1, "backoffSeconds": 0}, pod={"runnerImage": image}
    )  # pendingTimeoutSeconds stays 600
    [trial] = trials_of(body)
    t0 = time.monotonic()
    async with Kubelet(kube.url, pull_failures={image}) as kubelet:
        with operator(kube):
            kube.create(body)
            status = await unscored_run(kube, "nopull", timeout=60)
            await wait_until(lambda: events(kube, "InfraError"), 10, "the InfraError event")  # kopf posts it later
    assert time.monotonic() - t0 < 60  # not the 600 s pending deadline
    first = pod_name("nopull", trial.trial_id)
    assert kubelet.started == [first, first + "-r1"]
    rec = records(s3, bucket)[trial.trial_id]
    assert rec["failure"] == "infra_error" and rec["infra_attempts"] == 2, rec
    assert "ImagePullBackOff" in rec["error"], rec["error"]
    # and the kubelet's message, which says what to fix (for a missing Secret: 'secret "x" not found')
    assert f'Back-off pulling image "{image}"' in rec["error"], rec["error"]
    assert status["counts"]["infraErrors"] == 1 and status["counts"]["retries"] == 1
    assert any(trial.trial_id in e["message"] for e in events(kube, "InfraError"))


async def test_pending_deadline(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """No kubelet: the pod stays Pending with no status at all (unschedulable). The spec minimum is 10 s."""
    body = one_trial("pending", image_pack, s3, bucket, IDLE, retries={"limit": 0}, pod={"pendingTimeoutSeconds": 10})
    [trial] = trials_of(body)
    name = pod_name("pending", trial.trial_id)
    with operator(kube):
        kube.create(body)
        await wait_until(lambda: kube.get("pods", NS, name), 20, "the pod")
        created = time.monotonic()
        await asyncio.sleep(8)
        assert kube.get("pods", NS, name) is not None, "deleted before the pending deadline"
        assert status_of(kube, "pending")["counts"]["running"] == 1
        status = await unscored_run(kube, "pending", timeout=30)
        assert time.monotonic() - created >= 9.5
    rec = records(s3, bucket)[trial.trial_id]
    assert rec["failure"] == "infra_error" and rec["infra_attempts"] == 1, rec
    assert "still Pending after 10 s" in rec["error"], rec["error"]
    assert status["counts"]["infraErrors"] == 1 and status["counts"]["finished"] == 1
    assert pod_creations(kube) == 1


# -- 5. the EvalRun deleted mid-run ------------------------------------------------------------------


async def test_evalrun_deleted_mid_run(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    body = evalrun("doomed", image_pack, s3, bucket, models=[ORACLE_SLOW], attempts=1, concurrency={"total": 2})
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            uid = kube.create(body)["metadata"]["uid"]
            await wait_until(lambda: kubelet.running == 2, 60, "two pods running")
            pods = kube.objects("pods", NS)
            assert pods and all(p["metadata"]["ownerReferences"][0]["uid"] == uid for p in pods)
            kube.delete("evalruns", NS, "doomed")
            await wait_until(lambda: kube.get("evalruns", NS, "doomed") is None, 30, "the EvalRun to go")
            await wait_until(lambda: not kube.objects("pods", NS), 30, "its pods to be garbage-collected")
            made = pod_creations(kube)
            await asyncio.sleep(3)
            assert not kube.objects("pods", NS), "a pod appeared after the run was deleted"
            assert pod_creations(kube) == made
            assert kubelet.running == 0
    assert made <= 3


# -- 6. S3 unreachable -------------------------------------------------------------------------------


async def test_s3_outage_during_upload(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The S3 endpoint drops every connection from the first upload of a record until at least 8 s have passed
    and the operator has lost one whole read of a record (3 x 5 tries): runner and operator both meet the outage.
    A runner gives up on S3 within ~5 s, so at least the first upload fails whole. Trials whose upload failed
    are infra errors and retried; in the end every trial has its own real record, and only what a record says
    passed counts as passed."""
    window = {"start": 0.0, "end": 0.0, "lost_reads": 0}
    uploaded: set[str] = set()  # trial folders a runner tried to put files in

    def fault(method: str, path: str) -> str | None:  # called under the proxy's lock
        now = time.monotonic()
        key = path.split("?", 1)[0]
        if method == "PUT" and "/trials/" in key:
            uploaded.add(key.rsplit("/", 1)[0] + "/result.json")
        if not window["start"] and method == "PUT" and "/trials/" in path:
            window["start"] = now
        if not window["start"] or window["end"]:
            return None
        if now - window["start"] >= 8.0 and window["lost_reads"] >= 15:
            window["end"] = now
            return None
        # A runner reads its trial's record before it writes its files (never replacing a scored one); the
        # operator reads it after the pod ended, i.e. after the runner's puts.
        if method == "GET" and key in uploaded:
            window["lost_reads"] += 1
        return "drop"

    with FaultProxy(s3, fault) as proxy:
        body = evalrun(
            "outage",
            image_pack,
            s3,
            bucket,
            models=[{"name": "oracle", "model": "scripted/oracle"}],
            attempts=1,
            retries={"limit": 3, "backoffSeconds": 0},
        )
        body["spec"]["output"]["endpointUrl"] = proxy.url
        async with Kubelet(kube.url) as kubelet:
            with operator(kube):
                kube.create(body)
                status = await finished_run(kube, "outage", timeout=180)
    assert any("results store failed" in r.getMessage() for r in caplog.get_records("call")), (
        "the operator never met the outage"
    )
    assert window["end"] and proxy.count("drop", "PUT") >= 15  # at least one whole upload (3 x 5 tries) was lost
    recs = records(s3, bucket)
    trials = trials_of(body)
    assert sorted(recs) == sorted(t.trial_id for t in trials)
    assert all(r["failure"] is None and r["passed"] is True for r in recs.values()), recs
    retried = [r for r in recs.values() if r["infra_attempts"] > 1]
    assert retried, "the outage hit no upload"
    assert status["counts"]["passed"] == 3 == sum(r["passed"] for r in recs.values())
    assert status["counts"]["infraErrors"] == 0
    assert status["counts"]["retries"] == sum(r["infra_attempts"] - 1 for r in recs.values())
    # The pods the kubelet ran are exactly each trial's tries, by name.
    assert sorted(kubelet.started) == sorted(
        pod_name("outage", tid, n) for tid, r in recs.items() for n in range(r["infra_attempts"])
    )


# -- 7. suspend --------------------------------------------------------------------------------------


async def test_suspend_then_resume(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    body = evalrun(
        "paused",
        image_pack,
        s3,
        bucket,
        models=[IDLE],
        attempts=1,
        suspend=True,
        tasks={"path": str(image_pack), "include": ["*/move_todo_0", "*/move_todo_1"]},
    )
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(body)
            await wait_until(lambda: status_of(kube, "paused").get("phase") == "Suspended", 20, "Suspended")
            await asyncio.sleep(2)
            assert pod_creations(kube) == 0 and not kube.objects("pods", NS)
            st = status_of(kube, "paused")
            assert st["phase"] == "Suspended" and st["progress"] == "0/2" and st["counts"]["pending"] == 2
            assert not st.get("startedAt"), st  # a Job created suspended has no startTime either
            suspended = next(c for c in st["conditions"] if c["type"] == "Suspended")
            assert (suspended["status"], suspended["reason"]) == ("True", "JobSuspended"), suspended
            assert not events(kube, "Started")
            kube.patch("evalruns", NS, "paused", {"spec": {"suspend": False}})
            status = await finished_run(kube, "paused")
    assert sorted(kubelet.started) == sorted(pod_name("paused", t.trial_id) for t in trials_of(body))
    assert status["counts"]["finished"] == 2 and status["counts"]["infraErrors"] == 0
    assert status["observedGeneration"] == 2
    assert status["startedAt"], status
    resumed = next(c for c in status["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "Resumed"), resumed
    assert len(records(s3, bucket)) == 2


# -- 8. provider faults --------------------------------------------------------------------------------


async def test_a_config_error_stops_the_models_launches_and_an_edit_resumes_it(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """A 401 from the model's endpoint: no more pods of that model (no more paid trials), one condition and one
    event, the other model finishes, the run is Failed with the stopped model named; the trial is not scored.
    The fix: the Secret gets the right key, then an edit of a field that does not change results (the models
    cannot change once trials exist) lifts the stop and the run completes."""
    from mcpfleet.operator import metrics as operator_metrics

    keyed = {
        "name": "keyed",
        "model": "scripted/oracle?key=the-right-key",
        "apiKeySecretRef": {"name": "llm-key", "key": "key"},
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "llm-key", "namespace": NS},
        "stringData": {"key": "a-wrong-key"},
    }
    body = evalrun(
        "badkey",
        image_pack,
        s3,
        bucket,
        models=[keyed, IDLE],
        attempts=2,
        concurrency={"total": 1},
        tasks={"path": str(image_pack), "include": [ONE_TASK]},
    )
    trials = trials_of(body)
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(secret)
            kube.create(body)
            status = await wait_until(
                lambda: (st := status_of(kube, "badkey")).get("phase") == "Failed" and st, 240, "the run to fail"
            )
            await wait_until(lambda: events(kube, "ConfigError"), 10, "the ConfigError event")
            await asyncio.sleep(1.5)  # nothing more is launched while the model stays stopped
            assert pod_creations(kube) == 3, kubelet.started  # keyed's first trial, then idle's two
            warnings = events(kube, "ConfigError")
            assert len(warnings) == 1 and warnings[0]["type"] == "Warning", warnings
            assert "model keyed stopped: config_error: " in warnings[0]["message"] and "401" in warnings[0]["message"]
            cond = {c["type"]: c for c in status["conditions"]}
            assert cond["ModelsStopped"]["status"] == "True" and cond["ModelsStopped"]["reason"] == "ConfigError"
            assert (
                cond["Complete"]["status"] == "False" and "1 trial(s) of keyed not run" in cond["Complete"]["message"]
            )
            assert list(status["stoppedModels"]) == ["keyed"] and status["notScored"] == {
                "budget_exhausted": 0,
                "config_error": 1,
                "infra_error": 0,
                "provider_error": 0,
            }
            assert status["counts"]["finished"] == 3 and status["counts"]["failed"] == 2  # idle's, not keyed's
            assert {r["model"]: r["passAt1"] for r in status["results"]} == {"idle": "0.0000"}
            recs = records(s3, bucket)
            assert sorted(r["failure"] for r in recs.values() if r["model"] == "keyed") == ["config_error"]
            summary_keys = [k for k in s3_keys(s3, bucket) if k.endswith("/summary.json")]
            assert summary_keys, "summary.json is written for what did run"
            assert (
                operator_metrics.TRIALS.labels(
                    NS, "badkey", "keyed", "filesystem", "config_error", "config_error"
                )._value.get()
                == 1
            )  # noqa: SLF001

            kube.patch("secrets", NS, "llm-key", {"stringData": {"key": "the-right-key"}})
            kube.patch("evalruns", NS, "badkey", {"spec": {"provider": {"retryAfterMaxSeconds": 30}}})
            status = await finished_run(kube, "badkey", timeout=240)
    cond = {c["type"]: c for c in status["conditions"]}
    assert cond["ModelsStopped"]["status"] == "False" and "stoppedModels" not in status
    assert (
        status["counts"]["passed"] == 2 and status["counts"]["finished"] == 4 and not any(status["notScored"].values())
    )
    recs = records(s3, bucket)
    assert sorted(recs) == sorted(t.trial_id for t in trials)
    assert all(r["passed"] for r in recs.values() if r["model"] == "keyed")


async def test_provider_errors_are_retried_and_not_scored(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    down = {"name": "down", "model": "scripted/noop?fault=status&fail_status=503"}
    body = one_trial("outage", image_pack, s3, bucket, down, limits={"llmRetries": 0})
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(body)
            status = await unscored_run(kube, "outage", named="1 provider_error")  # its only trial measured nothing
    [trial] = trials_of(body)
    assert kubelet.started == [pod_name("outage", trial.trial_id), pod_name("outage", trial.trial_id, 1)]
    rec = records(s3, bucket)[trial.trial_id]
    assert (rec["failure"], rec["infra_attempts"], rec["passed"]) == ("provider_error", 2, False)
    assert (
        status["notScored"] == {"budget_exhausted": 0, "config_error": 0, "infra_error": 0, "provider_error": 1}
        and status["counts"]["failed"] == 0
    )
    assert status["counts"]["retries"] == 1 and status["results"] == []  # nothing scored, no pass rate


# -- 9. the example, applied with kubectl -------------------------------------------------------------


async def test_example_evalrun_applied_with_kubectl(
    kube: RunningEmulator, operator_env: None, s3: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/evalrun.yaml as a user applies it: real models, no LLM keys Secret.

    No kubelet runs here: pods are never started, so the missing Secret never matters (a kubelet would hold
    every runner in CreateContainerConfigError, which the operator rightly retries and then records as infra
    errors: a race with the assertions below). What is checked is the first wave the operator creates and
    holds: exactly spec.concurrency.total pods (perModel each), labelled and owned, until the run is deleted.
    The example's bucket is served by moto through AWS_ENDPOINT_URL_S3 (the example names no endpoint)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3)
    for k, v in {
        "AWS_ACCESS_KEY_ID": "AKIAMCPFLEETTEST",
        "AWS_SECRET_ACCESS_KEY": "x" * 20,
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    client = boto3.client("s3", region_name="us-east-1")
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket="mcpfleet-results")
    example = REPO / "examples" / "evalrun.yaml"
    doc = yaml.safe_load(example.read_text())
    name = doc["metadata"]["name"]
    with operator(kube):
        out = kube.kubectl("apply", "--validate=false", "-f", str(example))
        assert f"evalrun.mcpfleet.io/{name} created" in out.stdout
        await wait_until(lambda: len(kube.objects("pods", NS)) >= 16, 30, "the first wave of pods")
        most = 0
        for _ in range(10):  # never more than spec.concurrency.total at once
            most = max(most, len(kube.objects("pods", NS)))
            await asyncio.sleep(0.2)
        assert most == 16
        status = await wait_until(
            lambda: status_of(kube, name).get("counts", {}).get("running") == 16 and status_of(kube, name),
            10,
            "status with 16 running",
        )
        er = kube.get("evalruns", NS, name)
        assert er is not None
        pods = kube.objects("pods", NS)
        trials = trials_of(doc, er["metadata"]["uid"])
        tasks = {t.task_id for t in trials}
        assert len(tasks) >= 16 and len(trials) == 2 * 4 * len(tasks)  # two models, four attempts
        assert status["phase"] == "Running" and status["progress"] == f"0/{len(trials)}"
        table = kube.kubectl("get", "evalruns").stdout
        assert name in table and "Running" in table and f"0/{len(trials)}" in table
        # The first wave: 16 planned trials, 8 per model (perModel), each a probe of a different task (the launch
        # order probes every task once before any task's second trial, to learn task lengths: operator/runstate.py).
        by_trial = {t.trial_id: t for t in trials}
        by_pod = {pod_name(name, t.trial_id): t for t in trials}
        wave = [by_pod[p["metadata"]["name"]] for p in pods]
        assert len({t.trial_id for t in wave}) == 16
        assert collections.Counter(t.model.name for t in wave) == {m: 8 for m in {t.model.name for t in trials}}
        assert len({t.task_id for t in wave}) == 16
        for pod in pods:
            meta = pod["metadata"]
            trial = by_trial[meta["annotations"]["mcpfleet.io/trial-id"]]
            labels = meta["labels"]
            assert labels["mcpfleet.io/run"] == name and labels[LABEL_RUN_UID] == er["metadata"]["uid"]
            assert labels["mcpfleet.io/model"] == trial.model.name
            assert labels["mcpfleet.io/service"] == "filesystem"
            assert labels["mcpfleet.io/task"] == trial.task_id.rsplit("/", 1)[-1]
            assert labels["mcpfleet.io/attempt"] == str(trial.attempt)
            assert meta["ownerReferences"] == [
                {
                    "apiVersion": "mcpfleet.io/v1alpha1",
                    "kind": "EvalRun",
                    "name": name,
                    "uid": er["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
            env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
            key = {"gpt-5": "openai", "claude-sonnet": "anthropic"}[trial.model.name]
            assert env["MCPFLEET_MODEL_API_KEY"]["valueFrom"] == {"secretKeyRef": {"name": "llm-keys", "key": key}}
        per_model = {
            m: sum(p["metadata"]["labels"]["mcpfleet.io/model"] == m for p in pods) for m in ("gpt-5", "claude-sonnet")
        }
        assert per_model == {"gpt-5": 8, "claude-sonnet": 8}
        listed = kube.kubectl("get", "pods", "-l", f"mcpfleet.io/run={name}", "-o", "name").stdout.split()
        assert len(listed) == 16
        kube.kubectl("delete", "evalrun", name, timeout=60)
        await wait_until(lambda: not kube.objects("pods", NS), 30, "the run's pods to be removed")
        made = pod_creations(kube)
        await asyncio.sleep(2)
        assert not kube.objects("pods", NS) and pod_creations(kube) == made == 16
