"""The FIFO bridge of a declared stdio server in a trial pod (runner/services/bridge.py, servers/bridge): the pod's
manifest (pure, validated against Kubernetes' own schemas) and the runner's end of the FIFOs against the real static
helper (tests/operator/test_declared_e2e.py runs both through the operator)."""

from __future__ import annotations

import asyncio
import shutil
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mcpfleet.operator.manifests import trial_pod
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.environment.fifo import FifoServerGone
from mcpfleet.runner.environment.mcp_client import connect_fifo
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.services.base import GATEWAY
from mcpfleet.runner.services.bridge import HELPER, MOUNT, SERVER_IN, SERVER_OUT, bridge_runner_args
from mcpfleet.runner.spec.load import parse_evalrun

REPO = Path(__file__).resolve().parents[1]
BUILT = REPO / "servers" / "bridge" / "bin" / HELPER  # scripts/setup.sh builds it
FILESYSTEM_SERVER = REPO / "servers" / "node_modules" / ".bin" / "mcp-server-filesystem"
DECLARATION = {
    "server": {"command": "mcp-server-filesystem", "args": ["{state}"], "image": "registry.example/files:1"},
    "state": {"kind": "folder"},
    "verifier": {"env": {"FILESYSTEM_TEST_DIR": "{state}"}},
}


def pod_of(tmp_path: Path, declaration: dict[str, Any], service: str = "files") -> dict[str, Any]:
    """The trial pod of a one-task pack whose service ``service`` is declared by ``declaration``."""
    task = REPO / "tasks/filesystem/standard/team_project"
    name = sorted(p.name for p in task.iterdir())[0]
    folder = tmp_path / "pack" / service
    shutil.copytree(task / name, folder / "standard" / "team_project" / name)
    shutil.copytree(REPO / "tasks/filesystem/states/team_project", folder / "states" / "team_project")
    shutil.copy(REPO / "tasks/filesystem/states/team_project.times.json", folder / "states")
    (folder / "service.yaml").write_text(yaml.safe_dump(declaration))
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "bridge", "namespace": "evals"},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}],
            "tasks": {"path": str(tmp_path / "pack")},
            "output": {"uri": "s3://bucket/runs"},
        },
    }
    run = parse_evalrun(doc)
    [trial] = plan(run, tmp_path)
    return trial_pod(run, trial, OperatorSettings())


def test_a_declared_stdio_server_runs_from_its_own_image_over_the_fifo_bridge_and_the_pod_validates(
    tmp_path: Path,
) -> None:
    pod = pod_of(tmp_path, DECLARATION)
    kubernetes_validate.validate(pod, "1.37.0", strict=True)
    spec = pod["spec"]
    inits = {c["name"]: c for c in spec["initContainers"]}
    [runner] = spec["containers"]
    assert list(inits) == ["state", "mcp-bridge", "mcp-files"]  # the helper and FIFOs exist before the server
    bridge, server = inits["mcp-bridge"], inits["mcp-files"]
    # The helper comes from the runner image: the server's image needs nothing but the server.
    assert bridge["image"] == runner["image"] and "restartPolicy" not in bridge
    assert bridge["command"] == [HELPER] and bridge["args"] == ["--install", MOUNT]
    assert server["image"] == "registry.example/files:1" and server["restartPolicy"] == "Always"
    assert server["command"] == [f"{MOUNT}/{HELPER}"]
    assert server["args"] == [SERVER_IN, SERVER_OUT, "--", "mcp-server-filesystem", "/state"]
    # No port and no probe: nothing can reach the server but the runner, which opens the FIFOs.
    assert "ports" not in server and "startupProbe" not in server
    assert [v for v in spec["volumes"] if v["name"] == "bridge"] == [
        {"name": "bridge", "emptyDir": {"sizeLimit": "2Gi"}}
    ]
    for container in (bridge, server, runner):
        assert {"name": "bridge", "mountPath": MOUNT} in container["volumeMounts"]
        # One uid for every container (the pod's), so FIFOs of mode 0600 are the runner's and the server's.
        assert (
            container["securityContext"] == runner["securityContext"]
            and "runAsUser" not in container["securityContext"]
        )
    assert spec["securityContext"]["runAsUser"] == 10001
    args = runner["args"]
    assert args[:4] == bridge_runner_args("mcp-files") and "--mcp-url" not in args


