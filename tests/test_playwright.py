"""The Playwright service with the real pinned @playwright/mcp and Debian's Chromium: a trial's sites on their own
ports behind stable origins, every other origin refused, no browser download, the bundled task validated end to
end (oracle passes, no-op and mutants fail)."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.runner.mcp_client import connect_stdio, result_text
from mcpfleet.runner.services import get_service, playwright
from mcpfleet.runner.taskcheck import validate
from mcpfleet.runner.tasks import Task, discover

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"


class Recorder(http.server.ThreadingHTTPServer):
    """A loopback HTTP server that counts every request it gets (it must get none)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                recorder.paths.append(self.path)
                body = b"<html><body><h1>Somebody else's server</h1></body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def site_task(tmp_path: Path, sites: list[str]) -> Task:
    """A task folder that names ``sites`` in its meta.json (nothing else is read by the service)."""
    path = tmp_path / "pack" / "playwright" / "standard" / "probe" / "probe"
    path.mkdir(parents=True, exist_ok=True)
    (path / "meta.json").write_text(json.dumps({"task_id": "probe", "mcpfleet": {"sites": sites}}))
    return Task("playwright", "standard", "probe", "probe", path, path.parent.parent / "states" / "probe")


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_sites_behind_stable_origins_other_origins_refused_no_download(
    tmp_path: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One trial environment with shop and admin: the browser reaches both by name, never the loopback server
    next door (typed, linked from the page or fetched by the page's script), never tries to download a browser;
    the verifier's data folder holds the trial's store.db and the sites are stopped before it runs."""
    monkeypatch.setattr(playwright, "DOWNLOAD_GUARD", f"http://127.0.0.1:{recorder.port}")
    service = get_service("playwright")
    state = tmp_path / "state"
    other = f"http://127.0.0.1:{recorder.port}/"

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        with open(tmp_path / "server.log", "w+b") as log:
            async with service.environment(site_task(tmp_path, ["shop", "admin"]), state, None) as env:
                seen["env"] = env
                async with connect_stdio(env.server, log, cwd=state) as session:
                    seen["tools"] = {t.name for t in (await session.list_tools()).tools}

                    async def call(name: str, args: dict[str, Any]) -> tuple[bool, str]:
                        r = await session.call_tool(name, args)
                        return bool(r.is_error), result_text(r)

                    seen["shop"] = await call("browser_navigate", {"url": "http://shop.test/"})
                    seen["admin"] = await call("browser_navigate", {"url": "http://admin.test/login"})
                    for url in (other, f"http://localhost:{recorder.port}/", "http://example.com/"):
                        seen[url] = await call("browser_navigate", {"url": url})
                    await call("browser_navigate", {"url": "http://shop.test/"})
                    link = f"() => {{ const a = document.createElement('a'); a.href = '{other}'; "
                    link += "a.textContent = 'Elsewhere'; document.querySelector('main').prepend(a); }"
                    await call("browser_evaluate", {"function": link})
                    _, snap = await call("browser_snapshot", {})
                    from mcpfleet.runner.snapshot_refs import find_ref, snapshot_of

                    target = find_ref(snapshot_of(snap) or "", {"role": "link", "name": "Elsewhere"})
                    seen["click"] = await call("browser_click", {"target": target})
                    fetch = f"async () => {{ try {{ await fetch('{other}'); return 'fetched'; }} "
                    fetch += "catch (e) { return 'refused: ' + e; } }"
                    seen["fetch"] = await call("browser_evaluate", {"function": fetch})
                    seen["ports"] = _site_ports(state)
                assert env.quiesce is not None
                await env.quiesce()
                seen["stopped"] = all(_refused(p) for p in seen["ports"])
        return seen

    seen = asyncio.run(scenario())
    ok, text = seen["shop"]
    assert not ok and "Page Title: Home · Larkspur Goods" in text
    ok, text = seen["admin"]
    assert not ok and "Page URL: http://admin.test/login" in text and "Larkspur Goods Admin" in text
    for url in (other, f"http://localhost:{recorder.port}/", "http://example.com/"):
        failed, text = seen[url]
        assert failed and "ERR_NAME_NOT_RESOLVED" in text, (url, text)
    _, click = seen["click"]
    assert "Somebody else" not in click and f"Page URL: {other}" not in click
    _, fetched = seen["fetch"]
    assert "refused: TypeError: Failed to fetch" in fetched
    assert recorder.paths == []  # the loopback server next door never saw a request, nor a download attempt
    assert "browser_install" not in seen["tools"]
    assert not (state / ".browser" / "no-downloaded-browsers").exists()
    env = seen["env"]
    assert env.verifier_env[playwright.DATA_ENV] == str(state) and (state / "store.db").is_file()
    assert len(seen["ports"]) == 2 and seen["stopped"]
    assert "--executable-path" in env.server.args and playwright.CHROMIUM in env.server.args
    assert env.server.env["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] == "1"


def _site_ports(state: Path) -> list[int]:
    """The sites' real ports, from the browser's host mapping (MAP shop.test 127.0.0.1:PORT, ...)."""
    config = json.loads((state / ".browser" / "config.json").read_text())
    rules = config["browser"]["launchOptions"]["args"][0]
    return [int(r.rsplit(":", 1)[1]) for r in rules.split(", ") if "127.0.0.1:" in r]


def test_task_without_sites_is_refused_by_the_checker(tmp_path: Path) -> None:
    service = get_service("playwright")
    problems = service.check_state(site_task(tmp_path, []))
    assert problems and "mcpfleet" in problems[0]
    assert "unknown site(s) blog" in service.check_state(site_task(tmp_path, ["shop", "blog"]))[0]


def test_bundled_task_validates_oracle_passes_noop_and_mutants_fail() -> None:
    tasks = [t for t in discover(TASKS) if t.id == "playwright/standard/shop_account/wishlist_add_two"]
    assert len(tasks) == 1
    (report,) = asyncio.run(validate(tasks, TASKS, concurrency=2))
    assert report.problems == []
    assert report.oracle_passed and report.noop_failed
    assert sorted(report.mutants_rejected) == ["only_first_product", "third_product_too"]
