"""Every tool call of an MCP trial, classified as the single-call suite classifies calls (issue 12 §4).

The deterministic checker (toolcalls/checker.py) says, against the tools the MCP server listed, whether a
call names a tool that exists (``incorrect_tool``), parameters the tool declares (``incorrect_parameter_names``;
arguments that are not a JSON object count here too) and values its schema allows
(``incorrect_parameter_values``); otherwise ``schema_valid``. When the EvalRun names a judge
(``spec.toolcalls.judge``), every ``schema_valid`` call is also judged with the conversation up to it, and its
class becomes the judge's (``correct`` or one of the incorrect classes; ``judge_error`` when the judge gave no
usable answer). The classes annotate a trial; they never change whether it passed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.toolcalls.checker import classify_call
from mcpfleet.runner.toolcalls.models import CALL_CLASSES as CLASSES
from mcpfleet.runner.toolcalls.models import SCHEMA_VALID, Case, Tool, ToolCall

if TYPE_CHECKING:
    from mcpfleet.runner.agent.loop import AgentRun
    from mcpfleet.runner.toolcalls.judge import Judge

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class CallClassifier:
    """The checker bound to one session's tools (listed once per trial)."""

    def __init__(self, listed: Sequence[Any]) -> None:
        self.tools = [
            Tool(
                name=str(t.name),
                description=str(getattr(t, "description", None) or ""),
                input_schema=_schema_of(t),
            )
            for t in listed
        ]

    def classify(self, name: str, raw_arguments: str) -> str:
        """The checker's class of one call as the model sent it (arguments as the raw JSON text)."""
        return classify_call(self.tools, ToolCall(name=name, arguments=decode(raw_arguments))).label


def _schema_of(tool: Any) -> dict[str, Any]:
    """A listed tool's input schema (the MCP SDK names it ``input_schema``; older ones ``inputSchema``)."""
    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
    return schema if isinstance(schema, dict) else _EMPTY_SCHEMA


def decode(raw: str) -> Any:
    """Arguments as sent: a JSON value, {} for nothing, or the raw text when it is not JSON (a wrong-names class)."""
    if not raw or not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


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
    import asyncio

    pairs = cases_to_judge(run, classifier, trial_id)
    verdicts = await asyncio.gather(*(judge.judge(case) for _, case in pairs))
    for (rec, _), verdict in zip(pairs, verdicts, strict=True):
        rec.call_class = verdict.label
    return len(pairs)
