"""Command: ``mcpfleet tasks stress`` (registered by runner/cli/app.py on its ``tasks`` group).

Heavy imports (the launcher, LiteLLM through it) happen inside the command so ``mcpfleet --help`` stays fast.
"""

from __future__ import annotations

import json
import secrets
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from mcpfleet.runner._util.plural import plural
from mcpfleet.runner.cli.output import console, err, escape, fail
from mcpfleet.runner.cli.packs import DEFAULT_TASKS, tasks_at
from mcpfleet.runner.spec.evalrun import MAX_ATTEMPTS
from mcpfleet.runner.spec.load import SpecError
from mcpfleet.runner.spec.task import TaskError

FAILED_EXIT = 1  # an oracle attempt failed or was not judged, or a no-op attempt passed or was not judged
LOST_EXIT = 6  # as `mcpfleet run`: the run's PostgreSQL server was lost for good


def tasks_stress(
    path: Annotated[Path, typer.Argument(help="Task pack root or a folder inside one.")] = DEFAULT_TASKS,
    repeat: Annotated[
        int, typer.Option(min=1, max=MAX_ATTEMPTS, help="Oracle attempts per task (and as many no-op attempts).")
    ] = 20,
    concurrency: Annotated[int, typer.Option(min=1, help="Trials in flight at once.")] = 4,
    seed: Annotated[int | None, typer.Option(help="Seed of the shuffled launch order (default: a random one).")] = None,
    output: Annotated[
        Path | None, typer.Option(help="Keep the records in this folder (default: a temporary one, removed).")
    ] = None,
    states: Annotated[Path | None, typer.Option(help="States folder for foreign packs.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON instead of the table.")] = False,
) -> None:
    """Run every task's oracle N times and its no-op N times, shuffled, through `mcpfleet run`'s path (warm
    workers, spare servers, the shared PostgreSQL cluster), and report per task: oracle passes, no-op fails, what
    the verifier said when an attempt went wrong, wall time. Exit code 1 unless every oracle attempt passed and
    every no-op attempt failed."""
    from mcpfleet.runner.launch.launcher import RunLost, RunRefused
    from mcpfleet.runner.launch.stress import run_stress
    from mcpfleet.runner.report.stress import stress_json, stress_table, stress_title, summarise
    from mcpfleet.runner.results.store import StoreError

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as `mcpfleet run`: no orphaned servers
    try:
        root, found = tasks_at(path, states)
    except TaskError as exc:
        fail(str(exc))
    chosen = [t for t in found if t.has_oracle]
    if not chosen:
        fail(f"no task with an oracle.json found at {path}")
    if left := len(found) - len(chosen):
        err.print(f"[yellow]note:[/] {plural(left, 'task')} without oracle.json left out", highlight=False)
    seed = secrets.randbelow(2**31) if seed is None else seed
    trials = 2 * repeat * len(chosen)
    err.print(
        f"stress: {plural(len(chosen), 'task')} x ({repeat} oracle + {repeat} no-op) = {plural(trials, 'trial')}, "
        f"concurrency {concurrency}, seed {seed} (--seed {seed} repeats this order)",
        highlight=False,
        soft_wrap=True,
    )
    try:
        done = run_stress(
            chosen,
            root,
            repeat,
            concurrency,
            seed,
            states=states,
            output=output,
            show_progress=not as_json and sys.stderr.isatty(),
        )
    except (SpecError, TaskError, RunRefused, StoreError) as exc:
        fail(str(exc))
    except RunLost as exc:
        fail(f"{exc}: the stress stopped early", LOST_EXIT)
    rows = summarise(done.attempts)
    if as_json:
        sys.stdout.write(json.dumps(stress_json(rows, repeat, concurrency, seed, done.wall), indent=2) + "\n")
    else:
        console.print(stress_table(rows, stress_title(rows, repeat, concurrency, seed, done.wall)))
    if done.root is not None:
        err.print(f"records: {escape(done.root)}/trials", highlight=False, soft_wrap=True)
    if not all(r.ok for r in rows):
        raise typer.Exit(FAILED_EXIT)
