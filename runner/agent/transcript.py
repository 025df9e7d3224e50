"""What an agent run leaves: its messages, turns and tool calls (each with its call class), and why it stopped."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.agent.call_classes import CallClassifier, decode
from mcpfleet.runner.toolcalls.models import CALL_CLASSES as CLASSES
from mcpfleet.runner.toolcalls.models import SCHEMA_VALID, Case, ToolCall

if TYPE_CHECKING:
    from mcpfleet.runner.toolcalls.judge import Judge

# Why the agent stopped. "completed" means the model ended with a message and no tool calls.
STOP_COMPLETED = "completed"
STOP_TURN_LIMIT = "turn_limit"
STOP_TIMEOUT = "timeout"
STOP_CONTEXT = "context_overflow"
STOP_LLM_ERROR = "llm_api_error"
STOP_TRUNCATED = "output_truncated"  # the final answer was cut at the output-token limit
STOP_FILTERED = "content_filter"  # the provider's content filter stopped the answer
# Endings MCPMark's agent does not see (it never reads finish_reason): it ends such a run normally, so its
# meta.json says error_message null; mcpfleet's result.json still names them (the failure taxonomy).
UNSEEN_BY_MCPMARK = (STOP_TRUNCATED, STOP_FILTERED)
# The provider failed after its retries, or cannot be reached as configured: not the model's doing.
STOP_PROVIDER = "provider_error"
STOP_CONFIG = "config_error"
STOP_BUDGET = "budget_exhausted"  # a budget left no room for the next request (not sent): not the model's doing
STOP_MALFORMED = "malformed_tool_call"  # MCPMark's agent ends the run on arguments that are not JSON


@dataclass
class ToolCallRecord:
    name: str
    call_id: str
    arguments: str
    duration_s: float = 0.0
    is_error: bool = False
    malformed: bool = False
    call_class: str | None = None  # the checker's (or the judge's) class of the call: call_classes.py


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
    total_tokens: int = 0  # the provider's total (meta.json's token_usage: records.mcpmark_token_usage)
    finish_reason: str | None = None
    tool_calls: list[ToolCallRecord] = field(default_factory=list)


@dataclass
class AgentRun:
    messages: list[dict[str, Any]]
    turns: list[TurnRecord] = field(default_factory=list)
    stop_reason: str = STOP_COMPLETED
    error: str | None = None  # one line: "<ExceptionType>: <cause> (...)"; details go to the trial's log
    error_type: str | None = None
    # The error as MCPMark's agent words it for meta.json, where that is not ``error`` (an LLM call that failed for
    # good: str() of the exception there; result.json keeps mcpfleet's one line).
    mcpmark_error: str | None = None
    raw_messages: bool = False  # messages.json is the chat list as kept (records.messages_json: a Claude timeout)
    final_text: str = ""
    run_model: str | None = None  # the model name the provider reported (first response), as MCPMark records it
    conversation: str = ""
    classifier: CallClassifier | None = field(default=None, repr=False)  # the session's tools, for the judge

    @property
    def responses(self) -> int:
        """Assistant messages received: MCPMark's turn count."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        return [c for t in self.turns for c in t.tool_calls]

    @property
    def llm_seconds(self) -> float:
        return sum(t.latency_s for t in self.turns)

    def turns_json(self) -> list[dict[str, Any]]:
        return [asdict(t) for t in self.turns]


def counts(run: AgentRun) -> dict[str, int]:
    """Calls per class over a trial, every class the trial saw (result.json's ``totals.call_classes``)."""
    c = Counter(call.call_class for call in run.tool_calls if call.call_class)
    return {k: c[k] for k in sorted(c, key=_order)}


def _order(cls: str) -> tuple[int, str]:
    return (CLASSES.index(cls) if cls in CLASSES else len(CLASSES), cls)


def cases_to_judge(run: AgentRun, classifier: CallClassifier, trial_id: str) -> list[tuple[Any, Case]]:
    """(call record, case) for every ``schema_valid`` call: the tools, the conversation before the assistant
    message that made the call, the call and the text sent with it."""
    by_id = {c.call_id: c for c in run.tool_calls if c.call_class == SCHEMA_VALID}
    out: list[tuple[Any, Case]] = []
    for i, message in enumerate(run.messages):
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            rec = by_id.get(str(call.get("id") or ""))
            if rec is None:
                continue
            fn = call.get("function") or {}
            case = Case(
                id=f"{trial_id}:{rec.call_id}",
                tools=classifier.tools,
                history=[_plain(m) for m in run.messages[:i]],
                call=ToolCall(name=str(fn.get("name") or ""), arguments=decode(str(fn.get("arguments") or ""))),
                call_content=_text(message.get("content")),
            )
            out.append((rec, case))
    return out


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, default=str)


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """A history message as the judge reads it (role, text, tool calls): provider fields dropped."""
    out: dict[str, Any] = {"role": message.get("role"), "content": _text(message.get("content")) or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c.get("id"), "type": "function", "function": c.get("function")} for c in message["tool_calls"]
        ]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


async def judge_calls(run: AgentRun, classifier: CallClassifier, judge: Judge, trial_id: str) -> int:
    """Judge every ``schema_valid`` call (concurrently, within the judge's own limits); returns how many."""

    pairs = cases_to_judge(run, classifier, trial_id)
    verdicts = await asyncio.gather(*(judge.judge(case) for _, case in pairs))
    for (rec, _), verdict in zip(pairs, verdicts, strict=True):
        rec.call_class = verdict.label
    return len(pairs)
