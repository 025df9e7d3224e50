"""Pods end as on a real cluster: deleted gracefully (SIGTERM, the grace period, SIGKILL, then the node's final
delete), and a trial's next try never starts while an earlier try of it may still be writing its record.

The API emulator deletes a pod bound to a node gracefully (``deletionTimestamp``), the test kubelet (bound as
node ``test-node``) stops its containers and deletes it with ``gracePeriodSeconds=0``; a node that never does
(a lost node) is played by binding a pod to a node no kubelet has.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import BIN_PATH, REPO, Kubelet
from support import NS, evalrun, s3_keys, status_of, wait_until

from mcpfleet.operator.manifests import pod_name
from mcpfleet.operator.reconciler import infra_record
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.results.records import dumps
from mcpfleet.runner.results.store import open_store
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.spec.trial import TrialSpec
from mcpfleet.runner.tasks.discovery import bundled_root

ONE_TASK = "filesystem/standard/tiny/move_todo_0"


@contextlib.contextmanager
def operator(kube: RunningEmulator) -> Iterator[Any]:
    with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS) as op:
        yield op


def one_trial(name: str, pack: Path, s3: str, bucket: str, model: str, **spec: Any) -> dict[str, Any]:
    return evalrun(
        name,
        pack,
        s3,
        bucket,
        models=[{"name": "oracle", "model": model}],
        attempts=1,
        tasks={"path": str(pack), "include": [ONE_TASK]},
        **spec,
    )


def the_trial(kube: RunningEmulator, body: dict[str, Any]) -> tuple[Any, TrialSpec]:
    """The run as the operator planned it (with its uid) and its one trial."""
    obj = kube.get("evalruns", NS, body["metadata"]["name"])
    assert obj is not None
    run = parse_evalrun(dict(body, metadata=dict(body["metadata"], uid=obj["metadata"]["uid"])))
    [trial] = plan(run, bundled_root())
    return run, trial


def records(s3: str, bucket: str) -> dict[str, dict[str, Any]]:
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    out = {}
    for key in s3_keys(s3, bucket):
        if key.endswith("/result.json") and "/trials/" in key:
            rec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            out[rec["trial_id"]] = rec
    return out


def pod_creations(kube: RunningEmulator) -> int:
    return kube.call(lambda: kube.emulator.request_counts[("create", "pods")])


def deleted_objects(kube: RunningEmulator, name: str) -> list[dict[str, Any]]:
    """The pod as it was when it was removed (the DELETED events of the emulator's history)."""

    def scan() -> list[dict[str, Any]]:
        res = kube.emulator.find_resource("pods")
        return [e.obj for e in res.history if e.type == "DELETED" and e.obj["metadata"]["name"] == name]

    return kube.call(scan)


def got(kube: RunningEmulator, name: str) -> dict[str, Any]:
    pod = kube.get("pods", NS, name)
    assert pod is not None, f"pod {name} is gone"
    return pod


def phase_of(kube: RunningEmulator, name: str) -> str | None:
    return ((kube.get("pods", NS, name) or {}).get("status") or {}).get("phase")


# -- the API server and the node ---------------------------------------------------------------------


def bare_pod(name: str, grace: int, containers: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {"name": c, "image": "busybox", "command": ["sh", "-c", script]} for c, script in containers.items()
            ],
        },
    }


