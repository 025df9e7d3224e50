"""Scale simulation: a 10-model x 127-task x 4-attempt sweep (5,080 trials) through the real operator.

The operator runs as its own process against tests/kubeemu.py's emulator; a *timed kubelet* stands in for
the nodes: every trial pod "runs" for a duration drawn from a realistic distribution, then the kubelet writes
the trial's record (as the runner would) and marks the pod Succeeded. Durations are MCPMark-like, scaled
down: FIELD-NOTES puts a k=4 gpt-5 sweep of the 127 tasks at ~67 h, i.e. ~475 s per trial on average, with
the 3,600 s agent timeout as the cap. Each task gets a lognormal base time (some tasks are long for every
model), each model a speed factor, each trial lognormal noise; all seeded, so every run draws the same
durations. Divided by --scale (default 100, as the issue asks: ~4 min for both capacities). The creation rate
is not scaled with it: at 100x, 200 pods/s is 2 pods/s of real trial time, a tenth of the operator's default;
at --scale 10 (~30 min with --history) it is the default's 20 pods/s, which is how README's headline figures
were measured: `--scale 10 --history 2 1`.

What is printed, per capacity (MCPFLEET_MAX_PODS), side by side in one go:
- the lower bound: max(longest trial, total work / capacity) (the issue's), and the same bound also counting
  the operator's pod creation rate (N / create rate), which no scheduler can beat either;
- an ideal list schedule: the operator's own launch order replayed offline with zero overhead (what its
  ordering alone costs against the bound);
- CPU seconds of the operator process and of this process (the emulated API server and the kubelet share
  it, and its GIL: when it nears the makespan, the emulator, not the operator, is the bottleneck);
- when the last trial finished, and the measured makespan (EvalRun created -> phase Succeeded, which includes
  reading every record back into summary.json), and the operator's overhead (measured - ideal).

    .venv/bin/python bench/bench_sweep.py [--models 10 --tasks 127 --attempts 4] [--capacity 500 5080]
        [--create-rate 200] [--scale 100] [--history MODELS ATTEMPTS] [--json FILE]
    .venv/bin/python bench/bench_sweep.py --scale 10 --history 2 1   # README's figures
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from bench_operator import NS, InstantKubelet, spec  # noqa: E402
from conftest import make_tiny_pack  # noqa: E402
from kubeemu import operator_crds, running_emulator  # noqa: E402
from sim_sweep import MEAN_TRIAL_S, TIMEOUT_S, Durations, list_schedule  # noqa: E402

from mcpfleet.operator.settings import OperatorSettings  # noqa: E402
from mcpfleet.runner.plan.expand import plan  # noqa: E402
from mcpfleet.runner.results.store import LocalStore  # noqa: E402
from mcpfleet.runner.spec.load import parse_evalrun  # noqa: E402
from mcpfleet.runner.spec.trial import TrialSpec  # noqa: E402


class TimedKubelet(InstantKubelet):
    """Runs each trial pod for its drawn duration before finishing it; remembers when each pod arrived."""

    def __init__(self, url: str, out: Path, durations: Durations) -> None:
        super().__init__(url, out)
        self.durations = durations
        self.arrivals: list[tuple[float, str]] = []
        self.last_done = 0.0

    async def finish(self, pod: dict[str, Any]) -> None:
        runner = pod["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in runner["env"]}
        trial = TrialSpec.model_validate_json(env["MCPFLEET_TRIAL"])
        self.arrivals.append((time.perf_counter(), trial.trial_id))
        await asyncio.sleep(self.durations.of(trial))
        await super().finish(pod)
        self.last_done = max(self.last_done, time.perf_counter())


async def operator_settled(log: Path, timeout: float = 60.0) -> None:
    """Wait until the operator's startup activity has run, then 2 x its settle time and a little more."""
    settle_s = OperatorSettings.from_env().peering_settle_seconds
    deadline = time.monotonic() + timeout
    while b"Activity 'startup' succeeded" not in log.read_bytes():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the operator did not start: see {log}")
        await asyncio.sleep(0.1)
    await asyncio.sleep(2 * settle_s + 0.5)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def write_earlier_run(root: Path, samples: list[tuple[str, str, float]]) -> None:
    """An earlier sweep's records (what spec.launchOrder.learnFrom reads): one per (task, model, seconds)."""
    store = LocalStore(root)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for i, (task, model, seconds) in enumerate(samples):
        tid = f"earlier.{i}"
        rec = {"trial_id": tid, "task_id": task, "model": model, "passed": True, "failure": None}
        rec |= {"started_at": start.isoformat(), "finished_at": (start + timedelta(seconds=seconds)).isoformat()}
        store.commit(tid, json.dumps(rec).encode())


