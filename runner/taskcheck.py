"""``mcpfleet tasks validate``: a task is usable only if its oracle passes and doing nothing fails."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .plan import TrialSpec
from .services import SERVICES, run_resources
from .spec import AgentKind, Limits, ModelSpec
from .store import LocalStore
from .tasks import Task, check_task
from .trial import TrialContext, run_trial


@dataclass
class TaskReport:
    task: Task
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    oracle_passed: bool | None = None
    noop_failed: bool | None = None
    oracle_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def _spec(task: Task, root: Path, states_path: Path | None, agent: AgentKind, limits: Limits) -> TrialSpec:
    return TrialSpec(
        run="validate",
        trial_id=f"{agent.value}.{task.id.replace('/', '.')}",
        spec_hash="validate",
        model=ModelSpec(name=agent.value, model=agent.value),
        task_id=task.id,
        tasks_root=str(root),
        states_path=str(states_path) if states_path else None,
        attempt=1,
        agent=agent,
        limits=limits,
    )


async def check_one(
    task: Task,
    root: Path,
    states_path: Path | None,
    store: LocalStore,
    limits: Limits,
    resources: dict[str, Any] | None = None,
) -> TaskReport:
    report = TaskReport(task, problems=check_task(task))
    if report.problems:
        return report
    ctx = TrialContext(resources=resources or {})
    if task.has_oracle:
        r = await run_trial(_spec(task, root, states_path, AgentKind.oracle, limits), store, ctx)
        report.oracle_passed, report.oracle_seconds = r.passed, r.timings.total
        if not r.passed:
            detail = r.error or (r.verifier.stdout + r.verifier.stderr).strip()[-800:]
            report.problems.append(f"{task.id}: oracle does not pass ({r.failure}): {detail}")
        errors = [c for t in r.turns for c in t["tool_calls"] if c["is_error"]]
        if errors:
            report.problems.append(f"{task.id}: oracle step '{errors[0]['name']}' returned an error")
    else:
        report.warnings.append(f"{task.id}: no oracle.json; solvability not checked")
    r = await run_trial(_spec(task, root, states_path, AgentKind.noop, limits), store, ctx)
    report.noop_failed = not r.passed
    if r.passed:
        report.problems.append(f"{task.id}: the no-op agent passes; the verifier accepts the untouched state")
    return report


async def validate(
    tasks: list[Task], root: Path, states_path: Path | None = None, concurrency: int = 2
) -> list[TaskReport]:
    """Check every task. The services' run-scoped resources (a PostgreSQL cluster) start here, once, in the
    calling thread, as ``mcpfleet run`` starts them, and stop when the check ends."""
    limits = Limits(max_turns=200, timeout_seconds=600, verifier_timeout_seconds=120)
    sem = asyncio.Semaphore(concurrency)
    known = {t.service for t in tasks if t.service in SERVICES}
    with tempfile.TemporaryDirectory(prefix="mcpfleet-validate-") as tmp, run_resources(known) as resources:
        store = LocalStore(Path(tmp))

        async def guarded(t: Task) -> TaskReport:
            async with sem:
                return await check_one(t, root, states_path, store, limits, resources)

        return list(await asyncio.gather(*(guarded(t) for t in tasks)))
