"""The runs a viewer shows, read through report/load.py's ``open_run`` (local folders, ``s3://`` runs).

Opening a run reads its trial records (result.json) once, for the index (those its plan counts, as
``report`` and ``export`` count them); every other file (messages.json,
trial.log, a trial's result.json in full) is read when a page needs it, and the last few parsed transcripts are
kept, so paging through a long one parses it once.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mcpfleet.runner.report.planned import still_planned
from mcpfleet.runner.report.roots import ReportError, open_run
from mcpfleet.runner.report.viewer import cache, search_index
from mcpfleet.runner.report.viewer.index import TrialRow, row_of, sort_rows
from mcpfleet.runner.report.viewer.reading import read_rows
from mcpfleet.runner.report.viewer.search import FILES, SearchCache, forms
from mcpfleet.runner.report.viewer.search_index import SearchIndex
from mcpfleet.runner.report.viewer.transcript import Transcript, normalise
from mcpfleet.runner.results.store import LocalStore, ResultStore

TRANSCRIPTS_KEPT = 4
logger = logging.getLogger(__name__)


@dataclass
class Run:
    ref: str
    label: str
    store: ResultStore
    rows: list[TrialRow]
    by_id: dict[str, TrialRow]
    spec_hash: str = ""
    notes: list[str] = field(default_factory=list)
    state: str = ""  # a local folder's state when its index was made (cache.py); "" for an S3 run
    searches: SearchCache = field(default_factory=SearchCache)
    matrix_pages: dict[tuple[str, str | None, int, int], str] = field(default_factory=dict)  # rendered, by view
    _transcripts: OrderedDict[str, tuple[dict[str, Any] | None, Transcript]] = field(default_factory=OrderedDict)
    build_index_on_search: bool = False  # the app's choice (make_app)
    _search_index: SearchIndex | None = None
    _building: bool = False

    @property
    def services(self) -> list[str]:
        return sorted({r.service for r in self.rows})

    def open_search_index(self) -> bool:
        """Open this run's search index if one was built for its folder's state (search_index.py); cheap."""
        if self._search_index is None and self.state and isinstance(self.store, LocalStore):
            path = cache.cache_file(self.store.root, "search.sqlite")
            self._search_index = SearchIndex.open(path, self.state) if search_index.available() else None
        return self._search_index is not None

    def index_search(self) -> None:
        """Open this run's search index, or build it; a failure leaves searches scanning. Only a local run with a
        folder state has one."""
        if self.open_search_index() or not self.state or not isinstance(self.store, LocalStore):
            return
        if not search_index.available():
            return
        path = cache.cache_file(self.store.root, "search.sqlite")
        try:
            self._search_index = SearchIndex.build(path, self.state, [r.trial_id for r in self.rows], self.read, FILES)
        except (OSError, sqlite3.Error) as exc:
            logger.warning("%s: no search index (%s); searches read every trial", self.label, exc)

    def candidates(self, query: str) -> dict[str, set[str]] | None:
        """The trials that can hold ``query`` by the search index, None when there is none (yet)."""
        index = self._search_index
        return None if index is None else index.matching(forms(query))

    def searched(self) -> None:
        """After a search that had no index: start building it in a thread of its own (once). Searches until it is
        ready read every trial; building it at start would slow the first pages on a small machine, and building
        it during that first search would slow the search."""
        if self.build_index_on_search and self._search_index is None and not self._building:
            self._building = True
            threading.Thread(target=self.index_search, name=f"search index {self.label}", daemon=True).start()

    def read(self, trial_id: str, name: str) -> bytes | None:
        if trial_id not in self.by_id:
            return None  # only this run's trials: a page never names a path
        return self.store.read_trial_file(trial_id, name)

    def record(self, trial_id: str) -> dict[str, Any] | None:
        return self.store.read_result(trial_id) if trial_id in self.by_id else None

    def transcript(self, trial_id: str) -> tuple[dict[str, Any] | None, Transcript]:
        """The trial's full record and its normalised messages.json (parsed once, kept for the next pages)."""
        if trial_id in self._transcripts:
            self._transcripts.move_to_end(trial_id)
            return self._transcripts[trial_id]
        rec = self.record(trial_id)
        raw = self.read(trial_id, "messages.json")
        if raw is None:
            got = Transcript(shape="missing", problems=["this trial has no messages.json"])
        else:
            try:
                messages = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                got = Transcript(shape="unreadable", problems=[f"messages.json is no JSON: {exc}"])
            else:
                turns = rec.get("turns") if rec else None
                got = normalise(messages, turns if isinstance(turns, list) else None, (rec or {}).get("agent"))
        self._transcripts[trial_id] = (rec, got)
        while len(self._transcripts) > TRANSCRIPTS_KEPT:
            self._transcripts.popitem(last=False)
        return rec, got


