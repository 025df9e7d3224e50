"""Trials MCPMark would not publish as the model's failure, and what MCPMark writes when a Claude run times out.

MCPMark (src/errors.py ``is_retryable_error``) treats a failed task whose meta.json ``error_message`` holds one of
its RETRYABLE_PATTERNS as a pipeline error: its evaluator runs the task again on resume and its
``aggregate_results`` reports no model that still has one. mcpfleet pins the patterns in
runner/spec/mcpmark_protocol.json and leaves such a trial unscored (``provider_error``), retried like one. Separately,
MCPMark's agent writes a Claude run that its timeout ended as the raw chat list (``_partial_messages``), not in
the SDK format, both as messages.json and as the verifier's MCP_MESSAGES.
"""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import TINY_DESCRIPTION, make_tiny_pack
from test_mcpmark_export import discover_task_names, mcpmark_aggregate

import mcpfleet.runner.llm.client  # noqa: F401 - the warm-worker import (sets its LiteLLM env defaults once)
from mcpfleet.runner.plan import expand as plan
from mcpfleet.runner.report.export import export_mcpmark
from mcpfleet.runner.results import store
from mcpfleet.runner.results.outcome import is_scored
from mcpfleet.runner.results.records import TrialResult, dumps_mcpmark, messages_json
from mcpfleet.runner.spec import mcpmark_protocol
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.trial import engine as trial

DATA = json.loads((Path(__file__).parents[1] / "runner" / "spec" / "mcpmark_protocol.json").read_text())
PINNED = DATA["retryable_patterns"]["patterns"]
SYSTEM = DATA["strings"]["system_prompt"]["text"]
SUFFIX = DATA["strings"]["task_suffix.default"]["text"]
FIX = Path(__file__).parent / "fixtures" / "mcpmark_records"
# MCPMark's harness as mirrored on the project's machines (a bare git repository); read at the pinned commit.
MIRROR = Path("/work/.mirror/eval-sys+mcpmark/repo")
# src/errors.py RETRYABLE_PATTERNS at that commit, transcribed for machines without the mirror.
TRANSCRIBED = {
    "ratelimit",
    "agent execution failed",
    "unavailable",
    "internal server error",
    "network error",
    "quota",
    "account balance",
    "mcp network error",
    "state duplication error",
    "thought_signature",
    "overloaded.",
}
KEY = "sk-test-provider-key-123456"


def mirrored_patterns() -> set[str] | None:
    """RETRYABLE_PATTERNS as MCPMark's src/errors.py assigns it at the pinned commit, None without the mirror."""
    if not MIRROR.is_dir():
        return None
    commit = DATA["about"]["commit"]
    source = subprocess.run(
        ["git", "-C", str(MIRROR), "show", f"{commit}:src/errors.py"], capture_output=True, text=True, check=True
    ).stdout
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "RETRYABLE_PATTERNS" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, set)
            return {str(v) for v in value}
    raise AssertionError("src/errors.py at the pinned commit assigns no RETRYABLE_PATTERNS")


def test_pinned_patterns_are_mcpmarks() -> None:
    assert len(PINNED) == len(set(PINNED)) and mcpmark_protocol.retryable_patterns() == set(PINNED)
    assert set(PINNED) == (mirrored_patterns() or TRANSCRIBED)
    assert DATA["retryable_patterns"]["source"].startswith("src/errors.py")


@pytest.mark.parametrize(
    ("message", "retryable"),
    [
        ("ReAct agent execution failed: 'str' object has no attribute 'get'", True),
        ("litellm.BadRequestError: VertexAIException - Function call is missing a Thought_Signature.", True),
        ("State Duplication Error", True),
        ("Agent execution failed: RuntimeError: the MCP server did not start", True),
        ("litellm.RateLimitError: RateLimitError: too many requests", True),
        ("Model is Overloaded. Try later", True),
        ("overloaded", False),  # the pattern holds the full stop
        ("LLM call timed out on step 3", False),
        ("Filesystem Operation timed out", False),
        ("Max turns (100) exceeded", False),
        ("Too many consecutive failures (3)", False),
        ("", False),
        (None, False),
    ],
)
def test_retryable_is_mcpmarks_substring_rule(message: str | None, retryable: bool) -> None:
    assert mcpmark_protocol.is_retryable(message) is retryable


