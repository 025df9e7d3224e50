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
import stat
from datetime import UTC, datetime
from pathlib import Path

from mcpfleet.runner.spec.task import TaskError

DEFAULT_TIME = datetime(2025, 1, 1, tzinfo=UTC).timestamp()
ROOT_KEY = "."
DEFAULT_KEY = "*"
# A state is copied whole into every trial: its apparent size (a sparse file counts at its full length) and its
# entry count (links followed, as the copy follows them) are capped so a small pack cannot fill a disk.
MAX_STATE_BYTES = 1024**3
MAX_STATE_ENTRIES = 100_000
MAX_TIMES_BYTES = 16 * 1024**2


def _parse_time(value: object, where: str) -> float:
    if not isinstance(value, str):
        raise TaskError(f"{where}: {value!r:.80} is not a time; write an ISO-8601 UTC string like 2025-01-01T00:00:00Z")
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise TaskError(f"{where}: '{value}' is not an ISO-8601 time") from None
    if dt.tzinfo is None:
        raise TaskError(f"{where}: '{value}' has no timezone; write it in UTC with a trailing Z")
    return dt.timestamp()


def load_times(path: Path) -> dict[str, float]:
    """A ``<category>.times.json``: a JSON object of relative path -> ISO-8601 UTC time; TaskError naming the file
    when it is anything else."""
    if not path.is_file():
        return {}
    if path.stat().st_size > MAX_TIMES_BYTES:
        raise TaskError(f"{path}: larger than {MAX_TIMES_BYTES // 1024**2} MiB; list only the paths whose time matters")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON, an integer of more than 4,300 digits
        raise TaskError(f"{path}: not valid JSON ({exc}); it maps relative paths to ISO-8601 UTC times") from None
    except RecursionError:  # nested deeper than Python's parser goes
        raise TaskError(f"{path}: not valid JSON (nested too deeply); it maps relative paths to UTC times") from None
    if not isinstance(data, dict):
        raise TaskError(
            f'{path}: must hold a JSON object of relative path -> time ({{"notes/a.txt": "2025-01-01T00:00:00Z"}}), '
            f"not {type(data).__name__}"
        )
    return {rel: _parse_time(ts, f"{path}:{rel}") for rel, ts in data.items()}


def contained(path: Path, within: Path, what: str = "initial state", within_what: str = "") -> Path:
    """``path`` resolved, refused (TaskError) when it is a symbolic link leading outside ``within``: a hostile
    pack must not copy host files (``/etc``, the runner's credentials) into a trial, send one to the model as a
    description or run one as a verifier. A link that cannot be resolved (a loop, ``a -> a``) is refused too."""
    try:
        real, bound = path.resolve(), within.resolve()
    except (RuntimeError, OSError) as exc:  # a link loop: RuntimeError before Python 3.13, OSError (ELOOP) since
        raise TaskError(f"{what} {path}: a symbolic link that cannot be resolved ({exc}); remove it") from None
    if real != bound and bound not in real.parents:
        raise TaskError(
            f"{what} {path}: symbolic link to {real}, outside {within_what}{within}; a task pack must be "
            "self-contained (replace the link with the file it points to)"
        )
    return real


def _kind(mode: int) -> str:
    kinds = [
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ]
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def check_copyable(source: Path, bound: Path | None = None) -> tuple[int, int]:
    """Walk ``source`` as the copy will (following links) and refuse, with a TaskError naming the path, what
    cannot be copied faithfully and finitely: ``source`` resolving outside ``bound`` (the pack root or
    ``tasks.statesPath``; by default its parent folder), a symbolic link leading out of the state, dangling or
    looping back into its own ancestors, anything that is not a regular file or folder (a device such as
    /dev/zero, a named pipe or a socket would make the copy read for ever or block), and a state larger than
    ``MAX_STATE_BYTES`` (apparent size) or ``MAX_STATE_ENTRIES`` entries. Returns (entries, bytes)."""
    real_source = contained(source, source.parent if bound is None else bound)
    entries = size = 0
    largest: tuple[int, Path] = (0, source)

    def walk(folder: Path, real: Path, ancestors: tuple[Path, ...]) -> None:
        nonlocal entries, size, largest
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise TaskError(f"initial state {folder}: cannot be listed ({exc.strerror or exc})") from None
        for entry in children:
            p = Path(entry.path)
            entries += 1
            if entries > MAX_STATE_ENTRIES:
                raise TaskError(
                    f"initial state {source}: more than {MAX_STATE_ENTRIES:,} files and folders (links counted as "
                    "copied); a trial copies the whole state, so trim it"
                )
            target = p
            if entry.is_symlink():
                target = contained(p, real_source)
                if not target.exists():
                    raise TaskError(f"initial state {p}: dangling symbolic link to {target}; remove it")
            try:
                st = target.stat()
            except OSError as exc:
                raise TaskError(f"initial state {p}: cannot be read ({exc.strerror or exc})") from None
            if stat.S_ISDIR(st.st_mode):
                real_dir = target.resolve()
                if real_dir in ancestors:
                    raise TaskError(f"initial state {p}: folder link to its own ancestor {real_dir} (a loop)")
                walk(p, real_dir, (*ancestors, real_dir))
            elif stat.S_ISREG(st.st_mode):
                size += st.st_size
                largest = max(largest, (st.st_size, p))
                if size > MAX_STATE_BYTES:
                    raise TaskError(
                        f"initial state {source}: larger than {MAX_STATE_BYTES // 1024**3} GiB (apparent size, sparse "
                        f"files counted in full; the largest file is {largest[1]}, {largest[0]:,} bytes); a trial "
                        "copies the whole state, so trim it"
                    )
            else:
                raise TaskError(
                    f"initial state {p}: {_kind(st.st_mode)}, not a regular file or folder; a state is copied into "
                    "every trial, so remove it (or replace it with a regular file)"
                )

    walk(source, real_source, (real_source,))
    return entries, size


def _copy_file(src: str, dst: str) -> str:
    """copytree's copy function: only a regular file (the state may have changed since ``check_copyable``)."""
    mode = os.stat(src).st_mode
    if not stat.S_ISREG(mode):
        raise TaskError(f"initial state {src}: {_kind(mode)}, not a regular file; remove it from the state")
    return str(shutil.copy2(src, dst))


def copy_state(source: Path, dest: Path, times_file: Path | None = None, bound: Path | None = None) -> int:
    """Copy ``source`` into the (empty or missing) ``dest`` with its times, then apply the times file's
    overrides. Returns the file count. ``bound``: what the state must resolve within (see ``check_copyable``)."""
    if not source.is_dir():
        raise TaskError(f"initial state {source} not found")
    check_copyable(source, bound)
    if times_file is not None and (times_file.exists() or times_file.is_symlink()):
        contained(times_file, source.parent if bound is None else bound, "file times")
    times = load_times(times_file) if times_file else {}
    # copy2 for files and copystat for folders (after their contents): times and modes as in the source.
    shutil.copytree(source, dest, dirs_exist_ok=True, copy_function=_copy_file)
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