def test_a_pod_with_a_backing_sidecar_validates_and_its_port_travels_as_one_variable(tmp_path: Path) -> None:
    """The backing service is a native sidecar before the bridge and the server, probed on its declared readiness;
    ``{port:web}`` is ``$(MCPFLEET_PORT_WEB)`` in the sidecars (the kubelet expands it) and the runner reads that
    variable for ``verifier.env``. No port of the pod is two containers'."""
    web = {
        "name": "web",
        "image": "registry.example/web:1",
        "command": ["web-server", "--port", "{port:web}", "--data", "{state}/web"],
        "env": {"WEB_PORT": "{port:web}"},
        "port": 8081,
        "readiness": {"httpGet": "/healthz"},
    }
    server = {
        "command": "mcp-server-filesystem",
        "args": ["{state}"],
        "env": {"WEB_URL": "http://127.0.0.1:{port:web}/"},
        "image": "registry.example/files:1",
    }
    verifier = {"env": {"FILESYSTEM_TEST_DIR": "{state}", "WEB_URL": "http://127.0.0.1:{port:web}/"}}
    pod = pod_of(tmp_path, {**DECLARATION, "server": server, "verifier": verifier, "backing": [web]})
    kubernetes_validate.validate(pod, "1.37.0", strict=True)
    spec = pod["spec"]
    inits = {c["name"]: c for c in spec["initContainers"]}
    assert list(inits) == ["state", "backing-web", "mcp-bridge", "mcp-files"]
    sidecar = inits["backing-web"]
    assert sidecar["restartPolicy"] == "Always" and sidecar["image"] == "registry.example/web:1"
    assert sidecar["startupProbe"]["httpGet"] == {"path": "/healthz", "port": 8081}
    assert sidecar["command"] == ["web-server", "--port", "$(MCPFLEET_PORT_WEB)", "--data", "/state/web"]
    assert sidecar["env"] == [
        {"name": "MCPFLEET_PORT_WEB", "value": "8081"},
        {"name": "WEB_PORT", "value": "$(MCPFLEET_PORT_WEB)"},
    ]
    server_env = {e["name"]: e["value"] for e in inits["mcp-files"]["env"]}
    assert (
        server_env["MCPFLEET_PORT_WEB"] == "8081" and server_env["WEB_URL"] == "http://127.0.0.1:$(MCPFLEET_PORT_WEB)/"
    )
    [runner] = spec["containers"]
    assert {"name": "MCPFLEET_PORT_WEB", "value": "8081"} in runner["env"]
    ports = [p["containerPort"] for c in [*spec["initContainers"], runner] for p in c.get("ports") or []]
    assert sorted(ports) == [8081, OperatorSettings().metrics_port]  # the server listens on none (the FIFOs)


def test_a_declared_dollar_reaches_the_server_as_written_and_only_port_references_expand(tmp_path: Path) -> None:
    """The kubelet expands ``$(VAR)`` in a container's command, args and env: a declaration's own ``$`` is doubled
    (``$$`` is the kubelet's literal ``$``), so ``$(HOME)`` or ``$$`` in an argument reaches the server as written,
    while ``{port:web}`` expands to the port."""
    from kubelet import expand

    web = {"name": "web", "image": "registry.example/web:1", "command": ["web", "--x", "$(HOME)"], "port": 8081,
           "env": {"LITERAL": "a$$b $(MCPFLEET_PORT_WEB) {port:web}"}, "readiness": {"tcp": True}}  # fmt: skip
    server = {
        "command": "mcp-$(X)",
        "args": ["--pattern", "$(HOME)/*.txt", "cost: $5", "{port:web}", "$({port:web})"],
        "env": {"PORT_TEXT": "$(MCPFLEET_PORT_WEB)={port:web}"},
        "image": "registry.example/files:1",
    }
    pod = pod_of(tmp_path, {**DECLARATION, "server": server, "backing": [web]})
    kubernetes_validate.validate(pod, "1.37.0", strict=True)
    inits = {c["name"]: c for c in pod["spec"]["initContainers"]}

    def as_started(container: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        env: dict[str, str] = {"HOME": "/home/x", "X": "y"}
        for e in container.get("env") or []:
            env[e["name"]] = expand(e["value"], env)
        return [expand(a, env) for a in container.get("command", []) + container.get("args", [])], env

    argv, env = as_started(inits["mcp-files"])
    assert argv[4:] == ["mcp-$(X)", "--pattern", "$(HOME)/*.txt", "cost: $5", "8081", "$(8081)"]
    assert env["PORT_TEXT"] == "$(MCPFLEET_PORT_WEB)=8081"
    argv, env = as_started(inits["backing-web"])
    assert argv == ["web", "--x", "$(HOME)"] and env["LITERAL"] == "a$$b $(MCPFLEET_PORT_WEB) 8081"


def test_a_backing_port_that_is_the_runners_is_refused_naming_the_key(tmp_path: Path) -> None:
    taken = OperatorSettings().metrics_port
    web = {"name": "web", "image": "registry.example/web:1", "port": taken, "readiness": {"tcp": True}}
    with pytest.raises(ValueError, match=rf"service.yaml: backing\[web\].port {taken} is also the runner's metrics"):
        pod_of(tmp_path, {**DECLARATION, "backing": [web]})


def test_bundled_services_and_url_servers_keep_their_transport(tmp_path: Path) -> None:
    """The bundled filesystem (its image has the gateway) stays behind supergateway over loopback HTTP; a declared
    ``url`` server is reached at its url, so the runner is told of no sidecar endpoint."""
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "bundled"},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}],
            "tasks": {"path": str(REPO / "tasks"), "include": ["filesystem/standard/team_project/*"]},
            "output": {"uri": "s3://bucket/runs"},
        },
    }
    run = parse_evalrun(doc)
    bundled = trial_pod(run, plan(run, REPO)[0], OperatorSettings())
    [sidecar] = [c for c in bundled["spec"]["initContainers"] if c["name"] == "mcp-filesystem"]
    assert sidecar["command"] == [GATEWAY] and MOUNT not in str(bundled)
    assert bundled["spec"]["containers"][0]["args"][:2] == ["--mcp-url", "http://127.0.0.1:$(MCP_PORT)/mcp"]
    url = {**DECLARATION, "server": {"url": "http://mcp.example:9000/mcp", "image": "registry.example/files:1"}}
    remote = pod_of(tmp_path, url)
    kubernetes_validate.validate(remote, "1.37.0", strict=True)
    args = remote["spec"]["containers"][0]["args"]
    assert "--mcp-url" not in args and "--mcp-fifo" not in args
    assert [c["name"] for c in remote["spec"]["initContainers"]] == ["state"]
    assert all(v["name"] != "bridge" for v in remote["spec"]["volumes"])


