"""Grading a PostgreSQL trial the agent cannot change (issue 48, section 1): what grading stops of a superuser
agent's processes (pggrade.stop_strays), by their throwaway uid or else by their environment. The attacks
themselves (a search path or another setting the agent set, a superuser's configuration, sessions, processes and
/var/tmp files, a statement left running) are the attack kit's, played through `mcpfleet run`
(tests/attacks/README.md)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from mcpfleet.runner.services import pgcluster


def shell(command: str, what: str) -> str:
    """A COPY ... FROM PROGRAM row of ``planted``: a process started in the background, and its pid."""
    return f"COPY planted FROM PROGRAM $p${command} </dev/null >/dev/null 2>&1 & printf '{what}\\t%s\\n' $!$p$"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(os.geteuid() != 0, reason="a trial cluster gets a throwaway uid as root only")
async def test_a_trial_clusters_processes_are_found_by_their_uid_or_else_by_their_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What grading stops of a superuser agent's (pggrade.stop_strays): as root, every process of its cluster's
    throwaway uid but the server's; without one (not root), the processes under the server's backends and those
    whose environment still names its data folder, never another process of the same user; one that cleared its
    environment and left its parent is the documented gap there."""
    from pgpack import scratch_runs_root

    from mcpfleet.runner.services import pggrade

    with scratch_runs_root("mcpfleet-pg-strays-") as root:
        monkeypatch.setenv(pgcluster.PG_DIR_ENV, str(root))
        bystander = subprocess.Popen(
            ["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups", "sleep", "600"]
        )
        pids: dict[str, int] = {}
        try:
            with pgcluster.run_cluster() as run:
                async with pgcluster.private_cluster(run, "strays") as h:
                    assert h.uid in pgcluster.TRIAL_IDS
                    data = Path(h.base) / "data"
                    conn = h.connect()
                    with conn.cursor() as cur:
                        cur.execute("CREATE TEMP TABLE out (what text, pid int)")
                        for what, command in {
                            "daemon": "setsid sleep 600",
                            "nohup": "nohup sleep 600",
                            "cleared": "env -i /usr/bin/setsid /bin/sleep 600",
                        }.items():
                            cur.execute(shell(command, what).replace("COPY planted", "COPY out"))
                        cur.execute("SELECT what, pid FROM out")
                        pids = dict(cur.fetchall())
                        cur.execute("SELECT pg_backend_pid()")
                        [(own,)] = cur.fetchall()
                    assert all(_alive(p) for p in pids.values())
                    # The COPY shells gone (under load one may not have exited yet: its children still under the
                    # backend, which stray_pids finds whatever their environment), what they left is re-parented.
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline and any(_ppid(p) == own for p in _all_pids()):
                        time.sleep(0.05)
                    by_env, by_uid = set(pggrade.stray_pids(data, None)), set(pggrade.stray_pids(data, h.uid))
                    assert {pids["daemon"], pids["nohup"]} <= by_env and pids["cleared"] not in by_env
                    assert set(pids.values()) <= by_uid
                    assert not {own, bystander.pid} & (by_env | by_uid)
                    assert pggrade.stop_strays(data, h.uid) >= 3
                    assert not any(_alive(p) for p in pids.values())
                    with conn.cursor() as cur:  # the server and this session are untouched
                        cur.execute("SELECT 1")
                    conn.close()
            assert bystander.poll() is None
        finally:
            bystander.kill()
            bystander.wait()
            for pid in pids.values():
                if _alive(pid):
                    os.kill(pid, 9)


def _all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
