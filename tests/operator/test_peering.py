"""Two operator replicas against one API server: kopf peering lets only one act; when it stops, the other takes
over and finishes the run, every trial run and recorded exactly once."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from conftest import PEERING_NAME
from kubeemu import KopfThread, RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from support import NS, evalrun, run_uid, s3_keys, status_of, wait_until

from mcpfleet.operator.manifests import pod_name
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.tasks.discovery import bundled_root

ORACLE_SLOW = {"name": "oracle", "model": "scripted/oracle?latency=0.3"}
IDLE = {"name": "idle", "model": "scripted/noop"}


@contextlib.contextmanager
def replica(kube: RunningEmulator) -> Iterator[KopfThread]:
    """One operator replica with the operator's default peering (not the tests' usual standalone operator)."""
    with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS, standalone=False) as op:
        yield op


def acting(op: KopfThread) -> list[str]:
    """The runs this replica drives (reconcilers registered in its shared state)."""
    shared = op.memo.get("shared")
    return list(shared.runs) if shared is not None else []


def peers(kube: RunningEmulator) -> dict[str, Any]:
    return (kube.get("kopfpeerings", NS, PEERING_NAME) or {}).get("status") or {}


def events(kube: RunningEmulator) -> collections.Counter[str]:
    return collections.Counter(str(e.get("reason")) for e in kube.objects("events", NS))


def records(s3: str, bucket: str) -> list[dict[str, Any]]:
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    return [
        json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        for key in s3_keys(s3, bucket)
        if key.endswith("/result.json") and "/trials/" in key
    ]


@pytest.fixture
def quick_peering(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPFLEET_PEERING_SETTLE_SECONDS", "1.0")


async def test_two_replicas_one_acts_the_other_takes_over(
    kube: RunningEmulator, operator_env: None, quick_peering: None, s3: str, bucket: str, image_pack: Path
) -> None:
    body = evalrun("ha", image_pack, s3, bucket, models=[ORACLE_SLOW, IDLE], attempts=1, concurrency={"total": 2})
    async with Kubelet(kube.url) as kubelet:
        first = contextlib.ExitStack()
        a = first.enter_context(replica(kube))
        await wait_until(lambda: len(peers(kube)) == 1, 10, "the first replica's keep-alive")
        with replica(kube) as b:
            await wait_until(lambda: len(peers(kube)) == 2, 10, "both replicas in the peering object")
            kube.create(body)
            uid = run_uid(kube, "ha")
            # The first replica drives the run; the second stays paused (no daemon, no reconciler) all along.
            seen_a = seen_b = False
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                seen_a |= uid in acting(a)
                seen_b |= uid in acting(b)
                counts = status_of(kube, "ha").get("counts") or {}
                if counts.get("finished", 0) >= 2 and any(
                    (p.get("status") or {}).get("phase") == "Running" for p in kube.objects("pods", NS)
                ):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"the run did not progress: {status_of(kube, 'ha')}")
            assert seen_a and not seen_b, (seen_a, seen_b)
            before = events(kube)
            assert before["Started"] == 1
            # The active replica stops (a rollout, a node drain): it leaves the peering object; the other one,
            # after its settle time, takes the run over from its pods and records.
            await asyncio.to_thread(first.close)
            stopped_at = time.monotonic()
            await wait_until(lambda: uid in acting(b), 30, "the second replica to take the run over")
            took = time.monotonic() - stopped_at
            print(f"takeover: the second replica drove the run {took:.2f} s after the first one stopped")
            status = await wait_until(
                lambda: (st := status_of(kube, "ha")).get("phase") == "Succeeded" and st, 180, "the run to finish"
            )
            await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to be deleted")
            assert list(peers(kube)) and len(peers(kube)) == 1  # the first replica left
    run = parse_evalrun(dict(body, metadata=dict(body["metadata"], uid=uid)))
    trials = plan(run, bundled_root())
    expected = sorted(pod_name("ha", t.trial_id) for t in trials)
    assert len(expected) == 6
    assert sorted(kubelet.started) == expected, sorted(kubelet.started)  # each trial's pod once, no duplicate
    assert kube.call(lambda: kube.emulator.request_counts[("create", "pods")]) == 6
    recs = records(s3, bucket)
    assert sorted(r["trial_id"] for r in recs) == sorted(t.trial_id for t in trials)
    assert all(r["infra_attempts"] == 1 and r["failure"] != "infra_error" for r in recs), recs
    assert status["counts"]["finished"] == 6 and status["counts"]["retries"] == 0, status["counts"]
    after = events(kube)
    assert after["Started"] == 1 and after["Completed"] == 1, after  # no doubled milestones
    assert took < 15, f"the takeover took {took:.1f} s"


async def test_a_replica_without_peering_is_standalone(
    kube: RunningEmulator, operator_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MCPFLEET_PEERING=false (one replica, no peering CRD needed): kopf runs standalone, writes no keep-alive."""
    assert OperatorSettings().peering is True
    monkeypatch.setenv("MCPFLEET_PEERING", "false")
    with replica(kube) as op:
        await asyncio.sleep(1.0)
        assert op.settings.peering.standalone is True and not peers(kube)
