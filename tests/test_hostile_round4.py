"""The s29 hostile-input audit's remaining findings (M6, M7, L1-L4) and the parity audit's F5/F9: a run.json of
the wrong shape, a run folder that is a file, a summary.json with impossible numbers, materialise and
scripted-server arguments, a key with whitespace in a provider's echo, a pack under a folder named like a
service, a task whose no-op trial cannot even start. None may be a traceback, a secret shown, or a wrong verdict."""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import make_tiny_pack
from hostile import SCRIPTED, assert_clean_error, cli, flat, write_run

from mcpfleet.runner.launch.launcher import RunRefused, run_lock
from mcpfleet.runner.results.store import LocalStore

TRIAL = "oracle.filesystem.standard.tiny.move_todo_0.1"


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A finished one-trial run of the tiny pack: ``runs/r1`` beside ``r1.yaml``."""
    make_tiny_pack(tmp_path / "pack")
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}}, name="r1")
    out = cli("run", str(path), "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, (out.stdout, out.stderr)
    return tmp_path


@pytest.mark.parametrize("body", ['{"run": "r1"}', "[1]", '{"spec_hash": 7}', '"r1"'])
def test_a_run_json_of_the_wrong_shape_is_as_missing_when_a_trial_conflicts(recorded: Path, body: str) -> None:
    """M6. Before: `{"run": "r1"}` was a KeyError traceback, `[1]` an AttributeError one."""
    (recorded / "runs" / "r1" / "run.json").write_text(body)
    edited = write_run(
        recorded, {"models": [SCRIPTED], "tasks": {"path": "pack"}, "limits": {"maxTurns": 7}}, name="r1"
    )
    out = cli("run", str(edited), "--no-progress", cwd=recorded)
    assert_clean_error(out, "run 'r1'", "was recorded with different task content", "1 recorded trial would")
    assert (recorded / "runs" / "r1" / "trials" / TRIAL / "result.json").is_file()  # nothing was touched


def test_a_run_folder_taken_by_a_file_is_refused_by_validate_and_run(tmp_path: Path) -> None:
    """M7. Before: `validate` said valid and `run` was a FileExistsError traceback."""
    make_tiny_pack(tmp_path / "pack")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r8").write_text("notafolder\n")
    (tmp_path / "runs9").mkdir()
    (tmp_path / "runs9" / "r8").symlink_to(tmp_path / "missing")  # a dangling link in its place: the same
    for uri in ("runs", "runs9"):
        path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}, "output": {"uri": uri}}, "r8")
        for command in ("validate", "run"):
            out = cli(command, str(path), cwd=tmp_path)
            assert_clean_error(out, f"the run folder {tmp_path / uri / 'r8'}", "remove or move it", "metadata.name")
    assert (tmp_path / "runs" / "r8").read_text() == "notafolder\n"


def test_a_run_folder_that_cannot_be_made_or_locked_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """M7. Before: the lock's mkdir raised FileExistsError / NotADirectoryError through `mcpfleet run`, and a
    file system without locks (ENOLCK) or a full disk (writing the pid) an OSError traceback."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunRefused, match=r"the run folder cannot be made \(.*\); remove what is there"):
        with run_lock(LocalStore(tmp_path / "file" / "run")):
            pass
    with pytest.raises(RunRefused, match="the run folder cannot be made"):
        with run_lock(LocalStore(tmp_path / "file")):
            pass
    (tmp_path / "run" / ".mcpfleet.lock").mkdir(parents=True)
    with pytest.raises(RunRefused, match=r"\.mcpfleet\.lock: .*remove it"):
        with run_lock(LocalStore(tmp_path / "run")):
            pass

    def fails(code: int) -> Callable[..., None]:
        def call(*_: object) -> None:
            raise OSError(code, os.strerror(code))

        return call

    monkeypatch.setattr(fcntl, "flock", fails(errno.ENOLCK))
    with pytest.raises(RunRefused, match=r"\.mcpfleet\.lock: cannot be locked \(No locks available\)"):
        with run_lock(LocalStore(tmp_path / "other")):
            pass
    monkeypatch.undo()
    monkeypatch.setattr(os, "pwrite", fails(errno.ENOSPC))
    with pytest.raises(RunRefused, match=r"\.mcpfleet\.lock: cannot be written \(No space left on device\)"):
        with run_lock(LocalStore(tmp_path / "full")):
            pass