# -- trials end to end ----------------------------------------------------------------------------------


def trial_spec(pack: Path, model: Any = "scripted/oracle", **extra: Any) -> plan.TrialSpec:
    models = [model if isinstance(model, dict) else {"name": "m", "model": model}]
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "t"},
        "spec": {"models": models, "tasks": {"path": str(pack)}, **extra},
    }
    [s] = plan.plan(parse_evalrun(doc), pack)
    return s


async def run(s: plan.TrialSpec, out: Path, url: str, env: dict[str, str] | None = None) -> tuple[TrialResult, Path]:
    st = store.LocalStore(out)
    c = trial.TrialContext(scripted_base_url=url, backoff_initial=0.01, env=env)
    result = await trial.run_trial(s, st, c)
    return result, st.trial_dir(s.trial_id)


def meta_error(d: Path) -> str | None:
    return json.loads((d / "meta.json").read_text())["execution_result"]["error_message"]


def mcpmark_reports_the_model(out: Path, pack: Path, tmp_path: Path) -> bool:
    """Export the one-trial run and ask (a re-implementation of) MCPMark's aggregate_results whether it reports the
    model or sets it aside for a retryable error (tests/test_mcpmark_export.py ``mcpmark_aggregate``)."""
    done = export_mcpmark(store.LocalStore(out), tmp_path / "exported")
    aggregated = mcpmark_aggregate(done.root, {"filesystem": discover_task_names(pack, "filesystem")}, 1)
    return "m" in aggregated.get("filesystem", {})


REACT_STRING_ACTION = {"turns": [{"content": json.dumps({"thought": "look", "action": "list_allowed_directories"})}]}
ENDINGS = [
    # (case, model, run spec, failure, scored)
    ("react_string_action", "script", {"agent": "react"}, "provider_error", False),
    ("verifier_failed", "scripted/noop", {}, "premature_stop", True),
    ("turn_limit", "scripted/loop", {"limits": {"maxTurns": 3}}, "turn_limit", True),
    (
        "timeout",
        "scripted/oracle?latency=1.5",
        {"limits": {"timeoutSeconds": 3, "llmTimeoutSeconds": 2}},
        "timeout",
        True,
    ),
]


@pytest.mark.parametrize(("case", "model", "extra", "failure", "scored"), ENDINGS, ids=[e[0] for e in ENDINGS])
async def test_a_trial_mcpmark_runs_again_is_not_scored(
    case: str, model: str, extra: dict[str, Any], failure: str, scored: bool, scripted_url: str, tmp_path: Path
) -> None:
    """ReAct's "ReAct agent execution failed: ..." (a reply whose action is a string) is a pipeline error to
    MCPMark: unscored here, its record still saying what happened; a verifier failure, the turn limit and the
    timeout stay the model's. Whatever mcpfleet scores, MCPMark's aggregator reports (never sets it aside)."""
    pack = make_tiny_pack(tmp_path / "pack")
    if model == "script":
        path = tmp_path / "script.json"
        path.write_text(json.dumps(REACT_STRING_ACTION))
        model = f"scripted/script={path}"
    result, d = await run(trial_spec(pack, model, **extra), tmp_path / "out", scripted_url)
    assert not result.passed and result.failure == failure, (result.stop_reason, result.error)
    assert is_scored(result.failure) is scored
    assert mcpmark_protocol.is_retryable(meta_error(d)) is not scored
    if case == "react_string_action":
        said = "ReAct agent execution failed: 'str' object has no attribute 'get'"
        assert result.stop_reason == "malformed_tool_call" and meta_error(d) == said
        assert (result.error or "").startswith(said + " (not scored: MCPMark runs a failed task again")
        assert "'agent execution failed'" in (result.error or "")
    else:
        assert "not scored" not in (result.error or "")
    assert mcpmark_reports_the_model(tmp_path / "out", pack, tmp_path) is scored


