"""Bad input and hostile task packs (issue 13, section 2): every error is one clear line naming the field,
never a traceback, and `validate` catches what `run` would fail on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import TINY_ORACLE, make_tiny_pack
from hostile import MCPFLEET, SCRIPTED, assert_clean_error, cli, flat, write_run

from mcpfleet.runner.spec.load import SpecError, parse_evalrun

LAUGHS = """apiVersion: mcpfleet.io/v1alpha1
kind: EvalRun
metadata: {name: laughs}
spec:
  models: [{name: oracle, model: scripted/oracle}]
  tasks:
    path: pack
    include: &l9 [*l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8]
"""


def billion_laughs() -> str:
    anchors = ['a0: &l0 ["lol"]'] + [f"a{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "x-laughs:\n" + "".join(f"  {a}\n" for a in anchors) + LAUGHS


@pytest.mark.parametrize("command", ["validate", "run"])
def test_billion_laughs_is_refused_fast_and_writes_nothing(tmp_path: Path, command: str) -> None:
    make_tiny_pack(tmp_path / "pack")
    path = tmp_path / "laughs.yaml"
    path.write_text(billion_laughs())
    assert path.stat().st_size < 1000
    start = time.monotonic()
    out = cli(command, str(path), cwd=tmp_path)
    assert time.monotonic() - start < 30
    assert_clean_error(out, "refused", "billion laughs")
    assert not (tmp_path / "runs").exists()


DUPLICATE = """apiVersion: mcpfleet.io/v1alpha1
kind: EvalRun
metadata: {name: twice}
spec:
  models:
    - &oracle {name: oracle, model: scripted/oracle}
    - {<<: *oracle, name: second}
  attempts: 5
  tasks: {path: pack}
  attempts: 1