async def test_the_api_server_deletes_pods_gracefully_as_a_real_one(kube: RunningEmulator) -> None:
    """Unbound or finished pods go at once; a pod on a node gets deletionTimestamp (now + its grace) and stays,
    through status writes, until a delete with gracePeriodSeconds=0 (its node's); a shorter grace wins."""
    kube.create(bare_pod("unbound", 30, {"c": "true"}))
    kube.delete("pods", NS, "unbound")
    assert kube.get("pods", NS, "unbound") is None

    kube.create(bare_pod("done", 30, {"c": "true"}))
    kube.bind_pod(NS, "done", "n1")
    kube.patch("pods", NS, "done", {"status": {"phase": "Succeeded"}}, subresource="status")
    kube.delete("pods", NS, "done")
    assert kube.get("pods", NS, "done") is None

    kube.create(bare_pod("busy", 30, {"c": "true"}))
    kube.bind_pod(NS, "busy", "n1")
    assert got(kube, "busy")["spec"]["nodeName"] == "n1"
    status, _ = kube.request("POST", f"/api/v1/namespaces/{NS}/pods/busy/binding", {"target": {"name": "n2"}})
    assert status == 409  # bound once
    kube.patch("pods", NS, "busy", {"status": {"phase": "Running"}}, subresource="status")
    t0 = time.time()
    kube.delete("pods", NS, "busy")
    meta = got(kube, "busy")["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30
    killed = datetime.fromisoformat(meta["deletionTimestamp"].replace("Z", "+00:00")).timestamp()
    assert t0 + 28 <= killed <= t0 + 32, (t0, meta["deletionTimestamp"])
    kube.patch("pods", NS, "busy", {"status": {"message": "stopping"}}, subresource="status")
    assert kube.get("pods", NS, "busy") is not None, "a status write must not remove a pod its node still stops"
    status, _ = kube.request("DELETE", f"/api/v1/namespaces/{NS}/pods/busy?gracePeriodSeconds=5")
    assert status == 200 and got(kube, "busy")["metadata"]["deletionGracePeriodSeconds"] == 5
    status, _ = kube.request("DELETE", f"/api/v1/namespaces/{NS}/pods/busy", {"gracePeriodSeconds": 0})
    assert status == 200 and kube.get("pods", NS, "busy") is None


async def test_kubelet_sends_sigterm_then_sigkill_after_the_grace_period(kube: RunningEmulator, tmp_path: Path) -> None:
    """A deleted pod's containers get SIGTERM; one that ignores it gets SIGKILL when the pod's grace period is
    up; then the pod reports its terminal phase and its node deletes it (gracePeriodSeconds=0)."""
    out = tmp_path / "out"
    polite = f'trap "echo stopped >> {out}; exit 0" TERM; while :; do sleep 0.05; done'
    stubborn = f'trap "echo ignored >> {out}" TERM; while :; do sleep 0.05; done'
    kube.create(bare_pod("slow", 2, {"polite": polite, "stubborn": stubborn}))
    async with Kubelet(kube.url) as kubelet:
        await wait_until(lambda: phase_of(kube, "slow") == "Running", 20, "the pod to run")
        t0 = time.monotonic()
        kube.delete("pods", NS, "slow")
        assert got(kube, "slow")["metadata"]["deletionGracePeriodSeconds"] == 2
        await wait_until(lambda: kube.get("pods", NS, "slow") is None, 10, "the node to delete the pod")
        took = time.monotonic() - t0
    assert 1.9 <= took < 4.5, took
    sent = [(c, sig) for _, p, c, sig in kubelet.signals if p == "slow"]
    assert sorted(sent) == [("polite", "SIGTERM"), ("stubborn", "SIGKILL"), ("stubborn", "SIGTERM")], sent
    term = next(t for t, _, c, sig in kubelet.signals if (c, sig) == ("stubborn", "SIGTERM"))
    kill = next(t for t, _, c, sig in kubelet.signals if (c, sig) == ("stubborn", "SIGKILL"))
    assert 1.9 <= kill - term <= 3.0, (term, kill)
    assert sorted(out.read_text().split()) == ["ignored", "stopped"]
    [gone] = deleted_objects(kube, "slow")
    assert gone["status"]["phase"] == "Failed", gone["status"]
    codes = {c["name"]: c["state"]["terminated"]["exitCode"] for c in gone["status"]["containerStatuses"]}
    assert codes == {"polite": 0, "stubborn": 137}, codes
    assert kubelet.deleted == ["slow"]


async def test_a_warm_forked_container_is_a_process_of_its_own_found_by_its_folder(
    kube: RunningEmulator, tmp_path: Path
) -> None:
    """The kubelet forks `mcpfleet` containers from its warm zygote once that is ready: each child must look like
    an exec'd container (its own argv and environment in /proc, its own session), so that leftover checks that
    look for a pod's folder still find it, and it must go with its pod."""
    from proctree import processes_naming

    pod = bare_pod("warm", 2, {})
    pod["spec"]["containers"] = [
        {
            "name": "server",
            "image": "mcpfleet/runner",
            "command": ["mcpfleet", "scripted-server", "--port", "0"],
            "env": [{"name": "WARM_MARKER", "value": "marker-4711"}],
        }
    ]
    (tmp_path / "node").mkdir()
    async with Kubelet(kube.url, workdir=tmp_path / "node") as kubelet:
        assert kubelet.warm is not None
        assert await asyncio.to_thread(kubelet.warm.ready.wait, 60)
        kube.create(pod)
        await wait_until(lambda: phase_of(kube, "warm") == "Running", 20, "the pod to run")
        [(pid, cmd)] = await wait_until(lambda: processes_naming("marker-4711"), 20, "the container's process")
        assert kubelet.warm.proc is not None
        assert int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == kubelet.warm.proc.pid
        assert cmd.split()[1:4] == ["scripted-server", "--port", "0"], cmd
        env = dict(e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in e)
        assert env["WARM_MARKER"] == "marker-4711" and env["PATH"] == BIN_PATH and "WARM_ZYGOTE_ROOM" not in env
        assert os.getsid(pid) == pid and os.getsid(pid) != os.getsid(0)
        assert Path(os.readlink(f"/proc/{pid}/cwd")).parent == tmp_path / "node"  # in its pod's folder
        kube.delete("pods", NS, "warm")
        await wait_until(lambda: kube.get("pods", NS, "warm") is None, 10, "the node to delete the pod")
        assert not processes_naming("marker-4711")
    assert ("warm", "server", "SIGTERM") in [(p, c, sig) for _, p, c, sig in kubelet.signals]


# -- the operator ----------------------------------------------------------------------------------------


async def test_no_retry_while_the_abandoned_try_may_still_write_its_record(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """The operator gives up on a Pending try (pendingTimeoutSeconds) whose runner had in fact just started on its
    node: it deletes the pod and waits for it to be gone before launching the next try. The runner uses its
    grace period to store its record: that record is the trial's outcome and no second (paid) try runs.

    The test plays the node: binds the pod, keeps it Pending, then, once the pod is being deleted, stores the
    trial's record, reports Succeeded and deletes the pod, as its kubelet would."""
    body = one_trial(
        "abandoned",
        image_pack,
        s3,
        bucket,
        "scripted/oracle",
        retries={"limit": 2, "backoffSeconds": 0},
        pod={"pendingTimeoutSeconds": 10},
    )
    with operator(kube):
        kube.create(body)
        run, trial = the_trial(kube, body)
        first = pod_name("abandoned", trial.trial_id)
        await wait_until(lambda: kube.get("pods", NS, first), 20, "the trial pod")
        kube.bind_pod(NS, first, "busy-node")
        kube.patch("pods", NS, first, {"status": {"phase": "Pending"}}, subresource="status")
        await wait_until(
            lambda: (kube.get("pods", NS, first) or {}).get("metadata", {}).get("deletionTimestamp"),
            20,
            "the operator to delete the Pending pod",
        )
        await asyncio.sleep(3.0)  # the try's grace period: its pod is Terminating, its runner still writing
        assert [p["metadata"]["name"] for p in kube.objects("pods", NS)] == [first], "a retry started too early"
        assert pod_creations(kube) == 1
        record = infra_record(run, trial, 1, "").model_dump(mode="json")
        record.update(passed=True, failure=None, error=None)
        store = open_store(run.spec.output, run.name, bundled_root(), run_uid=run.metadata.uid)
        await asyncio.to_thread(store.commit, trial.trial_id, dumps(record))
        kube.patch("pods", NS, first, {"status": {"phase": "Succeeded"}}, subresource="status")
        kube.delete("pods", NS, first, grace_period_seconds=0)
        status = await wait_until(
            lambda: (st := status_of(kube, "abandoned")).get("phase") == "Succeeded" and st, 30, "the run to finish"
        )
        await asyncio.sleep(1.0)
        assert pod_creations(kube) == 1 and not kube.objects("pods", NS)
    assert status["counts"]["passed"] == 1 and status["counts"]["retries"] == 0, status["counts"]
    assert status["counts"]["infraErrors"] == 0
    rec = records(s3, bucket)[trial.trial_id]
    assert rec["passed"] is True and rec["infra_attempts"] == 1, rec


def slow_stopping_runner(tmp_path: Path) -> dict[str, str]:
    """A PATH whose `mcpfleet trial` ignores SIGTERM (as a runner finishing its upload would): it completes the
    trial and stores its record in its grace period. Every other command is the real one."""
    bindir = tmp_path / "slowbin"
    bindir.mkdir()
    wrapper = bindir / "mcpfleet"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "trial" ]; then trap "" TERM; fi  # ignored signals stay ignored across exec\n'
        f'exec {REPO / ".venv" / "bin" / "mcpfleet"} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return {"PATH": os.pathsep.join([str(bindir), BIN_PATH])}


def agent_at_work(kubelet: Kubelet) -> bool:
    """The runner is past its start (which can take many seconds on a loaded machine): its agent has called a
    tool through the MCP sidecar. What is left (a few scripted turns, the verifier, the upload) fits the grace."""
    for poddir in kubelet.poddirs.values():
        log = poddir / "mcp-filesystem.log"
        if log.exists() and '"method":"tools/call"' in log.read_text(errors="replace"):
            return True
    return False


async def test_a_record_stored_by_a_slow_terminating_try_is_the_outcome(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, tmp_path: Path
) -> None:
    """A running trial pod is deleted (kubectl delete, a node drain). Its runner gets SIGTERM and its grace
    period, keeps going and stores its record, and only then its MCP sidecar is stopped and the pod goes: the
    record is the trial's outcome, the trial ran once, no retry."""
    body = one_trial(
        "drained", image_pack, s3, bucket, "scripted/oracle?latency=0.5", retries={"limit": 2, "backoffSeconds": 0}
    )
    async with Kubelet(kube.url, extra_env=slow_stopping_runner(tmp_path)) as kubelet:
        with operator(kube):
            kube.create(body)
            _, trial = the_trial(kube, body)
            first = pod_name("drained", trial.trial_id)
            await wait_until(lambda: agent_at_work(kubelet), 120, "the agent's first tool call")
            kube.delete("pods", NS, first)  # graceful: 30 s, the trial pod's terminationGracePeriodSeconds
            status = await wait_until(
                lambda: (st := status_of(kube, "drained")).get("phase") == "Succeeded" and st, 60, "the run to finish"
            )
            await wait_until(lambda: not kube.objects("pods", NS), 30, "the pod to go")
    assert kubelet.started == [first] and pod_creations(kube) == 1
    rec = records(s3, bucket)[trial.trial_id]
    assert rec["passed"] is True and rec["failure"] is None and rec["infra_attempts"] == 1, rec
    assert status["counts"]["passed"] == 1 and status["counts"]["retries"] == 0, status["counts"]
    signals = [(c, sig) for _, p, c, sig in kubelet.signals if p == first]
    assert signals[0] == ("runner", "SIGTERM") and ("runner", "SIGKILL") not in signals, signals
    assert all(sig == "SIGTERM" for _, sig in signals), signals  # the sidecars after the runner, no SIGKILL
    [gone] = deleted_objects(kube, first)
    assert gone["status"]["phase"] == "Succeeded", gone["status"]


async def test_a_pod_terminating_for_ever_on_a_lost_node_is_counted_failed_then_retried(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, monkeypatch: Any
) -> None:
    """A running pod is deleted, but its node is lost: the pod stays Terminating for ever. The operator does
    not wait on it for ever, nor retry before the old try has certainly stopped (its activeDeadlineSeconds and
    grace, which its node enforces even when cut off); then the retry runs on a live node and the run finishes."""
    monkeypatch.setenv("MCPFLEET_POD_GRACE_SECONDS", "0")
    monkeypatch.setattr("mcpfleet.operator.reconciler.LOST_POD_GRACE_SECONDS", 3.0)
    limits = {"timeoutSeconds": 8, "llmTimeoutSeconds": 4, "verifierTimeoutSeconds": 4}
    body = one_trial(
        "lostnode",
        image_pack,
        s3,
        bucket,
        "scripted/oracle",
        limits=limits,
        retries={"limit": 1, "backoffSeconds": 0},
        provider={"trialRetryBudget": 0},  # no provider time given back: the deadline is the timeouts
    )
    with operator(kube):  # no kubelet yet: the test plays the lost node
        kube.create(body)
        _, trial = the_trial(kube, body)
        first, retry = pod_name("lostnode", trial.trial_id), pod_name("lostnode", trial.trial_id, 1)
        await wait_until(lambda: kube.get("pods", NS, first), 20, "the trial pod")
        kube.bind_pod(NS, first, "lost-node")
        kube.patch("pods", NS, first, {"status": {"phase": "Running"}}, subresource="status")
        await wait_until(lambda: status_of(kube, "lostnode").get("counts", {}).get("running") == 1, 10, "running")
        seen_running = time.monotonic()
        kube.delete("pods", NS, first)
        await wait_until(lambda: kube.get("pods", NS, retry), 30, "the retry's pod")
        waited = time.monotonic() - seen_running
        assert waited >= 8 + 4 + 3 - 1.5, f"the retry started {waited:.1f} s after the old try ran: too early"
        assert got(kube, first)["metadata"]["deletionTimestamp"]  # still Terminating: never waited on
        async with Kubelet(kube.url) as kubelet:
            status = await wait_until(  # Failed (NoTrialScored) if the retry ended an infra error, see below
                lambda: (st := status_of(kube, "lostnode")).get("phase") in ("Succeeded", "Failed") and st,
                120,
                "the run to finish",
            )
    assert kubelet.started == [retry], kubelet.started  # the lost node's pod is not this node's
    assert status["counts"]["finished"] == 1 and status["counts"]["retries"] == 1, status["counts"]
    # The retry's own outcome (on a loaded machine its short deadline may cut it: then an infra error).
    rec = records(s3, bucket)[trial.trial_id]
    assert rec["infra_attempts"] == 2, rec
    assert status["phase"] == ("Failed" if rec["failure"] in ("infra_error", "provider_error") else "Succeeded"), status


async def test_the_kubelet_catches_a_process_that_outlives_its_pods_containers(
    kube: RunningEmulator, tmp_path: Path
) -> None:
    """A container's child that left its process group (as supergateway's stdio servers do) and ignores SIGTERM
    outlives the container: a container runtime would kill it with the container's cgroup, the test kubelet has
    none, and such a process outlived a test run by 38 minutes once. Its leftover check finds it, kills it, and
    fails the kubelet's exit naming it."""
    from proctree import processes_naming

    leak = """setsid sh -c 'trap "" TERM; while :; do sleep 1; done' "$PWD" & sleep 0.3"""
    kube.create(bare_pod("leaky", 5, {"main": leak}))
    (tmp_path / "node").mkdir()
    with pytest.raises(AssertionError, match="outlived their pod's containers"):
        async with Kubelet(kube.url, workdir=tmp_path / "node") as kubelet:
            await wait_until(lambda: phase_of(kube, "leaky") == "Succeeded", 30, "the pod to finish")
    assert {pod for pod, _, _ in kubelet.leftovers} == {"leaky"}, kubelet.leftovers
    assert any("trap" in cmd for _, _, cmd in kubelet.leftovers), kubelet.leftovers  # the shell that left its group
    assert not processes_naming(str(tmp_path))  # killed
