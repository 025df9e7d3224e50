"""A local run's records read into index rows by every core of the machine: what a viewer's first start waits for.

Reading and validating a record costs about 0.1 ms of one core (open, parse, the strict TrialResult check), so a
10,000-trial run's index took most of the 3 s a first start may take on this project's 2-core machine, one core
idle. A run of ``PARALLEL_FROM`` trials or more is split into chunks read by forked worker processes (Linux, more
than one usable core): each reads its chunk through the same ``LocalStore.read_result`` and keeps the same
records, and sends back rows, not records. The workers die with the viewer (``exit_with_parent``). Anything else
(a small run, one core, another platform, a pool that cannot start) is read here, in order, as before.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from mcpfleet.runner._util.lifeline import exit_with_parent
from mcpfleet.runner.report.viewer.index import TrialRow, row_from_values, row_of
from mcpfleet.runner.results.store import LocalStore

PARALLEL_FROM = 2_000  # trials; below, a pool's start costs more than it saves
CHUNKS_PER_WORKER = 4  # so that a slow chunk (a big record, a cold disk) does not hold the others up
logger = logging.getLogger(__name__)

Keep = Callable[[dict[str, Any]], bool]


class Read:
    """What reading a run gave: its kept rows in trial-folder order, how many usable records it had in all, and
    the run name of the first kept record."""

    def __init__(self) -> None:
        self.rows: list[TrialRow] = []
        self.found = 0
        self.run_name: str | None = None

    def add(self, found: int, rows: list[TrialRow], run_name: str | None) -> None:
        self.found += found
        self.rows += rows
        if self.run_name is None:
            self.run_name = run_name


def _read(store: LocalStore, keep: Keep, names: list[str]) -> tuple[int, list[tuple[Any, ...]], str | None]:
    """(usable records, kept rows as value tuples, the first kept record's run name) of ``names``' folders."""
    found, rows, run_name = 0, [], None
    for name in names:
        rec = store.read_result(name)
        if rec is None:
            continue
        found += 1
        if keep(rec):
            if run_name is None:
                run_name = str(rec.get("run") or "")
            rows.append(tuple(row_of(rec).__dict__.values()))
    return found, rows, run_name


_JOB: tuple[LocalStore, Keep] | None = None  # the forked workers' store and filter, inherited from the parent


def _read_chunk(names: list[str]) -> tuple[int, list[tuple[Any, ...]], str | None]:
    assert _JOB is not None
    return _read(*_JOB, names)


def workers() -> int:
    """Worker processes to read with: the cores this process may use (1: none)."""
    if sys.platform != "linux":
        return 1  # fork is Linux's safe default only
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def read_rows(store: LocalStore, keep: Keep, processes: int | None = None) -> Read:
    """Every usable record of ``store``'s run as a row (those ``keep`` keeps), in trial-folder order;
    ``processes``: worker processes (default: ``workers()``; 1 reads here)."""
    global _JOB
    names = store.trial_names()
    n = workers() if processes is None else processes
    out = Read()
    if n > 1 and len(names) >= PARALLEL_FROM:
        size = -(-len(names) // (n * CHUNKS_PER_WORKER))
        chunks = [names[i : i + size] for i in range(0, len(names), size)]
        _JOB = (store, keep)
        try:
            with ProcessPoolExecutor(n, multiprocessing.get_context("fork"), initializer=exit_with_parent) as pool:
                for found, values, run_name in pool.map(_read_chunk, chunks):
                    out.add(found, [row_from_values(v) for v in values], run_name)
            return out
        except (OSError, RuntimeError) as exc:  # no fork (limits), a broken pool: read here instead
            logger.warning("reading %s in %d processes failed (%s); reading it in one", store.location(), n, exc)
            out = Read()
        finally:
            _JOB = None
    found, values, run_name = _read(store, keep, names)
    out.add(found, [row_from_values(v) for v in values], run_name)
    return out
