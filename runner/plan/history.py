"""Earlier runs' trial times, for a new run's launch order (``spec.launchOrder.learnFrom``).

A sweep's makespan hangs on starting its longest trials first, and a run can only learn which those are by
running them. An earlier run of the same tasks already knows: its records say how long each trial took
(runner time, started_at to finished_at). Only trials that measured something count: an infrastructure,
provider or configuration failure says nothing about the task's length.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from mcpfleet.runner.results.outcome import BUDGET_EXHAUSTED, CONFIG_ERROR, INFRA_ERROR, PROVIDER_ERROR
from mcpfleet.runner.results.records import parse_time
from mcpfleet.runner.results.store import StoreConfig, StoreError

Sample = tuple[str, str, float]  # (task id, model name, seconds)
UNMEASURED = (INFRA_ERROR, PROVIDER_ERROR, CONFIG_ERROR, BUDGET_EXHAUSTED)


@dataclass
class History:
    samples: list[Sample] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per run that could not be used


def record_seconds(record: dict[str, Any]) -> float | None:
    """A stored trial's runner time (started_at to finished_at), None if the record does not say."""
    start, end = parse_time(record.get("started_at")), parse_time(record.get("finished_at"))
    if start is None or end is None:
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds > 0 else None


def measured_seconds(record: dict[str, Any]) -> float | None:
    """A record's runner seconds if its trial measured something (the task's length), else None."""
    return None if record.get("failure") in UNMEASURED else record_seconds(record)


def trial_time(record: dict[str, Any]) -> Sample | None:
    """A record's (task, model, runner seconds), or None if it measured nothing or does not say."""
    task, model, seconds = record.get("task_id"), record.get("model"), measured_seconds(record)
    if not isinstance(task, str) or not isinstance(model, str) or seconds is None:
        return None
    return task, model, seconds


def samples_of(records: Iterable[dict[str, Any]]) -> Iterator[Sample]:
    for record in records:
        sample = trial_time(record)
        if sample is not None:
            yield sample


def read_history(config: StoreConfig, names: Iterable[str], own_uid: str | None = None) -> History:
    """The trial times stored under each named run in ``config``'s output (every UID of that name but
    ``own_uid``, the reading run's own). A run that is missing, empty or unreadable is a problem, not an error:
    the order is an optimisation and the run goes on without it."""
    out = History()
    for name in names:
        where = f"{config.uri.rstrip('/')}/{name}"
        try:
            root = replace(config, run_name=name, run_uid=None).open()  # every UID of that name
            found = list(samples_of(root.iter_results_below(skip=own_uid)))
        except (StoreError, OSError) as exc:
            out.problems.append(f"spec.launchOrder.learnFrom: could not read {where}: {exc}")
            continue
        if not found:
            out.problems.append(f"spec.launchOrder.learnFrom: no finished trial stored under {where}")
        out.samples.extend(found)
    return out
