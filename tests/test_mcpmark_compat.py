"""A task folder in MCPMark's own format (no oracle, state kept apart, answer read from MCP_MESSAGES)
loads and runs without edits."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mcpfleet.runner.launcher import execute
from mcpfleet.runner.spec import load_evalrun
from mcpfleet.runner.taskcheck import validate
from mcpfleet.runner.tasks import discover

FIXTURES = Path(__file__).parent / "fixtures"
PACK = FIXTURES / "mcpmark_pack"
STATES = FIXTURES / "mcpmark_states"


def test_foreign_pack_runs_unchanged(tmp_path: Path) -> None:
    spec = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "mcpmark-compat"},
        "spec": {
            "models": [
                {"name": "solver", "model": f"scripted/script={FIXTURES / 'mcpmark_solution.json'}"},
                {"name": "idle", "model": "scripted/noop"},
            ],
            "tasks": {"path": str(PACK), "statesPath": str(STATES)},
            "concurrency": {"total": 2},
            "output": {"uri": str(tmp_path / "runs")},
        },
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(spec))
    summary, root = execute(load_evalrun(path), tmp_path, show_progress=False)
    assert isinstance(root, Path)  # a local output folder, not an s3:// URI
    rows = {r["model"]: r for r in summary["rows"]}
    assert rows["solver"]["pass_at_1"] == 1.0
    assert rows["idle"]["pass_at_1"] == 0.0 and rows["idle"]["failures"] == {"premature_stop": 1}
    trial = root / "trials" / "solver.filesystem.standard.file_context.largest_log_answer.1"
    messages = json.loads((trial / "messages.json").read_text())
    last = [m for m in messages if m.get("type") == "message"][-1]
    assert last["content"][0]["text"].endswith("ANSWER: worker.log")
    # The state folder in the pack was only read: the source is untouched.
    assert not (STATES / "filesystem" / "file_context" / "answer.txt").exists()


async def test_validate_warns_without_oracle_but_checks_noop() -> None:
    tasks = discover(PACK, STATES)
    reports = await validate(tasks, PACK, STATES)
    assert [r.ok for r in reports] == [True]
    assert reports[0].noop_failed is True and reports[0].oracle_passed is None
    assert "no oracle.json" in reports[0].warnings[0]
