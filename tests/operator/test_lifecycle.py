"""The operator's lifecycle as a Job controller's: finished runs stay finished, edits are acted on at once,
a re-created run never takes an old run's pod, a run stops after too many infrastructure failures."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from support import NS, evalrun, infra_errors, s3_keys, status_of, wait_until

from mcpfleet.operator.manifests import LABEL_RUN_UID, trial_pod
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.tasks.discovery import bundled_root

ORACLE = {"name": "oracle", "model": "scripted/oracle"}
ONE_TASK = "filesystem/standard/tiny/move_todo_0"
MANAGED_BY = "app.kubernetes.io/managed-by"


@contextlib.contextmanager
def operator(kube: RunningEmulator) -> Iterator[Any]:
    with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS) as op:
        yield op


def one_trial(name: str, pack: Path, s3: str, bucket: str, attempts: int = 1, **spec: Any) -> dict[str, Any]:
    spec.setdefault("models", [ORACLE])
    return evalrun(name, pack, s3, bucket, attempts=attempts, tasks={"path": str(pack), "include": [ONE_TASK]}, **spec)


def events(kube: RunningEmulator, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.objects("events", NS) if e.get("reason") == reason]


def phase(kube: RunningEmulator, name: str) -> str | None:
    return status_of(kube, name).get("phase")


async def test_finished_run_left_alone_on_restart(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """A restart does not re-plan a Succeeded run: no second Completed event, finishedAt and summary unchanged."""
    body = one_trial("done", image_pack, s3, bucket)
    async with Kubelet(kube.url):
        with operator(kube):
            kube.create(body)
            await wait_until(lambda: phase(kube, "done") == "Succeeded", 90, "the run to succeed")
            await wait_until(lambda: events(kube, "Completed"), 10, "the Completed event")
            await asyncio.sleep(1.0)
        before = status_of(kube, "done")
        patches = kube.call(lambda: kube.emulator.request_counts[("patch", "evalruns")])
        with operator(kube):
            await asyncio.sleep(4.0)  # a re-plan takes well under a second on this one-trial run
        after = status_of(kube, "done")
    assert len(events(kube, "Completed")) == 1
    assert after["finishedAt"] == before["finishedAt"] and after == before
    assert kube.call(lambda: kube.emulator.request_counts[("patch", "evalruns")]) == patches


def cond_of(kube: RunningEmulator, name: str, type_: str) -> dict[str, Any]:
    return next((c for c in status_of(kube, name).get("conditions") or [] if c["type"] == type_), {})


def valid(kube: RunningEmulator, name: str) -> dict[str, Any]:
    return cond_of(kube, name, "Valid")


def pod_creations(kube: RunningEmulator) -> int:
    return kube.call(lambda: kube.emulator.request_counts[("create", "pods")])


async def test_result_affecting_edit_of_finished_run_is_refused_at_once(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """More attempts on a finished run: refused at once with a condition naming the field, no paid trial
    started, now or after a restart; the run stays Succeeded."""
    body = one_trial("frozen", image_pack, s3, bucket)
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(body)
            await wait_until(lambda: phase(kube, "frozen") == "Succeeded", 90, "the run to succeed")
            kube.patch("evalruns", NS, "frozen", {"spec": {"attempts": 2}})
            cond = await wait_until(
                lambda: valid(kube, "frozen").get("status") == "False" and valid(kube, "frozen"), 10, "the refusal"
            )
            assert cond["reason"] == "ImmutableField" and "spec.attempts" in cond["message"], cond
            assert status_of(kube, "frozen")["observedGeneration"] == 2
            await asyncio.sleep(2.0)
        with operator(kube):
            await asyncio.sleep(3.0)
    assert pod_creations(kube) == 1 and len(kubelet.started) == 1
    assert phase(kube, "frozen") == "Succeeded" and len(events(kube, "Completed")) == 1


async def test_fix_of_invalid_spec_is_acted_on_at_once(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """A run that failed validation runs as soon as its spec is fixed, without an operator restart."""
    body = one_trial("fixme", image_pack, s3, bucket, models=[ORACLE, ORACLE])
    async with Kubelet(kube.url):
        with operator(kube):
            kube.create(body)
            await wait_until(lambda: phase(kube, "fixme") == "Failed", 30, "the invalid run to fail")
            assert valid(kube, "fixme")["reason"] == "InvalidSpec"
            failed = cond_of(kube, "fixme", "Failed")
            assert (failed["status"], failed["reason"], failed["observedGeneration"]) == ("True", "InvalidSpec", 1)
            kube.patch("evalruns", NS, "fixme", {"spec": {"models": [ORACLE]}})
            await wait_until(lambda: phase(kube, "fixme") == "Succeeded", 90, "the fixed run to succeed")
    st = status_of(kube, "fixme")
    assert st["observedGeneration"] == 2 and st["counts"]["passed"] == 1 and valid(kube, "fixme")["status"] == "True"
    assert not cond_of(kube, "fixme", "Failed")  # the standard conditions: Complete after the fix, not Failed
    complete = cond_of(kube, "fixme", "Complete")
    assert (complete["status"], complete["observedGeneration"]) == ("True", 2)


async def test_recreated_run_does_not_take_the_old_runs_pod(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """An EvalRun deleted and created again under the same name while its old pod still terminates: the new run
    waits for its own pod rather than counting the old one (which would end in a false infra error)."""
    body = one_trial("again", image_pack, s3, bucket, pod={"pendingTimeoutSeconds": 10})
    old = parse_evalrun(dict(body, metadata=dict(body["metadata"], uid="uid-of-the-deleted-run")))
    [trial] = plan(old, bundled_root())
    stale = trial_pod(old, trial, OperatorSettings.from_env(), 0)
    assert stale["metadata"]["labels"][LABEL_RUN_UID] == "uid-of-the-deleted-run"
    stale["metadata"].pop("ownerReferences")  # its owner is gone; the emulator would collect it at once
    kube.create(stale)
    kube.patch("pods", NS, stale["metadata"]["name"], {"status": {"phase": "Failed"}}, subresource="status")
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(body)
            await asyncio.sleep(3.0)  # the old pod goes away a while after the new run started
            kube.delete("pods", NS, stale["metadata"]["name"])
            await wait_until(lambda: phase(kube, "again") == "Succeeded", 90, "the new run to succeed")
    counts = status_of(kube, "again")["counts"]
    assert counts["passed"] == 1 and counts["infraErrors"] == 0 and counts["retries"] == 0, counts
    assert kubelet.started == [stale["metadata"]["name"]]  # the new run's own pod, under the same name


async def test_run_stops_after_its_failure_budget(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """A bad image fails every pod: after spec.retries.backoffLimit infrastructure failures in a row the run
    stops as Failed with a condition saying so, instead of burning every trial's retries and ending Succeeded."""
    image = "registry.invalid/mcpfleet/runner:missing"
    body = one_trial(
        "budget",
        image_pack,
        s3,
        bucket,
        attempts=3,
        concurrency={"total": 1},
        retries={"limit": 2, "backoffSeconds": 0, "backoffLimit": 2},
        pod={"runnerImage": image},
    )
    async with Kubelet(kube.url, pull_failures={image}):
        with operator(kube):
            kube.create(body)
            await wait_until(lambda: phase(kube, "budget") == "Failed", 60, "the run to fail")
            await wait_until(lambda: events(kube, "BackoffLimitExceeded"), 10, "the warning event")
            await asyncio.sleep(2.0)
            assert not kube.objects("pods", NS)
    failed = next(c for c in status_of(kube, "budget")["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "BackoffLimitExceeded", failed
    assert "3 infrastructure failures in a row" in failed["message"] and "ImagePullBackOff" in failed["message"]
    assert pod_creations(kube) == 3  # not 3 trials x 3 tries


async def test_images_and_service_accounts_outside_the_allow_list_are_refused(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, monkeypatch: Any
) -> None:
    """With the chart's allow-lists set, an EvalRun naming another image or service account fails validation,
    naming the field, and no pod is created."""
    monkeypatch.setenv("MCPFLEET_ALLOWED_IMAGES", "registry.example.com/evals/*")
    monkeypatch.setenv("MCPFLEET_ALLOWED_SERVICE_ACCOUNTS", "evals-*")
    body = one_trial("rogue", image_pack, s3, bucket, pod={"runnerImage": "docker.io/evil/miner:1"})
    body["spec"]["pod"]["serviceAccountName"] = "cluster-admin-sa"
    with operator(kube):
        kube.create(body)
        await wait_until(lambda: phase(kube, "rogue") == "Failed", 30, "the run to be refused")
    cond = valid(kube, "rogue")
    assert cond["reason"] == "InvalidSpec" and "spec.pod.runnerImage: 'docker.io/evil/miner:1'" in cond["message"]
    assert "spec.pod.serviceAccountName: 'cluster-admin-sa'" in cond["message"], cond
    assert pod_creations(kube) == 0


async def test_pod_watch_is_filtered_on_the_server(kube: RunningEmulator, operator_env: None) -> None:
    """The operator lists and watches only trial pods (a label selector in the requests), so a namespace's
    other pods never reach it."""

    def pod_watchers() -> list[Any]:
        res = next(r for r in kube.emulator._registry.values() if (r.group, r.plural) == ("", "pods"))
        return list(res.watchers)

    trial = {"metadata": {"namespace": NS, "name": "t", "labels": {MANAGED_BY: "mcpfleet", LABEL_RUN_UID: "u"}}}
    other = {"metadata": {"namespace": NS, "name": "o", "labels": {"app": "web"}}}
    with operator(kube):
        [watcher] = await wait_until(lambda: kube.call(pod_watchers), 10, "the pod watch")
        assert kube.call(lambda: (watcher.matches(trial), watcher.matches(other))) == (True, False)
    lists = [p for m, p, _ in kube.call(lambda: list(kube.emulator.request_log)) if m == "GET" and "/pods" in p]
    assert lists
    for path in lists:
        query = parse_qs(urlsplit(path).query)
        assert query["labelSelector"] == [f"{MANAGED_BY}=mcpfleet,{LABEL_RUN_UID}"], path


async def test_finished_run_is_deleted_after_its_ttl_records_stay(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """spec.ttlSecondsAfterFinished: the finished EvalRun goes (and an Expired event says so); its records and
    summary stay in the store."""
    body = one_trial("short", image_pack, s3, bucket, ttlSecondsAfterFinished=2)
    async with Kubelet(kube.url):
        with operator(kube):
            kube.create(body)
            await wait_until(lambda: phase(kube, "short") == "Succeeded", 90, "the run to succeed")
            finished = time.monotonic()
            await wait_until(lambda: kube.get("evalruns", NS, "short") is None, 15, "the run to be deleted")
            assert time.monotonic() - finished >= 1.0  # not before its TTL
    keys = s3_keys(s3, bucket)
    assert any(k.endswith("/summary.json") for k in keys) and any(k.endswith("/result.json") for k in keys), keys


async def test_pod_on_a_lost_node_is_counted_failed_after_its_deadline(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, monkeypatch: Any
) -> None:
    """A pod that ran, then its node stopped reporting (phase Unknown, no kubelet to enforce
    activeDeadlineSeconds): an infrastructure failure once its deadline and grace have passed, not a run that
    waits forever. Its only trial unscored, the run ends Failed (NoTrialScored)."""
    monkeypatch.setenv("MCPFLEET_POD_GRACE_SECONDS", "0")
    monkeypatch.setattr("mcpfleet.operator.reconciler.LOST_POD_GRACE_SECONDS", 3.0, raising=False)
    body = one_trial(
        "lost",
        image_pack,
        s3,
        bucket,
        limits={"timeoutSeconds": 2, "llmTimeoutSeconds": 1, "verifierTimeoutSeconds": 1},
        retries={"limit": 0},
        provider={"trialRetryBudget": 0},  # no provider time given back: the deadline is the timeouts
    )
    with operator(kube):  # no kubelet: the test plays the node
        kube.create(body)
        [pod] = await wait_until(lambda: kube.objects("pods", NS), 20, "the trial pod")
        name = pod["metadata"]["name"]
        kube.patch(
            "pods",
            NS,
            name,
            {"status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}},
            subresource="status",
        )
        await asyncio.sleep(1.5)
        kube.patch("pods", NS, name, {"status": {"phase": "Unknown", "reason": "NodeLost"}}, subresource="status")
        await wait_until(lambda: phase(kube, "lost") == "Failed", 30, "the run to finish")
    failed = next(c for c in status_of(kube, "lost")["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "NoTrialScored", failed
    counts = status_of(kube, "lost")["counts"]
    assert counts["infraErrors"] == 1 and counts["finished"] == 1, counts
    [err] = infra_errors(s3, bucket)
    assert "node lost" in err, err


async def test_a_runner_image_edited_mid_run_is_named_in_each_record_and_flagged(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """The image may be fixed mid-run (the canonical "fix the cause and edit the EvalRun"), so the edit is
    accepted; each record names the image that ran it, and a run whose scores mix two gets a warning."""
    first, fixed = "registry.example.com/evals/runner:1", "registry.example.com/evals/runner:2"
    body = one_trial(
        "reimaged",
        image_pack,
        s3,
        bucket,
        attempts=2,
        concurrency={"total": 1},
        retries={"limit": 2, "backoffSeconds": 8, "backoffLimit": 3},
        pod={"runnerImage": first},
    )

    def running() -> bool:
        return any((p.get("status") or {}).get("phase") == "Running" for p in kube.objects("pods", NS))

    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(body)
            await wait_until(running, 60, "the first trial's pod to run")
            kubelet.pull_failures.add(first)  # the next pod of the old image fails to start ...
            # ... the second attempt's: the first one's record must already name the old image (under load a try
            # of the first attempt could fail too, and both would then run on the fixed image: nothing mixed).
            await wait_until(
                lambda: [e for e in infra_errors(s3, bucket) if e.split(":", 1)[0].endswith(".2")],
                60,
                "the second trial's failed try",
            )
            kube.patch("evalruns", NS, "reimaged", {"spec": {"pod": {"runnerImage": fixed}}})  # ... and is fixed
            await wait_until(lambda: phase(kube, "reimaged") == "Succeeded", 90, "the run to succeed")
            warned = await wait_until(lambda: events(kube, "MixedHarness"), 30, raising=False)
    harness = {}
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    for key in s3_keys(s3, bucket):
        if key.endswith("/result.json"):
            rec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            if rec.get("harness"):
                harness[rec["attempt"]] = rec["harness"]
    assert harness[1].endswith(f"({first})") and harness[2].endswith(f"({fixed})"), harness
    assert warned, f"no MixedHarness event within 30 s of Succeeded; records' harnesses: {harness}"
    message = warned[0]["message"]
    assert "run by 2 harnesses" in message and first in message and fixed in message, message
