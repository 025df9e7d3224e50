"""The Playwright service with the real pinned @playwright/mcp and Debian's Chromium: a trial's sites on their own
ports behind stable origins, every other origin refused, no browser download, the bundled task validated end to
end (oracle passes, no-op and mutants fail)."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubelet import listening
from proctree import processes_naming

from mcpfleet.runner.environment.mcp_client import connect_stdio, result_text
from mcpfleet.runner.launch.taskcheck import validate
from mcpfleet.runner.services import get_service, playwright
from mcpfleet.runner.services.base import PROBE
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.spec.task import Task
from mcpfleet.runner.tasks.discovery import discover
from mcpfleet.runner.trial.warm import WarmServer

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"
MCPFLEET = Path(sys.executable).with_name("mcpfleet")


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
                    from mcpfleet.runner.agent.snapshot_refs import RefError, find_ref, snapshot_of

                    link = f"() => {{ const a = document.createElement('a'); a.href = '{other}'; "
                    link += "a.textContent = 'Elsewhere'; document.querySelector('main').prepend(a); return 'added'; }"
                    target = ""
                    for _ in range(3):  # under load the page may still be settling from the failed navigations
                        await call("browser_navigate", {"url": "http://shop.test/"})
                        await call("browser_evaluate", {"function": link})
                        _, snap = await call("browser_snapshot", {})
                        try:
                            target = find_ref(snapshot_of(snap) or "", {"role": "link", "name": "Elsewhere"})
                            break
                        except RefError:
                            continue
                    assert target, snap
                    seen["click"] = await call("browser_click", {"target": target})
                    fetch = f"async () => {{ try {{ await fetch('{other}'); return 'fetched'; }} "
                    fetch += "catch (e) { return 'refused: ' + e; } }"
                    seen["fetch"] = await call("browser_evaluate", {"function": fetch})
                    size = "() => [window.innerWidth, window.innerHeight].join('x')"
                    seen["viewport"] = await call("browser_evaluate", {"function": size})
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
    _, click = seen["click"]  # the link is followed to Chromium's error page, not to the server next door
    assert "Page URL: chrome-error://chromewebdata/" in click and "Somebody else" not in click
    _, fetched = seen["fetch"]
    assert "refused: TypeError: Failed to fetch" in fetched
    assert '"1280x720"' in seen["viewport"][1]  # MCPMark's viewport (its --viewport-size 1280,720)
    assert recorder.paths == []  # the loopback server next door never saw a request, nor a download attempt
    assert "browser_install" not in seen["tools"]
    assert not (state / ".browser" / "no-downloaded-browsers").exists()
    env = seen["env"]
    assert env.verifier_env[playwright.DATA_ENV] == str(state) and (state / "store.db").is_file()
    assert len(seen["ports"]) == 2 and seen["stopped"]
    launcher = Path(env.server.args[env.server.args.index("--executable-path") + 1])
    assert launcher.parent == state / ".browser" and f"\n{playwright.CHROMIUM} " in launcher.read_text()
    assert env.server.env["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] == "1"


def _site_ports(state: Path) -> list[int]:
    """The sites' real ports, from the browser's host mapping (MAP shop.test 127.0.0.1:PORT, ...)."""
    config = json.loads((state / ".browser" / "config.json").read_text())
    rules = config["browser"]["launchOptions"]["args"][0]
    return [int(r.rsplit(":", 1)[1]) for r in rules.split(", ") if "127.0.0.1:" in r]


def test_malformed_site_lists_are_refused_and_a_foreign_task_runs_unconfined(tmp_path: Path, marker: str) -> None:
    """An empty or unknown site list is a task error; a task that declares no sites (MCPMark's own, for the
    public web) starts no site and gets a browser without host mapping."""
    service = get_service("playwright")
    problems = service.check_state(site_task(tmp_path, []))
    assert problems and "one or more bundled sites" in problems[0]
    assert "unknown site(s) blog" in service.check_state(site_task(tmp_path, ["shop", "blog"]))[0]
    foreign = site_task(tmp_path, ["shop"])
    (foreign.path / "meta.json").write_text(json.dumps({"task_id": "probe", "mcp": ["playwright"]}))
    foreign = Task(foreign.service, foreign.difficulty, foreign.category, foreign.name, foreign.path, foreign.state_dir)
    assert service.check_state(foreign) == []
    state = Path(marker) / "state"

    async def enter() -> tuple[list[str], list[tuple[int, str]]]:
        async with service.environment(foreign, state, None) as env:
            assert env.server.args[:2] == ["--config", str(state / ".browser" / "config.json")]
            config = json.loads((state / ".browser" / "config.json").read_text())
            return config["browser"]["launchOptions"]["args"], ours(marker)

    args, running = asyncio.run(enter())
    assert args == [playwright.ENABLE_FEATURES, *playwright.TRANSPORT_FLAGS] and running == []  # no host mapping


def _browsers(marker: str) -> list[int]:
    """Main Chromium processes (not their helpers) started under ``marker``."""
    return [pid for pid, cmd in ours(marker) if _browser_main(cmd)]


def _browser_main(cmd: str) -> bool:
    """A main Chromium process: not a helper (--type=), not the shell that launched it (the trial's launcher)."""
    return "chromium --" in cmd and "--type=" not in cmd and not cmd.startswith("/bin/sh ")


async def _first_view(session: Any) -> list[str]:
    """What an agent's first look at the browser shows: its tabs and the page snapshot."""
    return [
        result_text(await session.call_tool(n, a))
        for n, a in (("browser_tabs", {"action": "list"}), ("browser_snapshot", {}))
    ]


def test_a_spare_has_its_browser_up_before_its_task_and_refuses_sites_the_task_does_not_name(
    tmp_path: Path, recorder: Recorder, marker: str
) -> None:
    """A worker's spare: playwright-mcp and Chromium start before the task is known, on ports reserved for every
    bundled site (refused until claimed); claimed by a shop task, the shop serves on its reserved port, admin
    and forum stay refused, other hosts unresolved, and the agent's first view equals a cold trial's. Once
    closed, nothing of it runs."""
    service = get_service("playwright")
    shop = site_task(tmp_path / "a", ["shop"])
    assert service.spare_fits(shop) and service.spare_fits(site_task(tmp_path / "b", ["forum", "admin", "shop"]))
    foreign = site_task(tmp_path / "c", ["shop"])
    (foreign.path / "meta.json").write_text(json.dumps({"task_id": "probe", "mcp": ["playwright"]}))
    assert not service.spare_fits(foreign)  # no sites: its browser is not confined, a spare's is
    other = f"http://127.0.0.1:{recorder.port}/"

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        with open(tmp_path / "cold.log", "w+b") as log:
            async with service.environment(shop, Path(marker) / "cold" / "state", None) as cold:
                async with connect_stdio(cold.server, log, cwd=Path(marker) / "cold" / "state") as session:
                    seen["cold_view"] = await _first_view(session)
        server = WarmServer("playwright")
        try:
            await asyncio.wait_for(server.session(), 120)
            seen["browsers"], seen["boot"] = _browsers(marker), server.boot
            seen["ports"] = ports = _site_ports(server.state_dir)
            seen["refused_before"] = [_refused(p) for p in ports]
            async with server.environment(shop) as env:
                session = await server.session()
                seen["view"] = await _first_view(session)
                for url in (
                    "http://shop.test/",
                    "http://admin.test/",
                    "http://forum.test/",
                    other,
                    "http://example.com/",
                ):
                    r = await session.call_tool("browser_navigate", {"url": url})
                    seen[url] = bool(r.is_error), result_text(r)
                seen["refused_during"] = [_refused(p) for p in ports]
                seen["sites"] = [c for _, c in ours(marker) if "mcpfleet.sites." in c]
                seen["data"] = sorted(p.name for p in env.state_dir.glob("*.db"))
                await server.stop()
                assert env.quiesce is not None
                await env.quiesce()
        finally:
            await server.close()
        return seen

    seen = asyncio.run(scenario())
    assert len(seen["browsers"]) == 1, "the spare's Chromium was not running before the claim"
    assert seen["boot"].mcp_start > 0 and seen["boot"].started > 0
    assert len(set(seen["ports"])) == 3 and all(seen["refused_before"])
    assert seen["view"] == seen["cold_view"] and "Page URL: about:blank" in seen["view"][1]
    failed, text = seen["http://shop.test/"]
    assert not failed and "Page Title: Home · Larkspur Goods" in text
    for url in ("http://admin.test/", "http://forum.test/"):
        failed, text = seen[url]
        assert failed and "ERR_CONNECTION_REFUSED" in text, (url, text)
    for url in (other, "http://example.com/"):
        failed, text = seen[url]
        assert failed and "ERR_NAME_NOT_RESOLVED" in text, (url, text)
    assert recorder.paths == []
    assert seen["refused_during"].count(False) == 1  # the shop's port serves; admin's and forum's refuse
    assert len(seen["sites"]) == 1 and "mcpfleet.sites.shop" in seen["sites"][0] and "--fd" in seen["sites"][0]
    assert seen["data"] == ["store.db"]
    left = settle(marker)
    assert not left, left


def test_bundled_task_validates_oracle_passes_noop_and_mutants_fail(marker: str) -> None:
    """`mcpfleet tasks validate`'s check through the real service: 4 trials (oracle, no-op, 2 mutants), and
    no process of any of them is left once it returns."""
    tasks = [t for t in discover(TASKS) if t.id == "playwright/easy/shop_account/wishlist_add_two"]
    assert len(tasks) == 1
    (report,) = asyncio.run(validate(tasks, TASKS, concurrency=2))
    assert report.problems == []
    assert report.oracle_passed and report.noop_failed
    assert sorted(report.mutants_rejected) == ["only_first_product", "third_product_too"]
    left = settle(marker, grace=3.0)
    assert not left, left


def test_trials_claiming_a_spare_keep_their_outcomes_and_record_its_boot_apart(tmp_path: Path, marker: str) -> None:
    """The bundled task's oracle and its near-miss mutant, each through a spare booted before the trial (as a
    worker's next trial claims it): the oracle passes and the mutant is rejected, as in a cold trial; the record
    says the trial waited ~0 for its server and keeps the spare's boot (server, browser launch) apart."""
    from mcpfleet.runner.launch.taskcheck import _spec
    from mcpfleet.runner.results.store import LocalStore
    from mcpfleet.runner.spec.evalrun import AgentKind, Limits
    from mcpfleet.runner.spec.trial import Replay, TrialContext
    from mcpfleet.runner.trial.engine import run_trial

    task = next(t for t in discover(TASKS) if t.id == "playwright/easy/shop_account/wishlist_add_two")
    mutant = next(m for m in task.mutants if m.name == "third_product_too")
    store = LocalStore(tmp_path / "runs")

    async def through_spare(replay: Replay | None, label: str) -> Any:
        warm = WarmServer("playwright")
        await asyncio.wait_for(warm.session(), 120)  # booted while the worker's previous trial ran
        spec = _spec(task, TASKS, None, AgentKind.oracle, Limits(verifier_timeout_seconds=60), label)
        return await run_trial(spec, store, TrialContext(warm=warm, replay=replay))

    oracle = asyncio.run(through_spare(None, ".spare"))
    near_miss = asyncio.run(through_spare(Replay.of(task, mutant), ".spare.mutant"))
    assert oracle.passed, (oracle.error, oracle.verifier.stdout)
    assert not near_miss.passed and near_miss.error is None and near_miss.verifier.exit_code not in (0, None)
    for r in (oracle, near_miss):
        t = r.timings
        assert t.mcp_start < 0.05 and t.spare_mcp_start > 0 and t.spare_started > 0, t
    assert not settle(marker), "a spare left a process behind"


# ------------------------------------------------------------------------------------- process hygiene

HOLD = """
import asyncio, json, sys
from pathlib import Path
from mcpfleet.runner.environment.mcp_client import connect_stdio
from mcpfleet.runner.services import get_service
from mcpfleet.runner.tasks.discovery import Task

async def main(base: Path) -> None:
    path = base / "task"
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"mcpfleet": {"sites": ["shop", "forum"]}}))
    task = Task("playwright", "standard", "x", "task", path, path / "states")
    with open(base / "server.log", "w+b") as log:
        async with get_service("playwright").environment(task, base / "state", None) as env:
            async with connect_stdio(env.server, log, cwd=base / "state") as session:
                await session.call_tool("browser_navigate", {"url": "http://forum.test/"})
                print("READY", flush=True)
                await asyncio.sleep(120)

asyncio.run(main(Path(sys.argv[1])))
"""


HOLD_SPARE = """
import asyncio
from mcpfleet.runner.trial.warm import WarmServer

async def main() -> None:
    server = WarmServer("playwright")
    await server.session()
    print("READY", flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


def ours(marker: str) -> list[tuple[int, str]]:
    """The sites (--data), playwright-mcp (HOME, TMPDIR), Chromium and its helpers (environment; crashpad's
    --database) this test started."""
    return processes_naming(marker)


def settle(marker: str, grace: float = 8.0) -> list[tuple[int, str]]:
    deadline = time.monotonic() + grace
    while (left := ours(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def kill_all(marker: str) -> None:
    """A failing test must not leak browsers: SIGKILL what is left, by pid."""
    for pid, _ in ours(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A private TMPDIR that every trial folder, and so every process a trial starts, carries."""
    d = tempfile.mkdtemp(prefix="pw-")  # short: Chromium's socket lies under it (see playwright.SUN_PATH_MAX)
    monkeypatch.setenv("TMPDIR", d)
    monkeypatch.setattr(tempfile, "tempdir", d)
    yield d
    kill_all(d)
    shutil.rmtree(d, ignore_errors=True)


def _messages(exc: BaseException) -> list[str]:
    if isinstance(exc, BaseExceptionGroup):
        return [m for e in exc.exceptions for m in _messages(e)]
    return [str(exc)]


def test_a_crashing_trial_leaves_no_process(marker: str) -> None:
    """The agent side fails mid-trial (an exception with the browser up): sites, server and browser all go."""
    task = next(t for t in discover(TASKS) if t.service == "playwright")
    seen: list[int] = []

    async def crash() -> None:
        state = Path(marker) / "crash" / "state"
        with open(Path(marker) / "crash.log", "w+b") as log:
            async with get_service("playwright").environment(task, state, None) as env:
                async with connect_stdio(env.server, log, cwd=state) as session:
                    await session.call_tool("browser_navigate", {"url": "http://shop.test/"})
                    seen.extend(pid for pid, cmd in ours(marker) if "chromium" in cmd)
                    raise RuntimeError("the agent crashed")

    with pytest.raises((RuntimeError, BaseExceptionGroup)) as info:  # the MCP client wraps it in a group
        asyncio.run(crash())
    assert "the agent crashed" in _messages(info.value)
    assert seen, "the scan did not see the trial's Chromium"
    left = settle(marker)
    assert not left, left


@pytest.mark.parametrize("hold", ["trial", "spare"])
def test_sigkill_of_the_trial_process_leaves_no_process(marker: str, hold: str) -> None:
    """A worker killed outright (OOM killer, kill -9) in a trial or holding a spare never claimed: the sites exit
    by themselves (--exit-with-parent), the server sees its stdin close and takes its Chromium with it."""
    script = Path(marker) / "hold.py"
    script.write_text(HOLD if hold == "trial" else HOLD_SPARE)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(Path(marker) / "trial")],
        cwd=marker,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"READY"
        before = ours(marker)
        sites = [c for _, c in before if "mcpfleet.sites." in c]
        if hold == "trial":
            assert any("sites.shop" in c for c in sites) and any("sites.forum" in c for c in sites)
        else:
            assert sites == []  # an unclaimed spare starts no site
        assert any("playwright-mcp" in c for _, c in before) and _browsers(marker)
        proc.kill()
        proc.wait()
        left = settle(marker)
        assert not left, left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _cli_run(tmp_path: Path, marker: str, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`mcpfleet run` of the bundled browser suite with a slow scripted oracle (2 attempts, concurrency 2), as a
    process group of its own (a shell job), its trials under the private TMPDIR."""
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name},
        "spec": {
            "models": [{"name": "slow", "model": "scripted/oracle?latency=0.5"}],
            "tasks": {"path": str(TASKS), "services": ["playwright"]},
            "attempts": 2,
            "concurrency": {"total": 2},
            "output": {"uri": str(tmp_path / "runs")},
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    err = tmp_path / "stderr.txt"
    with open(err, "w") as e:
        proc = subprocess.Popen(
            [str(MCPFLEET), "run", str(path), "--no-progress"],
            stdout=subprocess.DEVNULL,
            stderr=e,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "TMPDIR": marker},
            cwd=marker,
        )
    return proc, err


def _wait_for_browsers(proc: subprocess.Popen[bytes], marker: str, err: Path, count: int = 2) -> None:
    deadline = time.monotonic() + 90
    while len([c for _, c in ours(marker) if _browser_main(c)]) < count:
        assert proc.poll() is None, err.read_text()
        assert time.monotonic() < deadline, "the run's browsers did not start within 90 s"
        time.sleep(0.2)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sigkill"])
def test_interrupted_run_leaves_no_browser_site_or_server(tmp_path: Path, marker: str, how: str) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it), `kill <pid>` (SIGTERM to the
    launcher only) or `kill -9 <pid>` while two browser trials run and a worker holds a spare never claimed
    (three browsers for two workers): the run stops and nothing of it survives."""
    proc, err = _cli_run(tmp_path, marker, how)
    try:
        _wait_for_browsers(proc, marker, err, count=3)
        assert any("mcpfleet.sites." in c for _, c in ours(marker))  # whichever sites the first tasks need
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
        code = proc.wait(timeout=30)
        assert code != 0
        assert "Traceback" not in err.read_text()
        # After a SIGKILL the workers notice their parent is gone (0.5 s polls), then end their trials.
        left = settle(marker, grace=8.0 if how != "sigkill" else 20.0)
        assert not left, left
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ------------------------------------------------------------------------------------------ pod sidecars


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(container: dict[str, Any], proc: subprocess.Popen[bytes], env: dict[str, str], deadline: float) -> None:
    """The container's startup probe, locally: its exec probe (the servers listen on 127.0.0.1 only, which a
    kubelet's httpGet, sent to the pod IP, would not reach), run in the container's environment, exits 0."""
    command = container["startupProbe"]["exec"]["command"]
    argv = [
        sys.executable if a == "python" else str(REPO / "servers" / "gateway" / a) if a == PROBE else a for a in command
    ]
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{container['name']} exited with {proc.returncode}"
        if subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=10).returncode == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"{container['name']} not ready")


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion (an unknown name stays as it is)."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def expand_env(items: list[dict[str, str]], env: dict[str, str]) -> dict[str, str]:
    """A container's env, each value expanded from the variables defined before it, as a kubelet does."""
    for e in items:
        env[e["name"]] = expand(e["value"], env)
    return env