"""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path: Path, command: str) -> None:
    """PyYAML keeps the last of two equal keys silently: `attempts: 5` ... `attempts: 1` ran 1 attempt while
    the reader saw 5. A key after a `<<` merge still overrides the merged one (the second model above)."""
    make_tiny_pack(tmp_path / "pack")
    path = tmp_path / "twice.yaml"
    path.write_text(DUPLICATE)
    assert_clean_error(
        cli(command, str(path), cwd=tmp_path), "found the key 'attempts' twice (first on line 8)", "line 10"
    )
    assert not (tmp_path / "runs").exists()
    path.write_text(DUPLICATE.replace("  attempts: 1\n", ""))
    out = cli("validate", str(path), cwd=tmp_path)
    assert out.returncode == 0 and "2 models x 1 task x 5 attempts" in flat(out.stdout), out.stderr


def test_a_tilde_in_paths_is_the_home_folder_not_a_folder_named_tilde(tmp_path: Path) -> None:
    """`output.uri: ~/runs` made a folder literally named `~` beside the EvalRun file."""
    home, here = tmp_path / "home", tmp_path / "here"
    make_tiny_pack(home / "pack")
    here.mkdir()
    path = write_run(here, {"models": [SCRIPTED], "tasks": {"path": "~/pack"}, "output": {"uri": "~/runs"}}, "tilde")
    out = cli("run", str(path), "--no-progress", cwd=here, env={"HOME": str(home)})
    assert out.returncode == 0, out.stderr
    assert (home / "runs" / "tilde" / "summary.json").is_file() and not (here / "~").exists()


def test_oversized_annotations_and_spec_are_refused_naming_the_field() -> None:
    base = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "spec": {"models": [SCRIPTED]}}
    big = {**base, "metadata": {"name": "big", "annotations": {"note": "x" * 300_000}}}
    with pytest.raises(SpecError) as err:
        parse_evalrun(big)
    assert any(p.startswith("metadata.annotations: ") and "at most 262,144" in p for p in err.value.problems)
    huge = {**base, "metadata": {"name": "huge"}}
    huge["spec"] = {"models": [SCRIPTED], "tasks": {"include": [f"filesystem/*/{'c' * 60}{i}/*" for i in range(4000)]}}
    with pytest.raises(SpecError) as err:
        parse_evalrun(huge)
    assert any(p.startswith("spec: ") and "at most 262,144" in p for p in err.value.problems)


@pytest.mark.parametrize("command", ["validate", "run"])
def test_output_under_a_file_is_caught_by_validate_and_run(tmp_path: Path, command: str) -> None:
    make_tiny_pack(tmp_path / "pack")
    (tmp_path / "afile").write_text("not a folder")
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}, "output": {"uri": "afile/runs"}})
    out = cli(command, str(path), cwd=tmp_path)
    assert_clean_error(out, "spec.output.uri: 'afile/runs'", "is under a file", "give a folder path")


@pytest.mark.parametrize("command", ["validate", "run"])
def test_read_only_output_is_caught_by_validate_and_run(tmp_path: Path, command: str) -> None:
    # /sys is read-only for root too (permission bits would not stop root: a write probe does).
    make_tiny_pack(tmp_path / "pack")
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}, "output": {"uri": "/sys/mcpfleet"}})
    out = cli(command, str(path), cwd=tmp_path)
    assert_clean_error(out, "spec.output.uri: '/sys/mcpfleet' cannot be written", "give a writable folder")


def test_validate_reports_an_unset_api_key_env_like_run(tmp_path: Path) -> None:
    make_tiny_pack(tmp_path / "pack")
    model = {"name": "gpt", "model": "openai/gpt-5", "apiKeyEnv": "MCPFLEET_TEST_UNSET_KEY"}
    path = write_run(tmp_path, {"models": [model], "tasks": {"path": "pack"}})
    env = {k: v for k, v in os.environ.items() if k != "MCPFLEET_TEST_UNSET_KEY"}
    line = "spec.models[0].apiKeyEnv: environment variable MCPFLEET_TEST_UNSET_KEY is not set"
    for command in ("validate", "run"):
        out = subprocess.run(
            [str(MCPFLEET), command, str(path)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
        )
        assert_clean_error(out, line)


def test_tasks_path_that_is_a_file_says_so(tmp_path: Path) -> None:
    (tmp_path / "pack.txt").write_text("not a pack")
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack.txt"}})
    out = cli("validate", str(path), cwd=tmp_path)
    assert_clean_error(out, f"spec.tasks.path: 'pack.txt' (resolved: {tmp_path / 'pack.txt'}) is a file")


def test_tasks_path_escaping_with_dotdot_is_reported_resolved(tmp_path: Path) -> None:
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    path = write_run(here, {"models": [SCRIPTED], "tasks": {"path": "../../nowhere/pack"}})
    out = cli("validate", str(path), cwd=tmp_path)
    assert_clean_error(
        out, f"spec.tasks.path: '../../nowhere/pack' (resolved: {tmp_path / 'nowhere' / 'pack'}) does not exist"
    )


def test_no_task_selected_names_the_filter_and_what_exists(tmp_path: Path) -> None:
    make_tiny_pack(tmp_path / "pack")
    tasks = {"path": "pack", "services": ["filesystem"], "categories": ["nonesuch"]}
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": tasks})
    out = cli("validate", str(path), cwd=tmp_path)
    assert_clean_error(out, "spec.tasks.categories: ['nonesuch'] matches none of the 1 task left", "there are: tiny")
    tasks = {"path": "pack", "exclude": ["filesystem/*"]}
    out = cli("validate", str(write_run(tmp_path, {"models": [SCRIPTED], "tasks": tasks})), cwd=tmp_path)
    assert_clean_error(out, "spec.tasks.exclude: ['filesystem/*'] removes every remaining task", "move_todo_0")


@pytest.mark.parametrize("damage", ["no-verify", "broken-meta"])
def test_a_broken_pack_is_refused_before_any_trial(tmp_path: Path, damage: str) -> None:
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    task = pack / "filesystem" / "standard" / "tiny" / "move_todo_1"
    if damage == "no-verify":
        (task / "verify.py").unlink()
        needle = "filesystem/standard/tiny/move_todo_1: missing verify.py"
    else:
        (task / "meta.json").write_text("{broken")
        needle = "move_todo_1/meta.json: not valid JSON"
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}, "agent": "oracle"})
    out = cli("run", str(path), "--no-progress", cwd=tmp_path)
    assert_clean_error(out, "task pack: 1 problem in the selected tasks; nothing was run", needle)
    assert not (tmp_path / "runs" / "hostile" / "trials").exists()
    shutil.rmtree(task)  # the rest of the pack runs
    out = cli("run", str(path), "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    results = list((tmp_path / "runs" / "hostile" / "trials").glob("*/result.json"))
    assert [json.loads(r.read_text())["passed"] for r in results] == [True]


@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_evalrun_path_that_is_a_named_pipe_is_refused_not_waited_on(tmp_path: Path, command: str) -> None:
    """A FIFO nothing writes to blocked open() for ever (no output, killed only by a timeout); one a writer
    holds, as `<(...)` and a piped /dev/stdin are, is still read."""
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    out = cli(command, str(fifo), cwd=tmp_path)
    assert_clean_error(out, "(file): cannot read: a named pipe that nothing wrote to within 1 s")
    assert time.monotonic() - started < 60
    make_tiny_pack(tmp_path / "pack")
    text = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": str(tmp_path / "pack")}}).read_text()
    writer = subprocess.Popen(["sh", "-c", f'sleep 0.5; printf %s "$0" > {fifo}', text])  # blocks until we read
    try:
        held = cli("validate", str(fifo), cwd=tmp_path)
    finally:
        writer.kill()
        writer.wait()
    assert held.returncode == 0 and "valid" in held.stdout, held.stderr


@pytest.mark.parametrize(
    ("script", "said"),
    [
        (None, "No such file or directory"),
        ("{not json", 'expected {"turns": [...]}'),
        ('{"steps": []}', 'expected {"turns": [...]}'),
        ('{"turns": [{"tool_calls": [{"arguments": {}}]}]}', 'expected {"turns": [...]}: turns must be objects'),
    ],
    ids=["missing", "not-json", "no-turns", "bad-turn"],
)
def test_a_script_model_that_cannot_be_played_is_refused_by_validate(
    tmp_path: Path, script: str | None, said: str
) -> None:
    """`scripted/script=<file>` was never opened before the run: a missing or broken file was valid, then every
    trial was scored as the model's llm_api_error. A relative path is read from the EvalRun file's folder."""
    make_tiny_pack(tmp_path / "spec" / "pack")
    if script is not None:
        (tmp_path / "spec" / "play.json").write_text(script)
    model = {"name": "scripted", "model": "scripted/script=play.json"}
    path = write_run(tmp_path / "spec", {"models": [model], "tasks": {"path": "pack"}})
    out = cli("validate", str(path), cwd=tmp_path)
    where = f"(a relative path is read from the EvalRun file's folder, {tmp_path / 'spec'})"
    assert_clean_error(out, f"spec.models[0].model: script {tmp_path / 'spec' / 'play.json'}: {said}", where)


def test_a_relative_script_is_played_from_the_evalrun_files_folder_wherever_run_is_started(tmp_path: Path) -> None:
    """validate and the scripted server read a relative script from one place, the EvalRun file's folder (the
    server read it from `mcpfleet run`'s current folder: the same spec passed or failed by where it was run)."""
    spec = tmp_path / "spec"
    make_tiny_pack(spec / "pack")
    probe = [{"tool_calls": [{"name": "list_allowed_directories", "arguments": {}}]}]
    steps = [{"tool_calls": [{"name": s["tool"], "arguments": s["arguments"]}]} for s in TINY_ORACLE["steps"]]
    (spec / "play.json").write_text(json.dumps({"turns": [*probe, *steps, {"content": "Done."}]}))
    (tmp_path / "elsewhere").mkdir()
    model = {"name": "scripted", "model": "scripted/script=play.json"}
    path = write_run(spec, {"models": [model], "tasks": {"path": "pack"}, "output": {"uri": "runs"}})
    assert cli("validate", str(path), cwd=tmp_path / "elsewhere").returncode == 0
    out = cli("run", str(path), "--no-progress", cwd=tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    (record,) = [json.loads(p.read_text()) for p in (spec / "runs" / "hostile" / "trials").glob("*/result.json")]
    assert record["passed"] is True and record["failure"] is None, record.get("error")


def test_the_scripted_oracle_over_a_description_two_tasks_share_is_refused_before_any_trial(tmp_path: Path) -> None:
    """A variant task (another oracle) with the selected task's description made the scripted oracle replay the
    variant's oracle, even though it was not selected: pass@1 0.00, no warning. validate and run now refuse."""
    pack = make_tiny_pack(tmp_path / "pack")
    task = pack / "filesystem" / "standard" / "tiny" / "move_todo_0"
    variant = task.with_name("aaa_variant")
    shutil.copytree(task, variant)
    (variant / "meta.json").write_text((task / "meta.json").read_text().replace("move_todo_0", "aaa_variant"))
    (variant / "oracle.json").write_text(json.dumps({"steps": TINY_ORACLE["steps"][:1]}))
    tasks = {"path": "pack", "include": ["*/move_todo_0"]}
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": tasks})
    for command in ("validate", "run"):
        out = cli(command, str(path), cwd=tmp_path)
        assert_clean_error(
            out,
            "filesystem/standard/tiny/move_todo_0: its description.md is also that of filesystem/standard/tiny/"
            "aaa_variant, with different oracles, so the scripted oracle cannot tell which task to replay",
        )
    assert not (tmp_path / "runs").exists()
    noop = write_run(tmp_path, {"models": [{"name": "noop", "model": "scripted/noop"}], "tasks": tasks}, "noop")
    assert cli("validate", str(noop), cwd=tmp_path).returncode == 0  # only the oracle needs to tell them apart


def test_paths_and_names_holding_markup_are_printed_literally(tmp_path: Path) -> None:
    """The s29 audit: a folder named `mk[/x]` made `validate`, `tasks list`, `toolcalls generate` and `toolcalls
    task` end in a Rich MarkupError traceback (exit 1), the last two after their files were written, so a script
    saw a failure for work done; other tags were applied (a `[link=...]` difficulty became a hyperlink)."""
    odd = tmp_path / "mk[/x][link=https://evil.example]"
    make_tiny_pack(odd / "pack")
    path = write_run(odd, {"models": [{"name": "oracle", "model": "scripted/oracle"}], "tasks": {"path": "pack"}})
    out = cli("validate", str(path), cwd=tmp_path)
    assert out.returncode == 0 and f"{path}: valid;" in flat(out.stdout), (out.stdout, out.stderr)
    [meta] = (odd / "pack").rglob("meta.json")
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "difficulty": "[i]L1[/i]"}))
    out = cli("tasks", "list", str(odd / "pack"), cwd=tmp_path)
    assert out.returncode == 0 and "[i]L1[/i]" in out.stdout, (out.stdout, out.stderr)
    out = cli("toolcalls", "generate", "--out", str(odd / "gen"), "--n", "5", cwd=tmp_path)
    assert out.returncode == 0 and "mk[/x]" in flat(out.stdout), (out.stdout, out.stderr)
    data = odd / "gen" / "toolcalls.jsonl"
    out = cli("toolcalls", "task", str(data), "--pack", str(odd / "tc"), "--name", "t1", cwd=tmp_path)
    assert out.returncode == 0 and f"task: {odd / 'tc'}" in flat(out.stdout), (out.stdout, out.stderr)


def test_a_symbolic_link_that_loops_is_one_clear_error_not_a_traceback(tmp_path: Path) -> None:
    """The s29 audit: Python 3.11's Path.resolve() raises RuntimeError on a looping link, which `validate` (a
    `tasks.path` or `tasks.statesPath` that loops), `tasks validate`, `report` and `export` printed as a
    traceback."""
    (tmp_path / "loop").symlink_to("loop")
    path = write_run(tmp_path, {"models": [{"name": "oracle", "model": "scripted/oracle"}], "tasks": {"path": "loop"}})
    assert_clean_error(cli("validate", str(path), cwd=tmp_path), "Symlink loop", "a symbolic link that loops")
    assert_clean_error(cli("tasks", "validate", "loop", cwd=tmp_path), "a symbolic link that loops")
    assert_clean_error(cli("report", "loop", "-o", "r.html", cwd=tmp_path), "a symbolic link that loops")
