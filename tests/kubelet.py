"""A test kubelet: runs each pod's containers as local processes against an (emulated) API server.

It does what a node does for the operator's trial pods, honestly enough that the e2e exercises the real
trial code: init containers in order, native sidecars (``restartPolicy: Always``) kept running and gated
on their HTTP, TCP or exec startupProbe (tests/kubelet_probes.py; HTTP and TCP sent to the pod IP, here a
non-loopback address of this host, as a node sends them: a server bound to 127.0.0.1 fails them), the main
container, ``$(VAR)`` expansion, Secrets resolved from the API, termination messages, ``activeDeadlineSeconds``,
image-pull failures on demand, and pod deletion. Once a sidecar is ready, the addresses listening on each of its
ports are recorded (``bound``).
A native sidecar that exits before its startup probe passes, or whose probe fails ``failureThreshold`` times, is
restarted as its ``restartPolicy: Always`` says (killed first if it still runs), after the kubelet's back-off (10 s,
doubling), its status saying so (``restartCount``, ``lastState.terminated``, waiting ``CrashLoopBackOff``); the next
init container starts only once it has started. When the main containers have exited, the sidecars are stopped one
at a time in the reverse of their order in the spec, as Kubernetes documents. What each container was started with
(``launched``) and each start, passed startup probe and restart (``events``) are kept per pod.

Deletion is a node's: it binds each pod it runs to its node (``pods/<name>/binding``, as the scheduler
would), so the API server deletes it gracefully. On a ``deletionTimestamp`` the kubelet sends SIGTERM to the
main containers, then (once they are gone) to the sidecars and init containers, SIGKILL to whatever still
runs when the grace period (``deletionGracePeriodSeconds``) is up, reports the pod's terminal phase, and only
then deletes it with ``gracePeriodSeconds=0``. A pod removed outright (a forced deletion) is killed at once.
Pods bound to another node are not this kubelet's: a node that never reports (a lost node) is played by
binding a pod to a name no kubelet has.

What a node gives for free is emulated with host resources: an emptyDir is a temporary folder and its
mountPath is rewritten to it (whole values and space-separated tokens), and since all pods share the host
network, every containerPort gets a free host port and env values equal to that port number are rewritten.
A process that takes the default temp folder (TMPDIR unset) would reach the host's /tmp, where on a node it
reaches the volume the container mounts at /tmp: ``tmp_env=True`` sets such a container's TMPDIR to that
volume's folder (off by default: under a long ``workdir`` the path is too long for the Unix sockets processes
make there, Chromium's among them, so a test that turns it on gives a short ``workdir``).
KUBELET_KEEP=1 in the environment keeps the pods' folders (container logs, volumes) for a post-mortem.

Containers whose command is the runner image's ``mcpfleet`` are forked from a warm zygote (tests/warm_zygote.py, its
kubelet end tests/kubelet_warm.py; one per test process, shared by its kubelets) that has imported mcpfleet and
LiteLLM once: each is still a process of its own with the container's argv, environment, folder, session and log
(its /proc shows them), without paying ~3.7 s of imports per container. Until the zygote is ready, and with
``warm=False`` or KUBELET_COLD=1, containers start with exec.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from kubelet_probes import SidecarFailed, listening, wait_startup
from kubelet_warm import Proc, WarmZygote
from proctree import processes_naming

REPO = Path(__file__).resolve().parents[1]
MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"  # the runner image's entry point


def _pg_bin() -> str:
    """PostgreSQL's server binaries (initdb, postgres, pg_ctl): on PATH in the database image, not on Debian's."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0
    )
    return str(found[-1]) if found else ""


