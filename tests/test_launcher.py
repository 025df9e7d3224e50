"""``mcpfleet run`` end to end: real warm workers, the real scripted model server, the real filesystem MCP
server and real verifiers. Scores, concurrency caps, interleaving, resume, refusals, infra retries,
Ctrl-C, SIGTERM and credentials.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing.forkserver
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, cast

import pytest
import yaml
from conftest import REPO, make_tiny_pack

from mcpfleet.runner.launch.launcher import RunRefused, execute
from mcpfleet.runner.launch.worker import make_context
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.results.records import TrialResult, dumps, now_iso
from mcpfleet.runner.spec.load import SpecError, load_evalrun

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
ORACLE = {"name": "oracle", "model": "scripted/oracle"}
NOOP = {"name": "noop", "model": "scripted/noop"}
TASK0 = "filesystem/standard/tiny/move_todo_0"


# --------------------------------------------------------------------------------------------- helpers


def write_run(
    tmp_path: Path,
    name: str,
    models: list[dict[str, Any]],
    *,
    file: str | None = None,
    tasks: dict[str, Any] | None = None,
    **spec: Any,
) -> Path:
    """An EvalRun YAML in tmp_path over a 3-task tiny pack (made once per tmp_path); output in tmp_path/runs."""
    pack = tmp_path / "pack"
    if not pack.exists():
        make_tiny_pack(pack, tasks=3)
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name},
        "spec": {
            "models": models,
            "tasks": {"path": str(pack), **(tasks or {})},
            "output": {"uri": str(tmp_path / "runs")},
            **spec,
        },
    }
    path = tmp_path / (file or f"{name}.yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# The MCP server cannot start in any trial (its folder is wrong): an infrastructure error that preflight does not
# see (a broken state, this test's cause before, is now refused up front), fixed by dropping the variable.
NO_SERVERS = {"MCPFLEET_SERVERS_DIR": "/nonexistent"}


def run_broken(path: Path, broken: bool = True) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    """`mcpfleet run` of ``path`` (its output in tmp_path/runs), with every MCP server start failing when
    ``broken``; returns the process, summary.json and the run folder."""
    out = cli("run", str(path), "--no-progress", env={**os.environ, **(NO_SERVERS if broken else {})}, timeout=300)
    root = path.parent / "runs" / yaml.safe_load(path.read_text())["metadata"]["name"]
    return out, json.loads((root / "summary.json").read_text()), root


def run_file(path: Path, **kw: Any) -> tuple[dict[str, Any], Path]:
    summary, root = execute(load_evalrun(path), path.parent, show_progress=False, **kw)
    assert isinstance(root, Path)  # write_run's output is a local folder, not an s3:// URI
    return summary, root


def results(root: Path) -> dict[str, dict[str, Any]]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((root / "trials").glob("*/result.json"))}


def mtimes(root: Path) -> dict[str, int]:
    return {p.parent.name: p.stat().st_mtime_ns for p in (root / "trials").glob("*/result.json")}


def row(summary: dict[str, Any], model: str) -> dict[str, Any]:
    rows = [r for r in summary["rows"] if r["model"] == model]
    assert len(rows) == 1, summary["rows"]
    return rows[0]


def ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def max_overlap(recs: list[dict[str, Any]]) -> int:
    """Most trials in flight at once, from the records' [started_at, finished_at] intervals."""
    events = sorted(
        [(ts(r["started_at"]), 1) for r in recs] + [(ts(r["finished_at"]), -1) for r in recs],
        key=lambda e: (e[0], e[1]),
    )  # at equal times an end comes before a start
    cur = peak = 0
    for _, delta in events:
        cur += delta
        peak = max(peak, cur)
    return peak


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or dict(os.environ),
        stdin=subprocess.DEVNULL,
    )


def flat(text: str) -> str:
    """Rich wraps long lines at 80 columns when not on a terminal: compare text with whitespace folded."""
    return " ".join(text.split())


class _ForkServerState(Protocol):
    """CPython's ForkServer keeps the server's pid in a private attribute that typeshed does not declare."""

    _forkserver_pid: int | None


def ensure_forkserver() -> int:
    """Start the (process-wide) forkserver the launcher uses, so a test can change os.environ after it."""
    make_context()
    multiprocessing.forkserver.ensure_running()
    server = cast(_ForkServerState, multiprocessing.forkserver._forkserver)  # noqa: SLF001 - test introspection
    pid = server._forkserver_pid
    assert pid
    return pid


