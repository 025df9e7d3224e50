"""MCPMark's ReAct agent (src/agents/react_agent.py): the model answers in JSON, no native tool calling.

The tools are described in the first user message; each reply is ``{"thought", "action": {"tool",
"arguments"}}`` or ``{"thought", "answer"}``; a tool's result comes back as an "Observation" user message.
The words are MCPMark's (mcpmark_protocol.json); turns, tokens and tool calls are measured as in the
tool-calling loop, so records and aggregates are the same.
"""

from __future__ import annotations

import json
import time
from typing import Any

from mcp import ClientSession

from mcpfleet.runner.agent.call_classes import CallClassifier
from mcpfleet.runner.agent.conversation import mcp1_result_dump, mcpmark_target
from mcpfleet.runner.agent.loop import raise_if_server_gone, run_clock
from mcpfleet.runner.agent.metrics import TrialMetrics
from mcpfleet.runner.agent.transcript import (
    STOP_COMPLETED,
    STOP_MALFORMED,
    STOP_TIMEOUT,
    STOP_TURN_LIMIT,
    AgentRun,
    ToolCallRecord,
    TurnRecord,
)
from mcpfleet.runner.environment.mcp_client import AbandonedCalls, call_tool_abandoning
from mcpfleet.runner.llm import faults
from mcpfleet.runner.spec import mcpmark_protocol as protocol
from mcpfleet.runner.spec.task import Task

NAME = "react"


def describe_tools(tools: list[Any]) -> str:
    """The tool list as MCPMark's ReAct prompt renders it."""
    entries = []
    for tool in tools:
        schema = tool.input_schema or {}
        required = set(schema.get("required") or [])
        lines = [
            protocol.render(
                "react.argument_line",
                name=prop,
                required=protocol.text("react.required_marker") if prop in required else "",
                details=json.dumps(details, ensure_ascii=False, indent=2),
            )
            for prop, details in (schema.get("properties") or {}).items()
        ]
        # MCPMark renders model_dump()'s dict, where a tool without a description has the key with None: its
        # "No description provided." fallback never applies to an MCP tool, and the prompt reads "None".
        description = str(tool.description)
        entries.append(
            protocol.render(
                "react.tool_entry",
                name=tool.name,
                description=description,
                arguments="\n".join(lines) if lines else protocol.text("react.no_arguments"),
            )
        )
    return "\n\n".join(entries) if entries else protocol.text("react.no_tools")


def _content_text(content: Any) -> str:
    """Reply content as text, as MCPMark normalises it (a non-string, non-list becomes its JSON)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(block.get("text", ""))
                elif "text" in block:
                    parts.append(str(block.get("text")))
            else:
                parts.append(str(block))
        return "\n".join(p for p in parts if p)
    return json.dumps(content, ensure_ascii=False)


def parse_reply(text: str) -> Any:
    """The reply's JSON, tolerating code fences and a leading 'json' tag; {} when it does not parse."""
    candidate = text.strip().strip("`").strip()
    if candidate.lower().startswith("json"):
        candidate = candidate[4:].lstrip()
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        return {}


def check_reply(reply: Any) -> tuple[bool, str | None]:
    """MCPMark's test of a parsed reply (``not parsed or "thought" not in parsed``) and where it leads: (follows
    the schema, why the run fails). A reply that fails the test gets the invalid-JSON warning; JSON that is no
    object ends MCPMark's run when the test raises (``in`` on a truthy number) or its ``parsed.get`` does (a
    list or string that contains "thought")."""
    try:
        follows = bool(reply) and "thought" in reply
    except TypeError as exc:
        return False, str(exc)
    if follows and not isinstance(reply, dict):
        return False, f"'{type(reply).__name__}' object has no attribute 'get'"
    return follows, None


def _failed(run: AgentRun, error: str) -> AgentRun:
    """End the run as MCPMark's agent ends when its loop raises on a reply (``execute`` wraps the exception)."""
    run.stop_reason = STOP_MALFORMED
    run.error = protocol.render("react.agent_failed_error", error=error)
    return run


