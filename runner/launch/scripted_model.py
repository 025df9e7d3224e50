"""A scripted, OpenAI-compatible model server for tests, the quickstart and overhead benchmarks.

The harness reaches it through LiteLLM over real HTTP exactly like a provider
(``model="openai/<policy>", api_base="http://127.0.0.1:PORT/v1"``), so the whole client path
(serialisation, streaming, error mapping, retries) is exercised without a paid model. Every
answer is derived statelessly from the request's messages, so concurrent trials never interfere.

The model string picks a policy and options: ``<policy>[?opt=val&opt=val]``, e.g.
``oracle?latency=0.5&fail=2&fail_status=503``. LiteLLM's ``openai/`` provider strips only the
provider prefix and forwards the rest verbatim, so ``?`` survives (``+`` works as an alternative
separator for places where ``?`` is awkward, e.g. shells or URLs: ``oracle+latency=0.5+fail=2``).

Policies: ``oracle`` (plays the task's oracle.json; as JSON actions when a request offers no tools, which
is MCPMark's ReAct protocol), ``noop``, ``malformed``, ``overflow``, ``loop``, ``script=<path.json>`` and
``toolcall`` (answers toolcall cases: the gold call, or a deliberately wrong one for a seeded share ``wrong``
of them; see toolcalls/scripted.py). Options: ``latency`` (seconds each answer takes, counted from the
request's arrival and including the server's own work, as a provider's latency would be),
``fail``/``fail_status`` (the first N calls of each conversation answer HTTP S), ``wrong``/``seed``
(toolcall only).

Provider faults, for testing how the harness charges them: ``fault=<kind>`` misbehaves on the calls of a
conversation from ``after=M`` (default 0) on, for ``fail=N`` calls (default: all). Kinds (``FAULTS``):
``status`` (HTTP ``fail_status``; ``retry_after=S``, ``retry_after_date=S`` and ``reset=S`` add a
``Retry-After`` in seconds, one as an HTTP date, an ``x-ratelimit-reset-requests``), ``empty`` (200 with
``choices: []``), ``nomessage`` (a choice without a message), ``garbage`` (200 with an HTML body),
``hang`` (never answers), ``drop`` (closes the connection), ``auth``/``forbidden``/``notfound`` (401/403/404;
the 401 echoes the key it was given, as some providers do), and odd-but-usable replies: ``parts``
(content as a list of text parts), ``odd_usage`` (usage with strings, lists and vendor fields),
``hidden_tokens`` (a ``total_tokens`` above prompt plus completion, as providers that bill unseen thinking
tokens only in the total report it: ``HIDDEN_TOKENS`` more), ``dup_ids``
and ``no_ids`` (tool calls with one shared id, or none), ``length`` (an empty answer with
``finish_reason: length``), ``filter`` (``finish_reason: content_filter``). ``key=K`` answers 401 to any
other key. Like a strict provider, the server refuses (400) a conversation whose tool-call ids are
missing or repeated, or whose tool results answer no preceding call.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import itertools
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any, NoReturn

from aiohttp import web

from mcpfleet.runner.agent.loop import snapshot_refs
from mcpfleet.runner.launch.scripted_toolcall import ToolCallAnswers
from mcpfleet.runner.services import SERVICES
from mcpfleet.runner.spec.task import OracleStep, Task, TaskError
from mcpfleet.runner.tasks.discovery import discover

LISTEN_PREFIX = "mcpfleet-scripted-model listening on "
POLICIES = ("oracle", "noop", "malformed", "overflow", "loop", "script", "toolcall")
LIST_DIRS = "list_allowed_directories"
DONE = "Done."
NOOP_TEXT = "I have reviewed the request."
OVERFLOW_MESSAGE = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted "
    "in more tokens than that. Please reduce the length of the messages."
)
MALFORMED_ARGUMENTS = '{"path": "'
_OPTION_SPLIT = re.compile(r"[+&]")
FAULTS = (
    "status",
    "empty",
    "nomessage",
    "garbage",
    "hang",
    "drop",
    "auth",
    "forbidden",
    "notfound",
    "parts",
    "odd_usage",
    "hidden_tokens",
    "dup_ids",
    "no_ids",
    "length",
    "filter",
)
OPTIONS = (
    "latency",
    "fail",
    "fail_status",
    "fault",
    "after",
    "retry_after",
    "retry_after_date",
    "reset",
    "key",
    "wrong",
    "seed",
)
HIDDEN_TOKENS = 16  # per reply, in total_tokens only (fault ``hidden_tokens``)
ODD_USAGE_EXTRA = {
    "total_tokens": None,
    "prompt_tokens_details": [{"cached_tokens": 0}],
    "completion_tokens_details": {"reasoning_tokens": "n/a", "accepted_prediction_tokens": None},
    "cost": {"usd": "0.0001"},
    "x_vendor_billing": {"tier": "free", "units": [1, 2]},
}


class ModelError(Exception):
    """An answer that is an OpenAI-style HTTP error rather than a completion."""

    def __init__(
        self, status: int, message: str, type_: str = "invalid_request_error", code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code = status, message, type_, code

    def response(self) -> web.Response:
        body = {"error": {"message": self.message, "type": self.type, "param": None, "code": self.code}}
        return web.json_response(body, status=self.status)


@dataclass(frozen=True)
class Options:
    """A parsed model string: policy, its argument (the script path) and per-call options."""

    policy: str
    arg: str | None
    latency: float
    fail: int | None  # calls that misbehave (None: all from `after` on)
    fail_status: int
    fault: str | None = None
    after: int = 0
    retry_after: float | None = None
    retry_after_date: float | None = None
    reset: float | None = None
    key: str | None = None

    @property
    def faulty(self) -> bool:
        return self.fault is not None

    wrong: float = 0.0
    seed: int = 0


@dataclass(frozen=True)
class Reply:
    """One assistant turn: text and/or tool calls as (name, arguments string)."""

    content: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()


MAX_SCRIPT_BYTES = 16 * 1024 * 1024


class ScriptError(ValueError):
    """A script=<path> file that cannot be played; the message names the file and why."""


def script_path(arg: str, base: Path) -> Path:
    """Where ``script=<arg>`` is read: an absolute path as it is, a relative one under ``base`` (``mcpfleet
    run`` and ``validate`` give the EvalRun file's folder, as for ``tasks.path``; a standalone server its
    ``--script-base``, else its current folder)."""
    path = Path(arg).expanduser()
    return path if path.is_absolute() else base / path


def load_script(path: Path) -> list[dict[str, Any]]:
    """The turns of a script file; ScriptError when it is missing, not JSON or not ``{"turns": [...]}``.
    The scripted server and ``validate`` apply these same checks."""
    try:
        if not path.is_file():
            raise ScriptError(f"script {path}: {'not a file' if path.exists() else 'No such file or directory'}")
        with path.open("rb") as f:
            raw = f.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise ScriptError(f"script {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SCRIPT_BYTES:
        raise ScriptError(f"script {path}: larger than {MAX_SCRIPT_BYTES // 1024 // 1024} MiB")
    try:
        turns = json.loads(raw.decode("utf-8"))["turns"]
        if not isinstance(turns, list) or not all(
            isinstance(t, dict)
            and all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in t.get("tool_calls") or [])
            for t in turns
        ):
            raise ValueError("turns must be objects with 'content' and/or 'tool_calls' [{name, arguments}]")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ScriptError(f'script {path}: expected {{"turns": [...]}}: {str(exc)[:200]}') from None
    return turns


@functools.lru_cache(maxsize=1024)
def parse_model(model: str, default_latency: float) -> Options:
    """Split ``policy[?k=v&k=v]`` (``+`` also separates); raises ModelError on anything unknown.

    Cached: a benchmark sends the same few model strings thousands of times.
    """
    shown = model if len(model) <= 80 else model[:77] + "..."  # echoed in errors: a long string is cut
    if "?" in model:  # a script path may contain '+' only when '?' starts the options
        head, _, rest = model.partition("?")
        opts = [o for o in _OPTION_SPLIT.split(rest) if o]
    else:
        head, *opts = model.split("+")
    policy, _, arg = head.partition("=")
    if policy not in POLICIES:
        raise ModelError(
            404,
            f"unknown scripted model '{shown}'; policies: {', '.join(POLICIES)} "
            "(options: ?latency=S&fail=N&fail_status=CODE)",
            code="model_not_found",
        )
    if (policy == "script") != bool(arg):
        raise ModelError(400, f"'{shown}': only the script policy takes '=<path>' (script=/path/to.json)")
    values: dict[str, str] = {}
    for opt in opts:
        key, eq, val = opt.partition("=")
        if not eq or key not in OPTIONS:
            raise ModelError(400, f"'{shown}': unknown option '{opt[:80]}'; options: {', '.join(OPTIONS)}")
        values[key] = val
    fault = values.get("fault") or ("status" if "fail" in values else None)
    if fault is not None and fault not in FAULTS:
        raise ModelError(400, f"'{shown}': unknown fault '{fault[:80]}'; faults: {', '.join(FAULTS)}")
    try:
        latency = float(values.get("latency", default_latency))
        fail = int(values["fail"]) if "fail" in values else None
        fail_status = int(values.get("fail_status", 503))
        after = int(values.get("after", 0))
        waits = {k: float(values[k]) if k in values else None for k in ("retry_after", "retry_after_date", "reset")}
        wrong = float(values.get("wrong", 0.0))
        seed = int(values.get("seed", 0))
    except ValueError as exc:
        raise ModelError(400, f"'{shown}': bad option value: {str(exc)[:200]}") from None
    if latency < 0 or (fail or 0) < 0 or after < 0 or not 400 <= fail_status <= 599 or not 0 <= wrong <= 1:
        raise ModelError(
            400, f"'{shown}': latency, fail and after must be >= 0, fail_status in 400..599, wrong in 0..1"
        )
    if ("wrong" in values or "seed" in values) and policy != "toolcall":
        raise ModelError(400, f"'{shown}': wrong and seed are options of the toolcall policy only")
    if fail == 0:
        fault = None
    return Options(
        policy,
        arg or None,
        latency,
        fail,
        fail_status,
        fault,
        after,
        key=values.get("key"),
        wrong=wrong,
        seed=seed,
        **waits,
    )


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


def _usage_chars(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in messages:
        n += len(_text(m.get("content")))
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            n += len(fn.get("name") or "") + len(fn.get("arguments") or "")
    return n


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


class ScriptedModel:
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
        root = _find_root(messages, probe) if probe else ""
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

    # -- HTTP ---------------------------------------------------------------------------------
    def _fault_now(self, model: str, opts: Options, messages: list[dict[str, Any]]) -> str | None:
        """The fault of this call, if any: calls are counted per conversation (model string + first user
        message), and the fault hits calls ``after`` .. ``after + fail - 1``."""
        if not opts.faulty:
            return None
        key = hashlib.sha256(f"{model}\0{_first_user(messages)}".encode()).hexdigest()
        n = self._calls.get(key, 0)
        self._calls[key] = n + 1
        if n < opts.after or (opts.fail is not None and n >= opts.after + opts.fail):
            return None
        return opts.fault

    async def chat(self, request: web.Request) -> web.StreamResponse:
        arrived = asyncio.get_running_loop().time()
        try:
            body = await request.json()
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ModelError(400, "request body must be a JSON object with a 'messages' list")
        except (ValueError, UnicodeDecodeError):
            return ModelError(400, "request body is not valid JSON").response()
        except ModelError as exc:
            return exc.response()
        model = str(body.get("model", ""))
        try:
            opts = parse_model(model, self.latency)
            _check_conversation(body["messages"])
        except ModelError as exc:
            return exc.response()
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if opts.key is not None and given != opts.key:
            return _auth_error(given)
        fault = self._fault_now(model, opts, body["messages"])
        try:
            if fault in _HTTP_FAULTS:
                return await self._misbehave(request, fault, opts, given, arrived)
            reply = self.reply(opts, body)
        except ModelError as exc:
            await self._wait_until(arrived + opts.latency)
            return exc.response()
        rid, created = f"chatcmpl-{next(self._ids)}", int(time.time())
        calls = [
            {"id": f"call_{rid[9:]}_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(reply.tool_calls)
        ]
        if fault == "dup_ids":
            calls = [{**c, "id": "call_dup"} for c in calls]
        elif fault == "no_ids":
            calls = [
                {**c, "id": ""} if i % 2 == 0 else {k: v for k, v in c.items() if k != "id"}
                for i, c in enumerate(calls)
            ]
        out_chars = len(reply.content or "") + sum(len(n) + len(a) for n, a in reply.tool_calls)
        prompt = _usage_chars(body["messages"]) // 4
        completion = max(1, out_chars // 4)
        hidden = HIDDEN_TOKENS if fault == "hidden_tokens" else 0
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion + hidden,
            "completion_tokens_details": {"reasoning_tokens": 0},
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        finish = "tool_calls" if calls else "stop"
        content: Any = reply.content
        if fault == "length":
            calls, content, finish = [], "", "length"
        elif fault == "filter":
            calls, content, finish = [], None, "content_filter"
        elif fault == "parts" and content:
            half = len(content) // 2
            content = [{"type": "text", "text": content[:half]}, {"type": "text", "text": content[half:]}]
        if fault == "odd_usage":
            usage = {**usage, "prompt_tokens": str(prompt), "completion_tokens": float(completion), **ODD_USAGE_EXTRA}
        base = {"id": rid, "created": created, "model": model, "system_fingerprint": None}
        if not body.get("stream"):
            message = {"role": "assistant", "content": content, "tool_calls": calls or None}
            response = web.json_response(
                {
                    **base,
                    "object": "chat.completion",
                    "usage": usage,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                }
            )
            await self._wait_until(arrived + opts.latency)
            return response
        await self._wait_until(arrived + opts.latency)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        async for chunk in _chunks(base, reply, calls, finish, usage if include_usage else None):
            await resp.write(chunk)
        await resp.write_eof()
        return resp

    async def _misbehave(
        self, request: web.Request, fault: str, opts: Options, given: str, arrived: float
    ) -> web.StreamResponse:
        """Answer a call with one of the HTTP-level faults."""
        if fault == "hang":  # until the client gives up (a disconnect), so no handler outlives its caller
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(0.05)
            return web.Response(status=499)
        await self._wait_until(arrived + opts.latency)
        if fault == "drop":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=499)
        if fault == "empty":
            return web.json_response(_completion_shell([]))
        if fault == "nomessage":
            return web.json_response(_completion_shell([{"index": 0, "finish_reason": "stop"}]))
        if fault == "garbage":
            return web.Response(text="<html><body>502 Bad Gateway</body></html>", content_type="text/html")
        if fault == "auth":
            return _auth_error(given)
        if fault == "forbidden":
            return ModelError(403, "this key may not use this model", "permission_error").response()
        if fault == "notfound":
            return ModelError(
                404, "The model does not exist or you do not have access to it.", code="model_not_found"
            ).response()
        kind = (
            "rate_limit_error"
            if opts.fail_status == 429
            else ("server_error" if opts.fail_status >= 500 else "invalid_request_error")
        )
        response = ModelError(
            opts.fail_status, f"scripted failure (status {opts.fail_status}); retry the request", kind
        ).response()
        if opts.retry_after is not None:
            response.headers["Retry-After"] = f"{opts.retry_after:g}"
        if opts.retry_after_date is not None:
            response.headers["Retry-After"] = formatdate(time.time() + opts.retry_after_date, usegmt=True)
        if opts.reset is not None:
            response.headers["x-ratelimit-remaining-requests"] = "0"
            response.headers["x-ratelimit-reset-requests"] = f"{opts.reset:g}s"
            response.headers["x-ratelimit-remaining-tokens"] = "5000"
            response.headers["x-ratelimit-reset-tokens"] = "10ms"
        return response

    @staticmethod
    async def _wait_until(deadline: float) -> None:
        """Answer no earlier than the deadline: the latency is the whole call, this server's work included."""
        left = deadline - asyncio.get_running_loop().time()
        if left > 0:
            await asyncio.sleep(left)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": p, "object": "model", "created": 0, "owned_by": "mcpfleet"} for p in POLICIES],
            }
        )

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "tasks": len(self.tasks)})


