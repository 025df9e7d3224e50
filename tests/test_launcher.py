"""``mcpfleet run`` end to end: real warm workers, the real scripted model server, the real filesystem MCP
server and real verifiers. Scores, concurrency caps, interleaving, resume, refusals, infra retries,
Ctrl-C and credentials.
"""

from __future__ import annotations

import json
import multiprocessing.forkserver
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO, make_tiny_pack
from mcpfleet.runner.launcher import RunRefused, execute
from mcpfleet.runner.plan import plan
from mcpfleet.runner.spec import SpecError, load_evalrun
from mcpfleet.runner.worker import make_context

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
ORACLE = {"name": "oracle", "model": "scripted/oracle"}
NOOP = {"name": "noop", "model": "scripted/noop"}
TASK0 = "filesystem/standard/tiny/move_todo_0"


# --------------------------------------------------------------------------------------------- helpers

def write_run(tmp_path: Path, name: str, models: list[dict[str, Any]], *, file: str | None = None,
              tasks: dict[str, Any] | None = None, **spec: Any) -> Path:
    """An EvalRun YAML in tmp_path over a 3-task tiny pack (made once per tmp_path); output in tmp_path/runs."""
    pack = tmp_path / "pack"
    if not pack.exists():
        make_tiny_pack(pack, tasks=3)
    doc = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": name},
           "spec": {"models": models, "tasks": {"path": str(pack), **(tasks or {})},
                    "output": {"uri": str(tmp_path / "runs")}, **spec}}
    path = tmp_path / (file or f"{name}.yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_file(path: Path, **kw: Any) -> tuple[dict[str, Any], Path]:
    return execute(load_evalrun(path), path.parent, show_progress=False, **kw)


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
    events = sorted([(ts(r["started_at"]), 1) for r in recs] + [(ts(r["finished_at"]), -1) for r in recs],
                    key=lambda e: (e[0], e[1]))  # at equal times an end comes before a start
    cur = peak = 0
    for _, delta in events:
        cur += delta
        peak = max(peak, cur)
    return peak


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MCPFLEET), *args], capture_output=True, text=True, timeout=timeout,
                          env=env or dict(os.environ), stdin=subprocess.DEVNULL)


def flat(text: str) -> str:
    """Rich wraps long lines at 80 columns when not on a terminal: compare text with whitespace folded."""
    return " ".join(text.split())


def ensure_forkserver() -> int:
    """Start the (process-wide) forkserver the launcher uses, so a test can change os.environ after it."""
    make_context()
    multiprocessing.forkserver.ensure_running()
    pid = multiprocessing.forkserver._forkserver._forkserver_pid  # noqa: SLF001 - test introspection
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


def test_plan_alternates_models_attempt_major(tmp_path: Path) -> None:
    path = write_run(tmp_path, "order", [ORACLE, NOOP], attempts=2)
    trials = plan(load_evalrun(path), tmp_path)
    assert [t.model.name for t in trials] == ["oracle", "noop"] * 6
    assert [t.attempt for t in trials] == [1] * 6 + [2] * 6
    assert [t.task_id.rsplit("_", 1)[1] for t in trials[:6]] == ["0", "0", "1", "1", "2", "2"]


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
    path = write_run(tmp_path, "permodel", [a, b], tasks={"exclude": ["*/move_todo_2"]},
                     concurrency={"total": 4, "perModel": 1})
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
    assert "discarded 3 unfinished trial folder(s)" in capsys.readouterr().out
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

def test_changed_spec_is_refused_new_run_and_more_attempts_are_not(tmp_path: Path) -> None:
    base = dict(tasks={"include": [f"*/{TASK0.rsplit('/', 1)[1]}"]}, limits={"maxTurns": 20})
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
    other_model = write_run(tmp_path, "change", [{"name": "oracle", "model": "scripted/oracle?latency=0.01"}],
                            file="model.yaml", **base)
    with pytest.raises(RunRefused, match="--new-run"):
        run_file(other_model)
    assert mtimes(root) == first and (root / "run.json").read_bytes() == run_json  # nothing touched

    # The CLI: exit code 2, the message on stderr, no traceback.
    out = cli("run", str(changed), "--no-progress")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    err = flat(out.stderr)
    assert "run 'change'" in err and "new metadata.name" in err and "--new-run" in err

    out = cli("run", str(changed), "--no-progress", "--new-run")
    assert out.returncode == 0, out.stderr
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
    now = mtimes(root)
    assert now["oracle.filesystem.standard.tiny.move_todo_0.1"] == first["oracle.filesystem.standard.tiny.move_todo_0.1"]
    assert results(root)["oracle.filesystem.standard.tiny.move_todo_0.2"]["passed"] is True
    assert row(summary, "oracle")["pass_hat_k"] == 1.0


