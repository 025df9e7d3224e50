"""Offline launch-order simulation: the operator's own RunState/WaitQueue in simulated time, no I/O.

An event-driven list schedule: whenever slots are free (and the create-rate bucket has tokens), the real
``RunState.next_launches`` picks what to launch; each trial then runs for its drawn duration (plus an optional
per-trial overhead: pod start, record read) and ``RunState.finished`` teaches the queue its pod time, as the
reconciler does. Durations come from bench_sweep's ``Durations`` (MCPMark-like, seeded), so this predicts what
the launch order alone costs bench_sweep's real run, in seconds rather than minutes.

    .venv/bin/python bench/sim_sweep.py [--seeds 1 2 3 4 5] [--capacity 500 5080] [--create-rate 200]
        [--overhead 0] [--policy plan elapsed learned]
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from mcpfleet.operator.runstate import RunState, WaitQueue  # noqa: E402
from mcpfleet.runner.spec.trial import TrialSpec  # noqa: E402

MEAN_TRIAL_S = 475.0  # ~67 h for 127 tasks x 4 attempts, serial (FIELD-NOTES)
TIMEOUT_S = 3600.0  # MCPMark's per-run timeout caps a trial
DEFAULT_SEED = 20251123


class Durations:
    """Seeded trial durations (seconds, already scaled): task base x model factor x trial noise, capped."""

    def __init__(self, scale: float, seed: int = DEFAULT_SEED) -> None:
        self.scale = scale
        self.seed = seed
        # lognormal(mu, sigma) has mean exp(mu + sigma^2/2): pick mu so the product's mean is MEAN_TRIAL_S.
        self.task_sigma, self.model_sigma, self.noise_sigma = 0.9, 0.25, 0.35
        total_var = self.task_sigma**2 + self.model_sigma**2 + self.noise_sigma**2
        self.mu = math.log(MEAN_TRIAL_S) - total_var / 2

    def _rng(self, *key: object) -> random.Random:
        digest = hashlib.sha256(repr((self.seed, *key)).encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def of(self, trial: TrialSpec) -> float:
        noise = self._rng("trial", trial.trial_id).gauss(0, self.noise_sigma)
        return min(TIMEOUT_S, math.exp(self._level(trial) + noise)) / self.scale

    def expected(self, trial: TrialSpec) -> float:
        """What a scheduler knowing every task's and model's true speed, but not each trial's luck, would expect
        (the median: what longest-expected-first orders by)."""
        return min(TIMEOUT_S, math.exp(self._level(trial))) / self.scale

    def _level(self, trial: TrialSpec) -> float:
        return self._level_of(trial.task_id, trial.model.name)

    def _level_of(self, task_id: str, model: str) -> float:
        task = self._rng("task", task_id).gauss(0, self.task_sigma)
        return self.mu + task + self._rng("model", model).gauss(0, self.model_sigma)

    def earlier_run(self, task_ids: list[str], models: int, attempts: int) -> list[tuple[str, str, float]]:
        """An earlier, smaller sweep of the same tasks with other models (``earlier-<i>``), times drawn alike:
        what ``spec.launchOrder.learnFrom`` hands the queue."""
        out = []
        for task_id in sorted(set(task_ids)):
            for m in range(models):
                for a in range(attempts):
                    model = f"earlier-{m}"
                    noise = self._rng("earlier", task_id, model, a).gauss(0, self.noise_sigma)
                    out.append((task_id, model, min(TIMEOUT_S, math.exp(self._level_of(task_id, model) + noise))))
        return [(t, m, s / self.scale) for t, m, s in out]


def list_schedule(order: list[float], capacity: int) -> float:
    """Makespan of greedy list scheduling: each job, in order, starts on the first free slot."""
    slots = [0.0] * min(capacity, max(1, len(order)))
    heapq.heapify(slots)
    end = 0.0
    for d in order:
        start = heapq.heappop(slots)
        end = max(end, start + d)
        heapq.heappush(slots, start + d)
    return end


def lower_bound(lengths: Mapping[str, float], capacity: int) -> float:
    """The issue's bound: no schedule beats the longest trial, nor the total work spread over every slot."""
    return max(max(lengths.values()), sum(lengths.values()) / capacity)


class PlanOrder(WaitQueue):
    """What the operator did first: the plan's order (longest oracle first, attempts together), no learning."""

    def candidates(self, now: float) -> Iterator[tuple[str, list[str]]]:
        yield from self.front_candidates()
        for task in sorted(self.by_task, key=self.rank.__getitem__):
            yield from self.drain(task)

    def _key(self, tid: str) -> tuple[bool, float, int, int]:
        return (False, 0.0, 0, self.pos[tid])

    def front_candidates(self) -> Iterator[tuple[str, list[str]]]:
        while self.front:
            before = self.size
            yield self.task_of[self.front[0]], [self.front[0]]
            if self.size == before:
                return

    def drain(self, task: str) -> Iterator[tuple[str, list[str]]]:
        """A task's trials one after another, until it has none left or none can launch."""
        while task in self.by_task:
            before = self.size
            yield task, self.by_task[task]
            if self.size == before:
                return