def proc_table() -> list[tuple[int, int, int, str]]:
    """(pid, ppid, session id, cmdline) of every live process."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        out.append((int(d.name), int(fields[1]), int(fields[3]), cmd))
    return out


# ------------------------------------------------------------------------------------ scores and layout


def test_two_models_scores_records_and_interleaving(tmp_path: Path) -> None:
    path = write_run(tmp_path, "two", [ORACLE, NOOP], attempts=2, concurrency={"total": 3})
    summary, root = run_file(path)

    assert root == tmp_path / "runs" / "two"
    assert (summary["trials_planned"], summary["trials_recorded"], summary["complete"]) == (12, 12, True)
    assert json.loads((root / "summary.json").read_text())["rows"] == summary["rows"]
    oracle, noop = row(summary, "oracle"), row(summary, "noop")
    assert (oracle["pass_at_1"], oracle["pass_at_k"], oracle["pass_hat_k"], oracle["trials"]) == (1.0, 1.0, 1.0, 6)
    assert oracle["failures"] == {}
    assert (noop["pass_at_1"], noop["pass_at_k"], noop["pass_hat_k"], noop["trials"]) == (0.0, 0.0, 0.0, 6)
    assert noop["failures"] == {"premature_stop": 6}

    folders = sorted(p.name for p in (root / "trials").iterdir())
    assert len(folders) == 12
    recs = results(root)
    assert sorted(recs) == folders  # every folder has its result.json
    assert {(r["model"], r["attempt"]) for r in recs.values()} == {(m, a) for m in ("oracle", "noop") for a in (1, 2)}
    assert all(r["infra_attempts"] == 1 and r["run"] == "two" for r in recs.values())
    for folder in folders:  # MCPMark-compatible files next to result.json
        assert (root / "trials" / folder / "messages.json").is_file()
        assert (root / "trials" / folder / "meta.json").is_file()
    run_json = json.loads((root / "run.json").read_text())
    assert (run_json["run"], run_json["trials"], run_json["spec_hash"]) == ("two", 12, summary["spec_hash"])

    # Models interleaved: the first trials to start (3 slots) cover both models, not 3 oracles in a row.
    first = sorted(recs.values(), key=lambda r: ts(r["started_at"]))[:3]
    assert {r["model"] for r in first} == {"oracle", "noop"}


def test_plan_alternates_models_task_major(tmp_path: Path) -> None:
    path = write_run(tmp_path, "order", [ORACLE, NOOP], attempts=2)
    trials = plan(load_evalrun(path), tmp_path)
    assert [t.model.name for t in trials] == ["oracle", "noop"] * 6
    assert [t.attempt for t in trials] == [1, 1, 2, 2] * 3  # a task's attempts side by side
    assert [t.task_id.rsplit("_", 1)[1] for t in trials[::4]] == ["0", "1", "2"]  # equal sizes: by id


def test_plan_puts_the_largest_tasks_first() -> None:
    from mcpfleet.runner.plan.expand import task_weight
    from mcpfleet.runner.spec.load import parse_evalrun

    run = parse_evalrun(
        {
            "apiVersion": "mcpfleet.io/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "lpt"},
            "spec": {
                "models": [{"name": "m", "model": "scripted/oracle"}],
                "attempts": 2,
                "tasks": {"services": ["filesystem"]},
            },
        }
    )
    trials = plan(run, REPO)
    from mcpfleet.runner.tasks.discovery import discover

    weights = {t.id: task_weight(t) for t in discover(REPO / "tasks")}
    sizes = [weights[t.task_id] for t in trials]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]


# ----------------------------------------------------------------------------------------- concurrency


def test_total_concurrency_is_reached_and_never_exceeded(tmp_path: Path) -> None:
    slow = {"name": "slow", "model": "scripted/oracle?latency=0.3"}
    path = write_run(tmp_path, "total2", [slow], concurrency={"total": 2})
    summary, root = run_file(path)
    recs = list(results(root).values())
    assert len(recs) == 3 and all(r["passed"] for r in recs)
    assert max_overlap(recs) == 2  # 1 would be a serial launcher, 3 an ignored cap


def test_per_model_concurrency_is_honoured_while_models_run_side_by_side(tmp_path: Path) -> None:
    a = {"name": "a", "model": "scripted/oracle?latency=0.3"}
    b = {"name": "b", "model": "scripted/oracle?latency=0.3"}
    path = write_run(
        tmp_path, "permodel", [a, b], tasks={"exclude": ["*/move_todo_2"]}, concurrency={"total": 4, "perModel": 1}
    )
    summary, root = run_file(path)
    recs = list(results(root).values())
    assert len(recs) == 4 and all(r["passed"] for r in recs)
    for model in ("a", "b"):
        assert max_overlap([r for r in recs if r["model"] == model]) == 1
    assert max_overlap(recs) == 2  # the two models did run at the same time


# ---------------------------------------------------------------------------------------------- resume


def test_resume_runs_only_unfinished_trials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_run(tmp_path, "resume", [ORACLE, NOOP], concurrency={"total": 3})
    summary, root = run_file(path)
    assert summary["complete"] and summary["trials_recorded"] == 6
    before = results(root)
    first_mtimes = mtimes(root)
    first_end = max(ts(r["finished_at"]) for r in before.values())

    gone = ["oracle.filesystem.standard.tiny.move_todo_1.1", "noop.filesystem.standard.tiny.move_todo_2.1"]
    for trial in gone:
        (root / "trials" / trial / "result.json").unlink()  # as if interrupted before the commit
    stray = root / "trials" / "oracle.filesystem.standard.tiny.half_written.1"
    stray.mkdir()
    (stray / "messages.json").write_text("[")
    capsys.readouterr()

    summary, _ = run_file(path)
    assert "discarded 3 unfinished trial folders" in capsys.readouterr().out
    assert (summary["trials_planned"], summary["trials_recorded"], summary["complete"]) == (6, 6, True)
    assert not stray.exists()
    after = results(root)
    assert sorted(after) == sorted(before)
    second_mtimes = mtimes(root)
    for trial in before:
        if trial in gone:
            assert ts(after[trial]["started_at"]) > first_end, trial
        else:
            assert second_mtimes[trial] == first_mtimes[trial], trial
            assert after[trial] == before[trial]
    assert row(summary, "oracle")["pass_at_1"] == 1.0 and row(summary, "noop")["pass_at_1"] == 0.0

    summary, _ = run_file(path)  # nothing left to do
    assert summary["complete"] and mtimes(root) == second_mtimes


# --------------------------------------------------------------------------------------- spec changes


@pytest.mark.parametrize("length", [5, 60, 61, 62, 63])
def test_new_run_names_stay_dns_labels(tmp_path: Path, length: int) -> None:
    """`--new-run` on a 63-character name wrote `<name>-2`, 65 characters: a run name no spec may have (it names
    pods and labels), which the operator would refuse and `--new-run` again would extend."""
    from mcpfleet.runner.launch.launcher import fresh_name
    from mcpfleet.runner.results.store import store_config
    from mcpfleet.runner.spec.evalrun import DNS_LABEL

    base = ("r" * (length - 2)) + "-x" if length > 2 else "r" * length
    config = store_config(str(tmp_path / "runs"), base, tmp_path)
    seen = [base]
    for _ in range(11):  # up to -12: the suffix grows a digit
        name = fresh_name(base, config)
        assert len(name) <= 63 and re.match(DNS_LABEL, name) and name not in seen, (name, seen)
        assert name.startswith(base[: 63 - len(name.rsplit("-", 1)[1]) - 1].rstrip("-"))
        seen.append(name)
        config.with_name(name).open().write_json("run.json", {})  # that run exists now
    assert seen[1].endswith("-2") and seen[-1].endswith("-12")


def test_changed_spec_is_refused_new_run_and_more_attempts_are_not(tmp_path: Path) -> None:
    base: dict[str, Any] = dict(tasks={"include": [f"*/{TASK0.rsplit('/', 1)[1]}"]}, limits={"maxTurns": 20})
    path = write_run(tmp_path, "change", [ORACLE], file="run.yaml", **base)
    summary, root = run_file(path)
    assert summary["complete"] and summary["trials_recorded"] == 1
    first = mtimes(root)
    run_json = (root / "run.json").read_bytes()

    changed = write_run(tmp_path, "change", [ORACLE], file="turns.yaml", **{**base, "limits": {"maxTurns": 21}})
    with pytest.raises(RunRefused) as info:
        run_file(changed)
    msg = str(info.value)
    assert "run 'change'" in msg and str(root) in msg
    assert "new metadata.name" in msg and "--new-run" in msg
    other_model = write_run(
        tmp_path, "change", [{"name": "oracle", "model": "scripted/oracle?latency=0.01"}], file="model.yaml", **base
    )
    with pytest.raises(RunRefused, match="--new-run"):
        run_file(other_model)
    assert mtimes(root) == first and (root / "run.json").read_bytes() == run_json  # nothing touched

    # The CLI: exit code 2, the message on stderr, no traceback.
    out = cli("run", str(changed), "--no-progress")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    err = flat(out.stderr)
    assert "run 'change'" in err and "new metadata.name" in err and "--new-run" in err

    # A finished CLI run leaves nothing in $TMPDIR: each worker's spare MCP server (started in a fresh
    # mcpfleet-trial-* folder for its next trial) is closed at worker exit. An atexit hook never ran in
    # forkserver children, which leave through os._exit: one folder per worker leaked before 5204db7.
    tmpdir = Path(tempfile.mkdtemp(prefix="mcpf-"))
    try:
        out = cli("run", str(changed), "--no-progress", "--new-run", env={**os.environ, "TMPDIR": str(tmpdir)})
        assert out.returncode == 0, out.stderr
        assert not sorted(p.name for p in tmpdir.iterdir())
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    fresh = tmp_path / "runs" / "change-2"
    recs = results(fresh)
    assert list(recs) == ["oracle.filesystem.standard.tiny.move_todo_0.1"]
    assert recs["oracle.filesystem.standard.tiny.move_todo_0.1"]["run"] == "change-2"
    assert json.loads((fresh / "summary.json").read_text())["complete"] is True
    assert json.loads((fresh / "run.json").read_text())["evalrun"]["spec"]["limits"]["maxTurns"] == 21
    assert mtimes(root) == first  # the old run is untouched

    # More attempts only add trials: the recorded attempt stays, the new one runs.
    more = write_run(tmp_path, "change", [ORACLE], file="more.yaml", attempts=2, **base)
    summary, _ = run_file(more)
    assert (summary["trials_planned"], summary["trials_recorded"], summary["complete"]) == (2, 2, True)
    one, two = "oracle.filesystem.standard.tiny.move_todo_0.1", "oracle.filesystem.standard.tiny.move_todo_0.2"
    assert mtimes(root)[one] == first[one]
    assert results(root)[two]["passed"] is True
    assert row(summary, "oracle")["pass_hat_k"] == 1.0


def test_edited_task_refusal_does_not_claim_a_spec_change(tmp_path: Path) -> None:
    """A task edited after its trials were recorded (here its verifier) changes their hashes but not the
    run's spec hash; the refusal then claimed a 'different spec (was H, now H)' with the same H twice."""
    path = write_run(tmp_path, "edited", [ORACLE], tasks={"include": ["*/move_todo_0"]})
    summary, root = run_file(path)
    assert summary["complete"]
    verify = tmp_path / "pack" / TASK0 / "verify.py"
    verify.write_text(verify.read_text() + "# stricter now\n")
    with pytest.raises(RunRefused) as info:
        run_file(path)
    msg = str(info.value)
    assert "oracle.filesystem.standard.tiny.move_todo_0.1" in msg
    h = summary["spec_hash"]
    assert f"(was {h}, now {h})" not in msg


