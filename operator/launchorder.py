"""The order waiting trials launch in: longest expected first, learned from pod times as the run goes.

A sweep's makespan is set by its longest trials: one that starts late ends late. Trial times are unknown
before a run and differ far more between tasks than between models or attempts, so the queue estimates each
task's (log) pod time from what it has seen, and launches the trial with the longest expectation first
(list scheduling's longest-processing-time rule, which lands within a few percent of the lower bound when
lengths are known). What it sees, per task: the pod times of its finished trials, and how long its running
trials have run so far (a trial still running at 20 s says the task takes at least about that long: a long
task is recognised while its trials run, not only once one finishes). Model speed is learned across tasks.
An earlier run's trial times (``spec.launchOrder.learnFrom``) count as finished trials from the start, so a
sweep of tasks run before knows its long ones before it launches anything.

The pure functions below are the statistics; ``WaitQueue`` keeps the counts and caches estimates so that a
launch decision costs a heap operation over tasks, never a pass over every trial.
"""

from __future__ import annotations

import bisect
import collections
import heapq
import math
from collections.abc import Iterable, Iterator, Mapping

SQRT2 = math.sqrt(2.0)
SQRT2PI = math.sqrt(2.0 * math.pi)
# How much task times spread around the run's median (log sd). Agent tasks differ by an order of magnitude:
# MCPMark's per-task times are about lognormal with sd ~0.9. A prior only: one finished trial outweighs it.
PRIOR_SD = 1.0
# How much one trial's time spreads around its task's, once the model's speed is taken out (log sd).
NOISE_SD = 0.45
# Launch by expectation plus this many posterior sds: a task known from one trial may be longer than it
# looked, and one that turns out long and starts late costs more than one that turns out short and starts early.
OPTIMISM = 0.5
FACTOR_SHRINK = 5.0  # a model's speed counts as average until it has a few finished trials
REFIT_GROWTH = 1.1  # refit model speeds each time the finished trials grew by 10%
REFRESH = 0.02  # re-estimate running tasks when the run's clock moved 2% since the last time
# Expectations within 10% of each other count as equal, and of equals the task with the fewest launches goes
# first: tasks known equally little take turns rather than the first of them taking every slot.
TIE = 0.1


def hazard(z: float) -> float:
    """phi(z) / (1 - Phi(z)) of the standard normal, stable in the tail."""
    if z > 8.0:
        return z + 1.0 / z
    return math.exp(-z * z / 2.0) / SQRT2PI / (0.5 * math.erfc(z / SQRT2))


def posterior(
    prior: float, prior_sd: float, noise_sd: float, finished: tuple[int, float], running: Iterable[float]
) -> tuple[float, float]:
    """A task's log time given its finished trials (how many, and the sum of their log times) and its running
    trials' log elapsed times, all with their model's speed taken out: mode and sd of the posterior, prior
    N(prior, prior_sd) and each trial N(task, noise_sd); a running trial only says its time exceeds its elapsed
    one (censored). Newton's method on a concave log density, a few steps from the uncensored answer."""
    n, total = finished
    ls = [x for x in running if x > prior - 6 * prior_sd]  # trials just started say nothing
    p0, pn = 1.0 / prior_sd**2, 1.0 / noise_sd**2
    precision = p0 + n * pn
    x = (prior * p0 + total * pn) / precision
    curvature = precision
    for _ in range(8):
        grad = (prior - x) * p0 + (total - n * x) * pn
        curvature = precision
        for lb in ls:
            z = (lb - x) / noise_sd
            h = hazard(z)
            grad += h / noise_sd
            curvature += h * (h - z) * pn
        step = max(-2.0, min(2.0, grad / curvature))
        x += step
        if abs(step) < 1e-3:
            break
    return x, 1.0 / math.sqrt(curvature)


def model_factors(cells: dict[tuple[str, str], tuple[float, int]], shrink: float = FACTOR_SHRINK) -> dict[str, float]:
    """Each model's log speed factor from (task, model) -> (sum of log times, count): alternating means of
    log time = task + model, the models' factors centred on 0 and shrunk toward it while their counts are low."""
    factor: dict[str, float] = collections.defaultdict(float)
    for _ in range(6):
        by_task: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
        for (task, model), (s, n) in cells.items():
            acc = by_task[task]
            acc[0] += s - n * factor[model]
            acc[1] += n
        level = {task: s / n for task, (s, n) in by_task.items()}
        by_model: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
        for (task, model), (s, n) in cells.items():
            acc = by_model[model]
            acc[0] += s - n * level[task]
            acc[1] += n
        raw = {m: s / (n + shrink) for m, (s, n) in by_model.items()}
        centre = sum(raw.values()) / len(raw) if raw else 0.0
        factor = collections.defaultdict(float, {m: v - centre for m, v in raw.items()})
    return dict(factor)


