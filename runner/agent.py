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
    error: str | None = None
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
        async with asyncio.timeout(timeout_s):
            for index in range(max_turns):
                turn = TurnRecord(index=index)
                run.turns.append(turn)
                try:
                    response, seconds, retries = await llm.complete(target, run.messages, tools)
                except Exception as exc:  # noqa: BLE001 - after retries: the provider failed this trial
                    if isinstance(exc, TimeoutError):
                        raise
                    turn.retries = getattr(exc, "mcpfleet_retries", 0)
                    turn.latency_s = getattr(exc, "mcpfleet_seconds", 0.0)
                    overflow = isinstance(exc, llm.ContextWindowExceededError)
                    run.stop_reason, run.error = (STOP_CONTEXT if overflow else STOP_LLM_ERROR), _short(exc)
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
                choice = response.choices[0]
                turn.finish_reason = getattr(choice, "finish_reason", None)
                message = choice.message
                content = message.content or ""
                calls = list(message.tool_calls or [])
                assistant: dict[str, Any] = {"role": "assistant", "content": content or None}
                if calls:
                    assistant["tool_calls"] = [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.function.name, "arguments": c.function.arguments or ""},
                        }
                        for c in calls
                    ]
                run.messages.append(assistant)
                if content:
                    run.final_text = content
                if not calls:
                    if turn.finish_reason == "length" and not content:
                        run.stop_reason, run.error = STOP_CONTEXT, "output truncated at the token limit"
                    return run
                for c in calls:
                    text, rec = await call_tool(
                        session, known, c.function.name or "", c.function.arguments or "", c.id, tool_timeout_s
                    )
                    rec.is_error = rec.is_error or _reports_error(task, text)
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
        rec.is_error = rec.is_error or _reports_error(task, text)
        run.turns.append(TurnRecord(index=index, tool_calls=[rec]))
        if metrics is not None:
            metrics.tool_call(rec.name, rec.duration_s, rec.is_error, rec.malformed)
        run.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    run.final_text = task.oracle_answer or "Oracle solution applied."
    run.messages.append({"role": "assistant", "content": run.final_text})
    return run


def _reports_error(task: Task, text: str) -> bool:
    """Some servers report a failed call in an ordinary result (postgres-mcp: "Error: ..."); its service knows."""
    from .services import SERVICES

    service = SERVICES.get(task.service)
    return service is not None and service.result_is_error(text)


def run_noop_agent(task: Task) -> AgentRun:
    """Do nothing: every verifier must fail on the untouched initial state."""
    text = "No action taken (no-op agent)."
    return AgentRun(
        messages=[{"role": "user", "content": task.description}, {"role": "assistant", "content": text}],
        final_text=text,
    )


def _short(exc: BaseException, limit: int = 2000) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + "..."
