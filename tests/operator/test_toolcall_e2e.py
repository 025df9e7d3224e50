"""End to end through the operator: a toolcall data set -> one pod per shard (no MCP sidecar) run by the test
kubelet (the real `mcpfleet materialise` and `mcpfleet trial`) -> per-case records in S3 -> per-case summary."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from conftest import REPO
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from support import NS, evalrun, infra_errors, run_uid, status_of, wait_until

from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess
from mcpfleet.runner.tasks.toolcall_pack import make_task
from mcpfleet.runner.toolcalls.loader import load_cases

DATA = REPO / "tests" / "data" / "toolcalls_200.jsonl"


@pytest.fixture
def toolcall_pack() -> Iterator[Path]:
    """A pack "in the image": outside /tmp, which trial pods mount over with an emptyDir."""
    base = REPO / ".test-image"
    base.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=base))
    make_task(root / "pack", DATA, "limbic", "set200")
    yield root / "pack"
    shutil.rmtree(root, ignore_errors=True)


async def test_a_toolcall_data_set_runs_one_pod_per_shard(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    toolcall_pack: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = evalrun(
        "tc",
        toolcall_pack,
        s3,
        bucket,
        models=[{"name": "gold", "model": "scripted/toolcall"}],
        attempts=1,
        toolcalls={"shardSize": 100},
    )
    with ScriptedServerProcess([toolcall_pack]) as scripted:
        monkeypatch.setenv("MCPFLEET_SCRIPTED_URL", scripted)
        async with Kubelet(kube.url) as kubelet:
            with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
                kube.create(body)
                pods = await wait_until(lambda: kube.objects("pods", NS), 60, "the shard pods")
                status = await wait_until(
                    lambda: status_of(kube, "tc").get("phase") == "Succeeded" and status_of(kube, "tc"),
                    240,
                    "the run to succeed",
                )
                await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to be deleted")
    assert not infra_errors(s3, bucket)
    assert len(kubelet.started) == 2  # 200 cases / 100 per shard: two pods, not 200
    assert all([c["name"] for c in p["spec"]["initContainers"]] == ["state"] for p in pods)
    assert status["counts"]["finished"] == 2
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    uid = run_uid(kube, "tc")
    summary = json.loads(client.get_object(Bucket=bucket, Key=f"runs/tc/{uid}/summary.json")["Body"].read())
    cases = load_cases(DATA).cases
    correct = sum(c.label == "correct" for c in cases)
    [row] = summary["rows"]
    assert row["tasks"] == 200 and row["pass_at_1"] == pytest.approx(correct / 200)
    assert summary["toolcall"]["gold"]["by_label"]["correct"]["passed"] == correct
    key = f"runs/tc/{uid}/trials/gold.toolcall.standard.limbic.set200-s0001.1/cases.jsonl"
    lines = client.get_object(Bucket=bucket, Key=key)["Body"].read().decode().splitlines()
    assert [json.loads(x)["id"] for x in lines] == [c.id for c in cases[100:]]
