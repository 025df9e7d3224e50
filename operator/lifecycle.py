"""The run-level half of the reconciler: planning its spec, taking edits, failing or completing it, its status.

``Reconciler`` (reconciler.py) extends it with the run's task loop and its trial pods; one object owns both. What
either decides is in the pure modules beside runstate.py (edits, projection, verdict, podview, overdue).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import kopf

from mcpfleet.operator import metrics
from mcpfleet.operator.edits import EditKind, Replan, Resumed, edit, refused_message, replan, resumed, spec_problems
from mcpfleet.operator.manifests import LABEL_RUN_UID
from mcpfleet.operator.phase import Phase
from mcpfleet.operator.planning import check_run, planned_lazily
from mcpfleet.operator.projection import Event, condition, ending, figures, transition
from mcpfleet.operator.projection import status as project_status
from mcpfleet.operator.runstate import RunState, plan_hash
from mcpfleet.operator.shared import Shared
from mcpfleet.runner._util.plural import plural
from mcpfleet.runner._util.sharing import shared_all
from mcpfleet.runner.plan.history import read_history
from mcpfleet.runner.plan.trials import Trials
from mcpfleet.runner.report.summary import PLAN_FILE, build_summary, mixed_harness, mixed_servers, plan_file
from mcpfleet.runner.results.outcome import is_scored
from mcpfleet.runner.results.records import now_iso, service_label
from mcpfleet.runner.results.store import ResultStore, StoreError, open_store, store_config
from mcpfleet.runner.spec.evalrun import EvalRun
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.tasks.discovery import bundled_root

STORE_FAILURES = (StoreError, OSError)  # the results store is unreachable: try the same step again later
STORE_RETRY_SECONDS = 2.0


class Lifecycle:
    """One EvalRun's spec, plan and status, and the effects that change them (status writes, events, failing)."""

    def __init__(self, shared: Shared, body: kopf.Body, logger: logging.Logger | logging.LoggerAdapter[Any]):
        self.shared, self.body, self.logger = shared, body, logger
        self.ns: str = body.metadata.namespace or "default"
        self.name: str = body.metadata.name or ""
        self.uid: str = body.metadata.uid or ""
        self.state: RunState | None = None
        self.run: EvalRun | None = None
        self.store: ResultStore | None = None
        self.generation: int | None = None
        self.dirty = True
        self.unwritten = False  # the last status write failed (it is tried again, also once the run settled)
        self.last_status = 0.0
        self.phase = Phase.PENDING
        self.started_at = body.status.get("startedAt")
        self.conditions: dict[str, dict[str, Any]] = {c["type"]: c for c in body.status.get("conditions") or []}
        self.plan_hash: str | None = body.status.get("planHash")
        self.planned_text: str | None = None  # status.plannedSpec as this operator would write it
        self.planned_unwritten = False  # ... and not written yet
        # When the run last failed, if this drive runs it again (an edit): pods it stopped then, still going, and
        # infrastructure failures before then do not count again (rebuild).
        self.refailed_at: str | None = None
        self.store_retry_at = 0.0  # the results store failed: reading and writing it waits until then
        self.finished_at: str | None = body.status.get("finishedAt")
        # What status last showed of a run whose state was dropped (it failed): its counts stay, none running.
        self.snapshot: dict[str, Any] | None = None
        # Pod creates are tried again from then on (monotonic): the API server refused them; an edit may fix that.
        self.create_retry_at = 0.0

    def set_condition(self, type_: str, ok: bool, reason: str, message: str) -> None:
        self.conditions[type_] = transition(
            self.conditions.get(type_), condition(type_, ok, reason, message, now_iso())
        )

    def post(self, event: Event) -> None:
        (kopf.warn if event.warning else kopf.info)(self.body, reason=event.reason, message=event.message)

    def raw(self) -> dict[str, Any]:
        """The object as an EvalRun to parse (its status left out)."""
        return {k: v for k, v in dict(self.body).items() if k in ("apiVersion", "kind", "metadata", "spec")}

    async def load(self) -> bool:
        """Validate and plan; an invalid run gets a Failed status naming the field, never a retry loop."""
        raw = self.raw()
        self.generation = self.body.metadata.get("generation")
        status = self.body.status
        counts = status.get("counts") or {}
        ran = counts.get("finished", 0) + counts.get("running", 0)
        kept: Resumed | None = None
        planned_spec = raw.get("spec")
        try:
            run = parse_evalrun(raw, f"EvalRun {self.ns}/{self.name}")
            if ran and (kept := resumed(raw, status.get("plannedSpec"), run)) is not None:
                # The run keeps the frozen fields it was planned with, as the operator that watched did (an edit it
                # refused, or one made while none did), and takes the rest (suspend, concurrency, ...) from the object.
                run, planned_spec = kept.run, kept.spec
            trials = await asyncio.to_thread(planned_lazily, run)  # an s3:// pack is fetched first
            self.check_pods(run, trials)
            hashed = await asyncio.to_thread(plan_hash, trials)  # every trial's hash, computed once
            store = open_store(run.spec.output, run.name, bundled_root(), run_uid=self.uid)
        except STORE_FAILURES:
            raise  # an s3:// pack that cannot be read yet: drive() waits and tries again
        except Exception as exc:  # noqa: BLE001 - any other failure to plan is the spec's or its pack's: never a crash loop
            await self.invalid("; ".join(spec_problems(exc)))  # also stops pods of a run planned before (a restart)
            return False
        succeeded = status.get("phase") == Phase.SUCCEEDED
        decision = replan(self.plan_hash, hashed, ran=bool(ran), kept=kept is not None, succeeded=succeeded)
        if decision in (Replan.PLAN_CHANGED, Replan.REFUSED):
            self.phase = Phase.read(status.get("phase")) or Phase.RUNNING
        if decision is Replan.PLAN_CHANGED:
            await self.fail(
                "PlanChanged",
                f"the run's spec is the one it was planned with, but its trials are not: the tasks at "
                f"{run.spec.tasks.path} or mcpfleet's version changed since (an operator upgrade, an edited "
                "pack), and the records so far measured the old ones; create a new EvalRun to run the new ones",
            )
            return False
        if decision is Replan.REFUSED:
            # Edited while no operator watched, after trials ran (the CRD's rule refuses this on a real API server),
            # and status does not say which spec was planned (an operator before status.plannedSpec).
            await self.reject_edit([])
            if not self.phase.terminal:  # its accepted spec is gone: it cannot go on as it was planned
                await self.fail("ImmutableField", self.conditions["Valid"]["message"])
            return False
        self.keep_planned(planned_spec)
        if decision is Replan.UNCHANGED:
            self.phase = Phase.SUCCEEDED  # an edit of what does not change results: nothing to redo
            self.set_condition("Valid", True, "Planned", f"{plural(len(trials), 'trial')} planned")
            if kept is not None and kept.refused:
                self.set_refused(kept.refused)
            await self.write_status(force=True)
            return False
        self.run, self.store, self.plan_hash = run, store, hashed
        failed = self.conditions.pop("Failed", None)  # a fixed spec runs again
        self.refailed_at = failed.get("lastTransitionTime") if failed and failed.get("status") == "True" else None
        stopped = self.conditions.get("ModelsStopped") or {}
        if stopped.get("status") == "True":  # a fresh plan launches every model again: the stops are lifted
            why = "SpecEdited" if status.get("observedGeneration") != self.generation else "OperatorRestarted"
            models = ", ".join(sorted(status.get("stoppedModels") or {})) or "the stopped models"
            self.set_condition("ModelsStopped", False, why, f"launches resumed for {models}")
        self.finished_at = None

        services = sorted({service_label({"service": t.service, "variant": t.variant}) for t in trials.samples()})
        metrics.init_run(self.ns, self.name, [(m.name, s) for m in run.spec.models for s in services])
        self.state = RunState.plan(trials, run.spec.retries.limit)
        self.set_condition("Valid", True, "Planned", f"{plural(len(trials), 'trial')} planned")
        if kept is not None and kept.refused:
            self.set_refused(kept.refused)
        return True

    def keep_planned(self, spec: Any) -> None:
        """Remember the spec the run is planned with, for status.plannedSpec: an operator that restarts (or a peer
        that takes over) then keeps it as this one did, whatever edit the object shows."""
        text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        self.planned_unwritten = text != self.body.status.get("plannedSpec")
        self.planned_text = text

    def check_pods(self, run: EvalRun, trials: Trials) -> None:
        """What only the operator needs (``planning.check_run``), as a ValueError naming the field."""
        check_run(run, trials, self.shared.settings)

    def drop_state(self) -> None:
        """Stop tracking the run (it failed): its pods in flight no longer count against the operator's cap, and
        none of them is running any more as far as status says (their trials show pending)."""
        if self.state is not None:
            self.shared.inflight -= self.state.release_all()
            self.snapshot = figures(self.state)
        self.state = None

    async def stop_pods(self, why: str) -> None:
        """A run that failed mid-run launches nothing more and stops what it has running: its trial pods are
        deleted (listed by label, so pods of an earlier operator incarnation go too). Their stored records,
        if any, stay where they are; the run itself is over."""
        try:
            pods = await self.shared.kube.list_pods(self.ns, f"{LABEL_RUN_UID}={self.uid}")
            for pod in pods:
                await self.shared.kube.delete_pod(self.ns, pod["metadata"]["name"])
        except Exception as exc:  # noqa: BLE001 - the EvalRun's deletion still removes them (ownerReferences)
            self.logger.warning("could not delete the pods of the failed run: %s", exc)
            return
        if pods:
            kopf.warn(self.body, reason="Stopped", message=f"{len(pods)} trial pod(s) deleted: {why}"[:1000])

    async def reject_edit(self, fields: list[str]) -> None:
        """A result-affecting edit after trials ran is refused, not acted on: the run keeps the spec it was
        planned with (its generation is observed, and Valid=False says why); reverting the edit clears it."""
        self.set_refused(fields)
        await self.write_status(force=True)

    def set_refused(self, fields: list[str]) -> None:
        message = refused_message(fields, self.body.metadata.get("generation"))
        self.set_condition("Valid", False, "ImmutableField", message)

    async def give_up(self, reason: str, message: str) -> None:
        """Stop the run like a Job past its backoffLimit or activeDeadlineSeconds: Failed, with a Failed condition
        saying why, its pods deleted; the status written last shows none of them running (their records stay)."""
        self.phase = Phase.FAILED
        self.finished_at = now_iso()
        self.set_condition("Failed", True, reason, message)
        kopf.warn(self.body, reason=reason, message=message[:1000])
        await self.stop_pods(f"the run failed ({reason})")
        self.drop_state()
        await self.write_status(force=True)

    async def fail(self, reason: str, message: str) -> None:
        """An invalid or conflicting spec: Failed (Valid=False says why); pods it has are deleted, as give_up does."""
        self.phase = Phase.FAILED
        self.finished_at = now_iso()
        self.set_condition("Valid", False, reason, message)
        self.set_condition("Failed", True, reason, message)  # the Job's terminal condition
        await self.stop_pods(f"the run failed ({reason})")
        self.drop_state()
        await self.write_status(force=True)

    async def invalid(self, message: str) -> None:
        """A spec that cannot run (InvalidSpec): failed, and a Warning event saying why."""
        await self.fail("InvalidSpec", message)
        kopf.warn(self.body, reason="InvalidSpec", message=message[:1000])

    async def conflict(self, records: list[dict[str, Any]]) -> bool:
        """Scored records of this run's trials stored with another spec: the run fails (SpecConflict)."""
        assert self.state is not None
        conflicts = [
            r["trial_id"]
            for r in records  # infra errors measured nothing: never a conflict
            if r.get("trial_id") in self.state.trials
            and is_scored(r.get("failure"))
            and r.get("spec_hash") != self.state.trials.spec_hash(r["trial_id"])
        ]
        if conflicts:
            await self.fail(
                "SpecConflict",
                f"{len(conflicts)} stored trial(s) were recorded with a different "
                f"spec (e.g. {conflicts[0]}); create a new EvalRun instead of editing",
            )
        return bool(conflicts)

    def mark_started(self) -> None:
        assert self.state is not None
        if self.started_at is None:
            self.started_at = now_iso()
            kopf.info(self.body, reason="Started", message=f"{plural(len(self.state.trials), 'trial')} planned")
            self.dirty = True

    async def learn_history(self, names: list[str]) -> None:
        """Earlier runs' trial times seed the launch order (spec.launchOrder.learnFrom). Reading them is an
        optimisation: a run that cannot be read is a Warning event, and this run goes on without it."""
        if not names or self.run is None or self.state is None:
            return
        config = store_config(self.run.spec.output, self.name, bundled_root())
        history = await asyncio.to_thread(read_history, config, names, self.uid)
        if self.state is None:
            return
        counted = self.state.waiting.learn(history.samples)
        for problem in history.problems:
            kopf.warn(self.body, reason="LaunchHistoryUnavailable", message=problem[:1000])
        if counted:
            tasks = len({task for task, _, _ in history.samples if task in self.state.waiting.rank})
            kopf.info(
                self.body,
                reason="LaunchHistory",
                message=f"launch order seeded with {counted} trial times of {tasks} tasks from {', '.join(names)}",
            )

    def suspended(self) -> bool:
        """spec.suspend applies: the run is not over and launches nothing (its pods are deleted)."""
        return self.run is not None and self.run.spec.suspend and self.state is not None and not self.state.complete

    def store_unavailable(self, exc: BaseException) -> None:
        self.logger.warning("the results store failed (will try again): %s", exc)
        self.store_retry_at = time.monotonic() + STORE_RETRY_SECONDS

    async def check_spec(self) -> None:
        """Spec edits (``edits.edit`` decides): suspend and concurrency apply at once; more trials are added; an edit
        of a frozen field once trials exist is refused (Valid=False) while the rest of it applies; a new output
        before any trial exists is where the records are read from then on."""
        gen = self.body.metadata.get("generation")
        if gen == self.generation or self.state is None or time.monotonic() < self.store_retry_at:
            return
        assert self.run is not None
        seen, self.generation = self.generation, gen
        raw = self.raw()
        moved: tuple[ResultStore, list[dict[str, Any]]] | None = None  # the new output's store and its records
        try:
            run = parse_evalrun(raw)
            trials = await asyncio.to_thread(planned_lazily, run)
            self.check_pods(run, trials)
            change = edit(
                raw,
                run,
                self.run,
                json.loads(self.planned_text) if self.planned_text else None,
                plan_changed=plan_hash(trials) != self.plan_hash,
                trials_exist=bool(self.state.done or self.state.in_flight),
            )
            if change.kind is EditKind.REFUSED:
                await self.reject_edit(change.refused)
                return
            assert change.run is not None
            run = change.run
            if change.kind is EditKind.MERGED:  # the rest of the edit applies, with the frozen fields as planned
                trials = await asyncio.to_thread(planned_lazily, run)
                self.check_pods(run, trials)
                if plan_hash(trials) != self.plan_hash:  # more changed under the run than the edit
                    await self.reject_edit(change.refused)
                    return
            elif change.moves_output:  # no trial ran nor runs: read the records where the pods will store them now
                store = open_store(run.spec.output, run.name, bundled_root(), run_uid=self.uid)
                moved = store, await asyncio.to_thread(lambda: shared_all(store.iter_results()))
        except STORE_FAILURES as exc:  # the pack or the new output cannot be read right now: take the edit later
            self.generation = seen
            self.store_unavailable(exc)
            return
        except Exception as exc:  # noqa: BLE001 - as in load(): an edit that cannot be planned fails the run
            await self.invalid("; ".join(spec_problems(exc)))
            return
        before_history = self.run.spec.launch_order.learn_from
        self.run, self.plan_hash = run, plan_hash(trials)
        self.keep_planned(change.spec)
        self.create_retry_at = 0.0  # the edit may fix what the API server refused (spec.pod): creates are tried at once
        if change.refused:  # still refused: Valid stays False (its transition time too)
            self.set_refused(change.refused)
        else:
            self.set_condition("Valid", True, "Planned", f"{plural(len(trials), 'trial')} planned")
        self.state.trials = trials
        self.state.retry_limit = run.spec.retries.limit
        self.state.done.keep(self.state.trials)
        if moved is not None:
            self.store = moved[0]
            if await self.conflict(moved[1]):
                return
            self.adopt_records(moved[1])
        added = [n for n in run.spec.launch_order.learn_from if n not in before_history]
        lifted = self.state.resume_models()  # an edit (a new key reference, another model) lifts the stops
        if lifted:
            self.set_condition(
                "ModelsStopped", False, "SpecEdited", f"launches resumed for {', '.join(sorted(lifted))}"
            )
        self.state.finish_rebuild()
        if self.phase.terminal and not self.state.complete:
            self.phase = Phase.RUNNING
            self.finished_at = None
            self.conditions.pop("Complete", None)
            self.conditions.pop("Failed", None)
        self.dirty = True
        await self.learn_history(added)  # runs named by the edit (one dropped keeps what it taught)

    def adopt_records(self, records: list[dict[str, Any]]) -> None:
        """The stored records of the run's output (on rebuild, or a new output while no trial ran or runs): the tries
        counted so far are the ones stored there (the old output's infrastructure records no longer count)."""
        assert self.state is not None and self.run is not None
        self.state.retries, self.state.retries_total = {}, 0
        for r in records:
            self.state.adopt_record(r, self.run.spec.retries.backoff_seconds)
        # backoffLimit counts on across a restart; an edit that runs a failed run again starts it afresh
        self.state.rebuild_streak(records, since=self.refailed_at)

    async def charge_retries(self, model: str, record: dict[str, Any]) -> None:
        """Count a trial's LLM retries against its model's budget; stop the model when it is spent."""
        assert self.state is not None and self.run is not None
        spent = self.state.charge_retries(model, int((record.get("totals") or {}).get("llm_retries") or 0))
        budget = self.run.spec.provider.model_retry_budget
        if budget is not None and spent > budget:
            why = f"its trials spent {spent} LLM retries, over provider.modelRetryBudget ({budget})"
            await self.stop_model(model, "RetryBudget", why)

    async def stop_model(self, model: str, reason: str, why: str) -> None:
        """No more launches of ``model`` (no more paid trials): one condition for the run, one event per model.

        Its trials in flight finish; the rest wait for a spec edit (which lifts the stop) or a new run."""
        assert self.state is not None
        if not self.state.stop_model(model, why):
            return
        message = "; ".join(f"{m}: {w}" for m, w in sorted(self.state.stopped.items()))
        self.set_condition("ModelsStopped", True, reason, message)
        kopf.warn(self.body, reason=reason, message=f"model {model} stopped: {why}"[:1000])
        self.logger.warning("model %s stopped: %s", model, why)
        self.dirty = True

    async def finish(self) -> None:
        """Every trial is done (or stopped): the summary and plan files, then the ending ``projection.ending``
        decides (Succeeded, or Failed with Complete=False), its conditions and event."""
        assert self.run is not None and self.state is not None and self.store is not None
        trials = list(self.state.trials.planned())  # (id, spec hash) of each: no TrialSpec built
        summary = await asyncio.to_thread(build_summary, self.run, trials, self.store, dict(self.state.stopped))
        await asyncio.to_thread(self.store.write_json, PLAN_FILE, plan_file(self.run, trials))
        await asyncio.to_thread(self.store.write_json, "summary.json", summary)
        if mixed := mixed_harness(summary):
            kopf.warn(self.body, reason="MixedHarness", message=mixed)
        for changed in mixed_servers(summary):  # a variant's server image rebuilt mid-run
            kopf.warn(self.body, reason="MixedServers", message=changed)
        end = ending(self.state)
        self.phase, self.finished_at = end.phase, now_iso()
        self.set_condition("Complete", end.phase is Phase.SUCCEEDED, end.reason, end.message)
        if end.phase is Phase.FAILED:  # stopped models wait for a fix (a spec edit resumes them)
            self.set_condition("Failed", True, end.reason, end.message)
        if end.event is not None:
            self.post(end.event)
        await self.write_status(force=True)

    # -- status -----------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        for cond in self.conditions.values():  # the generation a condition was set at, as Kubernetes does
            cond.setdefault("observedGeneration", self.generation)
        return project_status(
            phase=Phase.SUSPENDED if self.suspended() else self.phase,
            generation=self.generation,
            conditions=self.conditions.values(),
            started_at=self.started_at,
            finished_at=self.finished_at,
            plan_hash=self.plan_hash,
            planned_spec=self.planned_text if self.planned_unwritten else None,
            shown=figures(self.state) if self.state is not None else self.snapshot,
            counts=self.body.status.get("counts"),
        )

    async def write_status(self, force: bool = False) -> None:
        """Write the run's status (at most once per status_interval unless forced). A write the API server
        refuses or that is lost leaves the run dirty: it is written again, also once the run has settled."""
        now = time.monotonic()
        if not force and (not self.dirty or now - self.last_status < self.shared.settings.status_interval):
            return
        self.dirty, self.last_status = False, now
        self.export_gauges()
        try:
            await self.shared.kube.patch_status(self.ns, self.name, self.status())
        except Exception as exc:  # noqa: BLE001 - refused or lost: written again after status_interval
            self.dirty = self.unwritten = True
            self.logger.warning("writing the status failed (will try again): %s", exc)
            return
        self.unwritten = self.planned_unwritten = False

    def export_gauges(self) -> None:
        """Progress, pass rates and pods in flight for dashboards: a projection of the same state as status."""
        st, run = self.state, self.run
        if st is None or run is None:
            return
        counts = st.counts()
        for state in ("total", "finished", "passed"):
            metrics.RUN_TRIALS.labels(self.ns, self.name, state).set(counts[state])
        metrics.PENDING.labels(self.ns, self.name).set(counts["pending"])
        metrics.WAITING_ADMISSION.labels(self.ns, self.name).set(counts["waitingAdmission"])
        busy = st.in_flight_by_model()
        for m in run.spec.models:
            metrics.IN_FLIGHT.labels(self.ns, self.name, m.name).set(busy.get(m.name, 0))
        for row in st.results():
            metrics.PASS_RATE.labels(self.ns, self.name, row["model"], service_label(row)).set(float(row["passAt1"]))
