"""mcpfleet-gateway (servers/gateway: supergateway with listen-host.cjs preloaded), a trial pod's MCP sidecar, stops
promptly on SIGTERM in every state, and leaves no child behind: idle, with a live session, and with a request in
flight to a stdio server that ignores SIGTERM (supergateway alone waited 5 s there, and ignored every further
SIGTERM while its cleanup ran: a cleanup that never settled left it running for ever). A second SIGTERM stops it
at once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import REPO
from kubelet import BIN_PATH, free_port
from proctree import processes_naming

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
# A stdio "server" that ignores SIGTERM and never answers: a request to it stays in flight.
DEAF = "python3 -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)' {marker}"


class Gateway:
    def __init__(self, tmp_path: Path, stdio: str, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = ["--stdio", stdio, "--outputTransport", "streamableHttp", "--stateful", "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [
                str(REPO / "servers" / "gateway" / "mcpfleet-gateway"),
                "--host",
                "127.0.0.1",
                *args,
                "--healthEndpoint",
                "/healthz",
            ],
            env={"PATH": BIN_PATH, "HOME": str(tmp_path), "MARKER": str(tmp_path), **env},
            stdin=subprocess.DEVNULL,
            stdout=open(tmp_path / "gateway.log", "wb"),  # noqa: SIM115 - the child's
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, (tmp_path / "gateway.log").read_text()
            assert time.monotonic() < deadline, "the gateway did not answer /healthz in 30 s"
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)

    def stop(self) -> float:
        """SIGTERM; seconds until it exited."""
        t = time.monotonic()
        os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.wait(30)
        return time.monotonic() - t


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for pid, _ in processes_naming(str(tmp_path)):  # whatever a failed test left: never a leftover for others
        os.killpg(pid, signal.SIGKILL) if pid == os.getpgid(pid) else os.kill(pid, signal.SIGKILL)


def left(marker: Path) -> list[tuple[int, str]]:
    time.sleep(0.2)  # a killed group's last member is reaped
    return processes_naming(str(marker))


def test_an_idle_gateway_stops_at_once(marker: Path) -> None:
    gw = Gateway(marker, f"mcp-server-filesystem {marker}")
    took = gw.stop()
    print(f"\nidle gateway: SIGTERM -> exit {took:.2f} s")
    assert took < 1.0 and left(marker) == []


def test_a_gateway_with_a_live_session_stops_within_a_second_and_its_server_with_it(marker: Path) -> None:
    gw = Gateway(marker, f"mcp-server-filesystem {marker}")
    r = httpx.post(f"{gw.url}/mcp", headers=HEADERS, json=INITIALIZE, timeout=30)
    assert r.status_code == 200 and r.headers.get("mcp-session-id")
    assert any("mcp-server-filesystem" in cmd for _, cmd in processes_naming(str(marker)))
    took = gw.stop()
    print(f"\ngateway with a session: SIGTERM -> exit {took:.2f} s")
    assert took < 1.6 and left(marker) == []


def test_a_request_in_flight_to_a_server_deaf_to_sigterm_holds_it_a_second_at_most(marker: Path) -> None:
    gw = Gateway(marker, DEAF.format(marker=marker))

    def call() -> None:
        try:
            httpx.post(f"{gw.url}/mcp", headers=HEADERS, json=INITIALIZE, timeout=30)
        except httpx.HTTPError:
            pass

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    deadline = time.monotonic() + 10
    while not any("signal.SIG_IGN" in cmd for _, cmd in processes_naming(str(marker))):
        assert time.monotonic() < deadline, "the stdio server never started"
        time.sleep(0.05)
    took = gw.stop()
    print(f"\ngateway, request in flight, server ignoring SIGTERM: SIGTERM -> exit {took:.2f} s")
    assert took < 1.6, took  # supergateway alone: 5 s
    assert left(marker) == []  # its server, deaf to SIGTERM, was SIGKILLed with its process group
    caller.join(5)


def test_a_second_sigterm_stops_it_at_once(marker: Path) -> None:
    gw = Gateway(marker, DEAF.format(marker=marker), MCPFLEET_STOP_SECONDS="60")
    threading.Thread(
        target=lambda: httpx.post(f"{gw.url}/mcp", headers=HEADERS, json=INITIALIZE, timeout=30), daemon=True
    ).start()
    time.sleep(1.0)
    os.kill(gw.proc.pid, signal.SIGTERM)
    time.sleep(0.3)
    assert gw.proc.poll() is None  # its cleanup runs (MCPFLEET_STOP_SECONDS=60)
    t = time.monotonic()
    gw.stop()
    assert time.monotonic() - t < 0.5 and left(marker) == []