def test_pod_sidecars_serve_a_trial_over_streamable_http(
    tmp_path: Path, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trial pod's sidecars (sites from the runner image, playwright-mcp in streamable HTTP with
    --allowed-hosts) run here as processes, as a kubelet would start them ($(VAR) expanded, the startup probes
    awaited); the oracle then plays the bundled task against them as `mcpfleet trial` in the pod does."""
    from mcpfleet.runner.environment.server import servers_bin
    from mcpfleet.runner.results.store import LocalStore
    from mcpfleet.runner.spec.evalrun import AgentKind, Limits, ModelSpec
    from mcpfleet.runner.spec.trial import TrialContext, TrialSpec
    from mcpfleet.runner.trial.engine import run_trial

    task = next(t for t in discover(TASKS) if t.id == "playwright/easy/shop_account/wishlist_add_two")
    monkeypatch.setattr(playwright, "POD_SITE_PORTS", {s: _free_port() for s in playwright.POD_SITE_PORTS})
    mcp_port = _free_port()
    state, home = Path(marker) / "state", Path(marker) / "home"
    home.mkdir()
    assert get_service("playwright").materialise(task, state) == 1
    containers = playwright.pod_sidecars(
        playwright.task_sites(task),
        runner_image="runner",
        server_image="server",
        mcp_port=mcp_port,
        state_mount=str(state),
    )
    assert [c["name"] for c in containers] == ["site-shop", "mcp-playwright"]
    assert all(c["restartPolicy"] == "Always" and "startupProbe" in c for c in containers)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        deadline = time.monotonic() + 60
        for c in containers:
            env = expand_env(c["env"], dict(os.environ))
            for name in {e["name"] for e in c["env"]}:  # the pod's /tmp is a volume of its own: here, the marker
                if env[name] == "/tmp" or env[name].startswith("/tmp/"):
                    env[name] = marker + env[name][len("/tmp") :]
            env["HOME"] = str(home) if "HOME" in env and c["name"].startswith("mcp") else env["HOME"]
            argv = [expand(a, env) for a in [*c["command"], *c["args"]]]
            argv = [
                sys.executable if a == "python" else str(servers_bin() / a) if a == "playwright-mcp" else a
                for a in argv
            ]
            proc = subprocess.Popen(
                argv, env=env, cwd=marker, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
            )
            procs.append(proc)
            _wait_ready(c, proc, env, deadline)
            for port in c["ports"]:  # the pod's loopback only
                assert listening(port["containerPort"]) == ["127.0.0.1"], (c["name"], listening(port["containerPort"]))
        spec = TrialSpec(
            run="pod",
            trial_id="oracle.pod",
            spec_hash="pod",
            model=ModelSpec(name="oracle", model="oracle"),
            task_id=task.id,
            tasks_root=str(TASKS),
            attempt=1,
            agent=AgentKind.oracle,
            limits=Limits(verifier_timeout_seconds=60),
        )
        ctx = TrialContext(mcp_url=f"http://127.0.0.1:{mcp_port}/mcp", state_dir=state)
        result = asyncio.run(run_trial(spec, LocalStore(tmp_path / "runs"), ctx))
        assert result.passed, (result.error, result.verifier.stdout)
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
    assert not settle(marker), "a sidecar left a process behind"


def test_pod_sidecars_are_valid_kubernetes(tmp_path: Path) -> None:
    """A pod with the sidecars of a shop+admin+forum task validates against Kubernetes 1.37's schema (strict)."""
    import kubernetes_validate

    task = site_task(tmp_path, ["shop", "admin", "forum"])
    sidecars = playwright.pod_sidecars(
        playwright.task_sites(task), runner_image="r:1", server_image="s:1", mcp_port=8000
    )
    assert [c["name"] for c in sidecars] == ["site-shop", "site-admin", "site-forum", "mcp-playwright"]
    assert len({c["ports"][0]["containerPort"] for c in sidecars}) == 4
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "t"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "state", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
            "initContainers": sidecars,
            "containers": [{"name": "runner", "image": "r:1", "command": ["mcpfleet", "trial"]}],
        },
    }
    kubernetes_validate.validate(pod, "1.37.0", strict=True)
    env = {e["name"]: e["value"] for e in sidecars[-1]["env"]}
    rules = json.loads(env["MCPFLEET_BROWSER_CONFIG"])
    args = rules["browser"]["launchOptions"]["args"][0]
    # The rules name each site's port variable, defined before them in the same container (so $(VAR) expands).
    assert "MAP shop.test 127.0.0.1:$(SITE_PORT_SHOP)" in args and args.endswith("MAP * ~NOTFOUND")
    names = [e["name"] for e in sidecars[-1]["env"]]
    assert names.index("SITE_PORT_FORUM") < names.index("MCPFLEET_BROWSER_CONFIG") and env["SITE_PORT_SHOP"] == "8101"