def llm_error(exc: Any, step: int) -> str:
    """What MCPMark's ReAct loop records for an LLM call that failed (``exc`` an ``llm.LLMFailure``): its timeout
    words when the call hit the per-call limit, else str() of the exception (result.json keeps mcpfleet's line)."""
    if exc.fault.kind == faults.TIMEOUT:
        return protocol.render("react.llm_timeout_error", step=step)
    cause = exc.__cause__ if exc.__cause__ is not None else exc.summary
    return protocol.render("react.llm_failed_error", step=step, error=cause)


def _observation(text: str) -> dict[str, str]:
    return {"role": "user", "content": protocol.render("react.observation", observation=text)}


async def _act(
    session: ClientSession,
    known: list[str],
    action: dict[str, Any],
    timeout: float,
    turn: TurnRecord,
    classifier: CallClassifier,
    abandoned: AbandonedCalls,
) -> str:
    name = action.get("tool")
    arguments = action.get("arguments", {}) or {}
    rec = ToolCallRecord(name=str(name), call_id=f"react_{turn.index}", arguments=json.dumps(arguments))
    rec.call_class = classifier.classify(rec.name, rec.arguments)
    turn.tool_calls.append(rec)
    if name not in known:
        rec.malformed = rec.is_error = True
        return protocol.render("react.invalid_tool", tool=name, tools=", ".join(known))
    start = time.perf_counter()
    try:
        result = await call_tool_abandoning(session, name, arguments, timeout, abandoned)
    except TimeoutError:
        rec.is_error = True
        return protocol.render("react.tool_timeout", tool=name)
    except Exception as exc:  # noqa: BLE001 - read back to the model, as MCPMark does
        raise_if_server_gone(exc, name)  # the harness failed, not the model: an infrastructure error
        rec.is_error = True
        return protocol.render("react.tool_failed", tool=name, error=exc)
    finally:
        rec.duration_s = time.perf_counter() - start
    rec.is_error = bool(getattr(result, "is_error", False))
    return observation_text(result)


def observation_text(result: Any) -> str:
    """A tool result as MCPMark's ReAct agent reads it back (``_tool_result_to_text``): JSON of the MCP SDK 1.12
    ``model_dump()``, or, when that holds a value JSON cannot write, the dict's Python text. A resource's URI is
    such a value there (the SDK parses it as pydantic's ``AnyUrl``), so a result with one reads as that text."""
    from pydantic import AnyUrl, ValidationError

    dump = mcp1_result_dump(result)
    for block in dump["content"]:
        holder = block.get("resource") if block.get("type") == "resource" else block
        if block.get("type") in ("resource", "resource_link") and isinstance(holder, dict) and holder.get("uri"):
            try:
                holder["uri"] = AnyUrl(holder["uri"])
            except ValidationError:  # (the SDK there would have refused the result; left as the text it is)
                pass
    try:
        return json.dumps(dump, ensure_ascii=False)
    except TypeError:  # a value JSON cannot write: MCPMark falls back to the dict's Python text
        return str(dump)


