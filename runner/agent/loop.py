"""Agents: the tool-calling loop (MCPMark-Agent's loop, measured), oracle and no-op.

The loop keeps the conversation in OpenAI chat format (what LiteLLM speaks); records.py converts it to
MCPMark's messages.json at the end. What the model reads (prompt, tool results) is the conversation's
(conversation.py): MCPMark's by default. Every turn records tokens, latency and each tool call's duration.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from mcp import ClientSession

from mcpfleet.runner.agent import snapshot_refs
from mcpfleet.runner.agent.call_classes import CallClassifier
from mcpfleet.runner.agent.conversation import (
    MCPFLEET,
    MCPMARK,
    MCPMARK_LLM_ATTEMPTS,
    Conversation,
    timeout_error,
    turn_limit_error,
)
from mcpfleet.runner.agent.metrics import TrialMetrics
from mcpfleet.runner.agent.transcript import (
    STOP_FILTERED,
    STOP_MALFORMED,
    STOP_TIMEOUT,
    STOP_TRUNCATED,
    STOP_TURN_LIMIT,
    AgentRun,
    ToolCallRecord,
    TurnRecord,
)
from mcpfleet.runner.environment.mcp_client import AbandonedCalls, call_tool_abandoning, result_text
from mcpfleet.runner.llm import faults
from mcpfleet.runner.spec import mcpmark_protocol as protocol
from mcpfleet.runner.spec.task import OracleStep, Task


def mcpmark_llm_error(exc: Any) -> str:
    """What MCPMark's tool-calling loop records when LLM calls fail for good (mcpmark_agent.py
    ``_execute_litellm_tool_loop``, ``exc`` an ``llm.LLMFailure``): its pinned words when the per-call timeout ended
    the last try, else str() of the final exception (mcpfleet's one line, with the retries, stays in result.json)."""
    if exc.fault.kind == faults.TIMEOUT:
        return protocol.render("llm_failures_error", count=MCPMARK_LLM_ATTEMPTS)
    return str(exc.__cause__) if exc.__cause__ is not None else str(exc.summary)


def keeps_raw_messages(model: str) -> bool:
    """MCPMark's ``is_claude`` (src/agents/base_agent.py: "claude" in the LiteLLM model name): its agent then writes
    a run that its timeout ended as the raw chat list, not converted (records.messages_json)."""
    return "claude" in model.lower()


class MalformedArguments(Exception):
    """A tool call whose arguments do not parse, under a conversation that ends the run on it."""


def run_clock(timeout_s: float, started: float | None) -> asyncio.Timeout:
    """The whole run's timeout, counted from ``started`` (the event loop's time) when given: MCPMark's agents
    start it before the MCP server (``asyncio.wait_for`` around the server's start, ``list_tools`` and the loop),
    so the trial passes the time it began connecting to its server."""
    if started is None:
        return asyncio.timeout(timeout_s)
    return asyncio.timeout_at(started + timeout_s)


class ServerGone(RuntimeError):
    """The MCP server's connection is gone (its process died or was killed, its transport closed): every later
    call would fail the same way, so the trial measured the harness, not the model. Raised out of the agent: the
    trial is an infrastructure error (retried, not scored), never a tool error read back to the model."""


def raise_if_server_gone(exc: BaseException, tool: str) -> None:
    """Raise ServerGone when a tool call failed because the server's connection is gone, not because the call
    was wrong; every agent (mcpfleet's, MCPMark's, ReAct) calls this before reading a failure back to the model."""
    if _server_gone(exc):
        raise ServerGone(f"the MCP server's connection closed during {tool}: {exc}") from exc


def _server_gone(exc: BaseException) -> bool:
    import anyio
    import httpx
    from mcp.types import CONNECTION_CLOSED

    if getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED:  # the SDK's "Connection closed"
        return True
    if isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException):  # a sidecar gone
        return True
    return isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream))