def run_in(marker: str, path: Path, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    """`mcpfleet run path` with the test's private TMPDIR, which every process a trial starts carries (and
    ``env``)."""
    return subprocess.run(
        [str(MCPFLEET), "run", str(path), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=marker,
        env={**os.environ, "TMPDIR": marker, **env},
        stdin=subprocess.DEVNULL,
    )


def test_example_run_scripted_oracle_passes_and_noop_fails(tmp_path: Path, marker: str) -> None:
    """examples/playwright.yaml through `mcpfleet run`: the scripted oracle model (an LLM agent over HTTP,
    reading snapshots from the conversation to resolve its element refs) passes every task, the no-op fails."""
    doc = yaml.safe_load((REPO / "examples" / "playwright.yaml").read_text())
    doc["spec"]["tasks"]["path"] = str(TASKS)
    doc["spec"]["output"]["uri"] = str(tmp_path / "runs")
    path = tmp_path / "playwright.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = run_in(marker, path, timeout=600)
    assert out.returncode == 0, out.stderr
    results = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "playwright" / "trials").glob("*/result.json")]
    n = len([t for t in discover(TASKS) if t.service == "playwright"])
    assert len(results) == 2 * n
    assert all(r["passed"] for r in results if r["model"] == "scripted-oracle"), [r["error"] for r in results]
    assert not any(r["passed"] for r in results if r["model"] == "scripted-noop")
    oracle = next(r for r in results if r["model"] == "scripted-oracle" and "/standard/" in r["task_id"])
    assert oracle["totals"]["tool_calls"] >= 10 and oracle["totals"]["tool_errors"] == 0
    # Workers claimed spares (browser launched ahead) and those trials passed like the cold ones.
    spared = [r for r in results if r["model"] == "scripted-oracle" and r["timings"]["spare_started"] > 0]
    assert spared and all(r["passed"] for r in spared)
    assert not settle(marker, grace=3.0)


