"""Every tool call of an MCP trial classified (issue 12 §4): checker classes per call in result.json, counts per
trial, shares per model in summary.json and the report, the judge's verdict where one is named, the metric."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import mcp.types
import pytest
import yaml
from conftest import make_tiny_pack

from mcpfleet.runner.agent.call_classes import CallClassifier
from mcpfleet.runner.launch.launcher import execute
from mcpfleet.runner.spec.load import load_evalrun

READ = mcp.types.Tool.model_validate(
    {
        "name": "read_text_file",
        "description": "Read a file.",
        "inputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "head": {"type": "integer", "minimum": 1}},
            "required": ["path"],
        },
    }
)
LIST = mcp.types.Tool.model_validate({"name": "list_allowed_directories", "inputSchema": {"type": "object"}})


@pytest.mark.parametrize(
    "name,raw,expected",
    [
        ("read_text_file", '{"path": "/a"}', "schema_valid"),
        ("read_text_file", '{"path": "/a", "head": 3}', "schema_valid"),
        ("list_allowed_directories", "", "schema_valid"),  # no arguments at all: an empty object
        ("read_txt_file", '{"path": "/a"}', "incorrect_tool"),
        ("read_text_file", '{"file": "/a"}', "incorrect_parameter_names"),  # unknown name, required one missing
        ("read_text_file", '{"path": "/a", "limit": 3}', "incorrect_parameter_names"),
        ("read_text_file", '{"path": "/a', "incorrect_parameter_names"),  # not JSON at all
        ("read_text_file", '["/a"]', "incorrect_parameter_names"),  # JSON, but not an object
        ("read_text_file", '{"path": 42}', "incorrect_parameter_values"),
        ("read_text_file", '{"path": "/a", "head": 0}', "incorrect_parameter_values"),
    ],
)
def test_the_checker_classifies_a_call_against_the_servers_schemas(name: str, raw: str, expected: str) -> None:
    assert CallClassifier([READ, LIST]).classify(name, raw) == expected


SCRIPT = {
    "turns": [
        {"tool_calls": [{"name": "list_allowed_directories", "arguments": {}}]},
        {
            "tool_calls": [
                {"name": "read_text_file", "arguments": {"path": "{root}/keep.txt"}},
                {"name": "read_text_file", "arguments": {"file": "{root}/keep.txt"}},
                {"name": "read_text_file", "arguments": {"path": "{root}/keep.txt", "head": "two"}},
                {"name": "summon_file", "arguments": {"path": "{root}/keep.txt"}},
            ]
        },
        {"content": "I looked around and changed nothing."},
    ]
}
EXPECTED = [
    "schema_valid",
    "schema_valid",
    "incorrect_parameter_names",
    "incorrect_parameter_values",
    "incorrect_tool",
]


def sweep(tmp_path: Path, judge: dict[str, Any] | None = None) -> tuple[dict[str, Any], Path]:
    pack = make_tiny_pack(tmp_path / "pack")
    # A conversation of its own: the judge's on-disk cache must not answer from an earlier test run.
    desc = pack / "filesystem" / "standard" / "tiny" / "move_todo_0" / "description.md"
    desc.write_text(desc.read_text() + f"(run {uuid.uuid4().hex})\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    spec: dict[str, Any] = {
        "models": [
            {"name": "careless", "model": f"scripted/script={script}"},
            {"name": "oracle", "model": "scripted/oracle"},
        ],
        "tasks": {"path": str(pack)},
        "output": {"uri": str(tmp_path / "runs")},
    }
    if judge is not None:
        spec["toolcalls"] = {"judge": judge}
    doc = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "classes"}, "spec": spec}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    summary, root = execute(load_evalrun(path), path.parent, show_progress=False)
    return summary, Path(root)


def result_of(root: Path, model: str) -> dict[str, Any]:
    [path] = (root / "trials").glob(f"{model}.*/result.json")
    return json.loads(path.read_text())


def test_a_trials_calls_are_classified_in_its_record_summary_and_report(tmp_path: Path) -> None:
    summary, root = sweep(tmp_path)
    careless = result_of(root, "careless")
    calls = [c for t in careless["turns"] for c in t["tool_calls"]]
    assert [c["call_class"] for c in calls] == EXPECTED
    assert careless["totals"]["call_classes"] == {
        "schema_valid": 2,
        "incorrect_tool": 1,
        "incorrect_parameter_names": 1,
        "incorrect_parameter_values": 1,
    }
    # The oracle's calls are the task's own solution: every one valid against the server's schemas.
    oracle = result_of(root, "oracle")
    assert oracle["passed"] and set(oracle["totals"]["call_classes"]) == {"schema_valid"}
    assert oracle["totals"]["call_classes"]["schema_valid"] == oracle["totals"]["tool_calls"]
    rows = {r["model"]: r for r in summary["rows"]}
    assert rows["careless"]["call_classes"] == careless["totals"]["call_classes"]
    assert rows["careless"]["call_class_rates"]["schema_valid"] == pytest.approx(2 / 5)
    assert rows["oracle"]["call_class_rates"] == {"schema_valid": 1.0}

    from mcpfleet.runner.report.html import write_report

    write_report([str(root)], tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    assert 'class="summary call-classes"' in html
    assert 'data-class="incorrect_tool" data-calls="1"' in html and 'data-class="schema_valid" data-calls="2"' in html


def test_a_named_judge_classifies_the_valid_calls_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from judge_server import judge_server

    monkeypatch.setenv("JUDGE_KEY", "judge-secret-123456")
    with judge_server() as server:
        judge = {"model": "openai/answer=incorrect_parameter_values", "apiBase": server.url, "apiKeyEnv": "JUDGE_KEY"}
        summary, root = sweep(tmp_path, judge)
        careless = result_of(root, "careless")
        calls = [c for t in careless["turns"] for c in t["tool_calls"]]
        # The checker's findings stand; the two valid calls get the judge's verdict.
        assert [c["call_class"] for c in calls] == [
            "incorrect_parameter_values" if c == "schema_valid" else c for c in EXPECTED
        ]
        # The judge read the conversation up to each call and the call itself, as the model made it.
        judged = [json.loads(r["messages"][1]["content"]) for r in server.requests]
        seen = {(j["messages"][-1]["tool_calls"][0]["function"]["name"], len(j["messages"])) for j in judged}
        assert ("list_allowed_directories", 3) in seen or ("list_allowed_directories", 2) in seen
        assert all(j["messages"][-1]["role"] == "assistant" for j in judged)
        # Judging annotates; it never changes an outcome, and its key stays out of the record.
        oracle = result_of(root, "oracle")
        assert oracle["passed"] and "judge-secret-123456" not in json.dumps(careless) + json.dumps(oracle)
        assert {r["model"]: r["passed"] for r in summary["rows"]} == {"careless": 0, "oracle": 1}


def test_the_operator_counts_classes_from_records_with_bounded_labels() -> None:
    from mcpfleet.operator import metrics

    metrics.init_run("ns-classes", "r", [("m", "filesystem")])
    before = metrics.TOOL_CALL_CLASSES.labels("ns-classes", "r", "m", "filesystem", "incorrect_tool")._value.get()
    assert before == 0  # the series exist at zero from the run's start
    record = {
        "model": "m",
        "service": "filesystem",
        "passed": False,
        "failure": "verifier_failed",
        "totals": {"call_classes": {"incorrect_tool": 2, "schema_valid": 3, "made_up_by_a_record": 1}},
    }
    metrics.observe_record("ns-classes", "r", record)
    value = metrics.TOOL_CALL_CLASSES.labels
    assert value("ns-classes", "r", "m", "filesystem", "incorrect_tool")._value.get() == 2
    assert value("ns-classes", "r", "m", "filesystem", "schema_valid")._value.get() == 3
    assert value("ns-classes", "r", "m", "filesystem", "other")._value.get() == 1  # never an unbounded label
    labels = {s.labels["class"] for m in metrics.REGISTRY.collect() for s in m.samples if "class" in s.labels}
    assert "made_up_by_a_record" not in labels
