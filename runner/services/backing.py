"""A declared service's backing services (``backing:`` in service.yaml): started fresh per trial, before its MCP
server, stopped after its verifier.

Locally each is a process of its own session under the reaper (it, and whatever it starts, dies with the trial,
the run being SIGKILLed included), ready when its ``readiness`` holds on 127.0.0.1; in a pod, a native sidecar of
the trial pod from its ``image``, with a startup probe. ``{port:NAME}`` is its port: the declared one, or a free one
chosen per trial (locally; in a pod the declared one, which pods need).

In a pod each port travels as an environment variable (``port_env``) that the kubelet expands (``$(VAR)``) in the
sidecars' command, args and env, and that the runner reads for ``verifier.env``: nothing in the pod repeats a port
number in two places (as the bundled browser's sites do, playwright.pod_sidecars), and the runner starts no backing
service of its own there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.environment.mcp_client import server_env
from mcpfleet.runner.environment.verifier import reaped_command
from mcpfleet.runner.services.base import LOOPBACK, PodContext

if TYPE_CHECKING:
    from mcpfleet.runner.spec.service_decl import Backing, ServiceDeclaration

READY_TIMEOUT_S = 120.0
POLL_S = 0.05
PORT_ENV_PREFIX = "MCPFLEET_PORT_"


class BackingError(RuntimeError):
    """A backing service that did not start or become ready: the trial's infrastructure error."""


def port_env(name: str) -> str:
    """The variable holding backing service ``name``'s port in a trial pod's containers (a DNS label: its '-' as
    '_')."""
    return PORT_ENV_PREFIX + name.upper().replace("-", "_")


def pod_port_refs(declaration: ServiceDeclaration) -> dict[str, str]:
    """``{port:NAME}`` in a pod's sidecars: a reference the kubelet expands from the container's environment."""
    return {b.name: f"$({port_env(b.name)})" for b in declaration.backing}


def pod_port_env(declaration: ServiceDeclaration) -> list[dict[str, Any]]:
    """The port variables every container of the pod that names a backing port gets (first in its ``env``: a later
    value may refer to them)."""
    return [{"name": port_env(b.name), "value": str(b.port)} for b in declaration.backing if b.port is not None]


def pod_ports(declaration: ServiceDeclaration) -> dict[str, int]:
    """The runner's ``{port:NAME}`` in a trial pod: its port variable as the pod gave it, else the declared port."""
    out = {}
    for b in declaration.backing:
        given = os.environ.get(port_env(b.name), "")
        if given.isdigit():
            out[b.name] = int(given)
        elif b.port is not None:
            out[b.name] = b.port
        else:
            raise BackingError(f"backing service '{b.name}' has no port in this pod ({port_env(b.name)} unset)")
    return out


def pod_value(text: str, state_mount: str, refs: Mapping[str, str]) -> str:
    """A declared value as a trial pod's container gets it: ``{state}`` and ``{port:NAME}`` substituted, and every
    ``$`` of the declaration's own text doubled, since the kubelet expands ``$(VAR)`` in a container's command, args
    and env and reduces ``$$`` to ``$``: each argument reaches the server as written (``--pattern '$(HOME)'`` too),
    and only mcpfleet's own port references are expanded."""
    from mcpfleet.runner.spec.service_decl import substitute

    return substitute(text.replace("$", "$$"), state_mount, refs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


async def _ready(b: Backing, port: int) -> bool:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(LOOPBACK, port), 2.0)
    except (TimeoutError, OSError):
        return False
    try:
        if b.readiness.tcp:
            return True
        writer.write(f"GET {b.readiness.http_get} HTTP/1.0\r\nHost: {LOOPBACK}:{port}\r\n\r\n".encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 5.0)
        parts = line.split()
        return len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) < 500
    except (TimeoutError, OSError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _tail(path: Path, size: int = 600) -> str:
    try:
        data = path.read_bytes()[-size:]
    except OSError:
        return ""
    return data.decode(errors="replace").strip().replace("\n", " | ")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), 3.0)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


