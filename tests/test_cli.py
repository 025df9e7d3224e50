"""The ``mcpfleet`` console script as a user runs it: a subprocess, its exit code, stdout and stderr."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, TASKS

from mcpfleet.runner.tasks.discovery import discover

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
BUNDLED = discover(TASKS)


def cli(*args: str, cwd: Path = REPO, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # a pipe, as in CI or `| grep`
    return subprocess.run(
        [str(MCPFLEET), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def flat(text: str) -> str:
    """Rich wraps at 80 columns off a terminal; compare with whitespace folded."""
    return " ".join(text.split())


def evalrun(tmp_path: Path, spec: dict, name: str = "cli") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": name}, "spec": spec}
        )
    )
    return path


def test_validate_quickstart_prints_the_plan_size() -> None:
    n = len([t for t in BUNDLED if t.service == "filesystem"])
    assert n == 21
    out = cli("validate", "examples/quickstart.yaml")
    assert out.returncode == 0, out.stderr
    assert f"examples/quickstart.yaml: valid; 2 models x {n} tasks x 1 attempt = {2 * n} trials" in flat(out.stdout)


def test_validate_invalid_file_names_the_field_and_exits_2(tmp_path: Path) -> None:
    path = evalrun(tmp_path, {"models": [{"name": "m", "model": "scripted/oracle"}], "attempts": 0})
    out = cli("validate", str(path))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr + out.stdout
    assert out.stdout == ""
    assert f"error: invalid EvalRun in {path}:" in flat(out.stderr)
    assert "spec.attempts: must be >= 1" in [line.strip() for line in out.stderr.splitlines()]


def test_validate_names_a_model_string_no_provider_matches(tmp_path: Path) -> None:
    """A mistyped provider prefix (or a blank model) fails every trial before any request; it was recorded as the
    model's llm_api_error trial after trial. validate (and run) name the field instead; real prefixes pass."""
    models = [
        {"name": "typo", "model": "anthropc/claude-sonnet-4"},
        {"name": "fine", "model": "anthropic/claude-sonnet-4-5"},
        {"name": "bare", "model": "gpt-4o"},
    ]
    out = cli("validate", str(evalrun(tmp_path, {"models": models, "tasks": {"path": str(TASKS)}})))
    assert out.returncode == 2 and "Traceback" not in out.stderr + out.stdout, out.stderr
    text = flat(out.stderr)
    assert "spec.models[0].model: 'anthropc/claude-sonnet-4' names no provider LiteLLM knows" in text
    assert (
        "spec.models[1].model" not in text and "spec.models[2].model" not in text and "Provider List" not in out.stdout
    )
    # (they have no key: that is named apart, issue 47 §5)
    assert "spec.models[1]: 'anthropic/claude-sonnet-4-5' needs an API key (ANTHROPIC_API_KEY)" in text
    blank = [{"name": "blank", "model": "   "}]  # refused by the spec itself, before LiteLLM is asked
    out = cli("validate", str(evalrun(tmp_path, {"models": blank, "tasks": {"path": str(TASKS)}})))
    assert out.returncode == 2 and "spec.models[0].model: '   ' starts or ends with whitespace" in out.stderr


def test_validate_names_a_parameter_the_model_does_not_take(tmp_path: Path) -> None:
    """LiteLLM drops such a parameter from every call without a word (MCPMark's run would fail on it), and the run
    would still be labelled with it: reasoningEffort high on gpt-4.1 exported as gpt-4.1-high. validate (and run)
    name the field; parameters a model takes, and models LiteLLM has no list for, pass."""
    models = [
        {"name": "old", "model": "openai/gpt-4.1", "params": {"reasoningEffort": "high", "temperature": 0.2}},
        {"name": "gpt5", "model": "openai/gpt-5", "params": {"reasoningEffort": "high", "topP": 0.9}},
        {
            "name": "claude",
            "model": "anthropic/claude-sonnet-4-5",
            "params": {"reasoningEffort": "low", "maxTokens": 8},
        },
        {"name": "mine", "model": "openai/my-model", "apiBase": "http://127.0.0.1:9/v1", "params": {"seed": 3}},
    ]
    out = cli("validate", str(evalrun(tmp_path, {"models": models, "tasks": {"path": str(TASKS)}})))
    assert out.returncode == 2 and "Traceback" not in out.stderr + out.stdout, out.stderr
    text = flat(out.stderr)
    assert "spec.models[0].params.reasoningEffort: LiteLLM lists no 'reasoning_effort'" in text
    assert "spec.models[1].params.topP: LiteLLM lists no 'top_p' among the parameters 'openai/gpt-5'" in text
    assert "spec.models[0].params.temperature" not in text and "spec.models[1].params.reasoningEffort" not in text
    assert "spec.models[2].params" not in text and "spec.models[3].params" not in text


