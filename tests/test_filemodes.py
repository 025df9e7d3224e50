"""What mcpfleet writes for others to read has the modes ``open()`` and ``mkdir()`` would give under the umask,
not ``mkstemp``'s 0600 or ``mkdtemp``'s 0700: records, summaries, exports and tool-call task folders."""

from __future__ import annotations

import os
import stat
import time
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


def test_a_run_in_progress_is_readable_by_its_user_only(tmp_path: Path, set_umask: object) -> None:
    """Issue 48: the records of a run in progress (transcripts included) were 0644 in a 0755 folder, readable by
    any local user. The run folder is 0700 while the run writes it, and 0755 (the umask's) once it has ended."""
    from test_processes import start, wait_for, write_run

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = start(write_run(tmp_path, "scripted/oracle?latency=1", tasks=2), tmp)
    folder = tmp_path / "runs" / "procs"
    seen: set[int] = set()
    try:
        assert wait_for(lambda: (folder / "trials").is_dir() and any((folder / "trials").iterdir()), 120)
        while proc.poll() is None:
            seen.add(mode(folder))
            if any((folder / "trials").glob("*/result.json")):
                break
            time.sleep(0.05)
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert seen == {0o700}, [oct(m) for m in seen]
    assert mode(folder) == 0o755
    assert len(list((folder / "trials").glob("*/result.json"))) == 2
