"""The modes of the files and folders mcpfleet writes for people and other processes to read.

``tempfile.mkstemp`` and ``mkdtemp`` (the atomic writes and the swapped-in folders) create 0600 files and 0700
folders whatever the umask. A record, an export or a task folder made that way could not be read by a teammate,
a web server serving the report, or a pod whose image copied the folder (``COPY`` keeps modes) and runs as
another user. They get what ``open()`` and ``mkdir()`` would give: 0666 / 0777 less the umask.
"""

from __future__ import annotations

import os
from pathlib import Path


def umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, a race with other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    return 0o666 & ~umask()


def folder_mode() -> int:
    return 0o777 & ~umask()
