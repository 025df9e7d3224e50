"""Scheduling problems explained, end to end (operator/scheduling.py): the API emulator, the test kubelet (which
also plays the scheduler for nodeSelector), the operator in a thread, moto S3.

- Every trial pod needs a node that does not exist: the run gets PodsScheduled=False naming the scheduler's
  message and how many trials it holds up, and ONE TrialsPending event for them, not one per pod.
- The MCP sidecar is OOM-killed and restarted under a running agent: the try is an infrastructure error naming
  the container and the cause, retried once, and the retry's record is the outcome."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kubeemu import RunningEmulator
from kubelet import Kubelet
from support import NS, status_of, wait_until
from test_termination import agent_at_work, one_trial, operator, pod_creations, records, the_trial

from mcpfleet.operator.manifests import LABEL_MODEL, pod_name


def events(kube: RunningEmulator, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.objects("events", NS) if e.get("reason") == reason]


async def test_unschedulable_pods_get_one_condition_and_one_event_for_all_their_trials(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("mcpfleet.operator.scheduling.REPORT_AFTER_SECONDS", 1.0)
    body = one_trial("nowhere", image_pack, s3, bucket, "scripted/oracle", pod={"nodeSelector": {"pool": "eval"}})
    body["spec"].update(attempts=3, concurrency={"total": 3})
    async with Kubelet(kube.url, node_labels={"pool": "general"}) as kubelet:
        with operator(kube):
            kube.create(body)
            cond = await wait_until(
                lambda: next(
                    (
                        c
                        for c in status_of(kube, "nowhere").get("conditions") or []
                        if c["type"] == "PodsScheduled"
                        and c["status"] == "False"
                        and c["message"].startswith("3 trials")
                    ),
                    None,
                ),
                60,
                "the PodsScheduled condition for 3 trials",
            )
            await wait_until(lambda: events(kube, "TrialsPending"), 10, "the TrialsPending event")
            for _ in range(3):  # a few more reconcile passes: still one event
                await wait_until(lambda: False, 1, raising=False)
            posted = events(kube, "TrialsPending")
            running = status_of(kube, "nowhere").get("counts", {})
    assert cond["reason"] == "Unschedulable"
    assert "didn't match Pod's node affinity/selector" in cond["message"], cond
    assert len(posted) == 1, posted
    assert posted[0]["message"].startswith("3 trials held up Pending: Unschedulable: 0/1 nodes are available")
    assert posted[0]["type"] == "Warning"
    assert len(set(kubelet.unschedulable)) == 3, kubelet.unschedulable  # three pods refused, each once
    assert kubelet.started == [] and running.get("passed", 0) == 0


async def test_an_oom_killed_sidecar_restarted_mid_trial_is_an_infra_error_retried_once(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    body = one_trial(
        "oomed", image_pack, s3, bucket, "scripted/oracle?latency=0.5", retries={"limit": 2, "backoffSeconds": 0}
    )
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(body)
            _, trial = the_trial(kube, body)
            first = pod_name("oomed", trial.trial_id)
            await wait_until(lambda: agent_at_work(kubelet), 120, "the agent's first tool call")
            pod = kube.get("pods", NS, first)
            assert pod is not None
            [sidecar] = [c["name"] for c in pod["spec"]["initContainers"] if c.get("restartPolicy") == "Always"]
            # What a node reports after it restarted an OOM-killed native sidecar in place.
            restarted = {
                "name": sidecar,
                "ready": True,
                "restartCount": 1,
                "state": {"running": {"startedAt": "2026-12-03T00:00:00Z"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            }
            kube.patch("pods", NS, first, {"status": {"initContainerStatuses": [restarted]}}, subresource="status")
            status = await wait_until(
                lambda: (st := status_of(kube, "oomed")).get("phase") == "Succeeded" and st, 120, "the run to finish"
            )
            await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to go")
    rec = records(s3, bucket)[trial.trial_id]
    teardown = kubelet.teardown_seconds()
    retry = pod_name("oomed", trial.trial_id, 1)
    print(f"\npod teardown (runner exit -> pod gone): {teardown.get(retry, float('nan')):.2f} s")
    assert retry in teardown and teardown[retry] < 10, teardown  # its sidecar stopped on SIGTERM, not at the grace
    assert kubelet.leftovers == []
    assert rec["passed"] is True and rec["infra_attempts"] == 2, rec  # the retry's record
    assert status["counts"]["retries"] == 1 and status["counts"]["passed"] == 1, status["counts"]
    assert pod_creations(kube) == 2 and kubelet.started == [first, pod_name("oomed", trial.trial_id, 1)]


async def test_unschedulable_trials_give_their_slots_to_the_trials_that_can_run(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One model's pods need more CPU than any node has; with concurrency 2 they took both slots first. They give
    them back after PARK_AFTER_SECONDS (requeued, not counted), so the other model's trials run at full concurrency
    and finish long before the unschedulable ones reach their Pending deadline, which then ends them as infra
    errors quoting the scheduler."""
    monkeypatch.setattr("mcpfleet.operator.scheduling.REPORT_AFTER_SECONDS", 1.0)
    monkeypatch.setattr("mcpfleet.operator.scheduling.PARK_AFTER_SECONDS", 2.0)
    monkeypatch.setattr("mcpfleet.operator.scheduling.REQUEUE_BASE_SECONDS", 1.0)
    body = one_trial("crowded", image_pack, s3, bucket, "scripted/oracle", retries={"limit": 0, "backoffSeconds": 0})
    body["spec"].update(
        models=[{"name": "huge", "model": "scripted/oracle"}, {"name": "small", "model": "scripted/oracle"}],
        attempts=2,
        concurrency={"total": 2},
        pod={"pendingTimeoutSeconds": 30},
    )

    def huge(pod: dict[str, Any]) -> bool:
        return bool(pod["metadata"]["labels"].get(LABEL_MODEL) == "huge")

    t0 = time.monotonic()
    async with Kubelet(kube.url, too_big=huge) as kubelet:
        with operator(kube):
            kube.create(body)
            await wait_until(
                lambda: status_of(kube, "crowded").get("counts", {}).get("passed") == 2, 60, "the small trials"
            )
            small_done = time.monotonic() - t0
            status = await wait_until(
                lambda: (st := status_of(kube, "crowded")).get("phase") in ("Succeeded", "Failed") and st,
                90,
                "the run to end",
            )
    started_small = [p for p in kubelet.started if "-small-" in p]
    print(f"\nsmall trials done {small_done:.1f} s after apply; huge pods refused: {len(kubelet.unschedulable)}")
    assert len(started_small) == 2 and kubelet.max_seen == 2, (kubelet.started, kubelet.max_seen)
    # Both launched long before a huge try's Pending deadline (30 s) could have freed a slot: they held none.
    launched = [t - t0 for t, p, what in kubelet.timeline if what == "start" and "-small-" in p]
    print(f"small pods started {', '.join(f'{t:.1f}' for t in launched)} s after apply")
    assert len(launched) == 2 and max(launched) < 20, launched
    assert kubelet.unschedulable[:2] and all("-huge-" in p for p in kubelet.unschedulable), kubelet.unschedulable
    assert len(kubelet.unschedulable) > 2  # requeued and tried again
    counts = status["counts"]
    assert counts["passed"] == 2 and counts["infraErrors"] == 2 and counts["retries"] == 0, counts
    infra = [r for r in records(s3, bucket).values() if r["failure"] == "infra_error"]
    assert len(infra) == 2 and all("pod unschedulable: Unschedulable: 0/1 nodes" in r["error"] for r in infra), infra
