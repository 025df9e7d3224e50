"""What each scripted policy answers, derived statelessly from the conversation so far (no HTTP here)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpfleet.runner.agent import snapshot_refs
from mcpfleet.runner.launch.scripted_options import ModelError, Options, ScriptError, load_script, script_path
from mcpfleet.runner.launch.scripted_toolcall import ToolCallAnswers
from mcpfleet.runner.services import SERVICES
from mcpfleet.runner.spec.task import ROOT_TOKEN, OracleStep, Task, TaskError
from mcpfleet.runner.tasks.discovery import discover

LIST_DIRS = "list_allowed_directories"
DONE = "Done."
NOOP_TEXT = "I have reviewed the request."
OVERFLOW_MESSAGE = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted "
    "in more tokens than that. Please reduce the length of the messages."
)
MALFORMED_ARGUMENTS = '{"path": "'


@dataclass(frozen=True)
class Reply:
    """One assistant turn: text and/or tool calls as (name, arguments string)."""

    content: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _tool_text(content: Any) -> str:
    """A tool message's text: plain (mcpfleet's conversation) or MCPMark's JSON dump of the MCP result."""
    text = _text(content)
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return text
        if isinstance(data, dict) and isinstance(data.get("content"), list):
            return "\n".join(str(b.get("text", "")) for b in data["content"] if isinstance(b, dict))
    return text


def _react_reply(text: str) -> dict[str, Any]:
    """An assistant reply of MCPMark's ReAct protocol (a JSON object), or {}."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _react_actions(messages: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(message index, tool name) of every action a ReAct conversation took so far."""
    out = []
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            action = _react_reply(_text(m.get("content"))).get("action")
            if isinstance(action, dict):
                out.append((i, str(action.get("tool"))))
    return out


def _first_user(messages: list[dict[str, Any]]) -> str:
    return next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")


def _tool_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for m in messages if m.get("role") == "assistant" for c in (m.get("tool_calls") or [])]


def _find_root(messages: list[dict[str, Any]], probe: str = LIST_DIRS) -> str | None:
    """The first absolute path in the result of the first ``probe`` (list_allowed_directories) call."""
    result: str | None = None
    ids = [c.get("id") for c in _tool_calls(messages) if (c.get("function") or {}).get("name") == probe]
    if ids:
        result = next(
            (
                _tool_text(m.get("content"))
                for m in messages
                if m.get("role") == "tool" and m.get("tool_call_id") == ids[0]
            ),
            None,
        )
    else:  # ReAct: the observation right after the probe's action
        at = next((i for i, name in _react_actions(messages) if name == probe), None)
        if at is not None and at + 1 < len(messages):
            observed = _text(messages[at + 1].get("content")).split("\n", 1)[-1]
            result = _tool_text(observed.rsplit("\n", 1)[0])
    for line in (result or "").splitlines():
        if line.strip().startswith("/"):
            return line.strip()
    return None


def _results(messages: list[dict[str, Any]]) -> list[str]:
    """Tool results so far, oldest first: tool messages, or ReAct's observations (user messages after the
    first); an oracle step's element refs resolve in the latest page snapshot among them."""
    out = []
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            out.append(_tool_text(m.get("content")))
        elif m.get("role") == "user" and i > 0 and any(x.get("role") == "assistant" for x in messages[:i]):
            out.append(_text(m.get("content")))
    return out


def _call(name: str, arguments: Any) -> tuple[str, str]:
    return name, arguments if isinstance(arguments, str) else json.dumps(arguments)


def _replayed(task: Task) -> str:
    """What the oracle policy plays for a task (its steps and final answer), comparable between tasks; one
    value for every task without a playable oracle (each gets the same "no oracle" answer)."""
    try:
        steps = [[step.tool, step.arguments] for step in task.oracle]
    except (TaskError, ValueError, OSError):
        return "no oracle"
    return json.dumps([steps, task.oracle_answer], sort_keys=True, default=str)


