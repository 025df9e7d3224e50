"""The shapes every tool-call module shares: a tool, a call, a labelled case and a verdict.

Cases are pydantic models (they come from files and must be validated); verdicts are plain slotted dataclasses
because the checker makes one per call and has to stay fast.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

Label = Literal["correct", "incorrect_tool", "incorrect_parameter_names", "incorrect_parameter_values"]
LABELS: tuple[Label, ...] = get_args(Label)
#: What the checker says when it finds nothing wrong: it cannot see whether the call does what the user asked.
SCHEMA_VALID = "schema_valid"
#: A judge that gave no valid answer after its retries (kept in the results, never dropped).
JUDGE_ERROR = "judge_error"
#: Classes of an agent's tool calls (call_classes.py) in report order: the judge's verdict on valid calls,
#: then the checker's findings.
CALL_CLASSES = (
    "correct",
    SCHEMA_VALID,
    "incorrect_tool",
    "incorrect_parameter_names",
    "incorrect_parameter_values",
    JUDGE_ERROR,
)


class Tool(BaseModel):
    """One available tool in MCP's shape (``input_schema``), whatever shape the data used."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    @cached_property
    def key(self) -> str:
        """Canonical JSON of the schema: the checker's cache key, computed once per tool object."""
        return json.dumps(self.input_schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


class ToolCall(BaseModel):
    """The call under judgement; ``arguments`` is the decoded JSON value (normally an object)."""

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: Any = Field(default_factory=dict)
    id: str | None = None

    def as_openai(self) -> dict[str, Any]:
        """The assistant message's ``tool_calls`` entry, arguments as an object (limbic's shape)."""
        call: dict[str, Any] = {"type": "function", "function": {"name": self.name, "arguments": self.arguments}}
        if self.id:
            call = {"id": self.id, **call}
        return call


class Case(BaseModel):
    """One labelled single tool call: the tools, the conversation before the call, the call and its label."""

    id: str
    tools: list[Tool]
    history: list[dict[str, Any]] = Field(description="messages before the assistant message holding the call")
    call: ToolCall
    call_content: str | None = Field(default=None, description="text the assistant sent with the call")
    label: Label | None = None
    failure_reason: str | None = None
    mutation: str | None = Field(default=None, description="how a generated case was made wrong (generator only)")
    source: str = Field(default="", description="file:row it was read from")

    def messages(self) -> list[dict[str, Any]]:
        """The whole ``message_history`` in limbic's shape: the history, then the assistant message with the call."""
        assistant = {"role": "assistant", "content": self.call_content or "", "tool_calls": [self.call.as_openai()]}
        return [*self.history, assistant]

    def to_row(self) -> dict[str, Any]:
        """A limbic-format row (plus ``id`` and ``mutation``, which limbic readers ignore)."""
        row: dict[str, Any] = {
            "id": self.id,
            "available_tools": [t.as_dict() for t in self.tools],
            "message_history": self.messages(),
            "score": self.label,
            "failure_reason": self.failure_reason or "",
        }
        if self.mutation:
            row["mutation"] = self.mutation
        return row


@dataclass(frozen=True, slots=True)
class Reason:
    """One thing wrong with a call: its class, where (a JSON path into the arguments) and a readable message."""

    kind: str
    path: str
    message: str
    keyword: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "path": self.path, "message": self.message, "keyword": self.keyword}


@dataclass(frozen=True, slots=True)
class Verdict:
    """A classification of one call: a label in LABELS, or SCHEMA_VALID (checker) or JUDGE_ERROR (judge).

    ``reasons`` are the checker's findings (every one, not only the first); ``reasoning`` is the judge's text.
    """

    label: str
    source: Literal["checker", "judge"]
    reasons: tuple[Reason, ...] = ()
    reasoning: str = ""
    cached: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def predicted(self) -> str:
        """The label scored against the four classes: a schema-valid call counts as predicted correct."""
        return "correct" if self.label == SCHEMA_VALID else self.label

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "source": self.source}
        if self.reasons:
            out["reasons"] = [r.as_dict() for r in self.reasons]
        if self.reasoning:
            out["reasoning"] = self.reasoning
        if self.cached:
            out["cached"] = True
        if self.extra:
            out.update(self.extra)
        return out
