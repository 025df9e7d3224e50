"""Materialise a task's initial state into a fresh folder, faithfully: contents, tree and file times.

Git does not keep mtimes, so bundled states carry ``<category>.times.json`` (relative path -> ISO-8601
UTC). Listed files get their time; everything else, directories included, gets a fixed epoch, so a
state is byte- and time-identical on every machine and in every pod.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from .tasks import Task, TaskError

DEFAULT_TIME = datetime(2025, 1, 1, tzinfo=UTC).timestamp()


def _parse_time(value: str, where: str) -> float:
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise TaskError(f"{where}: '{value}' is not an ISO-8601 time") from None
    if dt.tzinfo is None:
        raise TaskError(f"{where}: '{value}' has no timezone; write it in UTC with a trailing Z")
    return dt.timestamp()


def load_times(path: Path) -> dict[str, float]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {rel: _parse_time(ts, f"{path}:{rel}") for rel, ts in data.items()}


def copy_state(source: Path, dest: Path, times_file: Path | None = None) -> int:
    """Copy ``source`` into the (empty or missing) ``dest`` and pin all times. Returns the file count."""
    if not source.is_dir():
        raise TaskError(f"initial state {source} not found")
    shutil.copytree(source, dest, dirs_exist_ok=True, copy_function=shutil.copyfile)
    times = load_times(times_file) if times_file else {}
    files = 0
    dirs: list[Path] = []
    for root, dirnames, filenames in os.walk(dest):
        for name in filenames:
            p = Path(root, name)
            t = times.get(p.relative_to(dest).as_posix(), DEFAULT_TIME)
            os.utime(p, (t, t), follow_symlinks=False)
            files += 1
        dirs.extend(Path(root, d) for d in dirnames)
    # Directories last, deepest first: writing a file inside a directory changes the directory's mtime.
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        t = times.get(d.relative_to(dest).as_posix(), DEFAULT_TIME)
        os.utime(d, (t, t))
    os.utime(dest, (DEFAULT_TIME, DEFAULT_TIME))
    return files


def materialise(task: Task, dest: Path) -> int:
    """Materialise ``task``'s initial state into ``dest``, the way its service keeps states."""
    from .services import get_service

    return get_service(task.service).materialise(task, dest)