class WaitQueue:
    """The trials waiting for a pod, and the order they launch in.

    Every task's first trial launches first (a probe: then every task is being measured), longest expected
    first, which is plan order unless an earlier run's times were learned (``learn``): one earlier trial can
    make a long task look short, and its probe, still running, corrects that early. After that the
    waiting trial with the longest expected pod time goes next: its task's posterior log time (see
    ``posterior``; optimistic by ``OPTIMISM`` sds) plus its model's speed. Within a task the slowest model's
    trials go first and a model's attempts stay together, so a run stopped early has whole pass@k evidence for
    every (model, task) pair it launched but those still launching. Tasks known equally little (at the start,
    all of them) take turns, so every task is being measured before any one task takes many slots.
    """

    def __init__(
        self,
        order: Iterable[str],
        task_of: Mapping[str, str],
        model_of: Mapping[str, str],
        pos: Mapping[str, int] | None = None,
        firsts: Iterable[tuple[str, str]] | None = None,
    ) -> None:
        """``order``: the trial ids in plan order; ``task_of``, ``model_of``, ``pos``: each trial's task, model and
        plan position (a run's plan computes them per lookup: nothing is held per trial but the waiting ones);
        ``firsts``: (task, model) in plan order, where each first appears (default: of every trial in ``order``)."""
        self.task_of, self.model_of = task_of, model_of
        self.pos = pos if pos is not None else {tid: i for i, tid in enumerate(order)}
        self.rank: dict[str, int] = {}  # task -> plan position of its first trial (the tie-breaker)
        self.model_rank: dict[str, int] = {}
        for task, model in firsts if firsts is not None else ((task_of[t], model_of[t]) for t in order):
            self.rank.setdefault(task, len(self.rank))
            self.model_rank.setdefault(model, len(self.model_rank))
        self.by_task: dict[str, list[str]] = {}  # waiting trials, launch order first
        self.front: collections.deque[str] = collections.deque()  # put back after a failed create: first
        self.size = 0
        self.started: set[str] = set()  # tasks with a trial launched at least once
        self.launches: collections.Counter[str] = collections.Counter()  # task -> trials taken (tie-break)
        self.begun: dict[str, set[str]] = {}  # task -> models with a trial of it taken
        self.running: dict[str, dict[str, float]] = {}  # task -> trial -> launched at
        self.cells: dict[tuple[str, str], tuple[float, int]] = {}  # (task, model) -> (sum of log pod s, finished)
        self.seen: dict[str, set[str]] = {}  # task -> models with a finished trial of it
        self.factor: dict[str, float] = {}
        self.finished_n = 0
        self.fitted_n = 0
        self.estimate: dict[str, tuple[float, float]] = {}  # task -> (log time, sd): cached
        self.stale: set[str] = set()  # tasks whose cached estimate misses a finished trial
        self.clock: tuple[float, float] | None = None  # (first launch, last full refresh)
        self.prior = 0.0

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __iter__(self) -> Iterator[str]:
        yield from self.front
        for task in sorted(self.by_task, key=self.rank.__getitem__):
            yield from self.by_task[task]

    # -- the waiting trials -------------------------------------------------------------------------
    def _key(self, tid: str) -> tuple[bool, float, int, int]:
        """A task's trials: the models it has begun first (their attempts stay together), then slowest first."""
        model = self.model_of[tid]
        begun = model in self.begun.get(self.task_of[tid], ())
        return (not begun, -self.factor.get(model, 0.0), self.model_rank[model], self.pos[tid])

    def append(self, tid: str) -> None:
        bisect.insort(self.by_task.setdefault(self.task_of[tid], []), tid, key=self._key)
        self.size += 1

    def appendleft(self, tid: str) -> None:
        self.front.append(tid)
        self.size += 1

    def take(self, task: str, tid: str) -> None:
        if self.front and tid in self.front:
            self.front.remove(tid)
        else:
            trials = self.by_task[task]
            trials.remove(tid)
            if not trials:
                del self.by_task[task]
        self.size -= 1
        self.started.add(task)
        self.launches[task] += 1
        self.begun.setdefault(task, set()).add(self.model_of[tid])

    def discard(self, tid: str) -> None:
        task = self.task_of.get(tid)
        if task is not None and (tid in self.front or tid in self.by_task.get(task, ())):
            self.take(task, tid)

    # -- what it learns -----------------------------------------------------------------------------
    def launched(self, tid: str, at: float) -> None:
        self.running.setdefault(self.task_of[tid], {})[tid] = at
        if self.clock is None or at < self.clock[0]:
            self.clock = (at, -math.inf)

    def ended(self, tid: str) -> None:
        task = self.task_of[tid]
        running = self.running.get(task)
        if running is not None and running.pop(tid, None) is not None and not running:
            del self.running[task]

    def observe(self, tid: str, seconds: float) -> None:
        """A trial finished after ``seconds`` in its pod: evidence of its task's length and its model's speed."""
        self._count(self.task_of[tid], self.model_of[tid], seconds)
        if self.finished_n >= self.fitted_n * REFIT_GROWTH + 1:
            self._refit()

    def learn(self, history: Iterable[tuple[str, str, float]]) -> int:
        """Earlier runs' finished trials, (task, model, seconds) each: what the run knows of its tasks' lengths
        before it measures any. Tasks not in this plan are ignored; a model this run does not have still says
        how long a task takes (its speed is fitted with the rest, so an earlier run on slower hardware or with
        other models shifts only its own factor). Returns how many counted."""
        counted = 0
        for task, model, seconds in history:
            if task in self.rank and seconds > 0:
                self._count(task, model, seconds)
                counted += 1
        if counted:
            self._refit()
        return counted

    def _count(self, task: str, model: str, seconds: float) -> None:
        s, n = self.cells.get((task, model), (0.0, 0))
        self.cells[(task, model)] = (s + math.log(max(seconds, 1e-3)), n + 1)
        self.seen.setdefault(task, set()).add(model)
        self.stale.add(task)
        self.finished_n += 1

    def _refit(self) -> None:
        self.fitted_n = self.finished_n
        self.factor = model_factors(self.cells)
        for trials in self.by_task.values():
            trials.sort(key=self._key)
        if self.clock is not None:
            self.clock = (self.clock[0], -math.inf)  # every estimate is stale

    def carry(self, old: WaitQueue) -> None:
        """Keep what ``old`` learned (a rebuild of the same run: its plan may have lost tasks)."""
        for (task, model), (s, n) in old.cells.items():
            if task in self.rank:
                self.cells[(task, model)] = (s, n)
                self.seen.setdefault(task, set()).add(model)
                self.finished_n += n
        self.fitted_n = self.finished_n
        self.factor = model_factors(self.cells)

    # -- the order ----------------------------------------------------------------------------------
    def _finished(self, task: str) -> tuple[int, float]:
        """How many of the task's trials finished, and the sum of their log times less their models' factors."""
        count, total = 0, 0.0
        for model in self.seen.get(task, ()):
            s, n = self.cells[(task, model)]
            count += n
            total += s - n * self.factor.get(model, 0.0)
        return count, total

    def _estimate(self, task: str, now: float) -> tuple[float, float]:
        factor = self.factor
        running = [
            math.log(max(now - at, 1e-3)) - factor.get(self.model_of[tid], 0.0)
            for tid, at in self.running.get(task, {}).items()
        ]
        return posterior(self.prior, PRIOR_SD, NOISE_SD, self._finished(task), running)

    def _refresh(self, now: float) -> None:
        """Re-estimate tasks: all of them when the clock has moved on (running trials grew older), else only
        those with a new finished trial. The prior is the median task: its finished time, or for one still
        unfinished how long its oldest trial has run (a lower bound, so early on the prior grows with the clock)."""
        if self.clock is None:
            self.clock = (now, -math.inf)
        first, last = self.clock
        if now - last >= REFRESH * (now - first):
            self.clock = (first, now)
            levels = []
            for task in self.started | self.seen.keys():
                n, total = self._finished(task)
                if n:
                    levels.append(total / n)
                elif task in self.running:
                    levels.append(math.log(max(now - min(self.running[task].values()), 1e-3)))
            if levels:
                levels.sort()
                self.prior = levels[len(levels) // 2]
            stale: Iterable[str] = set(self.by_task) | set(self.estimate)
            self.estimate.clear()
        else:
            stale = self.stale & set(self.by_task)
        for task in stale:
            if task in self.by_task:
                self.estimate[task] = self._estimate(task, now)
        self.stale.clear()

    def candidates(self, now: float) -> Iterator[tuple[str, list[str]]]:
        """(task, its waiting trials) in launch order; the caller takes at most one trial per pair (the first
        it can launch), and a task it took from comes back in its new place."""
        while self.front:
            tid = self.front[0]
            before = self.size
            yield self.task_of[tid], [tid]
            if self.size == before:
                break
        self._refresh(now)
        probes = [t for t in self.by_task if t not in self.started]
        for task in sorted(probes, key=self._entry):
            if task in self.by_task:
                yield task, self.by_task[task]
        heap = [self._entry(task) for task in self.by_task]
        heapq.heapify(heap)
        while heap:
            _, _, _, task = heapq.heappop(heap)
            trials = self.by_task.get(task)
            if trials is None:
                continue
            before = self.size
            yield task, trials
            if self.size < before and task in self.by_task:
                heapq.heappush(heap, self._entry(task))

    def _slowest(self, task: str) -> float:
        """The largest speed factor among the task's waiting models: the first trial not of a begun model, or
        a begun model's before it (a begun model's remaining attempts go first, at the task's best priority)."""
        factor, best = self.factor, -math.inf
        for tid in self.by_task[task]:
            f = factor.get(self.model_of[tid], 0.0)
            best = max(best, f)
            if self.model_of[tid] not in self.begun.get(task, ()):
                break
        return best

    def _entry(self, task: str) -> tuple[int, int, int, str]:
        mean, sd = self.estimate.get(task) or (self.prior, PRIOR_SD)
        expected = mean + OPTIMISM * sd + self._slowest(task)
        return (-math.floor(expected / TIE), self.launches[task], self.rank[task], task)
