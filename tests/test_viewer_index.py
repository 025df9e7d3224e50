"""The viewer's cache (a local run's index kept per folder state) and its search index (SQLite FTS5, trigram):
the same answers as reading every record and scanning every file, only faster, whatever the text holds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.runner.report.viewer import cache, search_index
from mcpfleet.runner.report.viewer.runs import open_runs
from mcpfleet.runner.report.viewer.search import scan
from mcpfleet.runner.results.records import TrialResult, VerifierRecord, dumps, dumps_mcpmark, to_mcpmark_messages
from mcpfleet.runner.results.store import LocalStore

NEEDLE = "walrus-umbra-5521"
HOSTILE = "x' OR 1=1; -- \" NEAR(a b) * ^ %_% \\\" <script>alert(1)</script> body MATCH 'a'"


def write_trial(store: LocalStore, task: str, result: str, passed: bool = True, log: str = "") -> str:
    trial_id = f"m.filesystem.standard.c.{task}.1"
    call = {"id": "c1", "function": {"name": "read", "arguments": "{}"}}
    chat: list[dict[str, Any]] = [
        {"role": "user", "content": f"Do {task}."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip
    rec = TrialResult(
        run="r", trial_id=trial_id, spec_hash="h", model="m", litellm_model="x/m", service="filesystem",
        task_id=f"filesystem/standard/c/{task}", attempt=1, agent="mcpmark", passed=passed,
        failure=None if passed else "verifier_failed", verifier=VerifierRecord(exit_code=0 if passed else 1),
    )  # fmt: skip
    files = {"messages.json": dumps_mcpmark(to_mcpmark_messages(chat))}
    if log:
        files["trial.log"] = log.encode()
    store.write_files(trial_id, files)
    store.commit(trial_id, dumps(rec.model_dump()))
    return trial_id


@pytest.fixture
def run(tmp_path: Path) -> Path:
    store = LocalStore(tmp_path / "run")
    for i in range(30):
        write_trial(store, f"t{i:02}", f"row {i}: nothing to see", passed=i % 2 == 0)
    write_trial(store, "needle", f"name\n{NEEDLE}\n")
    write_trial(store, "hostile", HOSTILE, log="12:00 provider said 50%_off\n")
    write_trial(store, "unicode", 'quote " and \\ backslash, Ünïcödé ÆØÅ, emoji 🦭')
    return store.root


def test_a_cached_index_equals_a_fresh_one_and_a_changed_folder_is_read_again(run: Path) -> None:
    first = open_runs([str(run)])[0]
    assert cache.cache_file(run, "index.json").exists()
    assert oct(cache.cache_file(run, "index.json").stat().st_mode & 0o777) == "0o600"
    again = open_runs([str(run)])[0]
    assert again.rows == first.rows and again.state == first.state and again.label == first.label
    fresh = open_runs([str(run)], use_cache=False)[0]
    assert fresh.rows == first.rows
    # A rerun replaces a record: the folder's state changes and the record is read again, not the cache.
    write_trial(LocalStore(run), "t01", "row 1 again", passed=True)
    changed = open_runs([str(run)])[0]
    assert changed.state != first.state
    assert changed.by_id["m.filesystem.standard.c.t01.1"].outcome == "passed"
    assert first.by_id["m.filesystem.standard.c.t01.1"].outcome == "failed"
    # A damaged cache is ignored (and replaced), never trusted.
    cache.cache_file(run, "index.json").write_text('{"state": "' + changed.state + '", "rows": [[1, 2]]}')
    assert open_runs([str(run)])[0].rows == changed.rows
    json.loads(cache.cache_file(run, "index.json").read_text())  # rewritten whole


def test_fts5_with_trigrams_is_compiled_in() -> None:
    assert search_index.available()


QUERIES = [NEEDLE, NEEDLE.upper(), "row 1", "nothing", "umbra", "no-such-text", HOSTILE, "' OR 1=1", '" and \\',
           "NEAR(a b)", "%_%", "50%_off", "_", "%", "*", "<script>", "Ünïcödé", "🦭", "ab", '"', "\\"]  # fmt: skip


def test_search_through_the_index_answers_as_the_scan_does_whatever_the_query_holds(run: Path) -> None:
    r = open_runs([str(run)])[0]
    ids = [x.trial_id for x in r.rows]
    assert r.candidates(NEEDLE) is None  # no index yet: the scan
    r.index_search()
    assert cache.cache_file(run, "search.sqlite").exists()
    for q in QUERIES:
        plain = scan(q, ids, r.read)
        indexed = scan(q, ids, r.read, candidates=r.candidates(q))
        assert [(h.trial_id, h.file, h.snippet) for h in indexed.hits] == [
            (h.trial_id, h.file, h.snippet) for h in plain.hits
        ], q
    found = scan(NEEDLE, ids, r.read, candidates=r.candidates(NEEDLE))
    assert [h.trial_id for h in found.hits] == ["m.filesystem.standard.c.needle.1"]
    assert found.bytes_read < 2_000  # one trial's messages.json read, not the run's
    assert r.candidates(HOSTILE) == {"m.filesystem.standard.c.hostile.1": {"messages.json"}}


def test_the_index_is_reused_for_the_same_state_and_rebuilt_for_another(run: Path) -> None:
    r = open_runs([str(run)])[0]
    r.index_search()
    made = cache.cache_file(run, "search.sqlite").stat().st_mtime_ns
    again = open_runs([str(run)])[0]
    again.index_search()
    assert cache.cache_file(run, "search.sqlite").stat().st_mtime_ns == made  # opened, not built
    write_trial(LocalStore(run), "late", "a late walrus-umbra-9999")
    later = open_runs([str(run)])[0]
    later.index_search()
    assert set(later.candidates("walrus-umbra") or {}) == {
        "m.filesystem.standard.c.needle.1", "m.filesystem.standard.c.late.1"
    }  # fmt: skip
    assert not [p for p in os.listdir(cache.cache_dir()) if p.endswith(".tmp")]


def test_the_first_search_is_followed_by_the_index_and_later_ones_use_it(run: Path) -> None:
    """Building it at start would slow the first pages: a served run builds it once it was first searched."""
    r = open_runs([str(run)])[0]
    r.build_index_on_search = True  # as make_app(search_index=True) sets it
    assert not r.open_search_index()
    assert r.candidates(NEEDLE) is None  # this search scans; once answered, the index is built
    r.searched()
    deadline = time.monotonic() + 60
    while (got := r.candidates(NEEDLE)) is None:
        assert time.monotonic() < deadline, "the search index was never built"
        time.sleep(0.05)
    assert got == {"m.filesystem.standard.c.needle.1": {"messages.json"}}
    reopened = open_runs([str(run)])[0]
    assert reopened.open_search_index()  # the next start finds it
