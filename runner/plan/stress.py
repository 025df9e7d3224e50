"""``mcpfleet tasks stress``: a task's oracle run N times and its no-op N times, in a shuffled order, as one EvalRun.

Pure: the run is an ordinary EvalRun of the two scripted models (``scripted/oracle``, ``scripted/noop``) with
``attempts`` = N, so its trials take exactly the path ``mcpfleet run`` takes (warm workers, spare servers, the
run's PostgreSQL cluster); only their launch order is shuffled, seeded, so that a flake that depends on what runs
beside a trial can be reproduced with the same seed.
"""

from __future__ import annotations

import random
from pathlib import Path

from mcpfleet.runner.spec.evalrun import EvalRun
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.spec.trial import TrialSpec

ORACLE_MODEL = "scripted-oracle"  # the model names: the first part of every trial id
NOOP_MODEL = "scripted-noop"
RUN_NAME = "stress"


def stress_run(
    root: Path, task_ids: list[str], repeat: int, concurrency: int, output: Path, states: Path | None = None
) -> EvalRun:
    """The EvalRun of a stress: ``task_ids`` of the pack at ``root``, each attempted ``repeat`` times by the oracle
    and by the no-op, ``concurrency`` trials at once, records under ``output``. No retries: an infrastructure
    error is a flake a stress is there to show, not to hide."""
    tasks: dict[str, object] = {"path": str(root), "include": sorted(task_ids)}
    if states is not None:
        tasks["statesPath"] = str(states)
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": RUN_NAME},
        "spec": {
            "models": [
                {"name": ORACLE_MODEL, "model": "scripted/oracle"},
                {"name": NOOP_MODEL, "model": "scripted/noop"},
            ],
            "tasks": tasks,
            "attempts": repeat,
            "concurrency": {"total": concurrency},
            "retries": {"limit": 0},
            "output": {"uri": str(output)},
        },
    }
    return parse_evalrun(doc, "tasks stress")


def shuffled(trials: list[TrialSpec], seed: int) -> list[TrialSpec]:
    """The trials in a seeded random order (the same seed, the same order for the same plan): a task's attempts no
    longer run side by side, and oracles and no-ops of different tasks meet each other."""
    out = sorted(trials, key=lambda t: t.trial_id)  # independent of the plan's own order
    random.Random(seed).shuffle(out)
    return out
