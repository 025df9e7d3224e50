"""End to end on Kubernetes for a declared service's backing service (issue 46): a bundled site (the shop, from
mcpfleet.sites) as a native sidecar of each trial pod, started and probed on its declared readiness before the MCP
server starts, its port given by ``{port:shop}`` to the server's args and env and to the verifier's env, stopped
after the runner; and one that exits before it is ready, which ends its try as an infrastructure error naming its
container. The test kubelet runs each container's command as a process: the images are only names here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import boto3
import yaml
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from kubelet_probes import POD_IP
from proctree import processes_naming
from support import NS, evalrun, infra_errors, s3_keys, status_of, wait_until

from mcpfleet.operator.scheduling import restarted

PORT = 8081  # the shop's declared port; the test kubelet gives each pod a free host port for it
SHOP_DATA = "/tmp/backing-shop-data"  # in the pod's /tmp volume
SHOP: dict[str, Any] = {
    "name": "shop",
    "image": "registry.example/shop:1",
    "port": PORT,
    "command": [
        "sh",
        "-c",
        f"python -m mcpfleet.sites seed shop {SHOP_DATA} >/dev/null && "
        f"exec python -m mcpfleet.sites.shop --data {SHOP_DATA} --host 0.0.0.0 --port {{port:shop}}",
    ],
    "readiness": {"httpGet": "/healthz"},
}
# The server's sidecar reaches the shop first (at 127.0.0.1, the pod's shared network; its URL in the args), then
# execs the server: a shop not ready before the server starts fails its pod.
REACH = 'python -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5).close()"'
SERVICE: dict[str, Any] = {
    "server": {
        "command": "sh",
        "args": [
            "-c",
            f'{REACH} "$1" && exec mcp-server-filesystem {{state}}',
            "sh",
            "http://127.0.0.1:{port:shop}/healthz",
        ],
        "env": {"SHOP_URL": "http://127.0.0.1:{port:shop}/"},
        "image": "registry.example/files:1",
    },
    "state": {"kind": "folder"},
    "verifier": {"env": {"FILESYSTEM_TEST_DIR": "{state}", "SHOP_URL": "http://127.0.0.1:{port:shop}/"}},
    "backing": [SHOP],
}
# The verifier reads the shop while it runs (the oracle fails without it), then the task's own checks.
READS_SHOP = (
    "import os, urllib.request\n"
    "with urllib.request.urlopen(os.environ['SHOP_URL'], timeout=10) as r:\n"
    "    assert r.status == 200 and b'larkspur' in r.read().lower()\n"
)


def backed_pack(image_pack: Path, service: dict[str, Any]) -> Path:
    """The image's tiny filesystem pack cut to one task, its service renamed 'files', declared with ``service``."""
    (image_pack / "filesystem").rename(image_pack / "files")
    tasks = image_pack / "files" / "standard" / "tiny"
    for extra in ("move_todo_1", "move_todo_2"):
        shutil.rmtree(tasks / extra)
    meta = tasks / "move_todo_0" / "meta.json"
    meta.write_text(meta.read_text().replace('"filesystem"', '"files"'))
    verify = tasks / "move_todo_0" / "verify.py"
    verify.write_text(READS_SHOP + verify.read_text())
    (image_pack / "files" / "service.yaml").write_text(yaml.safe_dump(service))
    return image_pack


