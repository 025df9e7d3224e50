"""The verifier's command in a trial's record (environment/invocation.py): placeholders for the paths of the
machine that ran it, no secret value, shown by the trial page and ``mcpfleet show``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcpfleet.runner.environment.invocation import SECRET, command_line, recorded_verifier, shown_invocation
from mcpfleet.runner.report.viewer.index import row_of
from mcpfleet.runner.report.viewer.pages import trial_page
from mcpfleet.runner.report.viewer.terminal import trial_view
from mcpfleet.runner.report.viewer.transcript import Transcript
from mcpfleet.runner.results.records import TrialResult, VerifierRecord, usable_record


def test_paths_become_placeholders_and_the_state_inside_the_trial_folder_reads_as_state(tmp_path: Path) -> None:
    trial, task = tmp_path / "w-1234", tmp_path / "pack" / "filesystem" / "standard" / "c" / "t"
    env = {"FILESYSTEM_TEST_DIR": str(trial / "state"), "MCP_MESSAGES": str(trial / "messages.json"), "TZ": "UTC"}
    places = {"{trial}": trial, "{state}": trial / "state", "{task}": task}
    argv, shown = shown_invocation(task / "verify.py", [], env, places)
    assert argv == ["python", "{task}/verify.py"]
    assert shown == {"FILESYSTEM_TEST_DIR": "{state}", "MCP_MESSAGES": "{trial}/messages.json", "TZ": "UTC"}
    assert str(tmp_path) not in json.dumps([argv, shown])


def test_no_secret_value_is_recorded_wherever_it_recurs() -> None:
    password = "s3cr3t-Pa55word-xyz"
    env = {
        "POSTGRES_HOST": "/tmp/pg-run/sock",
        "POSTGRES_USERNAME": "mcpfleet_grader_1a2b",
        "POSTGRES_PASSWORD": password,
        "PGPASSWORD": password,
        "POSTGRES_DATABASE": "trial_db_7",
        "DATABASE_URL": f"postgresql://mcpfleet_grader_1a2b:{password}@localhost:5432/trial_db_7",
        "OTHER_DSN": "mysql://root:hunter2-long@db:3306/x",  # a URL's password, whatever the variable's name
        "STRIPE_API_KEY": "sk_live_abcdef",
        "ECHO": f"the password is {password}",
    }
    argv, shown = shown_invocation(Path("/p/verify.py"), ["trial_db_7", password], env, {"{task}": "/p"})
    assert argv == ["python", "{task}/verify.py", "trial_db_7", SECRET]
    assert shown["POSTGRES_PASSWORD"] == shown["PGPASSWORD"] == shown["STRIPE_API_KEY"] == SECRET
    assert shown["DATABASE_URL"] == f"postgresql://mcpfleet_grader_1a2b:{SECRET}@localhost:5432/trial_db_7"
    assert shown["OTHER_DSN"] == f"mysql://root:{SECRET}@db:3306/x"
    assert shown["ECHO"] == f"the password is {SECRET}"
    assert shown["POSTGRES_DATABASE"] == "trial_db_7" and shown["POSTGRES_USERNAME"] == "mcpfleet_grader_1a2b"
    text = json.dumps([argv, shown])
    assert password not in text and "hunter2-long" not in text and "sk_live" not in text


def test_the_command_line_quotes_only_what_a_shell_would_split() -> None:
    assert command_line(["python", "{task}/verify.py", "db_1"]) == "python {task}/verify.py db_1"
    assert command_line(["python", "a b", "it's", "$HOME"]) == "python 'a b' 'it'\"'\"'s' '$HOME'"


def test_records_old_and_new_are_usable_and_a_damaged_field_shows_as_absent() -> None:
    base: dict[str, Any] = {"run": "r", "trial_id": "m.filesystem.standard.c.t.1", "spec_hash": "h", "model": "m"}
    base |= {"litellm_model": "x/m", "service": "filesystem", "task_id": "filesystem/standard/c/t"}
    base |= {"attempt": 1, "agent": "mcpmark", "passed": True}
    old = {**base, "verifier": {"exit_code": 0, "timed_out": False, "duration_s": 0.1, "stdout": "", "stderr": ""}}
    assert usable_record(json.dumps(old).encode()) is not None  # a record written before the fields still reads
    assert recorded_verifier(old)[1] == ""
    new = TrialResult(**base, verifier=VerifierRecord(exit_code=0, command=["python", "{task}/verify.py"]))
    assert usable_record(json.dumps(new.model_dump(mode="json")).encode()) is not None
    damaged = {**old, "verifier": {"command": "rm -rf /", "env": ["x"]}}
    assert recorded_verifier(damaged) == ({"command": "rm -rf /", "env": {}}, "")


def _record(**verifier: Any) -> dict[str, Any]:
    rec = TrialResult(
        run="r", trial_id="m.postgres.standard.c.t.1", spec_hash="h", model="m", litellm_model="x/m",
        service="postgres", task_id="postgres/standard/c/t", attempt=1, agent="mcpmark", passed=False,
        failure="verifier_failed", verifier=VerifierRecord(exit_code=1, stdout="no rows", **verifier),
    )  # fmt: skip
    return rec.model_dump(mode="json")


def test_the_trial_page_and_show_print_the_command_and_its_variables() -> None:
    rec = _record(
        command=["python", "{task}/verify.py", "trial_db_7"],
        env={"POSTGRES_DATABASE": "trial_db_7", "POSTGRES_PASSWORD": SECRET, "NOTE": "<b>x</b>"},
    )
    row = row_of(rec)
    html = trial_page(0, type("R", (), {"label": "r"})(), row, rec, Transcript(shape="mcpmark"), 0, "", None)
    assert '<code id="verifier-command">python {task}/verify.py trial_db_7</code>' in html
    assert "POSTGRES_PASSWORD=[secret]" in html and "NOTE=&lt;b&gt;x&lt;/b&gt;" in html  # escaped, as all text
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(trial_view(row, rec, Transcript(shape="mcpmark"), "", full=False))
    out = console.export_text()
    assert "command: python {task}/verify.py trial_db_7" in out and "POSTGRES_DATABASE=trial_db_7" in out
    old = _record()
    html = trial_page(0, type("R", (), {"label": "r"})(), row, old, Transcript(shape="mcpmark"), 0, "", None)
    assert 'id="verifier-command-missing"' in html and "a record older than the field" in html
