"""Processes of `mcpfleet run` (issue 13, section 3): a SIGKILL leaves nothing running, stale temp folders of
dead runs go with the next run, and Ctrl-C at any moment exits 130 with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import REPO, make_tiny_pack

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"


def write_run(folder: Path, model: str, tasks: int = 4) -> Path:
    make_tiny_pack(folder / "pack", tasks=tasks)
    spec = {
        "models": [{"name": "slow", "model": model}],
        "tasks": {"path": "pack"},
        "agent": "mcpfleet",
        "concurrency": {"total": 2},
    }
    path = folder / "run.yaml"
    body = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "procs"}, "spec": spec}
    path.write_text(yaml.safe_dump(body))
    return path


def start(path: Path, tmp: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.Popen(
        [str(MCPFLEET), "run", str(path), "--no-progress"],
        cwd=path.parent,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def ours(pid: int, tmp: Path | None = None) -> dict[int, str]:
    """Processes in the run's session, or started for it: the scripted server and the MCP servers have sessions
    of their own, the servers' command lines name their state folder under the run's TMPDIR."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat[0] == "Z":
            continue
        if int(stat[3]) == pid or f"--parent-pid {pid}" in cmd or (tmp is not None and str(tmp) in cmd):
            found[int(entry.name)] = cmd
    return found


def kill_all(pids: dict[int, str]) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for(cond: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def test_sigkill_of_the_run_leaves_nothing_running(tmp_path: Path) -> None:
    """Before: the scripted model server (in its own session) and the forkserver outlived the run forever."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = start(write_run(tmp_path, "scripted/oracle?latency=2"), tmp)
    try:
        started = wait_for(lambda: any("mcp-server-filesystem" in c for c in ours(proc.pid, tmp).values()), 120)
        assert started, f"no MCP server came up: {ours(proc.pid, tmp)}"
        assert any("scripted_model" in c for c in ours(proc.pid).values())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert wait_for(lambda: not ours(proc.pid, tmp), 20), f"left running: {ours(proc.pid, tmp)}"
    finally:
        kill_all(ours(proc.pid, tmp))
        proc.kill()
        proc.communicate()


def test_stale_temp_folders_of_dead_runs_are_removed_by_the_next_run(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp / f"mcpfleet-trial-{dead.pid}-abcd1234"
    (stale / "state").mkdir(parents=True)
    (stale / "state" / "big.bin").write_bytes(b"x" * 1000)
    alive = tmp / f"mcpfleet-trial-{os.getpid()}-live0000"  # a live process's folder stays
    alive.mkdir()
    unrelated = tmp / "mcpfleet-trial-notapid"
    unrelated.mkdir()
    proc = start(write_run(tmp_path, "scripted/oracle", tasks=1), tmp)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert not stale.exists()
    assert alive.exists() and unrelated.exists()
    assert sorted(p.name for p in tmp.glob("mcpfleet-trial-*")) == sorted([alive.name, unrelated.name])


@pytest.mark.parametrize("delay", [0.3, 1.0, 2.5, 5.0, 9.0])
def test_ctrl_c_at_any_moment_exits_130_with_one_line(tmp_path: Path, delay: float) -> None:
    """SIGINT to the whole process group, as a terminal's Ctrl-C: during imports, planning, the forkserver's
    preload, servers starting and trials running."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = start(write_run(tmp_path, "scripted/oracle?latency=1"), tmp)
    try:
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, (proc.returncode, out, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err
        assert lines[0].startswith("interrupted:") and "again to resume" in lines[0]
        assert wait_for(lambda: not ours(proc.pid, tmp), 20), f"left running: {ours(proc.pid, tmp)}"
    finally:
        kill_all(ours(proc.pid, tmp))
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
