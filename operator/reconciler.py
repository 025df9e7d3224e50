"""The per-EvalRun reconciler: one task per run owns its state, launches pods, takes outcomes, writes status.

Pod events reach it through a queue, so every count changes in one place and none is lost under
concurrent events. It is restart-safe: on start it rebuilds from the stored records and the run's pods,
so no trial is launched twice (pod names are deterministic) and none is forgotten. What it decides is in the
pure modules beside runstate.py; the run-level half (plan, edits, status) is ``Lifecycle`` (lifecycle.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
import kopf

from mcpfleet.operator import metrics
from mcpfleet.operator.admission import admission_seen, adopted_admission
from mcpfleet.operator.deletes import PodDeletes, bulk_deletable
from mcpfleet.operator.kube import ApiError, ForeignPod, PodRefused
from mcpfleet.operator.lifecycle import STORE_FAILURES, STORE_RETRY_SECONDS, Lifecycle
from mcpfleet.operator.manifests import LABEL_RUN_UID, TERMINATION_GRACE_SECONDS, pod_deadline, trial_pod
from mcpfleet.operator.overdue import over_active_deadline, overdue_drains, overdue_try, past_ttl
from mcpfleet.operator.phase import TERMINAL, Phase
from mcpfleet.operator.podview import (
    Act,
    claims,
    disruption_seen,
    ended,
    epoch,
    failure_reason,
    runner_started,
    scheduling_seconds,
    seen,
    stub,
    termination_message,
    trial_of,
    vanished,
)
from mcpfleet.operator.scheduling import CONDITION as SCHEDULED
from mcpfleet.operator.scheduling import Tracker, event_message, park_due, requeue_delay, restarted
from mcpfleet.operator.shared import Shared
from mcpfleet.operator.verdict import DISRUPTION_LIMIT, Kind, backoff_budget, judge
from mcpfleet.runner._util.sharing import shared_all
from mcpfleet.runner.results.outcome import BUDGET_EXHAUSTED, INFRA_ERROR, PROVIDER_ERROR, is_scored
from mcpfleet.runner.results.records import TrialResult, dumps, now_iso
from mcpfleet.runner.spec.evalrun import EvalRun
from mcpfleet.runner.spec.trial import TrialSpec

# A Kubernetes API call that failed but may pass when tried again: a 5xx or 429 (ApiError), a connection reset, a
# lost answer.
API_FAILURES = (ApiError, aiohttp.ClientError, TimeoutError)
LOST_POD_GRACE_SECONDS = float(TERMINATION_GRACE_SECONDS)  # a pod without one: the grace trial pods get
# A deleted pod that never ran its runner, still there this long after its node should have killed it: its node
# is lost (or stuck); it is counted failed rather than waited on for ever.
TERMINATING_SLACK_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 60.0  # the longest wait between tries of an API call the server refuses again and again
# A pod create the API server refuses (403, 429: a quota, an admission policy, throttling): one Warning event per
# cause (the API's message, the pod's name left out) at most this often, and no two such events closer than
# REFUSAL_EVENT_GAP_SECONDS (a quota's message changes with its usage).
REFUSAL_EVENT_SECONDS = 600.0
REFUSAL_EVENT_GAP_SECONDS = 60.0
DEADLINE_CHECK_SECONDS = 1.0  # how often tries in flight are checked against their deadlines
# How often the run's pods are listed to find those gone without a DELETED event (Reconciler.resync).
RESYNC_SECONDS = 60.0


def _ts(value: str | None) -> float:
    """An API or status timestamp in epoch seconds; now when it is missing or unreadable (podview.epoch)."""
    return epoch(value, time.time())


class Reconciler(Lifecycle):
    """One EvalRun's reconciler: its task loop, its trial pods and their outcomes (the run level is Lifecycle's)."""

    def __init__(self, shared: Shared, body: kopf.Body, logger: logging.Logger | logging.LoggerAdapter[Any]):
        super().__init__(shared, body, logger)
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self.deferred: list[tuple[str, dict[str, Any]]] = []  # pod events not taken yet (store outage, refused call)
        self.deferred_until = 0.0  # deferred pod events are taken again from then on
        self.deadlines_at = 0.0  # when check_deadlines runs next (monotonic)
        self.resync_at = time.monotonic() + RESYNC_SECONDS  # when resync runs next (monotonic)
        self.unlisted: set[str] = set()  # pods the last resync's list lacked
        self.settled: int | None = None  # the generation the run ended at: nothing to do until the spec changes
        self.stopped: kopf.DaemonStopped | None = None  # set when the operator exits or pauses (a peer acts)
        # Pod creates the API server refuses (403, 429): when each cause was last announced (monotonic), and the
        # run's launches back off (doubling up to MAX_BACKOFF_SECONDS, until create_retry_at) until a create passes.
        self.refusals_warned: dict[str, float] = {}
        self.create_backoff = 0.0
        # Pods of counted tries: deleted in bulk, and those whose delete failed again from check_deadlines (and while
        # the run is settled) until gone (deletes.py).
        self.deletes = PodDeletes(self.ns, self.uid, logger, STORE_RETRY_SECONDS)
        self.scheduling = Tracker()  # trials held up Pending, and why (scheduling.py): a condition and events

    def stopping(self) -> bool:
        """Asked to stop: act no further (a peer may take the run over as soon as this replica is gone)."""
        return bool(self.stopped)

    # -- lifecycle --------------------------------------------------------------------------------
    async def main(self, stopped: kopf.DaemonStopped) -> None:
        """Drive the run to its end, then wait for an edit of its spec; a finished run whose spec was already
        acted on (a restart) is left alone: nothing re-planned, re-read, rewritten or announced again."""
        self.stopped = stopped
        self.shared.runs[self.uid] = self.queue
        status = self.body.status
        if (
            Phase.read(status.get("phase")) in TERMINAL
            and status.get("observedGeneration") == self.body.metadata.get("generation")
            and not status.get("stoppedModels")  # a restart resumes stopped models (their cause may be fixed)
        ):
            self.settled = status.get("observedGeneration")
        try:
            while not stopped:
                if self.settled is not None and self.body.metadata.get("generation") == self.settled:
                    if self.unwritten:  # the last write failed: a terminal phase is never lost
                        await self.write_status()
                    await self.deletes.flush(self.shared.kube, force=True)  # the last trials' pods
                    await self.deletes.retry(self.shared.kube)  # ... and those whose delete failed
                    if await self.expired():
                        break
                    await stopped.wait(1.0)  # the body is kopf's live view: an edit shows here at once
                    continue
                await self.drive(stopped)
                self.settled = self.generation
        finally:
            self.shared.runs.pop(self.uid, None)
            self.drop_state()
            reason = getattr(stopped, "reason", None)
            if reason is not None and kopf.DaemonStoppingReason.RESOURCE_DELETED in reason:
                metrics.forget_run(self.ns, self.name)  # a deleted run's gauges must not linger on dashboards

    async def expired(self) -> bool:
        """spec.ttlSecondsAfterFinished: a finished run past it is deleted (its stored records stay)."""
        ttl = self.body.spec.get("ttlSecondsAfterFinished")
        finished = self.finished_at or self.body.status.get("finishedAt")
        if not past_ttl(ttl, _ts(finished) if finished else None, time.time()):
            return False
        await self.shared.kube.delete_evalrun(self.ns, self.name)
        kopf.info(self.body, reason="Expired", message=f"deleted {ttl} s after it finished; its records stay")
        return True

    async def drive(self, stopped: kopf.DaemonStopped) -> None:
        """One pass from plan to a terminal phase (or until the daemon stops)."""
        self.drop_state()
        self.run, self.store, self.deferred = None, None, []
        self.deletes.clear()  # the rebuild deletes the pods of recorded tries it finds
        while not stopped:
            try:
                if not await self.load():
                    return
                break
            except STORE_FAILURES as exc:  # an s3:// pack that cannot be read yet: wait, do not fail
                self.logger.warning("the task pack cannot be read (will try again): %s", exc)
                self.set_condition("Valid", False, "TasksUnavailable", str(exc)[:1000])
                await self.write_status(force=True)
                await asyncio.sleep(STORE_RETRY_SECONDS)
        if self.state is None:
            return
        wait = STORE_RETRY_SECONDS
        while not stopped:
            try:
                await self.rebuild()
                break
            except STORE_FAILURES as exc:  # the store is down: wait for it rather than crash
                self.store_unavailable(exc)
                await asyncio.sleep(STORE_RETRY_SECONDS)
            except API_FAILURES as exc:
                # The API server refused or lost the pod list (a 429 while many operators restart, a 5xx, a reset):
                # wait and list again, backing off, rather than crash the daemon (kopf restarts it only after 60 s).
                self.logger.warning("listing the run's pods failed (will try again in %.0f s): %s", wait, exc)
                await asyncio.sleep(wait)
                wait = min(2 * wait, MAX_BACKOFF_SECONDS)
        while not stopped and self.state is not None:  # None: the run failed, nothing left to do
            try:
                await self.step()
            except Exception as exc:  # noqa: BLE001 - count, log, carry on: the next step starts afresh
                metrics.RECONCILE_ERRORS.labels(self.ns, self.name).inc()
                self.logger.exception("reconcile step failed: %s", exc)
                await asyncio.sleep(1.0)
            if self.state is not None and self.state.complete and self.phase.terminal:
                break  # Succeeded, or Failed with models stopped: settled until an edit (or a restart) resumes them
            try:
                item = await asyncio.wait_for(self.queue.get(), timeout=1.0)
                self.queue.put_nowait(item)  # handled in the next step with the rest
            except TimeoutError:
                pass

    async def rebuild(self) -> None:
        assert self.state is not None and self.store is not None and self.run is not None
        store = self.store
        records = await asyncio.to_thread(lambda: shared_all(store.iter_results()))
        # Listed before anything is adopted: a list the API server refuses leaves the state as it was, and
        # drive() runs the whole rebuild again.
        pods = await self.shared.kube.list_pods(self.ns, f"{LABEL_RUN_UID}={self.uid}")
        if await self.conflict(records):
            return
        self.adopt_records(records)
        stopped_by_us = self.refailed_at is not None or (self.conditions.get("Suspended") or {}).get("status") == "True"
        for pod, claim in claims(pods, self.state, time.time()):
            if claim is None:  # an older try's outcome is already recorded
                await self.drain(pod)
                continue
            self.state.launched(self.state.trials[claim.tid], claim.name, claim.retry, claim.created)
            self.shared.inflight += 1
            inf = self.state.in_flight[claim.tid]
            inf.gated, inf.admitted = adopted_admission(pod, time.time())  # waiting for Kueue: not Pending too long
            if claim.deleting is not None and stopped_by_us:
                # Deleted by this operator when the run was suspended or failed (before a restart, or before
                # the edit that runs it again): as then, the try does not count unless it stored a record.
                inf = self.state.in_flight[claim.tid]
                inf.suspended, inf.reason = True, "pod deleted: the run was suspended or had failed"
                inf.ending, inf.kill_by = time.time(), claim.deleting
            self.queue.put_nowait(("MODIFIED", pod))  # a pod being deleted is seen ending there
        await self.learn_history(self.run.spec.launch_order.learn_from if self.run is not None else [])
        if self.state is None:
            return
        self.state.finish_rebuild()
        if self.run is not None and not self.run.spec.suspend:
            self.mark_started()  # a run created suspended starts once resumed
        self.phase = Phase.RUNNING

    async def drain(self, pod: dict[str, Any]) -> None:
        """A pod whose try's outcome is already recorded: delete it; one still running (its runner exiting after
        storing its record) keeps its slot until it is gone, so the run never has more pods than its capacity."""
        assert self.state is not None
        name = pod["metadata"]["name"]
        try:
            gone = not await self.shared.kube.delete_pod(self.ns, name)
        except Exception as exc:  # noqa: BLE001 - deleted again later; meanwhile it holds its slot if it runs
            self.deletes.later(name, exc)
            gone = False
        if gone or ended(pod):
            return
        grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", LOST_POD_GRACE_SECONDS)
        self.state.draining[name] = time.time() + float(grace) + TERMINATING_SLACK_SECONDS
        self.shared.inflight += 1

    async def delete_counted(self, name: str, bulk: bool = True) -> None:
        """Delete the pod of a try already counted (deletes.py): in the next bulk delete, or at once (``bulk`` False:
        its trial's next try reuses its name). A delete that fails never raises: the count stands, and it is retried."""
        if bulk:
            self.deletes.count(name)
        else:
            await self.deletes.one(self.shared.kube, name)

    def drained(self, name: str) -> None:
        assert self.state is not None
        if self.state.draining.pop(name, None) is not None:
            self.shared.inflight -= 1
            self.dirty = True

    # -- one step ---------------------------------------------------------------------------------
    async def step(self) -> None:
        if self.state is None or self.run is None:
            return
        await self.check_spec()
        if self.state is not None:
            await self.apply_suspend()  # before the pod events: a pod it deletes is seen ending as suspended
        if self.state is not None:
            await self.check_active_deadline()
        if self.state is None:
            await self.write_status()
            return
        events: list[tuple[str, dict[str, Any]]] = []
        if self.deferred and time.monotonic() >= self.deferred_until:
            events, self.deferred = self.deferred, []
        while not self.queue.empty():
            events.append(self.queue.get_nowait())
        by_trial: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for kind, pod in events:
            key = trial_of(pod) or (pod.get("metadata") or {}).get("name") or ""
            by_trial.setdefault(key, []).append((kind, pod))
        taken = await asyncio.gather(*(self.take_events(evs) for evs in by_trial.values()), return_exceptions=True)
        failed = next((r for r in taken if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
        if self.stopping():  # whoever drives the run next rebuilds it from its pods and records
            return
        if self.state is not None and time.monotonic() >= self.deadlines_at:
            # A pass over every trial in flight: once a second is enough for deadlines of seconds to minutes,
            # and at 5,080 pods in flight a pass per step was 7% of the operator's CPU.
            self.deadlines_at = time.monotonic() + DEADLINE_CHECK_SECONDS
            await self.check_deadlines()
            if self.state is not None:
                self.report_scheduling()
        if self.state is not None and time.monotonic() >= self.resync_at:
            await self.resync()
        if self.state is None:
            await self.write_status()
            return
        await self.deletes.flush(self.shared.kube, force=self.state.complete)  # counted tries' pods, in bulk
        if not self.run.spec.suspend and not self.stopping():
            self.mark_started()
            await self.launch()
        if self.state is None:  # the launch failed the run (the API server refuses its pods for good)
            return
        if self.state.complete and not self.phase.terminal:
            try:
                await self.finish()
            except STORE_FAILURES as exc:  # finish() runs again on the next step
                self.store_unavailable(exc)
        await self.write_status()

    async def apply_suspend(self) -> None:
        """spec.suspend, as a Job's: while true, the run's trial pods are deleted (also pods found by a restarted
        operator) and nothing is launched. A try so stopped does not count unless its pod stored its record first
        (then that record is its outcome, as always): no retry is charged and it is no infrastructure failure; its
        trial waits, pending, for the resume. Suspended=True says so; a resume sets it False (Resumed), restarts
        the clock of spec.activeDeadlineSeconds (status.startedAt, as a Job's startTime) and launches again."""
        assert self.state is not None and self.run is not None
        was = (self.conditions.get("Suspended") or {}).get("status") == "True"
        if self.suspended():
            if not was:
                running = len(self.state.in_flight)
                self.set_condition("Suspended", True, "JobSuspended", f"spec.suspend is true; {running} pod(s) deleted")
                kopf.info(self.body, reason="Suspended", message=f"{running} trial pod(s) deleted; none launched")
                self.dirty = True
            marked = [(tid, inf) for tid, inf in self.state.in_flight.items() if not inf.suspended]
            before = {tid: (inf.reason, inf.ending, inf.kill_by) for tid, inf in marked}
            for _, inf in marked:
                inf.suspended = True
                inf.reason = inf.reason or "pod deleted: the run was suspended"
                if inf.ending is None:
                    inf.ending = time.time()
                    inf.kill_by = inf.ending + LOST_POD_GRACE_SECONDS
            deleted = await asyncio.gather(
                *(self.shared.kube.delete_pod(self.ns, inf.pod) for _, inf in marked), return_exceptions=True
            )
            for (tid, inf), res in zip(marked, deleted, strict=True):
                if isinstance(res, BaseException):  # not deleted: the next step tries again (or a resume finds it live)
                    self.logger.warning("deleting the pod of %s (suspend) failed: %s", tid, res)
                    inf.suspended = False
                    inf.reason, inf.ending, inf.kill_by = before[tid]
                elif not res and self.state is not None:  # gone already: its DELETED event is past
                    try:
                        await self.outcome(tid, stub(inf.pod, tid), inf.reason)
                    except STORE_FAILURES as exc:  # nothing counted: the next step deletes (404) and tries again
                        inf.suspended = False
                        self.store_unavailable(exc)
        elif was and not self.run.spec.suspend:
            self.set_condition("Suspended", False, "Resumed", "spec.suspend is false; launching again")
            kopf.info(self.body, reason="Resumed", message="spec.suspend is false; launching again")
            if self.started_at is not None:
                self.started_at = now_iso()  # a Job's startTime is reset on resume: the deadline counts from here
            self.mark_started()
            self.dirty = True

    async def check_active_deadline(self) -> None:
        """spec.activeDeadlineSeconds, as a Job's: a run active longer than this (since status.startedAt, which a
        resume resets; suspended time does not count) stops its pods and ends Failed (DeadlineExceeded)."""
        assert self.run is not None and self.state is not None
        if self.suspended() or self.state.complete:
            return
        limit = self.run.spec.active_deadline_seconds
        started = _ts(self.started_at) if self.started_at is not None else None
        if (active := over_active_deadline(limit, started, time.time())) is None:
            return
        counts = self.state.counts()
        await self.give_up(
            "DeadlineExceeded",
            f"active {int(active)} s, over spec.activeDeadlineSeconds {limit}; {counts['finished']} of "
            f"{counts['total']} trials recorded (their records stay), {counts['running']} pod(s) deleted",
        )

    async def take_events(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        """One trial's pod events, in order. Different trials' events are taken concurrently: each outcome waits
        on reading its record and deleting its pod, and taken one after another those waits capped how many
        trials a run could turn over per second (at capacity 500 the next pods started seconds late)."""
        for i, (kind, pod) in enumerate(events):
            if self.state is None or self.stopping():  # the run stopped, or the operator: the rest is moot
                return
            try:
                await self.on_pod(kind, pod)
            except STORE_FAILURES as exc:  # nothing was counted: take this event (and the trial's next) later
                self.store_unavailable(exc)
                self.defer(events[i:])
                return
            except ApiError as exc:  # a delete the API refused: a Failed pod sends no further event to retry it
                self.logger.warning("a pod call failed (will try again): %s", exc)
                self.defer(events[i:])
                return

    def defer(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        """Take these pod events again after STORE_RETRY_SECONDS (a store outage, a pod call the API refused)."""
        self.deferred.extend(events)
        self.deferred_until = time.monotonic() + STORE_RETRY_SECONDS

    def per_model_free(self) -> dict[str, int]:
        assert self.run is not None and self.state is not None
        busy = self.state.in_flight_by_model()
        free = {}
        for m in self.run.spec.models:
            cap = m.concurrency or self.run.spec.concurrency.per_model or self.run.spec.concurrency.total
            free[m.name] = cap - busy.get(m.name, 0)
        return free

    async def launch(self) -> None:
        assert self.run is not None and self.state is not None
        if time.monotonic() < self.create_retry_at:  # the API server refused the last creates: backing off
            return
        room = self.run.spec.concurrency.total - len(self.state.in_flight) - len(self.state.draining)
        if room <= 0 or not self.state.waiting:
            return
        grant = self.shared.take_tokens(room)
        if grant <= 0:
            return
        picks = self.state.next_launches(grant, self.per_model_free(), time.time())
        self.shared.tokens += grant - len(picks)  # give back what was not used
        if not picks:
            return
        pods = [trial_pod(self.run, trial, self.shared.settings, retry) for trial, retry in picks]
        for (trial, retry), pod in zip(picks, pods, strict=True):
            self.deletes.forget(pod["metadata"]["name"])  # its name is a new try's now: never deleted for an old one
            self.state.launched(trial, pod["metadata"]["name"], retry, time.time())
            self.shared.inflight += 1
        results = await asyncio.gather(
            *(self.shared.kube.create_pod(self.ns, pod) for pod in pods), return_exceptions=True
        )
        refused: list[tuple[str, str, PodRefused]] = []
        created = False
        for (trial, _), pod, res in zip(picks, pods, results, strict=True):
            if not isinstance(res, BaseException):
                created = True
                if isinstance(res, dict):  # it existed (a create whose answer was lost): it may have ended already
                    self.queue.put_nowait(("MODIFIED", res))
                continue
            self.logger.warning("creating the pod of %s failed: %s", trial.trial_id, res)
            self.state.unlaunch(trial.trial_id)
            self.shared.inflight -= 1
            if isinstance(res, ForeignPod):  # wait for the other run's pod (or a dying one) to go, no spinning
                self.state.delayed[trial.trial_id] = time.time() + STORE_RETRY_SECONDS
            if isinstance(res, PodRefused):
                refused.append((trial.trial_id, pod["metadata"]["name"], res))
        self.dirty = True
        for tid, _, exc in refused:
            if exc.for_good:  # the same manifest is refused every time: an invalid spec, not a retry for ever
                await self.invalid(
                    f"the API server refused the pod of trial {tid} ({exc}); fix spec.pod or spec.limits"
                )
                return
        if refused:
            self.creates_refused(refused[-1][1], refused[-1][2])
        elif created:
            self.create_backoff = 0.0
            if (self.conditions.get("PodsCreated") or {}).get("status") == "False":
                self.set_condition("PodsCreated", True, "Created", "the API server accepts the run's pods again")

    def creates_refused(self, pod: str, exc: PodRefused) -> None:
        """Pod creates the API server refused, maybe only for a while (a 403 of a quota or an admission policy, a
        429): as a ReplicaSet's ReplicaFailure, a condition with the API's message (PodsCreated=False, FailedCreate)
        until a create passes, a Warning event per cause (rate-limited, see REFUSAL_EVENT_SECONDS), and the run's
        launches backing off (2 s doubling up to MAX_BACKOFF_SECONDS), not more load on a server that throttles."""
        cause = f"{exc.status}: {exc.message.replace(pod, '<pod>')}"  # the same for every trial pod it refuses
        self.set_condition("PodsCreated", False, "FailedCreate", cause)
        self.create_backoff = min(MAX_BACKOFF_SECONDS, max(STORE_RETRY_SECONDS, 2 * self.create_backoff))
        now = time.monotonic()
        self.create_retry_at = now + self.create_backoff
        last = max(self.refusals_warned.values(), default=None)
        said = self.refusals_warned.get(cause)
        if (said is None or now - said >= REFUSAL_EVENT_SECONDS) and (
            last is None or now - last >= REFUSAL_EVENT_GAP_SECONDS
        ):
            self.refusals_warned = {c: t for c, t in self.refusals_warned.items() if now - t < REFUSAL_EVENT_SECONDS}
            self.refusals_warned[cause] = now
            kopf.warn(
                self.body,
                reason="PodCreateRefused",
                message=(
                    f"the API server refused to create trial pods ({cause}); launches are tried again, backing off "
                    f"up to {int(MAX_BACKOFF_SECONDS)} s, until it accepts them (status condition PodsCreated): a "
                    "quota, an admission policy, RBAC or spec.pod / spec.limits may need fixing"
                )[:1000],
            )

    # -- outcomes ---------------------------------------------------------------------------------
    async def on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        """One pod event: a draining pod gone frees its slot; an event of a try's own pod acts as ``podview.seen``
        says (take its outcome, wait for its pod to go, or give up on it)."""
        assert self.state is not None
        name = (pod.get("metadata") or {}).get("name")
        status = pod.get("status") or {}
        if name in self.state.draining and (kind == "DELETED" or ended(pod)):
            self.drained(name)
        if kind == "DELETED":
            self.deletes.forget(name or "")
        tid = trial_of(pod)
        inf = self.state.in_flight.get(tid)
        if inf is None or inf.pod != name:
            return  # a pod we already handled (or a stale try): nothing to count
        now = time.time()
        if inf.started is None and runner_started(status):
            # Its runner started (as far as the pod says): seen here first, e.g. by an operator that restarted
            # while the pod was on a lost node, Terminating or Unknown. It may still be running, so it is waited
            # for as long as a runner that was seen running, never retried after the Pending path's short wait.
            inf.started = now
        inf.disrupted = disruption_seen(inf.disrupted, kind, pod)
        if kind != "DELETED":  # (a gated pod deleted by a suspend is no admission)
            gated, inf.admitted = admission_seen(inf.gated, inf.admitted, pod, now)
            self.dirty = self.dirty or gated != inf.gated  # status.counts.waitingAdmission changes
            inf.gated = gated
        # A pod waiting for admission is not unschedulable (its PodScheduled=False says SchedulingGated).
        self.scheduling.see(tid, pod, inf.started is not None or inf.gated, now)
        if inf.restarted is None and inf.ending is None:
            inf.restarted = restarted(pod)  # a record this try stores after it is no outcome (verdict.judge)
        event = seen(kind, pod, inf, now)
        if event.act is Act.TAKE:
            await self.outcome(tid, pod, event.reason)
        elif event.act is Act.ENDING:
            inf.ending, inf.kill_by, inf.reason = now, event.kill_by, event.reason
        elif event.act is Act.END:
            assert event.reason is not None
            await self.end_try(tid, event.reason, pod, gone_later=event.gone_later)

    def report_scheduling(self) -> None:
        """Trials held up Pending (scheduling.Tracker): the PodsScheduled condition naming each cause and how many
        trials it holds up, and one Warning event per cause (again, with the new count, at most every
        scheduling.EVENT_EVERY_SECONDS), never one per pod."""
        assert self.state is not None
        self.scheduling.forget([t for t in self.scheduling.seen if t in self.state.done])
        cond, due = self.scheduling.report(time.time())
        if cond is not None:
            status, reason, message = cond
            self.set_condition(SCHEDULED, status == "True", reason, message)
            self.dirty = True
        for cause in due:
            kopf.warn(self.body, reason="TrialsPending", message=event_message(cause))

    async def end_try(self, tid: str, reason: str, pod: dict[str, Any] | None = None, gone_later: bool = False) -> None:
        """The operator gives up on a try whose pod has not finished: delete the pod (gracefully) and take the
        outcome once it is gone, like a Job that does not replace a pod until it has terminated. A retry
        started earlier could run beside a try still writing the same trial's record. ``gone_later``: called for
        one of the pod's events, so its DELETED event is still to come even if the delete finds it gone; the
        outcome waits for that event (a try run again under the same name must not take the old pod's event)."""
        assert self.state is not None
        inf = self.state.in_flight[tid]
        before = (inf.reason, inf.ending, inf.kill_by)
        inf.reason, inf.ending = reason, time.time()
        grace = ((pod or {}).get("spec") or {}).get("terminationGracePeriodSeconds", LOST_POD_GRACE_SECONDS)
        inf.kill_by = inf.ending + float(grace)
        try:
            deleted = await self.shared.kube.delete_pod(self.ns, inf.pod)
        except Exception:  # not deleted: as it was, so that the event taken again (or the next step) tries again
            inf.reason, inf.ending, inf.kill_by = before
            raise
        if not deleted and not gone_later:  # gone: its DELETED event is past
            await self.outcome(tid, stub(inf.pod, tid), reason)

    async def outcome(self, tid: str, pod: dict[str, Any], infra_reason: str | None, streak: bool = True) -> None:
        """Take a finished try as ``verdict.judge`` rules: the stored record decides; a try without one is an
        infrastructure error (``streak``: one that counts towards backoffLimit), unless it does not count at all."""
        if self.state is None:  # the run failed while this try's pod was being deleted: nothing left to count
            return
        assert self.store is not None and self.run is not None
        flying = self.state.in_flight.get(tid)
        trial = flying.trial if flying is not None else self.state.trials[tid]  # a try in flight holds its spec
        record = await asyncio.to_thread(self.store.read_result, tid)
        if self.state is None:  # the run stopped while the record was read (another trial's outcome failed it)
            return
        tries = self.state.retries.get(tid, 0) + 1
        inf = self.state.in_flight.get(tid)
        suspended, disrupted = (inf.suspended, inf.disrupted) if inf is not None else (False, None)
        v = judge(
            record,
            trial.spec_hash,
            tries,
            suspended=suspended,
            disrupted=disrupted,
            disruptions=self.state.disruptions.get(tid, 0),
            restarted=inf.restarted if inf is not None else None,
            parked=inf.parked if inf is not None else False,
        )
        model, reason = trial.model.name, infra_reason or failure_reason(pod, v.record)
        if v.kind is Kind.UNCOUNTED:
            # Its trial waits at the front of the queue, to run under the same pod name (its pod is gone: outcomes
            # of such tries are taken only then).
            if v.in_a_row is not None and inf is not None:
                self.state.disrupted(tid)
                metrics.DISRUPTIONS.labels(self.ns, self.name, model).inc()
                kopf.info(
                    self.body,
                    reason="Disrupted",
                    message=f"{tid}: pod {inf.pod} disrupted ({inf.disrupted}) before it stored a record; run again "
                    f"as the same try ({v.in_a_row} of {DISRUPTION_LIMIT} in a row allowed)",
                )
            if inf is not None and inf.parked:  # behind the waiting trials, after a backoff: its slot is theirs
                parks = self.state.parks.get(tid, 0) + 1
                self.state.requeue(tid, time.time() + requeue_delay(parks))
            else:
                self.state.unlaunch(tid)
            self.shared.inflight -= 1
            await self.delete_counted(pod["metadata"]["name"], bulk=False)  # the next try reuses its name
            self.dirty = True
            return
        said, stored = termination_message(pod), v.stored
        if stored is not None and said is not None and bool(said.get("passed")) != bool(stored.get("passed")):
            self.logger.warning(
                "%s: termination message %s disagrees with the stored record; the record wins", tid, said
            )
        if v.kind is Kind.PROVIDER and stored is not None:
            # The provider failed after the runner's retries: measured nothing; try again like an infra error
            # (the pod itself worked, so the run's infrastructure budget is not charged).
            await self.charge_retries(model, stored)
            metrics.not_scored(self.ns, self.name, model, PROVIDER_ERROR)
            if self.state.infra_failed(tid, time.time(), self.run.spec.retries.backoff_seconds, harness=False):
                metrics.INFRA_RETRIES.labels(self.ns, self.name, model).inc()
            else:
                self.state.finished(tid, stored)
                metrics.observe_record(self.ns, self.name, stored, scheduling_seconds(pod, time.time()))
        elif stored is not None:
            self.state.finished(tid, stored, time.time())
            metrics.observe_record(self.ns, self.name, stored, scheduling_seconds(pod, time.time()))
            if not is_scored(stored.get("failure")):
                metrics.not_scored(self.ns, self.name, model, str(stored.get("failure")))
            await self.charge_retries(model, stored)
            if v.stops_model and stored.get("failure") == BUDGET_EXHAUSTED:
                why = str(stored.get("error") or BUDGET_EXHAUSTED)  # the run's budget: every model stops
                scope = "run" if "spec.budget of" in why else "model"
                for m in [model] if scope == "model" else [m.name for m in self.run.spec.models]:
                    await self.stop_model(m, "BudgetExhausted", why)
            elif v.stops_model:
                await self.stop_model(model, "ConfigError", f"config_error: {stored.get('error')}")
        else:
            infra = infra_record(self.run, trial, tries, reason).model_dump(mode="json")
            # Store first: if it fails, nothing is counted and the caller takes this outcome again later.
            await asyncio.to_thread(self.store.write_files, tid, {})
            await asyncio.to_thread(self.store.commit, tid, dumps(infra))
            if self.state is None:
                return
            if v.disrupted and inf is not None:  # disrupted too often in a row: this one counts
                metrics.DISRUPTIONS.labels(self.ns, self.name, model).inc()
                kopf.warn(
                    self.body,
                    reason="Disrupted",
                    message=f"{tid}: pod {inf.pod} disrupted ({inf.disrupted}) {DISRUPTION_LIMIT + 1} times in a row: "
                    "counted as an infrastructure failure",
                )
            metrics.not_scored(self.ns, self.name, model, INFRA_ERROR, reason)
            if self.state.infra_failed(tid, time.time(), self.run.spec.retries.backoff_seconds, harness=streak):
                metrics.INFRA_RETRIES.labels(self.ns, self.name, model).inc()
            else:
                self.state.finished(tid, infra)
                metrics.observe_record(self.ns, self.name, infra)
                kopf.warn(self.body, reason="InfraError", message=f"{tid}: {reason} (gave up after {tries} tries)")
        self.shared.inflight -= 1
        await self.delete_counted(pod["metadata"]["name"], bulk=bulk_deletable(pod))
        self.dirty = True
        if self.state is None:
            return
        budget = backoff_budget(self.run.spec.retries.backoff_limit, self.run.spec.concurrency.total)
        if self.state.infra_streak > budget:
            await self.give_up(
                "BackoffLimitExceeded",
                f"{self.state.infra_streak} infrastructure failures in a row, over spec.retries.backoffLimit "
                f"{budget} (last: {tid}: {reason}); fix the cause and edit the EvalRun to resume it",
            )

    async def resync(self) -> None:
        """Pods gone without a DELETED event. kopf restarts a watch the API server expired (410 Gone) from a fresh
        list, and a pod deleted in between is never reported (client-go's informers report it as a tombstone; kopf
        does not): its try waited out its whole deadline, and a draining pod held its slot. Every RESYNC_SECONDS
        the run's pods are listed; one missing from two lists in a row (``podview.vanished``) is taken as deleted,
        its record (if its runner stored one) deciding as always."""
        assert self.state is not None
        self.resync_at = time.monotonic() + RESYNC_SECONDS
        try:
            pods = await self.shared.kube.list_pods(self.ns, f"{LABEL_RUN_UID}={self.uid}")
        except API_FAILURES as exc:  # an optimisation: tried again at the next interval
            self.logger.warning("listing the run's pods failed (will try again): %s", exc)
            return
        if self.state is None:
            return
        tracked = {inf.pod: tid for tid, inf in self.state.in_flight.items()}
        listed = {p["metadata"]["name"] for p in pods}
        gone, self.unlisted = vanished(listed, [*tracked, *self.state.draining], self.unlisted)
        for name in gone:
            self.logger.warning("pod %s is gone, though no DELETED event said so: taken as deleted", name)
            if name in tracked:
                self.queue.put_nowait(("DELETED", stub(name, tracked[name])))
            else:
                self.drained(name)

    async def check_deadlines(self) -> None:
        """Tries that will not end by themselves (``overdue.overdue_try``). A Pending one is deleted (its outcome is
        taken once it is gone); one whose runner certainly stopped, though its pod does not say so, is counted at
        once."""
        assert self.state is not None and self.run is not None
        await self.deletes.retry(self.shared.kube)
        now = time.time()
        for name in overdue_drains(self.state.draining, now):
            self.drained(name)
        for tid, inf in list(self.state.in_flight.items()):
            if self.state is None:
                return
            held = self.scheduling.seen.get(tid)
            if (
                inf.started is None
                and inf.ending is None
                and held is not None
                and park_due(
                    held[1],
                    inf.created,
                    held[0],
                    now,
                    pending_timeout=self.run.spec.pod.pending_timeout_seconds,
                    others_waiting=self.state.waiting.size > 0,
                )
            ):
                inf.parked = True
                try:
                    await self.end_try(tid, f"pod unschedulable ({held[1].message}): its slot given back, requeued")
                except API_FAILURES as exc:  # not deleted: parked again on the next check
                    inf.parked = False
                    self.logger.warning("deleting the unschedulable pod of %s failed (will try again): %s", tid, exc)
                    return
                continue
            due = overdue_try(
                inf,
                now,
                run_seconds=pod_deadline(inf.trial, self.shared.settings) + LOST_POD_GRACE_SECONDS,
                pending_seconds=self.run.spec.pod.pending_timeout_seconds,
                slack=TERMINATING_SLACK_SECONDS,
            )
            if due is None:
                continue
            if not due.count:
                held = self.scheduling.seen.get(tid)
                why = f"pod unschedulable: {held[1].reason}: {held[1].message}; {due.reason}" if held else due.reason
                try:
                    await self.end_try(tid, why)
                except STORE_FAILURES as exc:
                    self.store_unavailable(exc)
                    return
                except API_FAILURES as exc:  # not deleted: still overdue on the next check
                    self.logger.warning(
                        "deleting the pod of %s (Pending deadline) failed (will try again): %s", tid, exc
                    )
                    return
                continue
            # Its pod may still exist (a lost node), so its name cannot be used again: a disruption or a suspend
            # counts here (charged, and retried under the next name), as a Job replaces a pod stuck terminating.
            inf.disrupted, inf.suspended = None, False
            try:
                await self.outcome(tid, stub(inf.pod, tid), due.reason, streak=due.streak)
            except STORE_FAILURES as exc:  # still overdue on the next step
                self.store_unavailable(exc)
                return


def infra_record(run: EvalRun, trial: TrialSpec, tries: int, reason: str) -> TrialResult:
    """The operator's own record of an infrastructure failure: it also carries the durable retry count."""
    now = now_iso()
    return TrialResult(
        **trial.record_identity(),
        passed=False,
        failure=INFRA_ERROR,
        error=reason,
        infra_attempts=tries,
        started_at=now,
        finished_at=now,
    )
