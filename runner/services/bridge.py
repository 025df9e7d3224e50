"""A stdio MCP server in a trial pod with nothing asked of its image but the server (issue 46 §2): its stdin and
stdout are two FIFOs on a shared emptyDir, and the runner speaks MCP's stdio framing over them.

No port: nothing in the pod or outside it can reach the server but the runner, which opens the FIFOs (stricter
than binding loopback, issue 48 §4). An init container from the runner image puts the static helper
``mcpfleet-fifo-exec`` (servers/bridge) and the two FIFOs into the volume; the server's sidecar runs the helper
from there, which opens the FIFOs as its stdin and stdout and execs the server. Every container of a trial pod runs
as the pod's uid (operator/manifests.py), so FIFOs of mode 0600 are shared by the runner and the server only.
Pure: these build manifest fragments; the runner's end is ``mcp_client.connect_fifo``.
"""

from __future__ import annotations

from typing import Any

from mcpfleet.runner.services.base import PodContext

VOLUME = "bridge"
MOUNT = "/mcpfleet-bridge"
HELPER = "mcpfleet-fifo-exec"  # on the runner image's PATH; copied to MOUNT by the init container
SERVER_IN = f"{MOUNT}/in"  # the server's stdin: the runner writes
SERVER_OUT = f"{MOUNT}/out"  # the server's stdout: the runner reads
INIT_NAME = "mcp-bridge"


def bridge_volume(pod: PodContext) -> dict[str, Any]:
    """The emptyDir holding the helper and the FIFOs (a few hundred KB: the helper)."""
    return pod.empty_dir(VOLUME)


def bridge_mount() -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": MOUNT}


def bridge_init(pod: PodContext) -> dict[str, Any]:
    """The one-shot init container that copies the helper into the volume and makes the FIFOs (mode 0600)."""
    return {
        "name": INIT_NAME,
        "image": pod.runner_image,
        "command": [HELPER],
        "args": ["--install", MOUNT],
        "volumeMounts": [bridge_mount()],
        "resources": pod.resources,
        "securityContext": pod.security,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def bridged_sidecar(
    name: str,
    image: str,
    argv: list[str],
    pod: PodContext,
    env: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A native sidecar running ``argv`` from ``image`` with its stdin and stdout on the bridge's FIFOs. No startup
    probe: the runner's opening of the FIFOs is the rendezvous (it times out, naming this container, when the
    server never opens them). The helper passes ``argv`` to execvp as it is: no shell, so no quoting."""
    return {
        "name": name,
        "image": image,
        "restartPolicy": "Always",
        "command": [f"{MOUNT}/{HELPER}"],
        "args": [SERVER_IN, SERVER_OUT, "--", *argv],
        "env": [*(env or []), {"name": "TZ", "value": "UTC"}, {"name": "HOME", "value": "/tmp"}],
        "volumeMounts": [
            bridge_mount(),
            {"name": "state", "mountPath": pod.state_mount},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "resources": pod.resources,
        "securityContext": pod.security,
    }


def bridge_runner_args(container: str) -> list[str]:
    """``mcpfleet trial``'s arguments for reaching the server over the bridge: the folder of the FIFOs and the
    container that serves them (named when it never answers)."""
    return ["--mcp-fifo", MOUNT, "--mcp-container", container]