def test_discard_unfinished_removes_only_trial_folders(tmp_path: Path) -> None:
    """Review: a resume removed every folder under trials/ without a result.json: another run's folder put there,
    a user's notes folder, a link's target. Only real folders named like a trial id are the run's to remove."""
    root = tmp_path / "run"
    trials = root / "trials"
    unfinished = trials / TRIAL
    unfinished.mkdir(parents=True)
    (unfinished / "messages.json").write_text("[")
    for name in ("r5b/trials", "notes", "oracle.filesystem.standard.tiny.move_todo_0.1.bak"):
        (trials / name).mkdir(parents=True)
        (trials / name / "keep.txt").write_text("mine\n")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "data.txt").write_text("precious\n")
    (trials / "noop.filesystem.standard.tiny.move_todo_0.2").symlink_to(victim)  # trial-shaped, but a link
    assert LocalStore(root).discard_unfinished() == 1
    assert not unfinished.exists()
    assert sorted(p.name for p in trials.iterdir()) == [
        "noop.filesystem.standard.tiny.move_todo_0.2",
        "notes",
        "oracle.filesystem.standard.tiny.move_todo_0.1.bak",
        "r5b",
    ]
    assert (victim / "data.txt").read_text() == "precious\n" and (trials / "r5b" / "trials" / "keep.txt").is_file()


@pytest.mark.parametrize(
    "key",
    ["sk-live-abc  def123456", "sk-live-abcdef123456\t", "sk-live-abcdef123456\n", "sk-live-abc\ndef123456"],
)
def test_a_key_holding_whitespace_is_redacted_from_a_providers_echo(key: str) -> None:
    """L3. Before: the echo's whitespace was normalised (and the text cut at its first line) before redaction,
    so a key with a tab, a line break or two spaces inside no longer matched any of its forms."""
    from mcpfleet.runner.llm.faults import one_line

    for body in (
        json.dumps({"error": {"message": f"Incorrect API key provided: {key}. You can find your key"}}),
        f"Incorrect API key provided: {key}. You can find your key",
    ):
        line = one_line(Exception(body), [key])
        assert "[REDACTED]" in line and "abc" not in line and "123456" not in line, (key, line)


@pytest.mark.parametrize("value", ["sk-live-abcdef123456\t", " sk-live-abcdef123456", "sk-live-abc\x07def123456"])
def test_preflight_refuses_a_key_with_control_characters_or_whitespace_at_its_ends(tmp_path: Path, value: str) -> None:
    """L3: such a key fails authentication and its echo escapes redaction; say so, naming the variable only."""
    make_tiny_pack(tmp_path / "pack")
    model = {"name": "m", "model": "openai/gpt-4o-mini", "apiKeyEnv": "HOSTILE_KEY"}
    judge = {"model": "openai/gpt-4o-mini", "apiKeyEnv": "HOSTILE_JUDGE_KEY"}
    path = write_run(tmp_path, {"models": [model], "tasks": {"path": "pack"}, "toolcalls": {"judge": judge}})
    env = {"HOSTILE_KEY": value, "HOSTILE_JUDGE_KEY": value}
    for command in ("validate", "run"):
        out = cli(command, str(path), cwd=tmp_path, env=env)
        assert_clean_error(
            out,
            "spec.models[0].apiKeyEnv: environment variable HOSTILE_KEY holds whitespace at its start or end or a "
            "control character",
            "spec.toolcalls.judge.apiKeyEnv: environment variable HOSTILE_JUDGE_KEY holds",
            "export the key alone",
        )
        assert "abcdef" not in out.stdout + out.stderr and "abc" not in out.stderr
    assert not (tmp_path / "runs").exists()