async def call_tool(
    session: ClientSession,
    known: set[str],
    name: str,
    raw_args: str,
    call_id: str,
    timeout: float,
    conversation: Conversation = MCPFLEET,
    abandoned: AbandonedCalls | None = None,
) -> tuple[str, ToolCallRecord]:
    """Run one tool call; malformed calls and timeouts become error results the model can read. Under MCPMark's
    conversation a timed-out call is abandoned into ``abandoned`` (required there); otherwise it is cancelled."""
    rec = ToolCallRecord(name=name, call_id=call_id, arguments=raw_args)
    start = time.perf_counter()
    if conversation.mcpmark:
        if abandoned is None:
            raise ValueError("MCPMark's conversation abandons timed-out tool calls: call_tool needs AbandonedCalls")
        try:
            text = await _call_tool_as_mcpmark(session, known, name, raw_args, timeout, conversation, rec, abandoned)
        finally:
            rec.duration_s = time.perf_counter() - start
        return text, rec
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
            raise_if_server_gone(exc, name)
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


async def _call_tool_as_mcpmark(
    session: ClientSession,
    known: set[str],
    name: str,
    raw_args: str,
    timeout: float,
    conversation: Conversation,
    rec: ToolCallRecord,
    abandoned: AbandonedCalls,
) -> str:
    """MCPMark's way: arguments parsed strictly (a failure ends the run), the tool called as named, a
    raised error or a timeout read back as text, any result as its JSON dump."""
    try:
        args = json.loads(raw_args)
    except json.JSONDecodeError as exc:
        rec.malformed = rec.is_error = True
        raise MalformedArguments(str(exc)) from None
    rec.malformed = name not in known
    try:
        result = await call_tool_abandoning(session, name, args, timeout, abandoned)
    except TimeoutError:
        rec.is_error = True
        return conversation.tool_timed_out(name, timeout)
    except Exception as exc:  # noqa: BLE001 - MCPMark reads any failure back to the model
        raise_if_server_gone(exc, name)  # (MCPMark's reads it back too, and scores the model for it)
        rec.is_error = True
        return conversation.tool_failed(str(exc))
    rec.is_error = bool(getattr(result, "is_error", False))
    return conversation.tool_content(result)


def no_error(text: str) -> bool:
    """The default ``reports_error``: a result the server did not flag is no error."""
    return False


async def run_llm_agent(
    session: ClientSession,
    task: Task,
    target: Any,
    *,
    max_turns: int,
    timeout_s: float,
    tool_timeout_s: float,
    metrics: TrialMetrics | None = None,
    conversation: Conversation = MCPMARK,
    abandoned: AbandonedCalls,
    started: float | None = None,
    reports_error: Callable[[str], bool] = no_error,
) -> AgentRun:
    """The tool-calling loop: ask, execute every tool call in order, repeat until the model stops or a limit
    hits. Limits end the run with MCPMark's wording ("Max turns (N) exceeded", "Execution timed out ...").
    Tool calls abandoned at their timeout (MCPMark's conversation) go to ``abandoned``: the caller ends them.
    ``started``: when the run's clock started (the event loop's time; default now), as ``run_clock`` says.
    ``reports_error``: whether a result the server did not flag reports an error all the same (some servers say
    so in an ordinary result, postgres-mcp's "Error: ..."; the trial passes its service's ``result_is_error``)."""
    from mcpfleet.runner.llm import client as llm  # heavy import, paid once per warm worker

    listed = await session.list_tools()
    tools = conversation.tools(list(listed.tools), target.model)
    known = {t.name for t in listed.tools}
    if metrics is not None:
        metrics.tools(sorted(known))
    target = conversation.llm_target(target, tools)
    run = AgentRun(messages=conversation.opening(task), conversation=conversation.name)
    run.classifier = classifier = CallClassifier(listed.tools)
    progress = len(run.messages)  # what a timeout keeps: MCPMark's last progress snapshot
    try:
        async with run_clock(timeout_s, started) as deadline:
            for index in range(max_turns):
                turn = TurnRecord(index=index)
                run.turns.append(turn)
                try:
                    # Time lost to provider faults is given back to `deadline`: the timeout measures the model.
                    response, seconds, retries = await llm.complete(target, run.messages, tools, deadline)
                except llm.LLMFailure as exc:  # after retries; exc.stop_reason says who is charged
                    turn.retries, turn.latency_s = exc.retries, exc.seconds
                    run.stop_reason, run.error, run.error_type = exc.stop_reason, exc.summary, exc.error_type
                    if conversation.mcpmark:
                        run.mcpmark_error = mcpmark_llm_error(exc)
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
                run.messages.append(conversation.assistant_message(reply.message, content, calls))
                progress = len(run.messages)
                if content:
                    run.final_text = content
                if turn.finish_reason == "content_filter" and not (conversation.mcpmark and calls):
                    # (MCPMark's agent runs a filtered reply's tool calls and goes on, as with any other reply.)
                    run.stop_reason, run.error = STOP_FILTERED, "the provider's content filter stopped the answer"
                    return run
                if not calls:
                    if turn.finish_reason == "length":
                        run.stop_reason = STOP_TRUNCATED
                        run.error = "the answer was cut at the output-token limit (finish_reason 'length')"
                    return run
                for c in calls:
                    try:
                        text, rec = await call_tool(
                            session, known, c.name, c.arguments, c.id, tool_timeout_s, conversation, abandoned
                        )
                    except MalformedArguments as exc:
                        rec = ToolCallRecord(
                            name=c.name, call_id=c.id, arguments=c.arguments, is_error=True, malformed=True
                        )
                        rec.call_class = classifier.classify(c.name, c.arguments)
                        turn.tool_calls.append(rec)
                        if metrics is not None:
                            metrics.tool_call(rec.name, rec.duration_s, rec.is_error, rec.malformed)
                        run.stop_reason, run.error = STOP_MALFORMED, str(exc)
                        return run
                    rec.is_error = rec.is_error or reports_error(text)
                    rec.call_class = classifier.classify(c.name, c.arguments)
                    turn.tool_calls.append(rec)
                    if metrics is not None:
                        metrics.tool_call(rec.name, rec.duration_s, rec.is_error, rec.malformed)
                    run.messages.append({"role": "tool", "tool_call_id": c.id, "content": text})
                progress = len(run.messages)
            run.stop_reason, run.error = STOP_TURN_LIMIT, turn_limit_error(max_turns)
    except TimeoutError:
        run.stop_reason, run.error = STOP_TIMEOUT, timeout_error(timeout_s)
        if conversation.mcpmark:
            del run.messages[progress:]  # MCPMark's last progress snapshot (``_partial_messages``)
            run.raw_messages = keeps_raw_messages(target.model)
    return run