# ------------------------------------------------------------------------------------- infra retries

def test_infra_errors_are_retried_up_to_the_limit_and_again_on_rerun(tmp_path: Path) -> None:
    (tmp_path / "no-states").mkdir()
    tasks = {"statesPath": str(tmp_path / "no-states"), "include": ["*/move_todo_0"]}
    retried = write_run(tmp_path, "retried", [ORACLE], tasks=tasks, retries={"limit": 2, "backoffSeconds": 0})
    summary, root = run_file(retried)
    (rec,) = results(root).values()
    assert (rec["passed"], rec["failure"], rec["infra_attempts"]) == (False, "infra_error", 3)
    assert "initial state" in rec["error"] and "not found" in rec["error"]
    assert row(summary, "oracle")["failures"] == {"infra_error": 1}

    once = write_run(tmp_path, "once", [ORACLE], tasks=tasks, retries={"limit": 0, "backoffSeconds": 0})
    _, root = run_file(once)
    (rec,) = results(root).values()
    assert (rec["failure"], rec["infra_attempts"]) == ("infra_error", 1)

    # An infra error is not an outcome: a rerun of the same file tries the trial again.
    _, root = run_file(once)
    (again,) = results(root).values()
    assert again["failure"] == "infra_error"
    assert ts(again["started_at"]) > ts(rec["finished_at"])


def test_rerun_after_fixing_the_infra_cause_retries_instead_of_refusing(tmp_path: Path) -> None:
    """BUG: the fix (providing the missing state) changes the task digest, so resume calls the
    infra_error record a conflicting outcome and refuses the run, although it measured nothing."""
    states = tmp_path / "states"
    states.mkdir()
    tasks = {"statesPath": str(states), "include": ["*/move_todo_0"]}
    path = write_run(tmp_path, "fixlater", [ORACLE], tasks=tasks, retries={"limit": 0, "backoffSeconds": 0})
    _, root = run_file(path)
    (rec,) = results(root).values()
    assert rec["failure"] == "infra_error"

    shutil.copytree(tmp_path / "pack" / "filesystem" / "states", states / "filesystem")  # the fix
    summary, _ = run_file(path)
    (rec,) = results(root).values()
    assert rec["passed"] is True and summary["complete"]


def test_a_worker_killed_mid_run_is_an_infra_error_not_a_crash(tmp_path: Path) -> None:
    """BUG: any abrupt worker death breaks the ProcessPoolExecutor; the retry's submit raises
    BrokenProcessPool out of execute() (a traceback from `mcpfleet run`) instead of retrying."""
    forkserver = ensure_forkserver()
    slow = {"name": "slow", "model": "scripted/oracle?latency=0.3"}
    path = write_run(tmp_path, "killed", [slow], tasks={"include": ["*/move_todo_[01]"]},
                     concurrency={"total": 2}, retries={"limit": 2, "backoffSeconds": 0})
    killed: list[int] = []

    def kill_one_worker() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            workers = [p for p, ppid, _, _ in proc_table() if ppid == forkserver]
            if len(workers) == 2:
                time.sleep(1.0)  # both are mid-trial (a trial takes ~2 s)
                os.kill(workers[0], signal.SIGKILL)
                killed.append(workers[0])
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
    assert max(r["infra_attempts"] for r in results(root).values()) == 2


