"""``mcpfleet tasks stress``: every task's oracle N times and its no-op N times, shuffled, through ``mcpfleet run``.

The trials are an ordinary EvalRun (plan/stress.py) run by the launcher, so they meet what a real run's trials
meet: warm workers, spare servers, a shared PostgreSQL cluster, other tasks' trials beside them. A task whose oracle
passes alone under ``tasks validate`` but not always here has a flake that a model would be scored for.
"""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpfleet.runner.launch.launcher import execute
from mcpfleet.runner.plan.expand import trial_id
from mcpfleet.runner.plan.stress import NOOP_MODEL, ORACLE_MODEL, shuffled, stress_run
from mcpfleet.runner.report.stress import Attempt, attempt_of, first_tool_error
from mcpfleet.runner.results.store import LocalStore
from mcpfleet.runner.spec.task import Task


@dataclass
class StressOutcome:
    attempts: list[Attempt]
    wall: float  # seconds, the whole run
    root: Path | None  # the run folder, when kept (--output)


@contextlib.contextmanager
def _output(output: Path | None) -> Iterator[Path]:
    if output is not None:
        yield output
        return
    with tempfile.TemporaryDirectory(prefix="mcpfleet-stress-") as tmp:
        yield Path(tmp)


def _messages(store: LocalStore, tid: str) -> Any:
    raw = store.read_trial_file(tid, "messages.json")
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def read_attempts(store: LocalStore, tasks: list[Task], repeat: int) -> list[Attempt]:
    """Every planned attempt from its record (a trial without one is an attempt that was not judged)."""
    out = []
    for task in tasks:
        for attempt in range(1, repeat + 1):
            for model, oracle in ((ORACLE_MODEL, True), (NOOP_MODEL, False)):
                tid = trial_id(model, task, attempt)
                record = store.read_result(tid)
                error = None
                if record is not None and oracle and not record.get("passed"):
                    error = first_tool_error(record, _messages(store, tid))
                out.append(attempt_of(record, task.id, oracle, error))
    return out


def run_stress(
    tasks: list[Task],
    root: Path,
    repeat: int,
    concurrency: int,
    seed: int,
    *,
    states: Path | None = None,
    output: Path | None = None,
    show_progress: bool = False,
) -> StressOutcome:
    """Run the stress; records go under ``output`` (a fresh run folder ``stress``, ``stress-2``, ... in it), or a
    temporary folder removed at the end. Raises what ``execute`` raises (a refused spec, a lost resource)."""
    with _output(output) as out:
        run = stress_run(root, [t.id for t in tasks], repeat, concurrency, out.resolve(), states)
        started = time.monotonic()
        _, folder = execute(
            run, Path.cwd(), new_run=True, show_progress=show_progress, order=functools.partial(shuffled, seed=seed)
        )
        wall = time.monotonic() - started
        assert isinstance(folder, Path)  # (a local output folder: never s3://)
        attempts = read_attempts(LocalStore(folder), tasks, repeat)
        return StressOutcome(attempts, wall, folder if output is not None else None)
