"""The operator's launch order (operator/launchorder.py, driven by operator/runstate.py): probes first, then the
longest-expected trial first, learned from pod times as the run goes; capacity, backoff and requeues still
honoured. The sweeps run through bench/sim_sweep.py's simulation (the real RunState in simulated time)."""

from __future__ import annotations

import collections
import json
import math
import random
import sys
from pathlib import Path

from conftest import make_tiny_pack, trial_record

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from sim_sweep import ElapsedOrder, PlanOrder, lower_bound, simulate  # noqa: E402

from mcpfleet.operator.launchorder import model_factors, posterior  # noqa: E402
from mcpfleet.operator.runstate import RunState  # noqa: E402
from mcpfleet.runner.plan.expand import plan  # noqa: E402
from mcpfleet.runner.spec.load import parse_evalrun  # noqa: E402
from mcpfleet.runner.spec.trial import TrialSpec


def trials(tmp_path: Path, tasks: int, models: int, attempts: int) -> list[TrialSpec]:
    pack = make_tiny_pack(tmp_path / "pack", tasks=tasks)
    body = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "order"},
        "spec": {
            "models": [{"name": f"m{i}", "model": "scripted/oracle"} for i in range(models)],
            "tasks": {"path": str(pack)},
            "attempts": attempts,
            "output": {"uri": str(tmp_path / "out")},
        },
    }
    return plan(parse_evalrun(body), tmp_path)


def fresh(ts: list[TrialSpec], retry_limit: int = 1) -> RunState:
    st = RunState.plan(ts, retry_limit=retry_limit)
    st.finish_rebuild()  # as the reconciler does once it has read the store and the pods
    return st


def free(state: RunState, cap: int = 1000) -> dict[str, int]:
    return {m: cap for m in {t.model.name for t in state.trials.values()}}


def launch(state: RunState, n: int, now: float, cap: int = 1000) -> list[TrialSpec]:
    picks = state.next_launches(n, free(state, cap), now)
    for trial, retry in picks:
        state.launched(trial, f"pod-{trial.trial_id}", retry, now)
    return [t for t, _ in picks]


def test_every_task_gets_a_probe_first_in_plan_order(tmp_path: Path) -> None:
    ts = trials(tmp_path, tasks=3, models=2, attempts=2)
    st = fresh(ts, retry_limit=1)
    first = launch(st, 3, now=0.0)
    assert [t.task_id for t in first] == sorted({t.task_id for t in ts}, key=[t.task_id for t in ts].index)
    assert [t.trial_id for t in first] == [next(t.trial_id for t in ts if t.task_id == x.task_id) for x in first]
    assert len(st.waiting) == len(ts) - 3


def test_tasks_of_one_trial_each_launch_as_probes_only(tmp_path: Path) -> None:
    ts = trials(tmp_path, tasks=3, models=1, attempts=1)
    st = fresh(ts)
    assert sorted(t.trial_id for t in launch(st, 10, now=0.0)) == sorted(t.trial_id for t in ts)
    assert not st.waiting


def test_learned_lengths_put_the_longest_task_first(tmp_path: Path) -> None:
    ts = trials(tmp_path, tasks=3, models=2, attempts=2)
    st = fresh(ts, retry_limit=1)
    probes = launch(st, 3, now=0.0)
    length = {probes[0].task_id: 1.0, probes[1].task_id: 10.0, probes[2].task_id: 5.0}
    for t in probes:
        st.finished(t.trial_id, {"passed": True, "model": t.model.name}, now=length[t.task_id])
    order = [t.task_id for t in launch(st, 9, now=10.0)]
    longest, middle, short = probes[1].task_id, probes[2].task_id, probes[0].task_id
    assert order == [longest] * 3 + [middle] * 3 + [short] * 3