# The host is every image: what each image has on its PATH, in the order an image would find it.
BIN_PATH = os.pathsep.join(
    p
    for p in [
        str(REPO / ".venv" / "bin"),  # the runner image
        str(REPO / "servers" / "bridge" / "bin"),  # the runner image's mcpfleet-fifo-exec (built by setup.sh)
        str(REPO / "servers" / "gateway"),  # the MCP server images' mcpfleet-gateway and mcpfleet-probe
        str(REPO / "servers" / "node_modules" / ".bin"),  # the MCP server images (supergateway, servers)
        str(REPO / "servers" / "postgres" / "bin"),  # the database image's scripts
        _pg_bin(),  # the database image's PostgreSQL
        os.environ.get("PATH", "/usr/bin:/bin"),
        str(REPO / "servers" / "postgres-mcp" / ".venv" / "bin"),  # postgres-mcp's image (last: its python)
    ]
    if p
)
VAR_REF = re.compile(r"\$\$|\$\(([^)]*)\)")  # Kubernetes' expansion: $$ is a literal $, $(NAME) a variable's value


def expand(text: str, env: dict[str, str]) -> str:
    """``$(NAME)`` as the kubelet expands it in a container's command, args and env: the value of a variable defined
    earlier, else left as written; ``$$`` reduced to ``$`` (how a literal ``$(NAME)`` is written)."""
    return VAR_REF.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


LEFTOVER_SETTLE_SECONDS = 2.0  # how long a pod's processes may outlive its last container before they are leftovers


SIDECAR_BACKOFF_SECONDS = 10.0  # a node's first restart back-off (doubling to 300 s), CrashLoopBackOff's


class PodFailed(Exception):
    def __init__(self, reason: str, message: str = ""):
        super().__init__(reason)
        self.reason, self.message = reason, message


