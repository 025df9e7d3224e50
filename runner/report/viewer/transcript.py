"""A trial's messages.json, whatever agent wrote it, as one list of entries to show (pure).

Shapes read:

- MCPMark's SDK items (its tool-calling agent, mcpfleet's agent): ``{role: user, content}``, ``{type: message,
  role: assistant, content: [{type: output_text, text}]}``, ``{type: function_call, name, arguments, call_id}``,
  ``{type: function_call_output, call_id, output}`` (output: a JSON text item; MCPMark's agent puts the MCP
  result's dump in its text, mcpfleet's agent the plain text);
- MCPMark's ReAct agent: the same items without function calls; each assistant text is JSON ``{thought, action:
  {tool, arguments}}`` or ``{thought, answer}``, each tool result an ``Observation:`` user message;
- the chat list as an agent keeps it (MCPMark's agent writes it unconverted for a Claude model its timeout ended):
  ``{role: system|user|assistant|tool, content, tool_calls: [{id, function: {name, arguments}}], tool_call_id}``.

result.json's ``turns`` add what messages.json lacks: each call's class, error flag and duration, and which
assistant entries belong to which turn (its tokens and cost). Nothing here is markup: the pages escape it all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

SDK = "mcpmark items"
REACT = "react"
CHAT = "chat list"

_OBSERVATION = re.compile(r"\AObservation:\n(?P<body>.*?)(?:\nPlease continue reasoning[^\n]*)?\Z", re.S)
_FENCE = re.compile(r"\A\s*```(?:json)?\s*(?P<body>.*?)\s*```\s*\Z", re.S)


@dataclass
class Entry:
    kind: str  # system, user, assistant, thought, tool_call, tool_result, error
    text: str = ""
    name: str = ""  # the tool's (tool_call, tool_result)
    call_id: str = ""
    is_error: bool = False
    call_class: str | None = None
    duration_s: float | None = None
    malformed: bool = False
    turn: int | None = None  # 1-based, on the first entry of each assistant turn


@dataclass
class Transcript:
    shape: str
    entries: list[Entry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def pretty_arguments(arguments: Any) -> tuple[str, bool]:
    """A call's arguments as shown (indented JSON) and whether they are malformed (no JSON object)."""
    if isinstance(arguments, dict | list):
        return json.dumps(arguments, indent=2, ensure_ascii=False), False
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        parsed = json.loads(text) if text.strip() else {}
    except ValueError:
        return text, True
    return json.dumps(parsed, indent=2, ensure_ascii=False), not isinstance(parsed, dict)


def _loads(text: str) -> Any:
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def mcp_result_text(text: str) -> tuple[str, bool | None]:
    """A tool result's text and error flag when it is an MCP CallToolResult dump (MCPMark's agent), else as is."""
    got = _loads(text)
    if not isinstance(got, dict) or not isinstance(got.get("content"), list) or "isError" not in got:
        return text, None
    parts = []
    for c in got["content"]:
        if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str):
            parts.append(c["text"])
        else:
            parts.append(json.dumps(c, ensure_ascii=False))
    return "\n".join(parts), bool(got["isError"])


def output_text(output: Any) -> tuple[str, bool | None]:
    """A function_call_output's ``output`` (a JSON text item, as MCPMark wraps it) as text and its error flag."""
    if not isinstance(output, str):
        return json.dumps(output, ensure_ascii=False, indent=2), None
    item = _loads(output)
    text = item["text"] if isinstance(item, dict) and isinstance(item.get("text"), str) else output
    return mcp_result_text(text)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])
            elif p is not None:
                out.append(json.dumps(p, ensure_ascii=False))
        return "\n".join(out)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def shape_of(messages: list[Any], agent: str | None = None) -> str:
    dicts = [m for m in messages if isinstance(m, dict)]
    if any(m.get("role") in ("system", "tool") or "tool_calls" in m for m in dicts):
        return CHAT
    if agent == REACT:
        return REACT
    if not any(m.get("type") == "function_call" for m in dicts) and any(
        _react_reply(_content_text(m.get("content"))) is not None for m in dicts if m.get("role") == "assistant"
    ):
        return REACT
    return SDK


def _react_reply(text: str) -> dict[str, Any] | None:
    fenced = _FENCE.match(text)
    got = _loads(fenced.group("body") if fenced else text)
    return got if isinstance(got, dict) and ("action" in got or "answer" in got) else None