def shared_descriptions(tasks: Iterable[Task]) -> dict[str, list[str]]:
    """Descriptions (stripped, as the oracle policy matches them) shared by tasks whose oracles differ, with
    those tasks' ids: the oracle policy knows a task only by its description, so for these it cannot tell
    which oracle to replay (it replayed the first found, even an unselected task's, and scored 0 silently)."""
    by_text: dict[str, list[Task]] = {}
    for task in tasks:
        by_text.setdefault(task.description.strip(), []).append(task)
    return {
        text: [t.id for t in group]
        for text, group in by_text.items()
        if len(group) > 1 and len({_replayed(t) for t in group}) > 1
    }


def ambiguous_message(ids: list[str], task_id: str | None = None) -> str:
    """Why the oracle policy refuses a description that tasks with different oracles share; from ``task_id``'s
    side when given (validate), else the request's (the server does not know which task the trial runs)."""
    others = [i for i in ids if i != task_id]
    named = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    who = f"{task_id}: its description.md is also that of {named}" if task_id else f"tasks {named} share a description"
    return (
        f"{who}, with different oracles, so the scripted oracle cannot tell which task to replay; give each task "
        "its own description, or keep the variants in separate packs"
    )


class ScriptedPolicies:
    """Request handling; tasks are indexed once at start so a request does no file or CPU-heavy work."""

    def __init__(self, tasks_roots: list[Path], latency: float = 0.0, script_base: Path | None = None) -> None:
        self.latency = latency
        self.script_base = (script_base or Path.cwd()).resolve()
        self.tasks: dict[str, Task] = {}
        found = [task for root in tasks_roots for task in discover(Path(root))]
        for task in found:
            self.tasks.setdefault(task.description.strip(), task)
        self._shared = shared_descriptions(found)  # refused by the oracle policy, never replayed as the first
        self._by_length = sorted(self.tasks.items(), key=lambda kv: -len(kv[0]))
        self._oracles: dict[str, list[OracleStep] | str] = {}
        self._answers: dict[str, str] = {}  # an answer task's final message (oracle.json "answer")
        for task in self.tasks.values():
            try:
                self._oracles[task.id] = task.oracle
                if task.oracle_answer:
                    self._answers[task.id] = task.oracle_answer
            except (TaskError, json.JSONDecodeError) as exc:
                self._oracles[task.id] = str(exc)
        self._match_cache: dict[str, Task | None] = {}
        self._scripts: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._calls: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._toolcalls = ToolCallAnswers([Path(r) for r in tasks_roots])

    # -- policies ---------------------------------------------------------------------------
    def match(self, message: str) -> Task | None:
        """Exact description match after strip, else the longest description contained in the message."""
        if message not in self._match_cache:
            key = message.strip()
            task = self.tasks.get(key) or next((t for d, t in self._by_length if d and d in key), None)
            if len(self._match_cache) > 10_000:
                self._match_cache.clear()
            self._match_cache[message] = task
        return self._match_cache[message]

    def reply(self, opts: Options, body: dict[str, Any]) -> Reply:
        messages: list[dict[str, Any]] = body.get("messages") or []
        if opts.policy == "noop":
            return Reply(NOOP_TEXT)
        if opts.policy == "overflow":
            raise ModelError(400, OVERFLOW_MESSAGE, code="context_length_exceeded")
        if opts.policy == "loop":
            return Reply(tool_calls=(_call(LIST_DIRS, {}),))
        if opts.policy == "malformed":
            return self._malformed(body, messages)
        if opts.policy == "script":
            return self._script(opts.arg or "", messages)
        if opts.policy == "toolcall":
            answer = self._toolcalls.answer(messages, body.get("tools") or [], opts.wrong, opts.seed)
            return Reply(answer) if isinstance(answer, str) else Reply(tool_calls=(_call(*answer),))
        if not body.get("tools"):  # MCPMark's ReAct agent: tools described in the prompt, JSON replies
            return self._react_oracle(messages)
        return self._oracle(messages)

    def _react_oracle(self, messages: list[dict[str, Any]]) -> Reply:
        """The oracle in MCPMark's ReAct protocol: the same steps, as JSON actions, then a JSON answer."""
        reply = self._oracle(messages, react=True)
        if reply.tool_calls:
            name, arguments = reply.tool_calls[0]
            action = {"tool": name, "arguments": json.loads(arguments)}
            return Reply(json.dumps({"thought": "Next oracle step.", "action": action}))
        return Reply(json.dumps({"thought": "The oracle is done.", "answer": reply.content}))

    def _oracle(self, messages: list[dict[str, Any]], react: bool = False) -> Reply:
        task = self.match(_first_user(messages))
        if task is None:
            return Reply(
                "No oracle is known for this request: its first user message matches none of the "
                f"{len(self.tasks)} loaded task descriptions."
            )
        if ids := self._shared.get(task.description.strip()):
            # A 404: the run records the harness's misconfiguration as an unscored config_error and stops the
            # model, rather than scoring another task's replay as this one's failure.
            raise ModelError(404, ambiguous_message(ids), code="model_not_found")
        steps = self._oracles[task.id]
        if isinstance(steps, str):
            return Reply(f"No oracle is known for task {task.id}: {steps}")
        # Oracle steps may name the trial's folder as {root}; a service whose server can tell it is asked first.
        probe = SERVICES[task.service].oracle_root_tool if task.service in SERVICES else LIST_DIRS
        calls = len(_react_actions(messages)) if react else len(_tool_calls(messages))
        done = calls - (1 if probe else 0)
        if done < 0:
            return Reply(tool_calls=(_call(str(probe), {}),))
        if done >= len(steps):
            return Reply(self._answers.get(task.id) or DONE)
        # A service whose harness substitutes {root} (a declared one) gets the steps' {root} as written.
        harness_root = task.service in SERVICES and SERVICES[task.service].harness_root
        root = ROOT_TOKEN if harness_root else _find_root(messages, probe) if probe else ""
        if root is None:
            return Reply(f"Cannot play the oracle of {task.id}: no absolute path found in the {probe} result.")
        step = steps[done]
        try:
            arguments = snapshot_refs.resolve_step(step.tool, done, step.resolve(root), _results(messages))
        except snapshot_refs.RefError as exc:
            return Reply(f"Cannot play the oracle of {task.id}: {exc}")
        return Reply(tool_calls=(_call(step.tool, arguments),))

    def _malformed(self, body: dict[str, Any], messages: list[dict[str, Any]]) -> Reply:
        if any(m.get("role") == "assistant" for m in messages):
            return Reply(DONE)
        fns = [t.get("function") or {} for t in body.get("tools") or [] if isinstance(t, dict)]
        names: list[str] = [f["name"] for f in fns if isinstance(f.get("name"), str)]
        if not names:
            return Reply("The malformed policy needs at least one tool in the request.")
        with_path = [
            f["name"]
            for f in fns
            if f.get("name") in names and "path" in ((f.get("parameters") or {}).get("properties") or {})
        ]
        return Reply(tool_calls=(((with_path or names)[0], MALFORMED_ARGUMENTS),))

    def _script(self, path: str, messages: list[dict[str, Any]]) -> Reply:
        turns = self._load_script(path)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn >= len(turns):
            return Reply(DONE)
        spec = turns[turn]
        root = _find_root(messages)
        calls = []
        for c in spec.get("tool_calls") or []:
            args = c.get("arguments", {})
            if root is not None:  # reuse the oracle's {root} substitution for str/list/dict arguments
                args = OracleStep(c["name"], {"value": args}).resolve(root)["value"]
            calls.append(_call(c["name"], args))
        return Reply(spec.get("content"), tuple(calls))

    def _load_script(self, arg: str) -> list[dict[str, Any]]:
        """Cached by (path, mtime) so an edited script is picked up without restarting. A script that cannot
        be played is the harness's misconfiguration, not the model's answer: a 404, which a run records as an
        unscored config_error and stops the model on (a 400 was scored as the model's llm_api_error)."""
        path = script_path(arg, self.script_base)
        try:
            key = (str(path), os.stat(path).st_mtime_ns)
        except OSError:
            key = (str(path), -1)
        if key not in self._scripts:
            try:
                turns = load_script(path)
            except ScriptError as exc:
                raise ModelError(
                    404, f"{exc} (a relative path is read from {self.script_base})", code="model_not_found"
                ) from None
            self._scripts[key] = turns
        return self._scripts[key]
