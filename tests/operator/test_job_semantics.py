"""What a Job controller guarantees, kept by the operator where a review found it was not: a pod template frozen
once pods exist, a terminal status that is never lost, no second try beside a first that may still run (also after
an operator restart), a failed run's pods stopped (and its last status showing none running), a run failed by
stopped models finished like any other (its TTL applies; a restart resumes it once the cause is fixed), suspend
deleting the run's pods without charging their trials, spec.activeDeadlineSeconds, and pods Kubernetes disrupts (a
drain) run again without counting against backoffLimit, as under a podFailurePolicy. (The reconciler's own
accounting of these is checked step by step in test_outcomes.py and test_disruptions.py.)

Each test plays one finding of the review with the real operator (a kopf thread) and the API emulator, and asserts
the Job-like behaviour. Where what a trial's pod does is the point, the test kubelet runs it for real; elsewhere the
test plays the node (stores the runner's record, reports the pod's phase), which is quicker and says the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp.web
import boto3
import pytest
from kubeemu import ApiError, RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from support import NS, evalrun, run_uid, s3_keys, status_of, wait_until

from mcpfleet.operator import metrics
from mcpfleet.operator.manifests import ANN_TRIAL, pod_name
from mcpfleet.operator.reconciler import infra_record
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.results.records import dumps
from mcpfleet.runner.results.store import open_store
from mcpfleet.runner.spec.evalrun import EvalRun
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.spec.trial import TrialSpec
from mcpfleet.runner.tasks.discovery import bundled_root

ORACLE_SLOW = {"name": "oracle", "model": "scripted/oracle?latency=0.3"}
TASK = "filesystem/standard/tiny/move_todo_{}"
# A model whose key is read from a Secret; the scripted server answers 401 (a config_error) to any other key.
KEYED = {
    "name": "keyed",
    "model": "scripted/oracle?key=the-right-key",
    "apiKeySecretRef": {"name": "llm-key", "key": "key"},
}


# -- helpers ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def operator(kube: RunningEmulator) -> Iterator[Any]:
    with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS) as op:
        yield op


async def create_with_two_running(kube: RunningEmulator, body: dict[str, Any]) -> contextlib.ExitStack:
    """An operator (closed with the returned stack) that has two of the run's trials running."""
    stack = contextlib.ExitStack()
    stack.enter_context(operator(kube))
    kube.create(body)
    await wait_until(lambda: [pod_phase(kube, p) for p in pod_names(kube)] == ["Running"] * 2, 90, "two trials running")
    return stack


def tasks(pack: Path, *numbers: int) -> dict[str, Any]:
    return {"path": str(pack), "include": [TASK.format(n) for n in numbers]}


def planned(kube: RunningEmulator, body: dict[str, Any]) -> tuple[EvalRun, list[TrialSpec]]:
    """The run and its trials as the operator plans them (with the uid the API server gave it)."""
    meta = dict(body["metadata"], uid=run_uid(kube, body["metadata"]["name"]))
    run = parse_evalrun(dict(body, metadata=meta))
    return run, plan(run, bundled_root())


def trials_of(kube: RunningEmulator, body: dict[str, Any]) -> list[TrialSpec]:
    return planned(kube, body)[1]


def store_passed(run: EvalRun, trial: TrialSpec) -> None:
    """Store the passing record a trial's runner would (the test plays the node)."""
    record = infra_record(run, trial, 1, "").model_dump(mode="json")
    record.update(passed=True, failure=None, error=None)
    store = open_store(run.spec.output, run.name, bundled_root(), run_uid=run.metadata.uid)
    store.commit(trial.trial_id, dumps(record))


def records_under(s3: str, bucket: str, prefix: str) -> dict[str, dict[str, Any]]:
    """Every trial record stored under ``prefix`` (a key prefix in the bucket), by trial id."""
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    out = {}
    for key in s3_keys(s3, bucket):
        if key.startswith(prefix) and key.endswith("/result.json") and "/trials/" in key:
            rec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            out[rec["trial_id"]] = rec
    return out


def pod_creations(kube: RunningEmulator) -> int:
    return kube.call(lambda: kube.emulator.request_counts[("create", "pods")])


def pod_names(kube: RunningEmulator) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.objects("pods", NS))


def pod_phase(kube: RunningEmulator, name: str) -> str | None:
    return ((kube.get("pods", NS, name) or {}).get("status") or {}).get("phase")