_HTTP_FAULTS = frozenset({"status", "empty", "nomessage", "garbage", "hang", "drop", "auth", "forbidden", "notfound"})


def _auth_error(given: str) -> web.Response:
    """401 echoing the key it was given (some providers do: a harness must redact it)."""
    return ModelError(401, f"Incorrect API key provided: {given}.", code="invalid_api_key").response()


def _completion_shell(choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": choices,
        "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
    }


def _check_conversation(messages: list[Any]) -> None:
    """Refuse what strict providers refuse: tool-call ids missing or repeated, results answering no call."""
    seen: set[str] = set()
    open_calls: set[str] = set()
    for m in messages:
        if not isinstance(m, dict):
            raise ModelError(400, "each message must be an object")
        if m.get("role") == "assistant":
            open_calls = set()
            for c in m.get("tool_calls") or []:
                cid = c.get("id") if isinstance(c, dict) else None
                if not isinstance(cid, str) or not cid:
                    raise ModelError(400, "Invalid 'messages': a tool call has no 'id'.")
                if cid in seen:
                    raise ModelError(400, f"Invalid 'messages': duplicate tool call id '{cid}'.")
                seen.add(cid)
                open_calls.add(cid)
        elif m.get("role") == "tool" and m.get("tool_call_id") not in open_calls:
            raise ModelError(
                400,
                "Invalid 'messages': messages with role 'tool' must be a response to a preceding message "
                f"with 'tool_calls' (tool_call_id {m.get('tool_call_id')!r}).",
            )