async def test_a_passing_trial_stays_a_pass_whatever_its_error(scripted_url: str, tmp_path: Path) -> None:
    """A passing end state is a pass in MCPMark whatever the agent's error said (it runs only failures again)."""
    pack = make_tiny_pack(tmp_path / "pack")
    (pack / "filesystem" / "standard" / "tiny" / "move_todo_0" / "verify.py").write_text("print('fine')\n")
    path = tmp_path / "script.json"
    path.write_text(json.dumps(REACT_STRING_ACTION))
    result, d = await run(trial_spec(pack, f"scripted/script={path}", agent="react"), tmp_path / "out", scripted_url)
    assert result.passed and result.failure is None, (result.error, result.verifier)
    assert result.stop_reason == "malformed_tool_call" and mcpmark_protocol.is_retryable(meta_error(d))
    assert "not scored" not in (result.error or "")


# -- an LLM error whose text MCPMark takes for a pipeline error -----------------------------------------


@pytest.fixture
async def provider(
    tmp_path: Path,
) -> AsyncIterator[Callable[[Callable[[web.Request], Awaitable[web.StreamResponse]]], Awaitable[str]]]:
    """Start an in-process HTTP endpoint answering LLM calls with the given handler; yields a starter."""
    runners: list[web.AppRunner] = []

    async def start(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> str:
        app = web.Application()
        for route in ("/v1/chat/completions", "/chat/completions", "/v1/messages"):
            app.router.add_post(route, handler)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for r in runners:
        await r.cleanup()


def bad_request(message: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
        return web.json_response(body, status=400)

    return handler


@pytest.mark.parametrize(
    ("message", "failure"),
    [
        ("Function call is missing a thought_signature in functionCall parts.", "provider_error"),
        ("Invalid value for 'messages[2].content': expected a string.", "llm_api_error"),
    ],
    ids=["thought_signature", "plain_400"],
)
async def test_a_400_naming_a_retryable_pattern_is_not_scored(
    message: str, failure: str, provider: Any, tmp_path: Path
) -> None:
    """A 400 is the model's (the request came from its conversation), unless its text holds one of MCPMark's
    patterns (Gemini's missing thought_signature): MCPMark's loop records str() of the exception and runs the task
    again. meta.json holds that str(); result.json keeps mcpfleet's one line."""
    base = await provider(bad_request(message))
    model = {"name": "m", "model": "openai/gemini-3-pro-preview", "apiBase": f"{base}/v1", "apiKeyEnv": "TEST_KEY"}
    pack = make_tiny_pack(tmp_path / "pack")
    result, d = await run(trial_spec(pack, model), tmp_path / "out", "http://127.0.0.1:9/v1", {"TEST_KEY": KEY})
    assert not result.passed and result.failure == failure, (result.stop_reason, result.error)
    assert result.stop_reason == "llm_api_error" and "(HTTP 400; not retried)" in (result.error or "")
    said = meta_error(d) or ""
    assert said.startswith("litellm.BadRequestError: ") and message in said  # str() of LiteLLM's exception
    assert "not retried" not in said and KEY not in said
    assert ("not scored" in (result.error or "")) is (failure == "provider_error")
    assert mcpmark_reports_the_model(tmp_path / "out", pack, tmp_path) is (failure != "provider_error")


# -- a Claude run that its timeout ended ----------------------------------------------------------------


def test_claude_timeout_messages_json_is_mcpmarks_raw_chat_list() -> None:
    """The fixture is what MCPMark's save_messages_json writes from ``_partial_messages`` when its timeout cuts
    chat.json's run during the second turn's tool calls: the list up to that turn's assistant message (its last
    progress update), system message included, unconverted."""
    chat = json.loads((FIX / "chat.json").read_text())
    expected = (FIX / "messages_claude_timeout.json").read_bytes()
    assert dumps_mcpmark(messages_json(chat[:6], raw=True)) == expected
    assert dumps_mcpmark(messages_json(chat[:6])) != expected  # any other run: the SDK items


PRINT_MESSAGES = """
import os, sys
sys.stdout.write(open(os.environ["MCP_MESSAGES"], encoding="utf-8").read())
sys.exit(1)
"""


def anthropic_replies() -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """Claude through Anthropic's Messages API: a tool call after 2 s, then a reply that never comes in time."""
    calls: list[int] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        calls.append(1)
        if len(calls) > 1:
            await asyncio.sleep(30)  # past the agent's 4 s: MCPMark's run timeout ends it
        await asyncio.sleep(2)
        return web.json_response(
            {
                "id": f"msg_{len(calls)}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [
                    {"type": "text", "text": "Looking first."},
                    {"type": "tool_use", "id": "toolu_1", "name": "list_allowed_directories", "input": {}},
                ],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
        )

    return handler


LIMITS = {"timeoutSeconds": 4, "llmTimeoutSeconds": 3}


async def test_a_claude_timeout_writes_the_raw_chat_list(
    provider: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = await provider(anthropic_replies())
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    model = {"name": "m", "model": "anthropic/claude-sonnet-4-5-20250929", "apiBase": base}
    pack = make_tiny_pack(tmp_path / "pack")
    (pack / "filesystem" / "standard" / "tiny" / "move_todo_0" / "verify.py").write_text(PRINT_MESSAGES)
    result, d = await run(trial_spec(pack, model, limits=LIMITS), tmp_path / "out", "http://127.0.0.1:9/v1")
    assert result.stop_reason == "timeout" and result.failure == "timeout", result.error
    stored = (d / "messages.json").read_text(encoding="utf-8")
    assert result.verifier.stdout == stored  # the verifier read the same file (MCP_MESSAGES)
    items = json.loads(stored)
    assert stored == dumps_mcpmark(items).decode()  # json.dump, indent 2, no trailing newline
    # _partial_messages after the first turn's tool results: system, user, the assistant's dump, the tool message
    assert items[:2] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TINY_DESCRIPTION + SUFFIX}]
    assert [i["role"] for i in items] == ["system", "user", "assistant", "tool"]
    assistant, tool = items[2], items[3]
    assert assistant["content"] == "Looking first." and "function_call" in assistant  # the provider message's dump
    [call] = assistant["tool_calls"]
    assert call["function"]["name"] == "list_allowed_directories" and tool["tool_call_id"] == call["id"]
    assert json.loads(tool["content"])["content"][0]["text"].startswith("Allowed directories:")
    assert not any("type" in i for i in items)  # no SDK item: a verifier's "type": "message" answer is not there


async def test_other_models_timeouts_stay_in_the_sdk_format(scripted_url: str, tmp_path: Path) -> None:
    pack = make_tiny_pack(tmp_path / "pack")
    (pack / "filesystem" / "standard" / "tiny" / "move_todo_0" / "verify.py").write_text(PRINT_MESSAGES)
    s = trial_spec(pack, "scripted/oracle?latency=2", limits=LIMITS)
    result, d = await run(s, tmp_path / "out", scripted_url)
    assert result.stop_reason == "timeout", result.error
    items = json.loads((d / "messages.json").read_text())
    assert result.verifier.stdout == (d / "messages.json").read_text()
    assert items[0] == {"content": TINY_DESCRIPTION + SUFFIX, "role": "user"}
    assert [i.get("type") for i in items[1:]] == ["function_call", "function_call_output"]


# -- MCPMark's words for an LLM call that failed for good ------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "said", "error"),
    [
        ("react", "LLM call timed out on step 1", "LLM call failed on step 1: Timeout: no reply within 1 s"),
        ("mcpmark", "Too many consecutive failures (3)", "Timeout: no reply within 1 s"),
    ],
)
async def test_an_llm_call_timeout_is_recorded_in_mcpmarks_words(
    agent: str, said: str, error: str, scripted_url: str, tmp_path: Path
) -> None:
    """A provider that never answers: MCPMark's ReAct agent writes its timeout words (left alone by its
    standardisation: "timed out", not "timeout"), its tool-calling agent the words of its third failed try.
    result.json keeps mcpfleet's line, with how its retries ended; the trial is unscored either way."""
    s = trial_spec(
        make_tiny_pack(tmp_path / "pack"),
        "scripted/oracle?fault=hang&fail=9",
        agent=agent,
        limits={"timeoutSeconds": 10, "llmTimeoutSeconds": 1, "llmRetries": 0},
    )
    result, d = await run(s, tmp_path / "out", scripted_url)
    assert result.failure == "provider_error" and result.stop_reason == "provider_error", result.error
    assert meta_error(d) == said
    assert (result.error or "").startswith(error) and "retr" in (result.error or "")


