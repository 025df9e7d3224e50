"""The Playwright service: the bundled sites (mcpfleet.sites) on their own ports, @playwright/mcp on Debian's
Chromium, one fresh browser per trial.

Per trial: a fresh seeded copy of the data of every site the task names (meta.json ``"mcpfleet": {"sites":
["shop", "admin"]}``; shop and admin share ``store.db``), each site started on a free loopback port, and a
playwright-mcp server over stdio whose own headless, isolated Chromium (never a downloaded one) reaches the
sites at stable origins: ``http://shop.test/`` is mapped to the shop's real port by Chromium's host resolver
rules, and every other host (IP literals too) resolves to nothing. The sites stop before the verifier runs,
so it reads quiescent SQLite files from ``MCPFLEET_SITES_DATA``.

A task that names no sites (MCPMark's own browser tasks, written for the public web or WebArena's images)
starts none and its browser is not confined: it runs wherever those sites are reachable.
In a pod (``materialised``) the sites and the MCP server are sidecars; the trial only verifies.

The server's TMPDIR is in the trial's folder, and it launches Chromium through a shell that records each browser's
exit status there: a browser killed or failing to start under the agent makes the trial an infrastructure error
(``EnvironmentLost``), as does a site that died.

A worker's spare (``BrowserSpare``) starts the next trial's playwright-mcp and Chromium before that trial is
known: it reserves one loopback port per bundled site (bound, not listening: refused, and no other process can
take it), configures the browser with all of them, and at claim seeds the task's data and starts the task's
sites on their reserved sockets. The ports of sites the task does not name stay bound and refuse connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import shlex
import signal
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from mcpfleet.runner.environment import sandbox
from mcpfleet.runner.environment.server import SAFE_ENV, SERVERS_ENV, ServerCommand, servers_bin
from mcpfleet.runner.services.base import LOOPBACK, PROBE, EnvironmentLost, PodContext, Service, Spare, TrialEnv

if TYPE_CHECKING:
    from mcpfleet.runner.spec.task import Task

EXECUTABLE = "playwright-mcp"
CHROMIUM_ENV = "MCPFLEET_CHROMIUM"  # a Chromium executable instead of Debian's
CHROMIUM = "/usr/bin/chromium"
DATA_ENV = "MCPFLEET_SITES_DATA"  # what the verifier reads: the folder with store.db and/or forum.db
HOST_SUFFIX = ".test"  # a reserved TLD: http://shop.test/ is the shop, whatever port it really has
SETTLE_MS = 50  # wait after an action for triggered work: 500 ms by default, ~0.4 s per click saved
VIEWPORT = "1280,720"  # MCPMark starts the server with --viewport-size 1280,720 (its config's default)
SITE_START_TIMEOUT_S = 60.0  # ~0.4 s idle; seconds under heavy load
SITE_STOP_TIMEOUT_S = 3.0
HEALTH_TIMEOUT_S = 5.0  # a site idle since the agent ended answers in milliseconds
READY = " serving http://"
# Where Playwright would fetch a browser from: a closed port, so an attempted download fails at once and
# nothing reaches the network (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD already says not to; this makes it certain).
DOWNLOAD_GUARD = "http://127.0.0.1:9"


def site_host(site: str) -> str:
    return f"{site}{HOST_SUFFIX}"


def site_origin(site: str) -> str:
    return f"http://{site_host(site)}"


def task_sites(task: Task) -> list[str]:
    """The bundled sites a task needs, in its meta.json order; ValueError if the list is malformed or names an
    unknown site. A task that declares none (MCPMark's own, for the public web) gets none, and its browser is
    not confined to them: it reaches whatever this machine reaches."""
    from mcpfleet.sites import SITES

    if "sites" not in (task.meta.get("mcpfleet") or {}):
        return []
    declared = task.meta["mcpfleet"]["sites"]
    if not isinstance(declared, list) or not declared or not all(isinstance(s, str) for s in declared):
        raise ValueError(f'{task.id}: meta.json "mcpfleet": {{"sites": [...]}} must name one or more bundled sites')
    unknown = [s for s in declared if s not in SITES]
    if unknown:
        raise ValueError(f"{task.id}: unknown site(s) {', '.join(unknown)} (known: {', '.join(SITES)})")
    return list(dict.fromkeys(declared))


def pack_root(task: Task) -> Path:
    """The task's pack (``<root>/<service>/<difficulty>/<category>/<task>``): every task's verifier is in it."""
    parents = task.path.parents
    return parents[3] if len(parents) > 3 else task.path


def chromium() -> str:
    return os.environ.get(CHROMIUM_ENV) or CHROMIUM


LAUNCHER = """#!/bin/sh
# mcpfleet's Chromium for playwright-mcp (runner/services/playwright.py): runs the real one and appends how it
# ended to a file in the trial's folder, so that a browser killed under the agent is not scored as the model's.
{browser} "$@"
status=$?
echo "$status" >> {exits}
exit "$status"
"""


# Chromium binds a Unix socket at $TMPDIR/org.chromium.Chromium.XXXXXX/SingletonSocket and aborts at start if
# that path has 108 characters or more (sun_path), so the browser's temp folder has a short name.
SOCKET_SUFFIX = "/org.chromium.Chromium.XXXXXX/SingletonSocket"
SUN_PATH_MAX = 107


def browser_env_tmp(state_dir: Path) -> dict[str, str]:
    """TMPDIR for the server and its browser: ``<state>/.tmp``, removed with the trial's folder (Chromium's
    ``org.chromium.Chromium.*``, and Playwright's ``playwright_chromiumdev_profile-*`` that a killed browser
    leaves). Nothing (the run's own TMPDIR, where those leak) if the run's temp path is too long for Chromium's
    socket there."""
    tmp = state_dir / ".tmp"
    if len(str(tmp)) + len(SOCKET_SUFFIX) > SUN_PATH_MAX:
        return {}
    tmp.mkdir(parents=True, exist_ok=True)
    return {"TMPDIR": str(tmp)}


def browser_home(state_dir: Path) -> Path:
    """The trial's browser folder: the server's HOME, config, logs, launcher and browser exits."""
    return state_dir / ".browser"


def exits_file(home: Path) -> Path:
    """One line per browser the trial's server launched and saw end: its exit status (128 + N: signal N)."""
    return home / "browser-exits"


def browser_lost(home: Path) -> str | None:
    """Why the trial's browser is no longer the one the agent was using, or None: a browser that ended other than
    by a clean exit (0: the model's own ``browser_close``, or the server's stop) was killed (OOM killer, a crash)
    or could not start at all; either way the model's score would measure the machine."""
    try:
        statuses = exits_file(home).read_text().split()
    except OSError:  # no browser ended (none was launched, or the server's stop took it with its launcher)
        return None
    bad = [int(code) for code in statuses if code.isdigit() and code != "0"]
    if not bad:
        return None
    how = [f"was killed by {_signal_name(c - 128)}" if c > 128 else f"exited with code {c}" for c in bad]
    return f"the browser (Chromium) {', then '.join(how)} during the trial"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def write_launcher(home: Path, browser: str) -> Path:
    """The executable playwright-mcp launches instead of ``browser``: the real Chromium as its child (not exec'd),
    then the exit status appended to ``exits_file``. Playwright force-kills a browser by its process group, which
    takes this shell too, so such a kill (the server's own stop) records nothing."""
    home.mkdir(parents=True, exist_ok=True)
    launcher = home / "chromium"
    launcher.write_text(LAUNCHER.format(browser=shlex.quote(browser), exits=shlex.quote(str(exits_file(home)))))
    launcher.chmod(0o755)
    return launcher


SERVER_LAUNCHER = """#!/bin/sh
# mcpfleet's playwright-mcp (runner/services/playwright.py): the server, and so its browser, in a sandbox of its own
# (runner/environment/sandbox.py) where the task packs, the run's output and other trials' folders are empty.
exec {command} "$@"
"""


def write_server_launcher(home: Path, command: list[str]) -> Path:
    """The executable the trial's MCP client starts instead of playwright-mcp (same arguments): ``command``, which
    runs it in a sandbox. A file, so the server's command line keeps playwright-mcp's own arguments."""
    home.mkdir(parents=True, exist_ok=True)
    launcher = home / "server"
    launcher.write_text(SERVER_LAUNCHER.format(command=shlex.join(command)))
    launcher.chmod(0o755)
    return launcher


def resolver_rules(ports: dict[str, int] | dict[str, str]) -> str:
    """Chromium's --host-resolver-rules: each site's name to its loopback port, every other host to nothing."""
    rules = [f"MAP {site_host(site)} 127.0.0.1:{port}" for site, port in sorted(ports.items())]
    return ", ".join([*rules, "MAP * ~NOTFOUND"])


# Chromium's network service runs in the browser's own process: as a utility process of its own it held the
# --isolated session's cookies, and one killed (the OOM killer ranks it above the browser) was restarted without
# a word, the agent silently signed out, and the trial scored as the model's. In-process, its death is the
# browser's, which is watched. Playwright passes --enable-features=CDPScreenshotNewSurface first; the last
# --enable-features wins, so that feature is named again here.
ENABLE_FEATURES = "--enable-features=CDPScreenshotNewSurface,NetworkServiceInProcess2"  # (the 2: Chromium 156's name)


# Transports the host resolver rules do not govern. WebRTC's ICE sends STUN and TURN to IP literals over its
# own sockets (measured: STUN binding requests and TURN allocations reached a loopback UDP port): with no proxy,
# disable_non_proxied_udp leaves it no UDP at all. QUIC (and so WebTransport and HTTP/3) is off as well.
TRANSPORT_FLAGS = (
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-quic",
)


def browser_config(ports: dict[str, int] | dict[str, str]) -> dict[str, Any]:
    """playwright-mcp's --config: the launch arguments the command line cannot give (the host mapping, none
    without sites; the network service in the browser's process)."""
    args = [f"--host-resolver-rules={resolver_rules(ports)}"] if ports else []
    return {"browser": {"launchOptions": {"args": [*args, ENABLE_FEATURES, *TRANSPORT_FLAGS]}}}


@dataclass
class SiteProcess:
    """One running site: its process (leader of its own process group) and the port it reported."""

    name: str
    proc: asyncio.subprocess.Process
    port: int
    log: IO[bytes] = field(repr=False)

    async def stop(self) -> None:
        """SIGTERM the site's group (graceful within 1 s), SIGKILL what is left after SITE_STOP_TIMEOUT_S."""
        await _stop_group(self.proc, SITE_STOP_TIMEOUT_S)
        self.log.close()


async def _stop_group(proc: asyncio.subprocess.Process, timeout: float) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group: anything the site started, and the site if it hung
    await proc.wait()


async def start_site(name: str, data_dir: Path, log_dir: Path, sock: socket.socket | None = None) -> SiteProcess:
    """Start ``python -m mcpfleet.sites.<name>`` and wait for its ready line: on a free port (``--port 0``), or on
    ``sock``, a bound socket handed over by its descriptor (``--fd``; a spare's reserved port).

    Its own session (a terminal's Ctrl-C reaches the launcher, which stops it) and ``--exit-with-parent``
    (it exits by itself if this process dies, even by SIGKILL). cwd is the data folder, never a checkout root.
    """
    where = ["--fd", str(sock.fileno())] if sock is not None else ["--port", "0"]
    log = open(log_dir / f"{name}.log", "w+b")  # noqa: SIM115 - closed by SiteProcess.stop
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            f"mcpfleet.sites.{name}",
            "--data",
            str(data_dir),
            *where,
            "--exit-with-parent",
            cwd=str(data_dir),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            env=_site_env(),
            pass_fds=(sock.fileno(),) if sock is not None else (),
        )
    except BaseException:
        log.close()
        raise
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), SITE_START_TIMEOUT_S)
        text = line.decode(errors="replace").strip()
        if READY not in text:
            raise RuntimeError(f"site '{name}' did not start: {text or _tail(log)}")
        port = int(text.rsplit(":", 1)[1])
        if sock is not None and port != sock.getsockname()[1]:
            raise RuntimeError(f"site '{name}' serves port {port}, not its reserved {sock.getsockname()[1]}")
    except BaseException as exc:
        await _stop_group(proc, SITE_STOP_TIMEOUT_S)
        log.close()
        if isinstance(exc, TimeoutError):
            raise RuntimeError(f"site '{name}' printed no ready line within {SITE_START_TIMEOUT_S:g} s") from None
        raise
    return SiteProcess(name, proc, port, log)