def test_sites_inherit_no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-test-secret")
    monkeypatch.setenv("MCPFLEET_SITES_CACHE", "/tmp/sites-cache")
    env = playwright._site_env()
    assert "sk-test-secret" not in env.values() and "aws-test-secret" not in env.values()
    assert env["MCPFLEET_SITES_CACHE"] == "/tmp/sites-cache" and env["PATH"] == os.environ["PATH"]


@pytest.mark.parametrize("agent", ["mcpmark", "mcpfleet"])
def test_a_model_can_neither_see_nor_call_code_run_in_the_servers_process(
    tmp_path: Path, marker: str, agent: str
) -> None:
    """playwright-mcp offers browser_run_code_unsafe (JavaScript in its own Node process): a model could read the
    worker's API keys and write the sites' databases the verifiers grade. It is refused for every agent: left
    out of the tool list, and a call by name (MCPMark's agent calls whatever the model names) never runs. So is
    a page that is no web page (view-source:file:// showed a task's verify.py, its answer key)."""
    from mcpfleet.runner.trial.engine import ToolGate

    script = tmp_path / "script.json"
    probe = "async (page) => 'RAN-' + (40 + 2)"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "browser_run_code_unsafe", "arguments": {"code": probe}}]},
                    {
                        "tool_calls": [
                            {"name": "browser_navigate", "arguments": {"url": f"view-source:file://{script}"}}
                        ]
                    },
                    {"content": "Done."},
                ]
            }
        )
    )
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "refused"},
        "spec": {
            "models": [{"name": "probe", "model": f"scripted/script={script}"}],
            "tasks": {"path": str(TASKS), "services": ["playwright"], "include": ["*wishlist_add_two*"]},
            "agent": agent,
            "output": {"uri": str(tmp_path / "runs")},
        },
    }
    path = tmp_path / "refused.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = run_in(marker, path, timeout=300)
    trials = tmp_path / "runs" / "refused" / "trials"
    [result] = [json.loads(p.read_text()) for p in trials.glob("*/result.json")]
    # scored as the model's failure: a call to a tool the run does not offer
    assert result["failure"] in ("malformed_tool_call", "verifier_failed"), (result["error"], out.stderr[-2000:])
    calls = [c for t in result["turns"] for c in t["tool_calls"]]
    assert [c["name"] for c in calls] == ["browser_run_code_unsafe", "browser_navigate"] and all(
        c["is_error"] for c in calls
    )
    messages = next(trials.glob("*/messages.json")).read_text()
    assert "RAN-42" not in messages and "browser_run_code_unsafe" in messages
    assert "Only http(s) pages can be opened" in messages and "async (page)" not in messages.split("view-source")[-1]
    if agent == "mcpmark":  # (mcpfleet's own agent answers a call to a tool it did not list itself)
        assert "not available in this benchmark" in messages

    class Listed:
        def __init__(self, tools: list[Any]) -> None:
            self.tools = tools

        def model_copy(self, update: dict[str, Any]) -> Listed:
            return Listed(update["tools"])

    class Session:
        async def list_tools(self) -> Listed:
            return Listed([type("T", (), {"name": n})() for n in ("browser_click", "browser_run_code_unsafe")])

    service = get_service("playwright")
    listed = asyncio.run(ToolGate(Session(), service, tmp_path).list_tools())
    assert [t.name for t in listed.tools] == ["browser_click"]
    for url in ("view-source:file:///etc/hostname", "file:///etc/passwd", " FILE:///x", "chrome://version", "data:,x"):
        assert service.refused_call("browser_navigate", {"url": url}), url
    for url in ("http://shop.test/", "HTTPS://forum.test/x", "about:blank"):
        assert service.refused_call("browser_navigate", {"url": url}) is None, url
    assert service.refused_call("browser_tabs", {"action": "new", "url": "view-source:http://shop.test/"})
    assert not settle(marker, grace=3.0)


