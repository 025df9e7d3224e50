"""``mcpfleet tasks stress``: the plan (seeded shuffle), the table (a pure function of the records) and the command
run for real on a small filesystem pack whose second task's verifier fails every odd attempt."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from conftest import REPO, make_tiny_pack, trial_record
from rich.console import Console

from mcpfleet.runner.plan.stress import NOOP_MODEL, ORACLE_MODEL, shuffled, stress_run
from mcpfleet.runner.report.stress import (
    Attempt,
    attempt_of,
    first_tool_error,
    stress_json,
    stress_table,
    summarise,
)

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
GOOD = "filesystem/standard/tiny/move_todo_0"
FLAKY = "filesystem/standard/tiny/move_todo_1"


def plain(text: str) -> str:
    """The table's words with its box drawing and whitespace folded, for comparing rows."""
    return " ".join(re.sub(r"[\u2500-\u257f]", " ", text).split())


def rendered(renderable: Any) -> str:
    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


# ------------------------------------------------------------------------------------------------------- plan


def test_the_stress_is_an_evalrun_of_the_scripted_oracle_and_noop_without_retries(tmp_path: Path) -> None:
    run = stress_run(tmp_path / "pack", [FLAKY, GOOD], 3, 2, tmp_path / "out")
    spec = run.spec
    models = [(m.name, m.model) for m in spec.models]
    assert models == [(ORACLE_MODEL, "scripted/oracle"), (NOOP_MODEL, "scripted/noop")]
    assert (spec.attempts, spec.concurrency.total, spec.retries.limit) == (3, 2, 0)
    assert spec.tasks.include == [GOOD, FLAKY] and spec.output.uri == str(tmp_path / "out")


def test_the_shuffle_is_seeded_and_independent_of_the_plans_order(tmp_path: Path) -> None:
    from mcpfleet.runner.plan.expand import plan

    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    trials = plan(stress_run(pack, [GOOD, FLAKY], 5, 2, tmp_path / "out"), tmp_path)
    ids = [t.trial_id for t in trials]
    once = [t.trial_id for t in shuffled(trials, 7)]
    assert once == [t.trial_id for t in shuffled(list(reversed(trials)), 7)]  # same seed, same order
    assert once != [t.trial_id for t in shuffled(trials, 8)] and sorted(once) == sorted(ids) and once != ids


# ------------------------------------------------------------------------------------------------ the table


def record(passed: bool, failure: str | None = None, **kw: Any) -> dict[str, Any]:
    return trial_record("t", passed=passed, failure=failure, **kw)


def test_rows_count_passes_fails_and_dedupe_what_the_verifier_said() -> None:
    said = {"stdout": "checking\nconstraint salaries_no_overlap missing in trial_0123abcd\n", "stderr": ""}
    attempts = [
        attempt_of(record(True, timings={"total": 2.0}), FLAKY, True),
        attempt_of(record(False, "verifier_failed", verifier=said, timings={"total": 3.0}), FLAKY, True),
        attempt_of(record(False, "verifier_failed", verifier=said, timings={"total": 5.0}), FLAKY, True),
        attempt_of(record(False, "verifier_failed"), FLAKY, False),
        attempt_of(record(True), FLAKY, False),  # a no-op that passes: the verifier accepts the untouched state
        attempt_of(record(False, "infra_error", error="the MCP server did not start"), FLAKY, False),
        attempt_of(record(True, timings={"total": 1.0}), GOOD, True),
        attempt_of(record(False, "verifier_failed"), GOOD, False),
    ]
    good, flaky = summarise(reversed(attempts))
    assert (good.task_id, good.oracle_passes, good.oracle_runs, good.noop_fails, good.noop_runs) == (GOOD, 1, 1, 1, 1)
    assert good.ok and not good.failing and (good.median, good.longest) == (1.0, 1.0)
    assert (flaky.oracle_passes, flaky.oracle_runs, flaky.noop_fails, flaky.noop_runs, flaky.errors) == (1, 3, 1, 3, 1)
    assert not flaky.ok and (flaky.median, flaky.longest) == (3.0, 5.0)
    assert flaky.failing[0] == ("verifier: checking | constraint salaries_no_overlap missing in trial_*", 2)
    assert {text for text, _ in flaky.failing[1:]} == {
        "no-op passed",
        "no-op not judged: infra_error: the MCP server did not start",
    }
    table = rendered(stress_table([flaky, good], "title"))
    assert f"{FLAKY} 1/3 1/3 1 3.0 5.0 FAIL" in plain(table) and f"{GOOD} 1/1 1/1 0 1.0 1.0 ok" in plain(table)
    assert "2x verifier: checking | constraint salaries_no_overlap missing in trial_*" in table
    assert "1/2 tasks held every attempt" in plain(table)
    doc = stress_json([flaky, good], 3, 2, 7, 12.345)
    assert doc["ok"] is False and doc["wall_seconds"] == 12.345 and doc["tasks"][0]["oracle_passes"] == 1
    assert doc["tasks"][0]["failing"][0]["attempts"] == 2


