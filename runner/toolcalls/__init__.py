"""Tool-call quality: classify single MCP tool calls into the four limbic classes.

Entry points: ``classify_call(tools, call) -> Verdict`` (the deterministic schema checker),
``judge.Judge`` (an LLM judge, ``await judge.judge(case) -> Verdict``), ``judge.assess`` (checker first, then the
judge), ``loader.load_cases`` (limbic-format data) and ``generator.generate`` (a labelled synthetic set).
The judge module imports LiteLLM, so it is not imported here.
"""

from .checker import classify_call
from .models import JUDGE_ERROR, LABELS, SCHEMA_VALID, Case, Label, Reason, Tool, ToolCall, Verdict

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