def test_the_browsers_network_service_runs_in_its_own_process(tmp_path: Path, marker: str) -> None:
    """As a utility process of its own, Chromium's network service held the session's cookies; killed (the OOM
    killer ranks it above the browser), it was restarted silently and the agent signed out, scored as the
    model's failure. In the browser's process its death is the browser's, which is watched."""
    proc = _start_in(marker, _one_task_run(tmp_path, "netsvc", "scripted/oracle?latency=1.5"))
    seen: list[str] = []
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline and not any("--type=renderer" in c for c in seen):
            seen = [cmd for _, cmd in ours(marker) if "chromium" in cmd]
            time.sleep(0.2)
        seen = [cmd for _, cmd in ours(marker) if "chromium" in cmd]
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert any("--type=renderer" in c for c in seen), "no browser was seen at work"
    assert not [c for c in seen if "NetworkService" in c and "--type=utility" in c], seen
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "netsvc" / "trials").glob("*/result.json")]
    assert result["passed"], (result["error"], err[-2000:])
    assert not settle(marker, grace=3.0)


def test_a_models_filename_arguments_reach_neither_the_launcher_nor_the_graded_data(
    tmp_path: Path, marker: str
) -> None:
    """playwright-mcp writes a tool's ``filename`` under its output and working folders. With the state folder as
    its working folder, a model overwrote the browser launcher the server executes (a root shell on the next
    browser start: it lifted the sandbox and read the task's verify.py), the exits file (its failures made
    unscored) and the shop's database. Now every such write lands in the output folder or is refused, and
    the next browser starts as ours."""
    targets = [
        ".browser/chromium",  # (relative to the working folder)
        "../chromium",  # (relative to the output folder)
        "../browser-exits",
        ".browser/browser-exits",
        "store.db",
        "../../store.db",
    ]
    evaluate = [
        {"tool_calls": [{"name": "browser_evaluate", "arguments": {"function": "() => 'x 13 $(id)'", "filename": f}}]}
        for f in targets
    ]
    nav = {"tool_calls": [{"name": "browser_navigate", "arguments": {"url": "http://shop.test/"}}]}
    script = tmp_path / "script.json"
    closing = [{"tool_calls": [{"name": "browser_close", "arguments": {}}]}, nav, {"content": "Done."}]
    script.write_text(json.dumps({"turns": [nav, *evaluate, *closing]}))
    doc = yaml.safe_load(_one_task_run(tmp_path, "filenames", f"scripted/script={script}").read_text())
    doc["spec"]["retries"] = {"limit": 0}
    path = tmp_path / "filenames.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = run_in(marker, path, timeout=300)
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "filenames" / "trials").glob("*/result.json")]
    assert result["failure"] == "verifier_failed", (result["error"], out.stderr[-2000:])  # scored: not infra
    calls = [c for t in result["turns"] for c in t["tool_calls"]]
    assert [c["name"] for c in calls] == [
        "browser_navigate",
        *["browser_evaluate"] * 6,
        "browser_close",
        "browser_navigate",
    ]
    assert not calls[-1]["is_error"] and not calls[0]["is_error"]  # the browser after the close is ours
    messages = next((tmp_path / "runs" / "filenames" / "trials").glob("*/messages.json")).read_text()
    assert "outside allowed roots" in messages and "uid=" not in messages
    assert not settle(marker, grace=3.0)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP])