def mcpmark_output(text: str, is_error: bool) -> str:
    """A function_call_output as MCPMark's agent writes it: a text part holding the JSON dump of the MCP result."""
    result = {"meta": None, "content": [{"type": "text", "text": text, "annotations": None}], "isError": is_error}
    return json.dumps({"type": "text", "text": json.dumps(result), "annotations": None, "meta": None})


def test_an_oracle_step_that_failed_is_named_with_what_the_server_said() -> None:
    rec = record(
        False,
        "verifier_failed",
        turns=[{"tool_calls": [{"name": "list_objects", "call_id": "a", "is_error": False}]}]
        + [{"tool_calls": [{"name": "execute_sql", "call_id": "b", "is_error": True}]}],
    )
    server = "Error: range lower bound must be less than or equal to range upper bound"
    messages = [
        {"type": "function_call_output", "call_id": "a", "output": "[]"},
        {"type": "function_call_output", "call_id": "b", "output": mcpmark_output(server, is_error=False)},
    ]
    error = first_tool_error(rec, messages)
    assert error == f"execute_sql: {server}"
    attempt = attempt_of(rec, FLAKY, True, error)
    assert attempt.detail == f"tool error: execute_sql: {server}"
    assert first_tool_error(record(True), messages) is None
    plain = [{"type": "function_call_output", "call_id": "b", "output": "Error: unknown tool 'x'"}]
    assert first_tool_error(rec, plain) == "execute_sql: Error: unknown tool 'x'"
    assert first_tool_error(rec, []) == "execute_sql"  # (no messages.json: the tool's name alone)
    unrecorded = "no record: the trial did not finish, or its record could not be stored"
    assert attempt_of(None, GOOD, True) == Attempt(GOOD, True, False, False, None, unrecorded)


# ---------------------------------------------------------------------------------------------- for real

# Passes only on even claims of a counter outside the trial's state (a folder the test owns), once the state is
# solved: three oracle attempts claim 1, 2 and 3, so exactly one passes whatever order they run in.
FLAKY_VERIFY = """
import os, sys
from pathlib import Path
root = Path(os.environ["FILESYSTEM_TEST_DIR"])
solved = (root / "done" / "summary.txt").is_file() and (root / "done" / "summary.txt").read_text().strip() == "3"
if not solved:
    print("done/summary.txt must hold 3")
    sys.exit(1)
n = 1
while True:
    try:
        os.close(os.open(os.path.join(COUNTER, str(n)), os.O_CREAT | os.O_EXCL))
        break
    except FileExistsError:
        n += 1
if n % 2:
    print(f"claim {n}: odd claims fail")
    sys.exit(1)
print("all good")
"""


def stress(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), "tasks", "stress", *args],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def test_the_command_runs_the_oracle_n_times_and_reports_the_flaky_task(tmp_path: Path) -> None:
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    counter = tmp_path / "counter"
    counter.mkdir()
    (pack / FLAKY / "verify.py").write_text(f"COUNTER = {str(counter)!r}\n" + FLAKY_VERIFY)
    args = ["--repeat", "3", "--concurrency", "2", "--seed", "5", "--output", str(tmp_path / "out")]
    out = stress(tmp_path, str(pack / "filesystem"), *args)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "2 tasks x (3 oracle + 3 no-op) = 12 trials, concurrency 2, seed 5" in out.stderr
    text = plain(out.stdout)
    assert f"{GOOD} 3/3 3/3 0" in text and f"{FLAKY} 1/3 3/3 0" in text, out.stdout
    assert "2x verifier: claim" not in text  # claims 1 and 3 say different things: listed apart
    assert "1x verifier: claim 1: odd claims fail" in text and "1x verifier: claim 3: odd claims fail" in text
    assert sorted(p.name for p in counter.iterdir()) == ["1", "2", "3"]
    trials = sorted(p.name for p in (tmp_path / "out" / "stress" / "trials").iterdir())
    assert len(trials) == 12 and f"{ORACLE_MODEL}.filesystem.standard.tiny.move_todo_1.3" in trials
    # One task folder, as JSON: every attempt went as it should, exit 0; no --output, so nothing is kept.
    out = stress(tmp_path, str(pack / GOOD), "--repeat", "1", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] is True and [t["task"] for t in doc["tasks"]] == [GOOD] and isinstance(doc["seed"], int)
    assert (doc["tasks"][0]["oracle_passes"], doc["tasks"][0]["noop_fails"]) == (1, 1)
    assert f"--seed {doc['seed']} repeats this order" in out.stderr and "records:" not in out.stderr
