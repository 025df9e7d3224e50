"""The test kubelet's probes (tests/kubelet.py): a native sidecar's startupProbe (httpGet, tcpSocket, exec) sent as a
node sends it, to the pod IP (here a non-loopback address of this host: a server bound to 127.0.0.1 fails it), and
the addresses a port is listened on (``bound``)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from kubelet_warm import Proc


class SidecarFailed(Exception):
    """A native sidecar that exited before its startup probe passed, or whose probe failed failureThreshold times:
    its node restarts it (restartPolicy Always)."""


def _node_address() -> str | None:
    """An address of this host other than loopback: the pod IP a real kubelet sends httpGet and tcpSocket probes to
    (every pod here shares the host's network). None when the host has none (then probes go to 127.0.0.1)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # UDP: nothing is sent, the kernel only picks the outgoing address
            address = str(s.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith("127.") else address


POD_IP = _node_address() or "127.0.0.1"


def listening(port: int) -> list[str]:
    """The local addresses on which some socket listens on TCP ``port`` (from /proc/net/tcp and tcp6), sorted."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, _, hexport = local.partition(":")
            if state != "0A" or int(hexport, 16) != port or len(address) != width:  # 0A: LISTEN
                continue
            raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, width, 8))
            found.add(socket.inet_ntop(socket.AF_INET if width == 8 else socket.AF_INET6, raw))
    return sorted(found)


async def wait_startup(
    session: aiohttp.ClientSession,
    note: Callable[[str], None],
    c: dict[str, Any],
    ports: dict[str, str],
    proc: Proc,
    env: dict[str, str],
    poddir: Path,
) -> None:
    """Until the container's startupProbe passes (at once without one); SidecarFailed when it exits first or
    its probe fails failureThreshold times (periodSeconds apart, here polled faster)."""
    probe = c.get("startupProbe") or {}
    http = probe.get("httpGet")
    tcp = probe.get("tcpSocket")
    command = (probe.get("exec") or {}).get("command")
    if command:  # ready once the command exits 0, run like `kubectl exec`: the container's environment
        limit = probe.get("failureThreshold", 3) * probe.get("periodSeconds", 10)
        exe = shutil.which(command[0], path=env["PATH"]) or command[0]
        start = time.monotonic()
        while time.monotonic() - start < limit:
            if proc.returncode is not None:
                raise SidecarFailed(f"exited {proc.returncode} before its startup probe passed")
            check = await asyncio.create_subprocess_exec(
                exe,
                *command[1:],
                env=env,
                cwd=str(poddir),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            if await check.wait() == 0:
                note(f"probe exec {command[0]}: exit 0")
                return
            await asyncio.sleep(0.05)
        raise SidecarFailed(f"startup probe failed: {command} never succeeded")
    if tcp:  # ready once the port accepts a connection
        limit = probe.get("failureThreshold", 3) * probe.get("periodSeconds", 10)
        host_port = int(ports.get(str(tcp["port"]), tcp["port"]))
        start = time.monotonic()
        while time.monotonic() - start < limit:
            if proc.returncode is not None:
                raise SidecarFailed(f"exited {proc.returncode} before its startup probe passed")
            try:
                _, writer = await asyncio.open_connection(POD_IP, host_port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            note(f"probe tcpSocket {tcp['port']}: connected")
            return
        raise SidecarFailed(f"startup probe failed: {POD_IP}:{host_port} never accepted a connection")
    if not http:
        return
    port = http["port"]
    if not str(port).isdigit():
        port = next(p["containerPort"] for p in c.get("ports") or [] if p.get("name") == port)
    url = f"http://{POD_IP}:{ports.get(str(port), port)}{http.get('path', '/')}"  # as a node would: the pod IP
    limit = probe.get("failureThreshold", 3) * probe.get("periodSeconds", 10)
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if proc.returncode is not None:
            raise SidecarFailed(f"exited {proc.returncode} before its startup probe passed")
        with contextlib.suppress(aiohttp.ClientError, OSError):
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=1)) as r:
                if r.status < 400:
                    note(f"probe httpGet {http.get('path', '/')} on {port}: {r.status}")
                    return
        await asyncio.sleep(0.05)
    raise SidecarFailed(f"startup probe failed: {url} never answered below 400")
