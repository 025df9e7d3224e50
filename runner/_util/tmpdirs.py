"""Trial working folders in the temp directory, named after the process that owns them, so that the next run
can remove the folders of runs that died without cleaning up (a SIGKILL, a crash, a lost machine).

The run's multiprocessing leftovers too (``own_multiprocessing_names``): its POSIX semaphores in /dev/shm, which
only its resource tracker unlinks (a process-group SIGKILL kills the tracker too: 11 ``sem.mp-*`` per run were
left), and its temp folder holding the forkserver's socket (``pymp-*``, left by any SIGKILL)."""

from __future__ import annotations

import multiprocessing.process
import multiprocessing.util
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

PREFIX = "mcpfleet-trial-"
_OWNED = re.compile(rf"^{re.escape(PREFIX)}(\d+)-")
SHM = Path("/dev/shm")  # where glibc keeps named semaphores: sem.<name without its slash>
SEM_PREFIX = "mcpfleet-"
_OWNED_SEM = re.compile(rf"^sem\.{re.escape(SEM_PREFIX)}(\d+)-")
SHORT_TMP = Path("/tmp")  # for the forkserver's socket when the temp directory's path is too long for one
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes; the one limit of every Unix socket mcpfleet binds (prefork's too)


def make() -> Path:
    """A fresh private folder ``mcpfleet-trial-<pid>-XXXX`` in the temp directory."""
    return Path(tempfile.mkdtemp(prefix=owned_prefix()))


def owned_prefix(what: str = "") -> str:
    """A temp folder prefix naming this process, so that ``sweep`` removes the folder if the process dies with
    it (a verifier's scratch folder in a worker that was SIGKILLed, say)."""
    return f"{PREFIX}{os.getpid()}-{what + '-' if what else ''}"


def own_multiprocessing_names() -> None:
    """Name this process's multiprocessing semaphores ``/mcpfleet-<pid>-*`` and its temp folder (the
    forkserver's socket) ``mcpfleet-trial-<pid>-mp-*``, so that ``sweep`` removes them once it is dead. Call it
    before the first semaphore or forkserver; a name already in use is kept.

    Python offers no public way: this sets the two keys of ``current_process()._config`` that CPython 3.11 reads,
    ``semprefix`` (``synchronize.SemLock._make_name``; children open a semaphore by its pickled name, whatever it
    is) and ``tempdir`` (``util.get_temp_dir``, which registers the folder's removal only when it makes one
    itself, hence the Finalize here, at its exit priority). Both keys exist since Python 3.4."""
    config = multiprocessing.process.current_process()._config  # type: ignore[attr-defined]  # noqa: SLF001
    if config.get("semprefix") == "/mp":  # CPython's default: not renamed yet (a forked child keeps its run's)
        config["semprefix"] = f"/{SEM_PREFIX}{os.getpid()}"
    if config.get("tempdir") is None:
        root = Path(tempfile.gettempdir())
        if len(str(root / owned_prefix("mp"))) + len("XXXXXXXX/listener-XXXXXXXX") > MAX_SOCKET_PATH:
            root = SHORT_TMP  # what the next run's sweep also looks at
        folder = tempfile.mkdtemp(prefix=owned_prefix("mp"), dir=root)
        config["tempdir"] = folder
        multiprocessing.util.Finalize(None, _remove_mp_dir, args=(shutil.rmtree, folder), exitpriority=-100)


def _remove_mp_dir(rmtree: Callable[..., None], folder: str) -> None:
    """As multiprocessing.util._remove_temp_dir (``rmtree`` held: this runs late in the interpreter's exit)."""
    rmtree(folder, ignore_errors=True)
    current = multiprocessing.process.current_process()
    if current is not None:
        current._config["tempdir"] = None  # type: ignore[attr-defined]  # noqa: SLF001


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive, and not ours to judge
    except (OverflowError, ValueError):
        return True  # no pid at all (a name any user can make in /tmp): not ours to remove, and no crash
    return True


def sweep(root: Path | None = None, shm: Path | None = None) -> int:
    """Remove trial folders, and named semaphores in ``shm``, whose owning process is gone; returns how many.
    Those of live processes (and any name without an owner pid) are left alone. By default: the temp directory,
    /tmp (see own_multiprocessing_names) and /dev/shm. (A semaphore of a dead run that its orphaned workers
    still hold keeps working for them: unlinking only removes its name.)"""
    if root is None:
        roots, shm = list(dict.fromkeys([Path(tempfile.gettempdir()), SHORT_TMP])), shm or SHM
    else:
        roots = [Path(root)]
    removed = 0
    for folder in roots:
        for entry in _entries(folder):
            m = _OWNED.match(entry.name)
            if m is None or _alive(int(m.group(1))) or entry.is_symlink() or not entry.is_dir():
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed += not entry.exists()
    for entry in _entries(shm):
        m = _OWNED_SEM.match(entry.name)
        if m is None or _alive(int(m.group(1))):
            continue
        try:
            entry.unlink()
            removed += 1
        except OSError:
            pass  # gone already, or another user's
    return removed


def _entries(folder: Path | None) -> list[Path]:
    try:
        return list(folder.iterdir()) if folder else []
    except OSError:
        return []