class ElapsedOrder(PlanOrder):
    """The operator's previous order: probes first, then tasks longest-expected first with their trials
    together, a task's expectation being the mean pod time of its finished trials or, while it has none, how
    long its oldest running trial has run so far."""

    def __init__(self, order: list[str], task_of: dict[str, str], model_of: dict[str, str]) -> None:
        super().__init__(order, task_of, model_of)
        self.durations: dict[str, tuple[float, int]] = {}  # task -> (sum of pod seconds, finished trials)

    def observe(self, tid: str, seconds: float) -> None:
        super().observe(tid, seconds)
        total, n = self.durations.get(self.task_of[tid], (0.0, 0))
        self.durations[self.task_of[tid]] = (total + seconds, n + 1)

    def candidates(self, now: float) -> Iterator[tuple[str, list[str]]]:
        yield from self.front_candidates()
        for task in sorted((t for t in self.by_task if t not in self.started), key=self.rank.__getitem__):
            if task in self.by_task:
                yield task, self.by_task[task]

        def expected(task: str) -> float:
            total, n = self.durations.get(task, (0.0, 0))
            if n:
                return total / n
            return now - min(self.running[task].values()) if task in self.running else 0.0

        for task in sorted(self.by_task, key=lambda t: (-expected(t), self.rank[t])):
            yield from self.drain(task)


POLICIES: dict[str, type[WaitQueue]] = {
    "plan": PlanOrder,
    "elapsed": ElapsedOrder,
    "learned": WaitQueue,
    "history": WaitQueue,  # learned, handed an earlier run's trial times first (--history)
}


def known_speeds(expected: Mapping[str, float]) -> type[WaitQueue]:
    """The floor a launch order that does not know each trial's own luck faces: longest expected first, knowing
    every task's and model's true speed from the start (``expected``: trial id -> its expected length)."""

    class KnownSpeeds(PlanOrder):
        def candidates(self, now: float) -> Iterator[tuple[str, list[str]]]:
            yield from self.front_candidates()
            waiting = [tid for trials in self.by_task.values() for tid in trials]
            for tid in sorted(waiting, key=lambda t: -expected[t]):
                yield self.task_of[tid], [tid]

    return KnownSpeeds


@dataclass
class Result:
    makespan: float
    bound: float
    decisions: int  # next_launches calls
    launches: int
    decide_s: float  # wall seconds inside next_launches, all calls
    worst_decide_s: float
    order: list[str]  # trial ids in launch order


def simulate(
    trials: list[TrialSpec],
    lengths: Mapping[str, float],
    capacity: int,
    *,
    policy: type[WaitQueue] = WaitQueue,
    create_rate: float | None = None,
    overhead: float = 0.0,
    history: list[tuple[str, str, float]] = (),  # type: ignore[assignment]
) -> Result:
    """Run the plan through RunState in simulated time; ``policy`` swaps the launch order (default: the operator's).

    ``create_rate`` (pods/s) is the operator's token bucket (it starts empty and holds at most a second's worth);
    ``overhead`` seconds are added to every trial's pod time (and so to what the queue learns)."""
    st = RunState.plan(trials, retry_limit=0)
    task_of = {tid: t.task_id for tid, t in st.trials.items()}
    model_of = {tid: t.model.name for tid, t in st.trials.items()}
    st.new_queue = lambda: policy(st.order, task_of, model_of)  # type: ignore[method-assign]
    st.finish_rebuild()
    st.waiting.learn(history)
    models = sorted({t.model.name for t in trials})
    busy = dict.fromkeys(models, 0)
    running: list[tuple[float, str]] = []
    now, tokens, refilled = 0.0, 0.0, 0.0
    decisions = launches = 0
    decide_s = worst = 0.0
    order: list[str] = []
    while len(st.done) < len(trials):
        if create_rate is not None:
            tokens = min(create_rate, tokens + create_rate * (now - refilled))
            refilled = now
        room = capacity - len(running)
        grant = room if create_rate is None else min(room, int(tokens + 1e-9))
        if grant > 0 and st.waiting:
            t0 = time.perf_counter()
            picks = st.next_launches(grant, {m: capacity - busy[m] for m in models}, now)
            dt = time.perf_counter() - t0
            decisions += 1
            decide_s += dt
            worst = max(worst, dt)
            tokens -= len(picks)
            for trial, retry in picks:
                st.launched(trial, trial.trial_id, retry, now)
                busy[trial.model.name] += 1
                order.append(trial.trial_id)
                heapq.heappush(running, (now + lengths[trial.trial_id] + overhead, trial.trial_id))
            launches += len(picks)
        wake = running[0][0] if running else math.inf
        if create_rate is not None and st.waiting and len(running) < capacity and tokens < 1:
            wake = min(wake, now + max(1.0 - tokens, 1e-6) / create_rate)
        if wake == math.inf:
            raise RuntimeError(f"stuck at {now:.1f} s with {len(st.waiting)} trials waiting")
        now = wake
        while running and running[0][0] <= now:
            end, tid = heapq.heappop(running)
            busy[st.trials[tid].model.name] -= 1
            st.finished(tid, {"passed": True}, now=end)
    return Result(now, lower_bound(lengths, capacity), decisions, launches, decide_s, worst, order)


