"""mutants.json: plausible wrong end states, replayed through the oracle's path, that a task's verifier must reject.
Parsing errors name the file and the mutant; ``tasks validate`` fails a task whose verifier accepts a mutant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.runner.launch.taskcheck import validate
from mcpfleet.runner.results.store import LocalStore
from mcpfleet.runner.spec.evalrun import AgentKind, Limits, ModelSpec
from mcpfleet.runner.spec.task import OracleStep, Task, TaskError, parse_mutants
from mcpfleet.runner.spec.trial import Replay, TrialContext, TrialSpec
from mcpfleet.runner.tasks.checks import check_task
from mcpfleet.runner.tasks.discovery import discover
from mcpfleet.runner.trial.engine import run_trial

PATH = Path("/pack/filesystem/standard/tiny/move_todo_0/mutants.json")
GOOD = {"name": "blank_line", "why": "an extra blank line", "after_oracle": True, "steps": []}
EDIT = {"path": "{root}/nope.txt", "edits": [{"oldText": "a", "newText": "b"}]}


def mutant(**kw: Any) -> dict[str, Any]:
    return {**GOOD, "answer": "done", **kw}


def write_step(rel: str, content: str) -> dict[str, Any]:
    return {"tool": "write_file", "arguments": {"path": "{root}/" + rel, "content": content}}


def test_parses_steps_answer_and_defaults() -> None:
    data = {
        "mutants": [
            {**GOOD, "steps": [write_step("a.txt", "x\n")]},
            {"name": "wrong-answer", "why": "says 4", "after_oracle": False, "steps": [], "answer": "4"},
        ]
    }
    first, second = parse_mutants(PATH, data)
    assert first.name == "blank_line" and first.after_oracle and first.answer is None
    assert first.steps == (OracleStep("write_file", {"path": "{root}/a.txt", "content": "x\n"}),)
    assert first.steps[0].resolve("/w") == {"path": "/w/a.txt", "content": "x\n"}
    assert (second.after_oracle, second.steps, second.answer) == (False, (), "4")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([GOOD], r'expected \{"mutants": \['),
        ({"mutants": []}, r'expected \{"mutants": \['),
        ({"mutants": ["x"]}, r"mutants\[0\] must be an object"),
        ({"mutants": [mutant(), mutant(name="b", steps_=[])]}, r"mutants\[1\] has unknown key\(s\) steps_"),
        ({"mutants": [mutant(name="has space")]}, r"mutants\[0\]\.name must be a string matching"),
        ({"mutants": [mutant(), mutant()]}, r"mutants\[1\]\.name 'blank_line' is used twice"),
        ({"mutants": [mutant(why=" ")]}, r"mutants\[0\] \('blank_line'\)\.why must say why"),
        (
            {"mutants": [mutant(after_oracle="yes")]},
            r"mutants\[0\] \('blank_line'\)\.after_oracle must be true or false",
        ),
        ({"mutants": [{k: v for k, v in GOOD.items() if k != "after_oracle"}]}, r"after_oracle must be true or false"),
        ({"mutants": [mutant(steps={"tool": "x"})]}, r"mutants\[0\] \('blank_line'\)\.steps must be a list"),
        ({"mutants": [mutant(steps=[{"tool": 3}])]}, r"mutants\[0\]\.steps\[0\] needs a 'tool' string"),
        ({"mutants": [mutant(steps=[{"tool": "t", "arguments": []}])]}, r"mutants\[0\]\.steps\[0\] needs"),
        ({"mutants": [mutant(answer=4)]}, r"\.answer must be a string"),
        ({"mutants": [GOOD]}, r"mutants\[0\] \('blank_line'\) has no steps and no answer: it is the oracle"),
        ({"mutants": [{**GOOD, "after_oracle": False}]}, r"no steps and no answer: it is the no-op agent"),
    ],
)
def test_malformed_mutants_name_file_and_index(data: Any, message: str) -> None:
    with pytest.raises(TaskError, match=message) as err:
        parse_mutants(PATH, data)
    assert str(err.value).startswith(f"{PATH}: ")


def _tiny(tiny_pack: Path) -> Task:
    return discover(tiny_pack)[0]


def test_check_task_reports_a_broken_mutants_json(tiny_pack: Path) -> None:
    task = _tiny(tiny_pack)
    path = task.path / "mutants.json"
    path.write_text("{not json")
    [problem] = check_task(task)
    assert problem.startswith(f"{path}: not valid JSON: ")
    task = _tiny(tiny_pack)  # a fresh Task: parsed files are cached per instance
    path.write_text(json.dumps({"mutants": [mutant(name="x", steps=[{"tool": 1}])]}))
    assert check_task(task) == [f"{path}: mutants[0].steps[0] needs a 'tool' string and an 'arguments' object"]


def test_check_task_reports_after_oracle_without_an_oracle(tiny_pack: Path) -> None:
    task = _tiny(tiny_pack)
    (task.path / "oracle.json").unlink()
    (task.path / "mutants.json").write_text(json.dumps({"mutants": [mutant()]}))
    assert check_task(task) == [f"{task.id}: a mutant replays the oracle (after_oracle) but there is no oracle.json"]


async def test_validate_fails_a_task_whose_verifier_accepts_a_mutant(tiny_pack: Path) -> None:
    task = _tiny(tiny_pack)
    mutants = [
        # The tiny verifier compares summary.txt after strip(): a trailing blank line slips through.
        mutant(
            name="summary_blank_line", why="blank line", answer=None, steps=[write_step("done/summary.txt", "3\n\n")]
        ),
        mutant(name="summary_wrong", why="counts 4 lines", answer=None, steps=[write_step("done/summary.txt", "4\n")]),
        {
            "name": "todo_kept",
            "why": "copied, not moved",
            "after_oracle": False,
            "steps": [
                {"tool": "create_directory", "arguments": {"path": "{root}/done"}},
                write_step("done/summary.txt", "3\n"),
                write_step("done/todo.txt", "a\nb\nc\n"),
            ],
        },
        mutant(
            name="broken_step",
            why="edits a missing file",
            after_oracle=False,
            answer=None,
            steps=[{"tool": "edit_file", "arguments": EDIT}],
        ),
    ]
    (task.path / "mutants.json").write_text(json.dumps({"mutants": mutants}))
    [report] = await validate(discover(tiny_pack), tiny_pack, concurrency=2)
    assert report.oracle_passed and report.noop_failed and report.mutants_run == 4
    assert report.mutants_accepted == ["summary_blank_line"]
    assert sorted(report.mutants_rejected) == ["broken_step", "summary_wrong", "todo_kept"]
    assert not report.ok
    assert f"{task.id}: the verifier accepts mutant 'summary_blank_line' (blank line)" in report.problems
    assert any("mutant 'broken_step' step 'edit_file' returned an error" in p for p in report.problems)
    assert len(report.problems) == 2


async def test_validate_passes_when_every_mutant_is_rejected(tiny_pack: Path) -> None:
    task = _tiny(tiny_pack)
    mutants = [mutant(name="wrong", why="4", answer=None, steps=[write_step("done/summary.txt", "4\n")])]
    (task.path / "mutants.json").write_text(json.dumps({"mutants": mutants}))
    [report] = await validate(discover(tiny_pack), tiny_pack)
    assert report.ok and report.mutants_rejected == ["wrong"] and report.mutants_accepted == []


async def test_a_replay_goes_through_the_oracle_path_with_its_own_answer(tiny_pack: Path, tmp_path: Path) -> None:
    task = _tiny(tiny_pack)
    spec = TrialSpec(
        run="r",
        trial_id="t1",
        spec_hash="h",
        model=ModelSpec(name="oracle", model="oracle"),
        task_id=task.id,
        tasks_root=str(tiny_pack),
        attempt=1,
        agent=AgentKind.oracle,
        limits=Limits(),
    )
    store = LocalStore(tmp_path / "runs")
    steps = (OracleStep("create_directory", {"path": "{root}/done"}),)
    result = await run_trial(spec, store, TrialContext(replay=Replay(steps, answer="All done, 3 lines.")))
    assert not result.passed and result.error is None
    assert [c["name"] for t in result.turns for c in t["tool_calls"]] == ["create_directory"]
    messages = (store.trial_dir("t1") / "messages.json").read_text()
    assert "All done, 3 lines." in messages and "Oracle solution applied." not in messages
    replay = Replay.of(task, parse_mutants(PATH, {"mutants": [mutant(steps=[write_step("x", "y")])]})[0])
    assert replay.steps == (*task.oracle, OracleStep("write_file", {"path": "{root}/x", "content": "y"}))
    assert replay.answer == "done"
