"""Trial working folders in the temp directory, named after the process that owns them, so that the next run
can remove the folders of runs that died without cleaning up (a SIGKILL, a crash, a lost machine)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

PREFIX = "mcpfleet-trial-"
_OWNED = re.compile(rf"^{re.escape(PREFIX)}(\d+)-")


def make() -> Path:
    """A fresh private folder ``mcpfleet-trial-<pid>-XXXX`` in the temp directory."""
    return Path(tempfile.mkdtemp(prefix=owned_prefix()))


def owned_prefix(what: str = "") -> str:
    """A temp folder prefix naming this process, so that ``sweep`` removes the folder if the process dies with
    it (a verifier's scratch folder in a worker that was SIGKILLed, say)."""
    return f"{PREFIX}{os.getpid()}-{what + '-' if what else ''}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive, and not ours to judge
    return True


def sweep(root: Path | None = None) -> int:
    """Remove trial folders whose owning process is gone; returns how many. Folders of live processes (and any
    name without an owner pid) are left alone."""
    root = Path(root or tempfile.gettempdir())
    removed = 0
    try:
        entries = list(root.iterdir())
    except OSError:
        return 0
    for entry in entries:
        m = _OWNED.match(entry.name)
        if m is None or _alive(int(m.group(1))) or entry.is_symlink() or not entry.is_dir():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed += not entry.exists()
    return removed
