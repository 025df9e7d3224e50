"""Processes of `mcpfleet run` (issue 13, section 3): a SIGKILL leaves nothing running, stale temp folders of
dead runs go with the next run, and Ctrl-C at any moment exits 130 with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import REPO, make_tiny_pack
from pgpack import make_pg_pack
from proctree import children, processes_naming

from mcpfleet.runner.services import pgcluster

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


def start(path: Path, tmp: Path, **extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp), **extra}
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


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_sigkill_of_a_postgres_run_leaves_nothing_running(tmp_path: Path) -> None:
    """The run's cluster, its postgres-mcp zygote, the servers the zygote forked and their stubs go with it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    pg_dir = Path(tempfile.mkdtemp(prefix="mcpfleet-pg-procs-", dir=pgcluster._scratch()))
    pg_dir.chmod(0o711)  # the server's OS user must reach its folder inside
    spec = {
        "models": [{"name": "slow", "model": "scripted/oracle?latency=3"}],
        "tasks": {"path": str(make_pg_pack(tmp_path / "pack")), "include": ["*/count_big", "*/add_total"]},
        "attempts": 2,
        "concurrency": {"total": 2},
    }
    path = tmp_path / "run.yaml"
    body = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "pgprocs"}, "spec": spec}
    path.write_text(yaml.safe_dump(body))
    proc = start(path, tmp, MCPFLEET_PG_DIR=str(pg_dir))

    def family() -> tuple[list[int], list[int], list[int]]:
        """(zygote, its forked servers, their stubs), all naming the run's folder (the zygote's socket)."""
        zygote = [p for p in children(proc.pid) if "zygote.py" in _cmdline(p) and str(pg_dir) in _cmdline(p)]
        forks = [c for z in zygote for c in children(z)]
        stubs = [p for p, cmd in processes_naming(str(pg_dir)) if "zygote_stub.py" in cmd]
        return zygote, forks, stubs

    try:
        assert wait_for(lambda: all(family()), 180), f"no forked server came up: {family()}"
        assert any("postgres" in cmd and "-D" in cmd for _, cmd in processes_naming(str(pg_dir)))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        gone = wait_for(lambda: not ours(proc.pid, tmp) and not processes_naming(str(pg_dir)), 20)
        assert gone, f"left running: {ours(proc.pid, tmp)} {processes_naming(str(pg_dir))}"
    finally:
        kill_all(ours(proc.pid, tmp))
        kill_all(dict(processes_naming(str(pg_dir))))
        proc.kill()
        proc.communicate()
        pgcluster.kill_postmasters(pg_dir)
        subprocess.run(["rm", "-rf", str(pg_dir)], check=False)


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


PYTHON = REPO / ".venv" / "bin" / "python"


