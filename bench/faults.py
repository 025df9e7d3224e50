"""Fault matrix: each fault against a fresh 200-trial EvalRun through the real operator; one markdown row each.

The operator runs as its own process (`mcpfleet operator`, as in a cluster) against tests/kubeemu.py's API
emulator. Records go to S3 (moto) through a TCP proxy this script can switch off, so an S3 outage is real for
the operator and the "runners" alike. A *fault kubelet* stands in for the nodes: it puts a finalizer on every
trial pod it starts (so a deleted pod stays Terminating until the kubelet has stopped it, as on a real node),
marks it Running, "runs" it for a seeded duration, writes the trial's record to S3 the way `mcpfleet trial`
does (meta.json, then result.json; a write that fails leaves the pod Failed, exit 1, as the runner exits
non-zero) and then the pod's terminal status with the runner's termination message. It enforces
activeDeadlineSeconds. Each row is a fresh emulator, a fresh bucket and a fresh EvalRun (2 models x N/8 tasks x
4 attempts, scripted/oracle, capacity 30, retries.limit 3, backoffSeconds 0, timeoutSeconds 5, verifier 2 s,
MCPFLEET_POD_GRACE_SECONDS 2). The faults (`--only` names):

- baseline: none.
- operator-kill: the operator is SIGKILLed 5 times, each a seeded 0.3-3 s after it (re)started working (its first
  trial pod created or status change), and restarted 1 s later.
- pod-delete: 10% of trial pods (seeded) are deleted through the API a seeded 20-80% into their run.
- pod-stuck: 5% of first tries (seeded): the kubelet marks the pod Running, then never reports again, and never
  lets it go once deleted (it stays Terminating: a lost node). The operator must count it failed after
  timeoutSeconds + verifierTimeoutSeconds + MCPFLEET_POD_GRACE_SECONDS + its own 30 s, and retry it.
- s3-outage: the S3 proxy refuses every connection (and cuts open ones) for --s3-window seconds.
- llm-burst: trials that end within a --window-second window end as the runner records a provider whose 429/500
  outlasted its 5 retries (failure provider_error, totals.llm_retries 5, exit 0).
- mcp-crash: trials that end within the window end as the runner records a dead MCP sidecar (measured with a real
  supergateway killed mid-trial: failure infra_error, "ConnectError: All connection attempts failed", exit 0).
- verifier-hang: 10% of tries (seeded) run their verifier until verifierTimeoutSeconds and record what the
  runner records then: failure verifier_failed, verifier.timed_out true (scored: never retried).
- second-replica: a second `mcpfleet operator` process runs beside the first for the whole run.

Columns: trials planned; final records in the store at the end (lost = planned - final records: a scored
record, or a not-scored one past retries.limit); duplicated (trials whose scored record the kubelet wrote more
than once: paid twice); retries (pods created beyond one per trial); the final records' categories; makespan
(EvalRun created -> Succeeded) and its difference to the baseline row; time to recover (see the legend printed
under the table); the run's phase. Exits 1 if any row loses or duplicates a trial.

    .venv/bin/python bench/faults.py [--trials 200] [--only second-replica ...] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import hashlib
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import boto3

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import CREDS, make_tiny_pack  # noqa: E402
from kubeemu import RunningEmulator, operator_crds, running_emulator  # noqa: E402
from s3server import moto_endpoint  # noqa: E402

from mcpfleet.runner.results.outcome import INFRA_ERROR, PROVIDER_ERROR, VERIFIER_FAILED, is_scored  # noqa: E402
from mcpfleet.runner.results.records import Totals, TrialResult, VerifierRecord, dumps, now_iso  # noqa: E402
from mcpfleet.runner.results.store import S3Store, StoreError, parse_s3_uri  # noqa: E402
from mcpfleet.runner.spec.trial import TrialSpec  # noqa: E402

NS = "default"
RUN = "faults"
FINALIZER = "bench.mcpfleet.io/node"
FAULTS = [
    "baseline",
    "operator-kill",
    "pod-delete",
    "pod-stuck",
    "s3-outage",
    "llm-burst",
    "mcp-crash",
    "verifier-hang",
    "second-replica",
]
CAPACITY = 30
RETRY_LIMIT = 3
TIMEOUT_S = 5
VERIFIER_TIMEOUT_S = 2
POD_GRACE_S = 2
KILLS = 5
DELETE_FRACTION = 0.10
STUCK_FRACTION = 0.05
HANG_FRACTION = 0.10
LLM_RETRIES = 5


def rng(seed: int, *key: object) -> random.Random:
    digest = hashlib.sha256(repr((seed, *key)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def duration(seed: int, tid: str, retry: int) -> float:
    """Seeded trial time: lognormal around 1 s, clipped to 0.5-2 s."""
    return min(2.0, max(0.5, math.exp(rng(seed, "duration", tid, retry).gauss(0.0, 0.4))))


def ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


# -- S3 behind a switch ------------------------------------------------------------------------------


class TcpProxy:
    """A TCP relay to the S3 endpoint on its own thread and event loop. ``down()``: every new connection is
    refused-like (accepted and reset at once) and every open one is cut; ``up()``: relays again."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.loop = asyncio.new_event_loop()
        self.is_up = True
        self.conns: set[asyncio.StreamWriter] = set()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        ready = threading.Event()

        async def start() -> None:
            await asyncio.start_server(self._serve, sock=sock)
            ready.set()

        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(start(), self.loop)
        ready.wait(10)

    @staticmethod
    def _reset(writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.is_up:
            self._reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            self._reset(writer)
            return
        self.conns |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.transport.abort() if not self.is_up else dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self.conns -= {writer, up_writer}

    def down(self) -> None:
        def cut() -> None:
            self.is_up = False
            for w in list(self.conns):
                self._reset(w)

        self.loop.call_soon_threadsafe(cut)

    def up(self) -> None:
        self.loop.call_soon_threadsafe(setattr, self, "is_up", True)


# -- the nodes ---------------------------------------------------------------------------------------


@dataclass
class PodRun:
    name: str
    uid: str
    tid: str
    retry: int
    deleting: asyncio.Event = field(default_factory=asyncio.Event)
    writing: bool = False
    stuck: bool = False


@dataclass
class Window:
    start: float = math.inf  # wall seconds
    end: float = math.inf

    def active(self, now: float) -> bool:
        return self.start <= now < self.end


class FaultKubelet:
    """Runs every trial pod of the namespace as described in the module docstring, and keeps the books."""

    def __init__(self, url: str, fault: str, seed: int) -> None:
        self.url, self.fault, self.seed = url, fault, seed
        self.runs: dict[str, PodRun] = {}  # uid -> pod being run (or stuck)
        self.seen: set[str] = set()
        self.created: list[tuple[float, str]] = []  # (wall time, pod name) as the kubelet first saw each pod
        self.names: collections.Counter[str] = collections.Counter()  # pods created under each name
        self.scored_writes: collections.Counter[str] = collections.Counter()
        self.writes: list[tuple[float, str, str | None]] = []  # (wall time, trial id, failure) of stored records
        self.failed_writes = 0
        self.touched: dict[str, float] = {}  # trial id -> when the fault first hit it (wall seconds)
        self.window = Window()
        self.stores: dict[tuple[str, str | None, str | None], S3Store] = {}
        self.pool = ThreadPoolExecutor(64)  # the runners' S3 writes: each pod has its own process in reality
        self.tasks: set[asyncio.Task[Any]] = set()
        self.session: aiohttp.ClientSession | None = None

    def spawn(self, coro: Any) -> None:
        t = asyncio.create_task(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    def touch(self, tid: str) -> None:
        self.touched.setdefault(tid, time.time())

    # -- API
    async def _patch(self, name: str, body: dict[str, Any], sub: str = "") -> int:
        assert self.session is not None
        async with self.session.patch(
            f"{self.url}/api/v1/namespaces/{NS}/pods/{name}{sub}",
            data=json.dumps(body),
            headers={"Content-Type": "application/merge-patch+json"},
        ) as r:
            if r.status >= 300 and r.status not in (404, 409, 422):
                raise RuntimeError(f"patch {name}{sub}: {r.status} {await r.text()}")
            return r.status

    async def delete_pod(self, name: str) -> None:
        assert self.session is not None
        async with self.session.delete(f"{self.url}/api/v1/namespaces/{NS}/pods/{name}") as r:
            await r.read()

    async def release(self, name: str) -> None:
        """Drop the node's finalizer: the pod object goes (the containers are stopped)."""
        await self._patch(name, {"metadata": {"finalizers": None}})

    # -- watch
    async def run(self) -> None:
        async with aiohttp.ClientSession() as session:
            self.session = session
            rv = ""
            while True:
                params = {"watch": "true", "timeoutSeconds": "300"}
                if rv:
                    params["resourceVersion"] = rv
                try:
                    async with session.get(
                        f"{self.url}/api/v1/namespaces/{NS}/pods",
                        params=params,
                        timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
                    ) as r:
                        async for line in r.content:
                            if line.strip():
                                ev = json.loads(line)
                                rv = ev["object"]["metadata"].get("resourceVersion", rv)
                                self.on_event(ev["type"], ev["object"])
                except (TimeoutError, aiohttp.ClientError):
                    await asyncio.sleep(0.2)

    def on_event(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if kind == "DELETED":
            self.runs.pop(uid, None)
            return
        run = self.runs.get(uid)
        if meta.get("deletionTimestamp"):
            if run is not None:
                run.deleting.set()  # the pod's own task stops it, then lets it go (or not: stuck)
            elif FINALIZER in (meta.get("finalizers") or []):
                self.spawn(self.release(meta["name"]))
            return
        if uid in self.seen or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        self.seen.add(uid)
        self.created.append((time.time(), meta["name"]))
        self.names[meta["name"]] += 1
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        trial = TrialSpec.model_validate_json(env["MCPFLEET_TRIAL"])
        attempt = int(env.get("MCPFLEET_INFRA_ATTEMPT") or 1)
        run = PodRun(meta["name"], uid, trial.trial_id, attempt - 1)
        self.runs[uid] = run
        self.spawn(self.run_pod(pod, run, trial, attempt, env))

    # -- one pod
    async def run_pod(
        self, pod: dict[str, Any], run: PodRun, trial: TrialSpec, attempt: int, env: dict[str, Any]
    ) -> None:
        if await self._patch(run.name, {"metadata": {"finalizers": [FINALIZER]}}) >= 300:
            return  # gone or being deleted already: nothing started
        now = now_iso()
        image = pod["spec"]["containers"][0].get("image", "")
        running = {
            "phase": "Running",
            "startTime": now,
            "containerStatuses": [
                {
                    "name": "runner",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": image,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
        if await self._patch(run.name, {"status": running}, "/status") >= 300:
            return
        if self.fault == "pod-stuck" and run.retry == 0 and rng(self.seed, "stuck", run.tid).random() < STUCK_FRACTION:
            run.stuck = True  # the node is lost: no status, ever, and the finalizer is never dropped
            self.touch(run.tid)
            return
        d = duration(self.seed, run.tid, run.retry)
        if self.fault == "pod-delete" and rng(self.seed, "delete", run.tid, run.retry).random() < DELETE_FRACTION:
            self.spawn(self.delete_later(run, d * rng(self.seed, "delete-at", run.tid, run.retry).uniform(0.2, 0.8)))
        work = asyncio.create_task(self.execute(run, trial, attempt, env, d))
        deleting = asyncio.create_task(run.deleting.wait())
        deadline = float(pod["spec"].get("activeDeadlineSeconds") or 3600)
        try:
            await asyncio.wait({work, deleting}, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
        finally:
            deleting.cancel()
        if work.done():
            phase, code, message = work.result()
            await self.terminal(run.name, image, phase, code, message)
        else:  # deleted, or past its deadline: SIGTERM; a runner writing its record finishes the write first
            if run.writing:
                with contextlib.suppress(Exception):
                    await work
            else:
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
            if not run.deleting.is_set():
                await self.terminal(
                    run.name, image, "Failed", 137, "", reason="DeadlineExceeded", why=f"active longer than {deadline}"
                )
        await run.deleting.wait()  # the operator deletes every pod once it has taken its outcome
        await self.release(run.name)

    async def delete_later(self, run: PodRun, after: float) -> None:
        await asyncio.sleep(after)
        if run.uid in self.runs:  # while it writes its record, too: the runner then finishes the write first
            self.touch(run.tid)
            await self.delete_pod(run.name)

    async def terminal(
        self, name: str, image: str, phase: str, code: int, message: str, reason: str = "", why: str = ""
    ) -> None:
        term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "finishedAt": now_iso()}
        if message:
            term["message"] = message
        status: dict[str, Any] = {
            "phase": phase,
            "containerStatuses": [
                {"name": "runner", "ready": False, "restartCount": 0, "image": image, "state": {"terminated": term}}
            ],
        }
        if reason:
            status.update(reason=reason, message=why)
        await self._patch(name, {"status": status}, "/status")

    def store(self, env: dict[str, Any]) -> S3Store:
        """The runner's store, from its pod's environment (one client per run: a pod's boto3 start is free)."""
        key = (env["MCPFLEET_OUTPUT_URI"], env.get("MCPFLEET_OUTPUT_ENDPOINT_URL"), env.get("MCPFLEET_RUN_UID"))
        if key not in self.stores:
            bucket, prefix = parse_s3_uri(key[0])
            self.stores[key] = S3Store(bucket, prefix, RUN, key[2], endpoint_url=key[1], region="us-east-1", env=CREDS)
        return self.stores[key]

    async def execute(
        self, run: PodRun, trial: TrialSpec, attempt: int, env: dict[str, Any], d: float
    ) -> tuple[str, int, str]:
        """The runner: agent, verifier, record. Returns the pod's (phase, exit code, termination message)."""
        started = now_iso()
        await asyncio.sleep(d)
        now = time.time()
        passed = int(hashlib.sha256(trial.trial_id.encode()).hexdigest(), 16) % 3 != 0
        extra: dict[str, Any] = {"stop_reason": "completed", "totals": Totals(turns=3, tool_calls=3)}
        failure: str | None = None if passed else VERIFIER_FAILED
        verifier = VerifierRecord(exit_code=0 if passed else 1, duration_s=0.2, stdout="all good\n" if passed else "")
        if self.fault == "verifier-hang" and rng(self.seed, "hang", run.tid, run.retry).random() < HANG_FRACTION:
            self.touch(run.tid)
            await asyncio.sleep(VERIFIER_TIMEOUT_S)
            passed, failure = False, VERIFIER_FAILED
            verifier = VerifierRecord(
                exit_code=None,
                timed_out=True,
                duration_s=float(VERIFIER_TIMEOUT_S),
                stderr=f"\n[mcpfleet: verifier killed after {VERIFIER_TIMEOUT_S} s]",
            )
        elif self.fault == "llm-burst" and self.window.active(now):
            self.touch(run.tid)
            status = rng(self.seed, "status", run.tid, run.retry).choice([429, 500])
            kind = "RateLimitError" if status == 429 else "InternalServerError"
            passed, failure, verifier = False, PROVIDER_ERROR, VerifierRecord()
            extra = {
                "stop_reason": PROVIDER_ERROR,
                "error": f"{kind}: litellm.{kind}: injected burst (HTTP {status}; gave up after {LLM_RETRIES} retries)",
                "error_type": kind,
                "totals": Totals(turns=1, tool_calls=1, llm_retries=LLM_RETRIES),
            }
        elif self.fault == "mcp-crash" and self.window.active(now):
            self.touch(run.tid)
            passed, failure, verifier = False, INFRA_ERROR, VerifierRecord()
            extra = {
                "stop_reason": None,
                "error": "ConnectError: All connection attempts failed",
                "error_type": "ConnectError",
                "totals": Totals(turns=1, tool_calls=1),
            }
        result = TrialResult(
            **trial.record_identity(),
            passed=passed,
            failure=failure,
            verifier=verifier,
            infra_attempts=attempt,
            started_at=started,
            finished_at=now_iso(),
            **extra,
        )
        store = self.store(env)
        run.writing = True

        def write() -> None:
            store.write_files(trial.trial_id, {"meta.json": b'{"bench": "faults"}'})
            store.commit(trial.trial_id, dumps(result.model_dump(mode="json")))

        try:
            await asyncio.get_running_loop().run_in_executor(self.pool, write)
        except StoreError as exc:  # the runner exits 1 without a record
            self.failed_writes += 1
            self.touch(run.tid)
            return "Failed", 1, f"StoreError: {exc}"[-300:]
        finally:
            run.writing = False
        self.writes.append((time.time(), trial.trial_id, failure))
        if is_scored(failure):
            self.scored_writes[trial.trial_id] += 1
        return "Succeeded", 0, json.dumps({"trial_id": trial.trial_id, "passed": passed, "failure": failure})


# -- one row -----------------------------------------------------------------------------------------


def evalrun(pack: Path, bucket: str, endpoint: str) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": RUN, "namespace": NS},
        "spec": {
            "models": [{"name": f"m{i}", "model": "scripted/oracle"} for i in range(2)],
            "tasks": {"path": str(pack)},
            "attempts": 4,
            "concurrency": {"total": CAPACITY},
            "retries": {"limit": RETRY_LIMIT, "backoffSeconds": 0},
            "limits": {
                "timeoutSeconds": TIMEOUT_S,
                "verifierTimeoutSeconds": VERIFIER_TIMEOUT_S,
                "llmTimeoutSeconds": 4,
            },
            "output": {"uri": f"s3://{bucket}/runs", "endpointUrl": endpoint, "credentialsSecretRef": "s3-credentials"},
        },
    }


# `mcpfleet operator`, with kopf's log handler (warnings and errors): the console script calls kopf.run()
# without kopf.configure(), so its own warnings only become Events and its log stays empty.
OPERATOR = "import sys, kopf; kopf.configure(quiet=True); from mcpfleet.runner.cli.entry import main; main()"


class Operators:
    """`mcpfleet operator` processes, as in a cluster; all stopped at the end."""

    def __init__(self, kube: RunningEmulator, log: Path) -> None:
        self.kube = kube
        self.env = {
            **os.environ,
            **CREDS,
            "KUBECONFIG": str(kube.kubeconfig_path),
            "MCPFLEET_CREATE_RATE": "100",
            "MCPFLEET_MAX_PODS": str(CAPACITY),
            "MCPFLEET_STATUS_INTERVAL": "1",
            "MCPFLEET_POD_GRACE_SECONDS": str(POD_GRACE_S),
            "MCPFLEET_OPERATOR_METRICS_PORT": "0",
        }
        self.log = log
        self.procs: list[subprocess.Popen[bytes]] = []

    def watches(self) -> int:
        return int(self.kube.call(lambda: self.kube.emulator.request_counts[("watch", "evalruns")]))

    async def start(self, standby: bool = False) -> subprocess.Popen[bytes]:
        """Start one and wait until it watches EvalRuns (its imports alone take seconds on a loaded machine). A
        ``standby`` replica may never watch them (a paused peer): it gets 20 s, then the run goes on."""
        before = self.watches()
        with open(self.log, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", OPERATOR, "operator", "-n", NS],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd="/",
            )
        self.procs.append(proc)
        deadline = time.monotonic() + (20 if standby else 120)
        while self.watches() <= before:
            if proc.poll() is not None or time.monotonic() > deadline:
                if standby and proc.poll() is None:
                    break
                raise RuntimeError(f"the operator did not start: see {self.log}")
            await asyncio.sleep(0.1)
        return proc

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@dataclass
class Row:
    fault: str
    planned: int
    final: int = 0
    duplicated: int = 0
    retries: int = 0
    categories: dict[str, int] = field(default_factory=dict)
    makespan: float = math.nan
    recover: str = "-"
    phase: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return self.planned - self.final


async def one_row(fault: str, args: argparse.Namespace, moto: str, proxy: TcpProxy, work: Path) -> Row:
    tasks = max(1, args.trials // 8)
    pack = work / f"pack-{tasks}"
    if not pack.exists():
        make_tiny_pack(pack, tasks=tasks)
    client = boto3.client(
        "s3",
        endpoint_url=moto,
        region_name="us-east-1",
        aws_access_key_id=CREDS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDS["AWS_SECRET_ACCESS_KEY"],
    )
    bucket = f"faults-{fault}-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    proxy.up()
    body = evalrun(pack, bucket, proxy.url)
    row = Row(fault, tasks * 8)
    seed = args.seed
    # Every CRD the chart installs (the EvalRun and kopf's peering ones), so the rows run as in a cluster.
    with running_emulator(crds=operator_crds()) as kube:
        ops = Operators(kube, work / f"operator-{fault}.log")
        kubelet = FaultKubelet(kube.url, fault, seed)
        ktask = asyncio.create_task(kubelet.run())
        drivers: list[asyncio.Task[Any]] = []
        kills: list[tuple[float, float, float]] = []  # (killed, restarted, watching again), wall seconds
        progress: list[tuple[float, tuple[Any, str]]] = []  # (wall seconds, (phase, counts)) as the status changed
        try:
            await ops.start()
            if fault == "second-replica":
                await ops.start(standby=True)
            await asyncio.sleep(0.5)
            start, wall0 = time.perf_counter(), time.time()
            kube.create(body)
            if fault in ("llm-burst", "mcp-crash"):
                kubelet.window = Window(wall0 + args.fault_at, wall0 + args.fault_at + args.window)
            elif fault == "s3-outage":
                kubelet.window = Window(wall0 + args.fault_at, wall0 + args.fault_at + args.s3_window)
                drivers.append(asyncio.create_task(s3_outage(proxy, kubelet.window)))
            elif fault == "operator-kill":
                drivers.append(asyncio.create_task(kill_operator(ops, seed, kills, kubelet, progress)))
            status: dict[str, Any] = {}
            while time.perf_counter() - start < args.timeout:
                await asyncio.sleep(0.25)
                status = (kube.get("evalruns", NS, RUN) or {}).get("status") or {}
                seen = (status.get("phase"), json.dumps(status.get("counts"), sort_keys=True))
                if not progress or progress[-1][1] != seen:
                    progress.append((time.time(), seen))
                if status.get("phase") in ("Succeeded", "Failed"):
                    break
            row.makespan = time.perf_counter() - start
            row.phase = status.get("phase") if status.get("phase") in ("Succeeded", "Failed") else "timeout"
            for d in drivers:
                d.cancel()
            proxy.up()
            uid = (kube.get("evalruns", NS, RUN) or {})["metadata"]["uid"]
            await asyncio.sleep(1.0)  # the last pods' deletions
            terminating = [p for p in kube.objects("pods", NS) if p["metadata"].get("deletionTimestamp")]
        finally:
            for d in drivers:
                d.cancel()
            ops.stop()
            ktask.cancel()
            for t in list(kubelet.tasks):
                t.cancel()
            kubelet.pool.shutdown(wait=False, cancel_futures=True)
    proxy.up()
    records = {r["trial_id"]: r for r in S3Store(bucket, "runs", RUN, uid, endpoint_url=moto, env=CREDS).iter_results()}
    final = {
        tid: r
        for tid, r in records.items()
        if is_scored(r.get("failure")) or int(r.get("infra_attempts") or 1) > RETRY_LIMIT
    }
    row.final = len(final)
    row.duplicated = sum(1 for n in kubelet.scored_writes.values() if n > 1)
    row.retries = len(kubelet.seen) - row.planned
    row.categories = dict(collections.Counter(r.get("failure") or "passed" for r in final.values()))
    counts = status.get("counts") or {}
    if counts.get("finished") != row.final:
        row.notes.append(f"status says {counts.get('finished')} finished")
    if terminating:
        row.notes.append(f"{len(terminating)} pod(s) left Terminating")
    if kubelet.failed_writes:
        row.notes.append(f"{kubelet.failed_writes} runner record write(s) failed")
    if kubelet.touched:
        row.notes.append(f"{len(kubelet.touched)} trial(s) hit")
    row.recover = recovery(fault, kubelet, kills, progress, records)
    twice = sum(1 for n in kubelet.names.values() if n > 1)
    if twice:
        row.notes.append(f"{twice} pod name(s) created twice")
    errors = sum(1 for line in ops.log.read_text(errors="replace").splitlines() if "[ERROR" in line)
    if errors:
        row.notes.append(f"{errors} operator ERROR log line(s)")
    if kills:
        row.notes.append(f"{len(kills)} kill(s)")
    return row


async def s3_outage(proxy: TcpProxy, window: Window) -> None:
    await asyncio.sleep(max(0.0, window.start - time.time()))
    proxy.down()
    await asyncio.sleep(max(0.0, window.end - time.time()))
    proxy.up()


def first_act(kubelet: FaultKubelet, changes: list[tuple[float, Any]], since: float) -> float | None:
    """When the operator first acted after ``since``: a trial pod created, or the run's status counts changed."""
    acts = [t for t, _ in kubelet.created if t > since] + [t for t, _ in changes if t > since]
    return min(acts) if acts else None


async def kill_operator(
    ops: Operators,
    seed: int,
    kills: list[tuple[float, float, float]],
    kubelet: FaultKubelet,
    progress: list[tuple[float, Any]],
) -> None:
    """SIGKILL the operator a seeded 0.3-3 s after it (re)started working, then start another 1 s later."""
    r = rng(seed, "kills")
    since = time.time() - 1.0
    for _ in range(KILLS):
        while first_act(kubelet, progress, since) is None:
            await asyncio.sleep(0.05)
        await asyncio.sleep(r.uniform(0.3, 3.0))
        proc = ops.procs[-1]
        if proc.poll() is not None:
            return
        killed = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        await asyncio.sleep(1.0)
        restarted = time.time()
        await ops.start()
        kills.append((killed, restarted, time.time()))
        since = restarted


def recovery(
    fault: str,
    kubelet: FaultKubelet,
    kills: list[tuple[float, float, float]],
    progress: list[tuple[float, Any]],
    records: dict[str, dict[str, Any]],
) -> str:
    """The fault's own time to recover (see LEGEND)."""

    def settled(tid: str) -> float | None:
        rec = records.get(tid)
        return ts(rec["finished_at"]) if rec and rec.get("finished_at") else None

    if fault == "operator-kill" and kills:
        gaps = []
        for killed, restarted, watching in kills:
            acted = first_act(kubelet, progress, restarted)
            gaps.append(((acted or math.inf) - killed, watching - restarted))
        worst = max(gaps)
        return f"{worst[0]:.1f} s worst of {len(gaps)} (process start {worst[1]:.1f} s)"
    if fault in ("s3-outage", "llm-burst", "mcp-crash"):
        hit = [settled(t) for t in kubelet.touched]
        if not hit:
            return "nothing hit"
        ends = [t for t in hit if t is not None]
        return f"{max(ends) - kubelet.window.end:.1f} s" if ends else "never"
    if fault in ("pod-delete", "pod-stuck"):
        waits = [(settled(t) or math.inf) - at for t, at in kubelet.touched.items()]
        return f"{max(waits):.1f} s (worst of {len(waits)})" if waits else "nothing hit"
    return "-"


LEGEND = """Time to recover: operator-kill, the longest time from a SIGKILL to the restarted operator's first act
(a trial pod created, or the run's status counts changed; 1 s of it the operator is down, "process start" is
from its exec to its EvalRun watch); s3-outage, llm-burst, mcp-crash, from the end of the fault window to the
final record of the last trial it hit; pod-delete and pod-stuck, the longest time from a pod's deletion (its node
going silent) to its trial's final record. A final record is a scored one, or a not-scored one past
retries.limit."""


def table(rows: list[Row]) -> str:
    base = next((r.makespan for r in rows if r.fault == "baseline"), None)
    out = [
        "| fault | planned | final records | lost | duplicated | retries | categories recorded | makespan "
        "| vs baseline | time to recover | phase | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cats = ", ".join(f"{k} {v}" for k, v in sorted(r.categories.items(), key=lambda kv: -kv[1]))
        delta = f"{r.makespan - base:+.1f} s" if base is not None and r.fault != "baseline" else "-"
        out.append(
            f"| {r.fault} | {r.planned} | {r.final} | {r.lost} | {r.duplicated} | {r.retries} | {cats} "
            f"| {r.makespan:.1f} s | {delta} | {r.recover} | {r.phase} | {'; '.join(r.notes)} |"
        )
    return "\n".join(out)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200, help="trials per row (2 models x trials/8 tasks x 4 attempts)")
    ap.add_argument("--only", nargs="+", choices=FAULTS, help="run only these rows (in this order)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fault-at", type=float, default=4.0, help="windows start this long after the EvalRun")
    ap.add_argument("--window", type=float, default=2.0, help="LLM burst and MCP crash window, seconds")
    ap.add_argument("--s3-window", type=float, default=8.0, help="S3 outage, seconds")
    ap.add_argument("--timeout", type=float, default=240.0, help="give a row up after this long")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mcpfleet-faults-"))
    rows: list[Row] = []
    load = os.getloadavg()
    with moto_endpoint() as moto:
        proxy = TcpProxy(moto)
        for fault in args.only or FAULTS:
            row = await one_row(fault, args, moto, proxy, work)
            print(
                f"{fault}: {row.phase} in {row.makespan:.1f} s, lost {row.lost}, duplicated {row.duplicated}",
                flush=True,
            )
            rows.append(row)
    end_load = os.getloadavg()
    print(
        f"\n{rows[0].planned} trials per row (2 models x {rows[0].planned // 8} tasks x 4 attempts), capacity "
        f"{CAPACITY}, retries.limit {RETRY_LIMIT}, trial times 0.5-2 s (seeded, seed {args.seed}); load average "
        f"{load[0]:.1f} at start, {end_load[0]:.1f} at the end, {os.cpu_count()} CPUs\n"
    )
    print(table(rows))
    print("\n" + LEGEND)
    print(f"\nwork folder {work} (operator logs)")
    bad = [r.fault for r in rows if r.lost or r.duplicated]
    if bad:
        print(f"\nFAILED: trials lost or duplicated in {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
