"""Helpers shared by the operator tests: the namespace, S3 credentials, an EvalRun body, waiting and S3 reads."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import boto3
from conftest import CREDS, NS
from kubeemu import RunningEmulator

__all__ = ["CREDS", "NS", "evalrun", "infra_errors", "run_uid", "s3_keys", "status_of", "wait_until"]


def evalrun(name: str, pack: Path, s3: str, bucket: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "models": [{"name": "oracle", "model": "scripted/oracle"}, {"name": "idle", "model": "scripted/noop"}],
        "tasks": {"path": str(pack)},
        "attempts": 2,
        "concurrency": {"total": 3},
        "retries": {"limit": 1, "backoffSeconds": 0},
        "output": {"uri": f"s3://{bucket}/runs", "endpointUrl": s3, "credentialsSecretRef": "s3-credentials"},
    }
    body.update(spec)
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name, "namespace": NS},
        "spec": body,
    }


async def wait_until(pred: Any, timeout: float, what: str = "", *, raising: bool = True) -> Any:
    """``pred()``'s first truthy value within ``timeout`` s. Past it: AssertionError naming ``what``, or with
    ``raising=False`` None, for a caller that asserts with what it saw (or that waits to see nothing happen)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        value = pred()
        if value:
            return value
        await asyncio.sleep(0.2)
    if not raising:
        return None
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def status_of(kube: RunningEmulator, name: str) -> dict[str, Any]:
    obj = kube.get("evalruns", NS, name) if hasattr(kube, "get") else None
    return (obj or {}).get("status") or {}


def run_uid(kube: RunningEmulator, name: str) -> str:
    """The uid of an EvalRun that must still exist (its S3 records live under runs/<name>/<uid>/)."""
    obj = kube.get("evalruns", NS, name)
    assert obj is not None, f"EvalRun {name} is gone"
    return obj["metadata"]["uid"]


def s3_keys(s3: str, bucket: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def infra_errors(s3: str, bucket: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    out = []
    for key in s3_keys(s3, bucket):
        if key.endswith("/result.json"):
            rec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            if rec.get("failure") == "infra_error":
                out.append(f"{rec['trial_id']}: {rec.get('error')}")
    return out
