"""What ``mcpfleet view`` keeps between its starts for a local run folder: the run's index (its rows) and its
search index (search_index.py), both valid only for the folder's state when they were made.

The state is every trial folder's ``result.json`` (its inode, size and modification time: a rerun or a new trial
replaces it, since every record file is written before it) and the run's ``plan.json`` and ``run.json``. Reading
it is one ``stat`` per trial, against reading and validating every record: what makes a 10,000-trial run open in
a fraction of a second the second time. A changed folder (a run still going, a resumed one) is read again.

The cache is the user's own (``$MCPFLEET_VIEWER_CACHE_DIR``, else ``$XDG_CACHE_HOME`` or ``~/.cache``,
``/mcpfleet/viewer``; folders 0700, files 0600): it holds what the records say of each trial, which a run folder's
modes may keep from other users, and the sandbox hides it from agents' servers as it hides run folders. A
damaged or foreign cache file is ignored and replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcpfleet.runner._util.cachedir import viewer_cache_dir as cache_dir
from mcpfleet.runner.report.viewer.index import ROW_FIELDS, TrialRow, row_from_values

VERSION = 1  # of the cache's format: a new one reads every run again
STATE_FILES = ("plan.json", "run.json")


def _stat(path: str) -> str:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return "-"
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def folder_state(root: Path) -> str:
    """A digest of what the run's index is built from (see the module's docstring)."""
    parts = [f"{VERSION}", str(root.resolve())]
    parts += [f"{name}={_stat(str(root / name))}" for name in STATE_FILES]
    try:
        with os.scandir(root / "trials") as entries:
            # (a name holds no NUL: it separates the parts)
            trials = sorted(f"{e.name}={_stat(os.path.join(e.path, 'result.json'))}" for e in entries)
    except OSError:
        trials = []
    return hashlib.blake2b("\0".join(parts + trials).encode("utf-8", "surrogateescape"), digest_size=20).hexdigest()


def cache_file(root: Path, kind: str) -> Path:
    """The cache file of ``kind`` (``index.json``, ``search.sqlite``) for the run folder ``root``."""
    name = hashlib.blake2b(str(root.resolve()).encode(), digest_size=16).hexdigest()
    return cache_dir() / f"{name}.{kind}"


def write_private(path: Path, write: Callable[[Path], object]) -> None:
    """Make ``path`` whole through ``write(temporary path)``, then rename it into place (0600, in a 0700 folder):
    a viewer killed midway leaves no half a cache."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def load_index(root: Path, state: str) -> dict[str, Any] | None:
    """The cached index of ``root`` at ``state`` (rows as TrialRow), or None (none, stale, damaged)."""
    try:
        data = json.loads(cache_file(root, "index.json").read_bytes())
        if not isinstance(data, dict) or data.get("state") != state or data.get("fields") != list(ROW_FIELDS):
            return None
        data["rows"] = [row_from_values(r) for r in data["rows"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return data


def save_index(root: Path, state: str, rows: list[TrialRow], **facts: Any) -> None:
    """Keep the index for the next start; a cache that cannot be written is only slower, never an error."""
    data = {"state": state, "fields": list(ROW_FIELDS), "rows": [tuple(r.__dict__.values()) for r in rows], **facts}
    body = json.dumps(data, ensure_ascii=False).encode("utf-8", "backslashreplace")
    with contextlib.suppress(OSError):
        write_private(cache_file(root, "index.json"), lambda p: p.write_bytes(body))