def test_validate_missing_file_is_a_clean_error(tmp_path: Path) -> None:
    out = cli("validate", str(tmp_path / "nope.yaml"))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "(file): cannot read: No such file or directory" in out.stderr


def test_error_messages_are_printed_verbatim_not_as_rich_markup(tmp_path: Path) -> None:
    """Messages go through rich: unescaped, '[a-z0-9]' in a pattern was eaten as a style tag and the user
    was told the wrong pattern ('^([-.a-z0-9]*)?$') before 5204db7."""
    path = evalrun(
        tmp_path,
        {"models": [{"name": "m", "model": "openai/gpt-5", "apiKeySecretRef": {"name": "Bad_Name", "key": "k"}}]},
    )
    out = cli("validate", str(path))
    assert out.returncode == 2
    assert "spec.models[0].apiKeySecretRef.name: must match ^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$" in flat(out.stderr)


def test_tasks_list_counts_all_bundled_tasks() -> None:
    out = cli("tasks", "list")
    assert out.returncode == 0, out.stderr
    assert f"{len(BUNDLED)} tasks in {TASKS}" in out.stdout
    rows = [line for line in out.stdout.splitlines() if line.startswith("│ filesystem/standard/")]
    assert len(rows) == 21


def test_tasks_list_prints_whole_task_ids_off_a_terminal() -> None:
    """At rich's default 80 columns (any pipe) the id column used to be cut ('.../apply_late…')."""
    out = cli("tasks", "list")
    missing = [t.id for t in BUNDLED if t.id not in out.stdout]
    assert not missing, out.stdout


def test_tasks_list_takes_any_folder_inside_a_pack_as_tasks_validate_does() -> None:
    """`tasks list tasks/filesystem` printed "0 tasks" though `tasks validate tasks/filesystem` checks its 15."""
    for folder, service in [("filesystem", "filesystem"), ("postgres", "postgres")]:
        mine = [t.id for t in BUNDLED if t.service == service]
        out = cli("tasks", "list", str(TASKS / folder))
        assert out.returncode == 0, out.stderr
        assert f"{len(mine)} tasks in {TASKS / folder}" in out.stdout, out.stdout
        rows = [line for line in out.stdout.splitlines() if line.startswith("│ ")]
        assert len(rows) == len(mine) and all(f"│ {t} " in out.stdout for t in mine), out.stdout
    category = TASKS / "filesystem" / "standard" / "course_records"
    under = [t.id for t in BUNDLED if t.path.is_relative_to(category)]
    out = cli("tasks", "list", str(category.relative_to(REPO)))
    assert len(under) > 1 and f"{len(under)} tasks in tasks/filesystem/standard/course_records" in out.stdout


def test_a_count_of_one_takes_the_singular(tmp_path: Path) -> None:
    """`tasks list` of one task folder said "1 tasks"; `validate` said "1 model(s) x 1 task(s) x 1 attempt(s)"."""
    from mcpfleet.runner._util.plural import plural

    assert (plural(1, "task"), plural(0, "task"), plural(2, "trial has", "trials have")) == (
        "1 task",
        "0 tasks",
        "2 trials have",
    )
    assert plural(1_500_000, "trial") == "1,500,000 trials" and plural("?", "trial") == "? trials"  # type: ignore[arg-type]
    one = next(t for t in BUNDLED if t.service == "filesystem")
    out = cli("tasks", "list", str(one.path))
    assert out.returncode == 0 and f"1 task in {one.path}" in out.stdout, out.stdout + out.stderr
    spec = {
        "models": [{"name": "oracle", "model": "scripted/oracle"}],
        "tasks": {"path": str(TASKS), "include": [one.id]},
    }
    out = cli("validate", str(evalrun(tmp_path, spec)))
    assert out.returncode == 0 and "valid; 1 model x 1 task x 1 attempt = 1 trial" in flat(out.stdout), out.stdout