def sweep_trials(work: Path, models: int, tasks: int, attempts: int) -> list[TrialSpec]:
    """The plan bench_sweep runs: ``models`` x ``tasks`` (copies of one tiny task) x ``attempts``."""
    from bench_operator import spec
    from conftest import make_tiny_pack

    from mcpfleet.runner.plan.expand import plan
    from mcpfleet.runner.spec.load import parse_evalrun

    pack = make_tiny_pack(work / "pack", tasks=tasks)
    return plan(parse_evalrun(spec("sim", pack, work / "out", models, attempts, 1)), work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--tasks", type=int, default=127)
    ap.add_argument("--attempts", type=int, default=4)
    ap.add_argument("--seeds", type=int, nargs="+", default=[DEFAULT_SEED, 1, 2, 3, 4], help="Durations seeds")
    ap.add_argument("--capacity", type=int, nargs="+", default=[500, 5080])
    ap.add_argument("--create-rate", type=float, help="operator pod creations per second (default: unlimited)")
    ap.add_argument("--overhead", type=float, default=0.0, help="seconds added to every trial's pod time")
    ap.add_argument("--scale", type=float, default=100.0, help="divide MCPMark-like durations by this")
    ap.add_argument("--policy", nargs="+", choices=list(POLICIES), default=list(POLICIES))
    ap.add_argument(
        "--history",
        type=int,
        nargs=2,
        default=[2, 1],
        metavar=("MODELS", "ATTEMPTS"),
        help="the 'history' order's earlier run: this many other models x attempts of every task",
    )
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as work:
        trials = sweep_trials(Path(work), args.models, args.tasks, args.attempts)
    print(
        f"{len(trials)} trials ({args.models} models x {args.tasks} tasks x {args.attempts} attempts), durations "
        f"MCPMark-like / {args.scale:g}, create rate {args.create_rate or 'unlimited'}, overhead {args.overhead:g} s\n"
    )
    print(
        "| capacity | seed | lower bound | "
        + " | ".join(args.policy)
        + " | known speeds | decision cost (last policy) |"
    )
    print("|---|---|---|" + "---|" * len(args.policy) + "---|---|")
    excess: dict[tuple[int, str], list[float]] = {}
    for capacity in args.capacity:
        for seed in args.seeds:
            durations = Durations(args.scale, seed)
            lengths = {t.trial_id: durations.of(t) for t in trials}
            cells, last = [], None
            earlier = durations.earlier_run([t.task_id for t in trials], *args.history)
            for name in args.policy:
                last = simulate(
                    trials,
                    lengths,
                    capacity,
                    policy=POLICIES[name],
                    create_rate=args.create_rate,
                    overhead=args.overhead,
                    history=earlier if name == "history" else [],
                )
                excess.setdefault((capacity, name), []).append(100 * (last.makespan / last.bound - 1))
                cells.append(f"{last.makespan:.1f} s ({excess[(capacity, name)][-1]:+.1f}%)")
            assert last is not None
            known = known_speeds({t.trial_id: durations.expected(t) for t in trials})
            floor = simulate(
                trials, lengths, capacity, policy=known, create_rate=args.create_rate, overhead=args.overhead
            ).makespan
            excess.setdefault((capacity, "known speeds"), []).append(100 * (floor / last.bound - 1))
            cost = (
                f"{1e6 * last.decide_s / max(1, last.launches):.0f} us/launch, {last.decisions} calls, "
                f"worst {1e3 * last.worst_decide_s:.1f} ms"
            )
            print(
                f"| {capacity} | {seed} | {last.bound:.1f} s | "
                + " | ".join(cells)
                + f" | {floor:.1f} s ({excess[(capacity, 'known speeds')][-1]:+.1f}%) | {cost} |"
            )
    if len(args.seeds) > 1:
        print("\n| capacity | order | median over seeds | worst | seeds within 5% |\n|---|---|---|---|---|")
        for (capacity, name), xs in excess.items():
            print(
                f"| {capacity} | {name} | {statistics.median(xs):+.1f}% | {max(xs):+.1f}% "
                f"| {sum(x <= 5.0 for x in xs)} of {len(xs)} |"
            )


if __name__ == "__main__":
    main()
