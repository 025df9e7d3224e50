"""Make a toolcall task folder from limbic-format data, so a data set runs as an EvalRun's task.

``<pack>/toolcall/<difficulty>/<category>/<name>/`` gets description.md, meta.json and the data as
``cases.<suffix>`` (a folder of files becomes ``cases/``). The data is copied, so the task's content digest
covers it and a pod checks it like any task's.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from ..tasks import NAME_RE, TaskError
from .shards import count_cases


def make_task(
    pack: Path, data: Path, category: str, name: str, difficulty: str = "standard", description: str | None = None
) -> Path:
    """Write the task folder and return it; refuses names that cannot be part of a trial id."""
    for part in (difficulty, category, name):
        if not NAME_RE.match(part):
            raise TaskError(f"'{part}' must match {NAME_RE.pattern} (it becomes part of trial ids)")
    task = pack / "toolcall" / difficulty / category / name
    if task.exists():
        shutil.rmtree(task)
    task.mkdir(parents=True)
    if data.is_dir():
        shutil.copytree(data, task / "cases")
    else:
        shutil.copyfile(data, task / f"cases{data.suffix.lower()}")
    rows = count_cases(task / ("cases" if data.is_dir() else f"cases{data.suffix.lower()}"))
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
    return task