def test_a_probe_still_running_pulls_its_task_ahead_of_known_short_ones(tmp_path: Path) -> None:
    ts = trials(tmp_path, tasks=2, models=1, attempts=3)
    st = fresh(ts, retry_limit=1)
    a, b = launch(st, 2, now=0.0)
    st.finished(a.trial_id, {"passed": True}, now=2.0)  # a: 2 s; b's probe still runs at t=30
    assert [t.task_id for t in launch(st, 1, now=30.0)] == [b.task_id]
    assert [t.task_id for t in launch(st, 1, now=30.0)] == [b.task_id]
    assert [t.task_id for t in launch(st, 1, now=30.0)] == [a.task_id]


def test_capacity_backoff_and_requeue_are_honoured(tmp_path: Path) -> None:
    ts = trials(tmp_path, tasks=2, models=2, attempts=2)
    st = fresh(ts, retry_limit=2)
    picks = st.next_launches(10, {"m0": 1, "m1": 0}, 0.0)
    assert [t.model.name for t, _ in picks] == ["m0"]  # one m0 slot, no m1 slot
    trial = picks[0][0]
    st.launched(trial, "p", 0, 0.0)
    assert st.infra_failed(trial.trial_id, now=0.0, backoff=5.0)
    again = st.next_launches(10, free(st), 1.0)
    assert trial.trial_id not in [t.trial_id for t, _ in again]  # still backing off
    for t, r in again:
        st.launched(t, "p", r, 1.0)
    later = st.next_launches(10, free(st), 6.0)
    assert [(t.trial_id, r) for t, r in later] == [(trial.trial_id, 1)]
    st.launched(later[0][0], "p", 1, 6.0)
    st.unlaunch(trial.trial_id)  # its create failed: first in line again
    assert [t.trial_id for t, _ in st.next_launches(1, free(st), 7.0)] == [trial.trial_id]