def test_a_site_that_dies_or_hangs_under_the_agent_is_an_infrastructure_error(
    tmp_path: Path, marker: str, how: signal.Signals
) -> None:
    """The model saw connection errors or timeouts the task never set it: before, the trial was scored as the
    model's failure (verifier_failed). Now the first try is an infra error, run again, and its retry passes."""
    run = _one_task_run(tmp_path, "sitelost", "scripted/oracle?latency=1.5")
    doc = yaml.safe_load(run.read_text())
    doc["spec"]["limits"] = {"toolCallTimeoutSeconds": 10}  # a stopped site hangs the call: time it out sooner
    run.write_text(yaml.safe_dump(doc))
    proc = _start_in(marker, run)
    hit: list[int] = []
    deadline = time.monotonic() + 120
    while not hit and time.monotonic() < deadline and proc.poll() is None:
        sites = [pid for pid, cmd in ours(marker) if "mcpfleet.sites.shop" in cmd]
        if sites:
            time.sleep(3.0)  # the agent is under way
            os.kill(sites[0], how)
            hit.append(sites[0])
        time.sleep(0.2)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if how == signal.SIGSTOP and hit:
            with contextlib.suppress(ProcessLookupError):
                os.kill(hit[0], signal.SIGCONT)
    assert hit, "the site never started"
    assert proc.returncode == 0, err[-2000:]
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "sitelost" / "trials").glob("*/result.json")]
    assert record["passed"] and record["infra_attempts"] == 2, record
    assert not settle(marker, grace=5.0)


