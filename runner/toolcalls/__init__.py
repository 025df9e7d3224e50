"""Tool-call quality: classify single MCP tool calls into the four limbic classes.

Entry points: ``classify_call(tools, call) -> Verdict`` (the deterministic schema checker),
``judge.Judge`` (an LLM judge, ``await judge.judge(case) -> Verdict``), ``judge.assess`` (checker first, then the
judge), ``loader.load_cases`` (limbic-format data) and ``generator.generate`` (a labelled synthetic set).
The judge module imports LiteLLM, so it is not imported here; the checker (jsonschema with format checks, whose
rfc3987 grammar takes ~3 s of CPU to build) is imported on first use, so that every ``mcpfleet`` command, which
registers the toolcalls commands, does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checker import classify_call
    from .models import JUDGE_ERROR, LABELS, SCHEMA_VALID, Case, Label, Reason, Tool, ToolCall, Verdict


def __getattr__(name: str) -> Any:
    if name == "classify_call":
        from .checker import classify_call

        return classify_call
    if name in __all__:
        from . import models

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