def oracle_run(tmp_path: Path, pack: Path) -> Path:
    """The scripted oracle over ``pack``, recorded under tmp_path/runs/cli."""
    spec = {
        "models": [{"name": "oracle", "model": "scripted/oracle"}],
        "tasks": {"path": str(pack)},
        "output": {"uri": str(tmp_path / "runs")},
    }
    return evalrun(tmp_path, spec)


def test_trial_prints_one_json_line_and_writes_the_record(
    tmp_path: Path, session_pack: Path, scripted_url: str
) -> None:
    path = oracle_run(tmp_path, session_pack)
    task = "filesystem/standard/tiny/move_todo_1"
    out = cli("trial", str(path), "--model", "oracle", "--task", task, "--scripted-url", scripted_url)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1, out.stdout
    trial_id = "oracle.filesystem.standard.tiny.move_todo_1.1"
    assert json.loads(lines[0]) == {"trial_id": trial_id, "passed": True, "failure": None}
    record = tmp_path / "runs" / "cli" / "trials" / trial_id
    result = json.loads((record / "result.json").read_text())
    assert (result["passed"], result["task_id"], result["attempt"], result["run"]) == (True, task, 1, "cli")
    assert result["verifier"]["exit_code"] == 0
    assert (record / "messages.json").is_file() and (record / "meta.json").is_file()
    assert [p.name for p in (tmp_path / "runs" / "cli" / "trials").iterdir()] == [trial_id]  # only that trial


def test_trial_not_in_the_plan_exits_2(tmp_path: Path, session_pack: Path) -> None:
    path = oracle_run(tmp_path, session_pack)
    out = cli("trial", str(path), "--model", "other", "--task", "filesystem/standard/tiny/move_todo_0")
    assert out.returncode == 2
    assert "no trial (model=other, task=filesystem/standard/tiny/move_todo_0, attempt=1)" in flat(out.stderr)
    assert not (tmp_path / "runs").exists()


def test_crd_output_is_the_committed_crd() -> None:
    out = cli("crd")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (REPO / "crds" / "evalrun.yaml").read_text()


def _table_text(summary: dict[str, Any]) -> str:
    from rich.console import Console

    from mcpfleet.runner.report.table import summary_table

    console = Console(width=300, record=True)
    console.print(summary_table(summary))
    return console.export_text()


def _row(attempts: int) -> dict[str, Any]:
    return {
        "model": "m",
        "service": "filesystem",
        "trials": 2 * attempts,
        "attempts": attempts,
        "pass_at_1": 0.5,
        "pass_at_1_std": 0.0,
        "pass_at_k": 0.5,
        "pass_hat_k": 0.5,
        "pass_at_k_unbiased": 0.5,
        "pass_hat_k_unbiased": 0.5,
        "avg_turns": 3.0,
        "avg_tool_calls": 2.0,
        "avg_tokens": 100.0,
        "cost_usd": None,
        "failures": {"verifier_failed": 1},
    }


def test_summary_table_names_its_columns_by_the_runs_k() -> None:
    base = {"run": "r", "trials_recorded": 2, "trials_planned": 2, "spec_hash": "h"}
    one = _table_text({**base, "rows": [_row(1)]})
    header = next(line for line in one.splitlines() if "pass@1" in line)
    assert header.count("pass@") == 1 and "pass^" not in header and "k=1" in one
    four = _table_text({**base, "rows": [_row(4)]})
    header = next(line for line in four.splitlines() if "pass@1" in line)
    assert all(c in header for c in ("pass@4", "pass^4", "pass@4 unb.", "pass^4 unb.")) and "k=4" in four


MODELS = ("scripted-oracle", "gpt-5-mini-2025-08-07", "claude-sonnet-4-5")


def _realistic(attempts: int) -> dict[str, Any]:
    """A run of three real-looking models over two services (each model's 'all' row included)."""
    rows = []
    for model in MODELS:
        for service in ("filesystem", "postgres", "all"):
            rows.append(
                {
                    **_row(attempts),
                    "model": model,
                    "service": service,
                    "pass_at_1": 0.533,
                    "pass_at_1_std": 0.041 if attempts > 1 else 0.0,
                    "avg_turns": 12.3,
                    "avg_tool_calls": 11.25,
                    "avg_tokens": 123456.0,
                    "cost_usd": 1.2345,
                    "failures": {"verifier_failed": 4, "max_turns": 1},
                    "not_scored": {"provider_error": 2},
                }
            )
    return {"run": "quickstart", "trials_recorded": 90, "trials_planned": 90, "spec_hash": "0123abcd", "rows": rows}