# ------------------------------------------------------------------------------ the browser's own folders and end

CHROMIUM_TEMP = ("org.chromium.Chromium.*", "playwright_chromiumdev_profile-*", "pw-*")


def _browser_leftovers(marker: str) -> list[str]:
    """Chromium's and Playwright's temp folders in the run's TMPDIR: each trial's belong in its own folder."""
    return sorted(p.name for pattern in CHROMIUM_TEMP for p in Path(marker).glob(pattern))


def _one_task_run(tmp_path: Path, name: str, model: str) -> Path:
    """A run file: ``model`` on the bundled wishlist task, one worker, retries on infrastructure errors."""
    doc = yaml.safe_load((REPO / "examples" / "playwright.yaml").read_text())
    doc["metadata"]["name"] = name
    doc["spec"]["models"] = [{"name": "m", "model": model}]
    doc["spec"]["tasks"] = {"path": str(TASKS), "services": ["playwright"], "include": ["*wishlist_add_two*"]}
    doc["spec"]["output"] = {"uri": str(tmp_path / "runs")}
    doc["spec"]["retries"] = {"limit": 2, "backoffSeconds": 0}
    doc["spec"]["concurrency"] = {"total": 1}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _start_in(marker: str, path: Path) -> subprocess.Popen[str]:
    """`mcpfleet run` of ``path`` with the marker folder as its TMPDIR (so its processes and folders are found)."""
    return subprocess.Popen(
        [str(MCPFLEET), "run", str(path), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=marker,
        env={**os.environ, "TMPDIR": marker},
        stdin=subprocess.DEVNULL,
    )


def _trial_browser(marker: str, deadline: float) -> tuple[Path, int]:
    """The first trial's state folder (from its shop's --data) and its Chromium main process (working in its
    output folder, as its server does), once the agent has used the browser (the trial's output folder holds two
    action results); not a spare's browser."""
    while time.monotonic() < deadline:
        shops = [cmd.split("--data ", 1)[1].split()[0] for _, cmd in ours(marker) if "mcpfleet.sites.shop" in cmd]
        if shops:
            state = Path(shops[0])
            output = state / ".browser" / "output"
            mains = [p for p in _browsers(marker) if _cwd(p) == output]  # the server's cwd, the browser's too
            if mains and output.is_dir() and len(list(output.iterdir())) >= 2:
                return state, mains[0]
        time.sleep(0.1)
    raise AssertionError("the trial's browser was not seen in use")


def _cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def test_a_browser_killed_under_the_agent_is_an_infrastructure_error_and_leaves_no_temp_folder(
    tmp_path: Path, marker: str
) -> None:
    """Chromium's main process SIGKILLed mid-trial (as the OOM killer does): playwright-mcp starts a fresh,
    signed-out browser on the next call and the model carries on in it. Before, that was the model's
    verifier_failed; now the first try is an infra error (the browser's launcher recorded the kill) and its
    retry passes. The killed browser's profile and Chromium's socket folder stayed in the trial's folder, which
    is gone with it: the run's TMPDIR holds none of them."""
    path = _one_task_run(tmp_path, "browserlost", "scripted/oracle?latency=1.0")
    proc = _start_in(marker, path)
    try:
        state, browser = _trial_browser(marker, time.monotonic() + 120)
        os.kill(browser, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    trials = tmp_path / "runs" / "browserlost" / "trials"
    [record] = [json.loads(p.read_text()) for p in trials.glob("*/result.json")]
    assert record["passed"] and record["infra_attempts"] == 2, record
    assert not settle(marker, grace=5.0)
    assert not state.exists() and _browser_leftovers(marker) == []


def test_a_model_that_closes_its_browser_and_goes_on_is_scored_and_leaves_no_temp_folder(
    tmp_path: Path, marker: str
) -> None:
    """browser_close is the model's own action (the browser exits cleanly): the next navigation opens a new browser
    and the trial is scored as usual (here the verifier fails: nothing was added), never an infra error. Nothing
    of either browser is left in the run's TMPDIR."""
    script = tmp_path / "script.json"
    calls = [
        ("browser_navigate", {"url": "http://shop.test/"}),
        ("browser_close", {}),
        ("browser_navigate", {"url": "http://shop.test/login"}),
    ]
    turns: list[dict[str, Any]] = [{"tool_calls": [{"name": n, "arguments": a}]} for n, a in calls]
    script.write_text(json.dumps({"turns": [*turns, {"content": "Done."}]}))
    out = run_in(marker, _one_task_run(tmp_path, "closed", f"scripted/script={script}"), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "closed" / "trials").glob("*/result.json")]
    assert record["failure"] == "verifier_failed" and record["infra_attempts"] == 1, record
    calls_made = [c for t in record["turns"] for c in t["tool_calls"]]
    assert [c["name"] for c in calls_made] == [n for n, _ in calls] and not any(c["is_error"] for c in calls_made)
    assert not settle(marker, grace=5.0)
    assert _browser_leftovers(marker) == []


def test_a_browser_that_cannot_start_is_an_infrastructure_error_not_the_models_failure(
    tmp_path: Path, marker: str
) -> None:
    """A Chromium that exits at once (here: /bin/false, code 1) fails every browser call; before, each model was
    scored verifier_failed (0.00 for all). Now every try is an infra error naming the browser's exit, so the run
    measured nothing instead."""
    out = run_in(marker, _one_task_run(tmp_path, "nobrowser", "scripted/oracle"), 300, MCPFLEET_CHROMIUM="/bin/false")
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "nobrowser" / "trials").glob("*/result.json")]
    assert record["failure"] == "infra_error" and record["infra_attempts"] == 3, (record, out.stderr[-2000:])
    assert record["error_type"] == "EnvironmentLost" and "exited with code 1" in record["error"]
    assert not settle(marker, grace=5.0)


