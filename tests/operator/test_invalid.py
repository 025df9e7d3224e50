"""Invalid EvalRuns through the API: each gets status.phase Failed and a Valid=False/InvalidSpec condition naming
the field, once (no retry loop), and the operator keeps serving other runs.

The emulator validates custom resources against the CRD schema and prunes unknown fields, like a real API
server, so every case here is one the schema lets through and only the operator can reject: cross-field
rules, pydantic patterns stricter than the schema's, and what needs the task pack or the operator's settings.
(An inline secret such as models[].apiKey never reaches the operator: the schema prunes it.)
"""

from __future__ import annotations

import asyncio
import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from support import NS, evalrun, status_of, wait_until

WRITES = ("create", "update", "patch", "delete", "deletecollection")
CANARY = "sk-canary-operator-4b3a2918"
CANARY_URL = f"https://user:{CANARY}@llm.example.com/v1"


def postgres_pack(pack: Path) -> Path:
    """A pack with a postgres task, for an operator installed without a postgres sidecar image."""
    root = pack.parent / "pgpack"
    shutil.copytree(
        pack / "filesystem" / "standard" / "tiny" / "move_todo_0", root / "postgres" / "standard" / "tiny" / "pg_task"
    )
    return root


def broken_pack(pack: Path) -> Path:
    """The pack with one task's verify.py missing: refused before any pod, never a verifier_failed trial."""
    root = pack.parent / "brokenpack"
    shutil.copytree(pack, root)
    next(root.glob("filesystem/*/*/*/verify.py")).unlink()
    return root


def cases(pack: Path, s3: str, bucket: str) -> list[tuple[dict[str, Any], str]]:
    """(EvalRun, the field path its Failed condition must name)."""

    def run(name: str, **spec: Any) -> dict[str, Any]:
        return evalrun(name, pack, s3, bucket, **{"models": [{"name": "idle", "model": "scripted/noop"}], **spec})

    def with_output(name: str, uri: str) -> dict[str, Any]:
        body = run(name)
        body["spec"]["output"]["uri"] = uri
        return body

    dotted = run("dotted.run")
    long_name = run("x" * 70)
    return [
        (
            run(
                "dup-models",
                models=[{"name": "a", "model": "scripted/noop"}, {"name": "a", "model": "scripted/oracle"}],
            ),
            "spec.models:",
        ),
        (
            run(
                "two-key-sources",
                models=[
                    {
                        "name": "gpt",
                        "model": "openai/gpt-5",
                        "apiKeyEnv": "OPENAI_API_KEY",
                        "apiKeySecretRef": {"name": "llm-keys", "key": "openai"},
                    }
                ],
            ),
            "spec.models[0]:",
        ),
        (run("no-task-selected", tasks={"path": str(pack), "categories": ["no-such-category"]}), "spec.tasks"),
        (run("missing-pack", tasks={"path": "/nonexistent/mcpfleet/pack"}), "spec.tasks.path"),
        (run("empty-s3-pack", tasks={"path": f"s3://{bucket}/no-such-pack", "endpointUrl": s3}), "spec.tasks.path"),
        (with_output("gcs-output", "gs://bucket/runs"), "spec.output.uri:"),
        (with_output("bad-bucket", "s3://Bad_Bucket/runs"), "spec.output.uri:"),
        (with_output("relative-output", "runs"), "spec.output.uri:"),  # each pod would resolve it on its own disk
        (run("bad-quantity", pod={"resources": {"requests": {"cpu": "lots"}}}), "spec.pod.resources.requests:"),
        (run("gpu-limit", pod={"resources": {"limits": {"nvidia.com/gpu": "1"}}}), "spec.pod.resources.limits"),
        (dotted, "metadata.name:"),  # a valid object name, but not a DNS label (pod names, labels)
        (long_name, "metadata.name:"),  # 70 characters: fine for the API, too long for a label value
        (run("no-sidecar", tasks={"path": str(postgres_pack(pack))}), "spec.pod.sidecarImages.postgres"),
        (run("broken-pack", tasks={"path": str(broken_pack(pack))}), "missing verify.py"),
        (
            run("creds-in-url", models=[{"name": "gpt", "model": "openai/gpt-5", "apiBase": CANARY_URL}]),
            "spec.models[0].apiBase: 'https://***@llm.example.com/v1' embeds credentials",
        ),
        # spec.pod placement the schema lets through: the operator's own label, a runtime class outside the
        # allow-list (MCPFLEET_ALLOWED_RUNTIME_CLASSES below), a dnsPolicy of None without nameservers.
        (run("own-label", pod={"labels": {"mcpfleet.io/run": "other"}}), "spec.pod.labels: 'mcpfleet.io/run'"),
        (
            run("runtime-refused", pod={"runtimeClassName": "runc"}),
            "spec.pod.runtimeClassName: 'runc' is not in the operator's allowedRuntimeClasses (gvisor)",
        ),
        (run("no-nameservers", pod={"dnsPolicy": "None"}), "spec.pod.dnsPolicy: None"),
    ]


def writes(kube: RunningEmulator) -> dict[tuple[str, str], int]:
    counts = kube.call(lambda: dict(kube.emulator.request_counts))
    return {k: v for k, v in counts.items() if k[0] in WRITES}


def failed(kube: RunningEmulator, name: str) -> dict[str, Any] | None:
    st = status_of(kube, name)
    return st if st.get("phase") == "Failed" else None