async def test_tasks_validate_calls_a_task_whose_no_op_trial_cannot_run_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parity F5. Before: a no-op trial that ended as an infra error (its state not set up, its server not
    started) has passed=false, so the task read `ok ... noop_fails=True` and the run then looped on infra errors."""
    from mcpfleet.runner.environment.server import SERVERS_ENV
    from mcpfleet.runner.launch.taskcheck import validate
    from mcpfleet.runner.tasks.discovery import discover

    pack = make_tiny_pack(tmp_path / "pack")
    task = pack / "filesystem" / "standard" / "tiny" / "move_todo_0"
    (task / "oracle.json").unlink()  # oracle=-: only the no-op trial (and the mutant) say anything
    step = {"tool": "write_file", "arguments": {"path": "{root}/summary.txt", "content": "4\n"}}
    wrong = {"name": "wrong", "why": "4", "after_oracle": False, "steps": [step]}
    (task / "mutants.json").write_text(json.dumps({"mutants": [wrong]}))
    monkeypatch.setenv(SERVERS_ENV, str(tmp_path / "no-servers"))  # every trial's server: not found
    [report] = await validate(discover(pack), pack)
    assert not report.ok and report.noop_failed is None and report.mutants_rejected == []
    said = "\n".join(report.problems)
    assert "filesystem/standard/tiny/move_todo_0: the no-op trial could not run (infra_error)" in said, said
    assert "mutant 'wrong' could not run (infra_error)" in said, said
    assert "mcp-server-filesystem" in said and "not found" in said, said


def test_materialise_refuses_a_dest_it_cannot_or_must_not_fill(tmp_path: Path) -> None:
    """L2. Before: --dest /proc/x was a FileNotFoundError traceback; --dest = the task's own state a 100 KB
    shutil.Error traceback, and a --dest inside it a copy of the state inside itself (the task changed); a
    non-empty --dest (the help: "Empty folder to fill") was filled as is, its stray file part of the state."""
    pack = make_tiny_pack(tmp_path / "pack")
    state = pack / "filesystem" / "states" / "tiny"
    task_dir = pack / "filesystem" / "standard" / "tiny" / "move_todo_0"
    before = sorted(str(p.relative_to(pack)) for p in pack.rglob("*"))
    args = ("materialise", "--task", "filesystem/standard/tiny/move_todo_0", "--tasks-root", str(pack), "--dest")
    for dest, said in [
        (state, f"--dest {state} is, or lies inside, the task's initial state {state}; give a folder outside it"),
        (state / "inner", f"--dest {state / 'inner'} is, or lies inside, the task's initial state {state}"),
        (task_dir / "st", f"--dest {task_dir / 'st'} is, or lies inside, the task's folder {task_dir}"),
        (Path("/proc/mcpfleet-x"), "--dest /proc/mcpfleet-x: the initial state could not be copied there ("),
    ]:
        assert_clean_error(cli(*args, str(dest), cwd=tmp_path), said)
    assert sorted(str(p.relative_to(pack)) for p in pack.rglob("*")) == before  # the pack is as it was
    used = tmp_path / "used"
    used.mkdir()
    (used / "stale.txt").write_text("from an earlier trial\n")
    assert_clean_error(cli(*args, str(used), cwd=tmp_path), f"--dest {used} is not empty; give an empty or missing")
    assert [p.name for p in used.iterdir()] == ["stale.txt"]
    out = cli(*args, str(tmp_path / "fresh"), cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["files"] == 2, (out.stdout, out.stderr)
    (tmp_path / "empty").mkdir()
    assert cli(*args, str(tmp_path / "empty"), cwd=tmp_path).returncode == 0


def test_materialise_names_a_dest_it_may_not_look_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A --dest under a folder the user may not enter (mode 000, as a non-root user): Path.exists raises
    PermissionError there. Before: a PermissionError traceback. The tests run as root, for whom no mode bars a
    folder, so the kernel's refusal is played by Path.exists."""
    from typer.testing import CliRunner

    from mcpfleet.runner.cli.app import app

    pack = make_tiny_pack(tmp_path / "pack")
    barred = tmp_path / "barred"
    real = Path.exists

    def exists(self: Path, *args: Any, **kwargs: Any) -> bool:
        if self.is_relative_to(barred) and self != barred:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists)
    dest = barred / "state"
    args = ["materialise", "--task", "filesystem/standard/tiny/move_todo_0", "--tasks-root", str(pack)]
    out = CliRunner().invoke(app, [*args, "--dest", str(dest)])
    assert out.exit_code == 2, (out.output, out.exception)
    assert f"--dest {dest}: cannot be looked at (Permission denied); give a folder you may write to" in out.output
    assert "Traceback" not in out.output and not os.path.exists(dest)


def test_a_bad_infra_attempt_or_scripted_server_argument_is_one_line(tmp_path: Path) -> None:
    """L2. Before: MCPFLEET_INFRA_ATTEMPT=abc was a ValueError traceback; `scripted-server --port 70000` an
    OverflowError one, `--tasks /nonexistent` a TaskError one."""
    make_tiny_pack(tmp_path / "pack")
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}})
    trial = ("trial", str(path), "--model", "oracle", "--task", "filesystem/standard/tiny/move_todo_0")
    for value in ("abc", "-1", "1.5", " 2", "٣"):
        out = cli(*trial, cwd=tmp_path, env={"MCPFLEET_INFRA_ATTEMPT": value})
        assert_clean_error(out, f"MCPFLEET_INFRA_ATTEMPT: {value!r} is not a whole number of at least 0")
    assert not (tmp_path / "runs").exists()  # refused before any trial
    assert_clean_error(cli("scripted-server", "--port", "70000", cwd=tmp_path), "--port 70000: not a TCP port")
    out = cli("scripted-server", "--tasks", str(tmp_path / "nonexistent"), cwd=tmp_path)
    assert_clean_error(out, f"--tasks: task pack {tmp_path / 'nonexistent'} does not exist")


