"""Clean-up that a repeated Ctrl-C must not cut short, and leftovers of killed runs that the next run sweeps
(chaos audit, findings 3 and 4). The whole-run cases are in test_processes.py and test_postgres.py."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from mcpfleet.runner._util import tmpdirs
from mcpfleet.runner._util.lifeline import interrupts_held
from mcpfleet.runner.launch.workerpool import WorkerSlots


def _finish_late(seconds: float, marker: str) -> None:
    """A worker's call that ends its trial slowly and says so when done; SIGTERM cannot hurry it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(seconds)
    Path(marker).write_text("done")


def _slots() -> WorkerSlots:
    ctx = multiprocessing.get_context("fork")  # a worker in milliseconds; the launcher's forkserver is not the point
    return WorkerSlots(1, lambda: ProcessPoolExecutor(1, mp_context=ctx))


def _interrupt_me(times: int, every_s: float, over: threading.Event) -> threading.Thread:
    """An impatient user: SIGINT to this process ``times`` times, ``every_s`` apart, until ``over``."""

    def press() -> None:
        for _ in range(times):
            if over.wait(every_s):
                return
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=press, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("first_in_flight", [True, False])
def test_more_ctrl_c_during_the_wait_for_workers_wait_for_them(tmp_path: Path, first_in_flight: bool) -> None:
    """Before, the second Ctrl-C broke out of the wait (workerpool.shutdown) and the run's resources (its
    PostgreSQL cluster) went while workers were still tearing their trials down on them. Now further presses are
    held until the workers are gone; they are the stop already under way (nothing more is raised) or, if none
    was, raised once after the wait."""
    marker = tmp_path / "finished"
    pool = _slots()
    pool.submit(_finish_late, 1.5, str(marker))
    [pid] = pool.pids()
    over = threading.Event()
    presses = _interrupt_me(3, 0.2, over)
    raised = 0
    try:
        try:
            if first_in_flight:
                try:
                    raise KeyboardInterrupt  # the first Ctrl-C, on which the launcher closes the pool
                except KeyboardInterrupt:
                    pool.shutdown()
            else:
                pool.shutdown()
        except KeyboardInterrupt:
            raised += 1
        finished = marker.exists()  # when the wait ended
        over.set()
        while presses.is_alive():
            try:
                presses.join()
            except KeyboardInterrupt:  # (a press the wait did not hold: without the fix)
                raised += 1
    finally:
        over.set()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # the test's own clean-up, whatever the outcome
        pool.shutdown()
    assert finished, "the wait for the worker was cut short"
    assert raised == (0 if first_in_flight else 1)


def test_a_worker_that_does_not_end_is_killed_after_the_limit(tmp_path: Path) -> None:
    """The hold must not make a stop hang: a wedged worker (finding 2's SIGSTOPped one, or one ignoring SIGTERM)
    is SIGKILLed once the limit is over, and the run goes on to remove its resources."""
    pool = _slots()
    pool.submit(_finish_late, 60, str(tmp_path / "never"))
    time.sleep(0.3)
    [pid] = pool.pids()
    rescue = threading.Timer(15, lambda: os.kill(pid, signal.SIGKILL))  # the test's own guard
    rescue.start()
    started = time.monotonic()
    try:
        pool.shutdown(limit_s=1)
    finally:
        rescue.cancel()
    assert time.monotonic() - started < 8
    assert not Path(f"/proc/{pid}").exists()  # (killed, and reaped by the pool)


def test_a_hold_delivers_at_once_after_its_limit() -> None:
    """A clean-up that hangs past the limit: Ctrl-C works again (a KeyboardInterrupt right away)."""
    with pytest.raises(KeyboardInterrupt), interrupts_held(limit_s=0.1):
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # not reached: the signal raises during this sleep
        raise AssertionError("the signal was held past the limit")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sweep_unlinks_the_semaphores_of_dead_runs_only(tmp_path: Path) -> None:
    """A process-group SIGKILL also kills multiprocessing's resource tracker, the only one that unlinks the run's
    POSIX semaphores: 11 were left in /dev/shm per killed run, for good. They are named for the run's pid now."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    shm = tmp_path / "shm"
    shm.mkdir()
    names = {
        "dead": f"sem.mcpfleet-{dead.pid}-abcd1234",
        "live": f"sem.mcpfleet-{os.getpid()}-abcd1234",
        "not ours": "sem.mp-abcd1234",
        "no pid": "sem.mcpfleet-abcd1234",
    }
    for name in names.values():
        (shm / name).write_bytes(b"\0" * 32)
    assert tmpdirs.sweep(tmp_path / "tmp", shm=shm) == 1
    assert sorted(p.name for p in shm.iterdir()) == sorted(v for k, v in names.items() if k != "dead")


@pytest.mark.parametrize("long_tmpdir", [False, True])
def test_multiprocessing_names_this_process_for_the_sweep(tmp_path: Path, long_tmpdir: bool) -> None:
    """What a run's multiprocessing creates under CPython's names (``sem.mp-*``, and ``pymp-*`` holding the
    forkserver's socket) is named for its pid, in a fresh interpreter as `mcpfleet run` is; the folder is in
    TMPDIR unless the socket's path would be too long there (then in /tmp), and still goes at a normal exit."""
    script = (
        "import multiprocessing, os\n"
        "from multiprocessing import util\n"
        "from mcpfleet.runner.launch import worker\n"
        "worker.make_context()\n"
        "lock = multiprocessing.get_context('forkserver').Lock()\n"
        "print(os.getpid(), lock._semlock.name, util.get_temp_dir(), flush=True)\n"
    )
    tmp = tmp_path / ("x" * 60) if long_tmpdir else Path(tempfile.mkdtemp(prefix="mcpfleet-t-", dir="/tmp"))
    tmp.mkdir(exist_ok=True)
    try:
        env = {**os.environ, "TMPDIR": str(tmp)}
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        pid, sem, folder = done.stdout.split()
        assert sem.startswith(f"/mcpfleet-{pid}-"), sem
        assert Path(folder).parent == (Path("/tmp") if long_tmpdir else tmp), folder
        assert Path(folder).name.startswith(f"mcpfleet-trial-{pid}-mp-"), folder
        assert not Path(folder).exists() and not list(tmp.iterdir())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