async def one_run(
    args: argparse.Namespace, capacity: int, work: Path, pack: Path, history: tuple[int, int] | None
) -> dict[str, Any]:
    name = f"sweep-{capacity}" + ("-history" if history else "")
    out = work / f"out-{name}"
    body = spec(name, pack, out, args.models, args.attempts, capacity)
    trials = plan(parse_evalrun(body), work)
    durations = Durations(args.scale)
    if history:
        write_earlier_run(out / "earlier" / "uid-0", durations.earlier_run([t.task_id for t in trials], *history))
        body["spec"]["launchOrder"] = {"learnFrom": ["earlier"]}
    by_id = {t.trial_id: durations.of(t) for t in trials}
    n = len(trials)
    total = sum(by_id.values())
    longest = max(by_id.values())
    bound = max(longest, total / capacity)
    with running_emulator(crds=operator_crds()) as kube:
        env = {
            **os.environ,
            "KUBECONFIG": str(kube.kubeconfig_path),
            "MCPFLEET_CREATE_RATE": str(args.create_rate),
            "MCPFLEET_MAX_PODS": str(capacity),
            "MCPFLEET_STATUS_INTERVAL": "2",
        }
        log_path = work / f"operator-{name}.log"
        with open(log_path, "wb") as log:
            op = subprocess.Popen(
                [str(Path(sys.executable).with_name("mcpfleet")), "operator", "-n", NS],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd="/",
            )
            kubelet = TimedKubelet(kube.url, out, durations)
            ktask = asyncio.create_task(kubelet.run())
            try:
                # Up, and past its start-up settle window (2 x peering_settle_seconds, in which a new run waits for
                # replicas starting together to see each other): a sweep meets a long-running operator.
                await operator_settled(log_path)
                kube.emulator.reset_counts()
                op_cpu0, own_cpu0 = cpu_seconds(op.pid), own_cpu_seconds()
                start = time.perf_counter()
                kube.create(body)
                phase = None
                while time.perf_counter() - start < args.timeout:
                    await asyncio.sleep(0.25)
                    status = (kube.get("evalruns", NS, name) or {}).get("status") or {}
                    phase = status.get("phase")
                    if phase in ("Succeeded", "Failed"):
                        break
                    if op.poll() is not None:
                        raise RuntimeError(f"operator exited: see {log_path}")
                makespan = time.perf_counter() - start
                op_cpu, own_cpu = cpu_seconds(op.pid) - op_cpu0, own_cpu_seconds() - own_cpu0
                counts = dict(kube.emulator.request_counts)
                events = [e.get("reason") for e in kube.emulator.objects("events", NS)]
            finally:
                ktask.cancel()
                op.terminate()
                op.wait(timeout=30)
    arrivals = sorted(kubelet.arrivals)
    ideal = list_schedule([by_id[tid] for _, tid in arrivals], capacity)
    creates = sum(c for (verb, res), c in counts.items() if verb == "create" and res == "pods")
    return {
        "capacity": capacity,
        "history": f"{history[0]} models x {history[1]}" if history else "none",
        "history_events": events.count("LaunchHistory"),
        "trials": n,
        "phase": phase,
        "pods": creates,
        "longest": longest,
        "work": total,
        "bound": bound,
        "bound_rate": max(bound, n / args.create_rate),
        "ideal": ideal,
        "makespan": makespan,
        "last_done": kubelet.last_done - start,
        "operator_cpu": op_cpu,
        "emulator_cpu": own_cpu,
        "first_pod": (arrivals[0][0] - start) if arrivals else float("nan"),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--tasks", type=int, default=127)
    ap.add_argument("--attempts", type=int, default=4)
    ap.add_argument("--capacity", type=int, nargs="+", default=[500, 5080])
    ap.add_argument("--create-rate", type=float, default=200.0, help="operator pod creations per second")
    ap.add_argument("--scale", type=float, default=100.0, help="divide MCPMark-like durations by this")
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument(
        "--history",
        type=int,
        nargs=2,
        metavar=("MODELS", "ATTEMPTS"),
        help="also run each capacity with spec.launchOrder.learnFrom naming an earlier sweep of the same tasks by "
        "MODELS other models x ATTEMPTS (its records drawn like the run's), side by side with the run without",
    )
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mcpfleet-sweep-"))
    pack = make_tiny_pack(work / "pack", tasks=args.tasks)
    histories: list[tuple[int, int] | None] = [None, tuple(args.history)] if args.history else [None]
    rows = [await one_run(args, c, work, pack, h) for c in args.capacity for h in histories]
    n = rows[0]["trials"]
    print(
        f"\n{n} trials ({args.models} models x {args.tasks} tasks x {args.attempts} attempts), durations "
        f"MCPMark-like / {args.scale:g} (mean {MEAN_TRIAL_S / args.scale:.2f} s, cap {TIMEOUT_S / args.scale:.0f} s), "
        f"create rate {args.create_rate:g}/s\n"
    )
    print(
        "| capacity | earlier run | phase | pods created | lower bound | bound incl. create rate "
        "| ideal (operator's order) | last trial done | measured makespan | vs bound | vs rate-aware bound "
        "| operator overhead | first pod after | operator CPU | emulator + kubelet CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["history"] != "none" and not r["history_events"]:
            print(f"capacity {r['capacity']}: the operator posted no LaunchHistory event: the earlier run was not read")
        print(
            f"| {r['capacity']} | {r['history']} | {r['phase']} | {r['pods']} | {r['bound']:.1f} s "
            f"| {r['bound_rate']:.1f} s "
            f"| {r['ideal']:.1f} s | {r['last_done']:.1f} s | {r['makespan']:.1f} s "
            f"| {100 * (r['makespan'] / r['bound'] - 1):+.1f}% "
            f"| {100 * (r['makespan'] / r['bound_rate'] - 1):+.1f}% | {r['makespan'] - r['ideal']:.1f} s "
            f"| {r['first_pod']:.2f} s | {r['operator_cpu']:.1f} s | {r['emulator_cpu']:.1f} s |"
        )
    print(f"\nwork folder {work}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