def test_the_browser_temp_folder_is_the_trials_unless_chromium_could_not_bind_its_socket_there() -> None:
    """Chromium aborts at start (SIGABRT) if $TMPDIR/org.chromium.Chromium.XXXXXX/SingletonSocket is 108
    characters or more: then the browser keeps the run's TMPDIR rather than failing every trial."""
    short = Path(tempfile.mkdtemp(prefix="mcpf-sock-"))
    try:
        assert playwright.browser_env_tmp(short / "state") == {"TMPDIR": str(short / "state" / ".tmp")}
        assert (short / "state" / ".tmp").is_dir()
        deep = short / ("x" * (playwright.SUN_PATH_MAX - len(str(short)) - len(playwright.SOCKET_SUFFIX)))
        assert playwright.browser_env_tmp(deep) == {} and not deep.exists()
    finally:
        shutil.rmtree(short)


def test_only_a_browser_that_ended_other_than_cleanly_is_a_lost_environment(tmp_path: Path) -> None:
    """The launcher's record: clean exits (the model's browser_close, the server's stop) and no record at all
    (nothing launched, or the launcher killed with its group) are the model's trial; a signal or an exit code is
    not."""
    exits = playwright.exits_file(tmp_path)
    assert playwright.browser_lost(tmp_path) is None
    exits.write_text("0\n0\n")
    assert playwright.browser_lost(tmp_path) is None
    exits.write_text("0\n137\n1\n")
    assert playwright.browser_lost(tmp_path) == (
        "the browser (Chromium) was killed by SIGKILL, then exited with code 1 during the trial"
    )


WORK_DIR_VERIFY = """\
import os, sys

messages = os.environ["MCP_MESSAGES"]
work = os.environ.get("PLAYWRIGHT_WORK_DIR")
print(work)
sys.exit(0 if work and os.path.join(work, "messages.json") == messages and os.path.isfile(messages) else 1)
"""


def test_a_verifier_gets_mcpmarks_playwright_work_dir(tmp_path: Path, marker: str, scripted_url: str) -> None:
    """MCPMark's state manager sets PLAYWRIGHT_WORK_DIR, the folder holding messages.json, for a browser task's
    verifier (some of its verifiers look for messages.json there); before, only MCP_MESSAGES was set."""
    from mcpfleet.runner.plan import expand as plan
    from mcpfleet.runner.results import store
    from mcpfleet.runner.trial import engine as trial

    task = site_task(tmp_path, [])
    (task.path / "meta.json").write_text(json.dumps({"task_id": "probe", "mcp": ["playwright"]}))
    (task.path / "description.md").write_text("Open the page and report its title.\n")
    (task.path / "verify.py").write_text(WORK_DIR_VERIFY)
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "workdir"},
        "spec": {"models": [{"name": "noop", "model": "scripted/noop"}], "tasks": {"path": str(tmp_path / "pack")}},
    }
    [s] = plan.plan(parse_evalrun(doc), tmp_path)
    result = asyncio.run(trial.run_trial(s, store.LocalStore(tmp_path / "out"), trial.TrialContext(scripted_url)))
    assert result.verifier.exit_code == 0, (result.error, result.verifier)
