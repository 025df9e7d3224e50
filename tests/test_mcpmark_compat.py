"""A task folder in MCPMark's own format (no oracle, state kept apart, answer read from MCP_MESSAGES)
loads and runs without edits."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import yaml

from mcpfleet.runner.launch.launcher import execute
from mcpfleet.runner.launch.taskcheck import validate
from mcpfleet.runner.spec.load import load_evalrun
from mcpfleet.runner.tasks.discovery import discover
from mcpfleet.runner.tasks.packs import state_scopes

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


def test_mcpmark_states_layout_runs_with_the_states_file_times(tmp_path: Path) -> None:
    """statesPath in MCPMark's own layout (<root>/<category>/, its test_environments folder) works as is,
    and the agent sees the states' own file times (MCPMark copies them with copytree)."""
    states = tmp_path / "test_environments"
    shutil.copytree(STATES / "filesystem" / "file_context", states / "file_context")
    stamp = 1_622_548_800  # 2021-06-01T12:00:00Z
    for log in (states / "file_context" / "logs").iterdir():
        os.utime(log, (stamp, stamp))
    [task] = discover(PACK, states)
    assert task.state_dir == states / "file_context"
    script = tmp_path / "script.json"
    turns = json.loads((FIXTURES / "mcpmark_solution.json").read_text())["turns"]
    info = {"tool_calls": [{"name": "get_file_info", "arguments": {"path": "{root}/logs/worker.log"}}]}
    script.write_text(json.dumps({"turns": [turns[0], info, *turns[1:]]}))
    spec = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "mcpmark-layout"},
        "spec": {
            "models": [{"name": "solver", "model": f"scripted/script={script}"}],
            "tasks": {"path": str(PACK), "statesPath": str(states)},
            "output": {"uri": str(tmp_path / "runs")},
        },
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(spec))
    summary, root = execute(load_evalrun(path), tmp_path, show_progress=False)
    assert summary["rows"][0]["pass_at_1"] == 1.0
    assert isinstance(root, Path)  # a local output folder, not an s3:// URI
    items = json.loads(
        (root / "trials" / "solver.filesystem.standard.file_context.largest_log_answer.1" / "messages.json").read_text()
    )
    [info_out] = [i["output"] for i in items if i.get("type") == "function_call_output"][1:2]
    assert "2021" in info_out and "Jun" in info_out  # the server reported the state's own mtime


def test_state_scopes_cover_both_layouts() -> None:
    """An s3:// statesPath is fetched per trial: both layouts' places are asked for."""
    assert state_scopes("filesystem/standard/file_context/t") == [
        "filesystem/file_context",
        "filesystem/file_context.times.json",
        "test_environments/file_context",
        "test_environments/file_context.times.json",
        "file_context",
        "file_context.times.json",
    ]


def test_an_mcpmark_checkout_as_states_path_serves_filesystem_and_postgres(tmp_path: Path) -> None:
    """MCPMark keeps filesystem states in <checkout>/test_environments/<category>/ and PostgreSQL dumps in
    <checkout>/postgres_state/<database>.backup: one EvalRun over both services names the checkout once. Before,
    one statesPath served one of the layouts (two EvalRuns, or a merged folder)."""
    from conftest import make_tiny_pack
    from pgpack import INVENTORY_SQL, make_mcpmark_pack

    from mcpfleet.runner.services.postgres import state_source

    pack = make_tiny_pack(tmp_path / "pack")
    shutil.rmtree(pack / "filesystem" / "states")
    make_mcpmark_pack(pack, tmp_path / "unused")
    checkout = tmp_path / "mcpmark"
    shutil.copytree(STATES / "filesystem" / "file_context", checkout / "test_environments" / "tiny")
    (checkout / "postgres_state").mkdir()
    (checkout / "postgres_state" / "inventory.sql").write_text(INVENTORY_SQL)
    tasks = {t.category: t for t in discover(pack, checkout)}
    assert tasks["tiny"].state_dir == checkout / "test_environments" / "tiny"
    source = state_source(tasks["inventory"])
    assert source is not None and source.path == checkout / "postgres_state" / "inventory.sql"
