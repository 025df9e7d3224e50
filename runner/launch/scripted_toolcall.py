"""The scripted model's ``toolcall`` policy: answers toolcall cases without a paid model, for tests and benches.

A request is matched to its case by the conversation's (role, text) pairs and the offered tool names. For a case
labelled ``correct`` it plays the gold call, except for a seeded share ``wrong`` of cases (chosen by a hash of
seed and case id, so the same cases every time) where it plays a deliberately wrong call: a tool that does not
exist, a misspelt parameter name or a changed value, in turn. For any other case (no gold call is known) it
replays the case's labelled call, which is wrong by its label: the suite scores it failed. So the expected pass
rate of a run is exactly (share of correct cases) x (1 - wrong), which tests and benches check.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mcpfleet.runner.toolcalls.models import Case, ToolCall
from mcpfleet.runner.toolcalls.shards import cases_path

WRONG_KINDS = ("tool", "name", "value")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def request_key(messages: list[dict[str, Any]], tool_names: list[str]) -> str:
    """What identifies a case in a request: the conversation's roles and texts, and the tools offered."""
    convo = [[str(m.get("role")), _text(m.get("content"))] for m in messages]
    blob = json.dumps([convo, sorted(tool_names)], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _unit(seed: int, case_id: str) -> float:
    """A number in [0, 1) fixed by (seed, case id)."""
    return int(hashlib.sha256(f"{seed}:{case_id}".encode()).hexdigest()[:15], 16) / 16**15


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + " (copy)"
    if isinstance(value, list):
        return [*value, *value[:1]] if value else ["x"]
    return {"changed": True} if value != {"changed": True} else {}


def wrong_call(call: ToolCall, kind: str) -> ToolCall:
    """The gold call made wrong in one way; a call without arguments can only get a wrong tool."""
    args = call.arguments if isinstance(call.arguments, dict) else {}
    if kind == "name" and args:
        first = next(iter(args))
        renamed = {(f"{k}_x" if k == first else k): v for k, v in args.items()}
        return ToolCall(name=call.name, arguments=renamed)
    if kind == "value" and args:
        first = next(iter(args))
        return ToolCall(name=call.name, arguments={**args, first: _changed(args[first])})
    return ToolCall(name=f"{call.name}_v2", arguments=args)


class ToolCallAnswers:
    """The cases of every toolcall task under some pack roots, indexed by request key (built on first use)."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self._index: dict[str, Case] | None = None

    def index(self) -> dict[str, Case]:
        if self._index is None:
            from mcpfleet.runner.tasks.discovery import discover
            from mcpfleet.runner.toolcalls.loader import load_cases

            index: dict[str, Case] = {}
            for root in self.roots:
                for task in discover(root):
                    data = cases_path(task.path)
                    if data is None:
                        continue
                    for case in load_cases(data, skip_bad=True, require_label=False).cases:
                        key = request_key(case.history, [t.name for t in case.tools])
                        # Two cases with the same request: the one with a gold call answers.
                        if key not in index or (case.label == "correct" and index[key].label != "correct"):
                            index[key] = case
            self._index = index
        return self._index

    def answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], wrong: float, seed: int) -> Any:
        """(name, arguments) of the call to play, or a text when the request matches no case."""
        names = [str((t.get("function") or {}).get("name")) for t in tools if isinstance(t, dict)]
        case = self.index().get(request_key(messages, names))
        if case is None:
            return f"No toolcall case matches this request (of {len(self.index())} loaded cases)."
        call = case.call
        if case.label == "correct" and wrong > 0 and _unit(seed, case.id) < wrong:
            kind = WRONG_KINDS[int(_unit(seed + 1, case.id) * len(WRONG_KINDS))]
            call = wrong_call(call, kind)
        return call.name, call.arguments