class Kubelet:
    def __init__(
        self,
        url: str,
        *,
        pull_failures: set[str] | None = None,
        max_pods: int = 64,
        extra_env: dict[str, str] | None = None,
        workdir: Path | None = None,
        node: str = "test-node",
        tmp_env: bool = False,
        warm: bool = True,
        node_labels: dict[str, str] | None = None,
        too_big: Callable[[dict[str, Any]], bool] | None = None,
    ):
        self.url = url.rstrip("/")
        self.warm: WarmZygote | None = None if (not warm or os.environ.get("KUBELET_COLD")) else WarmZygote.shared()
        self.node = node
        # The node's labels, for the scheduler this kubelet also plays: a pod whose nodeSelector they do not match
        # stays Pending with PodScheduled=False and the scheduler's message. None: every pod fits.
        self.node_labels = node_labels
        self.too_big = too_big  # pods this node has not the CPU for: Pending, "Insufficient cpu"
        self.unschedulable: list[str] = []  # pods so refused, in order
        self.tmp_env = tmp_env
        self.pull_failures = pull_failures or set()
        self.extra_env = extra_env or {}
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="kubelet-"))
        # A container may drop root for its own user (the database image does): it must reach its volumes.
        self.workdir.chmod(0o711)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.handled: set[str] = set()
        self.ended: set[str] = set()  # pod uids ever started: a pod runs once, whatever events lag behind
        self.sem = asyncio.Semaphore(max_pods)
        self.max_seen = 0
        self.running = 0
        self.started: list[str] = []
        self.timeline: list[tuple[float, str, str]] = []  # (time, pod, "start"|"end")
        # pod name -> {containerPort: host port}, set when the pod starts (before its init containers) and
        # kept after it ends: what a Prometheus service discovery would read from the pod (see test_prometheus).
        self.port_maps: dict[str, dict[int, int]] = {}
        self.sidecars: dict[str, list[str]] = {}  # pod name -> native sidecars started and ready, in order
        # pod name -> {sidecar: {its containerPort: the addresses listening on it once ready}}, e.g. ["127.0.0.1"]
        self.bound: dict[str, dict[str, dict[int, list[str]]]] = {}
        self.init_logs: dict[str, dict[str, str]] = {}  # pod name -> {one-shot init container: its log}, kept
        # pod name -> {container: (argv, env)} as started (after $(VAR) expansion and the host's rewrites)
        self.launched: dict[str, dict[str, tuple[list[str], dict[str, str]]]] = {}
        # pod name -> [(monotonic time, container, "start" | "probe <kind> <target>: <outcome>" | "restart <n>: ...")]
        self.events: dict[str, list[tuple[float, str, str]]] = {}
        self.session: aiohttp.ClientSession | None = None
        self._watch: asyncio.Task[None] | None = None
        # Deletion: each pod's processes and folder, which container a process is, pods being terminated.
        self.procs: dict[str, list[Proc]] = {}
        self.poddirs: dict[str, Path] = {}
        self.container_of: dict[int, str] = {}
        self.stopping: set[Path] = set()  # folders of pods being terminated: no container starts there any more
        self.terminating: dict[str, asyncio.Task[None]] = {}
        self.signals: list[tuple[float, str, str, str]] = []  # (time, pod, container, "SIGTERM"|"SIGKILL")
        self.deleted: list[str] = []  # pods this node deleted (gracePeriodSeconds=0) once their containers stopped
        # Teardown: when each pod's main containers exited (monotonic), and when this node deleted it.
        self.runner_exit: dict[str, float] = {}
        self.gone_at: dict[str, float] = {}
        # Processes of a pod still alive after every container of it stopped by itself or on SIGTERM (a container
        # runtime would kill them with the container's cgroup; here they would outlive the test): (pod, pid, cmd).
        # Each is SIGKILLed when found, and the kubelet's exit fails the test naming them.
        self.leftovers: list[tuple[str, int, str]] = []

    # -- API --------------------------------------------------------------------------------------
    async def _patch_status(self, ns: str, name: str, status: dict[str, Any]) -> None:
        assert self.session is not None
        async with self.session.patch(
            f"{self.url}/api/v1/namespaces/{ns}/pods/{name}/status",
            data=json.dumps({"status": status}),
            headers={"Content-Type": "application/merge-patch+json"},
        ) as r:
            if r.status == 404:
                raise asyncio.CancelledError  # the pod is gone: stop working on it
            r.raise_for_status()

    async def _secret_value(self, ns: str, name: str, key: str) -> str:
        assert self.session is not None
        import base64

        async with self.session.get(f"{self.url}/api/v1/namespaces/{ns}/secrets/{name}") as r:
            if r.status == 404:
                raise PodFailed("CreateContainerConfigError", f'secret "{name}" not found')
            data = (await r.json()).get("data") or {}
        if key not in data:
            raise PodFailed("CreateContainerConfigError", f"couldn't find key {key} in Secret {ns}/{name}")
        return base64.b64decode(data[key]).decode()

    # -- lifecycle --------------------------------------------------------------------------------
    async def __aenter__(self) -> Kubelet:
        self.session = aiohttp.ClientSession()
        self._watch = asyncio.create_task(self._watch_pods())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._watch:
            self._watch.cancel()
            with contextlib.suppress(BaseException):
                await self._watch
        for t in [*self.terminating.values(), *self.tasks.values()]:
            t.cancel()
        for t in [*self.terminating.values(), *self.tasks.values()]:
            with contextlib.suppress(BaseException):
                await t
        if self.session:
            await self.session.close()
        # What outlived its pod's containers, whatever the path (a pod cut short by the test's end included: its
        # containers' process groups were SIGKILLed, not a child that left its group).
        swept = processes_naming(str(self.workdir))
        for pid, _ in swept:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if not os.environ.get("KUBELET_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.leftovers and not any(exc):
            raise AssertionError(f"processes outlived their pod's containers (killed now): {self.leftovers[:5]}")

    async def _watch_pods(self) -> None:
        assert self.session is not None
        rv = ""
        while True:
            try:
                params = {"watch": "true", "timeoutSeconds": "60"}
                if rv:
                    params["resourceVersion"] = rv
                async with self.session.get(
                    f"{self.url}/api/v1/pods", params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
                ) as r:
                    async for line in r.content:
                        if not line.strip():
                            continue
                        ev = json.loads(line)
                        obj = ev.get("object") or {}
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        self._on_event(ev.get("type", ""), obj)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - reconnect like a kubelet would
                await asyncio.sleep(0.2)

    def _on_event(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}/{meta.get('uid')}"
        if kind == "DELETED":  # removed outright (forced, or by this node): nothing more to wait for
            self.gone_at.setdefault(str(meta.get("name")), time.monotonic())  # (a finished pod goes at once)
            task = self.tasks.pop(key, None)
            if task is not None:
                task.cancel()
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node != self.node:
            return  # another node's pod
        if meta.get("deletionTimestamp"):
            if node == self.node and key not in self.terminating:
                self.terminating[key] = asyncio.create_task(self._terminate(pod, key))
            return
        if not node and (pod.get("spec") or {}).get("schedulingGates"):
            return  # no scheduler places a gated pod: taken once its gates are removed (a MODIFIED event)
        if key not in self.handled and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            self.handled.add(key)
            self.tasks[key] = asyncio.create_task(self._run_pod(pod, key))

    # -- one pod ----------------------------------------------------------------------------------
    async def _run_pod(self, pod: dict[str, Any], key: str) -> None:
        wanted = (pod.get("spec") or {}).get("nodeSelector") or {}
        # The default scheduler's words for each.
        why = None
        if self.node_labels is not None and not wanted.items() <= self.node_labels.items():
            why = "1 node(s) didn't match Pod's node affinity/selector"
        elif self.too_big is not None and self.too_big(pod):
            why = "1 Insufficient cpu"
        if why is not None:
            meta = pod["metadata"]
            self.unschedulable.append(meta["name"])
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": f"0/1 nodes are available: {why}. preemption: 0/1 nodes are available: 1 Preemption is "
                "not helpful for scheduling.",
                "lastTransitionTime": now(),
            }
            await self._patch_status(meta["namespace"], meta["name"], {"phase": "Pending", "conditions": [condition]})
            self.tasks.pop(key, None)
            return  # never bound: it stays Pending until deleted (the API server deletes an unbound pod at once)
        async with self.sem:
            if not await self._bind(pod):
                self.tasks.pop(key, None)
                return
            self.running += 1
            self.max_seen = max(self.max_seen, self.running)
            self.started.append(pod["metadata"]["name"])
            self.timeline.append((time.monotonic(), pod["metadata"]["name"], "start"))
            procs: list[Proc] = []
            poddir = Path(tempfile.mkdtemp(prefix="pod-", dir=self.workdir))
            poddir.chmod(0o711)
            self.procs[key], self.poddirs[key] = procs, poddir
            try:
                deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
                coro = self._execute(pod, poddir, procs)
                await (asyncio.wait_for(coro, deadline) if deadline else coro)
            except TimeoutError:
                await self._finish(
                    pod,
                    "Failed",
                    [],
                    reason="DeadlineExceeded",
                    message=f"Pod was active on the node longer than {deadline} s",
                )
            except asyncio.CancelledError:
                pass
            finally:
                # Bookkeeping first: a second cancellation (the pod's deletion) may interrupt the awaits below.
                self._end(pod)
                self.tasks.pop(key, None)
                self.procs.pop(key, None)
                self.poddirs.pop(key, None)
                for p in procs:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)
                with contextlib.suppress(BaseException):
                    await asyncio.shield(asyncio.gather(*(p.wait() for p in procs), return_exceptions=True))
                if not os.environ.get("KUBELET_KEEP"):
                    shutil.rmtree(poddir, ignore_errors=True)

    # -- deletion ---------------------------------------------------------------------------------
    async def _bind(self, pod: dict[str, Any]) -> bool:
        """Assign the pod to this node (the scheduler's binding); False if it is gone or another node's."""
        if (pod.get("spec") or {}).get("nodeName") == self.node:
            return True
        assert self.session is not None
        meta = pod["metadata"]
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"]}}
        body["target"] = {"apiVersion": "v1", "kind": "Node", "name": self.node}
        async with self.session.post(
            f"{self.url}/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding", json=body
        ) as r:
            return r.status < 300

    async def _terminate(self, pod: dict[str, Any], key: str) -> None:
        """A graceful deletion, as a node does it: SIGTERM to the main containers, then to the sidecars and
        init containers (reverse order) once the main ones are gone, SIGKILL at the end of the grace period;
        the pod's terminal phase is reported, then the pod is deleted with gracePeriodSeconds=0."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        deadline = time.monotonic() + float(grace)
        task, poddir = self.tasks.get(key), self.poddirs.get(key)
        if poddir is not None:
            self.stopping.add(poddir)
        procs = list(self.procs.get(key, []))
        mains = {c["name"] for c in spec.get("containers") or []}
        first = [p for p in procs if self.container_of.get(p.pid) in mains]
        rest = [p for p in reversed(procs) if p not in first]
        try:
            await self._stop(meta["name"], first, deadline)
            await self._stop_in_turn(meta["name"], rest, deadline)
            if task is not None and not task.done():
                # The pod's own task reports its containers' end (a terminal phase) once its main containers
                # exit; one waiting on something else (an image pull, a startup probe) is stopped here.
                await asyncio.wait({task}, timeout=1.0 if procs else 0.2)
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            await self._report_terminated(meta)
            await self._final_delete(meta)
        finally:
            if poddir is not None:
                self.stopping.discard(poddir)

    async def _stop(self, pod: str, procs: list[Proc], deadline: float) -> None:
        live = [p for p in procs if p.returncode is None]
        for p in live:
            self.signals.append((time.monotonic(), pod, self.container_of.get(p.pid, "?"), "SIGTERM"))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        if not live:
            return
        try:
            await asyncio.wait_for(
                asyncio.gather(*(p.wait() for p in live)), timeout=max(0.0, deadline - time.monotonic())
            )
        except TimeoutError:
            for p in live:
                if p.returncode is None:
                    self.signals.append((time.monotonic(), pod, self.container_of.get(p.pid, "?"), "SIGKILL"))
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)
            await asyncio.gather(*(p.wait() for p in live), return_exceptions=True)

    async def _stop_in_turn(self, pod: str, procs: list[Proc], deadline: float) -> None:
        """Stop ``procs`` one after another (sidecars, in the reverse of their order), all within one grace."""
        for p in procs:
            await self._stop(pod, [p], deadline)

    async def _report_terminated(self, meta: dict[str, Any]) -> None:
        """A pod whose containers were stopped before it could report its end is Failed (the kubelet never
        deletes a pod without a terminal phase)."""
        assert self.session is not None
        url = f"{self.url}/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        async with self.session.get(url) as r:
            if r.status != 200:
                return
            phase = ((await r.json()).get("status") or {}).get("phase")
        if phase not in ("Succeeded", "Failed"):
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await self._patch_status(
                    meta["namespace"],
                    meta["name"],
                    {"phase": "Failed", "reason": "Terminated", "message": "the pod was deleted"},
                )

    async def _final_delete(self, meta: dict[str, Any]) -> None:
        assert self.session is not None
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        body["preconditions"] = {"uid": meta["uid"]}
        async with self.session.delete(
            f"{self.url}/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", json=body
        ) as r:
            if r.status < 300:
                self.deleted.append(meta["name"])
                self.gone_at.setdefault(meta["name"], time.monotonic())

    async def leftover_check(
        self, pod: str, poddir: Path, groups: set[int], settle: float = LEFTOVER_SETTLE_SECONDS
    ) -> None:
        """After every container of the pod stopped: a process still naming its folder ``settle`` seconds later
        outside every container's process group (a child that left its container's group, as supergateway's
        stdio servers do, and outlived it) is a leftover, killed and recorded. One still in a container's group is
        killed with it, as a container runtime kills the container's cgroup (a server's last processes finishing
        their exit just after their container's main process)."""
        deadline = time.monotonic() + settle
        while (left := processes_naming(str(poddir))) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        for pid, cmd in left:
            try:
                in_group = os.getpgid(pid) in groups
            except ProcessLookupError:
                continue
            if not in_group:
                self.leftovers.append((pod, pid, cmd))
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def teardown_seconds(self) -> dict[str, float]:
        """Per pod that ended by itself: its main containers' exit to its deletion by this node (sidecars stopped,
        terminal phase reported, the operator's delete, the final delete)."""
        return {p: self.gone_at[p] - t for p, t in self.runner_exit.items() if p in self.gone_at}

    def _end(self, pod: dict[str, Any]) -> None:
        """The pod stops counting as running: before its terminal status is visible to anyone."""
        uid = pod["metadata"].get("uid")
        if uid in self.ended:
            return
        self.ended.add(uid)
        self.running -= 1
        self.timeline.append((time.monotonic(), pod["metadata"]["name"], "end"))

    async def _finish(
        self, pod: dict[str, Any], phase: str, statuses: list[dict[str, Any]], reason: str = "", message: str = ""
    ) -> None:
        self._end(pod)
        status: dict[str, Any] = {"phase": phase, "containerStatuses": statuses}
        if reason:
            status["reason"], status["message"] = reason, message
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await self._patch_status(pod["metadata"]["namespace"], pod["metadata"]["name"], status)

    async def _execute(self, pod: dict[str, Any], poddir: Path, procs: list[Proc]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ns, name = meta["namespace"], meta["name"]
        mounts = {}
        for vol in spec.get("volumes") or []:
            if "emptyDir" in vol:
                d = poddir / "volumes" / vol["name"]
                d.mkdir(parents=True)
                mounts[vol["name"]] = d
        ports = {
            str(p["containerPort"]): str(free_port())
            for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
            for p in c.get("ports") or []
        }
        self.port_maps[name] = {int(k): int(v) for k, v in ports.items()}
        images = [c.get("image", "") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
        bad = [i for i in images if i in self.pull_failures]
        if bad:
            await self._patch_status(
                ns,
                name,
                {
                    "phase": "Pending",
                    "containerStatuses": [
                        {
                            "name": c["name"],
                            "ready": False,
                            "restartCount": 0,
                            "image": c.get("image", ""),
                            "state": {
                                "waiting": {
                                    "reason": "ImagePullBackOff",
                                    "message": f'Back-off pulling image "{bad[0]}"',
                                }
                            },
                        }
                        for c in spec.get("containers") or []
                    ],
                },
            )
            await asyncio.Event().wait()  # stays Pending until deleted, like a real node
        await self._patch_status(ns, name, {"phase": "Pending", "startTime": now()})
        init_statuses: list[dict[str, Any]] = []
        try:
            for c in spec.get("initContainers") or []:
                argv, env, term_file = await self._prepare(ns, c, mounts, ports, poddir)
                if c.get("restartPolicy") == "Always":
                    await self._start_sidecar(pod, c, (argv, env), ports, poddir, procs, init_statuses)
                    self.sidecars.setdefault(name, []).append(c["name"])
                    self.bound.setdefault(name, {})[c["name"]] = {
                        p["containerPort"]: listening(int(ports[str(p["containerPort"])])) for p in c.get("ports") or []
                    }
                    init_statuses.append(
                        {
                            "name": c["name"],
                            "ready": True,
                            "restartCount": 0,
                            "started": True,
                            "image": c.get("image", ""),
                            "state": {"running": {"startedAt": now()}},
                        }
                    )
                else:
                    proc = await self._spawn(argv, env, poddir, c["name"])
                    self._launched(name, c["name"], argv, env)
                    procs.append(proc)
                    code = await proc.wait()
                    log = (poddir / f"{c['name']}.log").read_text(errors="replace")
                    self.init_logs.setdefault(name, {})[c["name"]] = log
                    init_statuses.append(self._terminated(c, code, term_file, poddir))
                    if code != 0:
                        self._end(pod)
                        await self._patch_status(ns, name, {"phase": "Failed", "initContainerStatuses": init_statuses})
                        return
        except PodFailed as exc:
            await self._patch_status(
                ns,
                name,
                {
                    "phase": "Pending",
                    "containerStatuses": [
                        {
                            "name": "runner",
                            "ready": False,
                            "restartCount": 0,
                            "state": {"waiting": {"reason": exc.reason, "message": exc.message}},
                        }
                    ],
                },
            )
            await asyncio.Event().wait()
        mains = spec.get("containers") or []
        prepared = []
        try:
            for c in mains:
                prepared.append((c, *await self._prepare(ns, c, mounts, ports, poddir)))
        except PodFailed as exc:
            await self._patch_status(
                ns,
                name,
                {
                    "phase": "Pending",
                    "containerStatuses": [
                        {
                            "name": c["name"],
                            "ready": False,
                            "restartCount": 0,
                            "state": {"waiting": {"reason": exc.reason, "message": exc.message}},
                        }
                        for c in mains
                    ],
                },
            )
            await asyncio.Event().wait()
        running = [(c, await self._spawn(argv, env, poddir, c["name"]), term) for c, argv, env, term in prepared]
        for c, argv, env, _ in prepared:
            self._launched(name, c["name"], argv, env)
        procs.extend(p for _, p, _ in running)
        await self._patch_status(
            ns,
            name,
            {
                "phase": "Running",
                "initContainerStatuses": init_statuses,
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "ready": True,
                        "restartCount": 0,
                        "started": True,
                        "image": c.get("image", ""),
                        "state": {"running": {"startedAt": now()}},
                    }
                    for c, _, _ in running
                ],
            },
        )
        statuses = []
        for c, proc, term in running:
            code = await proc.wait()
            statuses.append(self._terminated(c, code, term, poddir))
        phase = "Succeeded" if all(s["state"]["terminated"]["exitCode"] == 0 for s in statuses) else "Failed"
        self.runner_exit[name] = time.monotonic()
        # Sidecars stop when the main containers are done, as a node stops native sidecars: one at a time in the
        # reverse of their order, each SIGTERM then SIGKILL when the pod's grace is up; the pod's terminal phase
        # only once they have stopped.
        grace = float(spec.get("terminationGracePeriodSeconds", 30))
        await self._stop_in_turn(name, [p for p in reversed(procs) if p.returncode is None], time.monotonic() + grace)
        await self.leftover_check(name, poddir, {p.pid for p in procs})
        await self._finish(pod, phase, statuses)

    def _event(self, pod: str, container: str, what: str) -> None:
        self.events.setdefault(pod, []).append((time.monotonic(), container, what))

    def _launched(self, pod: str, container: str, argv: list[str], env: dict[str, str]) -> None:
        self.launched.setdefault(pod, {})[container] = (argv, env)
        self._event(pod, container, "start")

    async def _start_sidecar(
        self,
        pod: dict[str, Any],
        c: dict[str, Any],
        command: tuple[list[str], dict[str, str]],
        ports: dict[str, str],
        poddir: Path,
        procs: list[Proc],
        init_statuses: list[dict[str, Any]],
    ) -> None:
        """Start a native sidecar and return once its startup probe passed (at once without one); one that fails
        first is restarted, as its node would, until it starts or the pod goes."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ns, name = meta["namespace"], meta["name"]
        argv, env = command
        restarts, backoff = 0, SIDECAR_BACKOFF_SECONDS
        while True:
            proc = await self._spawn(argv, env, poddir, c["name"])
            procs.append(proc)
            self._launched(name, c["name"], argv, env)
            try:
                assert self.session is not None
                note = functools.partial(self._event, name, c["name"])
                await wait_startup(self.session, note, c, ports, proc, env, poddir)
                return
            except SidecarFailed as exc:
                if proc.returncode is None:  # its startup probe failed: the node kills it, then restarts it
                    grace = float(spec.get("terminationGracePeriodSeconds", 30))
                    await self._stop(name, [proc], time.monotonic() + grace)
                code = await proc.wait()
                restarts += 1
                self._event(name, c["name"], f"restart {restarts}: {exc}")
                last = self._terminated(c, code, None, poddir)["state"]
                waiting = {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {backoff:g}s restarting failed container={c['name']} pod={name}",
                }
                status = {
                    "name": c["name"],
                    "ready": False,
                    "started": False,
                    "restartCount": restarts,
                    "image": c.get("image", ""),
                    "lastState": last,
                    "state": {"waiting": waiting},
                }
                await self._patch_status(
                    ns, name, {"phase": "Pending", "initContainerStatuses": [*init_statuses, status]}
                )
                await asyncio.sleep(backoff)
                backoff = min(2 * backoff, 300.0)

    def _terminated(self, c: dict[str, Any], code: int, term_file: Path | None, poddir: Path) -> dict[str, Any]:
        message = ""
        if term_file is not None and term_file.exists():
            message = term_file.read_text()[:4096]
        if not message and code != 0 and c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            log = poddir / f"{c['name']}.log"
            message = "\n".join(log.read_text(errors="replace").splitlines()[-80:])[-2048:] if log.exists() else ""
        code = 128 - code if code < 0 else code  # killed by signal N: exit code 128+N, as a container runtime says
        state = {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "finishedAt": now()}
        if message:
            state["message"] = message
        return {
            "name": c["name"],
            "ready": False,
            "restartCount": 0,
            "image": c.get("image", ""),
            "imageID": "",
            "state": {"terminated": state},
        }

    async def _prepare(
        self, ns: str, c: dict[str, Any], mounts: dict[str, Path], ports: dict[str, str], poddir: Path
    ) -> tuple[list[str], dict[str, str], Path | None]:
        paths = {m["mountPath"]: str(mounts[m["name"]]) for m in c.get("volumeMounts") or [] if m["name"] in mounts}
        term_path = c.get("terminationMessagePath", "/dev/termination-log")
        term_file = poddir / f"{c['name']}.termination-log"
        paths[term_path] = str(term_file)

        def rewrite(value: str) -> str:
            def one(tok: str) -> str:
                if tok not in paths and os.path.exists(tok):
                    return tok  # the host's filesystem is the "image": its existing paths are not under a mount
                for mount, host in sorted(paths.items(), key=lambda kv: -len(kv[0])):
                    if tok == mount or tok.startswith(mount.rstrip("/") + "/"):
                        return host + tok[len(mount) :]
                return tok

            return " ".join(one(t) for t in value.split(" "))

        env: dict[str, str] = {}
        for e in c.get("env") or []:
            if "value" in e:
                v = str(e["value"])
            else:
                ref = (e.get("valueFrom") or {}).get("secretKeyRef") or {}
                v = await self._secret_value(ns, ref.get("name", ""), ref.get("key", ""))
            v = ports.get(v, v)
            # Paths in the literal are rewritten first, then $(VAR)s expand to values already rewritten (a value
            # that is a host path under /tmp must not be taken for the /tmp mount a second time).
            env[e["name"]] = expand(rewrite(v), env)
        argv = [expand(rewrite(a), env) for a in (c.get("command") or []) + (c.get("args") or [])]
        tmp = {"TMPDIR": paths["/tmp"]} if self.tmp_env and "/tmp" in paths else {}  # its /tmp: the volume
        # PYTHONPATH as the tests run with: a worktree's mcpfleet is the runner image's (unset on CI: the checkout's).
        python_path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
        full_env = {"PATH": BIN_PATH, "LANG": "C.UTF-8", **python_path, **self.extra_env, **tmp, **env}
        return argv, full_env, term_file

    async def _spawn(self, argv: list[str], env: dict[str, str], poddir: Path, name: str) -> Proc:
        if poddir in self.stopping:  # the pod is being deleted: no container starts any more
            raise asyncio.CancelledError
        exe = shutil.which(argv[0], path=env["PATH"]) or argv[0]
        if self.warm is not None and self.warm.ready.is_set() and Path(exe) == MCPFLEET:
            if not poddir.is_dir():  # as open() below would: the pod's folder went with the pod
                raise FileNotFoundError(poddir)
            warm = await self.warm.spawn([exe, *argv[1:]], env, poddir, poddir / f"{name}.log")
            self.container_of[warm.pid] = name
            return warm
        log = open(poddir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        try:
            proc: Proc = await asyncio.create_subprocess_exec(
                exe,
                *argv[1:],
                env=env,
                cwd=str(poddir),
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()
        self.container_of[proc.pid] = name
        return proc


@contextlib.asynccontextmanager
async def kubelet(url: str, **kw: Any) -> AsyncIterator[Kubelet]:
    async with Kubelet(url, **kw) as k:
        yield k
