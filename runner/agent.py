"""Agents: the mcpfleet tool-calling loop (MCPMark-Agent's minimal loop, measured), oracle and no-op.

The loop keeps the conversation in OpenAI chat format (what LiteLLM speaks); records.py converts it to
MCPMark's messages.json at the end. Every turn records tokens, latency and each tool call's duration.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from mcp import ClientSession

from .mcp_client import result_text, tool_to_openai
from .metrics import TrialMetrics
from .tasks import Task

# Why the agent stopped. "completed" means the model ended with a message and no tool calls.
STOP_COMPLETED = "completed"
STOP_TURN_LIMIT = "turn_limit"
STOP_TIMEOUT = "timeout"
STOP_CONTEXT = "context_overflow"
STOP_LLM_ERROR = "llm_api_error"
STOP_TRUNCATED = "output_truncated"  # the final answer was cut at the output-token limit
STOP_FILTERED = "content_filter"  # the provider's content filter stopped the answer
# The provider failed after its retries, or cannot be reached as configured: not the model's doing.
STOP_PROVIDER = "provider_error"
STOP_CONFIG = "config_error"


@dataclass
class ToolCallRecord:
    name: str
    call_id: str
    arguments: str
    duration_s: float = 0.0
    is_error: bool = False
    malformed: bool = False


@dataclass
class TurnRecord:
    index: int
    latency_s: float = 0.0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    finish_reason: str | None = None
    tool_calls: list[ToolCallRecord] = field(default_factory=list)


@dataclass
class AgentRun:
    messages: list[dict[str, Any]]
    turns: list[TurnRecord] = field(default_factory=list)
    stop_reason: str = STOP_COMPLETED
    error: str | None = None  # one line: "<ExceptionType>: <cause> (...)"; details go to the trial's log
    error_type: str | None = None
    final_text: str = ""

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        return [c for t in self.turns for c in t.tool_calls]

    @property
    def llm_seconds(self) -> float:
        return sum(t.latency_s for t in self.turns)

    def turns_json(self) -> list[dict[str, Any]]:
        return [asdict(t) for t in self.turns]


async def call_tool(
    session: ClientSession, known: set[str], name: str, raw_args: str, call_id: str, timeout: float
) -> tuple[str, ToolCallRecord]:
    """Run one tool call; malformed calls and timeouts become error results the model can read."""
    rec = ToolCallRecord(name=name, call_id=call_id, arguments=raw_args)
    start = time.perf_counter()
    try:
        if name not in known:
            rec.malformed = rec.is_error = True
            return f"Error: unknown tool '{name}'. Available tools: {', '.join(sorted(known))}", rec
        try:
            args = json.loads(raw_args) if raw_args and raw_args.strip() else {}
        except json.JSONDecodeError as exc:
            rec.malformed = rec.is_error = True
            return f"Error: tool arguments are not valid JSON ({exc.msg} at position {exc.pos})", rec
        if not isinstance(args, dict):
            rec.malformed = rec.is_error = True
            return "Error: tool arguments must be a JSON object", rec
        try:
            result = await session.call_tool(name, args, read_timeout_seconds=timeout)
        except TimeoutError:
            rec.is_error = True
            return f"Error: tool call timed out after {timeout:g} s", rec
        except Exception as exc:  # noqa: BLE001 - an MCP-level error is information for the model
            rec.is_error = True
            text = str(exc) or type(exc).__name__
            if "invalid" in text.lower() and "argument" in text.lower():
                rec.malformed = True
            return f"Error: {text}", rec
        rec.is_error = bool(getattr(result, "is_error", False))
        text = result_text(result)
        if rec.is_error and "invalid arguments" in text.lower():
            rec.malformed = True
        return text, rec
    finally:
        rec.duration_s = time.perf_counter() - start


async def run_llm_agent(
    session: ClientSession,
    task: Task,
    target: Any,
    *,
    max_turns: int,
    timeout_s: float,
    tool_timeout_s: float,
    metrics: TrialMetrics | None = None,
) -> AgentRun:
    """The tool-calling loop: ask, execute every tool call, repeat until the model stops or a limit hits."""
    from . import llm  # heavy import, paid once per warm worker

    listed = await session.list_tools()
    tools = [tool_to_openai(t) for t in listed.tools]
    known = {t.name for t in listed.tools}
    if metrics is not None:
        metrics.tools(sorted(known))
    run = AgentRun(messages=[{"role": "user", "content": task.description}])
    try:
        async with asyncio.timeout(timeout_s) as deadline:
            for index in range(max_turns):
                turn = TurnRecord(index=index)
                run.turns.append(turn)
                try:
                    # Time lost to provider faults is given back to `deadline`: the timeout measures the model.
                    response, seconds, retries = await llm.complete(target, run.messages, tools, deadline)
                except llm.LLMFailure as exc:  # after retries; exc.stop_reason says who is charged
                    turn.retries, turn.latency_s = exc.retries, exc.seconds
                    run.stop_reason, run.error, run.error_type = exc.stop_reason, exc.summary, exc.error_type
                    return run
                turn.latency_s, turn.retries = seconds, retries
                u = llm.usage_of(response, target)
                turn.input_tokens, turn.output_tokens = u.input_tokens, u.output_tokens
                turn.reasoning_tokens, turn.cached_tokens, turn.cost_usd = (
                    u.reasoning_tokens,
                    u.cached_tokens,
                    u.cost_usd,
                )
                if metrics is not None:
                    metrics.turn(
                        seconds,
                        retries,
                        {
                            "input": u.input_tokens,
                            "output": u.output_tokens,
                            "reasoning": u.reasoning_tokens,
                            "cached": u.cached_tokens,
                        },
                    )
                reply = llm.reply_of(response, run.messages)  # normalised; tool-call ids unique
                turn.finish_reason = reply.finish_reason
                content, calls = reply.content, reply.tool_calls
                assistant: dict[str, Any] = {"role": "assistant", "content": content or None}
                if calls:
                    assistant["tool_calls"] = [
                        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for c in calls
                    ]
                run.messages.append(assistant)
                if content:
                    run.final_text = content
                if turn.finish_reason == "content_filter":
                    run.stop_reason, run.error = STOP_FILTERED, "the provider's content filter stopped the answer"
                    return run
                if not calls:
                    if turn.finish_reason == "length":
                        run.stop_reason = STOP_TRUNCATED
                        run.error = "the answer was cut at the output-token limit (finish_reason 'length')"
                    return run
                for c in calls:
                    text, rec = await call_tool(session, known, c.name, c.arguments, c.id, tool_timeout_s)
                    turn.tool_calls.append(rec)
                    if metrics is not None:
                        metrics.tool_call(rec.name, rec.duration_s, rec.is_error, rec.malformed)
                    run.messages.append({"role": "tool", "tool_call_id": c.id, "content": text})
            run.stop_reason = STOP_TURN_LIMIT
    except TimeoutError:
        run.stop_reason, run.error = STOP_TIMEOUT, f"agent exceeded {timeout_s:g} s"
    return run


async def run_oracle_agent(
    session: ClientSession, task: Task, root: str, *, tool_timeout_s: float, metrics: TrialMetrics | None = None
) -> AgentRun:
    """Replay the task's oracle directly on the MCP session (no LLM): proves the task is solvable."""
    listed = await session.list_tools()
    known = {t.name for t in listed.tools}
    run = AgentRun(messages=[{"role": "user", "content": task.description}])
    for index, step in enumerate(task.oracle):
        call_id = f"oracle_{index}"
        raw = json.dumps(step.resolve(root))
        run.messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": step.tool, "arguments": raw}}],
            }
        )
        text, rec = await call_tool(session, known, step.tool, raw, call_id, tool_timeout_s)
        run.turns.append(TurnRecord(index=index, tool_calls=[rec]))
        if metrics is not None:
            metrics.tool_call(rec.name, rec.duration_s, rec.is_error, rec.malformed)
        run.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    run.final_text = "Oracle solution applied."
    run.messages.append({"role": "assistant", "content": run.final_text})
    return run


def run_noop_agent(task: Task) -> AgentRun:
    """Do nothing: every verifier must fail on the untouched initial state."""
    text = "No action taken (no-op agent)."
    return AgentRun(
        messages=[{"role": "user", "content": task.description}, {"role": "assistant", "content": text}],
        final_text=text,
    )
