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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.toolcalls.checker import classify_call
from mcpfleet.runner.toolcalls.models import Tool, ToolCall

if TYPE_CHECKING:
    pass

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
