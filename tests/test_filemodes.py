"""What mcpfleet writes for others to read has the modes ``open()`` and ``mkdir()`` would give under the umask,
not ``mkstemp``'s 0600 or ``mkdtemp``'s 0700: records, summaries, exports and tool-call task folders."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_mcpmark_export import write_run

from mcpfleet.runner._util.filemodes import umask
from mcpfleet.runner.report.export import export_mcpmark
from mcpfleet.runner.results.store import LocalStore
from mcpfleet.runner.tasks.toolcall_pack import make_task

DATA = Path(__file__).parent / "data" / "toolcalls_200.jsonl"


@pytest.fixture
def set_umask() -> Iterator[object]:
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_umask_is_read_without_changing_it(set_umask: object) -> None:
    for mask in (0o022, 0o077, 0o002):
        os.umask(mask)
        assert umask() == mask and umask() == mask


def test_records_and_summaries_follow_the_umask(tmp_path: Path, set_umask: object) -> None:
    for mask, want in ((0o022, 0o644), (0o002, 0o664), (0o077, 0o600)):
        os.umask(mask)
        store = LocalStore(tmp_path / f"run-{mask:o}")
        store.write_files("t.1", {"messages.json": b"[]", "trial.log": b"x"})
        store.commit("t.1", b'{"trial_id": "t.1"}\n')
        store.write_json("summary.json", {"rows": []})
        written = [p for p in store.root.rglob("*") if p.is_file()]
        assert len(written) == 4 and {mode(p) for p in written} == {want}, mask


def test_an_export_and_a_tool_call_task_folder_are_readable_by_others(tmp_path: Path, set_umask: object) -> None:
    write_run(tmp_path / "runs" / "synthetic", tmp_path / "tasks")
    done = export_mcpmark(LocalStore(tmp_path / "runs" / "synthetic"), tmp_path / "results")
    folders = [done.root / f for f in sorted(done.folders)]
    assert folders and {mode(f) for f in folders} == {0o755}
    assert {mode(p) for f in folders for p in f.rglob("*")} <= {0o755, 0o644}
    # A task made twice (the second swaps in a new folder) stays 0755: an image's non-root runner reads it.
    for _ in range(2):
        task = make_task(tmp_path / "pack", DATA, "limbic", "set200")
        assert mode(task) == 0o755 and {mode(p) for p in task.rglob("*")} <= {0o755, 0o644}
