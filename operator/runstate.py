"""One EvalRun's progress as the operator sees it: a pure state machine, rebuilt from truth on start.

Truth is the store (trial records) and the pods (trials in flight). Only the run's reconciler task
mutates this object, so counting is race-free however many pod events arrive at once; status is a
bounded projection of it (counts and per model x service figures, never per-trial lists).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcpfleet.operator.finished import Finished
from mcpfleet.operator.launchorder import WaitQueue
from mcpfleet.runner.plan.history import measured_seconds
from mcpfleet.runner.plan.trials import Trials, as_trials
from mcpfleet.runner.results.outcome import (
    BUDGET_EXHAUSTED,
    CONFIG_ERROR,
    INFRA_ERROR,
    NOT_SCORED,
    PROVIDER_ERROR,
    is_scored,
)
from mcpfleet.runner.results.records import parse_time
from mcpfleet.runner.spec.evalrun import retry_wait
from mcpfleet.runner.spec.trial import TrialSpec


@dataclass
class InFlight:
    trial: TrialSpec
    pod: str
    retry: int
    created: float  # wall seconds, for the Pending deadline
    started: float | None = None  # when the pod was first seen running
    # A try that is ending without having finished (its pod was deleted, by the operator or anyone): its
    # outcome is taken once the pod is gone or its containers certainly stopped, never before (they may
    # still be writing its record). ``ending`` is when that was seen, ``kill_by`` when its node SIGKILLs
    # what is left (the pod's deletionTimestamp), ``reason`` why the try failed if no record turns up.
    ending: float | None = None
    kill_by: float | None = None
    reason: str | None = None
    # Its pod was deleted because the run was suspended: unless it stored a record, the try did not count (no
    # retry charged, no infrastructure failure); the trial waits again for the run to resume.
    suspended: bool = False
    # Kubernetes marked its pod for disruption (the DisruptionTarget condition's reason, remembered from the event
    # that showed it: a drain sets it, then deletes the pod, and the last event need not carry it). Unless the try
    # stored a record it does not count, like a suspended one, up to verdict.DISRUPTION_LIMIT in a row.
    disrupted: str | None = None
    # A container of its pod restarted or was OOM-killed while it ran (scheduling.restarted: the container and the
    # cause): whatever the try stores is no outcome; it is an infrastructure error, retried, never scored.
    restarted: str | None = None
    # Its pod could not be scheduled and it gave its slot back (scheduling.park_due): it does not count, and its
    # trial waits behind the others (RunState.requeue).
    parked: bool = False
    # Its pod waits for admission (a scheduling gate: Kueue's, see admission.py): not Pending too long, never
    # counted failed. ``admitted``: when the gate was seen gone, from which its pending clock counts (None: never
    # gated, the clock counts from ``created``).
    gated: bool = False
    admitted: float | None = None


@dataclass
class RunState:
    # The planned trials, computed per trial when asked for (plan/trials.py): only trials in flight hold a TrialSpec.
    trials: Trials
    retry_limit: int
    # Trial id -> its compact outcome, counted not held (finished.py): a finished trial's record is in the store.
    done: Finished = field(default_factory=Finished)
    in_flight: dict[str, InFlight] = field(default_factory=dict)  # trial id -> pod
    retries: dict[str, int] = field(default_factory=dict)  # trial id -> infra tries so far
    waiting: WaitQueue = field(default_factory=lambda: WaitQueue([], {}, {}))
    delayed: dict[str, float] = field(default_factory=dict)  # trial id -> not before (wall seconds)
    parks: dict[str, int] = field(default_factory=dict)  # trial id -> times it gave its slot back (unschedulable)
    # Pods found at a restart still running though their try's outcome is recorded (a runner exiting after
    # storing its record): deleted, and holding their slot until gone. Pod name -> give up on it (wall seconds).
    draining: dict[str, float] = field(default_factory=dict)
    retries_total: int = 0
    infra_streak: int = 0  # infrastructure failures since the last trial recorded an outcome (the run's budget)
    stopped: dict[str, str] = field(default_factory=dict)  # model -> why its launches stopped
    llm_retries: dict[str, int] = field(default_factory=dict)  # model -> LLM retries since launches (re)started
    busy: collections.Counter[str] = field(default_factory=collections.Counter)  # model -> trials in flight
    # Trial id -> its tries disrupted in a row (verdict.DISRUPTION_LIMIT). In memory only: an operator restart starts
    # them at zero again, which at worst grants a self-evicting trial another DISRUPTION_LIMIT short tries.
    disruptions: dict[str, int] = field(default_factory=dict)

    @classmethod
    def plan(cls, trials: Trials | Sequence[TrialSpec], retry_limit: int) -> RunState:
        st = cls(trials=as_trials(trials), retry_limit=retry_limit)
        st.waiting = st.new_queue()
        return st

    @property
    def order(self) -> Sequence[str]:
        """The trial ids in plan order."""
        return self.trials.ids

    def new_queue(self) -> WaitQueue:
        t = self.trials
        return WaitQueue(t.ids, t.column(t.task_at), t.column(t.model_at), t.column(int), t.firsts())

    # -- rebuilding -------------------------------------------------------------------------------
    def adopt_record(self, record: dict[str, Any], backoff: float = 0.0) -> bool:
        """Take a stored result. Returns True if it finishes its trial (False: retry it, or not ours). A retry
        still backing off when the record was read (``backoff``: spec.retries.backoffSeconds) waits out the rest
        of its wait, counted from when the failed try's record was stored: kept in memory only, it was lost with
        a restart, and every pending retry launched at once."""
        tid = str(record.get("trial_id") or "")
        planned = self.trials.spec_hash(tid)
        if planned is None or record.get("spec_hash") != planned:
            return False
        tries = int(record.get("infra_attempts") or 1)
        failure = record.get("failure")
        retried = failure in (INFRA_ERROR, PROVIDER_ERROR)  # tried again up to the limit, then final
        # Retries launched so far: one after each failed try, up to the limit (a status count, kept across restarts).
        self.retries_total += min(tries, self.retry_limit) if retried else tries - 1
        if retried and tries <= self.retry_limit:
            self.retries[tid] = max(self.retries.get(tid, 0), tries)
            if backoff and (ended := parse_time(record.get("finished_at"))) is not None:
                self.delayed[tid] = ended.timestamp() + retry_wait(backoff, tries)
            return False
        if failure in (CONFIG_ERROR, BUDGET_EXHAUSTED):  # measured nothing, and may be fixed by now: run it again
            self.retries[tid] = max(self.retries.get(tid, 0), tries - 1)
            return False
        self.done[tid] = compact(record)
        seconds = measured_seconds(record)
        if seconds is not None:  # what the run had learned of its tasks' lengths survives a restart: records say it
            self.waiting.observe(tid, seconds)
        return True

    def rebuild_streak(self, records: list[dict[str, Any]], since: str | None = None) -> None:
        """``infra_streak`` after a restart, from the stored records: the trials whose record is an infrastructure
        error stored after the last record that ended a trial otherwise (what resets the streak as the run goes).
        A lower bound: of a trial's tries only the last one's time is stored, so its earlier tries are not counted.
        ``since``: when the run failed, if an edit runs it again; failures before it led there and are not counted
        again (else the first failure after "fix the cause and edit the EvalRun" failed it once more).
        """
        reset, infra = _utc(since) if since else EARLIEST, []
        for r in records:
            planned = self.trials.spec_hash(str(r.get("trial_id") or ""))
            if planned is None or r.get("spec_hash") != planned:
                continue
            at = _utc(r.get("finished_at"))  # compared as times: records may differ in offset or precision
            failure = r.get("failure")
            if failure == INFRA_ERROR:
                infra.append(at)
            elif failure != PROVIDER_ERROR or int(r.get("infra_attempts") or 1) > self.retry_limit:
                reset = max(reset, at)  # a finished trial (a provider error still to be retried does not reset)
        self.infra_streak = sum(1 for at in infra if at > reset)

    def finish_rebuild(self) -> None:
        old, self.waiting = self.waiting, self.new_queue()
        self.waiting.carry(old)
        for tid in self.trials:
            if tid not in self.done and tid not in self.in_flight:
                self.waiting.append(tid)
        for tid, flight in self.in_flight.items():
            self.waiting.launched(tid, flight.created)
        task_of = self.trials.task_of
        self.waiting.started.update(task_of(t) for t in [*self.done, *self.in_flight] if t in self.trials)

    # -- launching --------------------------------------------------------------------------------
    def next_launches(self, n: int, per_model_free: dict[str, int], now: float) -> list[tuple[TrialSpec, int]]:
        """Up to n trials to launch now, in the queue's order (see WaitQueue), honouring per-model capacity,
        stopped models and retry backoff: of each task the queue offers, the first trial that may launch."""
        out: list[tuple[TrialSpec, int]] = []
        if n <= 0:
            return out
        free = dict(per_model_free)
        for task, queue in self.waiting.candidates(now):
            for tid in list(queue):
                if tid in self.done or tid in self.in_flight:  # finished meanwhile (e.g. a record adopted)
                    self.waiting.take(task, tid)
                    continue
                model = self.trials.model_of(tid)
                if self.delayed.get(tid, 0) > now or free.get(model, 0) <= 0 or model in self.stopped:
                    continue
                free[model] -= 1
                self.delayed.pop(tid, None)
                self.waiting.take(task, tid)
                out.append((self.trials[tid], self.retries.get(tid, 0)))  # its spec, built now (launched)
                break
            if len(out) >= n:
                break
        return out

    def launched(self, trial: TrialSpec, pod: str, retry: int, now: float) -> None:
        if trial.trial_id not in self.in_flight:
            self.busy[trial.model.name] += 1
        self.in_flight[trial.trial_id] = InFlight(trial, pod, retry, now)
        self.waiting.launched(trial.trial_id, now)

    def _land(self, trial_id: str) -> InFlight | None:
        """The trial's try is over (or never started): no longer in flight."""
        flight = self.in_flight.pop(trial_id, None)
        if flight is not None:
            self.busy[flight.trial.model.name] -= 1
        self.waiting.ended(trial_id)
        return flight

    def unlaunch(self, trial_id: str) -> None:
        """A try that does not count (a create that failed, a pod deleted by a suspend that left no record): back
        to the front of the queue, with no retry charged."""
        self._land(trial_id)
        if trial_id not in self.done:
            self.waiting.appendleft(trial_id)

    def requeue(self, trial_id: str, not_before: float) -> int:
        """A try whose pod could not be scheduled gave its slot back: not counted, its trial behind the waiting ones,
        not before ``not_before`` (wall seconds). Returns how many times the trial was requeued so."""
        self._land(trial_id)
        self.parks[trial_id] = self.parks.get(trial_id, 0) + 1
        if trial_id not in self.done:
            self.delayed[trial_id] = not_before
            self.waiting.append(trial_id)
        return self.parks[trial_id]

    def disrupted(self, trial_id: str) -> None:
        """Kubernetes disrupted the trial's current try before it stored a record, and the try does not count
        (verdict.judge decides): one more of the trial's tries disrupted in a row."""
        self.disruptions[trial_id] = self.disruptions.get(trial_id, 0) + 1

    # -- completion -------------------------------------------------------------------------------
    def finished(self, trial_id: str, record: dict[str, Any], now: float | None = None) -> None:
        """A trial's outcome; ``now`` (wall seconds) lets its pod time teach the queue the task's length."""
        flight = self._land(trial_id)
        self.disruptions.pop(trial_id, None)
        if flight is not None and now is not None:
            self.waiting.observe(trial_id, now - flight.created)
        self.done[trial_id] = compact(record)
        if record.get("failure") != INFRA_ERROR:
            self.infra_streak = 0

    def infra_failed(self, trial_id: str, now: float, backoff: float, *, harness: bool = True) -> bool:
        """An infrastructure failure of the trial's current try. True if it will be retried (its pod time
        says nothing about the task's length, so the queue does not learn from it). ``harness``: the pod
        failed (counted in the run's streak); False for a provider's failure, which a model's budget counts, and
        for a try Kubernetes or the operator stopped whose pod never went (a lost node)."""
        self._land(trial_id)
        self.disruptions.pop(trial_id, None)  # a try that counted: disruptions are "in a row" no more
        if harness:
            self.infra_streak += 1
        tries = self.retries.get(trial_id, 0) + 1
        self.retries[trial_id] = tries
        if tries <= self.retry_limit:
            self.retries_total += 1
            self.delayed[trial_id] = now + retry_wait(backoff, tries)
            self.waiting.append(trial_id)
            return True
        return False

    def release_all(self) -> int:
        """The run is over (failed): its pods were deleted and nothing of them is awaited; what was in flight is
        not running any more (status shows it pending). Returns how many operator slots that frees."""
        freed = len(self.in_flight) + len(self.draining)
        for tid in list(self.in_flight):
            self.unlaunch(tid)
        self.draining.clear()
        return freed

    # -- stopped models ---------------------------------------------------------------------------
    def stop_model(self, model: str, why: str) -> bool:
        """Launch nothing more of ``model``; True if it was not stopped already."""
        if model in self.stopped:
            return False
        self.stopped[model] = why
        return True

    def charge_retries(self, model: str, retries: int) -> int:
        """Add a finished trial's LLM retries to its model's count; returns the new count."""
        self.llm_retries[model] = self.llm_retries.get(model, 0) + retries
        return self.llm_retries[model]

    def resume_models(self) -> list[str]:
        """Lift every stop (a spec edit: the key or model may be fixed); their config errors run again."""
        models, self.stopped, self.llm_retries = list(self.stopped), {}, {}
        for tid, d in list(self.done.items()):
            if d["failure"] in (CONFIG_ERROR, BUDGET_EXHAUSTED):  # (a raised budget runs the cut trials again)
                del self.done[tid]
        return models

    # -- projections ------------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        """Every trial is finished, or belongs to a stopped model and is not running."""
        if not self.stopped and len(self.done) < len(self.trials):  # asked after every step: answer cheaply
            return False
        model_of = self.trials.model_of
        return all(
            tid in self.done or (model_of(tid) in self.stopped and tid not in self.in_flight) for tid in self.trials
        )

    @property
    def settled(self) -> bool:
        """Every trial is finished (nothing stopped)."""
        return len(self.done) == len(self.trials)

    def in_flight_by_model(self) -> dict[str, int]:
        return {m: n for m, n in self.busy.items() if n}

    def waiting_admission(self) -> int:
        """Trials whose pod exists but waits for admission (a scheduling gate, e.g. Kueue's quota)."""
        return sum(1 for inf in self.in_flight.values() if inf.gated)

    def counts(self) -> dict[str, int]:
        tallies = list(self.done.counted())  # (passed, failure, model, service, attempt, variant) -> trials
        passed = sum(n for key, n in tallies if key[0])
        infra = sum(n for key, n in tallies if key[1] == INFRA_ERROR)
        skipped = sum(n for key, n in tallies if not is_scored(key[1]))
        gated = self.waiting_admission()
        return {
            "total": len(self.trials),
            "pending": len(self.trials) - len(self.done) - len(self.in_flight),
            "waitingAdmission": gated,  # pods created, held by their admission controller (Kueue)
            "running": len(self.in_flight) - gated,
            "finished": len(self.done),
            "passed": passed,
            "failed": len(self.done) - passed - skipped,  # the models' failures only
            "infraErrors": infra,
            "retries": self.retries_total,
        }

    def not_scored(self) -> dict[str, int]:
        """Finished trials that measured nothing of the model, by outcome (status.notScored). Every outcome is
        listed, zeros too: status is merge-patched, so a count that drops to zero must be written as 0."""
        c: collections.Counter[str] = collections.Counter()
        for key, n in self.done.counted():
            if not is_scored(key[1]):
                c[key[1]] += n
        return {k: c.get(k, 0) for k in sorted(NOT_SCORED)}

    def any_scored(self) -> bool:
        """Whether some finished trial was scored (what the model did, not its provider or the infrastructure)."""
        return any(is_scored(key[1]) for key, _ in self.done.counted())

    def spend(self) -> dict[str, float] | None:
        """What the finished trials' records say their LLM calls cost (known prices: spec pricing or LiteLLM's map),
        and the total projected at that cost per trial (status.spend); None before any priced trial. The budgets'
        own ledgers are in the pace store (runner/llm/pace.py), which decides what may be sent."""
        usd, priced = self.done.spend()
        if not priced:
            return None
        return {"usd": round(usd, 6), "projectedUsd": round(usd * len(self.trials) / max(1, len(self.done)), 6)}

    def results(self) -> list[dict[str, Any]]:
        """pass@1 so far per model x service (x server variant): mean over attempts of the per-attempt rate, like
        the summary."""
        # (model, service, variant) -> attempt -> [finished, passed], from the tallies (no pass over every trial)
        groups: dict[tuple[str, str, str], dict[Any, list[int]]] = collections.defaultdict(
            lambda: collections.defaultdict(lambda: [0, 0])
        )
        for (passed, failure, model, service, attempt, variant), n in self.done.counted():
            if is_scored(failure):  # what the model did, not its provider
                cell = groups[(model, service, variant or "")][attempt]
                cell[0] += n
                cell[1] += n if passed else 0
        rows = []
        for (model, service, variant), by_attempt in sorted(groups.items()):
            rates = [p / f for f, p in by_attempt.values()]
            rows.append(
                {
                    "model": model,
                    "service": service,
                    **({"variant": variant} if variant else {}),  # a server variant's row (spec.servers)
                    "finished": sum(f for f, _ in by_attempt.values()),
                    "passed": sum(p for _, p in by_attempt.values()),
                    "passAt1": f"{sum(rates) / len(rates):.4f}",
                }
            )
        return rows

    def pass_at_1(self) -> str:
        """The headline number for the printer column: mean of the rows' pass@1."""
        rows = self.results()
        if not rows:
            return "-"
        return f"{sum(float(r['passAt1']) for r in rows) / len(rows):.2f}"


EARLIEST = datetime.min.replace(tzinfo=UTC)


def _utc(value: object) -> datetime:
    """A record's ISO timestamp; an empty or unreadable one is the earliest."""
    return parse_time(value) or EARLIEST


def compact(record: dict[str, Any]) -> dict[str, Any]:
    """What the operator keeps per finished trial: a few bytes, so 100k trials fit in memory."""
    return {
        "passed": bool(record.get("passed")),
        "failure": record.get("failure"),
        "model": record.get("model"),
        "service": record.get("service"),
        "attempt": record.get("attempt"),
        "cost": _cost(record),
        **({"variant": record["variant"]} if record.get("variant") else {}),
    }


def _cost(record: dict[str, Any]) -> float | None:
    totals = record.get("totals")
    value = totals.get("cost_usd") if isinstance(totals, dict) else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def plan_hash(trials: Trials | Sequence[TrialSpec]) -> str:
    """One digest of the planned trials and what each measures: equal plans, equal results (``Trials.digest``)."""
    return as_trials(trials).digest