@pytest.mark.parametrize("attempts", [1, 4])
@pytest.mark.parametrize("width", [80, 120])
def test_summary_table_fits_the_terminal_with_nothing_cut(width: int, attempts: int) -> None:
    """At 80 columns (a terminal's default; also rich's off a terminal) the table cut every model name to
    'scri…' and its headers to 'pass…'. Each model name, header and failure count is shown whole."""
    from rich.console import Console

    from mcpfleet.runner.report.table import summary_table

    console = Console(width=width, record=True)
    console.print(summary_table(_realistic(attempts)))
    text = console.export_text()
    lines = text.splitlines()
    assert max(map(len, lines)) <= width, text
    assert "…" not in text, text
    header_lines = [line for line in lines if line.startswith("┃")]
    headers = " ".join(header_lines)
    for model in MODELS:  # on a row of its own table(s), whole
        assert any(line.startswith(f"│ {model} ") for line in lines), (model, text)
    essential = ["model", "service", "trials", "pass@1"] + ([f"pass@{attempts}", f"pass^{attempts}"] * (attempts > 1))
    assert all(f" {h} " in headers for h in essential), text
    usage = ["turns", "tool calls", "tokens", "cost $"]
    others = usage + ([f"pass@{attempts} unb.", f"pass^{attempts} unb."] * (attempts > 1))
    for h in others:  # a column, or named as left out
        assert f" {h} " in headers or h in next((x for x in lines if x.startswith("not shown")), ""), (h, text)
    assert all(h in headers for h in usage), text  # the usage always has room at 80 columns
    assert "verifier_failed 4, max_turns 1" in text and "provider_error 2" in text
    if width >= 120:  # every figure of a k = 1 run in one table
        assert attempts > 1 or len(header_lines) == 1, text


def test_summary_table_shows_provider_text_literally() -> None:
    """A stopped model's reason is a provider's words: "[/v1/keys]" is not rich markup (it crashed the table),
    and escape sequences (set the title, clear the screen) never reach the terminal."""
    import io

    from rich.console import Console

    from mcpfleet.runner.cli.app import escape
    from mcpfleet.runner.report.table import summary_table

    why = "config_error: Invalid key; see [/v1/keys] \x1b]0;PWNED\x07\x1b[2J[blink]all passed[/blink]"
    summary = {
        "run": "r",
        "trials_recorded": 1,
        "trials_planned": 2,
        "spec_hash": "h",
        "rows": [{**_row(1), "failures": {"[bold]x": 1}}],
        "stopped": {"m": why},
    }
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="truecolor", width=300).print(summary_table(summary))
    raw = out.getvalue()
    assert "[/v1/keys]" in raw and "[blink]all passed[/blink]" in raw and "[bold]x 1" in raw
    assert "\x1b]0;" not in raw and "\x1b[2J" not in raw and "\x07" not in raw
    assert escape("a [/b] \x1b[2J\ud83d\nnext") == "a \\[/b] [2J\ufffd\nnext"


def test_a_run_measured_nothing_only_when_no_trial_or_case_was_scored() -> None:
    """A tool-call run whose judge failed on some cases of every shard has every shard unscored (each runs again
    on resume), yet the cases scored by their gold calls count: it measured something. It exited 5 saying "no
    trial was scored ... the run measured nothing"."""
    from mcpfleet.runner.cli.app import measured_nothing

    shards = {"trials_recorded": 2, "not_scored": {"infra_error": 2}}
    assert not measured_nothing({**shards, "rows": [{"scored": 61}]})
    assert measured_nothing({**shards, "rows": [{"scored": 0}]})
    assert not measured_nothing({"trials_recorded": 3, "not_scored": {"infra_error": 2}, "rows": [{"scored": 1}]})
    assert not measured_nothing({"trials_recorded": 0, "not_scored": {}, "rows": []})


def test_printed_paths_are_normalised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpfleet.runner.cli.app import shown_path

    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / "examples" / ".." / "runs" / "quickstart") == "runs/quickstart"
    assert shown_path("s3://bucket/runs/x") == "s3://bucket/runs/x"
    assert shown_path("/opt/../var/runs") == "/var/runs"