def test_tasks_validate_takes_a_pack_under_a_folder_named_like_a_service(tmp_path: Path) -> None:
    """L4. Before: `tasks validate postgres/pk` took postgres/ for the service folder of a pack rooted at the
    parent and said "no task found"; a folder that holds <service>/<difficulty>/<category>/<task> is a pack root."""
    make_tiny_pack(tmp_path / "postgres" / "pk", tasks=2)
    out = cli("tasks", "validate", "postgres/pk", cwd=tmp_path)
    assert out.returncode == 0 and "2/2 tasks valid" in out.stdout, (out.stdout, out.stderr)
    # A folder inside a pack still narrows it to what it holds.
    out = cli("tasks", "validate", "postgres/pk/filesystem/standard/tiny/move_todo_1", cwd=tmp_path)
    assert out.returncode == 0 and "1/1 task valid" in out.stdout, (out.stdout, out.stderr)


def test_tasks_validate_of_a_pack_without_its_states_hints_at_states_once(tmp_path: Path) -> None:
    """Parity F9. Before: MCPMark's tasks/ folder (whose states are its test_environments/) printed one "initial
    state ... not found" per task and nothing about --states."""
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    (pack / "filesystem" / "states").rename(tmp_path / "elsewhere")
    out = cli("tasks", "validate", "pack", cwd=tmp_path)
    assert out.returncode == 1 and "0/2 tasks valid" in out.stdout, (out.stdout, out.stderr)
    hint = "a foreign pack's states (MCPMark's test_environments/) are given with --states <folder>"
    assert flat(out.stderr).count(hint) == 1, out.stderr
    out = cli("tasks", "validate", "pack", "--states", "elsewhere", cwd=tmp_path)
    assert out.returncode == 0 and "2/2 tasks valid" in out.stdout and hint not in flat(out.stderr), out.stderr
    # A task whose meta.json is broken as well stops its checks early; its state is missing all the same.
    (pack / "filesystem" / "standard" / "tiny" / "move_todo_1" / "meta.json").write_text("{broken")
    out = cli("tasks", "validate", "pack", cwd=tmp_path)
    assert out.returncode == 1 and "0/2 tasks valid" in out.stdout, (out.stdout, out.stderr)
    assert flat(out.stderr).count(hint) == 1, out.stderr


async def test_a_failed_prepare_environment_names_its_cause_in_the_record(tmp_path: Path) -> None:
    """Parity F9. Before: the infra record's error was `RuntimeError: <task>: prepare_environment.py failed (1): `
    and nothing more: the message went on with the script's traceback, which the record's one line cuts off."""
    from types import SimpleNamespace

    from mcpfleet.runner.llm.faults import one_line
    from mcpfleet.runner.services.pgstate import run_prepare
    from mcpfleet.runner.services.pgtrial import Login

    task = tmp_path / "task"
    task.mkdir()
    (task / "prepare_environment.py").write_text("import os\nimport mcpfleet_no_such_module_numpy\n")
    login = Login(host="127.0.0.1", port=1, database="d", user="u", password="secret-password-123")
    with pytest.raises(RuntimeError) as info:
        await run_prepare(SimpleNamespace(id="postgres/standard/vectors/t", path=task), login)  # type: ignore[arg-type]
    assert one_line(info.value) == (
        "RuntimeError: postgres/standard/vectors/t: prepare_environment.py failed (1): ModuleNotFoundError: No module "
        "named 'mcpfleet_no_such_module_numpy'"
    )
    assert "Traceback (most recent call last)" in str(info.value)  # the whole output stays for the trial's log


def test_records_are_never_written_through_a_linked_trial_folder(tmp_path: Path) -> None:
    """s29 H2, its second half. Before: a run folder from elsewhere whose trials/<id> linked to another folder had
    the trial's records (result.json, meta.json, messages.json, trial.log) replace that folder's files."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "result.json").write_text("precious\n")
    store = LocalStore(tmp_path / "run")
    (tmp_path / "run" / "trials").mkdir(parents=True)
    (tmp_path / "run" / "trials" / TRIAL).symlink_to(victim)
    store.write_files(TRIAL, {"meta.json": b"{}"})
    store.commit(TRIAL, b'{"trial_id": "x"}')
    assert [p.name for p in victim.iterdir()] == ["result.json"]
    assert (victim / "result.json").read_text() == "precious\n"
    trial = tmp_path / "run" / "trials" / TRIAL
    assert not trial.is_symlink() and sorted(p.name for p in trial.iterdir()) == ["meta.json", "result.json"]


def test_a_run_whose_trials_folder_is_a_link_is_refused_before_any_trial(recorded: Path) -> None:
    """The run's trials/ linked elsewhere would have every record (and a resume's clean-up) land there."""
    run = recorded / "runs" / "r1"
    (run / "trials").rename(recorded / "elsewhere")
    (run / "trials").symlink_to(recorded / "elsewhere")
    out = cli("run", str(recorded / "r1.yaml"), "--no-progress", cwd=recorded)
    assert_clean_error(out, "trials is a symbolic link", "--new-run")
    store = LocalStore(run)
    with pytest.raises(OSError, match="symbolic link"):
        store.commit(TRIAL, b"{}")