class Sites:
    """A trial's running sites; ``stop`` (the trial's quiesce, and its teardown) stops them all, once."""

    def __init__(self) -> None:
        self.running: list[SiteProcess] = []

    async def start(
        self, names: Sequence[str], data_dir: Path, log_dir: Path, sockets: dict[str, socket.socket] | None = None
    ) -> None:
        """Start ``names`` side by side; if one fails, the error is raised and the others are left to ``stop``."""
        sockets = sockets or {}
        started = await asyncio.gather(
            *(start_site(n, data_dir, log_dir, sockets.get(n)) for n in names), return_exceptions=True
        )
        self.running.extend(s for s in started if isinstance(s, SiteProcess))
        for s in started:
            if isinstance(s, BaseException):
                raise s

    def ports(self) -> dict[str, int]:
        return {s.name: s.port for s in self.running}

    async def stop(self) -> None:
        while self.running:
            await self.running.pop().stop()

    async def quiesce(self, browser: Path | None = None) -> None:
        """Before the verifier: stop them all, raising EnvironmentLost if one had died or stopped answering under
        the agent (the model then saw connection errors or timeouts the task never set it), or if the browser
        launched from the folder ``browser`` had (the model then got a fresh, signed-out browser or none)."""
        lost = [why for why in await asyncio.gather(*(_lost(s) for s in self.running)) if why]
        if browser is not None and (why := browser_lost(browser)):
            lost.append(why)
        await self.stop()
        if lost:
            raise EnvironmentLost("; ".join(lost))