def _index(ref: str, store: ResultStore) -> tuple[list[TrialRow], str, str, list[str]]:
    """The run's rows, name, spec hash and notes, from its records."""
    keep = still_planned(store)  # as summary.json, report and export count them
    if isinstance(store, LocalStore):
        got = read_rows(store, keep)  # every core of the machine (reading.py)
        found, kept, first_name = got.found, got.rows, got.run_name
    else:
        records = list(store.iter_results())
        found = len(records)
        records = [r for r in records if keep(r)]
        kept = [row_of(r) for r in records]
        first_name = str(records[0].get("run") or "") if records else None
    if not found:
        raise ReportError(f"{ref}: no trial records at {store.location()}")
    if not kept:
        raise ReportError(f"{ref}: none of its {found} trial records is of a trial its plan.json plans")
    rows = sort_rows(kept)
    run_json = store.read_json("run.json")
    name = first_name or ref
    spec_hash = str(run_json.get("spec_hash", "")) if isinstance(run_json, dict) else ""
    notes = []
    if len(kept) < found:
        notes.append(f"{found - len(kept)} record(s) of trials no longer planned are left out")
    harnesses = sorted({r.harness for r in rows if r.harness})
    if len(harnesses) > 1:
        notes.append(f"records of {len(harnesses)} harnesses: {', '.join(harnesses)}")
    return rows, name, spec_hash, notes


def _cached_index(ref: str, store: ResultStore, use: bool) -> tuple[list[TrialRow], str, str, list[str], str]:
    """``_index`` and the folder's state; a local run's index from the cache when the folder has not changed
    since it was made (cache.py). An S3 run is read whole each time (its listing has no cheap state)."""
    if not use or not isinstance(store, LocalStore):
        return (*_index(ref, store), "")
    state = cache.folder_state(store.root)
    got = cache.load_index(store.root, state)
    if got is not None:
        return got["rows"], str(got.get("name")), str(got.get("spec_hash")), list(got.get("notes") or []), state
    rows, name, spec_hash, notes = _index(ref, store)
    cache.save_index(store.root, state, rows, name=name, spec_hash=spec_hash, notes=notes)
    return rows, name, spec_hash, notes, state


def open_runs(
    refs: list[str], endpoint_url: str | None = None, region: str | None = None, use_cache: bool = True
) -> list[Run]:
    """Each run's index (``use_cache``: kept in and read from the viewer's cache); labels made unique (two runs of
    one name get ``#1``, ``#2``)."""
    runs = []
    for ref in refs:
        store = open_run(ref, endpoint_url, region)
        rows, name, spec_hash, notes, state = _cached_index(ref, store, use_cache)
        runs.append(Run(ref, name, store, rows, {r.trial_id: r for r in rows}, spec_hash, notes, state=state))
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    counter: dict[str, int] = {}
    for run in runs:
        if seen[run.label] > 1:
            counter[run.label] = counter.get(run.label, 0) + 1
            run.label = f"{run.label} #{counter[run.label]}"
    return runs
