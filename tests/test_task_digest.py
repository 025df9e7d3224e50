"""A task's digest (part of every trial's spec hash, which resume compares with the records) covers what a trial
gets: a copy of the task folder and its initial state with links followed, empty folders and modes kept. Before,
it hashed only the files ``rglob`` reached, so an edit a trial sees kept the digest, and resuming (or adding
attempts) mixed trials of two different tasks under one score (hostile audit, round 3, H3).

An ordinary task keeps the digest it always had, so records written before still match."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import make_tiny_pack
from hostile import cli, write_run

from mcpfleet.runner.spec.task import Task
from mcpfleet.runner.tasks.digest import task_digest
from mcpfleet.runner.tasks.discovery import discover


def tiny(tmp_path: Path) -> Task:
    return discover(make_tiny_pack(tmp_path / "pack"))[0]


def fresh(task: Task) -> str:
    """The digest of the task as it is now (``digest`` is cached per instance)."""
    return task_digest(dataclasses.replace(task))


def legacy(task: Task) -> str:
    """The digest as every release before computed it: the files rglob reaches, names then contents, unframed."""
    h = hashlib.sha256()
    for base in (task.path, task.state_dir):
        for p in sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            h.update(os.fsencode(p.relative_to(base)))
            h.update(p.read_bytes())
    h.update(task.state_times.read_bytes())
    return h.hexdigest()[:16]


def test_an_ordinary_task_keeps_its_old_digest(tmp_path: Path) -> None:
    task = tiny(tmp_path)
    (task.path / "data").mkdir()
    (task.path / "data" / "expected.json").write_text("{}")
    (task.path / "__pycache__").mkdir()  # the task folder's caches are no part of the task
    (task.path / "__pycache__" / "verify.cpython-311.pyc").write_bytes(b"\0")
    assert task_digest(task) == legacy(task)


def test_the_bundled_tasks_keep_their_digests() -> None:
    """Runs recorded before this digest resume: no bundled task has what the old digest missed."""
    from conftest import REPO

    tasks = discover(REPO / "tasks")
    assert len(tasks) > 40
    changed = [t.id for t in tasks if t.service == "filesystem" and task_digest(t) != legacy(t)]
    assert changed == []


def link_answers(task: Task) -> Path:
    """A folder link inside the task folder to reference data elsewhere in the pack, as a verifier may read."""
    shared = task.pack_root / "shared" / "answers"
    shared.mkdir(parents=True)
    (shared / "expected.json").write_text('{"expected": 1}')
    (task.path / "answers").symlink_to(Path("..", "..", "..", "..", "shared", "answers"))
    return shared / "expected.json"


def retarget(task: Task) -> None:
    (task.state_dir / "current").unlink()
    (task.state_dir / "current").symlink_to("v2")


EDITS: dict[str, Callable[[Task], object]] = {
    "a file behind a folder link in the task folder": lambda t: (t.path / "answers" / "expected.json").write_text("2"),
    "a folder link in the state retargeted": retarget,
    "an empty folder added to the state": lambda t: (t.state_dir / "archive").mkdir(),
    "an empty folder added to the task folder": lambda t: (t.path / "scratch").mkdir(),
    "a state file made unreadable": lambda t: (t.state_dir / "keep.txt").chmod(0o000),
    "a state file made executable": lambda t: (t.state_dir / "keep.txt").chmod(0o755),
    "a state folder made read-only": lambda t: (t.state_dir / "notes").chmod(0o555),
    "a file under __pycache__ in the state edited": lambda t: (t.state_dir / "__pycache__" / "n.txt").write_text("b"),
}


def prepare(task: Task) -> None:
    """What every edit starts from: versioned folders behind a link, a cache folder, a linked answer key."""
    for version, text in (("v1", "one\n"), ("v2", "two\n")):
        (task.state_dir / version).mkdir()
        (task.state_dir / version / "cfg.txt").write_text(text)
    (task.state_dir / "current").symlink_to("v1")
    (task.state_dir / "__pycache__").mkdir()
    (task.state_dir / "__pycache__" / "n.txt").write_text("a")


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edit_a_trial_sees_changes_the_digest(tmp_path: Path, edit: str) -> None:
    task = tiny(tmp_path)
    prepare(task)
    if edit.startswith("a file behind"):
        link_answers(task)
    before = fresh(task)
    assert fresh(task) == before  # stable
    EDITS[edit](task)
    try:
        assert fresh(task) != before, edit
    finally:
        for p in (task.state_dir / "keep.txt", task.state_dir / "notes"):
            p.chmod(0o755 if p.is_dir() else 0o644)  # let pytest remove it


def test_records_are_framed_so_shifting_bytes_between_names_does_not_collide(tmp_path: Path) -> None:
    """Two empty folders ``a``/``bc`` and ``ab``/``c`` would hash alike if names ran together unframed."""
    one, two = tiny(tmp_path / "one"), tiny(tmp_path / "two")
    for task, names in ((one, ("a", "bc")), (two, ("ab", "c"))):
        for name in names:
            (task.state_dir / name).mkdir()
    assert fresh(one) != fresh(two)


def test_resume_refuses_records_of_a_changed_linked_answer_key(tmp_path: Path) -> None:
    """The audit's end-to-end case: the verifier reads its answer key through a folder link elsewhere in the pack.
    Before, editing the key changed nothing for resume: the old pass was kept, and adding an attempt mixed the
    two tasks' trials under one pass@k."""
    pack = make_tiny_pack(tmp_path / "pack")
    task = discover(pack)[0]
    key = link_answers(task)
    spec = {
        "models": [{"name": "noop", "model": "scripted/noop"}],
        "tasks": {"path": "pack"},
        "attempts": 1,
        "output": {"uri": "runs"},
    }
    path = write_run(tmp_path, spec, name="linked")
    first = cli("run", str(path), "--no-progress", cwd=tmp_path)
    assert first.returncode in (0, 1), first.stderr
    assert len(list((tmp_path / "runs" / "linked" / "trials").glob("*/result.json"))) == 1

    key.write_text(json.dumps({"expected": 2}))
    again = cli("run", str(path), "--no-progress", cwd=tmp_path)
    assert again.returncode == 2, (again.stdout, again.stderr)
    assert "different task content" in again.stderr and "Traceback" not in again.stderr
