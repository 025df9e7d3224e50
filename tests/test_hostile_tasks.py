"""Hostile task packs (issue 13, section 2): a verifier cannot hang or outlive its trial, sees a clean
environment, and an initial state cannot smuggle host files into a trial through symbolic links."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from conftest import make_tiny_pack

from mcpfleet.runner.environment.states import copy_state
from mcpfleet.runner.environment.verifier import run_verifier
from mcpfleet.runner.services import get_service
from mcpfleet.runner.spec.task import Task, TaskError
from mcpfleet.runner.tasks.discovery import discover


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes (only its parent's wait is missing).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "verify.py"
    path.write_text("import os, subprocess, sys, time\nfrom pathlib import Path\n" + body)
    return path


def test_a_detached_child_holding_stdout_does_not_hang_the_verifier(tmp_path: Path) -> None:
    """Before: the verifier's stdout was a pipe read to its end, which a child in its own session never gives:
    the trial hung past the verifier timeout (the group kill cannot reach another session)."""
    pidfile = tmp_path / "child.pid"
    verify = script(
        tmp_path,
        f"child = subprocess.Popen(['sleep', '120'], start_new_session=True)\n"
        f"Path({str(pidfile)!r}).write_text(str(child.pid))\n"
        "print('all good', flush=True)\n",
    )
    try:
        start = time.monotonic()
        result = asyncio.run(asyncio.wait_for(run_verifier(verify, {}, [], timeout_s=5), 30))
        assert time.monotonic() - start < 4
        assert result.passed and not result.timed_out
        assert result.stdout.strip() == "all good"
    finally:
        if pidfile.exists():
            kill(int(pidfile.read_text()))


def test_children_left_in_the_verifiers_group_die_when_it_exits(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    verify = script(
        tmp_path,
        f"child = subprocess.Popen(['sleep', '120'], stdout=subprocess.DEVNULL)\n"
        f"Path({str(pidfile)!r}).write_text(str(child.pid))\nsys.exit(3)\n",
    )
    try:
        result = asyncio.run(run_verifier(verify, {}, [], timeout_s=30))
        assert result.exit_code == 3 and not result.passed
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid)
    finally:
        if pidfile.exists():
            kill(int(pidfile.read_text()))


def test_a_hanging_verifier_is_killed_with_its_group_at_the_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    verify = script(
        tmp_path,
        f"child = subprocess.Popen(['sleep', '120'])\nPath({str(pidfile)!r}).write_text(str(child.pid))\n"
        "print('checking', flush=True)\ntime.sleep(120)\n",
    )
    try:
        start = time.monotonic()
        result = asyncio.run(run_verifier(verify, {}, [], timeout_s=1.5))
        assert time.monotonic() - start < 10
        assert result.timed_out and result.exit_code is None and not result.passed
        assert "checking" in result.stdout and "verifier killed after 1.5 s" in result.stderr
        time.sleep(0.2)
        assert not alive(int(pidfile.read_text()))
    finally:
        if pidfile.exists():
            kill(int(pidfile.read_text()))


def test_a_cancelled_trial_kills_its_verifier(tmp_path: Path) -> None:
    pidfile = tmp_path / "v.pid"
    verify = script(tmp_path, f"Path({str(pidfile)!r}).write_text(str(os.getpid()))\ntime.sleep(120)\n")

    async def go() -> None:
        task = asyncio.ensure_future(run_verifier(verify, {}, [], timeout_s=60))
        while not pidfile.exists():
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(asyncio.wait_for(go(), 30))
        time.sleep(0.2)
        assert not alive(int(pidfile.read_text()))
    finally:
        if pidfile.exists():
            kill(int(pidfile.read_text()))


def test_the_verifier_sees_a_clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "canary-s3-secret-1234")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-api-key-5678")
    verify = script(tmp_path, "print('\\n'.join(sorted(os.environ)))\n")
    result = asyncio.run(run_verifier(verify, {"FILESYSTEM_TEST_DIR": "/x"}, [], timeout_s=30))
    names = set(result.stdout.split())
    assert "FILESYSTEM_TEST_DIR" in names and "TZ" in names
    assert not names & {"AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY"}
    assert names <= {"PATH", "HOME", "TMPDIR", "PYTHONPATH", "TZ", "LANG", "LC_CTYPE", "FILESYSTEM_TEST_DIR"} | {
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING",
    }


def tiny_task(tmp_path: Path) -> Task:
    return discover(make_tiny_pack(tmp_path / "pack"))[0]


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_state_link_out_of_the_pack_is_refused(tmp_path: Path, kind: str) -> None:
    """Before: copytree followed the link and copied host files into the trial's state."""
    task = tiny_task(tmp_path)
    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("host credentials\n")
    (task.state_dir / "leak").symlink_to(secret if kind == "file" else secret.parent)
    with pytest.raises(TaskError, match="outside .*self-contained"):
        copy_state(task.state_dir, tmp_path / "trial", task.state_times)
    assert not [p for p in (tmp_path / "trial").rglob("*") if p.is_file() and p.read_text() == "host credentials\n"]
    with pytest.raises(TaskError, match="outside"):
        get_service("filesystem").materialise(task, tmp_path / "pod-state")


def test_a_state_folder_that_is_a_link_out_of_the_pack_is_refused(tmp_path: Path) -> None:
    task = tiny_task(tmp_path)
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "secret.txt").write_text("host\n")
    real = task.state_dir.with_name("tiny-real")
    task.state_dir.rename(real)
    task.state_dir.symlink_to(outside)
    with pytest.raises(TaskError, match="outside"):
        copy_state(task.state_dir, tmp_path / "trial")


def test_links_inside_the_state_are_copied_and_loops_refused(tmp_path: Path) -> None:
    task = tiny_task(tmp_path)
    (task.state_dir / "alias.txt").symlink_to("keep.txt")
    n = copy_state(task.state_dir, tmp_path / "trial", task.state_times)
    assert n == 3 and (tmp_path / "trial" / "alias.txt").read_text() == "keep me\n"
    assert not (tmp_path / "trial" / "alias.txt").is_symlink()  # a copy, not a link back into the pack
    (task.state_dir / "notes" / "loop").symlink_to("..")
    with pytest.raises(TaskError, match="loop"):
        copy_state(task.state_dir, tmp_path / "trial2", task.state_times)


def test_a_postgres_state_file_linking_out_of_the_pack_is_refused(tmp_path: Path) -> None:
    tiny_task(tmp_path)
    states = tmp_path / "pack" / "postgres" / "states"
    states.mkdir(parents=True)
    (tmp_path / "host.sql").write_text("-- host file\n")
    (states / "tiny.sql").symlink_to(tmp_path / "host.sql")
    pg_task = Task(
        "postgres", "standard", "tiny", "t", tmp_path / "pack" / "postgres" / "standard" / "tiny" / "t", states / "tiny"
    )
    with pytest.raises(TaskError, match="outside"):
        get_service("postgres").materialise(pg_task, tmp_path / "pod-state")
    assert not (tmp_path / "pod-state" / "tiny.sql").exists()