class _Builder:
    """Entries in order, turn numbers and each call's record from result.json's turns."""

    def __init__(self, turns: list[dict[str, Any]] | None):
        self.entries: list[Entry] = []
        self.turn = 0
        self.in_turn = False
        self.calls: dict[str, dict[str, Any]] = {}
        self.ordered: list[dict[str, Any]] = []
        for t in turns or []:
            for c in (t.get("tool_calls") if isinstance(t, dict) else None) or []:
                if isinstance(c, dict):
                    self.ordered.append(c)
                    if isinstance(c.get("call_id"), str):
                        self.calls[c["call_id"]] = c
        self.names: dict[str, str] = {}
        self.last_name = ""
        self.nth = 0

    def assistant_part(self, entry: Entry) -> None:
        if not self.in_turn:
            self.turn += 1
            self.in_turn = True
            entry.turn = self.turn
        self.entries.append(entry)

    def other(self, entry: Entry) -> None:
        self.in_turn = False
        self.entries.append(entry)

    def call(self, name: str, arguments: Any, call_id: str) -> None:
        text, malformed = pretty_arguments(arguments)
        record = self.calls.get(call_id) if call_id else None
        if record is None and self.nth < len(self.ordered) and not call_id:
            record = self.ordered[self.nth]  # ReAct's calls have no ids: matched by their order
        self.nth += 1
        entry = Entry("tool_call", text=text, name=name, call_id=call_id, malformed=malformed)
        if record is not None:
            entry.call_class = record.get("call_class") if isinstance(record.get("call_class"), str) else None
            entry.is_error = bool(record.get("is_error"))
            entry.malformed = entry.malformed or bool(record.get("malformed"))
            d = record.get("duration_s")
            entry.duration_s = float(d) if isinstance(d, int | float) and not isinstance(d, bool) else None
        if call_id:
            self.names[call_id] = name
        self.last_name = name
        self.assistant_part(entry)

    def result(self, text: str, is_error: bool | None, call_id: str = "", name: str = "") -> None:
        record = self.calls.get(call_id)
        flagged = bool(record.get("is_error")) if record else False
        self.other(
            Entry(
                "tool_result",
                text=text,
                name=name or self.names.get(call_id, "" if call_id else self.last_name),
                call_id=call_id,
                is_error=bool(is_error) or flagged,
            )
        )


def normalise(messages: Any, turns: list[dict[str, Any]] | None = None, agent: str | None = None) -> Transcript:
    """``messages`` (messages.json, parsed) as entries; ``turns``: result.json's; ``agent``: result.json's."""
    if not isinstance(messages, list):
        kind = type(messages).__name__
        return Transcript(shape="unknown", problems=[f"messages.json holds a JSON {kind}, not a list of messages"])
    shape = shape_of(messages, agent)
    b = _Builder(turns)
    skipped = 0
    for m in messages:
        if not isinstance(m, dict):
            skipped += 1
            continue
        if shape == CHAT:
            _chat_item(b, m)
        elif shape == REACT:
            _react_item(b, m)
        else:
            skipped += not _sdk_item(b, m)
    out = Transcript(shape=shape, entries=b.entries)
    if skipped:
        out.problems.append(f"{skipped} item(s) of messages.json have no shape this viewer reads; shown raw")
    return out


def _sdk_item(b: _Builder, m: dict[str, Any]) -> bool:
    kind = m.get("type")
    if kind == "function_call":
        b.call(str(m.get("name", "")), m.get("arguments", "{}"), str(m.get("call_id") or ""))
    elif kind == "function_call_output":
        text, err = output_text(m.get("output"))
        b.result(text, err, str(m.get("call_id") or ""))
    elif m.get("role") == "assistant":
        b.assistant_part(Entry("assistant", text=_content_text(m.get("content"))))
    elif m.get("role") in ("user", "developer"):
        b.other(Entry("user", text=_content_text(m.get("content"))))
    else:
        b.other(Entry("user", text=json.dumps(m, ensure_ascii=False, indent=2), is_error=True))
        return False
    return True


def _chat_item(b: _Builder, m: dict[str, Any]) -> None:
    role = m.get("role")
    if role == "system":
        b.other(Entry("system", text=_content_text(m.get("content"))))
    elif role == "assistant":
        text = _content_text(m.get("content"))
        if text:
            b.assistant_part(Entry("assistant", text=text))
        listed = m.get("tool_calls")
        calls = [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
        for c in calls:
            fn = c.get("function")
            fn = fn if isinstance(fn, dict) else {}
            b.call(str(fn.get("name", "")), fn.get("arguments", "{}"), str(c.get("id") or ""))
        if not text and not calls:
            b.assistant_part(Entry("assistant", text=""))
    elif role == "tool":
        text, err = mcp_result_text(_content_text(m.get("content")))
        b.result(text, err, str(m.get("tool_call_id") or ""), str(m.get("name") or ""))
    else:
        b.other(Entry("user", text=_content_text(m.get("content"))))


def _react_item(b: _Builder, m: dict[str, Any]) -> None:
    text = _content_text(m.get("content"))
    if m.get("role") == "assistant":
        reply = _react_reply(text)
        if reply is None:
            b.assistant_part(Entry("assistant", text=text))  # no JSON: the agent asked again (react.invalid_json)
            return
        if reply.get("thought"):
            b.assistant_part(Entry("thought", text=str(reply["thought"])))
        action = reply.get("action")
        if isinstance(action, dict):
            b.call(str(action.get("tool", "")), action.get("arguments", {}), "")
        elif "answer" in reply:
            b.assistant_part(Entry("assistant", text=_content_text(reply["answer"])))
        return
    seen = _OBSERVATION.match(text)
    if seen:
        body, err = mcp_result_text(seen.group("body"))
        b.result(body, err)
    else:
        b.other(Entry("user", text=text))
