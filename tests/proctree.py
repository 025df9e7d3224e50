"""Finding the processes a test started, by a marker (a temp folder) in their command line or environment.

A server forked by a zygote (runner/services/zygote.py) keeps the zygote's command line, which names the
zygote's socket (in the run's folder), and /proc shows the zygote's environment, not the one it was given: find
forked servers by the socket's folder, or as ``children`` of the zygote."""

from __future__ import annotations

import os
from pathlib import Path


def processes_naming(marker: str) -> list[tuple[int, str]]:
    """Live processes (not zombies, not this one) whose command line or environment names ``marker``: what a
    test started under a folder of its own (servers, sites, browsers and their helpers inherit the variables
    that point there), with the first 160 characters of each command line."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (d / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if state != "Z" and (marker in cmd or marker in env):
            out.append((int(d.name), cmd[:160]))
    return out


def children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is ``pid``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == pid:
            out.append(int(d.name))
    return out
