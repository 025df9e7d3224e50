"""Hostile verifiers (review findings 4 and 12): a daemon a verifier starts, even one that left the verifier's
session with setsid(), dies when the verifier exits, times out or is cancelled; and a verifier runs in a
scratch folder, so writing to its working directory cannot change the task pack (and so the task's digest).
Also finding 14's report and export cases: damaged run folders and odd output paths, one-line errors."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpfleet.runner.environment.verifier import run_verifier
from mcpfleet.runner.results.records import Timings, Totals, TrialResult, dumps
from mcpfleet.runner.results.store import LocalStore

# Double fork and setsid(): the grandchild is in a session and process group of its own, so no killpg of the
# verifier's group reaches it, and its parent is gone before the verifier exits.
DAEMON = """\
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open({pidfile!r} + ".tmp", "w") as f:  # renamed once written: a pidfile that exists holds the pid
            f.write(str(os.getpid()))
        os.rename({pidfile!r} + ".tmp", {pidfile!r})
        os.closerange(0, 1024)
        time.sleep(600)
        os._exit(0)
    os._exit(0)
deadline = time.monotonic() + 10
while not os.path.exists({pidfile!r}) and time.monotonic() < deadline:
    time.sleep(0.01)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, OSError):
        return False


def gone_soon(pid: int, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def daemon_pid(pidfile: Path) -> int:
    deadline = time.monotonic() + 5
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return int(pidfile.read_text())


def kill(pidfile: Path) -> None:
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def write_verifier(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "verify.py"
    path.write_text(body)
    return path


def test_a_setsid_daemon_dies_when_the_verifier_exits(tmp_path: Path) -> None:
    """Before: the daemon outlived the verifier, the trial and the run (PPID 1)."""
    pidfile = tmp_path / "daemon.pid"
    verify = write_verifier(tmp_path / "task", DAEMON.format(pidfile=str(pidfile)) + "print('done')\nsys.exit(3)\n")
    try:
        result = asyncio.run(run_verifier(verify, {}, [], 30))
        assert result.exit_code == 3 and not result.passed and not result.timed_out
        assert "done" in result.stdout
        pid = daemon_pid(pidfile)
        assert gone_soon(pid), f"the verifier's setsid() daemon {pid} outlived it"
    finally:
        kill(pidfile)


def test_a_setsid_daemon_dies_when_the_verifier_times_out(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    verify = write_verifier(
        tmp_path / "task", DAEMON.format(pidfile=str(pidfile)) + "print('waiting', flush=True)\ntime.sleep(60)\n"
    )
    try:
        start = time.monotonic()
        result = asyncio.run(run_verifier(verify, {}, [], 1.5))
        assert time.monotonic() - start < 8
        assert result.timed_out and result.exit_code is None and not result.passed
        assert "waiting" in result.stdout and "verifier killed after 1.5 s" in result.stderr
        pid = daemon_pid(pidfile)
        assert gone_soon(pid), f"the timed-out verifier's setsid() daemon {pid} survived"
    finally:
        kill(pidfile)


def test_a_setsid_daemon_dies_when_the_trial_is_cancelled(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    verify = write_verifier(tmp_path / "task", DAEMON.format(pidfile=str(pidfile)) + "time.sleep(60)\n")

    async def cancelled() -> None:
        task = asyncio.ensure_future(run_verifier(verify, {}, [], 60))
        deadline = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    try:
        asyncio.run(cancelled())
        pid = daemon_pid(pidfile)
        assert gone_soon(pid, 6), f"the cancelled verifier's setsid() daemon {pid} survived"
    finally:
        kill(pidfile)


def test_the_verifiers_exit_status_is_kept(tmp_path: Path) -> None:
    """The reaper between the runner and verify.py must not blur the verdict: 0, 1 and death by a signal."""
    ok = write_verifier(tmp_path / "ok", "print('all good')\n")
    bad = write_verifier(tmp_path / "bad", "import sys\nsys.exit(1)\n")
    killed = write_verifier(tmp_path / "killed", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    r_ok = asyncio.run(run_verifier(ok, {}, [], 30))
    assert r_ok.passed and r_ok.exit_code == 0 and r_ok.stdout.strip() == "all good"
    assert asyncio.run(run_verifier(bad, {}, [], 30)).exit_code == 1
    r_killed = asyncio.run(run_verifier(killed, {}, [], 30))
    assert r_killed.exit_code == -signal.SIGTERM and not r_killed.passed
    # SIGKILL (the OOM killer) too: its disposition cannot be set, and the reaper once died trying, exiting 1
    # with its own traceback in the verifier's stderr (also on every timeout, whose default status is SIGKILL's).
    oom = write_verifier(tmp_path / "oom", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    r_oom = asyncio.run(run_verifier(oom, {}, [], 30))
    assert r_oom.exit_code == -signal.SIGKILL and "Traceback" not in r_oom.stderr, r_oom.stderr
    slow = write_verifier(tmp_path / "slow", "import time\ntime.sleep(30)\n")
    r_slow = asyncio.run(run_verifier(slow, {}, [], 1))
    assert r_slow.timed_out and "Traceback" not in r_slow.stderr, r_slow.stderr


def test_a_verifier_cannot_write_into_the_task_folder_through_its_cwd(tmp_path: Path) -> None:
    """Before: cwd was the task folder in the pack, so `open('stamp.txt', 'w')` changed the pack (and the task's
    digest: the run could never be resumed). __file__, sys.argv[0] and sys.path[0] (a helper module beside
    verify.py, as MCPMark's verifiers import theirs) still point at the pack."""
    task = tmp_path / "pack" / "filesystem" / "standard" / "cat" / "t1"
    (task.parent).mkdir(parents=True)
    write_verifier(task, "")
    (task / "helper.py").write_text("ANSWER = 42\n")
    verify = write_verifier(
        task,
        "import os, sys\nfrom pathlib import Path\nimport helper\n"
        "assert helper.ANSWER == 42\n"
        "here = Path(__file__).resolve().parent\n"
        "assert (here / 'helper.py').is_file() and Path(sys.argv[0]).resolve().parent == here\n"
        "assert Path(sys.path[0]).resolve() == here, sys.path[0]\n"
        "open('stamp.txt', 'w').write('x')\n"
        "print(os.getcwd())\n",
    )
    before = sorted(p.name for p in task.iterdir())
    result = asyncio.run(run_verifier(verify, {}, [], 30))
    assert result.passed, result.stderr
    assert sorted(p.name for p in task.iterdir()) == before, "the verifier wrote into the task folder"
    scratch = Path(result.stdout.strip())
    assert not scratch.exists(), "the verifier's scratch folder was left behind"


# ---- finding 14: damaged run folders and odd paths in `mcpfleet report` and `mcpfleet export` -------------------
# (Here rather than in a file of their own: this review's new tests live in two files.)

MCPFLEET = Path(sys.executable).parent / "mcpfleet"


def one_run(root: Path) -> Path:
    """A run folder with one finished trial record (written as a trial writes it) and its plan.json, no
    summary.json. (Without plan.json, runner/report/summary.py's still_planned reads run.json itself.)"""
    store = LocalStore(root / "good")
    res = TrialResult(
        run="good",
        trial_id="m.filesystem.standard.cat.t1.1",
        spec_hash="h1",
        model="m",
        litellm_model="openai/x",
        service="filesystem",
        task_id="filesystem/standard/cat/t1",
        attempt=1,
        agent="mcpfleet",
        passed=True,
        failure=None,
        timings=Timings(agent=1.0),
        totals=Totals(turns=2, tool_calls=1),
    )
    store.write_files(res.trial_id, {"meta.json": b"{}"})
    store.commit(res.trial_id, dumps(res.model_dump(mode="json")))
    store.write_json("plan.json", {"run": "good", "spec_hash": "s", "trials": {res.trial_id: res.spec_hash}})
    return store.root


def mcpfleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MCPFLEET), *args], capture_output=True, text=True, timeout=120, cwd="/tmp")


def clean_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode not in (0, None) and "Traceback" not in out, out[-2000:]
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and all(w in errors[0] for w in words), out[-2000:]


@pytest.mark.parametrize(
    ("name", "run_json", "summary"),
    [
        ("run.json a list", "[1, 2]", None),
        ("run.json spec a list", json.dumps({"evalrun": {"spec": [1]}}), None),
        ("run.json attempts a string", json.dumps({"evalrun": {"spec": {"attempts": "3"}}}), None),
        ("summary.json without run", None, json.dumps({"rows": [], "complete": True})),
    ],
)
def test_report_sets_damaged_run_and_summary_files_aside(
    tmp_path: Path, name: str, run_json: str | None, summary: str | None
) -> None:
    """Before: AttributeError / TypeError / KeyError tracebacks. run.json and summary.json are rewritten from
    the records, so a damaged one is set aside and the page is drawn from the records."""
    run = one_run(tmp_path)
    if run_json is not None:
        (run / "run.json").write_text(run_json)
    if summary is not None:
        (run / "summary.json").write_text(summary)
    out = tmp_path / "r.html"
    proc = mcpfleet("report", str(run), "-o", str(out))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, (name, proc.stderr[-2000:])
    assert out.is_file() and "<html" in out.read_text()


def test_report_output_must_be_a_file_in_an_existing_folder(tmp_path: Path) -> None:
    """Before: `-o <a folder>` was an IsADirectoryError traceback leaving a stray .<name>.tmp beside it, and
    `-o /no/such/dir/x.html` created /no/such/dir silently."""
    run = one_run(tmp_path / "runs")
    folder = tmp_path / "out"
    folder.mkdir()
    clean_error(mcpfleet("report", str(run), "-o", str(folder)), "is a folder", "report.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "runs"], "a stray file was left"
    missing = tmp_path / "no" / "such" / "x.html"
    clean_error(mcpfleet("report", str(run), "-o", str(missing)), "no folder", str(missing.parent))
    assert not (tmp_path / "no").exists(), "report created the missing folders"


def test_export_ignores_a_damaged_summary_and_names_a_damaged_record(tmp_path: Path) -> None:
    """Before: summary.json `[1]` was an AttributeError, a record whose task_id is 'x' a ValueError, and a DEST
    that is a file a NotADirectoryError: all tracebacks."""
    run = one_run(tmp_path / "runs")
    (run / "summary.json").write_text("[1]")
    proc = mcpfleet("export", str(run), str(tmp_path / "exp"))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert list((tmp_path / "exp").rglob("meta.json")), "nothing was exported"
    afile = tmp_path / "afile"
    afile.write_text("x")
    clean_error(mcpfleet("export", str(run), str(afile)), "is a file", str(afile))
    assert afile.read_text() == "x"
    result = run / "trials" / "m.filesystem.standard.cat.t1.1" / "result.json"
    result.write_text(json.dumps({**json.loads(result.read_text()), "task_id": "x"}))
    clean_error(mcpfleet("export", str(run), str(tmp_path / "exp2")), "m.filesystem.standard.cat.t1.1", "task_id")
