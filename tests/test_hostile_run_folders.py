"""Run folders and scratch folders that come from elsewhere (a teammate's run to resume, a sync, names any local
user can make in /tmp and /dev/shm): the s29 hostile-input audit's findings. None of them may hang a command,
crash it with a traceback, or make it write or delete outside what is mcpfleet's own."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from mcpfleet.runner._util import tmpdirs
from mcpfleet.runner.launch.launcher import LOCK_NAME, RunRefused, run_lock
from mcpfleet.runner.results.store import LocalStore, read_run_file
from mcpfleet.runner.services import pgcluster

TRIAL = "oracle.filesystem.standard.tiny.move_todo_0.1"


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    """Before: `run_lock` opened the lock through the link and truncated its target to the run's pid."""
    precious = tmp_path / "precious.txt"
    precious.write_text("root:x:0:0:precious line\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_NAME).symlink_to(precious)
    with pytest.raises(RunRefused, match=r"\.mcpfleet\.lock: cannot be opened as the run's lock file .*remove it"):
        with run_lock(LocalStore(run)):
            pass
    assert precious.read_text() == "root:x:0:0:precious line\n"
    (run / LOCK_NAME).unlink()
    os.mkfifo(run / LOCK_NAME)  # no regular file either (and opening it must not wait for a writer)
    with pytest.raises(RunRefused, match="is not a regular file; remove it"):
        with run_lock(LocalStore(run)):
            pass


def test_a_fifo_a_folder_a_deep_or_a_huge_file_in_a_run_folder_reads_as_damaged_not_a_hang(tmp_path: Path) -> None:
    """Before: a FIFO as result.json or summary.json hung `report`, `export` and a resume in open(); a deeply
    nested summary.json was a RecursionError traceback; messages.json as a folder an IsADirectoryError one; a
    sparse 1 GiB result.json was read whole (2 GB of memory)."""
    store = LocalStore(tmp_path / "run")
    trial = tmp_path / "run" / "trials" / TRIAL
    trial.mkdir(parents=True)
    os.mkfifo(trial / "result.json")
    os.mkfifo(tmp_path / "run" / "summary.json")
    (trial / "messages.json").mkdir()
    (tmp_path / "run" / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    out: dict[str, object] = {}

    def read() -> None:
        out["result"] = store.read_result(TRIAL)
        out["summary"] = store.read_json("summary.json")
        out["run"] = store.read_json("run.json")
        out["messages"] = store.read_trial_file(TRIAL, "messages.json")
        out["all"] = list(store.iter_results())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "a read blocked on a FIFO in the run folder"
    assert out == {"result": None, "summary": None, "run": None, "messages": None, "all": []}
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(2048)  # sparse: no disk used
    with pytest.raises(OSError, match="larger than 1,024 bytes"):
        read_run_file(huge, limit=1024)
    assert read_run_file(huge) == b"\0" * 2048
    (tmp_path / "link.json").symlink_to(huge)
    with pytest.raises(OSError):  # a record is never a link (they are written in place, atomically)
        read_run_file(tmp_path / "link.json")


def test_names_any_user_can_make_in_tmp_do_not_crash_the_sweep(tmp_path: Path) -> None:
    """Before: `mkdir /tmp/mcpfleet-trial-99999999999-x` by any user made every `mcpfleet run` an OverflowError
    traceback (os.kill of a pid past 2**31)."""
    (tmp_path / "mcpfleet-trial-99999999999-x").mkdir()
    shm = tmp_path / "shm"
    shm.mkdir()
    (shm / "sem.mcpfleet-99999999999-x").write_text("")
    tmpdirs.sweep(tmp_path, shm)  # no pid at all: not ours to remove
    assert (tmp_path / "mcpfleet-trial-99999999999-x").is_dir() and (shm / "sem.mcpfleet-99999999999-x").exists()


def test_the_postgres_sweep_never_deletes_through_a_link_or_outside_its_run_folders(tmp_path: Path) -> None:
    """Before: every `mcpfleet run` swept the PostgreSQL runs root, following a link there (its default sits in
    world-writable /dev/shm) and removing every subfolder older than a minute without an owner file: a planted
    `/dev/shm/mcpfleet-pg-0 -> /home/alice`, or `MCPFLEET_PG_DIR=/data`, emptied those folders."""
    victim = tmp_path / "victim"
    for name in ("projectA", "1234-abcdef"):
        (victim / name).mkdir(parents=True)
        (victim / name / "data.txt").write_text("precious\n")
    old = time.time() - 7200
    for folder in victim.iterdir():
        os.utime(folder, (old, old))
    (tmp_path / "pglink").symlink_to(victim)
    assert pgcluster.sweep_stale(tmp_path / "pglink") == []
    assert sorted(p.name for p in victim.iterdir()) == ["1234-abcdef", "projectA"]
    # A real runs root of this user: only dead runs' folders (named <pid>-<hex>) go, whatever else it holds stays;
    # an owner file of the wrong shape is as none (old: swept), not a traceback.
    (victim / "1234-abcdef" / "owner.json").write_text(json.dumps({"uid": 0}))
    os.utime(victim / "1234-abcdef", (old, old))
    assert pgcluster.sweep_stale(victim) == [victim / "1234-abcdef"]
    assert sorted(p.name for p in victim.iterdir()) == ["projectA"]
    assert (victim / "projectA" / "data.txt").read_text() == "precious\n"


def test_a_run_folder_inside_another_run_or_inside_the_task_pack_is_refused(tmp_path: Path) -> None:
    """The s29 audit: an output inside another run's trials/ passed `validate`, and that run's next resume removed
    it as an unfinished trial, records and all; an output inside a task's initial state had every later trial
    handed the earlier trials' transcripts (the oracle's: the solution), and the run could never resume."""
    from conftest import make_tiny_pack
    from hostile import cli, flat, write_run

    pack = make_tiny_pack(tmp_path / "pack")
    oracle = [{"name": "oracle", "model": "scripted/oracle"}]
    first = write_run(tmp_path, {"models": oracle, "tasks": {"path": "pack"}}, name="first")
    assert cli("run", str(first), "--no-progress", cwd=tmp_path).returncode == 0
    for name, uri, said in [
        ("nested", "runs/first/trials", "would lie inside the run folder"),
        ("instate", "pack/filesystem/states/tiny/runs", "overlap: records would be written into what every trial"),
        ("pack", ".", "overlap"),  # the run folder would be the pack itself
    ]:
        path = write_run(tmp_path, {"models": oracle, "tasks": {"path": "pack"}, "output": {"uri": uri}}, name=name)
        for command in ("validate", "run"):
            out = cli(command, str(path), cwd=tmp_path)
            assert out.returncode == 2 and said in flat(out.stderr), (name, command, out.stdout, out.stderr)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["first"]
    assert not (pack / "filesystem" / "states" / "tiny" / "runs").exists()
    beside = write_run(tmp_path, {"models": oracle, "tasks": {"path": "pack"}, "output": {"uri": "elsewhere"}})
    assert cli("validate", str(beside), cwd=tmp_path).returncode == 0