async def run_oracle_agent(
    session: ClientSession,
    task: Task,
    root: str,
    *,
    tool_timeout_s: float,
    metrics: TrialMetrics | None = None,
    steps: Sequence[OracleStep] | None = None,
    answer: str | None = None,
    reports_error: Callable[[str], bool] = no_error,
) -> AgentRun:
    """Replay the task's oracle directly on the MCP session (no LLM): proves the task is solvable.

    ``steps`` replaces the oracle's calls and ``answer`` its final message: that is how a mutant (a wrong end
    state the verifier must reject) is replayed through the same path. ``reports_error``: as for
    ``run_llm_agent``.
    """
    listed = await session.list_tools()
    known = {t.name for t in listed.tools}
    run = AgentRun(messages=[{"role": "user", "content": task.description}])
    run.classifier = CallClassifier(listed.tools)
    results: list[str] = []  # tool results so far: element refs ({"$ref": ...}) resolve in the latest snapshot
    for index, step in enumerate(task.oracle if steps is None else steps):
        call_id = f"oracle_{index}"
        try:
            raw = json.dumps(snapshot_refs.resolve_step(step.tool, index, step.resolve(root), results))
        except snapshot_refs.RefError as exc:
            run.error = str(exc)  # the oracle cannot go on; the trial records why
            break
        run.messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": step.tool, "arguments": raw}}],
            }
        )
        text, rec = await call_tool(session, known, step.tool, raw, call_id, tool_timeout_s)
        rec.is_error = rec.is_error or reports_error(text)
        rec.call_class = run.classifier.classify(step.tool, raw)
        run.turns.append(TurnRecord(index=index, tool_calls=[rec]))
        if metrics is not None:
            metrics.tool_call(rec.name, rec.duration_s, rec.is_error, rec.malformed)
        run.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        results.append(text)
    if answer is not None:
        run.final_text = answer
    else:
        run.final_text = (task.oracle_answer if steps is None else None) or "Oracle solution applied."
    run.messages.append({"role": "assistant", "content": run.final_text})
    return run


def run_noop_agent(task: Task) -> AgentRun:
    """Do nothing: every verifier must fail on the untouched initial state."""
    text = "No action taken (no-op agent)."
    return AgentRun(
        messages=[{"role": "user", "content": task.description}, {"role": "assistant", "content": text}],
        final_text=text,
    )
