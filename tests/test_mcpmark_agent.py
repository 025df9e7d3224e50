"""What the model is sent: by default MCPMark's agent's exact words, MCPMark's ReAct agent on request,
mcpfleet's bare prompt as an option. A recording OpenAI-compatible server (the scripted model in this
process) keeps every request body, so these tests read what really went over HTTP through LiteLLM to a
real filesystem MCP server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import TINY_DESCRIPTION, make_tiny_pack

import mcpfleet.runner.llm.client  # noqa: F401 - the warm-worker import (sets its LiteLLM env defaults once)
from mcpfleet.runner.launch.scripted_server import ScriptedModel
from mcpfleet.runner.plan import expand as plan
from mcpfleet.runner.results import store
from mcpfleet.runner.results.records import TrialResult
from mcpfleet.runner.spec import evalrun as spec
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.trial import engine as trial

# The protocol strings are read from the data file directly, not through the code under test.
PROTOCOL = json.loads((Path(__file__).parents[1] / "runner" / "spec" / "mcpmark_protocol.json").read_text())["strings"]
SYSTEM = PROTOCOL["system_prompt"]["text"]
SUFFIX = PROTOCOL["task_suffix.default"]["text"]


class Recorder:
    def __init__(self, url: str, seen: list[dict[str, Any]]) -> None:
        self.url, self.seen = url, seen


@pytest.fixture
async def recorder(tmp_path: Path) -> AsyncIterator[Recorder]:
    pack = make_tiny_pack(tmp_path / "pack")
    model = ScriptedModel([pack])
    seen: list[dict[str, Any]] = []

    async def chat(request: web.Request) -> web.StreamResponse:
        seen.append(await request.json())
        return await model.chat(request)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield Recorder(f"http://127.0.0.1:{runner.addresses[0][1]}/v1", seen)
    finally:
        await runner.cleanup()


def trial_spec(pack: Path, model: str = "scripted/oracle", **extra: Any) -> plan.TrialSpec:
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "t"},
        "spec": {"models": [{"name": "m", "model": model}], "tasks": {"path": str(pack)}, **extra},
    }
    [s] = plan.plan(parse_evalrun(doc), pack)
    return s


async def run(s: plan.TrialSpec, out: Path, url: str) -> tuple[TrialResult, Path]:
    st = store.LocalStore(out)
    result = await trial.run_trial(s, st, trial.TrialContext(scripted_base_url=url, backoff_initial=0.01))
    return result, st.trial_dir(s.trial_id)


def test_protocol_strings_are_mcpmarks() -> None:
    assert SYSTEM.startswith("You are a helpful agent that uses tools iteratively to complete the user's task")
    assert SUFFIX == (
        "\n\nNote: Based on your understanding, solve the task all at once by yourself, "
        "don't ask for my opinions on anything."
    )


async def test_default_run_sends_mcpmarks_prompt_tools_and_tool_messages(recorder: Recorder, tmp_path: Path) -> None:
    s = trial_spec(make_tiny_pack(tmp_path / "p"))
    assert s.agent == "mcpmark"
    result, d = await run(s, tmp_path / "out", recorder.url)
    assert result.passed, (result.error, result.verifier)
    first = recorder.seen[0]
    assert first["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TINY_DESCRIPTION + SUFFIX},
    ]
    assert first["tool_choice"] == "auto"
    # MCP input schemas are offered as the server gives them, as MCPMark does ($schema included)
    read = next(t["function"] for t in first["tools"] if t["function"]["name"] == "read_text_file")
    assert "$schema" in read["parameters"]
    # every tool message is json.dumps of MCP SDK 1.x's CallToolResult.model_dump()
    last = recorder.seen[-1]["messages"]
    tool_messages = [m for m in last if m["role"] == "tool"]
    assert len(tool_messages) == 5
    for m in tool_messages:
        dump = json.loads(m["content"])
        assert list(dump) == ["meta", "content", "structuredContent", "isError"]
        assert list(dump["content"][0]) == ["type", "text", "annotations", "meta"]
    assert json.loads(tool_messages[1]["content"])["content"][0]["text"] == "a\nb\nc\n"
    # messages.json starts with the instruction as sent (MCPMark leaves the system prompt out)
    items = json.loads((d / "messages.json").read_text())
    assert items[0] == {"content": TINY_DESCRIPTION + SUFFIX, "role": "user"}
    assert json.loads((d / "result.json").read_text())["protocol"].startswith("mcpmark@")


async def test_several_tool_calls_in_one_turn_run_in_order(recorder: Recorder, tmp_path: Path) -> None:
    pack = make_tiny_pack(tmp_path / "p")
    path = tmp_path / "script.json"
    calls = [
        {"name": "list_allowed_directories", "arguments": {}},
        {"name": "write_file", "arguments": {"path": "{root}/one.txt", "content": "1"}},
        {"name": "read_text_file", "arguments": {"path": "{root}/one.txt"}},
        {"name": "no_such_tool", "arguments": {}},
    ]
    path.write_text(json.dumps({"turns": [{"tool_calls": calls[:1]}, {"tool_calls": calls[1:]}, {"content": "ok"}]}))
    result, d = await run(trial_spec(pack, f"scripted/script={path}"), tmp_path / "out", recorder.url)
    assert result.stop_reason == "completed" and result.totals.tool_calls == 4
    history = recorder.seen[-1]["messages"]
    turn = next(i for i, m in enumerate(history) if m["role"] == "assistant" and len(m.get("tool_calls") or []) == 3)
    ids = [c["id"] for c in history[turn]["tool_calls"]]
    answers = history[turn + 1 : turn + 4]
    assert [m["role"] for m in answers] == ["tool"] * 3 and [m["tool_call_id"] for m in answers] == ids
    texts = [json.loads(m["content"])["content"][0]["text"] for m in answers]
    assert texts[1] == "1"  # the write ran before the read: calls execute in the model's order
    assert "no_such_tool" in texts[2] and json.loads(answers[2]["content"])["isError"] is True
    items = json.loads((d / "messages.json").read_text())
    kinds = [i.get("type", i.get("role")) for i in items]
    assert kinds == ["user", "function_call", "function_call_output"] + ["function_call"] * 3 + [
        "function_call_output"
    ] * 3 + ["message"]


async def test_mcpfleet_agent_keeps_its_own_prompt(recorder: Recorder, tmp_path: Path) -> None:
    result, d = await run(trial_spec(make_tiny_pack(tmp_path / "p"), agent="mcpfleet"), tmp_path / "o", recorder.url)
    assert result.passed and result.agent == "mcpfleet" and result.protocol is None
    first = recorder.seen[0]
    assert first["messages"] == [{"role": "user", "content": TINY_DESCRIPTION}] and "tool_choice" not in first
    tool = next(m for m in recorder.seen[-1]["messages"] if m["role"] == "tool")
    assert tool["content"].startswith("Allowed directories:")  # plain text, not a JSON dump


async def test_react_agent_plays_mcpmarks_react_protocol(recorder: Recorder, tmp_path: Path) -> None:
    result, d = await run(trial_spec(make_tiny_pack(tmp_path / "p"), agent="react"), tmp_path / "o", recorder.url)
    assert result.passed and result.failure is None, (result.error, result.verifier)
    assert result.agent == "react" and (result.protocol or "").startswith("mcpmark@")
    first = recorder.seen[0]
    assert "tools" not in first  # ReAct describes the tools in the prompt; no native tool calling
    system, user = first["messages"]
    assert system == {"role": "system", "content": PROTOCOL["react.system_prompt"]["text"]}
    assert user["content"].startswith("Task:\n" + TINY_DESCRIPTION + SUFFIX + "\n\nAvailable MCP tools:\nTool: ")
    assert '- path (required): {\n  "type": "string"\n}' in user["content"]
    assert user["content"].endswith(
        "Remember: omitting the action object ends the task, so only do this when finished."
    )
    later = recorder.seen[2]["messages"]
    assert later[3]["role"] == "user" and later[3]["content"].startswith("Observation:\n{")
    assert later[3]["content"].endswith("\nPlease continue reasoning and reply using the required JSON format.")
    assert result.totals.tool_calls == 5 and result.totals.turns == 6
    meta = json.loads((d / "meta.json").read_text())
    assert meta["turn_count"] == 6 and meta["execution_result"]["error_message"] is None
    items = json.loads((d / "messages.json").read_text())
    assert json.loads(items[-1]["content"][0]["text"])["answer"] == "Done."


async def test_react_agent_on_replies_that_are_not_json(recorder: Recorder, tmp_path: Path) -> None:
    s = trial_spec(make_tiny_pack(tmp_path / "p"), "scripted/noop", agent="react", limits={"maxTurns": 3})
    result, d = await run(s, tmp_path / "o", recorder.url)
    assert not result.passed and result.stop_reason == "turn_limit"
    assert result.error == "Model produced an invalid response format."  # MCPMark keeps the first such error
    warning = PROTOCOL["react.invalid_json"]["text"]
    sent = recorder.seen[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"][1:] == [warning, warning]
    meta = json.loads((d / "meta.json").read_text())
    assert meta["turn_count"] == 3 and meta["execution_result"]["error_message"] == result.error


@pytest.mark.parametrize(
    ("text", "follows", "fatal"),
    [
        ('{"thought": "t", "answer": "a"}', True, None),
        ("not json at all", False, None),  # {}: the invalid-JSON warning
        ('"plain words"', False, None),
        ("0", False, None),
        ("[]", False, None),
        ("42", False, "argument of type 'int' is not iterable"),
        ("true", False, "argument of type 'bool' is not iterable"),
        ('["thought"]', False, "'list' object has no attribute 'get'"),
        ('"a thought"', False, "'str' object has no attribute 'get'"),
    ],
)
def test_react_replies_that_are_json_but_no_object_end_the_run_where_mcpmarks_does(
    text: str, follows: bool, fatal: str | None
) -> None:
    """MCPMark tests ``not parsed or "thought" not in parsed`` and then calls ``parsed.get``: a truthy number
    makes the test raise, a list or string holding "thought" makes ``get`` raise; either ends its run."""
    from mcpfleet.runner.agent.react import check_reply, parse_reply

    assert check_reply(parse_reply(text)) == (follows, fatal)


def test_react_prompt_shows_a_tool_without_description_as_mcpmark_does() -> None:
    """MCPMark renders the tool's model_dump(): the description key is there with None, so the prompt reads
    'None' (its 'No description provided.' fallback is for a missing key, which an MCP tool never has)."""
    from mcp.types import Tool

    from mcpfleet.runner.agent.react import describe_tools

    text = describe_tools([Tool(name="ping", input_schema={"type": "object", "properties": {}})])
    assert "Description: None" in text and "No description provided." not in text


@pytest.mark.parametrize(
    "agent,params,sent",
    [("mcpmark", {}, 4096), ("react", {}, 4096), ("mcpmark", {"maxTokens": 9000}, 9000)],
)
async def test_claude_is_capped_at_mcpmarks_4096_output_tokens(
    agent: str, params: dict[str, Any], sent: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through LiteLLM to an Anthropic Messages endpoint: MCPMark's agents (on its litellm 1.80.0) ask Claude for
    at most 4096 output tokens per call, where today's LiteLLM would ask for the model's 64000."""
    bodies: list[dict[str, Any]] = []

    async def messages(request: web.Request) -> web.StreamResponse:
        bodies.append(await request.json())
        text = json.dumps({"thought": "done", "answer": "Done."}) if agent == "react" else "Done."
        return web.json_response(
            {
                "id": f"msg_{len(bodies)}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 2},
            }
        )

    app = web.Application()
    app.router.add_post("/v1/messages", messages)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-123456")
    try:
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        model = {"name": "m", "model": "anthropic/claude-sonnet-4-5-20250929", "apiBase": base, "params": params}
        s = trial_spec(make_tiny_pack(tmp_path / "pack"), agent=agent)
        s = s.model_copy(update={"model": spec.ModelSpec.model_validate(model)})
        result, _ = await run(s, tmp_path / "out", "http://127.0.0.1:9/v1")
    finally:
        await runner.cleanup()
    assert bodies and result.stop_reason == "completed", (result.error, bodies)
    assert {b["max_tokens"] for b in bodies} == {sent}