def test_tasks_validate_narrows_to_any_folder_inside_a_pack(tmp_path: Path) -> None:
    """A service, difficulty, category or task folder validates just the tasks under it (the pack root is
    found above it); a folder outside any pack says so."""
    from conftest import make_tiny_pack

    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    category = pack / "filesystem" / "standard" / "tiny"
    out = cli("tasks", "validate", str(category), "--concurrency", "1", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "move_todo_0" in out.stdout and "move_todo_1" in out.stdout
    one = cli("tasks", "validate", str(category / "move_todo_1"), "--concurrency", "1", timeout=300)
    assert one.returncode == 0, one.stdout + one.stderr
    assert "move_todo_1" in one.stdout and "move_todo_0" not in one.stdout
    (tmp_path / "empty").mkdir()
    none = cli("tasks", "validate", str(tmp_path / "empty"))
    assert none.returncode != 0 and "no task found" in flat(none.stdout + none.stderr)


def test_every_command_starts_without_the_toolcall_checkers_grammar() -> None:
    """Importing the CLI built jsonschema's rfc3987 grammar (~3.5 s of CPU) for every command, `validate` and
    each trial pod's `mcpfleet trial` included; only the commands that check tool calls need it."""
    code = (
        "import sys, mcpfleet.runner.cli.app; print([m for m in ('jsonschema', 'rfc3987_syntax') if m in sys.modules])"
    )
    out = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
    from mcpfleet.runner.toolcalls import LABELS, classify_call  # still importable by name, on first use

    assert callable(classify_call) and len(LABELS) == 4


@pytest.mark.parametrize("value", ["0", "-1"])
def test_run_refuses_a_concurrency_below_one_before_anything_runs(tmp_path: Path, value: str) -> None:
    """-1 was a ValueError traceback after run.json was written; 0 was silently ignored."""
    path = evalrun(tmp_path, {"models": [{"name": "m", "model": "scripted/oracle"}], "output": {"uri": "out"}})
    out = cli("run", str(path), "--concurrency", value, "--no-progress")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    said = flat(out.stderr.replace("│", " "))
    assert "Invalid value for '--concurrency'" in said and "greater than or equal to 1" in said, said
    assert not (tmp_path / "out").exists()


def test_validate_notes_what_only_the_operator_can_run(tmp_path: Path) -> None:
    """A Secret reference without apiKeyEnv is valid for the operator, but `mcpfleet run` refuses it: validate
    said plainly "valid", though README says it checks what run would fail on."""
    model = {"name": "m", "model": "openai/gpt-5", "apiKeySecretRef": {"name": "llm-keys", "key": "openai"}}
    out = cli("validate", str(evalrun(tmp_path, {"models": [model], "tasks": {"path": str(TASKS)}})))
    assert out.returncode == 0, out.stderr
    assert "valid;" in out.stdout
    assert "note: for the operator only; `mcpfleet run` would refuse: spec.models[0].apiKeySecretRef" in flat(
        out.stderr
    )


def test_each_record_names_its_harness_and_a_run_finished_by_another_is_flagged(
    tmp_path: Path, session_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run resumed under another runner image (or mcpfleet version) mixes two harnesses' behaviour in one
    score: each record says what ran it, summary.json counts them, and the run's output says so."""
    from importlib.metadata import version

    path = oracle_run(tmp_path, session_pack)
    monkeypatch.delenv("MCPFLEET_RUNNER_IMAGE", raising=False)
    first = cli("run", str(path), "--no-progress", timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    mine = f"mcpfleet {version('mcpfleet')}"
    root = tmp_path / "runs" / "cli"
    records = sorted((root / "trials").glob("*/result.json"))
    assert len(records) == 3 and {json.loads(r.read_text())["harness"] for r in records} == {mine}
    assert json.loads((root / "summary.json").read_text())["harness"] == {mine: 3}
    assert "harnesses" not in flat(first.stderr)

    records[0].unlink()  # as if interrupted; the resume runs it under a fixed image
    monkeypatch.setenv("MCPFLEET_RUNNER_IMAGE", "registry.example/runner:fixed")
    second = cli("run", str(path), "--no-progress", timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    other = f"{mine} (registry.example/runner:fixed)"
    assert json.loads(records[0].read_text())["harness"] == other
    assert json.loads((root / "summary.json").read_text())["harness"] == {mine: 2, other: 1}
    note = flat(second.stderr)
    assert "run by 2 harnesses" in note and f"{mine} (2 trials)" in note and f"{other} (1 trial)" in note


def test_a_late_try_never_replaces_a_scored_record_of_its_trial(
    tmp_path: Path, session_pack: Path, scripted_url: str
) -> None:
    """A pod the operator gave up on (a partitioned node) may finish after its retry did: its record must not
    replace the stored scored one, nor its files mix with it. An unscored record (an infra error) is replaced."""
    path = oracle_run(tmp_path, session_pack)
    task = "filesystem/standard/tiny/move_todo_1"
    args = ("trial", str(path), "--model", "oracle", "--task", task, "--scripted-url", scripted_url)
    assert cli(*args).returncode == 0
    record = tmp_path / "runs" / "cli" / "trials" / "oracle.filesystem.standard.tiny.move_todo_1.1"
    stored = json.loads((record / "result.json").read_text())
    stored.update(passed=False, failure="verifier_failed")  # what the retry recorded
    (record / "result.json").write_text(json.dumps(stored))
    (record / "messages.json").write_text("[]")
    late = cli(*args)
    assert late.returncode == 0, late.stderr
    assert json.loads((record / "result.json").read_text()) == stored and (record / "messages.json").read_text() == "[]"
    assert "not stored: a scored record of this trial is stored already" in flat(late.stderr)
    stored.update(failure="infra_error")  # an infrastructure error measured nothing: the next try replaces it
    (record / "result.json").write_text(json.dumps(stored))
    assert cli(*args).returncode == 0
    again = json.loads((record / "result.json").read_text())
    assert again["passed"] is True and again["started_at"] != stored["started_at"]
    assert (record / "messages.json").read_text() != "[]"


def test_every_commands_help_renders() -> None:
    """Rich reads ``[...]`` in a help string as markup: ``RUN[/UID]`` crashed ``export --help`` with a traceback."""
    import typer.main
    from typer.testing import CliRunner

    from mcpfleet.runner.cli.app import app

    def paths(cmd: Any, prefix: list[str]) -> list[list[str]]:
        found = [prefix]
        for name, sub in getattr(cmd, "commands", {}).items():  # typer's groups (its own click fork)
            found += paths(sub, [*prefix, name])
        return found

    commands = paths(typer.main.get_command(app), [])
    assert ["export"] in commands and ["tasks", "validate"] in commands
    runner = CliRunner()
    for path in commands:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0 and result.exception is None, (path, result.output, result.exception)
        assert "Usage" in result.output, (path, result.output)


def test_materialise_refuses_a_dest_that_is_no_folder(tmp_path: Path) -> None:
    """`materialise --dest /dev/null` (or any existing file) was a FileExistsError traceback from copytree."""
    task = "filesystem/standard/office_desktop/extract_contacts_csv"
    afile = tmp_path / "afile"
    afile.write_text("keep")
    for dest, said in [
        (afile, f"--dest {afile} is a file; give a folder to fill"),
        (Path("/dev/null"), "--dest /dev/null is not a folder; give a folder to fill"),
        (afile / "sub", f"--dest {afile / 'sub'} is under {afile}, a file; give a folder to fill"),
    ]:
        out = cli("materialise", "--task", task, "--dest", str(dest), cwd=tmp_path)
        assert out.returncode == 2 and said in " ".join(out.stderr.split()), out.stderr
        assert "Traceback" not in out.stderr
    assert afile.read_text() == "keep"
    filled = cli("materialise", "--task", task, "--dest", str(tmp_path / "new" / "state"), cwd=tmp_path)
    assert filled.returncode == 0 and json.loads(filled.stdout)["files"] > 0, filled.stderr


def test_version_prints_the_installed_packages_version() -> None:
    from importlib.metadata import version

    out = cli("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"mcpfleet {version('mcpfleet')}\n" and version("mcpfleet")


def test_tasks_validate_says_what_each_check_found_never_none(tmp_path: Path) -> None:
    """A task whose checks stopped at a problem printed `oracle=- noop_fails=None`: Python's None, and a dash."""
    from conftest import make_tiny_pack

    from mcpfleet.runner.cli.app import check_outcome
    from mcpfleet.runner.launch.taskcheck import TaskReport

    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    (pack / "filesystem" / "standard" / "tiny" / "move_todo_1" / "oracle.json").unlink()
    oracle, bare = sorted(discover(pack), key=lambda t: t.id)
    for report, said in [
        (
            TaskReport(oracle, oracle_passed=True, noop_failed=True, mutants_run=2, mutants_rejected=["a", "b"]),
            "oracle passes, no-op fails, 2/2 mutants rejected",
        ),
        (TaskReport(oracle, oracle_passed=True, noop_failed=True), "oracle passes, no-op fails, no mutants"),
        (
            TaskReport(oracle, ["x: oracle does not pass"], oracle_passed=False, noop_failed=False),
            "oracle fails, no-op passes",
        ),
        (TaskReport(oracle, ["x: missing verify.py"]), "oracle not run, no-op not run"),
        (TaskReport(bare, ["x: no-op could not run"], mutants_run=1), "no oracle, no-op not run, 0/1 mutant rejected"),
    ]:
        assert check_outcome(report) == said
    (bare.path / "verify.py").unlink()  # the checks stop before any trial
    out = cli("tasks", "validate", str(bare.path))
    assert out.returncode == 1, out.stdout + out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("FAIL"))
    assert line == f"FAIL {bare.id}  no oracle, no-op not run" and "None" not in out.stdout, out.stdout


def test_pod_commands_are_left_out_of_help_and_still_run() -> None:
    """`trial` and `materialise` (what a trial pod and its init container run) were listed beside `run`."""
    import re

    out = cli("--help")
    assert out.returncode == 0, out.stderr
    listed = set(re.findall(r"^│ (\S+) ", out.stdout, flags=re.M))
    assert {"run", "validate", "report", "tasks"} <= listed and not {"trial", "materialise"} & listed, out.stdout
    for command in ("trial", "materialise"):
        help_ = cli(command, "--help")
        assert help_.returncode == 0 and f"Usage: mcpfleet {command}" in help_.stdout, help_.stdout + help_.stderr
    ran = cli("trial")  # parsed and run as before: without a trial to run it says what it needs
    assert ran.returncode == 2 and "set MCPFLEET_TRIAL (pods)" in flat(ran.stderr), ran.stderr


def test_run_off_a_terminal_prints_plain_progress_lines_and_a_rerun_says_nothing_is_left(
    tmp_path: Path, session_pack: Path
) -> None:
    """stderr a pipe (CI, nohup): the live bar would print nothing until the end, so the run prints plain lines
    at its pace and at each tenth of the trials; a re-run with every trial recorded says so before its table."""
    spec = {
        "models": [{"name": "oracle", "model": "scripted/oracle?latency=0.4"}],
        "tasks": {"path": str(session_pack)},
        "concurrency": {"total": 1},
        "output": {"uri": str(tmp_path / "runs")},
    }
    path = evalrun(tmp_path, spec)
    first = cli("run", str(path), "--progress-every", "0.5", timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    lines = [line for line in first.stderr.splitlines() if line.startswith("progress: ")]
    assert "\x1b" not in first.stderr and "\r" not in first.stderr  # no control codes: a log reads as printed
    assert (
        lines[0] == "progress: 0/3 trials done (0%): 0 passed, 0 failed, 0 not scored, 0 in flight; elapsed 0s, ETA -"
    )
    assert lines[-1].startswith("progress: 3/3 trials done (100%): 3 passed, 0 failed, 0 not scored, 0 in flight;")
    assert lines[-1].endswith("ETA 0s"), lines[-1]
    done = [int(line.split()[1].split("/")[0]) for line in lines]
    assert done == sorted(done) and {1, 2, 3} <= set(done)  # each trial a third of the run: a line each
    waiting = [line for line in lines if " 1 in flight;" in line]
    assert len(waiting) >= 2, first.stderr  # lines while a trial runs and none finishes: the pace, not only steps
    assert "nothing to run" not in first.stderr

    again = subprocess.run(
        [str(MCPFLEET), "run", str(path), "--progress-every", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, as a CI log has it: the note comes before the table
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert again.returncode == 0, again.stdout
    said = flat(again.stdout)
    note = f"nothing to run: all 3 planned trials of run 'cli' are recorded in {tmp_path / 'runs' / 'cli'}"
    assert note in said and said.index(note) < said.index("pass@1"), again.stdout
    assert "progress: " not in again.stdout