@asynccontextmanager
async def started(declaration: ServiceDeclaration, origin: Path, state_dir: Path) -> AsyncIterator[dict[str, int]]:
    """Start the declaration's backing services in order, each ready before the next; yields {name: port}.
    ``origin``: its service.yaml, named in errors."""
    from mcpfleet.runner.spec.service_decl import substitute

    backing = declaration.backing
    if not backing:
        yield {}
        return
    ports = {b.name: b.port or free_port() for b in backing}
    logs = state_dir.parent / "backing"
    logs.mkdir(parents=True, exist_ok=True)
    procs: list[asyncio.subprocess.Process] = []
    try:
        for b in backing:
            if b.command is None:
                raise BackingError(f"{origin}: backing[{b.name}] has only an image; locally it needs a command as well")
            argv = [substitute(a, state_dir, ports) for a in b.command]
            env = server_env({k: substitute(v, state_dir, ports) for k, v in b.env.items()})
            log = logs / f"{b.name}.log"
            with open(log, "wb") as out:
                try:
                    proc = await asyncio.create_subprocess_exec(
                        *reaped_command(argv),
                        cwd=str(state_dir),
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=out,
                        stderr=out,
                        start_new_session=True,
                        env=env,
                    )
                except OSError as exc:
                    raise BackingError(f"backing service '{b.name}' could not start: {exc}") from None
            procs.append(proc)
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not await _ready(b, ports[b.name]):
                if proc.returncode is not None:
                    raise BackingError(
                        f"backing service '{b.name}' exited ({proc.returncode}) before it was ready: {_tail(log)}"
                    )
                if time.monotonic() > deadline:
                    raise BackingError(
                        f"backing service '{b.name}' not ready after {READY_TIMEOUT_S:g} s: {_tail(log)}"
                    )
                await asyncio.sleep(POLL_S)
        yield ports
    finally:
        for proc in reversed(procs):
            await _stop(proc)


def _port_name(name: str, index: int) -> str:
    """The containerPort's name: an IANA service name (at most 15 characters, no '--', no '-' at either end),
    unique in the pod (a truncated name could repeat another's, so the index is part of it)."""
    return re.sub("-+", "-", f"b{index}-{name}")[:15].rstrip("-")


def pod_backing_sidecars(declaration: ServiceDeclaration, origin: Path, pod: PodContext) -> list[dict[str, Any]]:
    """The backing services as native sidecars of the trial pod, in start order. ValueError naming ``origin``
    (its service.yaml) and the key for one that has no image or no port (a pod needs both), or whose port another
    container of the pod listens on (they share one network)."""

    refs = pod_port_refs(declaration)
    port_vars = pod_port_env(declaration)
    taken = dict(pod.taken_ports)
    out: list[dict[str, Any]] = []
    for b in declaration.backing:
        missing = [k for k, v in (("image", b.image), ("port", b.port)) if v is None]
        if missing or b.image is None or b.port is None:
            raise ValueError(
                f"{origin}: backing[{b.name}] needs {' and '.join(missing)} in a trial pod (a sidecar's image, and the "
                "port it listens on, which the pod's containers share)"
            )
        if b.port in taken:
            raise ValueError(
                f"{origin}: backing[{b.name}].port {b.port} is also {taken[b.port]}'s in a trial pod, whose containers "
                "share one network; give it another port"
            )
        taken[b.port] = f"backing[{b.name}]"
        # A user's image holds nothing of mcpfleet's, so the kubelet's own probes (to the pod IP: such an image
        # listens on every address; the chart's ingress policy admits none of its ports from outside the pod).
        check: dict[str, Any] = (
            {"tcpSocket": {"port": b.port}}
            if b.readiness.tcp
            else {"httpGet": {"path": b.readiness.http_get, "port": b.port}}
        )
        own = [{"name": k, "value": pod_value(v, pod.state_mount, refs)} for k, v in b.env.items()]
        container: dict[str, Any] = {
            "name": f"backing-{b.name}",
            "image": b.image,
            "restartPolicy": "Always",
            "env": [*port_vars, *own],
            "ports": [{"name": _port_name(b.name, len(out)), "containerPort": b.port, "protocol": "TCP"}],
            "startupProbe": {**check, "periodSeconds": 1, "failureThreshold": 120},
            "volumeMounts": [{"name": "state", "mountPath": pod.state_mount}, {"name": "tmp", "mountPath": "/tmp"}],
            "resources": pod.resources,
            "securityContext": pod.security,
        }
        if b.command:
            container["command"] = [pod_value(a, pod.state_mount, refs) for a in b.command]
        out.append(container)
    return out