def _split(s: str, parts: int = 3) -> Iterator[str]:
    """Argument fragments, as real providers stream them (a client must concatenate)."""
    size = max(1, -(-len(s) // parts))
    return (s[i : i + size] for i in range(0, len(s), size))


async def _chunks(
    base: dict[str, Any], reply: Reply, calls: list[dict[str, Any]], finish: str, usage: dict[str, Any] | None
) -> AsyncIterator[bytes]:
    """SSE frames in OpenAI's order: role, content, tool-call deltas, finish, optional usage, [DONE]."""

    def frame(delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> bytes:
        choices = (
            [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
        )
        payload = {**base, "object": "chat.completion.chunk", "choices": choices, **extra}
        if usage is not None and "usage" not in extra:
            payload["usage"] = None
        return f"data: {json.dumps(payload)}\n\n".encode()

    yield frame({"role": "assistant", "content": "" if calls else None})
    if reply.content:
        for piece in _split(reply.content, 2):
            yield frame({"content": piece})
    for i, call in enumerate(calls):
        fn = call["function"]
        yield frame(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        for piece in _split(fn["arguments"]):
            yield frame({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield frame({}, finish)
    if usage is not None:
        yield frame(None, usage=usage)
    yield b"data: [DONE]\n\n"


def build_app(tasks_roots: list[Path], latency: float = 0.0, script_base: Path | None = None) -> web.Application:
    """The aiohttp application; task packs are loaded here, once."""
    model = ScriptedModel(tasks_roots, latency, script_base)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", model.chat)
    app.router.add_post("/chat/completions", model.chat)
    app.router.add_get("/v1/models", model.models)
    app.router.add_get("/healthz", model.healthz)
    return app


def serve(
    tasks_roots: list[Path],
    host: str = "127.0.0.1",
    port: int = 0,
    latency: float = 0.0,
    script_base: Path | None = None,
) -> None:
    """Bind, print the one listening line (callers parse it to learn the port), serve until SIGTERM/SIGINT."""

    async def main() -> None:
        runner = web.AppRunner(build_app(tasks_roots, latency, script_base), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1]
        shown = f"[{host}]" if ":" in host else host
        print(f"{LISTEN_PREFIX}http://{shown}:{bound}/v1", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())


class ScriptedServerProcess:
    """Run the server as a subprocess; ``with ScriptedServerProcess(roots) as url:`` yields its base URL.

    The child gets its own session so a terminal Ctrl-C aimed at the parent (e.g. a benchmark)
    does not kill the model mid-run; the parent stops it on exit.
    """

    def __init__(
        self,
        tasks_roots: list[Path],
        latency: float = 0.0,
        startup_timeout: float = 30.0,
        script_base: Path | None = None,
    ) -> None:
        self.tasks_roots = [Path(r) for r in tasks_roots]
        self.latency = latency
        self.script_base = script_base  # where a relative script=<file> is read from: the EvalRun file's folder
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.url: str | None = None
        self._stderr: Any = None
        self._stopping = False

    def watch(self, on_death: Callable[[str], None]) -> None:
        """Call ``on_death`` (from a thread) if the server dies before it is stopped: a run must not take its
        trials' failed calls for the models' configuration errors."""
        proc = self.proc
        assert proc is not None, "watch() after the server started"

        def wait() -> None:
            code = proc.wait()
            if not self._stopping:
                on_death(f"mcpfleet's scripted model server died (exit status {code})")

        threading.Thread(target=wait, name="scripted-model-watch", daemon=True).start()

    def __enter__(self) -> str:
        cmd = [
            sys.executable,
            "-m",
            "mcpfleet.runner.launch.scripted_model",
            "--port",
            "0",
            "--latency",
            str(self.latency),
        ]
        cmd += ["--parent-pid", str(os.getpid())]  # its own session: Ctrl-C does not reach it, a SIGKILL must
        for root in self.tasks_roots:
            cmd += ["--tasks", str(root)]
        if self.script_base is not None:
            cmd += ["--script-base", str(self.script_base)]
        # stderr goes to a file, not a pipe nobody reads, so a chatty server can never block on it.
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL, start_new_session=True
        )
        try:
            line = self._read_line()
            port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        except BaseException:  # Ctrl-C while it starts too: it is in a session of its own, no signal reaches it
            self.__exit__()
            raise
        self.url = f"http://127.0.0.1:{port}/v1"
        return self.url

    def _read_line(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + self.startup_timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._fail(f"did not report listening within {self.startup_timeout:.0f}s")
                if sel.select(left):
                    data = os.read(self.proc.stdout.fileno(), 4096)
                    if not data:
                        self.proc.wait(timeout=5)
                        self._fail(f"exited with code {self.proc.returncode} before listening")
                    buf += data
        line = buf.split(b"\n", 1)[0].decode(errors="replace").strip()
        if not line.startswith(LISTEN_PREFIX):
            self._fail(f"printed an unexpected first line {line!r}")
        return line

    def _fail(self, why: str) -> NoReturn:
        self._stop()
        raise RuntimeError(f"scripted model server {why}; stderr:\n{self._stderr_text() or '(empty)'}")

    def _stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        data: bytes = self._stderr.read()
        return data.decode(errors="replace")[-4000:].strip()

    def _stop(self) -> None:
        self._stopping = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __exit__(self, *exc: object) -> None:
        self._stop()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m mcpfleet.runner.launch.scripted_model",
        description="OpenAI-compatible scripted model server (policies: " + ", ".join(POLICIES) + ").",
    )
    parser.add_argument(
        "--tasks",
        action="append",
        type=Path,
        default=[],
        help="task pack root in MCPMark layout (repeatable); the oracle policy plays its oracles",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    parser.add_argument(
        "--latency", type=float, default=0.0, help="default seconds each answer takes (its own work included)"
    )
    parser.add_argument(
        "--parent-pid", type=int, default=None, help="exit when this process (the one that started us) is gone"
    )
    parser.add_argument(
        "--script-base",
        type=Path,
        default=None,
        help="folder a relative script=<path> is read from (default: the current folder; a run passes its EvalRun's)",
    )
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        from mcpfleet.runner._util.lifeline import exit_with_parent

        exit_with_parent(args.parent_pid)
    try:
        serve(args.tasks, args.host, args.port, args.latency, args.script_base)
    except TaskError as exc:
        sys.exit(f"scripted model: {exc}")


if __name__ == "__main__":
    main()