# ------------------------------------------------------------------------------------- infra retries


def test_infra_errors_are_retried_up_to_the_limit_and_again_on_rerun(tmp_path: Path) -> None:
    tasks = {"include": ["*/move_todo_0"]}
    retried = write_run(tmp_path, "retried", [ORACLE], tasks=tasks, retries={"limit": 2, "backoffSeconds": 0})
    _, summary, root = run_broken(retried)
    (rec,) = results(root).values()
    assert (rec["passed"], rec["failure"], rec["infra_attempts"]) == (False, "infra_error", 3)
    assert "MCP server" in rec["error"] and "not found" in rec["error"]
    assert row(summary, "oracle")["failures"] == {}  # measured nothing of the model: not a failure of it
    assert row(summary, "oracle")["not_scored"] == {"infra_error": 1} and row(summary, "oracle")["pass_at_1"] is None

    once = write_run(tmp_path, "once", [ORACLE], tasks=tasks, retries={"limit": 0, "backoffSeconds": 0})
    _, _, root = run_broken(once)
    (rec,) = results(root).values()
    assert (rec["failure"], rec["infra_attempts"]) == ("infra_error", 1)

    # An infra error is not an outcome: a rerun of the same file tries the trial again.
    _, _, root = run_broken(once)
    (again,) = results(root).values()
    assert again["failure"] == "infra_error"
    assert ts(again["started_at"]) > ts(rec["finished_at"])


