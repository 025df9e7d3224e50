"""A run's index read by several processes is the index read by one; records parse as json.loads parses them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from proctree import children

from mcpfleet.runner.report.planned import still_planned
from mcpfleet.runner.report.viewer import reading
from mcpfleet.runner.report.viewer.runs import open_runs
from mcpfleet.runner.results.records import TrialResult, VerifierRecord, dumps, parse_record, usable_record
from mcpfleet.runner.results.store import LocalStore


def _record(trial_id: str, run: str = "r", passed: bool = True, spec_hash: str = "h") -> bytes:
    model, service, difficulty, category, task, attempt = trial_id.split(".")
    rec = TrialResult(
        run=run, trial_id=trial_id, spec_hash=spec_hash, model=model, litellm_model="x/" + model,
        service=service, task_id=f"{service}/{difficulty}/{category}/{task}", attempt=int(attempt),
        agent="mcpmark", passed=passed, failure=None if passed else "verifier_failed",
        verifier=VerifierRecord(exit_code=0 if passed else 1),
    )  # fmt: skip
    return dumps(rec.model_dump())


@pytest.fixture
def mixed_run(tmp_path: Path) -> LocalStore:
    """60 trials: usable records, damaged ones, another trial's record, unplanned ones, a stray file, an empty
    folder; plan.json plans all but the last model's."""
    store = LocalStore(tmp_path / "run")
    planned = {}
    for i in range(60):
        model = ("m-a", "m-b", "m-c")[i % 3]
        trial_id = f"{model}.filesystem.standard.c{i % 4}.t{i:02}.1"
        raw = _record(trial_id, passed=i % 5 != 0)
        if i % 11 == 3:
            raw = raw[: len(raw) // 2]  # damaged: unfinished
        elif i % 13 == 4:
            raw = _record(f"m-a.filesystem.standard.c0.other{i}.1")  # another trial's
        store.write_files(trial_id, {})
        store.commit(trial_id, raw)
        if model != "m-c":
            planned[trial_id] = "h"
    store.write_json("plan.json", {"trials": planned})
    (store.root / "trials" / "NOTES.txt").write_text("not a trial")
    (store.root / "trials" / "m-a.filesystem.standard.c0.empty.1").mkdir()
    return store


def test_rows_read_by_worker_processes_equal_rows_read_in_one(
    mixed_run: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    keep = still_planned(mixed_run)
    one = reading.read_rows(mixed_run, keep, processes=1)
    monkeypatch.setattr(reading, "PARALLEL_FROM", 10)
    before = set(children(os.getpid()))
    many = reading.read_rows(mixed_run, keep, processes=3)
    assert many.rows == one.rows and many.found == one.found and many.run_name == one.run_name == "r"
    # The same records as every other reader keeps: usable (not damaged, not another trial's), then planned.
    usable = [r for r in mixed_run.iter_results()]
    assert one.found == len(usable) and 0 < len(usable) < 60
    assert [r.trial_id for r in one.rows] == [r["trial_id"] for r in usable if keep(r)]
    assert all(r.model != "m-c" for r in many.rows) and len(many.rows) < one.found
    # The pool is gone once the rows are read.
    assert set(children(os.getpid())) - before == set()


def test_the_viewer_opens_a_run_read_by_workers_as_one_read_in_one(
    mixed_run: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "workers", lambda: 1)
    (one,) = open_runs([str(mixed_run.root)], use_cache=False)
    monkeypatch.setattr(reading, "workers", lambda: 2)
    monkeypatch.setattr(reading, "PARALLEL_FROM", 10)
    (many,) = open_runs([str(mixed_run.root)], use_cache=False)
    assert many.rows == one.rows and many.notes == one.notes and many.label == one.label
    assert any("no longer planned" in n for n in one.notes)


def test_a_pool_that_cannot_start_reads_in_this_process(mixed_run: LocalStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*args: object, **kwargs: object) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    keep = still_planned(mixed_run)
    one = reading.read_rows(mixed_run, keep, processes=1)
    monkeypatch.setattr(reading, "PARALLEL_FROM", 10)
    monkeypatch.setattr(reading, "ProcessPoolExecutor", no_pool)
    assert reading.read_rows(mixed_run, keep, processes=2).rows == one.rows


def _stdlib(raw: bytes) -> object:
    def refuse(name: str) -> None:
        raise ValueError(name)

    try:
        return json.loads(raw, parse_constant=refuse)
    except (ValueError, RecursionError):
        return None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "b": [1.5, -0.0, 1e400, 12345678901234567890123], "c": null}',
        b'{"a": NaN}', b'{"a": -Infinity}', b'{"a": "\\ud800 lone surrogate"}', b'\xef\xbb\xbf{"a": 1}',
        b'{"a": "\xff"}', b'{"a": 1, "a": 2}', b'{"a": 1,}', b"{'a': 1}", b'{"a": 01}', b'{"a": "x\ny"}',
        b'{"a": .5}', b'{"a": 1} trailing', b"[" * 100_000 + b"]" * 100_000, b"", b" \n",
        "{\"a\": \"Ünï 🦭\"}".encode(), '{"a": "Ünï"}'.encode("utf-16"), b'{"a": "\\u0000"}',
    ],
)  # fmt: skip
def test_a_record_parses_as_the_standard_library_parses_it(raw: bytes) -> None:
    got, want = parse_record(raw), _stdlib(raw)
    assert got == want and type(got) is type(want)
    if isinstance(want, dict) and isinstance(want.get("b"), list) and isinstance(got, dict):
        assert [type(x) for x in got["b"]] == [type(x) for x in want["b"]]


def test_a_record_with_an_escaped_lone_surrogate_stays_finished() -> None:
    # Only the standard parser reads it; a finished trial must not read as unfinished (and run again on resume).
    raw = _record("m.filesystem.standard.c.t.1").replace(b'"run": "r"', b'"run": "r\\udc80"')
    assert b"udc80" in raw
    rec = usable_record(raw, "m.filesystem.standard.c.t.1")
    assert rec is not None and rec["run"] == "r\udc80"