async def test_invalid_runs_fail_once_and_the_operator_keeps_serving(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Installed with the filesystem sidecar only (the chart's sidecarImages trimmed): a postgres run cannot start.
    monkeypatch.setenv("MCPFLEET_SIDECAR_IMAGES", "filesystem=ghcr.io/mcpfleet/mcp-filesystem:0.1.0")
    monkeypatch.setenv("MCPFLEET_ALLOWED_RUNTIME_CLASSES", "gvisor")
    bad = cases(image_pack, s3, bucket)
    assert len(bad) >= 8
    async with Kubelet(kube.url) as kubelet:
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            for body, _ in bad:
                kube.create(copy.deepcopy(body))  # the schema accepts every one of them
            for body, path in bad:
                name = body["metadata"]["name"]
                status = await wait_until(lambda n=name: failed(kube, n), 30, f"{name} to fail")
                valid = [c for c in status["conditions"] if c["type"] == "Valid"]
                assert len(valid) == 1, status
                cond = valid[0]
                assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec"), (name, cond)
                assert path in cond["message"], (name, cond["message"])
                assert "counts" not in status and "startedAt" not in status, (name, status)
            await asyncio.sleep(1)  # let the last status writes and events land
            before = writes(kube)
            await asyncio.sleep(3)
            after = writes(kube)
            assert after == before, f"the operator kept writing for failed runs: {before} -> {after}"
            assert not kube.objects("pods", NS) and ("create", "pods") not in after
            warned = {
                e["involvedObject"]["name"]
                for e in kube.objects("events", NS)
                if e.get("reason") == "InvalidSpec" and e.get("type") == "Warning"
            }
            assert warned == {body["metadata"]["name"] for body, _ in bad}
            # The refused URL's password is in the EvalRun the user wrote, and nowhere the operator writes.
            for kind in ("events", "pods"):
                assert CANARY not in str(kube.objects(kind, NS)), kind
            assert CANARY not in str(status_of(kube, "creds-in-url"))
            # ... and a valid run created afterwards is served as usual.
            good = evalrun(
                "good",
                image_pack,
                s3,
                bucket,
                models=[{"name": "idle", "model": "scripted/noop"}],
                attempts=1,
                tasks={"path": str(image_pack), "include": ["*/move_todo_0"]},
            )
            kube.create(good)
            status = await wait_until(
                lambda: status_of(kube, "good").get("phase") == "Succeeded" and status_of(kube, "good"),
                90,
                "the valid run to succeed",
            )
    assert status["counts"]["finished"] == 1 and status["counts"]["infraErrors"] == 0
    assert len(kubelet.started) == 1
    for body, _ in bad:  # the failed runs stay failed
        assert status_of(kube, body["metadata"]["name"])["phase"] == "Failed"


async def test_edit_to_an_invalid_spec_fails_the_run_and_frees_its_capacity(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit that makes a running run invalid fails it (no crash, no retry loop), deletes its pods in flight
    and frees their place under the operator-wide pod cap (MCPFLEET_MAX_PODS=1 here), so other runs proceed."""
    monkeypatch.setenv("MCPFLEET_MAX_PODS", "1")
    one = {"tasks": {"path": str(image_pack), "include": ["*/move_todo_0"]}, "attempts": 1}
    first = evalrun(
        "edited", image_pack, s3, bucket, models=[{"name": "oracle", "model": "scripted/oracle?latency=0.3"}], **one
    )
    async with Kubelet(kube.url) as kubelet:
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            kube.create(first)
            await wait_until(lambda: kubelet.running == 1, 60, "the first run's pod")
            kube.patch(
                "evalruns",
                NS,
                "edited",
                {
                    "spec": {
                        "models": [
                            {"name": "oracle", "model": "scripted/oracle"},
                            {"name": "oracle", "model": "scripted/noop"},
                        ]
                    }
                },
            )
            status = await wait_until(lambda: failed(kube, "edited"), 20, "the edited run to fail")
            cond = next(c for c in status["conditions"] if c["type"] == "Valid")
            assert cond["reason"] == "InvalidSpec" and "spec.models:" in cond["message"], cond
            assert status["observedGeneration"] == 2
            # The failed run stops what it had running, rather than leaving pods nobody tracks.
            await wait_until(
                lambda: (
                    not [
                        p
                        for p in kube.objects("pods", NS)
                        if p["metadata"]["labels"].get("mcpfleet.io/run") == "edited"
                    ]
                ),
                20,
                "the failed run's pod to be deleted",
            )
            # kopf posts events from its own task, a moment after the deletes: wait for it, do not race it.
            await wait_until(
                lambda: [
                    e
                    for e in kube.objects("events", NS)
                    if e.get("reason") == "Stopped" and "1 trial pod(s) deleted" in e.get("message", "")
                ],
                10,
                "the Stopped event for the failed run",
            )
            second = evalrun(
                "after", image_pack, s3, bucket, models=[{"name": "idle", "model": "scripted/noop"}], **one
            )
            kube.create(second)
            status = await wait_until(
                lambda: status_of(kube, "after").get("phase") == "Succeeded" and status_of(kube, "after"),
                90,
                "the next run to succeed",
            )
            assert status["counts"]["finished"] == 1
            before = writes(kube)
            await asyncio.sleep(2)
            changed = {
                k: (before.get(k), v)
                for k, v in writes(kube).items()
                if v != before.get(k) and k[1].startswith("evalruns")
            }
            assert not changed, f"the operator kept writing to EvalRuns: {changed}"
            assert status_of(kube, "edited")["phase"] == "Failed"
