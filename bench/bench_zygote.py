"""CPU of one postgres-mcp start: started directly (as before) against forked by the run's zygote.

Each start is a trial server's life without the agent: spawn, initialise the MCP session, list the tools, one
query, stop. CPU is user + system time of every process involved: a direct server (this process's child), or
the stub (this process's child) plus the forked server (the zygote's child, read from the zygote's reaped
children) plus the zygote's own time for the fork. The zygote's one import is reported apart. Modes alternate.

    .venv/bin/python bench/bench_zygote.py --starts 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


async def _start(cmd: Any, work: Path) -> float:
    """Wall seconds to a session with the tools listed; the server is stopped before returning."""
    from mcpfleet.runner.environment.mcp_client import connect_stdio

    with open(work / "server.log", "ab") as log:
        t = time.perf_counter()
        async with connect_stdio(cmd, log, cwd=work) as session:
            await session.list_tools()
            wall = time.perf_counter() - t
            result = await session.call_tool("execute_sql", {"sql": "SELECT 1 AS one"})
            assert "one" in str(result.content), result
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", type=int, default=10, help="starts per mode")
    args = ap.parse_args()

    from mcpfleet.runner.services import run_resources
    from mcpfleet.runner.services.pgtrial import Login, create_database, create_role, drop_trial
    from mcpfleet.runner.services.postgres import PostgresService

    pg = PostgresService()
    rows: dict[str, list[tuple[float, float]]] = {"direct": [], "zygote": []}
    with run_resources(["postgres"], prefork=True) as res, tempfile.TemporaryDirectory() as tmp:
        h = res["postgres"]
        if h.zygote is None:
            sys.exit("no zygote started (see the line above)")
        zygote_pid = _zygote_pid(h.zygote)
        tag = secrets.token_hex(4)
        login = Login(h.host, h.port, f"bench_{tag}", f"agent_{tag}", secrets.token_urlsafe(18))
        create_role(h, login)
        create_database(h, None, login)
        try:
            asyncio.run(_start(pg.server_command(login, zygote=h.zygote), Path(tmp)))  # waits for its import
            own0, _ = _proc_cpu(zygote_pid)
            for i in range(2 * args.starts):
                mode = "direct" if i % 2 == 0 else "zygote"
                cmd = pg.server_command(login, zygote=h.zygote if mode == "zygote" else None)
                ours, (z_own, z_children) = _children_cpu(), _proc_cpu(zygote_pid)
                wall = asyncio.run(_start(cmd, Path(tmp)))
                z_own2, z_children2 = _proc_cpu(zygote_pid)
                cpu = _children_cpu() - ours + (z_own2 - z_own) + (z_children2 - z_children)
                rows[mode].append((cpu, wall))
        finally:
            drop_trial(h, login.database, login.user)
        print(f"zygote: {own0:.2f} s CPU for its start, import and first fork, once per run")
    print(f"{'mode':<8} {'starts':>6} {'CPU s (median)':>15} {'CPU s (min-max)':>16} {'to tools/list s':>16}")
    for mode, data in rows.items():
        cpus = [c for c, _ in data]
        walls = [w for _, w in data]
        print(
            f"{mode:<8} {len(data):>6} {statistics.median(cpus):>15.3f} {min(cpus):>7.3f}-{max(cpus):<8.3f}"
            f" {statistics.median(walls):>16.3f}"
        )


def _zygote_pid(socket: str) -> int:
    """Our child whose command line names the socket after --socket (its forks share that command line)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if b"--socket" in cmd and socket.encode() in cmd and ppid == os.getpid():
                return int(d.name)
    raise RuntimeError("zygote process not found")


if __name__ == "__main__":
    main()