async def _lost(site: SiteProcess) -> str | None:
    """Why a site is no longer serving, or None."""
    if site.proc.returncode is not None:
        return f"site '{site.name}' exited (code {site.proc.returncode}) during the trial: {_tail(site.log)[-300:]}"
    import httpx

    try:
        async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S) as client:
            reply = await client.get(f"http://127.0.0.1:{site.port}/healthz", headers={"host": site_host(site.name)})
        if reply.status_code == 200:
            return None
        return f"site '{site.name}' answered /healthz with HTTP {reply.status_code}"
    except httpx.HTTPError as exc:
        return f"site '{site.name}' did not answer /healthz within {HEALTH_TIMEOUT_S:g} s ({type(exc).__name__})"


def reserve_port() -> socket.socket:
    """A loopback port held for a site that starts later: bound, not listening, so a connection to it is refused.
    Without SO_REUSEADDR, which on Linux would let another socket with it bind the same port while neither
    listens."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
    except BaseException:
        sock.close()
        raise
    return sock


def _site_env() -> dict[str, str]:
    """What a site inherits: no API keys or cloud credentials (the agent drives it), its template cache."""
    from mcpfleet.sites import CACHE_ENV

    env = {k: os.environ[k] for k in (*SAFE_ENV, CACHE_ENV, "XDG_CACHE_HOME") if k in os.environ}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", "TZ": "UTC"}


def _tail(log: IO[bytes]) -> str:
    log.flush()
    log.seek(0)
    return log.read().decode(errors="replace").strip()[-2000:] or "(no output)"


class PlaywrightService(Service):
    name = "playwright"
    meta_keys = {"sites": None}  # checked by task_sites
    spare_servers = True  # see BrowserSpare
    messages_dir_env = "PLAYWRIGHT_WORK_DIR"  # read by MCPMark's verifiers that look for messages.json there
    # Runs JavaScript in the server's Node process ("RCE-equivalent", its own description says): the model
    # could read the worker's environment (API keys) and write the sites' databases the verifiers grade.
    refused_tools = frozenset({"browser_run_code_unsafe"})

    def refused_call(self, name: str, arguments: Any) -> str | None:
        """Also a page address that is no web page: ``view-source:file:///.../verify.py`` shows a task's answer
        key (``file://`` itself Chromium refuses); only http(s) and about: reach the browser."""
        url = arguments.get("url") if isinstance(arguments, dict) else None
        if isinstance(url, str) and url.strip() and not re.match(r"(?i)\s*(https?:|about:blank\b)", url):
            return f"Only http(s) pages can be opened in this benchmark, not '{url[:200]}'."
        return super().refused_call(name, arguments)

    def server_command(self, state_dir: Path, config: Path, hide: Sequence[Path] = ()) -> ServerCommand:
        """playwright-mcp on the trial's Chromium; through ``write_server_launcher`` (a sandbox where
        the task packs, the run's output and other trials' folders are not there: a ``view-source:file://``
        would read the verifiers), with ``hide`` (the task's pack) covered too."""
        exe = servers_bin() / EXECUTABLE
        if not exe.exists():
            raise FileNotFoundError(
                f"MCP server '{EXECUTABLE}' for service '{self.name}' not found at {exe}; "
                f"run scripts/setup.sh (npm ci in servers/) or set {SERVERS_ENV}"
            )
        browser = chromium()
        if not os.access(browser, os.X_OK):
            raise FileNotFoundError(f"Chromium not found at {browser}: apt-get install chromium, or set {CHROMIUM_ENV}")
        home = browser_home(state_dir)
        # playwright-mcp writes a tool's ``filename`` anywhere under its output folder and its working folder. The
        # output folder is both: the state folder (the sites' databases the verifiers grade) and the browser folder
        # (the launcher it executes, the exits file) are out of reach. As the working folder, the model rewrote the
        # launcher (a root shell on the next browser start) and the exits file (its failures made unscored).
        output = home / "output"
        output.mkdir(parents=True, exist_ok=True)
        args = [
            "--config",
            str(config),
            "--headless",
            "--browser",
            "chromium",
            "--executable-path",
            str(write_launcher(home, browser)),
            "--no-sandbox",
            "--isolated",
            "--viewport-size",
            VIEWPORT,
            "--timeout-settle",
            str(SETTLE_MS),
            "--output-dir",
            str(output),
        ]
        env = {
            "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
            "PLAYWRIGHT_BROWSERS_PATH": str(home / "no-downloaded-browsers"),
            "PLAYWRIGHT_DOWNLOAD_HOST": DOWNLOAD_GUARD,
            "HOME": str(home),  # Chromium's and Node's caches stay in the trial's folder
            **browser_env_tmp(state_dir),  # and its temp folders
            "TZ": "UTC",
        }
        keep = [state_dir, servers_bin().parent, Path(browser), Path(os.path.realpath(browser)).parent]
        hidden = sandbox.plan(keep, hide, own_pids=True)
        if hidden is None:
            return ServerCommand(str(exe), args, env, cwd=output)
        return ServerCommand(
            str(write_server_launcher(home, sandbox.command([str(exe)], hidden))), args, env, cwd=output
        )

    def write_config(self, state_dir: Path, ports: dict[str, int]) -> Path:
        config = browser_home(state_dir) / "config.json"
        config.write_text(json.dumps(browser_config(ports)), encoding="utf-8")
        return config

    @staticmethod
    def log_dir(state_dir: Path) -> Path:
        logs = browser_home(state_dir) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        return logs

    @staticmethod
    def verifier_env(state_dir: Path) -> dict[str, str]:
        return {DATA_ENV: str(state_dir), "TZ": "UTC"}

    @asynccontextmanager
    async def environment(
        self, task: Task, state_dir: Path, resource: Any, *, materialised: bool = False
    ) -> AsyncIterator[TrialEnv]:
        names = task_sites(task)
        state_dir.mkdir(parents=True, exist_ok=True)
        if materialised:  # a pod: the state volume holds the data, the sites and the server are sidecars
            yield TrialEnv(state_dir, ServerCommand(EXECUTABLE, []), self.verifier_env(state_dir))
            return
        await asyncio.to_thread(self.materialise, task, state_dir)
        sites = Sites()
        try:
            await sites.start(names, state_dir, self.log_dir(state_dir))
            config = self.write_config(state_dir, sites.ports())
            server = await asyncio.to_thread(self.server_command, state_dir, config, [pack_root(task)])
            quiesce = functools.partial(sites.quiesce, browser_home(state_dir))
            yield TrialEnv(state_dir, server, self.verifier_env(state_dir), quiesce=quiesce)
        finally:
            await sites.stop()

    @asynccontextmanager
    async def spare(self, state_dir: Path, resource: Any) -> AsyncIterator[Spare]:
        from mcpfleet.sites import SITES

        sockets: dict[str, socket.socket] = {}
        try:
            for name in SITES:
                sockets[name] = reserve_port()
            self.log_dir(state_dir)
            config = self.write_config(state_dir, {n: s.getsockname()[1] for n, s in sockets.items()})
            yield BrowserSpare(self, state_dir, sockets, self.server_command(state_dir, config))
        finally:
            for sock in sockets.values():  # after the claiming trial's sites stopped, or unclaimed
                sock.close()

    def spare_fits(self, task: Task) -> bool:
        """A task whose sites all have a reserved port (every bundled one); not a task without sites, whose
        browser is not confined."""
        from mcpfleet.sites import SITES

        try:
            names = task_sites(task)
        except ValueError:
            return False
        return bool(names) and all(n in SITES for n in names)

    def trial_params(self, task: Task) -> dict[str, Any]:
        return {"sites": task_sites(task)}

    def pod_sidecars(self, params: dict[str, Any], pod: PodContext) -> list[dict[str, Any]]:
        return pod_sidecars(
            list(params.get("sites") or []),
            runner_image=pod.runner_image,
            server_image=pod.server_image,
            mcp_port=pod.mcp_port,
            state_mount=pod.state_mount,
            resources=pod.resources,
            security=pod.security,
        )

    def materialise(self, task: Task, dest: Path) -> int:
        """A fresh seeded copy of the data of every site the task names (one file per data kind)."""
        from mcpfleet.sites import SITES, seed

        dest.mkdir(parents=True, exist_ok=True)
        done: set[str] = set()
        for site in task_sites(task):
            if SITES[site].data not in done:
                seed(site, dest)
                done.add(SITES[site].data)
        return len(done)

    def check_state(self, task: Task) -> list[str]:
        try:
            task_sites(task)
        except ValueError as exc:
            return [str(exc)]
        return []


class BrowserSpare(Spare):
    """playwright-mcp with its Chromium already launched, for a trial not known yet.

    The browser's host mapping names a port per bundled site, reserved by a bound socket the spare holds; at
    claim the task's data is seeded and its sites start on their sockets (handed over by descriptor). Sites the
    task does not name keep a bound, non-listening port: ``http://forum.test/`` is refused for a shop task
    (``ERR_CONNECTION_REFUSED``, where a cold trial's browser says ``ERR_NAME_NOT_RESOLVED``). The sockets are
    closed when the spare goes, after the browser and the sites, so a port is never free while the browser
    that maps it runs.
    """

    def __init__(
        self, service: PlaywrightService, state_dir: Path, sockets: dict[str, socket.socket], server: ServerCommand
    ):
        self.service, self.state_dir, self.sockets, self.server = service, state_dir, sockets, server

    async def started(self, session: Any) -> None:
        """Launch Chromium: listing the tabs opens the browser with one blank tab, as a cold trial's first call
        does, and navigates nowhere (no history entry, no snapshot file)."""
        from mcpfleet.runner.environment.mcp_client import result_text

        result = await session.call_tool("browser_tabs", {"action": "list"})
        if result.is_error:
            raise RuntimeError(f"the spare's browser did not start: {result_text(result)[:500]}")

    @asynccontextmanager
    async def claim(self, task: Task) -> AsyncIterator[TrialEnv]:
        if not self.service.spare_fits(task):
            raise RuntimeError(f"{task.id}: a browser spare serves only tasks whose sites are all bundled ones")
        await asyncio.to_thread(self.service.materialise, task, self.state_dir)
        sites = Sites()
        try:
            await sites.start(task_sites(task), self.state_dir, self.service.log_dir(self.state_dir), self.sockets)
            env = self.service.verifier_env(self.state_dir)
            quiesce = functools.partial(sites.quiesce, browser_home(self.state_dir))
            yield TrialEnv(self.state_dir, self.server, env, quiesce=quiesce)
        finally:
            await sites.stop()


# --- Kubernetes -------------------------------------------------------------------------------------------
# In a trial pod the sites and the MCP server are native sidecars (init containers with restartPolicy Always,
# each with a startup probe) on fixed loopback ports (the pod's network namespace is the trial's own); the
# state volume holds the data `mcpfleet materialise` seeded. The sites run from the runner image (it bundles
# mcpfleet.sites); the server from servers/Dockerfile.playwright (pinned playwright-mcp + Debian's Chromium).
# operator/manifests.py decides where these go; this says what they are.

POD_SITE_PORTS = {"shop": 8101, "admin": 8102, "forum": 8103}
# The server starts in its output folder: playwright-mcp writes a tool's ``filename`` under its output and working
# folders, and the state volume (the sites' databases the verifier grades) must be neither.
WRITE_CONFIG_AND_EXEC = (
    'printf "%s" "$MCPFLEET_BROWSER_CONFIG" > "$HOME/playwright-mcp.json" && mkdir -p "$HOME/browser-output" '
    '&& cd "$HOME/browser-output" && exec "$@"'
)


# A site's startup probe, run in its container (the runner image: Python): the site listens on the pod's loopback
# only, which a kubelet's httpGet (to the pod IP) never reaches. Its argument names the variable holding the port.
SITE_PROBE = (
    "import os, sys, urllib.request; "
    f"urllib.request.urlopen('http://{LOOPBACK}:%s/healthz' % os.environ[sys.argv[1]], timeout=2).close()"
)


def _port_env(site: str) -> str:
    return f"SITE_PORT_{site.upper()}"


def pod_sidecars(
    sites: Sequence[str],
    *,
    runner_image: str,
    server_image: str,
    mcp_port: int,
    state_mount: str = "/state",
    resources: dict[str, Any] | None = None,
    security: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The trial pod's sidecars for a browser task: one per site it names, then playwright-mcp serving
    streamable HTTP on ``mcp_port`` (``--allowed-hosts``: the runner connects as localhost or 127.0.0.1).

    Ports travel as environment variables expanded by the kubelet (``$(VAR)``), the browser's host-resolver
    rules included, so nothing in the pod repeats a port number in two places."""
    mounts = [{"name": "state", "mountPath": state_mount}, {"name": "tmp", "mountPath": "/tmp"}]
    probe = {"periodSeconds": 1, "failureThreshold": 120}
    extra: dict[str, Any] = {}
    if resources:
        extra["resources"] = resources
    if security:
        extra["securityContext"] = security
    out: list[dict[str, Any]] = []
    for site in sites:
        port = POD_SITE_PORTS[site]
        out.append(
            {
                "name": f"site-{site}",
                "image": runner_image,
                "restartPolicy": "Always",
                "command": ["python", "-m", f"mcpfleet.sites.{site}"],
                "args": ["--data", state_mount, "--host", LOOPBACK, "--port", f"$({_port_env(site)})"],
                "env": [
                    {"name": _port_env(site), "value": str(port)},
                    {"name": "TZ", "value": "UTC"},
                    {"name": "MCPFLEET_SITES_CACHE", "value": "/tmp/sites"},
                ],
                "ports": [{"name": f"site-{site}"[:15], "containerPort": port, "protocol": "TCP"}],
                "startupProbe": {"exec": {"command": ["python", "-c", SITE_PROBE, _port_env(site)]}, **probe},
                "volumeMounts": mounts,
                "workingDir": "/tmp",
                **extra,
            }
        )
    config = json.dumps(browser_config({s: f"$({_port_env(s)})" for s in sites}))
    server = [
        "playwright-mcp",
        "--config",
        "$(HOME)/playwright-mcp.json",
        "--headless",
        "--browser",
        "chromium",
        "--executable-path",
        CHROMIUM,
        "--no-sandbox",
        "--isolated",
        "--viewport-size",
        VIEWPORT,
        "--timeout-settle",
        str(SETTLE_MS),
        "--output-dir",
        "$(HOME)/browser-output",
        "--host",
        LOOPBACK,
        "--port",
        "$(MCP_PORT)",
        "--allowed-hosts",
        "localhost:$(MCP_PORT)",
        "127.0.0.1:$(MCP_PORT)",
    ]
    out.append(
        {
            "name": "mcp-playwright",
            "image": server_image,
            "restartPolicy": "Always",
            "command": ["sh", "-c", WRITE_CONFIG_AND_EXEC, "--"],
            "args": server,
            "env": [
                {"name": "MCP_PORT", "value": str(mcp_port)},
                *({"name": _port_env(s), "value": str(POD_SITE_PORTS[s])} for s in sites),
                {"name": "MCPFLEET_BROWSER_CONFIG", "value": config},
                {"name": "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "value": "1"},
                {"name": "PLAYWRIGHT_BROWSERS_PATH", "value": "/tmp/no-downloaded-browsers"},
                {"name": "PLAYWRIGHT_DOWNLOAD_HOST", "value": DOWNLOAD_GUARD},
                {"name": "HOME", "value": "/tmp"},
                {"name": "TZ", "value": "UTC"},
            ],
            "ports": [{"name": "mcp", "containerPort": mcp_port, "protocol": "TCP"}],
            "startupProbe": {"exec": {"command": [PROBE, "MCP_PORT"]}, **probe},
            "volumeMounts": mounts,
            "workingDir": "/tmp",  # the script then enters $HOME/browser-output (see WRITE_CONFIG_AND_EXEC)
            **extra,
        }
    )
    return out