def test_a_finished_run_leaves_no_temp_folders_behind(tmp_path: Path) -> None:
    """BUG: each worker starts a spare MCP server in a fresh mcpfleet-trial-* folder for its next trial and
    closes it in an atexit hook; forkserver children leave through os._exit, so atexit never runs and
    every `mcpfleet run` leaves one folder per worker in $TMPDIR."""
    path = write_run(tmp_path, "tidy", [ORACLE], tasks={"exclude": ["*/move_todo_2"]}, concurrency={"total": 2})
    tmpdir = Path(tempfile.mkdtemp(prefix="mcpf-"))
    try:
        out = cli("run", str(path), "--no-progress", env={**os.environ, "TMPDIR": str(tmpdir)})
        assert out.returncode == 0, out.stderr
        assert json.loads((tmp_path / "runs" / "tidy" / "summary.json").read_text())["complete"] is True
        left = sorted(p.name for p in tmpdir.glob("mcpfleet-*"))
        assert not left
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


# ----------------------------------------------------------------------------------------------- Ctrl-C

def test_ctrl_c_stops_cleanly_and_the_rerun_completes(tmp_path: Path) -> None:
    slow = {"name": "slow", "model": "scripted/oracle?latency=0.5"}
    path = write_run(tmp_path, "ctrlc", [slow], attempts=2, concurrency={"total": 2})
    root = tmp_path / "runs" / "ctrlc"
    # A short private TMPDIR: every trial's workdir (and so its MCP server's argv) carries it.
    tmpdir = tempfile.mkdtemp(prefix="mcpf-")
    env = {**os.environ, "TMPDIR": tmpdir}
    marks = (tmpdir, str(tmp_path))
    proc = subprocess.Popen([str(MCPFLEET), "run", str(path), "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env,
                            start_new_session=True)

    def ours() -> list[tuple[int, int, int, str]]:
        return [p for p in proc_table()
                if p[0] != proc.pid and (p[2] == proc.pid or any(m in p[3] for m in marks))]

    try:
        seen_servers = seen_model = False
        deadline = time.monotonic() + 60
        while not list((root / "trials").glob("*/result.json")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no trial finished within 60 s"
            procs = ours()
            seen_servers |= any("mcp-server-filesystem" in p[3] for p in procs)
            seen_model |= any("scripted_model" in p[3] for p in procs)
            time.sleep(0.05)
        assert seen_servers and seen_model  # the leftover scan below can see what it looks for
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=20)
        assert time.monotonic() - t0 < 10
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    try:
        assert proc.returncode == 130, (out, err)
        assert "Traceback" not in err
        assert "run the same command again to resume" in flat(err)

        folders = list((root / "trials").iterdir())
        recs = results(root)
        assert sorted(recs) == sorted(p.name for p in folders)  # no half-written trial folder
        assert 1 <= len(recs) < 6  # it really was interrupted
        assert all(r["passed"] for r in recs.values()), {k: r["failure"] for k, r in recs.items()}

        leftovers = ours()
        deadline = time.monotonic() + 5
        while leftovers and time.monotonic() < deadline:
            time.sleep(0.1)
            leftovers = ours()
        assert not leftovers
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    interrupted = mtimes(root)
    summary, _ = run_file(path, concurrency=4)  # the concurrency override does not change the spec hash
    assert (summary["trials_planned"], summary["trials_recorded"], summary["complete"]) == (6, 6, True)
    assert row(summary, "slow")["pass_at_1"] == 1.0
    assert {k: v for k, v in mtimes(root).items() if k in interrupted} == interrupted


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
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripted_url: str, session_pack: Path) -> None:
    """BUG: workers fork from a forkserver that lives for the whole process and holds the environment of
    its start. execute() checks the key in os.environ, but a worker of a later execute() in the same
    process (a notebook, a test session, a sweep script) never sees it: the LLM call goes out without it."""
    ensure_forkserver()  # an earlier run in this process started it
    monkeypatch.setenv("MCPFLEET_TEST_LATE_KEY", "sk-test-late-123456")
    keyed = {"name": "keyed", "model": "openai/oracle", "apiBase": scripted_url, "apiKeyEnv": "MCPFLEET_TEST_LATE_KEY"}
    path = tmp_path / "late.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "late"},
        "spec": {"models": [keyed], "tasks": {"path": str(session_pack), "include": ["*/move_todo_0"]},
                 "limits": {"llmRetries": 0}, "output": {"uri": str(tmp_path / "runs")}}}))
    summary, root = run_file(path)
    (rec,) = results(root).values()
    assert rec["passed"] is True, rec["error"]