def phase(kube: RunningEmulator, name: str) -> str | None:
    return status_of(kube, name).get("phase")


def cond_of(kube: RunningEmulator, name: str, type_: str) -> dict[str, Any]:
    return next((c for c in status_of(kube, name).get("conditions") or [] if c["type"] == type_), {})


async def play_running(kube: RunningEmulator, run: str, pod: str, node: str, **status: Any) -> None:
    """Play the node of a trial pod: bind it and report it Running (with ``status`` more), then wait until the
    run counts it running."""
    kube.bind_pod(NS, pod, node)
    kube.patch("pods", NS, pod, {"status": {"phase": "Running", **status}}, subresource="status")
    await wait_until(lambda: status_of(kube, run).get("counts", {}).get("running") == 1, 10, f"{pod} running")


async def play_passed(kube: RunningEmulator, run: EvalRun, trial: TrialSpec, pod: str) -> None:
    """Play the node of a trial that passes: its runner stores a passing record, its pod reports Succeeded."""
    await asyncio.to_thread(store_passed, run, trial)
    kube.patch("pods", NS, pod, {"status": {"phase": "Succeeded"}}, subresource="status")


def got(kube: RunningEmulator, name: str) -> dict[str, Any]:
    pod = kube.get("pods", NS, name)
    assert pod is not None, f"pod {name} is gone"
    return pod


def in_phase(kube: RunningEmulator, name: str, *phases: str) -> dict[str, Any] | None:
    st = status_of(kube, name)
    return st if st.get("phase") in phases else None


# -- F1: the output location is frozen once trials exist ----------------------------------------------


