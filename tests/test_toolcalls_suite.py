"""The toolcall suite: gold comparison, shards, case scoring, the scripted policy, local runs and pods."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcpfleet.runner.launch.launcher import execute
from mcpfleet.runner.launch.scripted_options import ModelError, parse_model
from mcpfleet.runner.launch.scripted_toolcall import _unit
from mcpfleet.runner.llm.client import LLMTarget
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.load import load_evalrun, parse_evalrun, spec_hash
from mcpfleet.runner.spec.task import Task
from mcpfleet.runner.spec.trial import TrialSpec
from mcpfleet.runner.tasks.checks import check_task
from mcpfleet.runner.tasks.digest import task_digest
from mcpfleet.runner.tasks.discovery import find_task
from mcpfleet.runner.tasks.toolcall_pack import make_task
from mcpfleet.runner.toolcalls.gold import MATCH, NAMES, TOOL, VALUES, compare
from mcpfleet.runner.toolcalls.loader import DataError, load_cases
from mcpfleet.runner.toolcalls.models import Case, Label, Tool, ToolCall, Verdict
from mcpfleet.runner.toolcalls.shards import count_cases, load_shard
from mcpfleet.runner.toolcalls.suite import LLM_ERROR, MALFORMED, NO_CALL, REPEATS_LABELLED, Answer, score

DATA = Path(__file__).parent / "data" / "toolcalls_200.jsonl"
TARGET = LLMTarget(model="openai/unused")  # where ask() is replaced by the test
TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "default": 10},
        "recursive": {"type": "boolean"},
    },
    "required": ["path"],
}
TOOLS = [Tool(name="list_files", input_schema=TOOL_SCHEMA), Tool(name="read_file", input_schema=TOOL_SCHEMA)]


def planned_task(spec: TrialSpec) -> Task:
    """The shard's task, found as the trial engine finds it (``run_shard`` is handed the engine's look-up)."""
    return find_task(Path(spec.tasks_root), spec.task_id)


def call(name: str = "list_files", **args: Any) -> ToolCall:
    return ToolCall(name=name, arguments=args)


# ------------------------------------------------------------------------------------------------ gold


def test_gold_matches_after_normalisation_only() -> None:
    gold = call(path="/data/ä", limit=10)
    same = [
        call(path=" /data/a\u0308 ", limit=10.0),  # whitespace, NFD vs NFC, 10 vs 10.0
        call(path="/data/ä"),  # the optional limit left out equals its default
        call(path="/data/ä", limit=10, recursive=None),  # null = left out
    ]
    for c in same:
        assert compare(TOOLS, gold, c).kind == MATCH, c
    assert compare(TOOLS, gold, call("read_file", path="/data/ä")).kind == TOOL
    assert compare(TOOLS, gold, call(path="/data/ä", recursive=True)).kind == NAMES
    assert compare(TOOLS, gold, call(pth="/data/ä")).kind == NAMES
    assert compare(TOOLS, gold, call(path="/data/ä", limit=11)).kind == VALUES
    assert compare(TOOLS, gold, call(path="/data/ä", limit="10")).kind == VALUES  # no type coercion
    assert compare(TOOLS, call(path="x", recursive=True), call(path="x", recursive=1)).kind == VALUES
    diff = compare(TOOLS, gold, call(path="/data/b", limit=11))
    assert diff.kind == VALUES and "$.limit" in diff.detail and "$.path" in diff.detail


# ------------------------------------------------------------------------------------------------ shards


def test_shards_cover_every_row_once_and_decode_only_their_own(tmp_path: Path) -> None:
    assert count_cases(DATA) == 200
    ids = [c.id for s in range(4) for c in load_shard(DATA, s, 60)]
    assert ids == [c.id for c in load_cases(DATA).cases]
    assert load_shard(DATA, 3, 60)[-1].id == ids[-1] and len(load_shard(DATA, 3, 60)) == 20
    # A bad row fails only the shard that holds it, naming file, row and field.
    lines = DATA.read_text().splitlines()
    bad = json.loads(lines[70])
    bad["available_tools"] = "{not json"
    broken = tmp_path / "cases.jsonl"
    broken.write_text("\n".join([*lines[:70], json.dumps(bad), *lines[71:]]) + "\n")
    assert len(load_shard(broken, 0, 60)) == 60
    with pytest.raises(DataError, match=r"row 71: field 'available_tools'"):
        load_shard(broken, 1, 60)
    # A folder of files: rows in file order, across file boundaries.
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "a.jsonl").write_text("\n".join(lines[:50]) + "\n")
    (folder / "b.json").write_text(json.dumps([json.loads(x) for x in lines[50:200]]))
    assert count_cases(folder) == 200
    assert [c.id for s in range(3) for c in load_shard(folder, s, 70)] == ids


# ------------------------------------------------------------------------------------------------ scoring


def case(label: Label | None, labelled: ToolCall) -> Case:
    return Case(id="c1", tools=TOOLS, history=[{"role": "user", "content": "list /data"}], call=labelled, label=label)


class FakeJudge:
    def __init__(self, label: str) -> None:
        self.label = label
        self.seen: list[Case] = []

    async def judge(self, c: Case) -> Verdict:
        self.seen.append(c)
        return Verdict(self.label, "judge", reasoning="because")


def run_score(c: Case, answer: Answer, judge: Any = None) -> Any:
    return asyncio.run(score(c, answer, judge))


def test_a_correct_case_is_scored_against_its_gold_call() -> None:
    gold = case("correct", call(path="/data"))
    ok = run_score(gold, Answer(call=call(path="/data ")))
    assert ok.passed and ok.scored_by == "gold" and ok.checker == "schema_valid"
    judge = FakeJudge("correct")
    wrong = run_score(gold, Answer(call=call(path="/data", limit=3)), judge)
    assert not wrong.passed and wrong.failure == VALUES and "limit" in wrong.detail["gold_diff"]
    assert not judge.seen  # a gold call decides; the judge is not asked
    assert run_score(gold, Answer(call=call("read_file", path="/data"))).failure == TOOL
    assert run_score(gold, Answer(text="Which folder?")).failure == NO_CALL
    assert run_score(gold, Answer(call=call(path="/data"), raw_arguments='{"path": ')).failure == MALFORMED
    assert run_score(gold, Answer(error="boom", failure=LLM_ERROR)).failure == LLM_ERROR


def test_a_case_without_gold_is_scored_by_checker_and_judge() -> None:
    labelled_wrong = call(path="/tmp")  # labelled off-intent: schema-valid but not what was asked
    c = case("incorrect_parameter_values", labelled_wrong)
    invalid = run_score(c, Answer(call=call(path="/data", limit=0)))
    assert not invalid.passed and invalid.failure == VALUES and invalid.scored_by == "checker"
    assert run_score(c, Answer(call=call("delete_all", path="/data"))).failure == TOOL
    assert run_score(c, Answer(call=call(path=" /tmp"))).failure == REPEATS_LABELLED
    # Schema-valid and not the known wrong call: passes on the checker alone (an upper bound)...
    alone = run_score(c, Answer(call=call(path="/data")))
    assert alone.passed and alone.scored_by == "checker"
    # ...and with a judge, the judge decides, seeing the model's call (not the labelled one).
    judge = FakeJudge("incorrect_parameter_values")
    judged = run_score(c, Answer(call=call(path="/data"), text="Listing."), judge)
    assert not judged.passed and judged.failure == VALUES and judged.scored_by == "judge"
    assert judge.seen[0].call == call(path="/data") and judge.seen[0].call_content == "Listing."
    assert run_score(c, Answer(call=call(path="/data")), FakeJudge("correct")).passed


# ------------------------------------------------------------------------------------------------ scripted policy


def test_scripted_toolcall_options() -> None:
    opts = parse_model("toolcall?wrong=0.25&seed=7", 0.0)
    assert (opts.policy, opts.wrong, opts.seed) == ("toolcall", 0.25, 7)
    for bad in ("toolcall?wrong=1.5", "oracle?wrong=0.1", "toolcall?wrong=x"):
        with pytest.raises(ModelError):
            parse_model(bad, 0.0)


# ------------------------------------------------------------------------------------------------ runs


def toolcall_run(tmp_path: Path, models: list[dict[str, str]], **spec: Any) -> Path:
    pack = tmp_path / "pack"
    make_task(pack, DATA, "limbic", "set200")
    body = {
        "models": models,
        "tasks": {"path": str(pack)},
        "toolcalls": {"shardSize": 60},
        "concurrency": {"total": 2},
        "output": {"uri": str(tmp_path / "runs")},
        **spec,
    }
    path = tmp_path / "run.yaml"
    doc = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "tc"}, "spec": body}
    path.write_text(yaml.safe_dump(doc))
    return path


def test_plan_cuts_a_data_set_into_shards_and_leaves_other_hashes_alone(tmp_path: Path) -> None:
    path = toolcall_run(tmp_path, [{"name": "a", "model": "scripted/toolcall"}], attempts=2)
    run = load_evalrun(path)
    trials = plan(run, path.parent)
    assert len(trials) == 4 * 2  # ceil(200 / 60) shards x 2 attempts
    assert len({t.trial_id for t in trials}) == 8 and {t.shard for t in trials} == {0, 1, 2, 3}
    assert trials[0].trial_id == "a.toolcall.standard.limbic.set200-s0000.1"
    assert not check_task(find_task(tmp_path / "pack", "toolcall/standard/limbic/set200"))
    # The shard size is part of what a run measures; a run that does not set it keeps its old hash.
    raw = yaml.safe_load(path.read_text())
    raw["spec"]["toolcalls"]["shardSize"] = 100
    bigger = parse_evalrun(raw)
    assert len(plan(bigger, path.parent)) == 4 and spec_hash(bigger) != spec_hash(run)
    del raw["spec"]["toolcalls"]
    assert "toolcalls" not in parse_evalrun(raw).spec.results_view()


def test_a_local_run_scores_every_case_with_pass_at_k(tmp_path: Path) -> None:
    wrong, seed = 0.3, 5
    models = [
        {"name": "gold", "model": "scripted/toolcall"},
        {"name": "sloppy", "model": f"scripted/toolcall?wrong={wrong}&seed={seed}"},
    ]
    path = toolcall_run(tmp_path, models, attempts=2)
    summary, root = execute(load_evalrun(path), path.parent, show_progress=False)
    cases = load_cases(DATA).cases
    correct = [c for c in cases if c.label == "correct"]
    spoiled = sum(_unit(seed, c.id) < wrong for c in correct)
    assert 0 < spoiled < len(correct)
    assert summary["trials_planned"] == 16 and summary["complete"]
    rows = {r["model"]: r for r in summary["rows"]}
    assert rows["gold"]["tasks"] == 200 and rows["gold"]["trials"] == 400
    assert rows["gold"]["pass_at_1"] == pytest.approx(len(correct) / 200)
    assert rows["sloppy"]["pass_at_1"] == pytest.approx((len(correct) - spoiled) / 200)
    assert rows["sloppy"]["pass_at_k"] == rows["sloppy"]["pass_at_1"]  # the same answer every attempt
    tc = summary["toolcall"]["sloppy"]
    assert tc["by_label"]["correct"] == {
        "cases": 2 * len(correct),
        "passed": 2 * (len(correct) - spoiled),
        "pass_rate": pytest.approx(1 - spoiled / len(correct)),
    }
    assert all(v["passed"] == 0 for k, v in tc["by_label"].items() if k != "correct")
    assert sum(tc["call_classes"].values()) == 400
    # Per-case records: compact in result.json, full in cases.jsonl.
    folder = Path(root) / "trials" / "sloppy.toolcall.standard.limbic.set200-s0000.1"
    result = json.loads((folder / "result.json").read_text())
    assert result["shard"] == 0 and len(result["cases"]) == 60
    detail = [json.loads(x) for x in (folder / "cases.jsonl").read_text().splitlines()]
    assert [d["id"] for d in detail] == [c["id"] for c in result["cases"]] == [c.id for c in cases[:60]]
    failed_correct = [d for d in detail if d["label"] == "correct" and not d["passed"]]
    assert failed_correct and all(d["scored_by"] == "gold" and d["gold_diff"] for d in failed_correct)
    # The HTML report counts cases, not shards, and shows the passes by gold label, from summary.json or, with
    # it gone, recomputed from the records.
    from mcpfleet.runner.report.html import write_report

    cell = f'data-model="sloppy" data-label="correct" data-passed="{2 * (len(correct) - spoiled)}"'
    for _ in range(2):
        [data] = write_report([str(root)], tmp_path / "report.html")
        assert not data.notes or data.source == "recomputed"
        assert cell in (tmp_path / "report.html").read_text()
        (Path(root) / "summary.json").unlink(missing_ok=True)
    assert data.source == "recomputed" and data.summary["trials_recorded"] == 16
    assert {r["model"]: r["pass_at_1"] for r in data.summary["rows"]} == {
        r["model"]: r["pass_at_1"] for r in summary["rows"]
    }


def test_a_shard_pod_has_no_mcp_sidecar_and_gets_the_judge_key_by_reference(tmp_path: Path) -> None:
    from mcpfleet.operator.manifests import JUDGE_KEY_ENV, trial_pod
    from mcpfleet.operator.settings import OperatorSettings

    judge = {"model": "openai/gpt-5-mini", "apiKeySecretRef": {"name": "judge", "key": "token"}}
    path = toolcall_run(
        tmp_path, [{"name": "a", "model": "scripted/toolcall"}], toolcalls={"shardSize": 100, "judge": judge}
    )
    run = load_evalrun(path)
    trials = plan(run, path.parent)
    pod = trial_pod(run, trials[0], OperatorSettings())
    spec = pod["spec"]
    assert [c["name"] for c in spec["initContainers"]] == ["state"]  # no MCP server: no sidecar
    runner = spec["containers"][0]
    assert "--mcp-url" not in runner["args"] and "--state-dir" in runner["args"]
    env = {e["name"]: e for e in runner["env"]}
    assert env[JUDGE_KEY_ENV]["valueFrom"] == {"secretKeyRef": {"name": "judge", "key": "token"}}
    assert json.loads(env["MCPFLEET_TRIAL"]["value"])["shard"] == 0
    # An MCP task's pod keeps its sidecar.
    from conftest import make_tiny_pack

    fs = parse_evalrun(
        {
            "apiVersion": "mcpfleet.io/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "fs"},
            "spec": {
                "models": [{"name": "a", "model": "scripted/oracle"}],
                "tasks": {"path": str(make_tiny_pack(tmp_path / "fs"))},
            },
        }
    )
    fs_pod = trial_pod(fs, plan(fs, tmp_path)[0], OperatorSettings())
    assert [c["name"] for c in fs_pod["spec"]["initContainers"]] == ["state", "mcp-filesystem"]
    assert "--mcp-url" in fs_pod["spec"]["containers"][0]["args"]


async def fresh_call(target: Any, c: Case) -> Answer:
    """A schema-valid call that is not the labelled one for cases without gold; the gold call otherwise."""
    if c.label == "correct":
        return Answer(call=c.call)
    tool = c.tools[0]
    required = tool.input_schema.get("required") or []
    return Answer(call=ToolCall(name=tool.name, arguments={k: "?" for k in required}))


def test_a_shard_asks_the_named_judge_only_for_calls_without_gold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real Judge (LiteLLM over HTTP to a fake judge, cached on disk) from the EvalRun's judge settings."""
    from judge_server import judge_server

    from mcpfleet.runner.spec.evalrun import JudgeSettings
    from mcpfleet.runner.toolcalls import suite

    monkeypatch.setenv("MCPFLEET_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
    cases = load_cases(DATA).cases[:40]
    no_gold = [c for c in cases if c.label != "correct"]

    monkeypatch.setattr(suite, "ask", fresh_call)
    with judge_server() as server:
        settings = JudgeSettings(model="openai/answer=incorrect_tool", api_base=server.url, api_key_env="JUDGE_KEY")
        judge = suite.make_judge(settings, {"JUDGE_KEY": "judge-secret"})
        assert judge is not None and judge.target.api_key == "judge-secret"

        async def run_and_close(j: Any) -> list[Any]:
            try:
                return await suite.run_cases(cases, TARGET, j, 4)
            finally:
                await j.aclose()

        outcomes = asyncio.run(run_and_close(judge))
        judged = [o for o in outcomes if o.scored_by == "judge"]
        assert judged and all(o.case.label != "correct" for o in judged)
        assert all(not o.passed and o.failure == "incorrect_tool" and o.judge == "incorrect_tool" for o in judged)
        # Two cases with the same conversation and call are judged once (the second may hit the cache).
        assert judge.stats.requests + judge.stats.cache_hits == len(judged) <= len(no_gold)
        assert len(server.requests) == judge.stats.requests
        assert all(o.passed and o.scored_by == "gold" for o in outcomes if o.case.label == "correct")

        # The judge saw the models' calls, not the labelled ones.
        def seen(body: dict[str, Any]) -> tuple[str, str]:
            fn = json.loads(body["messages"][1]["content"])["messages"][-1]["tool_calls"][0]["function"]
            return fn["name"], json.dumps(fn["arguments"], sort_keys=True)

        made = {
            (o.answer.call.name, json.dumps(o.answer.call.arguments, sort_keys=True)) for o in judged if o.answer.call
        }
        labelled = {(o.case.call.name, json.dumps(o.case.call.arguments, sort_keys=True)) for o in judged}
        assert {seen(b) for b in server.requests} <= made and not {seen(b) for b in server.requests} & labelled
        # A second shard over the same calls is answered from the cache.
        second = suite.make_judge(settings, {})
        assert second is not None
        again = asyncio.run(run_and_close(second))
        assert second.stats.requests == 0 and second.stats.cache_hits == len(judged)
        assert [o.judge for o in again] == [o.judge for o in outcomes]
        assert server.open_connections() == 0


def test_a_shard_closes_its_judges_connections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard's judge client is released in the shard's own loop: the judge endpoint sees every connection
    closed, none left to a reset when the process ends (or to an "Unclosed client session" warning)."""
    from judge_server import judge_server

    from mcpfleet.runner.results.store import open_store
    from mcpfleet.runner.spec.trial import TrialContext
    from mcpfleet.runner.toolcalls import suite

    monkeypatch.setenv("MCPFLEET_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(suite, "ask", fresh_call)
    with judge_server() as server:
        judge = {"model": "openai/answer=incorrect_tool", "apiBase": server.url, "apiKeyEnv": "JUDGE_KEY"}
        path = toolcall_run(tmp_path, [{"name": "a", "model": "openai/not-called"}])
        raw = yaml.safe_load(path.read_text())
        raw["spec"]["toolcalls"]["judge"] = judge
        run = parse_evalrun(raw)
        spec = plan(run, path.parent)[0]
        store = open_store(run.spec.output.uri, run.name, path.parent)
        ctx = TrialContext(env={"JUDGE_KEY": "judge-secret"})
        result = asyncio.run(suite.run_shard(spec, store, ctx, 1, lambda: planned_task(spec)))
        assert result.failure != "infra_error", result.error
        assert server.requests, "the calls without gold go to the judge"
        assert server.open_connections() == 0


def test_cases_unanswered_when_the_shard_time_is_up_fail_as_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpfleet.runner.toolcalls import suite

    cases = [c for c in load_cases(DATA).cases if c.label == "correct"][:6]
    slow = {cases[1].id, cases[4].id}

    async def answer(target: Any, c: Case) -> Answer:
        await asyncio.sleep(5 if c.id in slow else 0)
        return Answer(call=c.call)

    monkeypatch.setattr(suite, "ask", answer)
    outcomes = asyncio.run(suite.run_cases(cases, TARGET, None, 2, timeout_s=0.5))
    # Two slots: the slow cases hold both until the time is up, so the last case, still queued, times out too.
    assert [o.failure for o in outcomes] == [None, "timeout", None, None, "timeout", "timeout"]
    assert [o.passed for o in outcomes] == [True, False, True, True, False, False]


def test_a_local_run_needs_the_judge_key_it_names(tmp_path: Path) -> None:
    from mcpfleet.runner.launch.launcher import check_credentials
    from mcpfleet.runner.spec.load import SpecError

    judge = {"model": "openai/gpt-5-mini", "apiKeyEnv": "TC_JUDGE_KEY"}
    path = toolcall_run(tmp_path, [{"name": "a", "model": "scripted/toolcall"}], toolcalls={"judge": judge})
    run = load_evalrun(path)
    with pytest.raises(SpecError, match=r"spec.toolcalls.judge.apiKeyEnv: environment variable TC_JUDGE_KEY"):
        check_credentials(run, {})
    check_credentials(run, {"TC_JUDGE_KEY": "k"})


def test_the_oracle_replays_labelled_calls_and_the_noop_agent_calls_nothing(tmp_path: Path) -> None:
    """No model at all: ``agent: oracle`` plays each case's labelled call (so exactly the correct cases pass),
    ``agent: noop`` answers without a call; ``tasks validate`` sees the no-op agent fail."""
    from mcpfleet.runner.launch.taskcheck import validate

    cases = load_cases(DATA).cases
    correct = sum(c.label == "correct" for c in cases)
    for agent, want in (("oracle", correct / 200), ("noop", 0.0)):
        path = toolcall_run(tmp_path / agent, [{"name": "a", "model": "openai/not-called"}], agent=agent)
        summary, root = execute(load_evalrun(path), path.parent, show_progress=False)
        [row] = summary["rows"]
        assert row["tasks"] == 200 and row["pass_at_1"] == pytest.approx(want), agent
        assert row["input_tokens"] == 0
        if agent == "noop":
            assert row["failures"] == {"no_tool_call": 200}
    pack = tmp_path / "oracle" / "pack"
    [report] = asyncio.run(validate([find_task(pack, "toolcall/standard/limbic/set200")], pack))
    assert report.noop_failed is True and not report.problems


def test_a_failing_provider_makes_a_shard_unscored_and_a_bad_key_stops_its_model(tmp_path: Path) -> None:
    """Cases whose provider failed (503 on every call) or refused the key (401) measured nothing of the model:
    their shards are provider_error / config_error, left out of pass@1, and the key's model stops launching."""
    models = [
        {"name": "gold", "model": "scripted/toolcall"},
        {"name": "down", "model": "scripted/toolcall?fault=status&fail_status=503"},
        {"name": "badkey", "model": "scripted/toolcall?fault=auth"},
    ]
    path = toolcall_run(
        tmp_path,
        models,
        limits={"llmRetries": 1},
        provider={"backoffInitialSeconds": 0.01, "backoffMaxSeconds": 0.02},
        retries={"limit": 0},
    )
    summary, root = execute(load_evalrun(path), path.parent, show_progress=False)
    rows = {r["model"]: r for r in summary["rows"]}
    assert rows["gold"]["pass_at_1"] == pytest.approx(
        len([c for c in load_cases(DATA).cases if c.label == "correct"]) / 200
    )
    records = [json.loads(p.read_text()) for p in Path(root).glob("trials/*/result.json")]
    by_model: dict[str, set[str | None]] = {}
    for r in records:
        by_model.setdefault(r["model"], set()).add(r["failure"])
    assert by_model["down"] == {"provider_error"}
    assert by_model["badkey"] == {"config_error"}
    down = next(r for r in records if r["model"] == "down")
    assert down["totals"]["llm_retries"] >= 1 and "503" in down["error"]
    # Nothing of theirs is scored: no pass@1 of 0 for a model the provider never let answer.
    assert rows["down"]["scored"] == rows["badkey"]["scored"] == 0 and rows["gold"]["scored"] == 200
    assert summary["not_scored"].get("provider_error", 0) >= 4 and summary["not_scored"].get("config_error", 0) >= 1
    assert "badkey" in summary["stopped"] and "down" not in summary["stopped"]


def test_a_shards_retry_budget_is_a_trials_per_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A case is a single-call trial, so provider.trialRetryBudget holds per case: a provider that rate-limits
    each case's first call costs a 60-case shard one retry per case, far past a trial's budget of 2, and every
    shard is still scored. Shared by the shard whole, the budget made all four shards provider_error."""
    models = [{"name": "limited", "model": "scripted/toolcall?fault=status&fail_status=429&fail=1"}]
    provider = {"trialRetryBudget": 2, "backoffInitialSeconds": 0.01, "backoffMaxSeconds": 0.02}
    path = toolcall_run(tmp_path, models, provider=provider, retries={"limit": 0})
    summary, root = execute(load_evalrun(path), path.parent, show_progress=False)
    [row] = summary["rows"]
    records = [json.loads(p.read_text()) for p in Path(root).glob("trials/*/result.json")]
    assert len(records) == 4 and {r["failure"] for r in records} <= {None, "toolcall_cases_failed"}
    assert all(r["totals"]["llm_retries"] > 2 for r in records)
    assert row["scored"] == 200 and row["pass_at_1"] == pytest.approx(
        len([c for c in load_cases(DATA).cases if c.label == "correct"]) / 200
    )


def test_a_shards_judge_has_a_retry_budget_per_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's retry budget (30, as a trial's) holds per case too: a judge that rate-limits every first
    request costs a shard one retry per judged case, and with more judged cases than 30 none is judge_error."""
    from judge_server import judge_server

    from mcpfleet.runner.results.store import open_store
    from mcpfleet.runner.spec.trial import TrialContext
    from mcpfleet.runner.toolcalls import suite

    monkeypatch.setenv("MCPFLEET_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(suite, "ask", fresh_call)
    with judge_server() as server:
        judge = {"model": "openai/throttle", "apiBase": server.url, "apiKeyEnv": "JUDGE_KEY"}
        path = toolcall_run(
            tmp_path, [{"name": "a", "model": "openai/not-called"}], toolcalls={"judge": judge, "shardSize": 200}
        )
        run = load_evalrun(path)
        [spec] = plan(run, path.parent)
        store = open_store(run.spec.output.uri, run.name, path.parent)
        asyncio.run(
            suite.run_shard(
                spec, store, TrialContext(env={"JUDGE_KEY": "judge-key-1234"}), 1, lambda: planned_task(spec)
            )
        )
    record = json.loads(next((tmp_path / "runs").rglob("result.json")).read_text())
    judged = [c for c in record["cases"] if c["scored_by"] == "judge"]
    assert server.throttled > 30 and len(judged) >= server.throttled
    assert record["failure"] in (None, "toolcall_cases_failed")
    assert not [c for c in judged if c["failure"] == "judge_error"]


# ------------------------------------------------------------------------------------------------ judge failures


class FailingJudge:
    """Raises JudgeError (its message holding ``secret``) for the cases in ``fail``, else answers ``label``."""

    def __init__(self, fail: set[str] | None = None, secret: str = "", label: str = "correct", delay: float = 0):
        self.fail, self.secret, self.label, self.delay = fail, secret, label, delay

    async def judge(self, c: Case) -> Verdict:
        from mcpfleet.runner.toolcalls.judge import JudgeError

        await asyncio.sleep(self.delay)
        if self.fail is None or c.id in self.fail:
            raise JudgeError(f"judge model openai/j: upstream rejected header Bearer {self.secret}")
        return Verdict(self.label, "judge", reasoning="fine")

    async def aclose(self) -> None:
        return None


def test_a_shard_redacts_the_judge_key_its_settings_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key named by spec.toolcalls.judge.apiKeyEnv never reaches result.json or cases.jsonl, even when the
    judge's error echoes it; the cases the judge failed are judge_error and the shard is not scored."""
    from mcpfleet.runner.results.store import open_store
    from mcpfleet.runner.spec.trial import TrialContext
    from mcpfleet.runner.toolcalls import suite

    secret = "judge-secret-value-42"
    monkeypatch.setattr(suite, "ask", fresh_call)
    monkeypatch.setattr(suite, "make_judge", lambda settings, env, **_: FailingJudge(secret=env["JUDGE_KEY"]))
    judge = {"model": "openai/j", "apiBase": "http://127.0.0.1:9/v1", "apiKeyEnv": "JUDGE_KEY"}
    path = toolcall_run(tmp_path, [{"name": "a", "model": "openai/not-called"}], toolcalls={"judge": judge})
    run = load_evalrun(path)
    spec = plan(run, path.parent)[0]
    store = open_store(run.spec.output.uri, run.name, path.parent)
    result = asyncio.run(
        suite.run_shard(spec, store, TrialContext(env={"JUDGE_KEY": secret}), 1, lambda: planned_task(spec))
    )
    written = b"".join(p.read_bytes() for p in (tmp_path / "runs").rglob("*") if p.is_file())
    assert b"judge-secret" not in written and secret not in (result.error or "")
    assert b"[REDACTED]" in written  # the judge's error is kept, without the key
    record = json.loads(next((tmp_path / "runs").rglob("result.json")).read_text())
    assert record["failure"] == "infra_error" and record["stop_reason"] == "judge_error"
    judged = [c for c in record["cases"] if c["scored_by"] == "judge"]
    assert judged and all(c["failure"] == "judge_error" for c in judged)
    assert all(c["passed"] for c in record["cases"] if c["label"] == "correct")  # the others keep their outcome


def test_a_judge_error_fails_only_its_case(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpfleet.runner.toolcalls import suite

    cases = judged_cases()[:6]
    monkeypatch.setattr(suite, "ask", fresh_call)
    judge = FailingJudge(fail={cases[2].id})
    outcomes = asyncio.run(suite.run_cases(cases, TARGET, judge, 2))  # type: ignore[arg-type]
    failures = [o.failure for o in outcomes]
    assert failures[2] == "judge_error" and outcomes[2].judge == "judge_error"
    assert "upstream rejected" in outcomes[2].detail["judge_reasoning"]
    assert all(o.passed for i, o in enumerate(outcomes) if i != 2 and o.scored_by == "judge")


def test_judge_error_cases_are_not_scored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A case the judge could not classify measured nothing of the model: left out of pass@1 like a provider
    error, in the shard's record and in the per-case results the summaries score."""
    from mcpfleet.runner.results.outcome import is_scored
    from mcpfleet.runner.toolcalls import suite
    from mcpfleet.runner.toolcalls.case_records import expand

    cases = judged_cases()[:3]
    monkeypatch.setattr(suite, "ask", fresh_call)
    outcomes = asyncio.run(suite.run_cases(cases, TARGET, FailingJudge(fail={cases[0].id}), 2))  # type: ignore[arg-type]
    record = {"task_id": "toolcall/x", "model": "a", "failure": None, "cases": [o.compact() for o in outcomes]}
    per_case = list(expand([record]))
    assert [is_scored(r["failure"]) for r in per_case] == [False, True, True]
    # A judge that answers judge_error (no usable answer) is unscored the same way.
    judged = asyncio.run(suite.score(cases[1], Answer(call=fresh_call_sync(cases[1])), FakeJudge("judge_error")))  # type: ignore[arg-type]
    assert judged.failure == "judge_error"
    assert not is_scored(next(expand([{**record, "cases": [judged.compact()]}]))["failure"])


def judged_cases() -> list[Case]:
    """Cases whose fresh_call answer goes to the judge (schema-valid, not the labelled call)."""
    return [
        c
        for c in load_cases(DATA).cases
        if run_score(c, Answer(call=fresh_call_sync(c)), FakeJudge("correct")).scored_by == "judge"
    ]


def fresh_call_sync(c: Case) -> ToolCall:
    answer = asyncio.run(fresh_call(None, c))
    assert answer.call is not None
    return answer.call


def test_the_shard_deadline_bounds_the_judge_too(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from mcpfleet.runner.toolcalls import suite

    cases = judged_cases()[:2]
    monkeypatch.setattr(suite, "ask", fresh_call)
    t0 = time.monotonic()
    outcomes = asyncio.run(suite.run_cases(cases, TARGET, FailingJudge(set(), delay=5), 2, timeout_s=0.5))  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 3
    assert [o.failure for o in outcomes] == ["judge_error", "judge_error"]


def test_arguments_json_cannot_read_are_malformed_not_a_crash() -> None:
    from types import SimpleNamespace

    from mcpfleet.runner.toolcalls.suite import first_call

    for raw in ('{"path": ' + "9" * 5000 + "}", '{"path": ' + "[" * 100000 + "]" * 100000 + "}"):
        fn = SimpleNamespace(name="list_files", arguments=raw)
        message = SimpleNamespace(tool_calls=[SimpleNamespace(function=fn, id="c1")])
        got, bad = first_call(message)
        assert got is not None and bad == raw


# ------------------------------------------------------------------------------------------------ review fixes


def test_a_schema_too_deep_for_the_checker_does_not_cost_the_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 120-level schema (far below json's nesting limit, so the loader accepts it) made the checker raise
    RecursionError out of ``score`` and the whole shard an infra_error; now its call is unchecked and scored."""
    from mcpfleet.runner.toolcalls import suite

    deep: dict[str, Any] = {"type": "string"}
    for _ in range(120):
        deep = {"type": "object", "properties": {"x": deep}}
    tools = [Tool(name="nest", input_schema=deep)]
    nested = Case(id="deep", tools=tools, history=[{"role": "user", "content": "go"}], call=call("nest", x={}))
    cases = [nested, case("correct", call(path="/data"))]
    monkeypatch.setattr(suite, "ask", lambda target, c: asyncio.sleep(0, Answer(call=c.call)))
    outcomes = asyncio.run(suite.run_cases(cases, TARGET, None, 2))
    assert [o.case.id for o in outcomes] == ["deep", "c1"]
    assert outcomes[0].checker == "schema_valid" and "too deeply" in outcomes[0].detail["checker_reasons"][0]["message"]
    assert outcomes[1].passed and outcomes[1].scored_by == "gold"


def test_an_unexpected_error_in_one_cases_scoring_leaves_it_unscored_and_the_others_stand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sqlite3

    from mcpfleet.runner.results.outcome import is_scored
    from mcpfleet.runner.toolcalls import suite
    from mcpfleet.runner.toolcalls.case_records import expand

    def broken_checker(tools: Any, c: ToolCall) -> Verdict:
        raise KeyError("checker bug")

    class BrokenJudge:
        async def judge(self, c: Case) -> Verdict:
            raise sqlite3.OperationalError("attempt to write a readonly database")

    def broken_compare(*args: Any) -> Any:
        raise RuntimeError("gold bug")

    monkeypatch.setattr(suite, "classify_call", broken_checker)
    unchecked = run_score(case("incorrect_parameter_values", call(path="/a")), Answer(call=call(path="/b")))
    assert unchecked.passed and unchecked.checker == "schema_valid"
    assert "KeyError" in unchecked.detail["checker_reasons"][0]["message"]
    monkeypatch.undo()
    judged = run_score(case("incorrect_parameter_values", call(path="/a")), Answer(call=call(path="/b")), BrokenJudge())
    assert judged.failure == "judge_error" and "readonly database" in judged.detail["judge_reasoning"]
    monkeypatch.setattr(suite, "compare", broken_compare)
    lost = run_score(case("correct", call(path="/a")), Answer(call=call(path="/a")))
    assert lost.failure == "infra_error" and "gold bug" in lost.detail["scoring_error"]
    record = {"task_id": "toolcall/x", "model": "a", "failure": None, "cases": [lost.compact(), unchecked.compact()]}
    assert [is_scored(r["failure"]) for r in expand([record])] == [False, True]


def test_a_cases_history_reaches_the_model_as_a_valid_openai_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    """limbic's shape (no ids, arguments as objects, Anthropic blocks) is converted before it is sent: a strict
    provider's 400 would otherwise be scored against the model as llm_api_error."""
    from mcpfleet.runner.llm import client as llm
    from mcpfleet.runner.toolcalls.suite import ask

    history: list[dict[str, Any]] = [
        {"role": "user", "content": "list /data, then read the first file"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "list_files", "arguments": {"path": "/data"}}}],
        },
        {"role": "tool", "content": "a.txt"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu1", "name": "list_files", "input": {"path": "/x"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "b"}]}],
        },
    ]
    sent: list[Any] = []

    async def complete(target: Any, messages: Any, tools: Any) -> Any:
        sent.append(messages)
        raise RuntimeError("stop here")

    monkeypatch.setattr(llm, "complete", complete)
    c = Case(id="m", tools=TOOLS, history=history, call=call("read_file", path="/data/a.txt"), label="correct")
    with pytest.raises(RuntimeError, match="stop here"):
        asyncio.run(ask(TARGET, c))
    (messages,) = sent
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    first, second = messages[1]["tool_calls"][0], messages[3]["tool_calls"][0]
    assert first["id"] and messages[2]["tool_call_id"] == first["id"]
    assert second["id"] == "tu1" and messages[4] == {"role": "tool", "tool_call_id": "tu1", "content": "b"}
    assert json.loads(first["function"]["arguments"]) == {"path": "/data"}
    assert json.loads(second["function"]["arguments"]) == {"path": "/x"}
    assert c.history == history  # the case keeps the data's shape: what the judge sees and its cache key


def test_a_task_made_again_from_the_same_data_keeps_its_content_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """meta.json's created_at is today's date: re-making the task on another day must not change the task's
    digest (part of every trial's spec hash), or its run could not be resumed. Changed data still changes it."""
    from datetime import UTC, datetime

    from mcpfleet.runner.tasks import toolcall_pack as pack

    data = tmp_path / "d.jsonl"
    data.write_text(DATA.read_text().splitlines()[0] + "\n")
    make_task(tmp_path / "p", data, "limbic", "s")
    digest = task_digest(find_task(tmp_path / "p", "toolcall/standard/limbic/s"))

    class Tomorrow(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return datetime(2031, 1, 2, tzinfo=UTC)

    monkeypatch.setattr(pack, "datetime", Tomorrow)
    again = make_task(tmp_path / "p", data, "limbic", "s")
    assert task_digest(find_task(tmp_path / "p", "toolcall/standard/limbic/s")) == digest
    assert json.loads((again / "meta.json").read_text())["created_at"] != "2031-01-02"
    data.write_text("\n".join(DATA.read_text().splitlines()[:2]) + "\n")
    changed = make_task(tmp_path / "p", data, "limbic", "s")
    assert task_digest(find_task(tmp_path / "p", "toolcall/standard/limbic/s")) != digest
    assert json.loads((changed / "meta.json").read_text())["created_at"] == "2031-01-02"