def records(s3: str, bucket: str) -> list[dict[str, Any]]:
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    keys = [k for k in s3_keys(s3, bucket) if k.endswith("/result.json")]
    return [json.loads(client.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys]


async def test_a_backing_site_is_each_trial_pods_sidecar_ready_before_the_server_and_gone_after_the_runner(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, tmp_path: Path
) -> None:
    pack = backed_pack(image_pack, SERVICE)
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump(evalrun("backed", pack, s3, bucket, attempts=1)))
    async with Kubelet(kube.url) as kubelet:
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            kube.kubectl("apply", "--validate=false", "-f", str(manifest))
            status = await wait_until(
                lambda: status_of(kube, "backed").get("phase") == "Succeeded" and status_of(kube, "backed"),
                180,
                "the run to succeed",
            )
            await wait_until(lambda: not kube.objects("pods", NS), 30, "the pods to go")
        left = processes_naming(str(kubelet.workdir))  # before the kubelet's exit sweeps them
    assert not infra_errors(s3, bucket)
    assert status["counts"]["total"] == 2 and status["counts"]["passed"] == 1, status["counts"]
    assert {r["model"]: r["passAt1"] for r in status["results"]} == {"oracle": "1.0000", "idle": "0.0000"}
    recs = {r["model"]: r for r in records(s3, bucket)}
    assert recs["oracle"]["passed"] is True, recs["oracle"]["verifier"]
    assert recs["idle"]["passed"] is False and recs["idle"]["failure"] == "premature_stop", recs["idle"]  # scored
    by_trial = {r["trial_id"]: r for r in recs.values()}
    assert len(kubelet.started) == 2
    for pod in kubelet.started:
        host = kubelet.port_maps[pod][PORT]
        events = [(c, what) for _, c, what in kubelet.events[pod]]
        order = [c for c, what in events if what == "start"]
        assert order == ["state", "backing-shop", "mcp-bridge", "mcp-files", "runner"], events
        # Probed on its declared readiness (to the pod IP), and passed, before the server's container started.
        probe = events.index(("backing-shop", f"probe httpGet /healthz on {PORT}: 200"))
        assert probe < events.index(("mcp-bridge", "start")) < events.index(("mcp-files", "start")), events
        assert kubelet.sidecars[pod] == ["backing-shop", "mcp-files"]
        assert kubelet.bound[pod]["backing-shop"] == {PORT: ["0.0.0.0"]}
        # {port:shop} reached every container as the pod's port for the shop (here its host port).
        launched = kubelet.launched[pod]
        shop_argv, _ = launched["backing-shop"]
        assert shop_argv[-1].endswith(f"--port {host}"), shop_argv
        server_argv, server_env = launched["mcp-files"]
        assert server_argv[-1] == f"http://127.0.0.1:{host}/healthz", server_argv
        assert server_env["SHOP_URL"] == f"http://127.0.0.1:{host}/"
        runner_env = launched["runner"][1]
        assert runner_env["MCPFLEET_PORT_SHOP"] == str(host)
        # The verifier read this pod's sidecar: the runner started no shop of its own.
        rec = by_trial[json.loads(runner_env["MCPFLEET_TRIAL"])["trial_id"]]
        assert rec["verifier"]["env"]["SHOP_URL"] == f"http://127.0.0.1:{host}/", rec["verifier"]["env"]
        # Stopped after the runner, the server first: SIGTERM in the reverse of their order, no SIGKILL.
        sent = [(t, c, sig) for t, p, c, sig in kubelet.signals if p == pod]
        assert [(c, sig) for _, c, sig in sent if c == "backing-shop"] == [("backing-shop", "SIGTERM")], sent
        assert all(sig == "SIGTERM" for _, _, sig in sent), sent
        shop_stop = next(t for t, c, _ in sent if c == "backing-shop")
        assert shop_stop > kubelet.runner_exit[pod]
        assert all(t < shop_stop for t, c, _ in sent if c == "mcp-files"), sent
    assert kubelet.leftovers == [] and left == [], (kubelet.leftovers, left)