def test_a_restarted_operator_waits_out_a_retrys_backoff_from_its_failed_trys_record(tmp_path: Path) -> None:
    """The retry backoff lived in memory only: after a restart every pending retry launched at once. The stored
    infrastructure record says when the try failed and how many tries failed: the wait counts from it."""
    from datetime import UTC, datetime

    ts = trials(tmp_path, tasks=1, models=1, attempts=2)
    failed_at = 1_800_000_000.0
    stamp = datetime.fromtimestamp(failed_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def infra(t: TrialSpec, tries: int) -> dict[str, object]:
        return {
            "trial_id": t.trial_id,
            "spec_hash": t.spec_hash,
            "passed": False,
            "failure": "infra_error",
            "infra_attempts": tries,
            "finished_at": stamp,
        }

    st = RunState.plan(ts, retry_limit=3)
    assert not st.adopt_record(infra(ts[0], 1), backoff=10.0)  # its first retry: 10 s after the failure
    assert not st.adopt_record(infra(ts[1], 2), backoff=10.0)  # its second: 20 s after
    st.finish_rebuild()
    assert launch(st, 2, now=failed_at + 5) == []
    assert [(t.trial_id, st.retries[t.trial_id]) for t in launch(st, 2, now=failed_at + 11)] == [(ts[0].trial_id, 1)]
    assert [t.trial_id for t in launch(st, 2, now=failed_at + 21)] == [ts[1].trial_id]
    old = RunState.plan(ts, retry_limit=3)  # a record whose wait is over, or no backoff: launched at once
    assert not old.adopt_record(infra(ts[0], 1), backoff=0.0)
    old.finish_rebuild()
    assert {t.trial_id for t in launch(old, 2, now=failed_at)} == {ts[0].trial_id, ts[1].trial_id}


def test_a_rebuild_keeps_what_it_learned_and_skips_finished_trials(tmp_path: Path) -> None:
    ts = trials(tmp_path, tasks=2, models=1, attempts=2)
    st = fresh(ts, retry_limit=1)
    a, b = launch(st, 2, now=0.0)
    st.finished(a.trial_id, {"passed": True}, now=1.0)
    st.finished(b.trial_id, {"passed": True}, now=9.0)
    st.finish_rebuild()  # e.g. after a spec edit that changes nothing measured
    assert len(st.waiting) == 2
    assert [t.task_id for t in launch(st, 2, now=9.0)] == [b.task_id, a.task_id]


def test_an_operator_restart_keeps_the_task_lengths_its_records_show(tmp_path: Path) -> None:
    """A restarted operator rebuilds from the store: the finished trials' runner times (started_at to finished_at)
    teach the new queue their tasks' lengths, so the long task goes first again rather than by plan order."""
    ts = trials(tmp_path, tasks=2, models=1, attempts=3)
    first, second = ts[0].task_id, next(t.task_id for t in ts if t.task_id != ts[0].task_id)

    def record(t: TrialSpec, seconds: int | None) -> dict[str, object]:
        times = {} if seconds is None else {"started_at": "2026-11-26T10:00:00Z"}
        if seconds is not None:
            times["finished_at"] = f"2026-11-26T10:{seconds // 60:02d}:{seconds % 60:02d}Z"
        return {"trial_id": t.trial_id, "spec_hash": t.spec_hash, "passed": True, "failure": None, **times}

    def restarted(lengths: dict[str, int | None]) -> RunState:
        st = RunState.plan(ts, retry_limit=1)
        for task, seconds in lengths.items():
            assert st.adopt_record(record(next(t for t in ts if t.task_id == task), seconds))
        st.finish_rebuild()
        return st

    learned = restarted({first: 5, second: 600})  # the plan's second task is the long one
    assert [t.task_id for t in launch(learned, 4, now=0.0)] == [second, second, first, first]
    unknown = restarted({first: None, second: None})  # records without times: nothing learned, tasks take turns
    assert [t.task_id for t in launch(unknown, 2, now=0.0)] == [first, second]


def test_an_earlier_runs_times_put_the_longest_task_first_before_any_trial_ran(tmp_path: Path) -> None:
    """spec.launchOrder.learnFrom: an earlier run of other models says the plan's third task is the long one, so
    it launches first. Every task still gets its probe before any task's second trial, but in expectation order
    (a single earlier trial can mislead: the probe, still running, corrects it); a task without history counts as
    the median task; times of tasks not in this plan are ignored."""
    ts = trials(tmp_path, tasks=4, models=2, attempts=2)
    tasks = list(dict.fromkeys(t.task_id for t in ts))
    history = [(tasks[0], "old-a", 10.0), (tasks[1], "old-a", 12.0), (tasks[2], "old-b", 900.0)]
    history += [(tasks[2], "old-a", 700.0), ("filesystem/standard/gone/task", "old-a", 9000.0)]
    st = fresh(ts)
    assert st.waiting.learn(history) == 4
    order = [t.task_id for t in launch(st, 16, now=0.0)]
    assert order[:4] == [tasks[2], tasks[3], tasks[1], tasks[0]]  # the probes, longest expected first
    assert order[4:10] == [tasks[2]] * 3 + [tasks[3]] * 3  # then the long task, then the unknown (median) one
    assert set(order[10:]) == {tasks[0], tasks[1]}
    # Without history the same queue probes every task in plan order.
    assert [t.task_id for t in launch(fresh(ts), 4, now=0.0)] == tasks


def test_history_survives_a_rebuild_and_earlier_models_speeds_are_told_apart(tmp_path: Path) -> None:
    """An earlier run's slow model measured task A (60 s), its fast one task B (40 s); both measured C, three
    times apart. Taken at face value A looks longer; with the models' speeds fitted, B is (A is 20 s at the fast
    model's pace). A rebuild (restart or spec edit) carries what history taught."""
    ts = trials(tmp_path, tasks=3, models=1, attempts=2)
    a, b, c = list(dict.fromkeys(t.task_id for t in ts))
    history = [(c, "old-fast", 100.0), (b, "old-fast", 40.0), (c, "old-slow", 300.0), (a, "old-slow", 60.0)]
    st = fresh(ts)
    st.waiting.learn(history * 10)
    st.finish_rebuild()
    assert [t.task_id for t in launch(st, 6, now=0.0)] == [c, b, a, c, b, a]  # probes first, then the rest


def test_history_reads_every_uid_of_a_named_run_but_the_readers_own(tmp_path: Path) -> None:
    """read_history: an earlier run's records under each of its UIDs (an operator keeps a re-created run of one
    name apart), never the reading run's own records; infrastructure failures and records without times say
    nothing of a task's length; a missing run is a problem line, not an exception."""
    from mcpfleet.runner.plan.history import read_history
    from mcpfleet.runner.results.store import LocalStore, store_config

    def put(root: Path, tid: str, failure: str | None, seconds: int | None) -> None:
        times = {} if seconds is None else {"started_at": "2026-11-01T10:00:00Z"}
        if seconds is not None:
            times["finished_at"] = f"2026-11-01T10:{seconds // 60:02d}:{seconds % 60:02d}Z"
        rec = trial_record(tid, task_id=f"t/{tid}", model="old", failure=failure, passed=failure is None, **times)
        LocalStore(root).commit(tid, json.dumps(rec).encode())

    out = tmp_path / "out"
    put(out / "pilot" / "uid-1", "a", None, 30)
    put(out / "pilot" / "uid-2", "b", "verifier_failed", 90)  # a failed verdict still measured the task
    put(out / "pilot" / "uid-2", "c", "infra_error", 5)
    put(out / "pilot" / "uid-2", "d", None, None)
    put(out / "pilot", "e", None, 45)  # `mcpfleet run` keeps a run without a UID level
    put(out / "pilot" / "mine", "f", None, 99)
    got = read_history(store_config(str(out), "new", tmp_path), ["pilot", "absent"], own_uid="mine")
    assert sorted(got.samples) == [("t/a", "old", 30.0), ("t/b", "old", 90.0), ("t/e", "old", 45.0)]
    assert len(got.problems) == 1 and "learnFrom" in got.problems[0] and "absent" in got.problems[0]


def _sweep(tmp_path: Path, seed: int) -> dict[str, float]:
    """A seeded 640-trial sweep's trial lengths: tasks lognormal (as agent tasks are), attempts a little."""
    ts = trials(tmp_path / str(seed), tasks=40, models=4, attempts=4)
    rng = random.Random(seed)
    task_len = {t: math.exp(rng.gauss(0, 0.9)) for t in sorted({t.task_id for t in ts})}
    return {t.trial_id: task_len[t.task_id] * math.exp(rng.gauss(0, 0.3)) for t in ts}


def test_learning_order_brings_a_sweep_within_5_percent_of_its_lower_bound(tmp_path: Path) -> None:
    """Plan order leaves long tasks to the end and misses 5% over max(longest, work / capacity) on some seeds;
    the learning order meets it on all and is never worse."""
    rows = []
    for seed in (1, 2, 3):
        length = _sweep(tmp_path, seed)
        ts = trials(tmp_path / str(seed), tasks=40, models=4, attempts=4)
        plan_order = simulate(ts, length, 40, policy=PlanOrder).makespan
        learned = simulate(ts, length, 40).makespan
        rows.append((lower_bound(length, 40), plan_order, learned))
    for bound, plan_order, learned in rows:
        assert learned <= plan_order
        assert learned <= 1.05 * bound, rows
    assert any(plan_order > 1.05 * bound for bound, plan_order, _ in rows), rows  # the old order is worse


def _backwards(ts: list[TrialSpec], seed: int) -> dict[str, float]:
    """Trial lengths of a sweep whose plan guessed task lengths backwards (its shortest task first, as when
    oracle length predicts agent time badly): tasks lognormal with sd 1.0, models differing in speed (sd 0.25),
    attempts (sd 0.3), every trial capped at 7.6x the mean (a timeout: MCPMark's 3,600 s against ~475 s)."""
    rng = random.Random(seed)
    tasks = list(dict.fromkeys(t.task_id for t in ts))
    task_len = dict(zip(tasks, sorted(math.exp(rng.gauss(0, 1.0)) for _ in tasks), strict=True))
    speed = {m: math.exp(rng.gauss(0, 0.25)) for m in sorted({t.model.name for t in ts})}
    length = {t.trial_id: task_len[t.task_id] * speed[t.model.name] * math.exp(rng.gauss(0, 0.3)) for t in ts}
    cap = 7.6 * sum(length.values()) / len(length)
    return {tid: min(x, cap) for tid, x in length.items()}


def test_a_long_tailed_sweep_planned_backwards_is_within_5_percent_where_the_previous_order_is_not(
    tmp_path: Path,
) -> None:
    """1,200 trials (30 tasks x 10 models x 4 attempts) at capacity 120. The previous order (a running probe
    counted as long as it has run; tasks with equal expectations, and every task's trials, launched one after
    another in plan order) starts the long tasks' trials late and misses 5% on every seed here; the learning
    order is within it (over seeds 1-20: 18 of 20 within 5%, the previous order none)."""
    ts = trials(tmp_path, tasks=30, models=10, attempts=4)
    for seed in range(1, 7):
        length = _backwards(ts, seed)
        bound = lower_bound(length, 120)
        previous = simulate(ts, length, 120, policy=ElapsedOrder).makespan
        learned = simulate(ts, length, 120).makespan
        assert previous > 1.05 * bound, (seed, previous / bound)
        assert learned <= 1.05 * bound, (seed, learned / bound)


def test_a_models_attempts_at_a_task_launch_together_slowest_model_first(tmp_path: Path) -> None:
    """Whole pass@k evidence per (model, task) at any point a run stops: at most one model per task has some
    but not all of its attempts launched. And once speeds are learned, a task's slow model goes first."""
    ts = trials(tmp_path, tasks=40, models=4, attempts=4)
    length = _sweep(tmp_path, 1)
    slow = {t.trial_id: x * (3.0 if t.model.name == "m2" else 1.0) for t, x in zip(ts, length.values(), strict=True)}
    result = simulate(ts, slow, 40)
    by_id = {t.trial_id: t for t in ts}
    launched: dict[tuple[str, str], int] = {}
    for tid in result.order:
        t = by_id[tid]
        launched[(t.task_id, t.model.name)] = launched.get((t.task_id, t.model.name), 0) + 1
        partial = [key for key, n in launched.items() if key[0] == t.task_id and n < 4]
        assert len(partial) <= 1, (tid, partial)
    # Once speeds are learned (past the first quarter of launches), a task that begins a new model begins the
    # slow one, unless it has begun it already.
    begun: dict[str, set[str]] = {}
    checked = 0
    for i, tid in enumerate(result.order):
        t = by_id[tid]
        models = begun.setdefault(t.task_id, set())
        if i >= len(ts) // 4 and t.model.name not in models and "m2" not in models:
            assert t.model.name == "m2", (i, tid, models)
            checked += 1
        models.add(t.model.name)
    assert checked > 0


def test_tasks_known_equally_little_take_turns(tmp_path: Path) -> None:
    """At the start nothing is known: the slots go round the tasks, not to the first task in plan order."""
    ts = trials(tmp_path, tasks=4, models=2, attempts=2)
    st = fresh(ts)
    first = launch(st, 8, now=0.0)
    assert collections.Counter(t.task_id for t in first) == dict.fromkeys({t.task_id for t in ts}, 2)


def test_the_posterior_reads_running_trials_as_at_least_their_elapsed_time() -> None:
    prior = math.log(2.0)
    alone, _ = posterior(prior, 1.0, 0.45, (0, 0.0), [])
    assert alone == prior
    one, sd_one = posterior(prior, 1.0, 0.45, (0, 0.0), [math.log(10.0)])
    four, sd_four = posterior(prior, 1.0, 0.45, (0, 0.0), [math.log(10.0)] * 4)
    assert math.log(10.0) < one < four  # still running at 10 s: longer than 10 s, more so if four are
    assert sd_four < sd_one
    known, sd_known = posterior(prior, 1.0, 0.45, (4, 4 * math.log(3.0)), [])
    assert abs(known - math.log(3.0)) < 0.05 and sd_known < 0.25  # four finished trials outweigh the prior
    short_started, _ = posterior(prior, 1.0, 0.45, (4, 4 * math.log(3.0)), [math.log(0.01)])
    assert abs(short_started - known) < 1e-3  # a trial just started says nothing


def test_model_speeds_are_learned_across_tasks() -> None:
    rng = random.Random(7)
    cells: dict[tuple[str, str], tuple[float, int]] = {}
    for task in range(20):
        level = rng.gauss(0, 1.0)
        for model, factor in (("fast", -0.3), ("mid", 0.0), ("slow", 0.4)):
            ys = [level + factor + rng.gauss(0, 0.1) for _ in range(4)]
            cells[(f"t{task}", model)] = (sum(ys), len(ys))
    f = model_factors(cells)
    assert f["fast"] < f["mid"] < f["slow"]
    assert abs((f["slow"] - f["fast"]) - 0.7) < 0.1
    assert abs(sum(f.values())) < 1e-9


def test_a_launch_decision_costs_the_same_however_many_trials_wait(tmp_path: Path) -> None:
    """The operator asks for launches on every free slot: a decision may cost a pass over tasks, never one over
    trials. Eight times the attempts (8x the waiting trials, same tasks and capacity): the same cost per launch."""
    per_launch = []
    for attempts in (1, 8):
        ts = trials(tmp_path / str(attempts), tasks=40, models=10, attempts=attempts)
        rng = random.Random(attempts)
        task_len = {t: math.exp(rng.gauss(0, 0.9)) for t in sorted({t.task_id for t in ts})}
        length = {t.trial_id: task_len[t.task_id] * math.exp(rng.gauss(0, 0.3)) for t in ts}
        result = min((simulate(ts, length, 80) for _ in range(2)), key=lambda r: r.decide_s)
        assert result.launches == len(ts)
        per_launch.append(result.decide_s / result.launches)
    assert per_launch[1] < 2.0 * per_launch[0], per_launch
    assert max(per_launch) < 1e-3, per_launch  # measured ~0.06 ms per launch


def test_the_restart_streak_compares_record_times_as_times(tmp_path: Path) -> None:
    """The backoffLimit streak rebuilt after a restart counts infra records stored after the last trial that ended
    otherwise. Records written with another offset (the same instant as 10:00Z) are compared as times: as text,
    "11:00+01:00" sorted after "10:45Z" and made an infra error at 10:30Z look like it came after every reset."""
    ts = trials(tmp_path, tasks=4, models=1, attempts=1)
    state = RunState.plan(ts, retry_limit=2)

    def rec(t: TrialSpec, failure: str | None, at: str) -> dict[str, object]:
        return {"trial_id": t.trial_id, "spec_hash": t.spec_hash, "failure": failure, "finished_at": at}

    records = [
        rec(ts[0], None, "2026-11-27T11:00:00+01:00"),  # 10:00 UTC
        rec(ts[1], "verifier_failed", "2026-11-27T10:45:00.000Z"),
        rec(ts[2], "infra_error", "2026-11-27T10:30:00.000Z"),  # before the last reset: not in the streak
        rec(ts[3], "infra_error", "2026-11-27T10:50:00.000Z"),
    ]
    state.rebuild_streak(records)
    assert state.infra_streak == 1
    state.rebuild_streak([*records[:1], *records[2:]])  # without the 10:45 reset both infra errors are after it
    assert state.infra_streak == 2


def test_an_unreadable_status_time_is_now_not_a_crash() -> None:
    """A hand-edited status.finishedAt (or startedAt) raised ValueError in every reconcile step (the TTL and
    activeDeadlineSeconds checks) and stopped the run's reconciling; it reads as now."""
    import time

    from mcpfleet.operator.reconciler import _ts

    assert _ts("2026-11-27T11:00:00+01:00") == _ts("2026-11-27T10:00:00.000Z") == 1795773600.0
    for bad in ("yesterday", "", None):
        assert abs(_ts(bad) - time.time()) < 5