# -- ReAct replies decided where MCPMark's loop decides them ----------------------------------------------


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ({"thought": "t", "action": "read_file", "answer": "x"}, "'str' object has no attribute 'get'"),
        ({"thought": "t", "action": {"tool": ["read_file"], "arguments": {}}}, "unhashable type: 'list'"),
        ({"thought": "t", "action": {"tool": {"name": "x"}}}, "unhashable type: 'dict'"),
    ],
    ids=["answer_with_string_action", "list_tool_name", "object_tool_name"],
)
async def test_react_replies_that_crash_mcpmarks_loop_end_the_run(
    reply: dict[str, Any], why: str, scripted_url: str, tmp_path: Path
) -> None:
    """MCPMark reads ``action.get("tool")`` before it looks for an answer, and looks the tool name up in a dict:
    a string action with an answer, or an unhashable name, raise there and end its run (a retryable error)."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [{"content": json.dumps(reply)}]}))
    s = trial_spec(make_tiny_pack(tmp_path / "pack"), f"scripted/script={path}", agent="react")
    result, d = await run(s, tmp_path / "out", scripted_url)
    assert result.stop_reason == "malformed_tool_call" and result.failure == "provider_error", result.error
    assert meta_error(d) == f"ReAct agent execution failed: {why}"
    assert result.totals.tool_calls == 0 and result.totals.turns == 1


def test_react_reads_a_resource_result_as_mcpmarks_python_text() -> None:
    """MCPMark's ReAct agent json.dumps the SDK 1.12 model_dump(), whose resource URIs are pydantic AnyUrl: that
    raises, and it reads back ``str()`` of the dict instead. Text results stay JSON, non-ASCII kept."""
    import mcp.types as mt

    from mcpfleet.runner.agent.react import observation_text

    contents = mt.TextResourceContents(uri="file:///w/a.txt", mime_type="text/plain", text="hi")
    embedded = mt.CallToolResult(content=[mt.EmbeddedResource(type="resource", resource=contents)])
    assert observation_text(embedded) == (
        "{'meta': None, 'content': [{'type': 'resource', 'resource': {'uri': AnyUrl('file:///w/a.txt'), "
        "'mimeType': 'text/plain', 'meta': None, 'text': 'hi'}, 'annotations': None, 'meta': None}], "
        "'structuredContent': None, 'isError': False}"
    )
    link = mt.CallToolResult(content=[mt.ResourceLink(type="resource_link", name="a", uri="https://example.com")])
    assert "'uri': AnyUrl('https://example.com/'), " in observation_text(link)  # as pydantic normalises it
    text = mt.CallToolResult(content=[mt.TextContent(type="text", text="café")])
    assert observation_text(text) == (
        '{"meta": null, "content": [{"type": "text", "text": "café", "annotations": null, "meta": null}], '
        '"structuredContent": null, "isError": false}'
    )
