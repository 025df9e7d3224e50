"""Make a toolcall task folder from limbic-format data, so a data set runs as an EvalRun's task.

``<pack>/toolcall/<difficulty>/<category>/<name>/`` gets description.md, meta.json and the data as
``cases.<suffix>`` (a folder of files becomes ``cases/``). The data is copied, so the task's content digest
covers it and a pod checks it like any task's.

Re-making a task whose files would not change but for meta.json's ``created_at`` keeps the old meta.json: the
task's content digest (part of every trial's spec hash) then stays the same, so a run made from the task can
be resumed after the pack is rebuilt from the same data on another day.
"""

from __future__ import annotations

import filecmp
import json
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from mcpfleet.runner._util.filemodes import folder_mode
from mcpfleet.runner.spec.task import TaskError
from mcpfleet.runner.tasks.checks import name_problems
from mcpfleet.runner.toolcalls.loader import DataError
from mcpfleet.runner.toolcalls.shards import count_cases


def make_task(
    pack: Path, data: Path, category: str, name: str, difficulty: str = "standard", description: str | None = None
) -> Path:
    """Write the task folder and return it. Refuses, before writing anything, what the task checks would refuse
    or skip once written: names that cannot be part of a trial id or that ``discover`` skips (the pack's own rule,
    ``tasks.name_problems``), and data without a case."""
    if problems := name_problems("toolcall", difficulty, category, name):
        raise TaskError("; ".join(problems))
    if pack.exists() and not pack.is_dir():
        raise TaskError(f"--pack {pack}: not a folder; give the task pack's root folder (it is created if missing)")
    task = pack / "toolcall" / difficulty / category / name
    if data.is_dir() and task.resolve().is_relative_to(data.resolve()):
        raise DataError(f"{data}: the task folder {task} would lie inside its own data; choose another --pack")
    rows = count_cases(data)  # unreadable data, no row or repeated case ids: refused before anything is written
    dest = "cases" if data.is_dir() else f"cases{data.suffix.lower()}"
    # Copy into a fresh folder beside the task and swap it in: the data may lie inside the old task folder
    # (re-making a task from its own cases), and removing that folder first would delete the input.
    task.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=task.parent))
    staging.chmod(folder_mode())  # it becomes the task folder: an image's non-root runner must read it (filemodes.py)
    try:
        if data.is_dir():
            shutil.copytree(data, staging / dest)
        else:
            shutil.copyfile(data, staging / dest)
        _describe(staging, data, rows, category, name, difficulty, description)
        if task.exists():
            _keep_created_at(task, staging)
            old = Path(tempfile.mkdtemp(prefix=f".{name}.old.", dir=task.parent))
            task.rename(old / name)
            staging.rename(task)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(task)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return task


def _same_files(a: Path, b: Path, skip: str) -> bool:
    """Whether two folders hold the same files with the same bytes (``skip``, a top-level name, left out)."""

    def files(root: Path) -> dict[Path, Path]:
        return {p.relative_to(root): p for p in root.rglob("*") if p.is_file() and p.relative_to(root) != Path(skip)}

    left, right = files(a), files(b)
    if left.keys() != right.keys():
        return False
    return all(filecmp.cmp(left[k], right[k], shallow=False) for k in left)


def _keep_created_at(old: Path, new: Path) -> None:
    """Keep ``old``'s meta.json in ``new`` when nothing but its ``created_at`` would change."""
    try:
        before = json.loads((old / "meta.json").read_text(encoding="utf-8"))
        after = json.loads((new / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(before, dict) or "created_at" not in before:
        return
    if {**before, "created_at": None} != {**after, "created_at": None}:
        return
    if _same_files(old, new, "meta.json"):
        shutil.copyfile(old / "meta.json", new / "meta.json")


def _describe(
    task: Path, data: Path, rows: int, category: str, name: str, difficulty: str, description: str | None
) -> None:
    text = description or f"{rows} single tool-call cases (limbic format) from {data.name}."
    (task / "description.md").write_text(text.rstrip() + "\n", encoding="utf-8")
    meta = {
        "task_id": name,
        "task_name": name,
        "category_id": category,
        "category_name": category,
        "description": text,
        "author": "mcpfleet toolcalls task",
        "created_at": datetime.now(UTC).date().isoformat(),
        "difficulty": difficulty,
        "tags": ["toolcall"],
        "mcp": ["toolcall"],
        "meta_data": {"cases": rows},
    }
    (task / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