async def run_react_agent(
    session: ClientSession,
    task: Task,
    target: Any,
    *,
    max_turns: int,
    timeout_s: float,
    tool_timeout_s: float,
    metrics: TrialMetrics | None = None,
    abandoned: AbandonedCalls,
    started: float | None = None,
) -> AgentRun:
    """The ReAct loop: at most ``max_turns`` replies; an answer ends it, anything else is answered. Tool calls
    abandoned at their timeout go to ``abandoned``: the caller ends them. ``started``: as ``agent.run_clock``."""
    from mcpfleet.runner.llm import client as llm  # heavy import, paid once per warm worker

    listed = list((await session.list_tools()).tools)
    known = [t.name for t in listed]
    if metrics is not None:
        metrics.tools(sorted(known))
    prompt = protocol.render(
        "react.task_prompt",
        instruction=protocol.instruction(task.service, task.description),
        tools_description=describe_tools(listed),
    )
    run = AgentRun(
        messages=[
            {"role": "system", "content": protocol.text("react.system_prompt")},
            {"role": "user", "content": prompt},
        ],
        conversation=NAME,
    )
    run.classifier = CallClassifier(listed)
    target = mcpmark_target(target)  # MCPMark's ReAct agent calls LiteLLM too (no native tools: no tool_choice)
    error: str | None = None
    try:
        async with run_clock(timeout_s, started) as deadline:
            for step in range(1, max_turns + 1):
                turn = TurnRecord(index=step - 1)
                run.turns.append(turn)
                try:
                    # Time lost to provider faults is given back to `deadline`: the timeout measures the model.
                    response, seconds, retries = await llm.complete(target, run.messages, [], deadline)
                except llm.LLMFailure as exc:  # MCPMark's ReAct agent stops on a failed call
                    turn.retries, turn.latency_s = exc.retries, exc.seconds
                    run.stop_reason, run.error_type = exc.stop_reason, exc.error_type
                    run.error = protocol.render("react.llm_failed_error", step=step, error=exc.summary)
                    run.mcpmark_error = llm_error(exc, step)
                    return run
                turn.latency_s, turn.retries = seconds, retries
                if run.run_model is None and getattr(response, "model", None):
                    run.run_model = str(response.model).split("/")[-1]
                u = llm.usage_of(response, target)
                turn.input_tokens, turn.output_tokens, turn.total_tokens = (
                    u.input_tokens,
                    u.output_tokens,
                    u.total_tokens,
                )
                turn.reasoning_tokens, turn.cached_tokens, turn.cost_usd = (
                    u.reasoning_tokens,
                    u.cached_tokens,
                    u.cost_usd,
                )
                if metrics is not None:
                    tokens = {"input": u.input_tokens, "output": u.output_tokens}
                    tokens.update(reasoning=u.reasoning_tokens, cached=u.cached_tokens)
                    metrics.turn(seconds, retries, tokens)
                choice = response.choices[0]
                turn.finish_reason = getattr(choice, "finish_reason", None)
                text = _content_text(choice.message.content)
                run.messages.append({"role": "assistant", "content": text})
                run.final_text = text
                reply = parse_reply(text)
                follows, fatal = check_reply(reply)
                if fatal is not None:
                    return _failed(run, fatal)
                if not follows:
                    run.messages.append({"role": "user", "content": protocol.text("react.invalid_json")})
                    error = protocol.text("react.invalid_format_error")
                    continue
                action = reply.get("action")
                if action is not None and not isinstance(action, dict):
                    # MCPMark's agent reads ``action.get("tool")`` (to log it) before it looks for an answer
                    return _failed(run, f"'{type(action).__name__}' object has no attribute 'get'")
                if reply.get("answer") is not None:
                    run.stop_reason, run.error = STOP_COMPLETED, None
                    return run
                if isinstance(action, dict):
                    try:
                        hash(action.get("tool"))  # MCPMark looks the name up in a dict: an unhashable one raises
                    except TypeError as exc:
                        return _failed(run, str(exc))
                    observation = await _act(session, known, action, tool_timeout_s, turn, run.classifier, abandoned)
                    if metrics is not None:
                        for c in turn.tool_calls:
                            metrics.tool_call(c.name, c.duration_s, c.is_error, c.malformed)
                    run.messages.append(_observation(observation))
                elif reply.get("result") is not None:
                    run.messages.append(_observation(str(reply["result"])))
                else:
                    run.messages.append({"role": "user", "content": protocol.text("react.missing_action")})
            run.stop_reason = STOP_TURN_LIMIT
            run.error = error or protocol.render("react.max_iterations_error", max_iterations=max_turns)
    except TimeoutError:
        run.stop_reason, run.error = STOP_TIMEOUT, protocol.render("timeout_error", timeout=f"{timeout_s:g}")
    return run
