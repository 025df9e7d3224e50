"""Materialise a task's initial state into a fresh folder, faithfully: contents, tree and file times.

The copy keeps every file's and folder's times, as MCPMark's ``shutil.copytree`` does, so a foreign state
(MCPMark's own) looks to the agent exactly as it does under MCPMark. Git does not keep mtimes, so bundled
states carry ``<category>.times.json`` (relative path -> ISO-8601 UTC; ``"."`` is the state's root): a
listed path gets that time, and the optional ``"*"`` entry gives every unlisted path a fixed time, which
makes a bundled state time-identical on every machine and in every pod. Without ``"*"`` an unlisted path
keeps the time it has in the source.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from .tasks import Task, TaskError

DEFAULT_TIME = datetime(2025, 1, 1, tzinfo=UTC).timestamp()
ROOT_KEY = "."
DEFAULT_KEY = "*"


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


def contained(path: Path, within: Path, what: str = "initial state") -> Path:
    """``path`` resolved, refused (TaskError) when it is a symbolic link leading outside ``within``: a hostile
    pack must not copy host files (``/etc``, the runner's credentials) into a trial."""
    real, bound = path.resolve(), within.resolve()
    if real != bound and bound not in real.parents:
        raise TaskError(
            f"{what} {path}: symbolic link to {real}, outside {within}; a task pack must be self-contained "
            "(replace the link with the file it points to)"
        )
    return real


def check_links(source: Path) -> None:
    """Refuse a state holding a symbolic link that leads out of it, or a folder link looping back into its
    own ancestors (copying would never end). Links within the state are copied as what they point to."""
    contained(source, source.parent)
    for root, dirnames, filenames in os.walk(source):
        for name in [*dirnames, *filenames]:
            p = Path(root, name)
            if not p.is_symlink():
                continue
            real = contained(p, source)
            if real.is_dir() and (real == Path(root).resolve() or real in Path(root).resolve().parents):
                raise TaskError(f"initial state {p}: folder link to its own ancestor {real} (a loop)")


def copy_state(source: Path, dest: Path, times_file: Path | None = None) -> int:
    """Copy ``source`` into the (empty or missing) ``dest`` with its times, then apply the times file's
    overrides. Returns the file count."""
    if not source.is_dir():
        raise TaskError(f"initial state {source} not found")
    check_links(source)
    # copy2 for files and copystat for folders (after their contents): times and modes as in the source.
    shutil.copytree(source, dest, dirs_exist_ok=True)
    times = load_times(times_file) if times_file else {}
    default = times.pop(DEFAULT_KEY, None)
    files = 0
    dirs: list[Path] = []
    for root, dirnames, filenames in os.walk(dest):
        for name in filenames:
            p = Path(root, name)
            t = times.get(p.relative_to(dest).as_posix(), default)
            if t is not None:
                os.utime(p, (t, t), follow_symlinks=False)
            files += 1
        dirs.extend(Path(root, d) for d in dirnames)
    if times or default is not None:
        # Directories last, deepest first: writing a file inside a directory changes the directory's mtime.
        for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
            t = times.get(d.relative_to(dest).as_posix(), default)
            if t is not None:
                os.utime(d, (t, t))
        t = times.get(ROOT_KEY, default)
        if t is not None:
            os.utime(dest, (t, t))
    return files


def materialise(task: Task, dest: Path) -> int:
    """Materialise ``task``'s initial state into ``dest``, the way its service keeps states."""
    from .services import get_service

    return get_service(task.service).materialise(task, dest)
