"""Tool-call quality: classify single MCP tool calls into the four limbic classes.

Entry points: ``classify_call(tools, call) -> Verdict`` (the deterministic schema checker),
``judge.Judge`` (an LLM judge, ``await judge.judge(case) -> Verdict``), ``judge.assess`` (checker first, then the
judge), ``loader.load_cases`` (limbic-format data) and ``generator.generate`` (a labelled synthetic set).
The judge module imports LiteLLM, so it is not imported here, and neither is the checker (jsonschema and the
format validators): every ``mcpfleet`` command registers the toolcalls commands, and none should pay for more
imports than it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpfleet.runner.toolcalls.checker import classify_call
    from mcpfleet.runner.toolcalls.models import (
        JUDGE_ERROR,
        LABELS,
        SCHEMA_VALID,
        Case,
        Label,
        Reason,
        Tool,
        ToolCall,
        Verdict,
    )


def __getattr__(name: str) -> Any:
    if name == "classify_call":
        from mcpfleet.runner.toolcalls.checker import classify_call

        return classify_call
    if name in __all__:
        from mcpfleet.runner.toolcalls import models

        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "JUDGE_ERROR",
    "LABELS",
    "SCHEMA_VALID",
    "Case",
    "Label",
    "Reason",
    "Tool",
    "ToolCall",
    "Verdict",
    "classify_call",
]
