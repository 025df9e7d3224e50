"""Operator benchmark: a 10,000-trial EvalRun through the real operator against the API emulator.

The operator runs as its own process (`mcpfleet operator`), exactly as in a cluster; the API server is
tests/kubeemu.py's emulator; an *instant kubelet* stands in for the nodes: for every new trial pod it
writes the trial's record to the store (as the runner would) and marks the pod Succeeded with the
runner's termination message. So the numbers are the operator's own costs: planning, API traffic,
memory, status size and trials per second.

    .venv/bin/python bench/bench_operator.py [--tasks 100 --models 2 --attempts 50] [--runs 1] [--concurrency 500]
        [--baseline DIR]

``--runs N`` drives N such EvalRuns at once (100,000 trials over 10 runs: ``--runs 10``); ``--baseline DIR`` first
measures the code of another checkout (``git worktree add DIR main``) the same way, and prints both side by side.
Each side's operator imports its own checkout (PYTHONPATH), whatever the venv's editable install points at.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import make_tiny_pack  # noqa: E402
from kubeemu import operator_crds, running_emulator  # noqa: E402

from mcpfleet.runner.plan.expand import plan  # noqa: E402
from mcpfleet.runner.results.records import TrialResult, dumps, now_iso  # noqa: E402
from mcpfleet.runner.results.store import LocalStore  # noqa: E402
from mcpfleet.runner.spec.load import parse_evalrun  # noqa: E402
from mcpfleet.runner.spec.trial import TrialSpec  # noqa: E402

NS = "default"


def spec(name: str, pack: Path, out: Path, models: int, attempts: int, concurrency: int) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "models": [{"name": f"m{i}", "model": "scripted/oracle"} for i in range(models)],
            "tasks": {"path": str(pack)},
            "attempts": attempts,
            "concurrency": {"total": concurrency},
            "output": {"uri": str(out)},
        },
    }


class InstantKubelet:
    """Finishes every new trial pod at once: record first (like the runner), then the pod's status."""

    def __init__(self, url: str, out: Path):
        self.url, self.out = url, out
        self.seen: set[str] = set()
        self.in_flight = 0
        self.max_in_flight = 0
        self.stores: dict[tuple[str, str], LocalStore] = {}

    def store(self, run: str, uid: str) -> LocalStore:
        if (run, uid) not in self.stores:
            self.stores[(run, uid)] = LocalStore(self.out / run / uid)
        return self.stores[(run, uid)]

    async def run(self) -> None:
        async with aiohttp.ClientSession() as session:
            self.session = session
            pending: set[asyncio.Task[None]] = set()
            rv = ""
            while True:
                params = {"watch": "true", "timeoutSeconds": "300"}
                if rv:
                    params["resourceVersion"] = rv
                async with session.get(
                    f"{self.url}/api/v1/namespaces/{NS}/pods",
                    params=params,
                    timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
                ) as r:
                    async for line in r.content:
                        ev = json.loads(line)
                        pod = ev["object"]
                        rv = pod["metadata"].get("resourceVersion", rv)
                        if ev["type"] == "DELETED":
                            if pod["metadata"]["uid"] in self.seen:
                                self.in_flight -= 1
                            continue
                        if ev["type"] == "ADDED" and pod["metadata"]["uid"] not in self.seen:
                            self.seen.add(pod["metadata"]["uid"])
                            self.in_flight += 1
                            self.max_in_flight = max(self.max_in_flight, self.in_flight)
                            t = asyncio.create_task(self.finish(pod))
                            pending.add(t)
                            t.add_done_callback(pending.discard)

    async def finish(self, pod: dict[str, Any]) -> None:
        runner = pod["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in runner["env"]}
        trial = TrialSpec.model_validate_json(env["MCPFLEET_TRIAL"])
        passed = int(hashlib.sha256(trial.trial_id.encode()).hexdigest(), 16) % 3 != 0
        now = now_iso()
        result = TrialResult(
            **trial.record_identity(),
            passed=passed,
            failure=None if passed else "verifier_failed",
            started_at=now,
            finished_at=now,
        )
        store = self.store(trial.run, env["MCPFLEET_RUN_UID"])
        await asyncio.to_thread(store.commit, trial.trial_id, dumps(result.model_dump(mode="json")))
        message = json.dumps({"trial_id": trial.trial_id, "passed": passed, "failure": result.failure})
        status = {
            "status": {
                "phase": "Succeeded",
                "containerStatuses": [
                    {
                        "name": "runner",
                        "ready": False,
                        "restartCount": 0,
                        "image": runner["image"],
                        "imageID": "",
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": message}},
                    }
                ],
            }
        }
        async with self.session.patch(
            f"{self.url}/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/status",
            data=json.dumps(status),
            headers={"Content-Type": "application/merge-patch+json"},
        ) as r:
            if r.status not in (200, 404):
                raise RuntimeError(f"status patch failed: {r.status} {await r.text()}")


def rss_kib(pid: int) -> tuple[int, int]:
    """(current RSS, peak RSS) in KiB from /proc."""
    cur = peak = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    return cur, peak


def code_path(repo: Path, into: Path) -> dict[str, str]:
    """The environment that makes a subprocess import mcpfleet from ``repo`` (a checkout, or a ``git worktree`` of
    an older commit), whatever the venv's editable install points at: a folder of links as the package layout."""
    pkg = into / "mcpfleet"
    pkg.mkdir(parents=True, exist_ok=True)
    for name in ("runner", "operator", "sites"):
        (pkg / name).symlink_to(repo / name)
    return {"PYTHONPATH": str(into)}


async def measure(args: argparse.Namespace, repo: Path, work: Path) -> dict[str, Any]:
    """One operator (imported from ``repo``) driving ``args.runs`` EvalRuns at once to their end: its costs."""
    pack = make_tiny_pack(work / "pack", tasks=args.tasks)
    out = work / "out"
    names = [f"sweep-{i}" for i in range(args.runs)]
    bodies = [spec(name, pack, out, args.models, args.attempts, args.concurrency) for name in names]
    per_run = args.tasks * args.models * args.attempts
    n = per_run * args.runs

    t = time.perf_counter()
    trials = plan(parse_evalrun(bodies[0]), work)
    plan_s = time.perf_counter() - t
    assert len(trials) == per_run
    del trials

    with running_emulator(crds=operator_crds()) as kube:
        env = {
            **os.environ,
            **code_path(repo, work / "code"),
            "KUBECONFIG": str(kube.kubeconfig_path),
            "MCPFLEET_CREATE_RATE": str(args.create_rate),
            "MCPFLEET_MAX_PODS": str(args.concurrency),
            "MCPFLEET_STATUS_INTERVAL": "2",
        }
        op = subprocess.Popen(
            [str(Path(sys.executable).with_name("mcpfleet")), "operator", "-n", NS],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(work / "operator.log", "wb"),
            cwd="/",
        )
        kubelet = InstantKubelet(kube.url, out)
        ktask = asyncio.create_task(kubelet.run())
        try:
            await asyncio.sleep(3)  # operator up and watching
            base_rss = rss_kib(op.pid)[0]
            kube.emulator.reset_counts()
            start = time.perf_counter()
            for body in bodies:
                kube.create(body)
            max_status, finals, running_rss = 0, {}, 0
            while time.perf_counter() - start < args.timeout:
                await asyncio.sleep(0.5)
                recorded = 0
                for name in names:
                    status = (kube.get("evalruns", NS, name) or {}).get("status") or {}
                    max_status = max(max_status, len(json.dumps(status).encode()))
                    recorded += int((status.get("counts") or {}).get("finished") or 0)
                    if status.get("phase") in ("Succeeded", "Failed"):
                        finals[name] = status
                if recorded < 0.98 * n:  # trials still running (not yet the runs' summaries)
                    running_rss = max(running_rss, rss_kib(op.pid)[0])
                if len(finals) == len(names):
                    break
                if op.poll() is not None:
                    raise RuntimeError(f"operator exited: see {work / 'operator.log'}")
            wall = time.perf_counter() - start
            peak = rss_kib(op.pid)[1]
            counts = dict(kube.emulator.request_counts)
        finally:
            ktask.cancel()
            op.terminate()
            op.wait(timeout=60)

    by_verb: dict[str, float] = collections.defaultdict(float)
    writes = trial_writes = 0
    for (verb, resource), c in counts.items():
        if resource == "pods/status" or verb in ("watch",):
            continue  # the kubelet's own traffic, and long-lived watches
        by_verb[f"{verb} {resource}"] += c
        if verb in ("create", "patch", "update", "delete", "deletecollection"):
            writes += c
            if resource not in ("kopfpeerings",):  # the peering keep-alive: per 10 s, not per trial
                trial_writes += c
    phases = collections.Counter(st.get("phase") for st in finals.values())
    finished = sum(int((st.get("counts") or {}).get("finished") or 0) for st in finals.values())
    return {
        "n": n,
        "phases": dict(phases),
        "finished": finished,
        "plan_s": plan_s,
        "writes": writes / n,
        "trial_writes": trial_writes / n,
        "by_verb": {k: v / n for k, v in sorted(by_verb.items()) if v / n >= 0.0005},
        "max_status": max_status,
        "peak_mb": peak / 1024,
        "idle_mb": base_rss / 1024,
        "running_mb": running_rss / 1024,
        "wall": wall,
        "rate": n / wall,
        "kubelet_max": kubelet.max_in_flight,
    }


ROWS = (
    ("time to plan one run", lambda m: f"{m['plan_s']:.2f} s", "< 3 s"),
    ("operator API writes per trial", lambda m: f"{m['writes']:.3f}", "<= 2.0"),
    ("&nbsp; without the peering keep-alive", lambda m: f"{m['trial_writes']:.3f}", ""),
    ("largest status", lambda m: f"{m['max_status'] / 1024:.1f} KiB", "bounded"),
    ("operator peak RSS", lambda m: f"{m['peak_mb']:.0f} MB (idle {m['idle_mb']:.0f} MB)", "< 300 MB"),
    ("&nbsp; per trial over idle", lambda m: f"{(m['peak_mb'] - m['idle_mb']) * 1024 / m['n']:.2f} KB", ""),
    ("&nbsp; largest sampled RSS before 98% recorded", lambda m: f"{m['running_mb']:.0f} MB", ""),
    ("wall time", lambda m: f"{m['wall']:.1f} s", ""),
    ("trials per second", lambda m: f"{m['rate']:.1f}", ""),
    ("finished / phases", lambda m: f"{m['finished']} / {m['phases']}", ""),
)


def table(sides: dict[str, dict[str, Any]]) -> str:
    heads = list(sides)
    lines = ["| metric | " + " | ".join(heads) + " | target |", "|---|" + "---|" * (len(heads) + 1)]
    for label, show, target in ROWS:
        lines.append(f"| {label} | " + " | ".join(show(m) for m in sides.values()) + f" | {target} |")
    verbs = sorted({k for m in sides.values() for k in m["by_verb"]})
    for k in verbs:
        lines.append(
            f"| &nbsp; {k} per trial | " + " | ".join(f"{m['by_verb'].get(k, 0):.3f}" for m in sides.values()) + " | |"
        )
    return "\n".join(lines)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--models", type=int, default=2)
    ap.add_argument("--attempts", type=int, default=50)
    ap.add_argument("--runs", type=int, default=1, help="EvalRuns at once, each of tasks x models x attempts")
    ap.add_argument("--concurrency", type=int, default=500)
    ap.add_argument("--create-rate", type=float, default=1000.0)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of older code (e.g. `git worktree add /tmp/base main`): measured first, the same way",
    )
    args = ap.parse_args()

    sides: dict[str, dict[str, Any]] = {}
    for label, repo in ([("baseline", args.baseline.resolve())] if args.baseline else []) + [("this checkout", REPO)]:
        work = Path(tempfile.mkdtemp(prefix="mcpfleet-opbench-"))
        sides[label] = await measure(args, repo, work)
        print(f"{label}: {sides[label]['n']} trials in {sides[label]['wall']:.1f} s (work folder {work})", flush=True)
    n = next(iter(sides.values()))["n"]
    print(
        f"\n{n} trials ({args.runs} run(s) of {args.tasks} tasks x {args.models} models x {args.attempts} attempts), "
        f"concurrency {args.concurrency}, create rate {args.create_rate:g}/s\n"
    )
    print(table(sides))


if __name__ == "__main__":
    asyncio.run(main())