def test_the_helper_is_a_static_binary() -> None:
    """No ELF interpreter (PT_INTERP): it runs in an image without a libc or a shell (distroless, scratch)."""
    data = BUILT.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2  # 64-bit
    phoff, phentsize, phnum = struct.unpack_from("<Q", data, 0x20)[0], *struct.unpack_from("<HH", data, 0x36)
    types = [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    assert 3 not in types, "mcpfleet-fifo-exec has an ELF interpreter: it is not static"


def install(folder: Path) -> None:
    subprocess.run([str(BUILT), "--install", str(folder)], check=True, timeout=10)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in folder.iterdir()} == {
        HELPER: "0o555",
        "in": "0o600",
        "out": "0o600",
    }


def serve(folder: Path, *argv: str) -> subprocess.Popen[bytes]:
    """The server's sidecar: the helper installed in ``folder`` running ``argv`` on its FIFOs."""
    return subprocess.Popen(
        [str(folder / HELPER), str(folder / "in"), str(folder / "out"), "--", *argv], stderr=subprocess.PIPE
    )


async def test_the_runner_talks_mcp_over_the_fifos_and_the_server_ends_with_its_stdin(tmp_path: Path) -> None:
    folder = tmp_path / "bridge"
    folder.mkdir()
    install(folder)
    (tmp_path / "state").mkdir()
    server = serve(folder, str(FILESYSTEM_SERVER), str(tmp_path / "state"))
    try:
        async with connect_fifo(folder, "mcp-files", open_timeout=20) as session:
            await session.call_tool("write_file", {"path": str(tmp_path / "state" / "a.txt"), "content": "hi"})
            tools = {t.name for t in (await session.list_tools()).tools}
        assert "write_file" in tools and (tmp_path / "state" / "a.txt").read_text() == "hi"
        assert await asyncio.to_thread(server.wait, 10) == 0  # its stdin closed: the MCP stdio shutdown
    finally:
        server.kill()
        server.wait()


async def test_a_command_the_image_lacks_ends_the_connection_at_once_naming_the_container(tmp_path: Path) -> None:
    install(tmp_path)
    server = serve(tmp_path, "mcp-server-not-in-image")
    start = time.monotonic()
    with pytest.raises(FifoServerGone) as caught:
        async with connect_fifo(tmp_path, "mcp-files", open_timeout=20):
            pass
    assert time.monotonic() - start < 10
    assert "container mcp-files closed its stdout" in str(caught.value)
    assert "cannot run 'mcp-server-not-in-image': No such file or directory" in str(caught.value)
    assert await asyncio.to_thread(server.wait, 10) == 127


async def test_a_server_that_never_opens_its_fifos_times_out_naming_the_container(tmp_path: Path) -> None:
    install(tmp_path)
    start = time.monotonic()
    with pytest.raises(FifoServerGone, match="container mcp-files did not open its stdin .* within 0.5 s"):
        async with connect_fifo(tmp_path, "mcp-files", open_timeout=0.5):
            pass
    assert time.monotonic() - start < 5
