"""End to end on Kubernetes for a service a pack declares (issue 46): the declared server as each trial pod's MCP
sidecar, run from its own image over the FIFO bridge (runner/services/bridge.py: no port, nothing asked of the image
but the server), two server variants as a sweep axis, records, status rows and metrics per variant; and a server
whose command its image lacks, which ends its try as an infrastructure error naming its container."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import boto3
import yaml
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from support import NS, evalrun, infra_errors, run_uid, s3_keys, status_of, wait_until

SERVICE: dict[str, Any] = {
    "server": {"command": "mcp-server-filesystem", "args": ["{state}"], "image": "registry.example/files:new"},
    "state": {"kind": "folder"},
    "verifier": {"env": {"FILESYSTEM_TEST_DIR": "{state}"}},
    "prompt": "The files are in {state}.",
}


def declared_pack(image_pack: Path) -> Path:
    """The image's tiny filesystem pack, its service renamed 'files' and declared in files/service.yaml."""
    (image_pack / "filesystem").rename(image_pack / "files")
    for meta in image_pack.glob("files/*/*/*/meta.json"):
        meta.write_text(meta.read_text().replace('"filesystem"', '"files"'))
    (image_pack / "files" / "service.yaml").write_text(yaml.safe_dump(SERVICE))
    return image_pack


async def test_a_declared_service_with_two_variants_runs_through_the_operator(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, tmp_path: Path
) -> None:
    pack = declared_pack(image_pack)
    shutil.rmtree(pack / "files" / "standard" / "tiny" / "move_todo_2")
    servers = [
        {"name": "new", "service": "files"},
        {"name": "old", "service": "files", "env": {"OLD": "1"}, "image": "registry.example/files:old"},
    ]
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump(evalrun("declared", pack, s3, bucket, attempts=1, servers=servers)))
    async with Kubelet(kube.url) as kubelet:
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            kube.kubectl("apply", "--validate=false", "-f", str(manifest))
            created = await wait_until(lambda: kube.objects("pods", NS), 60, "the first trial pods")
            images = {c["image"] for pod in created for c in pod["spec"]["initContainers"] if c["name"] == "mcp-files"}
            assert images <= {"registry.example/files:new", "registry.example/files:old"} and images
            status = await wait_until(
                lambda: status_of(kube, "declared").get("phase") == "Succeeded" and status_of(kube, "declared"),
                240,
                "the run to succeed",
            )
    assert not infra_errors(s3, bucket)
    assert status["counts"]["total"] == 8 and status["counts"]["passed"] == 4, status["counts"]
    rows = {(r["model"], r.get("variant")): r["passAt1"] for r in status["results"]}
    assert rows == {
        ("oracle", "new"): "1.0000",
        ("oracle", "old"): "1.0000",
        ("idle", "new"): "0.0000",
        ("idle", "old"): "0.0000",
    }
    # The server listens on no port at all: its stdin and stdout are the bridge's FIFOs, run by the helper.
    assert {p: kubelet.bound[p] for p in kubelet.started} == {p: {"mcp-files": {}} for p in kubelet.started}
    for pod in created:
        [server] = [c for c in pod["spec"]["initContainers"] if c["name"] == "mcp-files"]
        assert server["command"] == ["/mcpfleet-bridge/mcpfleet-fifo-exec"] and "ports" not in server
        assert server["args"][2:] == ["--", "mcp-server-filesystem", "/state"]
    uid = run_uid(kube, "declared")
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    results = [k for k in s3_keys(s3, bucket) if k.endswith("/result.json")]
    assert len(results) == 8
    for key in results:
        rec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        assert f".files@{rec['variant']}." in rec["trial_id"] and rec["variant"] in ("new", "old")
        assert rec["server"]["name"] == "secure-filesystem-server"
    summary = json.loads(client.get_object(Bucket=bucket, Key=f"runs/declared/{uid}/summary.json")["Body"].read())
    assert {c["variant"] for c in summary["comparisons"]} == {"old"}


async def test_a_declared_server_whose_command_its_image_lacks_ends_its_try_as_an_infra_error_naming_the_container(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path, tmp_path: Path
) -> None:
    """No startup probe waits for the server: the helper cannot exec the command, says so on the server's stdout
    and exits, and the runner ends the try at once, its record naming the container and the helper's words."""
    pack = declared_pack(image_pack)
    for extra in ("move_todo_1", "move_todo_2"):  # one task: one try, one record
        shutil.rmtree(pack / "files" / "standard" / "tiny" / extra)
    broken = {**SERVICE, "server": {**SERVICE["server"], "command": "mcp-server-not-in-image"}}
    (pack / "files" / "service.yaml").write_text(yaml.safe_dump(broken))
    run = evalrun("lacking", pack, s3, bucket, attempts=1, retries={"limit": 0, "backoffSeconds": 0})
    run["spec"]["models"] = run["spec"]["models"][:1]
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump(run))
    async with Kubelet(kube.url):
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            kube.kubectl("apply", "--validate=false", "-f", str(manifest))
            start = time.monotonic()
            errors = await wait_until(lambda: infra_errors(s3, bucket), 120, "the try's infra_error record")
            took = time.monotonic() - start
    [error] = errors
    assert "mcp-files" in error and "cannot run 'mcp-server-not-in-image'" in error, error
    assert took < 60, took  # well inside the FIFO open timeout (30 s) on top of a loaded machine's pod start