def test_a_second_run_of_a_folder_in_use_is_refused_naming_the_first(tmp_path: Path) -> None:
    """Two `mcpfleet run`s of one run folder would each run every unfinished trial (over the concurrency, and
    one may remove the trial folders the other is writing): the second is refused while the first holds the
    folder's lock, which goes with its process whatever ends it."""
    path = write_run(tmp_path, "busy", [ORACLE])
    root = tmp_path / "runs" / "busy"
    root.mkdir(parents=True)
    holder = subprocess.Popen(  # holds the run folder's lock as a running `mcpfleet run` does, then is killed
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(root / '.mcpfleet.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, b'%d' % os.getpid()); print('held', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        refused = cli("run", str(path), "--no-progress")
        assert refused.returncode == 2 and not (root / "trials").exists(), refused.stdout
        assert f"another `mcpfleet run` (pid {holder.pid}) is running this run" in flat(refused.stderr), refused.stderr
    finally:
        holder.kill()
        holder.wait()
    summary, _ = run_file(path)  # the lock went with its holder (SIGKILL): the run goes ahead
    assert summary["complete"] and summary["trials_recorded"] == 3


def test_a_run_that_scored_no_trial_exits_5_naming_the_kinds(tmp_path: Path) -> None:
    """Every trial an infra_error (here an MCP server that cannot start) exited 0 with `complete: true`, as if it
    had measured something."""
    tasks = {"include": ["*/move_todo_[01]"]}
    path = write_run(tmp_path, "unscored", [ORACLE], tasks=tasks, retries={"limit": 0})
    out, _, _ = run_broken(path)
    assert out.returncode == 5, (out.stdout, out.stderr)
    assert "no trial was scored (2 infra_error): the run measured nothing" in flat(out.stderr)

    out, summary, _ = run_broken(path, broken=False)
    assert out.returncode == 0 and summary["complete"], out.stderr  # the unscored trials ran again, and scored


def test_trials_whose_records_cannot_be_stored_make_the_run_fail(tmp_path: Path) -> None:
    """A run whose records cannot be written (a full disk; here a file where the trials folder belongs) must not
    end with exit 0 and an empty table: exit 4, the trials named with the cause."""
    path = write_run(tmp_path, "nostore", [ORACLE], tasks={"include": ["*/move_todo_0"]}, retries={"limit": 0})
    (tmp_path / "runs" / "nostore").mkdir(parents=True)
    (tmp_path / "runs" / "nostore" / "trials").write_text("not a folder")
    out = cli("run", str(path), "--no-progress")
    assert out.returncode == 4, (out.stdout, out.stderr)
    assert "1 trial has no record" in flat(out.stderr)
    assert "oracle.filesystem.standard.tiny.move_todo_0.1: " in out.stderr and "Not a directory" in out.stderr


def count_verifier_runs(pack: Path, log: Path) -> None:
    """Make every verify.py of ``pack`` append a line to ``log``: one line per trial execution."""
    for verify in pack.glob("*/*/*/*/verify.py"):
        verify.write_text(f"open({str(log)!r}, 'a').write('ran\\n')\n" + verify.read_text())


def test_a_store_that_cannot_write_stops_the_launches_and_retries_nothing(tmp_path: Path) -> None:
    """The chaos audit: with a read-only or full disk, every trial ran, failed to store its record and was
    retried as a dead worker, so each remaining trial of the plan ran 1 + retries.limit times (model paid each
    time) before exit 4. A record that cannot be stored is not retried and stops the launches (the store is
    broken for every trial); the trials in flight finish, and the run exits 4 naming the cause."""
    path = write_run(
        tmp_path, "ro", [NOOP], attempts=2, concurrency={"total": 2}, retries={"limit": 2, "backoffSeconds": 0}
    )
    log = tmp_path / "verifier-runs.log"
    count_verifier_runs(tmp_path / "pack", log)
    (tmp_path / "runs" / "ro").mkdir(parents=True)
    (tmp_path / "runs" / "ro" / "trials").write_text("not a folder")  # every record write fails (ENOTDIR)
    out = cli("run", str(path), "--no-progress")
    assert out.returncode == 4, (out.stdout, out.stderr)
    assert len(log.read_text().splitlines()) == 2, "trials ran after the store failed, or were retried"  # 2 in flight
    err = flat(out.stderr)
    assert "6 trials have no record" in err
    shown = re.findall(r"(noop\.\S+): (not stored|not run): ([^\n]*)", out.stderr)
    assert [kind for _, kind, _ in shown] == ["not stored", "not stored", "not run"], out.stderr
    assert all("NotADirectoryError" in why and "Not a directory" in why for _, _, why in shown), out.stderr
    summary = json.loads((tmp_path / "runs" / "ro" / "summary.json").read_text())
    assert summary["trials_recorded"] == 0 and not summary["complete"] and not summary.get("stopped")


def test_a_rerun_takes_damaged_records_as_unfinished_and_ignores_stray_files(tmp_path: Path) -> None:
    """Hands in the output folder (a note in trials/, a record of wrong types, one that is not UTF-8, a copied
    trial folder, a garbage run.json) crashed the rerun or counted a trial twice: the damaged trials run again,
    the rest are kept, a copy counts for nothing."""
    path = write_run(tmp_path, "damaged", [ORACLE])
    _, root = run_file(path)
    before = results(root)
    first, second, third = sorted(before)
    (root / "trials" / "NOTES.txt").write_text("my notes")
    (root / "trials" / first / "result.json").write_text(json.dumps({**before[first], "passed": "false"}))
    (root / "trials" / second / "result.json").write_bytes(b"\xff\xfe{")
    (root / "run.json").write_text("{ not json")
    shutil.copytree(root / "trials" / third, root / "trials" / f"{third}.bak")  # a copy is no second trial
    summary, root = run_file(path)
    after = results(root)
    assert summary["complete"] and summary["trials_recorded"] == 3 and all(r["passed"] is True for r in after.values())
    assert (root / "trials" / f"{third}.bak" / "result.json").exists()  # the user's copy is left alone
    assert after[third] == before[third]  # kept, not run again
    assert ts(after[first]["started_at"]) > ts(before[first]["finished_at"])  # run again
    assert ts(after[second]["started_at"]) > ts(before[second]["finished_at"])
    assert json.loads((root / "run.json").read_text())["run"] == "damaged"


def test_retry_waits_double_up_to_an_hour_and_an_endless_backoff_is_refused(tmp_path: Path) -> None:
    from mcpfleet.runner.spec.evalrun import retry_wait

    assert [retry_wait(10, n) for n in (1, 2, 3)] == [10, 20, 40]
    assert retry_wait(10, 20) == 3600  # not 10 * 2**19 s (61 days) before the last of 20 retries
    path = write_run(tmp_path, "endless", [ORACLE], retries={"limit": 1, "backoffSeconds": float("inf")})
    with pytest.raises(SpecError, match="spec.retries.backoffSeconds"):
        load_evalrun(path)


def test_rerun_after_fixing_the_infra_cause_retries_instead_of_refusing(tmp_path: Path) -> None:
    """Mending the task changes its digest; an infra_error record measured nothing, so it must be rerun, not
    reported as a conflicting outcome (which refused the run before 5204db7)."""
    path = write_run(tmp_path, "fixlater", [ORACLE], tasks={"include": ["*/move_todo_0"]}, retries={"limit": 0})
    _, _, root = run_broken(path)
    (rec,) = results(root).values()
    assert rec["failure"] == "infra_error" and "not found" in rec["error"]
    before = rec["spec_hash"]

    state = next((tmp_path / "pack" / "filesystem" / "states").iterdir())  # the fix touches the task's state
    (state / "mended.txt").write_text("mended\n")
    out, summary, _ = run_broken(path, broken=False)
    (rec,) = results(root).values()
    assert rec["passed"] is True and summary["complete"], out.stderr
    assert rec["spec_hash"] != before  # the task changed: its old record would conflict, were it scored


def test_missing_states_refuse_the_run_before_any_trial_and_validate_names_them(tmp_path: Path) -> None:
    """A wrong statesPath made every trial of the task an infra_error after its retries, and the run exited 0
    with nothing measured; validate said valid."""
    tasks = {"statesPath": str(tmp_path / "nowhere"), "include": ["*/move_todo_[01]"]}
    path = write_run(tmp_path, "nostates", [ORACLE], tasks=tasks)
    with pytest.raises(SpecError) as info:
        run_file(path)
    text = str(info.value)
    assert "spec.tasks: 2 selected tasks have no initial state; set tasks.statesPath" in text
    assert text.count(str(tmp_path / "nowhere")) == 2  # each task named with the folder it looked for
    assert not (tmp_path / "runs" / "nostates").exists()  # nothing ran, nothing was written

    cli = subprocess.run([str(MCPFLEET), "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and "have no initial state" in cli.stderr and "Traceback" not in cli.stderr


def test_any_run_sweeps_a_killed_postgres_runs_cluster_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGKILLed PostgreSQL run's cluster folder (~200 MB of RAM in /dev/shm) stayed until the next PostgreSQL
    run; every local run now sweeps it, a filesystem one included, and leaves a live run's folder alone."""
    from mcpfleet.runner.services import pgcluster

    monkeypatch.setenv(pgcluster.PG_DIR_ENV, str(tmp_path / "pg"))
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = pgcluster.new_run_folder(None)
    (stale / "data.bin").write_bytes(b"x" * 1024)
    (stale / "owner.json").write_text(json.dumps({"pid": dead.pid, "start": "0", "uid": os.geteuid()}))
    live = pgcluster.new_run_folder(None)  # this process's: alive
    summary, _ = run_file(write_run(tmp_path, "sweeps", [ORACLE], tasks={"include": ["*/move_todo_0"]}))
    assert summary["complete"] and not stale.exists() and live.exists()

    monkeypatch.setenv(pgcluster.PG_DIR_ENV, str(tmp_path / "never"))
    run_file(write_run(tmp_path, "nopg", [ORACLE], tasks={"include": ["*/move_todo_0"]}))
    assert not (tmp_path / "never").exists()  # no folder made for a service the run does not use


@pytest.mark.parametrize("victim", ["worker-sigkill", "worker-sigterm", "forkserver-sigkill"])
def test_a_worker_killed_mid_run_costs_its_own_trial_only(tmp_path: Path, victim: str) -> None:
    """An abrupt worker death (an OOM kill) is an infra error of the trial it held, retried in a fresh worker
    (before 5204db7 BrokenProcessPool escaped execute() as a traceback); the trial in flight on the other
    worker carries on untouched (one shared ProcessPoolExecutor broke as a whole and ran it again too).

    A review found two more ways to stop workers: a worker SIGTERMed from outside (earlyoom, a supervisor)
    cancelled its trial and then refused every later one, which the scheduler dropped unrecorded; a killed
    forkserver (its workers stop with it) ended the run with "Aborted." (EOFError starting the next worker). Both
    now cost only the trials in flight, retried in fresh workers from a new forkserver."""
    forkserver = ensure_forkserver()
    slow = {"name": "slow", "model": "scripted/oracle?latency=0.3"}
    path = write_run(
        tmp_path,
        "killed",
        [slow],
        tasks={"include": ["*/move_todo_[01]"]},
        concurrency={"total": 2},
        retries={"limit": 2, "backoffSeconds": 0},
    )
    killed: list[int] = []

    def kill_one_worker() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            workers = [p for p, ppid, _, _ in proc_table() if ppid == forkserver]
            if len(workers) == 2:
                time.sleep(1.0)  # both are mid-trial (a trial takes ~2 s)
                pid = forkserver if victim == "forkserver-sigkill" else workers[0]
                os.kill(pid, signal.SIGTERM if victim == "worker-sigterm" else signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    try:
        summary, root = run_file(path)
    finally:
        killer.join()
    assert killed, "no worker to kill was seen"
    assert summary["complete"] and row(summary, "slow")["pass_at_1"] == 1.0
    attempts = sorted(r["infra_attempts"] for r in results(root).values())
    if victim == "forkserver-sigkill":  # both workers stop with it (one may have just finished its trial)
        assert len(attempts) == 2 and attempts[-1] == 2 and attempts[0] in (1, 2), attempts
    else:
        assert attempts == [1, 2]
    # A SIGKILLed worker could not remove its trial's folder; the run does once its workers are gone.
    assert not list(Path(tempfile.gettempdir()).glob(f"mcpfleet-trial-{killed[0]}-*"))


def test_a_wedged_worker_is_killed_at_its_trials_deadline_and_the_trial_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chaos audit: a worker SIGSTOPped mid-trial (as one stuck on a hung mount or in a deadlock) held the
    run for ever, every timeout being the worker's own. Past the trial's deadline (agent + verifier timeouts +
    grace, as a pod's activeDeadlineSeconds) the launcher SIGKILLs the worker and what runs under it (its MCP
    server), and the trial is retried in a fresh worker as an infrastructure error."""
    from proctree import children

    from mcpfleet.runner.launch import launcher

    monkeypatch.setattr(launcher, "TRIAL_GRACE_SECONDS", 3)  # deadline 5 + 5 + 3 s; the trial takes ~2 s
    forkserver = ensure_forkserver()
    slow = {"name": "slow", "model": "scripted/oracle?latency=0.3"}
    path = write_run(
        tmp_path,
        "wedged",
        [slow],
        tasks={"include": ["*/move_todo_0"]},
        concurrency={"total": 1},
        limits={"timeoutSeconds": 5, "verifierTimeoutSeconds": 5},
        retries={"limit": 1, "backoffSeconds": 0},
        provider={"trialRetryBudget": 0},  # no provider time to give back: the deadline is the sum above
    )
    stopped: list[int] = []  # the worker, then what ran under it
    finished = threading.Event()

    def wedge_the_worker() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stopped:
            workers = [p for p, ppid, _, _ in proc_table() if ppid == forkserver]
            if workers and children(workers[0]):  # its MCP server is up: mid-trial
                time.sleep(0.5)
                os.kill(workers[0], signal.SIGSTOP)
                stopped.extend([workers[0], *children(workers[0])])
            time.sleep(0.05)
        if stopped and not finished.wait(45):  # no deadline (before): let it go, so the test fails, not hangs
            os.kill(stopped[0], signal.SIGCONT)

    wedger = threading.Thread(target=wedge_the_worker)
    wedger.start()
    start = time.monotonic()
    try:
        summary, root = run_file(path)
    finally:
        finished.set()
        wedger.join()
    assert len(stopped) >= 2, f"no worker with an MCP server was seen: {stopped}"
    assert time.monotonic() - start < 40
    (rec,) = results(root).values()
    assert (rec["passed"], rec["infra_attempts"]) == (True, 2), rec
    assert summary["complete"] and row(summary, "slow")["pass_at_1"] == 1.0
    gone = [p for p in stopped if Path(f"/proc/{p}").exists() and "Z" not in proc_state(p)]
    assert not gone, f"left running: {gone}"


def proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


class _WedgedPool:
    """Workers that never answer until killed: a kill fails the call as a dead worker's does."""

    def __init__(self) -> None:
        self.submitted = 0
        self.killed = 0

    def submit(self, fn: Any, item: Any) -> Future[Any]:
        self.submitted += 1
        return Future()

    def kill(self, fut: Future[Any]) -> list[int]:
        from concurrent.futures.process import BrokenProcessPool

        self.killed += 1
        fut.set_exception(BrokenProcessPool("a worker died"))
        return [1]


def test_a_trial_past_its_deadline_is_an_infra_error_naming_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each try gets its own deadline; a try killed at it is retried up to retries.limit, and the trial's error
    says which deadline it ran past (not a bare "worker failed: BrokenProcessPool")."""
    from mcpfleet.runner.launch import launcher
    from mcpfleet.runner.launch.launcher import RunState, Scheduler
    from mcpfleet.runner.launch.workerpool import WorkerSlots
    from mcpfleet.runner.results.store import store_config

    monkeypatch.setattr(launcher, "TRIAL_GRACE_SECONDS", 0.5)
    path = write_run(
        tmp_path,
        "late",
        [ORACLE],
        tasks={"include": ["*/move_todo_0"]},
        limits={"timeoutSeconds": 1, "verifierTimeoutSeconds": 1},
        retries={"limit": 1, "backoffSeconds": 0},
        provider={"trialRetryBudget": 0},
    )
    run = load_evalrun(path)
    [trial] = plan(run, tmp_path)
    pool = _WedgedPool()
    done: list[dict[str, Any]] = []
    config = store_config(run.spec.output, run.name, tmp_path)
    scheduler = Scheduler(run, RunState(todo=[trial], skipped=0), cast(WorkerSlots, pool), config, None, done.append)
    start = time.monotonic()
    asyncio.run(asyncio.wait_for(scheduler.run_all(), 20))
    assert 5.0 <= time.monotonic() - start < 8, "each try is killed 2.5 s after it started"
    assert (pool.submitted, pool.killed) == (2, 2)
    assert [(d["failure"], d["error"]) for d in done] == [
        (
            "infra_error",
            "worker killed: the trial ran past its deadline of 2.5 s (limits.timeoutSeconds 1 + "
            "limits.verifierTimeoutSeconds 1 + 0.5 s for set-up and teardown + 0 s the provider may take back: "
            "provider.trialRetryBudget 0 x (the LLM call's 1 s + a 60 s wait))",
        )
    ]


def test_a_trials_deadline_leaves_room_for_the_provider_time_its_agent_is_given_back(tmp_path: Path) -> None:
    """Time lost to provider faults is given back to the agent's clock, so a trial still making progress can run
    past its timeouts by up to its retry budget's worth of failed calls and waits: the launcher must not kill it
    as wedged (it would be retried as an infra error, and under a long rate-limit spell never be scored)."""
    from mcpfleet.runner.launch.launcher import TRIAL_GRACE_SECONDS, worker_deadline

    path = write_run(
        tmp_path,
        "patient",
        [ORACLE],
        tasks={"include": ["*/move_todo_0"]},
        limits={"timeoutSeconds": 60, "verifierTimeoutSeconds": 10, "llmTimeoutSeconds": 20},
        provider={"trialRetryBudget": 3, "retryAfterMaxSeconds": 10, "backoffMaxSeconds": 30},
    )
    [trial] = plan(load_evalrun(path), tmp_path)
    seconds, why = worker_deadline(trial)
    assert seconds == 60 + 10 + TRIAL_GRACE_SECONDS + 3 * (20 + 30)
    assert "provider.trialRetryBudget 3" in why


def test_the_scripted_model_server_dying_stops_the_run_not_its_models(tmp_path: Path) -> None:
    """A review found: mcpfleet's own scripted model server killed mid-run made every model a config_error
    ("fix the key or model"), exit 3. Its death now stops the run as a lost run-wide server (RunLost, exit 6:
    run the same command again), and the trials it failed are not scored, so a rerun runs them."""
    from mcpfleet.runner.launch.launcher import RunLost

    slow = {"name": "slow", "model": "scripted/oracle?latency=0.3"}
    path = write_run(tmp_path, "modelless", [slow], attempts=3, concurrency={"total": 2})
    killed: list[int] = []

    def servers() -> set[int]:
        return {p for p, _, _, cmd in proc_table() if "runner.launch.scripted_model" in cmd and str(os.getpid()) in cmd}

    others = servers()  # e.g. the session's scripted_url server, which later tests use: not this run's

    def kill_server() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = sorted(servers() - others)
            if found and (tmp_path / "runs" / "modelless" / "trials").is_dir():
                time.sleep(1.0)  # trials are talking to it
                os.kill(found[0], signal.SIGKILL)
                killed.append(found[0])
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_server)
    killer.start()
    try:
        with pytest.raises(RunLost, match=r"scripted model server died \(exit status -9\)"):
            run_file(path)
    finally:
        killer.join()
    assert killed and servers() >= others  # only this run's server was killed
    summary, root = run_file(path)  # the same command again: every trial runs, none is a config_error
    assert summary["complete"] and not summary.get("stopped") and row(summary, "slow")["pass_at_1"] == 1.0


def test_a_worker_killed_after_storing_its_record_does_not_run_the_trial_again(tmp_path: Path) -> None:
    """A worker killed between storing a trial's record and its reply to the launcher: the trial is finished, so
    the scheduler takes the stored record instead of paying for the trial again (its second result was thrown
    away, "a scored record of this trial is stored already")."""
    from mcpfleet.runner.launch.launcher import RunState, Scheduler
    from mcpfleet.runner.launch.workerpool import WorkerSlots
    from mcpfleet.runner.results.store import store_config

    run = load_evalrun(write_run(tmp_path, "raced", [ORACLE], tasks={"include": ["*/move_todo_0"]}))
    [trial] = plan(run, tmp_path)
    config = store_config(run.spec.output, run.name, tmp_path)
    store = config.open()
    record = TrialResult(**trial.record_identity(), passed=True, started_at=now_iso(), finished_at=now_iso())
    store.commit(trial.trial_id, dumps(record.model_dump(mode="json")))
    pool = _DyingPool()
    done: list[dict[str, Any]] = []
    scheduler = Scheduler(
        run, RunState(todo=[trial], skipped=0), cast(WorkerSlots, pool), config, None, done.append, stored=store
    )
    asyncio.run(asyncio.wait_for(scheduler.run_all(), 10))
    assert pool.submitted == 1, "the finished trial was run again"
    assert [(d["trial_id"], d["passed"], d["failure"]) for d in done] == [(trial.trial_id, True, None)]


class _DyingPool:
    """Every worker dies before it replies (a BrokenProcessPool)."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        from concurrent.futures.process import BrokenProcessPool

        self.submitted += 1
        fut: Future[Any] = Future()
        fut.set_exception(BrokenProcessPool("a worker died"))
        return fut


def test_a_summary_that_cannot_be_written_is_one_line_and_exit_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full or read-only disk when the run ends: before, a traceback from write_summary (exit 1); now the
    records that were stored stay and `mcpfleet run` says why, exit 4 (nothing lost: the next run writes it)."""
    from mcpfleet.runner.launch import launcher

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    path = write_run(tmp_path, "full", [ORACLE], tasks={"include": ["*/move_todo_0"]})
    monkeypatch.setattr(launcher, "write_summary", full)
    summary, root = run_file(path)
    assert summary["summary_error"] == "summary.json could not be written: [Errno 28] No space left on device"
    assert summary["trials_recorded"] == 1 and len(results(root)) == 1


# ------------------------------------------------------------------------------------- signals (CLI)


class SlowCliRun:
    """`mcpfleet run --no-progress` of 3 slow tiny tasks x 2 attempts at concurrency 2, as a process group
    of its own (like a shell job), with output in files (leftover children must not hold a pipe open)
    and a private short TMPDIR that every trial folder, and so every MCP server's argv, carries."""

    def __init__(self, tmp_path: Path, name: str):
        slow = {"name": "slow", "model": "scripted/oracle?latency=0.5"}
        self.path = write_run(tmp_path, name, [slow], attempts=2, concurrency={"total": 2})
        self.root = tmp_path / "runs" / name
        self.tmpdir = tempfile.mkdtemp(prefix="mcpf-")
        self.marks = (self.tmpdir, str(tmp_path))
        self.out, self.err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(
                [str(MCPFLEET), "run", str(self.path), "--no-progress"],
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "TMPDIR": self.tmpdir},
            )

    def ours(self) -> list[tuple[int, int, int, str]]:
        """Live processes of this run: its session (forkserver, workers) or naming its folders."""
        return [
            p
            for p in proc_table()
            if p[0] != self.proc.pid and (p[2] == self.proc.pid or any(m in p[3] for m in self.marks))
        ]

    def wait_for_first_record(self) -> None:
        seen_servers = seen_model = False
        deadline = time.monotonic() + 60
        while not list((self.root / "trials").glob("*/result.json")):
            assert self.proc.poll() is None, self.err.read_text()
            assert time.monotonic() < deadline, "no trial finished within 60 s"
            procs = self.ours()
            seen_servers |= any("mcp-server-filesystem" in p[3] for p in procs)
            seen_model |= any("scripted_model" in p[3] for p in procs)
            time.sleep(0.05)
        assert seen_servers and seen_model  # the leftover scan can see what it looks for

    def leftovers(self, grace: float = 5.0) -> list[tuple[int, int, int, str]]:
        deadline = time.monotonic() + grace
        while (left := self.ours()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left

    def cleanup(self) -> None:
        """Kill whatever this run left behind (by pid), so a failing test does not leak processes."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for pid, *_ in self.ours():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def check_interrupted_records(root: Path) -> set[str]:
    """Records after an interruption: whole, all passed (no trial failed because the signal killed its
    MCP server or verifier), some trials not run, and no folder without its result.json (the record
    phase finishes even when the cancellation arrives in the middle of it)."""
    folders = {p.name for p in (root / "trials").iterdir()}
    recs = results(root)
    unfinished = folders - set(recs)
    assert not unfinished, unfinished
    assert 1 <= len(recs) < 6  # it really was interrupted
    assert all(r["passed"] for r in recs.values()), {k: r["failure"] for k, r in recs.items()}
    return unfinished


def assert_interrupted_summary(root: Path) -> None:
    """summary.json of an interrupted run says what was recorded, not complete (before: not written at all, or
    an earlier run's left in place)."""
    summary = json.loads((root / "summary.json").read_text())
    assert (summary["trials_planned"], summary["complete"]) == (6, False), summary
    assert summary["trials_recorded"] == len(results(root)), summary


def test_ctrl_c_stops_cleanly_and_the_rerun_completes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = SlowCliRun(tmp_path, "ctrlc")
    try:
        run.wait_for_first_record()
        os.killpg(run.proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        t0 = time.monotonic()
        code = run.proc.wait(timeout=20)
        assert time.monotonic() - t0 < 10
        err = run.err.read_text()
        assert code == 130, err
        assert "Traceback" not in err
        assert "run the same command again to resume" in flat(err)

        unfinished = check_interrupted_records(run.root)
        assert_interrupted_summary(run.root)
        assert not run.leftovers()
        assert not [p.name for p in Path(run.tmpdir).glob("mcpfleet-*")]  # no trial or spare-server folder
    finally:
        run.cleanup()

    interrupted = mtimes(run.root)
    capsys.readouterr()
    summary, _ = run_file(run.path, concurrency=4)  # the concurrency override does not change the spec hash
    discarded = "discarded 1 unfinished trial folder from" in capsys.readouterr().out
    assert discarded == bool(unfinished)
    assert (summary["trials_planned"], summary["trials_recorded"], summary["complete"]) == (6, 6, True)
    assert sorted(results(run.root)) == sorted(p.name for p in (run.root / "trials").iterdir())
    assert row(summary, "slow")["pass_at_1"] == 1.0
    assert {k: v for k, v in mtimes(run.root).items() if k in interrupted} == interrupted


def test_sigterm_stops_the_run_without_orphans(tmp_path: Path) -> None:
    """BUG: `kill <pid>` (also `timeout`, CI cancellation, `docker stop`) kills the launcher without any
    cleanup: the scripted model server (own session), the forkserver and the workers (blocked on the
    pool's queue, SIGTERM only sets a flag) stay alive for good."""
    run = SlowCliRun(tmp_path, "term")
    try:
        run.wait_for_first_record()
        run.proc.send_signal(signal.SIGTERM)  # the launcher process only, as `kill <pid>` does
        t0 = time.monotonic()
        code = run.proc.wait(timeout=20)
        assert time.monotonic() - t0 < 10
        assert code != 0
        check_interrupted_records(run.root)
        assert_interrupted_summary(run.root)
        left = run.leftovers()
        assert not left, [p[3][:100] for p in left]
    finally:
        run.cleanup()


# -------------------------------------------------------------------------------------------- credentials


def test_unset_api_key_env_is_a_spec_error_naming_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPFLEET_TEST_UNSET_KEY", raising=False)
    real = {"name": "gpt", "model": "openai/gpt-5", "apiKeyEnv": "MCPFLEET_TEST_UNSET_KEY"}
    path = write_run(tmp_path, "creds", [ORACLE, real])
    with pytest.raises(SpecError) as info:
        run_file(path)
    (problem,) = info.value.problems
    assert problem.startswith("spec.models[1].apiKeyEnv: ")
    assert "MCPFLEET_TEST_UNSET_KEY" in problem and "not set" in problem
    assert not (tmp_path / "runs").exists()  # refused before anything was written

    monkeypatch.setenv("MCPFLEET_TEST_UNSET_KEY", "")  # empty counts as unset
    with pytest.raises(SpecError, match=r"spec\.models\[1\]\.apiKeyEnv"):
        run_file(path)


def test_secret_ref_alone_is_refused_locally(tmp_path: Path) -> None:
    real = {"name": "gpt", "model": "openai/gpt-5", "apiKeySecretRef": {"name": "llm-keys", "key": "openai"}}
    path = write_run(tmp_path, "secret", [real])
    with pytest.raises(SpecError) as info:
        run_file(path)
    (problem,) = info.value.problems
    assert problem.startswith("spec.models[0].apiKeySecretRef: ")
    assert "Secrets are only read by the operator" in problem and "apiKeyEnv" in problem
    assert not (tmp_path / "runs").exists()


def test_api_key_exported_after_an_earlier_run_reaches_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripted_url: str, session_pack: Path
) -> None:
    """Workers fork from a forkserver that lives for the whole process and keeps the environment of its
    start: a key exported after an earlier run (a notebook, a test session, a sweep script) passes
    check_credentials, so it must reach the workers too (before 5204db7 the call went out without it)."""
    ensure_forkserver()  # an earlier run in this process started it
    monkeypatch.setenv("MCPFLEET_TEST_LATE_KEY", "sk-test-late-123456")
    keyed = {"name": "keyed", "model": "openai/oracle", "apiBase": scripted_url, "apiKeyEnv": "MCPFLEET_TEST_LATE_KEY"}
    path = tmp_path / "late.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "mcpfleet.io/v1alpha1",
                "kind": "EvalRun",
                "metadata": {"name": "late"},
                "spec": {
                    "models": [keyed],
                    "tasks": {"path": str(session_pack), "include": ["*/move_todo_0"]},
                    "limits": {"llmRetries": 0},
                    "output": {"uri": str(tmp_path / "runs")},
                },
            }
        )
    )
    summary, root = run_file(path)
    (rec,) = results(root).values()
    assert rec["passed"] is True, rec["error"]


# ------------------------------------------------------------------------------------- provider faults

BAD_KEY = "sk-wrong-key-4b1d9e77"


def test_a_config_error_stops_the_model_at_once_and_a_rerun_with_the_key_fixed_resumes(tmp_path: Path) -> None:
    """A 401 is no failure of the model: its launches stop after the first (no more paid trials), the other
    model finishes, the CLI says so once per model, never prints the key, and exits non-zero. Fixing the
    key and re-running the same file runs the stopped model's trials and nothing else."""
    keyed = {"name": "keyed", "model": "scripted/oracle?key=the-right-key", "apiKeyEnv": "MCPFLEET_FAULT_KEY"}
    path = write_run(tmp_path, "badkey", [keyed, ORACLE], concurrency={"total": 1})
    env = {**os.environ, "MCPFLEET_FAULT_KEY": BAD_KEY}
    proc = cli("run", str(path), "--no-progress", env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert BAD_KEY not in out and "[REDACTED]" in out
    assert flat(proc.stderr).count("model 'keyed' stopped: config_error: ") == 1, proc.stderr
    assert "401" in proc.stderr and "2 trials not run" in flat(proc.stderr)
    root = tmp_path / "runs" / "badkey"
    recs = results(root)
    keyed_recs = [r for r in recs.values() if r["model"] == "keyed"]
    assert [r["failure"] for r in keyed_recs] == ["config_error"] and keyed_recs[0]["totals"]["llm_retries"] == 0
    assert sorted(r["passed"] for r in recs.values() if r["model"] == "oracle") == [True] * 3
    summary = json.loads((root / "summary.json").read_text())
    assert list(summary["stopped"]) == ["keyed"] and summary["not_scored"] == {"config_error": 1}
    assert row(summary, "keyed")["pass_at_1"] is None and row(summary, "oracle")["pass_at_1"] == 1.0
    for f in root.rglob("*"):
        if f.is_file():
            assert BAD_KEY.encode() not in f.read_bytes(), f

    before = mtimes(root)
    proc = cli("run", str(path), "--no-progress", env={**os.environ, "MCPFLEET_FAULT_KEY": "the-right-key"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs, after = results(root), mtimes(root)
    assert all(r["passed"] for r in recs.values()) and len(recs) == 6
    assert {t for t in after if after[t] != before.get(t)} == {t for t, r in recs.items() if r["model"] == "keyed"}


def test_provider_errors_are_retried_in_run_and_rerun_on_resume(tmp_path: Path) -> None:
    """A provider that fails after the call's retries: the trial is tried again (spec.retries), and a trial
    still failing is recorded as provider_error, not scored, and run again by the next run of the file."""
    down = {"name": "down", "model": "scripted/noop?fault=status&fail_status=503"}
    blip = {"name": "blip", "model": "scripted/noop?fault=status&fail_status=502&fail=1"}
    path = write_run(
        tmp_path,
        "outage",
        [down, blip],
        tasks={"include": ["*/move_todo_0"]},
        limits={"llmRetries": 0},
        retries={"limit": 1, "backoffSeconds": 0},
    )
    summary, root = run_file(path)
    recs = {r["model"]: r for r in results(root).values()}
    assert (recs["down"]["failure"], recs["down"]["infra_attempts"]) == ("provider_error", 2)
    assert "HTTP 503" in recs["down"]["error"]
    # The blip failed its first try only: the second try is the model's own, scored outcome.
    assert (recs["blip"]["failure"], recs["blip"]["infra_attempts"]) == ("premature_stop", 2)
    assert row(summary, "down")["not_scored"] == {"provider_error": 1} and row(summary, "down")["pass_at_1"] is None
    assert row(summary, "blip")["pass_at_1"] == 0.0 and row(summary, "blip")["failures"] == {"premature_stop": 1}
    first = recs["down"]
    _, root = run_file(path)
    again = {r["model"]: r for r in results(root).values()}
    assert ts(again["down"]["started_at"]) > ts(first["finished_at"])  # re-run
    assert again["blip"]["finished_at"] == recs["blip"]["finished_at"]  # kept


def test_a_spent_model_retry_budget_stops_its_launches(tmp_path: Path) -> None:
    down = {"name": "down", "model": "scripted/noop?fault=status&fail_status=503"}
    path = write_run(
        tmp_path,
        "budget",
        [down, NOOP],
        concurrency={"total": 1},
        limits={"llmRetries": 2},
        retries={"limit": 0, "backoffSeconds": 0},
        provider={"modelRetryBudget": 3, "backoffInitialSeconds": 0.01},
    )
    summary, root = run_file(path)
    recs = results(root)
    down_recs = [r for r in recs.values() if r["model"] == "down"]
    # 2 retries (within 3), then 4 (over): the third trial is never launched.
    assert [r["totals"]["llm_retries"] for r in down_recs] == [2, 2]
    assert all(r["failure"] == "provider_error" for r in down_recs)
    assert len([r for r in recs.values() if r["model"] == "noop"]) == 3
    assert "modelRetryBudget" in summary["stopped"]["down"] and not summary["complete"]


class _HangingPool:
    """Workers that never answer: trials stay in flight until the run stops."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn: Any, item: Any) -> Any:
        from concurrent.futures import Future

        self.submitted += 1
        return Future()


@pytest.mark.parametrize("when", ["before", "during"])
def test_a_lost_run_resource_stops_the_scheduler_at_once(tmp_path: Path, when: str) -> None:
    """A run-scoped resource lost for good (said from its own thread, as the PostgreSQL keeper does) stops the
    run's loop at once with RunLost, trials still in flight, instead of waiting for them or being seen only when
    the next trial ends (nothing ends here)."""
    from mcpfleet.runner.launch.launcher import LostWatch, RunLost, RunState, Scheduler
    from mcpfleet.runner.launch.workerpool import WorkerSlots
    from mcpfleet.runner.results.store import store_config

    run = load_evalrun(write_run(tmp_path, "lost", [ORACLE], concurrency={"total": 2}))
    trials = plan(run, tmp_path)
    lost = LostWatch()
    pool = _HangingPool()
    scheduler = Scheduler(
        run,
        RunState(todo=trials, skipped=0),
        cast(WorkerSlots, pool),
        store_config(run.spec.output, run.name, tmp_path),
        None,
        lambda out: None,
        lost=lost,
    )
    if when == "before":
        lost("the run's server is gone")
    else:
        threading.Timer(0.5, lost, ["the run's server is gone"]).start()
    start = time.monotonic()
    with pytest.raises(RunLost, match="the run's server is gone"):
        asyncio.run(asyncio.wait_for(scheduler.run_all(), 10))
    assert time.monotonic() - start < 3
    assert pool.submitted == (0 if when == "before" else 2)
