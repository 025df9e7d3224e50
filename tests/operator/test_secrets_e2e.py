"""Secrets through the operator (issue 13 §2): a model's API key from a Secret reaches the trial, and neither it
nor the S3 secret appears in anything the run leaves behind: records and summary in S3, the EvalRun's status,
events, pods, or the operator's log, even when the provider echoes the key in an error."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import boto3
import pytest
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from support import CREDS, NS, evalrun, s3_keys, status_of, wait_until

CANARY = "sk-canary-7f3a9c2e51d04b8c"
ONE_TASK = "*/move_todo_0"


async def test_no_secret_in_anything_the_operator_or_its_pods_write(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "llm-key", "namespace": NS},
            "data": {"key": base64.b64encode(CANARY.encode()).decode()},
        }
    )
    ref = {"name": "llm-key", "key": "key"}
    models = [
        {"name": "keyed", "model": "scripted/oracle", "apiKeySecretRef": ref},
        # A 401 whose body echoes the key it was sent, as some providers do: a config error whose record must
        # not carry it (the key itself is never in the spec: the model string names no key).
        {"name": "echo", "model": "scripted/oracle?fault=auth", "apiKeySecretRef": ref},
    ]
    one = {"path": str(image_pack), "include": [ONE_TASK]}
    body = evalrun("canary", image_pack, s3, bucket, models=models, attempts=1, tasks=one)
    pods: list[dict] = []

    def ended() -> dict | bool:
        pods.extend(kube.objects("pods", NS))  # every pod seen while the run goes
        st = status_of(kube, "canary")
        return st.get("phase") in ("Succeeded", "Failed") and st

    async with Kubelet(kube.url) as kubelet:
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            kube.create(body)
            status = await wait_until(ended, 240, "the run to end")
    assert len(kubelet.started) == 2 and pods
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    written = {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in s3_keys(s3, bucket)}
    results = [json.loads(v) for k, v in written.items() if k.endswith("/result.json") and "/trials/" in k]
    records = {r["model"]: r for r in results}
    assert records["keyed"]["passed"], records["keyed"].get("error")
    # The echoed key reached the record's error redacted: proof that the Secret's key arrived in the pod.
    assert records["echo"]["failure"] == "config_error" and "401" in (records["echo"]["error"] or "")
    assert "[REDACTED]" in records["echo"]["error"], records["echo"]["error"]
    assert any(k.endswith("/summary.json") for k in written)
    leaks = {
        "S3 objects": b"\n".join(written.values()).decode("utf-8", "replace"),
        "status": json.dumps(status),
        "events": json.dumps(kube.objects("events", NS)),
        "pods": json.dumps(pods),
        "operator log": caplog.text,
    }
    for where, text in leaks.items():
        assert CANARY not in text, f"the model's API key leaked into {where}"
        assert CREDS["AWS_SECRET_ACCESS_KEY"] not in text, f"the S3 secret leaked into {where}"