def test_ctrl_c_inside_a_command_before_its_own_handler_prints_the_line(tmp_path: Path) -> None:
    """Typer turns a KeyboardInterrupt raised in a command into a silent exit 130. Before, a Ctrl-C during the
    `run` command's first imports (before its try) exited 130 with nothing said (seen in CI under load)."""
    script = (
        "import sys, typer\n"
        "from mcpfleet.runner.cli import app as cli, entry\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "def run(path: str) -> None:\n"
        "    raise KeyboardInterrupt\n"
        "@app.command()\n"
        "def other() -> None:\n"
        "    pass\n"
        "cli.main = app\n"
        "sys.argv = ['mcpfleet', 'run', 'x.yaml']\n"
        "entry.main()\n"
    )
    done = subprocess.run([str(PYTHON), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done
    assert done.stderr.strip() == "interrupted: finished trials are recorded; run the same command again to resume."


def test_ctrl_c_while_the_forkserver_starts_is_kept_and_never_reaches_the_forkserver(tmp_path: Path) -> None:
    """Before, SIGINT was ignored while the forkserver was spawned (so that it inherited "ignored"): a Ctrl-C in
    that window was lost and the run went on to the end with exit 0. Now it is held pending and raised after,
    and the forkserver still never sees it (no traceback from its preload)."""
    script = (
        "import os, signal, sys, time, multiprocessing.forkserver as fs\n"
        "from mcpfleet.runner.launch import worker\n"
        "real = fs.ensure_running\n"
        "def interrupted_spawn():\n"
        "    os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C landing in the window\n"
        "    real()\n"
        "    os.killpg(0, signal.SIGINT)  # and one to the whole group while the preload runs\n"
        "fs.ensure_running = interrupted_spawn\n"
        "try:\n"
        "    worker.start_forkserver()\n"
        "except KeyboardInterrupt:\n"
        "    pid = fs._forkserver._forkserver_pid\n"
        "    time.sleep(3)\n"
        "    print('raised', os.waitpid(pid, os.WNOHANG)[0] == 0, flush=True)\n"
        "    sys.exit(0)\n"
        "print('lost')\n"
    )
    done = subprocess.run(
        [str(PYTHON), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, start_new_session=True
    )
    assert done.stdout.strip() == "raised True", done
    assert "Traceback" not in done.stderr, done.stderr


def test_a_verifiers_scratch_folder_is_named_for_its_worker_and_swept_once_it_is_gone(tmp_path: Path) -> None:
    """A worker SIGKILLed while its verifier ran left `mcpfleet-verify-*` in /tmp for good (a review found them):
    the scratch folder now names its worker's pid, as trial folders do, so the next run's sweep removes it."""
    import asyncio

    from mcpfleet.runner._util import tmpdirs
    from mcpfleet.runner.environment.verifier import run_verifier

    verify = tmp_path / "verify.py"
    verify.write_text("import os\nprint(os.getcwd())\n")
    result = asyncio.run(run_verifier(verify, {}, [], 30))
    scratch = Path(result.stdout.strip())
    assert scratch.name.startswith(f"mcpfleet-trial-{os.getpid()}-verify-"), scratch
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp_path / f"mcpfleet-trial-{dead.pid}-verify-abcd"
    left.mkdir()
    assert tmpdirs.sweep(tmp_path) == 1 and not left.exists()


SHM = Path("/dev/shm")


def _mapped_semaphores(pids: list[int]) -> set[str]:
    """The named POSIX semaphores (``sem.*`` in /dev/shm) these processes have open."""
    found = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        found |= {line.split("/dev/shm/", 1)[1].split()[0] for line in maps.splitlines() if "/dev/shm/sem." in line}
    return found


def test_a_group_sigkill_leaves_nothing_the_next_run_does_not_sweep(tmp_path: Path) -> None:
    """Chaos audit: `kill -9 -PGID` (a CI cancel, a cgroup OOM kill) also kills multiprocessing's resource
    tracker, which alone unlinks the run's semaphores: 11 `sem.mp-*` stayed in /dev/shm per run, and a `pymp-*`
    folder (the forkserver's socket) in TMPDIR after any SIGKILL, and no run removed them. Both are named for the
    run's pid now, and the next run's sweep (the call `mcpfleet run` makes first) removes them."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = start(write_run(tmp_path, "scripted/oracle?latency=2"), tmp)
    sems: set[str] = set()
    try:
        started = wait_for(lambda: any("mcp-server-filesystem" in c for c in ours(proc.pid, tmp).values()), 120)
        assert started, f"no MCP server came up: {ours(proc.pid, tmp)}"
        sems = _mapped_semaphores(list(ours(proc.pid)))
        named = {s for s in sems if (SHM / s).exists()}  # (fork-context ones are unlinked at once: no name left)
        assert named, f"the run has no named semaphores open: {sems}"
        assert all(s.startswith(f"sem.mcpfleet-{proc.pid}-") for s in named), named
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert wait_for(lambda: not ours(proc.pid, tmp), 20), f"left running: {ours(proc.pid, tmp)}"
        # No tracker is left to unlink them, so they stay until a sweep: this one's, or (under xdist) that of
        # another test's `mcpfleet run`, which sweeps first and may already have removed them (CI saw that).
        left = {s for s in sems if (SHM / s).exists()}
        assert left <= named, left
        mp = [p.name for p in [*tmp.iterdir(), *Path("/tmp").glob(f"mcpfleet-trial-{proc.pid}-mp-*")]]
        assert any(name.startswith(f"mcpfleet-trial-{proc.pid}-mp-") for name in mp), mp
        owners = {int(p.name.split("-")[2]) for p in tmp.iterdir()}  # (reaped, not zombies: those count as alive)
        assert wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in owners), 20), owners
        sweep = "from mcpfleet.runner._util import tmpdirs; tmpdirs.sweep()"
        subprocess.run([str(PYTHON), "-c", sweep], cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp)}, check=True)
        assert not [s for s in sems if (SHM / s).exists()]
        assert not list(tmp.iterdir()) and not list(Path("/tmp").glob(f"mcpfleet-trial-{proc.pid}-*"))
    finally:
        kill_all(ours(proc.pid, tmp))
        proc.kill()
        proc.communicate()
        for s in sems:
            (SHM / s).unlink(missing_ok=True)