async def test_output_edit_once_trials_exist_is_refused_and_records_stay_where_they_were(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """spec.output says where every trial's record is stored and where the operator reads it: like a Job's pod
    template it cannot change once pods exist. An edit of output.uri while the first of two trials runs is
    refused as the other frozen fields are (Valid=False/ImmutableField naming spec.output), and the second trial's
    pod, created after the edit, still stores its record in the original location: each trial runs once and is
    scored on its real outcome. (An accepted edit sent the next pods' records where the operator never looked:
    paid, passing trials counted as infra errors and run again.) Reverting the edit clears the condition.

    The test plays the node of the first trial (its runner, started before the edit, stores a passing record in
    the original location); the second runs in a real pod, so where its record goes is the operator's doing."""
    body = evalrun(
        "moved",
        image_pack,
        s3,
        bucket,
        models=[ORACLE_SLOW],
        attempts=1,
        concurrency={"total": 1},
        tasks=tasks(image_pack, 0, 1),
        retries={"limit": 1, "backoffSeconds": 0},
    )
    original = body["spec"]["output"]["uri"]
    with operator(kube):
        kube.create(body)
        run, trials = planned(kube, body)
        [pod] = await wait_until(lambda: kube.objects("pods", NS), 20, "the first trial's pod")
        first = pod["metadata"]["name"]
        await play_running(kube, "moved", first, "played-node")
        kube.patch("evalruns", NS, "moved", {"spec": {"output": {"uri": f"s3://{bucket}/elsewhere"}}})
        refused = await wait_until(lambda: cond_of(kube, "moved", "Valid").get("status") == "False", 15, raising=False)
        valid = cond_of(kube, "moved", "Valid")
        assert refused, f"the edit of spec.output was accepted mid-run: Valid={valid}"
        assert valid["reason"] == "ImmutableField" and "spec.output" in valid["message"], valid
        assert status_of(kube, "moved")["observedGeneration"] == 2
        [done] = [t for t in trials if t.trial_id == pod["metadata"]["annotations"][ANN_TRIAL]]
        await play_passed(kube, run, done, first)  # the first try ends, its record where its pod was told
        async with Kubelet(kube.url) as kubelet:
            status = await wait_until(lambda: in_phase(kube, "moved", "Succeeded", "Failed"), 120, "the run to end")
            await wait_until(lambda: not pod_names(kube), 30, "every pod to be deleted")
        kube.patch("evalruns", NS, "moved", {"spec": {"output": {"uri": original}}})
        valid = await wait_until(
            lambda: (c := cond_of(kube, "moved", "Valid")).get("status") == "True" and c, 15, raising=False
        )
        assert valid, f"reverting the edit did not clear the condition: {cond_of(kube, 'moved', 'Valid')}"
    [second] = [t for t in trials if t is not done]
    assert kubelet.started == [pod_name("moved", second.trial_id)], kubelet.started  # once, no retry
    assert pod_creations(kube) == 2
    assert status["phase"] == "Succeeded", status
    counts = status["counts"]
    assert (counts["finished"], counts["passed"], counts["infraErrors"], counts["retries"]) == (2, 2, 0, 0), counts
    recs = records_under(s3, bucket, f"runs/moved/{run.metadata.uid}/")
    assert sorted(recs) == sorted(t.trial_id for t in trials), sorted(recs)
    assert all(r["passed"] is True and r["failure"] is None and r["infra_attempts"] == 1 for r in recs.values()), recs
    assert not [k for k in s3_keys(s3, bucket) if k.startswith("elsewhere/")], "a pod wrote to the edited location"
    assert phase(kube, "moved") == "Succeeded"


# -- F2: a terminal status write that fails is written again --------------------------------------------


def fail_first_terminal_write(
    kube: RunningEmulator, name: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> list[float]:
    """The API server fails the first status write of ``name`` that carries phase Succeeded: with a 503 response
    (``http503``) or by dropping the connection (``reset``). Returns a list that gets the (monotonic) time of it."""
    failed: list[float] = []
    serve = kube.emulator._serve

    async def flaky(raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if not failed and raw.method == "PATCH" and raw.path.endswith(f"/evalruns/{name}/status"):
            body = json.loads(await raw.read() or b"{}")  # read() caches: the emulator reads it again
            if (body.get("status") or {}).get("phase") == "Succeeded":
                failed.append(time.monotonic())
                if how == "http503":
                    error = ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
                    return aiohttp.web.json_response(error.body(), status=503)
                assert raw.transport is not None
                raw.transport.abort()  # the client sees its connection dropped mid-request
                raise ConnectionResetError("connection reset by the test")
        return await serve(raw)

    monkeypatch.setattr(kube.emulator, "_serve", flaky)
    return failed


@pytest.mark.parametrize("how", ["http503", "reset"])
async def test_a_failed_final_status_write_is_retried(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    """The write that makes a run Succeeded fails once (an error response, or a connection lost on the way). The
    Job controller retries status updates until they are accepted: the terminal phase must reach the API within
    seconds, not stay Running for good (kubectl wait never returning, the TTL never starting) until a restart.

    The test plays the node (no kubelet: nothing here depends on the trial's work): the trial's record is stored
    and its pod reports Succeeded, as a runner and its kubelet would."""
    failed = fail_first_terminal_write(kube, "final", how, monkeypatch)
    body = evalrun("final", image_pack, s3, bucket, models=[ORACLE_SLOW], attempts=1, tasks=tasks(image_pack, 0))
    with operator(kube):
        kube.create(body)
        run, [trial] = planned(kube, body)
        pod = pod_name("final", trial.trial_id)
        await wait_until(lambda: kube.get("pods", NS, pod), 20, "the trial pod")
        await wait_until(lambda: phase(kube, "final") == "Running", 10, "the run to be Running")
        await play_passed(kube, run, trial, pod)
        await wait_until(lambda: failed, 20, "the final status write")
        status = await wait_until(lambda: in_phase(kube, "final", "Succeeded"), 15, raising=False)
        seen = status_of(kube, "final")
    assert status, (
        f"the terminal status was lost with the failed write ({how}): 15 s later phase={seen.get('phase')} "
        f"progress={seen.get('progress')} finishedAt={seen.get('finishedAt')}"
    )
    assert status["finishedAt"], status
    assert status["counts"]["finished"] == status["counts"]["total"] == 1, status["counts"]
    assert status["counts"]["passed"] == 1, status["counts"]
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert complete["status"] == "True", complete


# -- F3: a try on a lost node is not retried early after an operator restart -----------------------------


async def test_after_a_restart_a_try_terminating_on_a_lost_node_is_not_retried_before_its_deadline(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A try's runner was seen running; its node is lost and the pod, deleted, stays Terminating for ever; then
    the operator restarts (or a peer takes over). Its runner may still be working until activeDeadlineSeconds and
    the grace have passed (its node enforces them even when cut off): the retry must wait for that, after a
    restart as without one, or two paid tries of the trial run at once, racing to write its record.

    Small limits: the try may run 12 + 4 s (MCPFLEET_POD_GRACE_SECONDS 0) plus a 3 s grace; it is deleted with
    a 1 s grace, and a try deleted before it was seen running waits 2 s more (TERMINATING_SLACK_SECONDS), so an
    operator that forgot the try had run retries it within seconds of its restart."""
    monkeypatch.setenv("MCPFLEET_POD_GRACE_SECONDS", "0")
    monkeypatch.setattr("mcpfleet.operator.reconciler.LOST_POD_GRACE_SECONDS", 3.0)
    monkeypatch.setattr("mcpfleet.operator.reconciler.TERMINATING_SLACK_SECONDS", 2.0, raising=False)
    overdue = 12 + 4 + 0 + 3
    body = evalrun(
        "lostnode",
        image_pack,
        s3,
        bucket,
        models=[{"name": "oracle", "model": "scripted/oracle"}],
        attempts=1,
        tasks=tasks(image_pack, 0),
        limits={"timeoutSeconds": 12, "llmTimeoutSeconds": 6, "verifierTimeoutSeconds": 4},
        retries={"limit": 1, "backoffSeconds": 0},
        provider={"trialRetryBudget": 0},  # no provider time given back: the deadline is the timeouts
    )
    stack = contextlib.ExitStack()
    stack.enter_context(operator(kube))  # no kubelet: the test plays the node, which is lost
    kube.create(body)
    [trial] = trials_of(kube, body)
    first, retry = pod_name("lostnode", trial.trial_id), pod_name("lostnode", trial.trial_id, 1)
    await wait_until(lambda: kube.get("pods", NS, first), 20, "the trial pod")
    running = time.monotonic()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    runner = [{"name": "runner", "ready": True, "state": {"running": {"startedAt": now}}}]
    await play_running(kube, "lostnode", first, "lost-node", startTime=now, containerStatuses=runner)
    await asyncio.sleep(0.5)  # the operator has the Running pod (its watch event is immediate)
    kube.delete("pods", NS, first, grace_period_seconds=1)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(stack.close)  # the operator restarts
    with operator(kube):
        window = running + overdue - 2.5 - time.monotonic()
        assert window > 3, f"the restart took too long ({overdue - 2.5 - window:.1f} s) for this test to tell"
        early = await wait_until(lambda: kube.get("pods", NS, retry), window, raising=False)
        assert not early, (
            f"the retry was created {time.monotonic() - running:.1f} s after the first try was seen running, "
            f"before its activeDeadlineSeconds and grace ({overdue} s): both may run at once"
        )
        retried = await wait_until(
            lambda: kube.get("pods", NS, retry), running + overdue + 15 - time.monotonic(), raising=False
        )
        waited = time.monotonic() - running
        assert retried, f"no retry {waited:.0f} s after the first try was seen running (its deadline: {overdue} s)"
        old = kube.get("pods", NS, first)
        assert old is not None and old["metadata"].get("deletionTimestamp"), old  # still Terminating: not waited on
        await wait_until(lambda: status_of(kube, "lostnode")["counts"]["retries"] == 1, 5, "the retry counted")


# -- F4: a run a restarted operator finds invalid has its pods stopped -------------------------------------


async def test_a_run_found_invalid_after_a_restart_has_its_pods_deleted(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two operator incarnations the chart's image allow-list changed, and a run in flight no longer
    passes it. Like a Job that fails, the run is Failed and its running pods are deleted: none is left spending
    LLM money untracked (nobody counts them any more, nor charges them against MCPFLEET_MAX_PODS)."""
    slow = {"name": "oracle", "model": "scripted/oracle?latency=5"}  # a trial lasts far beyond the checks below
    body = evalrun(
        "inval",
        image_pack,
        s3,
        bucket,
        models=[slow],
        attempts=1,
        concurrency={"total": 2},
        pod={"runnerImage": "registry.example.com/evals/runner:1"},
    )
    async with Kubelet(kube.url) as kubelet:
        stack = await create_with_two_running(kube, body)
        in_flight = pod_names(kube)
        await asyncio.to_thread(stack.close)
        monkeypatch.setenv("MCPFLEET_ALLOWED_IMAGES", "registry.internal/*")
        with operator(kube):
            status = await wait_until(lambda: in_phase(kube, "inval", "Failed"), 30, "the run to fail")
            stopped = await wait_until(lambda: not pod_names(kube) and kubelet.running == 0, 15, raising=False)
            left = [(p, pod_phase(kube, p)) for p in pod_names(kube)]
            assert stopped, f"the failed run's pods were left running: {left}, kubelet.running={kubelet.running}"
            assert status_of(kube, "inval")["counts"]["running"] == 0, status_of(kube, "inval")["counts"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "InvalidSpec" and "spec.pod.runnerImage" in failed["message"], failed
    terminated = {p for _, p, c, sig in kubelet.signals if c == "runner" and sig == "SIGTERM"}
    assert terminated == set(in_flight), (kubelet.signals, in_flight)  # stopped by their deletion, not finished
    assert pod_creations(kube) == 2  # the restarted operator launched nothing


# -- F5: a run failed by stopped models is finished like any other -----------------------------------------


def keyed_run(name: str, pack: Path, s3: str, bucket: str, **spec: Any) -> dict[str, Any]:
    """Two trials, one at a time, of a model whose key is read from a Secret."""
    return evalrun(
        name, pack, s3, bucket, models=[KEYED], attempts=2, concurrency={"total": 1}, tasks=tasks(pack, 0), **spec
    )


def wrong_key() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "llm-key", "namespace": NS},
        "stringData": {"key": "a-wrong-key"},
    }


async def stopped_by_a_wrong_key(kube: RunningEmulator, body: dict[str, Any]) -> dict[str, Any]:
    """Create the run and play the node for its first trial (no kubelet: a real pod would only take longer to
    say the same): the runner's first LLM call gets a 401, it stores a config_error record and exits 0. The model
    is stopped before its second trial is launched, and the run ends Failed (ModelsStopped), one trial not run."""
    name = body["metadata"]["name"]
    kube.create(body)
    run, trials = planned(kube, body)
    [pod] = await wait_until(lambda: kube.objects("pods", NS), 20, f"the first trial pod of {name}")
    trial = next(t for t in trials if t.trial_id == pod["metadata"]["annotations"][ANN_TRIAL])
    record = infra_record(run, trial, 1, "").model_dump(mode="json")
    error = "AuthenticationError: Incorrect API key provided: [REDACTED]. (HTTP 401; not retried)"
    record.update(passed=False, failure="config_error", error=error)
    store = open_store(run.spec.output, run.name, bundled_root(), run_uid=run.metadata.uid)
    await asyncio.to_thread(store.commit, trial.trial_id, dumps(record))
    kube.patch("pods", NS, pod["metadata"]["name"], {"status": {"phase": "Succeeded"}}, subresource="status")
    status = await wait_until(lambda: in_phase(kube, name, "Failed"), 30, f"{name} to fail")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ModelsStopped" and list(status["stoppedModels"]) == ["keyed"], status
    assert status["counts"]["finished"] == 1 and status["counts"]["pending"] == 1, status["counts"]
    assert pod_creations(kube) == 1
    return status


async def test_a_run_failed_by_stopped_models_is_deleted_after_its_ttl(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """ttlSecondsAfterFinished applies to every finished run, Failed included (a Job's TTL counts from Complete
    or Failed): a run Failed because its model was stopped goes after its TTL while the operator that failed it
    keeps running, not only after some later restart."""
    with operator(kube):
        kube.create(wrong_key())
        await stopped_by_a_wrong_key(kube, keyed_run("ttl", image_pack, s3, bucket, ttlSecondsAfterFinished=2))
        gone = await wait_until(lambda: kube.get("evalruns", NS, "ttl") is None, 12, raising=False)
        assert gone, "a Failed (ModelsStopped) run was still there 12 s after it finished, with a TTL of 2 s"
    assert any(k.endswith("/result.json") for k in s3_keys(s3, bucket))  # its records stay


async def test_a_restart_runs_the_stopped_models_trials_once_the_cause_is_fixed(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """As the README says of a run Failed with stopped models: fix the cause, then edit the EvalRun or restart the
    operator, and the stopped trials run. Here the Secret gets the right key while no operator runs; the restarted
    operator runs the model's trial never launched and its config_error one again (it measured nothing), in real
    pods, to Succeeded."""
    body = keyed_run("stuck", image_pack, s3, bucket)
    with operator(kube):
        kube.create(wrong_key())
        await stopped_by_a_wrong_key(kube, body)
    kube.patch("secrets", NS, "llm-key", {"stringData": {"key": "the-right-key"}})  # the cause fixed
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            resumed = await wait_until(lambda: pod_creations(kube) > 1, 15, raising=False)
            st = status_of(kube, "stuck")
            assert resumed, f"a restart launched none of the stopped trials: {st.get('phase')} {st.get('counts')}"
            status = await wait_until(lambda: in_phase(kube, "stuck", "Succeeded"), 120, "the resumed run to finish")
    trials = trials_of(kube, body)
    assert sorted(kubelet.started) == sorted(pod_name("stuck", t.trial_id) for t in trials), kubelet.started
    assert status["counts"]["finished"] == 2 and status["counts"]["passed"] == 2, status["counts"]
    assert not status.get("stoppedModels"), status
    recs = records_under(s3, bucket, "runs/")
    assert sorted(recs) == sorted(t.trial_id for t in trials)
    assert all(r["passed"] is True and r["failure"] is None for r in recs.values()), recs


def two_slow_trials(name: str, image_pack: Path, s3: str, bucket: str, **extra: Any) -> dict[str, Any]:
    """A run of two trials that both run at once and last well beyond what the test does to their pods."""
    slow = {"name": "oracle", "model": "scripted/oracle?latency=2"}
    return evalrun(
        name, image_pack, s3, bucket, models=[slow], attempts=1, concurrency={"total": 2},
        tasks=tasks(image_pack, 0, 1), **extra,
    )  # fmt: skip


def assert_ran_again_as_first_tries(kubelet: Kubelet, first: list[str], status: dict[str, Any], recs: dict) -> None:
    """Both tries were stopped (SIGTERM to their runners) and ran again under the same pod names: no retry used, no
    infrastructure error, and both trials passed on their first try."""
    stopped = {p for _, p, c, sig in kubelet.signals if c == "runner" and sig == "SIGTERM"}
    assert stopped == set(first), kubelet.signals
    assert sorted(kubelet.started) == sorted(first * 2), kubelet.started
    counts = status["counts"]
    assert (counts["finished"], counts["passed"], counts["infraErrors"], counts["retries"]) == (2, 2, 0, 0), counts
    assert len(recs) == 2 and all(r["passed"] is True and r["infra_attempts"] == 1 for r in recs.values()), recs


# -- F6: suspend deletes the run's pods, like a Job's; their trials wait without using a try ----------------


async def test_suspend_deletes_the_runs_pods_and_a_resume_runs_their_trials_as_first_tries(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """spec.suspend set while two trials run: like a Job, their pods are deleted (the runners get SIGTERM), the run
    is Suspended with nothing running and Suspended=True; the stopped tries are no infrastructure errors and use no
    retry. An operator restart while suspended launches nothing. The resume (Suspended=False, Resumed) runs both
    trials again as their first tries, in pods of the same names, to Succeeded."""
    body = two_slow_trials("hold", image_pack, s3, bucket)
    async with Kubelet(kube.url) as kubelet:
        stack = await create_with_two_running(kube, body)
        first = pod_names(kube)
        kube.patch("evalruns", NS, "hold", {"spec": {"suspend": True}})
        await wait_until(lambda: not pod_names(kube) and kubelet.running == 0, 45, "the pods to be deleted")
        status = await wait_until(
            lambda: (st := in_phase(kube, "hold", "Suspended")) and st["counts"]["running"] == 0 and st, 15, "Suspended"
        )
        assert cond_of(kube, "hold", "Suspended")["status"] == "True", status["conditions"]
        counts = status["counts"]
        assert (counts["pending"], counts["infraErrors"], counts["retries"]) == (2, 0, 0), counts
        await asyncio.to_thread(stack.close)  # the operator restarts while the run is suspended
        with operator(kube):
            await asyncio.sleep(3)
            assert pod_creations(kube) == 2 and phase(kube, "hold") == "Suspended"
            kube.patch("evalruns", NS, "hold", {"spec": {"suspend": False}})
            status = await wait_until(lambda: in_phase(kube, "hold", "Succeeded", "Failed"), 120, "the run to end")
    assert status["phase"] == "Succeeded", status
    resumed = next(c for c in status["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "Resumed"), resumed
    assert_ran_again_as_first_tries(kubelet, first, status, records_under(s3, bucket, "runs/"))


# -- F7: spec.activeDeadlineSeconds, like a Job's ------------------------------------------------------------


async def test_a_run_past_its_active_deadline_fails_with_its_pods_stopped_and_records_kept(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """Two trials, one at a time, and a 6 s deadline. The test plays the node: the first trial passes, the second's
    pod runs on. Past the deadline the run ends Failed (DeadlineExceeded), its pod deleted, the status showing
    none running, and the first trial's record kept."""
    body = evalrun(
        "late",
        image_pack,
        s3,
        bucket,
        models=[ORACLE_SLOW],
        attempts=1,
        concurrency={"total": 1},
        tasks=tasks(image_pack, 0, 1),
        activeDeadlineSeconds=6,
    )
    with operator(kube):
        kube.create(body)
        run, trials = planned(kube, body)
        [pod] = await wait_until(lambda: kube.objects("pods", NS), 20, "the first trial's pod")
        done = next(t for t in trials if t.trial_id == pod["metadata"]["annotations"][ANN_TRIAL])
        await play_passed(kube, run, done, pod["metadata"]["name"])
        await wait_until(lambda: pod_creations(kube) == 2, 10, "the second trial's pod")
        # (the first, counted, may still wait for its bulk delete: operator/deletes.py)
        [second] = [n for n in pod_names(kube) if n != pod["metadata"]["name"]]
        await play_running(kube, "late", second, "played-node")
        status = await wait_until(lambda: in_phase(kube, "late", "Failed", "Succeeded"), 20, "the run to end")
        # Deleted: on its (played) node it stays Terminating until the node removes it.
        deleted = await wait_until(lambda: got(kube, second)["metadata"].get("deletionTimestamp"), 15, raising=False)
        assert deleted, f"the pod of a run past its deadline was left running: {got(kube, second)}"
    failed = cond_of(kube, "late", "Failed")
    assert status["phase"] == "Failed" and failed["reason"] == "DeadlineExceeded", failed
    assert "spec.activeDeadlineSeconds 6" in failed["message"], failed
    counts = status_of(kube, "late")["counts"]
    assert (counts["finished"], counts["passed"], counts["running"]) == (1, 1, 0), counts
    assert list(records_under(s3, bucket, "runs/")) == [done.trial_id]


# -- F8: a drain does not fail the run, nor charge its trials ------------------------------------------------


def evict(kube: RunningEmulator, pod: str, reason: str = "EvictionByEvictionAPI") -> None:
    """What the Eviction API does to a pod (kubectl drain): the DisruptionTarget condition, then a graceful delete."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cond = {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": "Eviction API: evicting"}
    kube.patch("pods", NS, pod, {"status": {"conditions": [dict(cond, lastTransitionTime=now)]}}, subresource="status")
    kube.delete("pods", NS, pod)


async def test_a_drain_of_more_pods_than_the_backoff_limit_reruns_them_as_the_same_tries(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """kubectl drain of the node running both trials of a run whose backoffLimit is 1: each pod gets DisruptionTarget
    and is deleted (the runners get SIGTERM). Like a Job whose podFailurePolicy ignores DisruptionTarget, the run is
    not failed (two infrastructure failures in a row would be over its backoffLimit) and no trial is charged: each
    runs again as its first try, under the same pod name, to Succeeded; a Disrupted event names each, and
    mcpfleet_trial_disruptions_total counts them."""
    body = two_slow_trials(
        "drain", image_pack, s3, bucket, retries={"limit": 1, "backoffSeconds": 0, "backoffLimit": 1}
    )
    disrupted = metrics.DISRUPTIONS.labels(NS, "drain", "oracle")
    before = disrupted._value.get()  # noqa: SLF001 - prometheus_client has no public value accessor
    async with Kubelet(kube.url) as kubelet:
        stack = await create_with_two_running(kube, body)
        first = pod_names(kube)
        for pod in first:
            evict(kube, pod)
        status = await wait_until(lambda: in_phase(kube, "drain", "Succeeded", "Failed"), 120, "the run to end")
        await asyncio.to_thread(stack.close)
    assert status["phase"] == "Succeeded", cond_of(kube, "drain", "Failed") or status
    recs = records_under(s3, bucket, "runs/drain/")
    assert_ran_again_as_first_tries(kubelet, first, status, recs)
    notes = [e["message"] for e in kube.objects("events", NS) if e.get("reason") == "Disrupted"]
    assert sorted(m.split(":")[0] for m in notes) == sorted(recs), notes
    assert all("EvictionByEvictionAPI" in m for m in notes), notes
    assert disrupted._value.get() - before == 2  # noqa: SLF001
