"""``mcpfleet tasks validate``: a task is usable only if its oracle passes, doing nothing fails and every
mutant (a plausible wrong end state from ``mutants.json``) fails too."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mcpfleet.runner.results.outcome import is_scored
from mcpfleet.runner.results.records import TrialResult
from mcpfleet.runner.results.store import LocalStore
from mcpfleet.runner.services import SERVICES, run_resources
from mcpfleet.runner.spec.evalrun import AgentKind, Limits, ModelSpec
from mcpfleet.runner.spec.task import Mutant, Task
from mcpfleet.runner.spec.trial import Replay, TrialContext, TrialSpec
from mcpfleet.runner.tasks.checks import inspect_task
from mcpfleet.runner.trial.engine import run_trial

T = TypeVar("T")


@dataclass
class TaskReport:
    task: Task
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    oracle_passed: bool | None = None
    noop_failed: bool | None = None
    oracle_seconds: float = 0.0
    mutants_rejected: list[str] = field(default_factory=list)  # names of mutants the verifier rejected
    mutants_accepted: list[str] = field(default_factory=list)  # names of mutants it wrongly accepted
    mutants_run: int = 0
    state_missing: bool = False  # its initial state was not found (a foreign pack run without --states)

    @property
    def ok(self) -> bool:
        return not self.problems


def _spec(
    task: Task, root: Path, states_path: Path | None, agent: AgentKind, limits: Limits, label: str = ""
) -> TrialSpec:
    return TrialSpec(
        run="validate",
        trial_id=f"{agent.value}.{task.id.replace('/', '.')}{label}",
        spec_hash="validate",
        model=ModelSpec(name=agent.value, model=agent.value),
        task_id=task.id,
        tasks_root=str(root),
        states_path=str(states_path) if states_path else None,
        attempt=1,
        agent=agent,
        limits=limits,
    )


def _detail(r: TrialResult) -> str:
    return r.error or (r.verifier.stdout + r.verifier.stderr).strip()[-800:]


def _step_error(r: TrialResult, store: LocalStore | None = None) -> str | None:
    """The first tool call of ``r`` that returned an error: its tool and, when ``store`` holds the trial's
    messages.json, what the server said (an oracle step's own error text, not only its name)."""
    errors = [c for t in r.turns for c in t["tool_calls"] if c["is_error"]]
    if not errors:
        return None
    if store is not None:
        from mcpfleet.runner.report.stress import first_tool_error

        raw = store.read_trial_file(r.trial_id, "messages.json")
        try:
            said = first_tool_error(r.model_dump(mode="json"), json.loads(raw)) if raw else None
        except ValueError:
            said = None
        if said:
            name, _, text = said.partition(": ")
            return (
                f"'{name}' returned an error: {text.strip()[:400]}" if text.strip() else f"'{name}' returned an error"
            )
    return f"'{errors[0]['name']}' returned an error"


async def check_one(
    task: Task,
    root: Path,
    states_path: Path | None,
    store: LocalStore,
    limits: Limits,
    sem: asyncio.Semaphore | None = None,
    resources: dict[str, Any] | None = None,
) -> TaskReport:
    """Run the oracle, the no-op agent and every mutant of one task; each trial holds ``sem`` while it runs."""
    checked = inspect_task(task)
    report = TaskReport(task, problems=checked.problems, state_missing=checked.state_missing)
    if report.problems:
        return report
    sem = sem or asyncio.Semaphore(1)

    async def guarded(trial: Awaitable[T]) -> T:
        async with sem:
            return await trial

    res = resources or {}

    def mutant_trial(m: Mutant) -> Awaitable[TrialResult]:
        spec = _spec(task, root, states_path, AgentKind.oracle, limits, f".mutant.{m.name}")
        return run_trial(spec, store, TrialContext(replay=Replay.of(task, m), resources=res))

    def trial(agent: AgentKind) -> Awaitable[TrialResult]:
        return run_trial(_spec(task, root, states_path, agent, limits), store, TrialContext(resources=res))

    oracle = guarded(trial(AgentKind.oracle)) if task.has_oracle else None
    noop = guarded(trial(AgentKind.noop))
    mutants = [guarded(mutant_trial(m)) for m in task.mutants]
    results = await asyncio.gather(*([oracle] if oracle else []), noop, *mutants)
    if oracle is not None:
        r, results = results[0], results[1:]
        report.oracle_passed, report.oracle_seconds = r.passed, r.timings.total
        if not r.passed:
            report.problems.append(f"{task.id}: oracle does not pass ({r.failure}): {_detail(r)}")
        if (tool := _step_error(r, store)) is not None:
            report.problems.append(f"{task.id}: oracle step {tool}")
    else:
        report.warnings.append(f"{task.id}: no oracle.json; solvability not checked")
    r, results = results[0], results[1:]
    if not is_scored(r.failure):  # (its state not set up, its server not started): the verifier never judged
        report.problems.append(f"{task.id}: the no-op trial could not run ({r.failure}): {_detail(r)}")
    else:
        report.noop_failed = not r.passed
    if r.passed:
        report.problems.append(f"{task.id}: the no-op agent passes; the verifier accepts the untouched state")
    report.mutants_run = len(results)
    for m, r in zip(task.mutants, results, strict=True):
        if not is_scored(r.failure):
            report.problems.append(f"{task.id}: mutant '{m.name}' could not run ({r.failure}): {_detail(r)}")
        elif r.passed:
            report.mutants_accepted.append(m.name)
            report.problems.append(f"{task.id}: the verifier accepts mutant '{m.name}' ({m.why})")
        elif r.error:
            report.problems.append(f"{task.id}: mutant '{m.name}' could not be replayed: {r.error}")
        else:
            report.mutants_rejected.append(m.name)
            if "Traceback (most recent call last)" in r.verifier.stderr:
                report.warnings.append(
                    f"{task.id}: the verifier crashes on mutant '{m.name}' instead of failing a check"
                )
        if (tool := _step_error(r, store)) is not None:
            report.problems.append(f"{task.id}: mutant '{m.name}' step {tool}; it does not build the state it means")
    return report


async def validate(
    tasks: list[Task], root: Path, states_path: Path | None = None, concurrency: int = 2
) -> list[TaskReport]:
    """Check every task; at most ``concurrency`` trials (oracle, no-op, mutants of any task) run at once.
    The services' run-scoped resources (a PostgreSQL cluster) start here, once, in the calling thread, as
    ``mcpfleet run`` starts them, and stop when the check ends."""
    limits = Limits(max_turns=200, timeout_seconds=600, llm_timeout_seconds=120, verifier_timeout_seconds=120)
    sem = asyncio.Semaphore(concurrency)
    known = {t.service for t in tasks if t.service in SERVICES}
    with tempfile.TemporaryDirectory(prefix="mcpfleet-validate-") as tmp, run_resources(known) as resources:
        store = LocalStore(Path(tmp))
        return list(
            await asyncio.gather(*(check_one(t, root, states_path, store, limits, sem, resources) for t in tasks))
        )