async def test_a_backing_service_that_never_gets_ready_ends_its_try_as_an_infra_error_naming_its_container(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, tmp_path: Path
) -> None:
    """It exits before its startup probe passes: its node restarts it (restartCount 1), and the operator ends the try
    at once (not scored, retried once here) instead of waiting for a server and runner that never start."""
    broken = {**SHOP, "command": ["sh", "-c", "echo the shop has no data >&2; exit 3"]}
    pack = backed_pack(image_pack, {**SERVICE, "backing": [broken]})
    run = evalrun("unready", pack, s3, bucket, attempts=1, retries={"limit": 1, "backoffSeconds": 0})
    run["spec"]["models"] = run["spec"]["models"][:1]
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump(run))
    async with Kubelet(kube.url) as kubelet:
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            kube.kubectl("apply", "--validate=false", "-f", str(manifest))
            status = await wait_until(
                lambda: (
                    status_of(kube, "unready").get("phase") in ("Succeeded", "Failed") and status_of(kube, "unready")
                ),
                120,
                "the run to end",
            )
    [error] = infra_errors(s3, bucket)
    assert "backing-shop" in error and "restarted 1 time" in error, error
    [rec] = records(s3, bucket)
    assert rec["passed"] is False and rec["infra_attempts"] == 2, rec
    assert status["counts"]["passed"] == 0 and status["counts"]["retries"] == 1, status["counts"]
    assert len(kubelet.started) == 2  # the first try and its retry
    for pod in kubelet.started:
        started = [c for _, c, what in kubelet.events[pod] if what == "start"]
        assert started == ["state", "backing-shop"], kubelet.events[pod]  # no server, no runner
        restarts = [what for _, c, what in kubelet.events[pod] if what.startswith("restart")]
        assert restarts == ["restart 1: exited 3 before its startup probe passed"], kubelet.events[pod]


async def test_a_sidecar_whose_startup_probe_keeps_failing_is_killed_and_restarted_which_ends_a_try(
    kube: RunningEmulator,
) -> None:
    """The test kubelet as a node: a native sidecar that runs but never passes its startup probe is killed after
    failureThreshold probes and restarted (restartCount 1, its last run's exit in lastState), the main container
    never started; that status is what makes the operator end a try (scheduling.restarted), so a backing service
    whose readiness never holds ends its try as the exiting one above does, only after its 120 probes."""
    never = {
        "name": "backing-web",
        "image": "registry.example/web:1",
        "restartPolicy": "Always",
        "command": ["sh", "-c", "exec sleep 300"],
        "ports": [{"name": "b0-web", "containerPort": 8082, "protocol": "TCP"}],
        "startupProbe": {"tcpSocket": {"port": 8082}, "periodSeconds": 1, "failureThreshold": 2},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "unready", "namespace": NS},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "initContainers": [never],
            "containers": [{"name": "runner", "image": "runner", "command": ["true"]}],
        },
    }
    kube.create(pod)

    def restarted_status() -> dict[str, Any] | None:
        status = ((kube.get("pods", NS, "unready") or {}).get("status")) or {}
        inits = status.get("initContainerStatuses") or []
        return status if inits and inits[-1].get("restartCount") else None

    async with Kubelet(kube.url) as kubelet:
        status = await wait_until(restarted_status, 20, "the sidecar's restart")
        kube.delete("pods", NS, "unready")
        await wait_until(lambda: kube.get("pods", NS, "unready") is None, 15, "the pod to go")
    [web] = status["initContainerStatuses"]
    assert web["name"] == "backing-web" and web["restartCount"] == 1 and web["ready"] is False, web
    assert web["lastState"]["terminated"]["exitCode"] == 143, web  # SIGTERM: the node killed it
    assert web["state"]["waiting"]["reason"] == "CrashLoopBackOff", web
    assert status["phase"] == "Pending"
    assert restarted({"status": status}) == "container backing-web Error (exit 143), restarted 1 time"
    events = [(c, what) for _, c, what in kubelet.events["unready"]]
    assert events[:2] == [
        ("backing-web", "start"),
        (
            "backing-web",
            "restart 1: startup probe failed: "
            f"{POD_IP}:{kubelet.port_maps['unready'][8082]} never accepted a connection",
        ),
    ], events
    assert ("runner", "start") not in events
    assert [(c, sig) for _, p, c, sig in kubelet.signals if p == "unready"][0] == ("backing-web", "SIGTERM")
