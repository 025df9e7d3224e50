"""Issue 48 §3: the browser's transports that the host resolver rules do not govern. A hostile agent runs script in
a page (browser_evaluate); every other loopback route was already closed (test_playwright: typed, linked and
fetched URLs), but WebRTC sent STUN over UDP to a loopback port. Each transport here aims at a UDP and a TCP
listener on loopback; none may reach either."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.runner.environment.mcp_client import connect_stdio, result_text
from mcpfleet.runner.services import get_service, playwright
from mcpfleet.runner.spec.task import Task


class Listeners:
    """A UDP socket and a TCP listener on 127.0.0.1 that record whatever reaches them."""

    def __init__(self) -> None:
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(16)
        self.tcp.settimeout(0.2)
        self.datagrams: list[bytes] = []
        self.connections = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._read_udp, self._accept_tcp)]
        for t in self._threads:
            t.start()

    @property
    def udp_port(self) -> int:
        return int(self.udp.getsockname()[1])

    @property
    def tcp_port(self) -> int:
        return int(self.tcp.getsockname()[1])

    def _read_udp(self) -> None:
        while not self._stop.is_set():
            try:
                self.datagrams.append(self.udp.recv(65536))
            except TimeoutError:
                continue
            except OSError:
                return

    def _accept_tcp(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.tcp.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        self.udp.close()
        self.tcp.close()


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    ls = Listeners()
    yield ls
    ls.close()


def _task(tmp_path: Path) -> Task:
    path = tmp_path / "pack" / "playwright" / "standard" / "probe" / "probe"
    path.mkdir(parents=True, exist_ok=True)
    (path / "meta.json").write_text(json.dumps({"task_id": "probe", "mcpfleet": {"sites": ["shop"]}}))
    return Task("playwright", "standard", "probe", "probe", path, path.parent.parent / "states" / "probe")


def _probes(udp: int, tcp: int) -> dict[str, str]:
    """Page scripts, each returning what it saw; the listeners are the judges of what got through."""
    stun = f"stun:127.0.0.1:{udp}"
    return {
        # ICE gathering sends a STUN binding request to each server (and host candidates reveal addresses)
        "webrtc": (
            "async () => { const pc = new RTCPeerConnection({iceServers: [{urls: ['"
            + stun
            + f"', 'turn:127.0.0.1:{udp}?transport=udp', 'turn:127.0.0.1:{tcp}?transport=tcp'],"
            " username: 'u', credential: 'p'}]});"
            " const cands = []; pc.onicecandidate = e => { if (e.candidate) cands.push(e.candidate.candidate); };"
            " pc.createDataChannel('x'); await pc.setLocalDescription(await pc.createOffer());"
            " await new Promise(r => setTimeout(r, 4000)); pc.close(); return 'candidates: ' + cands.length; }"
        ),
        # WebTransport is HTTP/3: QUIC over UDP, straight to an IP literal
        "webtransport": (
            "async () => { if (typeof WebTransport === 'undefined') return 'no WebTransport';"
            f" try {{ const t = new WebTransport('https://127.0.0.1:{udp}/x');"
            " await Promise.race([t.ready, new Promise((_, j) => setTimeout(() => j('timeout'), 3000))]);"
            " return 'connected'; } catch (e) { return 'refused: ' + e; } }"
        ),
        "websocket": (
            "async () => { const out = [];"
            " for (const h of ['127.0.0.1', 'localhost', '[::ffff:127.0.0.1]', '2130706433']) {"
            f" out.push(await new Promise(r => {{ try {{ const w = new WebSocket('ws://' + h + ':{tcp}/');"
            " w.onopen = () => r(h + ' open'); w.onerror = () => r(h + ' error');"
            " setTimeout(() => r(h + ' timeout'), 2000); } catch (e) { r(h + ' ' + e); } })); }"
            " return out.join('; '); }"
        ),
        "beacon_and_friends": (
            f"async () => {{ const u = 'http://127.0.0.1:{tcp}/';"
            " try { navigator.sendBeacon(u, 'x'); } catch (e) {}"
            " try { new EventSource(u); } catch (e) {}"
            " const i = new Image(); i.src = u + 'i.png';"
            " const f = document.createElement('iframe'); f.src = u + 'f'; document.body.append(f);"
            f" try {{ await fetch('http://0x7f000001:{tcp}/', {{mode: 'no-cors'}}); }} catch (e) {{}}"
            " await new Promise(r => setTimeout(r, 2000)); return 'sent'; }"
        ),
    }


def test_no_browser_transport_reaches_a_loopback_port(tmp_path: Path, listeners: Listeners) -> None:
    """WebRTC (STUN and TURN over UDP), WebTransport (QUIC), WebSocket to IP literals and loopback names, and
    beacons, event sources, images, frames and fetches to raw and encoded IPs: nothing reaches the listeners,
    while the trial's own site keeps working."""
    service = get_service("playwright")
    state = tmp_path / "state"
    probes = _probes(listeners.udp_port, listeners.tcp_port)

    async def scenario() -> dict[str, tuple[bool, str]]:
        seen: dict[str, tuple[bool, str]] = {}
        with open(tmp_path / "server.log", "w+b") as log:
            async with service.environment(_task(tmp_path), state, None) as env:
                async with connect_stdio(env.server, log, cwd=state) as session:

                    async def call(name: str, args: dict[str, Any]) -> tuple[bool, str]:
                        r = await session.call_tool(name, args)
                        return bool(r.is_error), result_text(r)

                    seen["shop"] = await call("browser_navigate", {"url": "http://shop.test/"})
                    for name, script in probes.items():
                        seen[name] = await call("browser_evaluate", {"function": script})
                    seen["shop again"] = await call("browser_navigate", {"url": "http://shop.test/"})
                assert env.quiesce is not None
                await env.quiesce()
        return seen

    seen = asyncio.run(scenario())
    time.sleep(0.5)  # a datagram in flight
    assert "Larkspur Goods" in seen["shop"][1] and "Larkspur Goods" in seen["shop again"][1]
    for name in probes:  # each script ran to its end (what it saw is in its result; the listeners judge)
        failed, text = seen[name]
        assert not failed and text.startswith("### Result"), (name, text)
    result = seen["websocket"][1].split("\n")[1]  # the line after "### Result"
    assert result.count("error") == 4 and " open" not in result, result
    assert listeners.datagrams == [], (listeners.datagrams[:3], seen)
    assert listeners.connections == 0, seen
    config = json.loads((state / ".browser" / "config.json").read_text())
    args = config["browser"]["launchOptions"]["args"]
    assert any(a.startswith("--force-webrtc-ip-handling-policy=") for a in args), args
    assert playwright.resolver_rules({}).endswith("MAP * ~NOTFOUND")
