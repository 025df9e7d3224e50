"""End to end: an EvalRun applied with kubectl -> the operator -> one pod per trial run by a test kubelet
(the real `mcpfleet materialise`, the real filesystem MCP server behind supergateway as a native sidecar,
the real `mcpfleet trial`) -> records in S3 (moto) -> status -> pods deleted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from conftest import make_tiny_pack
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from support import CREDS, NS, evalrun, infra_errors, run_uid, s3_keys, status_of, wait_until

# spec.pod placement: Kubernetes' own fields, passed to every trial pod unchanged (the emulator checks the EvalRun
# against the CRD's schema, which embeds Kubernetes' schemas of these types).
PLACEMENT: dict[str, Any] = {
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "evals", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["evals"]}]},
                }
            ]
        }
    },
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
    ],
    "priorityClassName": "evals-low",
    "runtimeClassName": "gvisor",
    "imagePullSecrets": [{"name": "regcred"}],
    "labels": {"kueue.x-k8s.io/queue-name": "evals"},
    "annotations": {"example.com/owner": "e2e"},
    "dnsPolicy": "ClusterFirst",
    "dnsConfig": {"options": [{"name": "ndots", "value": "2"}]},
}


async def test_evalrun_end_to_end(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, tmp_path: Path
) -> None:
    pack = image_pack
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump(evalrun("e2e", pack, s3, bucket, pod=PLACEMENT)))
    async with Kubelet(kube.url) as kubelet:
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            out = kube.kubectl("apply", "--validate=false", "-f", str(manifest))
            assert "evalrun.mcpfleet.io/e2e created" in str(out)
            created = await wait_until(lambda: kube.objects("pods", NS), 60, "the first trial pods")
            for pod in created:  # the placement reached the pods the operator created, unchanged
                assert {k: pod["spec"].get(k) for k in PLACEMENT if k not in ("labels", "annotations")} == {
                    k: v for k, v in PLACEMENT.items() if k not in ("labels", "annotations")
                }
                assert PLACEMENT["labels"].items() <= pod["metadata"]["labels"].items()
                assert PLACEMENT["annotations"].items() <= pod["metadata"]["annotations"].items()
                assert pod["metadata"]["labels"]["mcpfleet.io/run"] == "e2e"
            status = await wait_until(
                lambda: status_of(kube, "e2e").get("phase") == "Succeeded" and status_of(kube, "e2e"),
                240,
                "the run to succeed",
            )
            await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to be deleted")
            table = str(kube.kubectl("get", "evalruns"))
    counts = status["counts"]
    errors = infra_errors(s3, bucket)
    assert not errors, f"infrastructure errors: {errors[:3]}"
    assert counts == {
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
    assert status["progress"] == "12/12"
    rows = {(r["model"], r["service"]): r for r in status["results"]}
    assert rows[("oracle", "filesystem")]["passAt1"] == "1.0000"
    assert rows[("idle", "filesystem")]["passAt1"] == "0.0000"
    assert status["observedGeneration"] == 1 and status["startedAt"] and status["finishedAt"]
    assert "Succeeded" in table and "12/12" in table
    # Never more than the run's concurrency in flight, and the limit was actually used.
    assert kubelet.max_seen == 3, "\n".join(f"{t:.2f} {p} {e}" for t, p, e in kubelet.timeline)
    assert len(kubelet.started) == 12  # one pod per trial, none twice
    # Each pod's MCP server listened on loopback only, and the runner still reached it (the trials passed).
    assert {p: kubelet.bound[p] for p in kubelet.started} == {
        p: {"mcp-filesystem": {8000: ["127.0.0.1"]}} for p in kubelet.started
    }, kubelet.bound
    keys = s3_keys(s3, bucket)
    uid = run_uid(kube, "e2e")
    results = [k for k in keys if k.endswith("/result.json")]
    assert len(results) == 12 and all(k.startswith(f"runs/e2e/{uid}/trials/") for k in results)
    assert f"runs/e2e/{uid}/summary.json" in keys
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    summary = json.loads(client.get_object(Bucket=bucket, Key=f"runs/e2e/{uid}/summary.json")["Body"].read())
    assert summary["complete"] and {r["model"]: r["pass_at_1"] for r in summary["rows"]} == {"idle": 0.0, "oracle": 1.0}
    # plan.json names the trials the summary counts, for an export or report without the task pack.
    plan = json.loads(client.get_object(Bucket=bucket, Key=f"runs/e2e/{uid}/plan.json")["Body"].read())
    assert sorted(plan["trials"]) == sorted(k.split("/")[-2] for k in results)
    # Secrets never leak into what the run leaves behind.
    for key in keys:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8", "replace")
        assert CREDS["AWS_SECRET_ACCESS_KEY"] not in body
    assert CREDS["AWS_SECRET_ACCESS_KEY"] not in json.dumps(kube.objects("events", NS))
    assert CREDS["AWS_SECRET_ACCESS_KEY"] not in json.dumps(status)


async def test_a_task_pack_in_s3(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A foreign pack kept in S3: the operator plans from its mirror, each pod's init container fetches its
    task and state with the Secret's credentials, and the runner reads the task from the fetched copy."""
    monkeypatch.setenv("MCPFLEET_CACHE_DIR", str(tmp_path / "operator-cache"))
    pack = make_tiny_pack(tmp_path / "pack", tasks=3)  # the descriptions the scripted oracle knows
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    for f in sorted(p for p in pack.rglob("*") if p.is_file()):
        client.put_object(Bucket=bucket, Key=f"packs/tiny/{f.relative_to(pack).as_posix()}", Body=f.read_bytes())
    shutil.rmtree(pack)  # nothing local to fall back on
    body = evalrun("s3pack", pack, s3, bucket, models=[{"name": "oracle", "model": "scripted/oracle"}], attempts=1)
    body["spec"]["tasks"] = {
        "path": f"s3://{bucket}/packs/tiny",
        "endpointUrl": s3,
        "credentialsSecretRef": "s3-credentials",
    }
    async with Kubelet(kube.url) as kubelet:
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            kube.create(body)
            status = await wait_until(
                lambda: status_of(kube, "s3pack").get("phase") == "Succeeded" and status_of(kube, "s3pack"),
                180,
                "the run to succeed",
            )
            await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to be deleted")
    assert not infra_errors(s3, bucket)
    assert status["counts"]["passed"] == 3 and status["counts"]["finished"] == 3
    assert len(kubelet.started) == 3
    uid = run_uid(kube, "s3pack")
    for key in s3_keys(s3, bucket):
        if key.startswith(f"runs/s3pack/{uid}/trials/") and key.endswith("/result.json"):
            rec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            assert rec["passed"] is True and rec["verifier"]["exit_code"] == 0, rec
