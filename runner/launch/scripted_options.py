"""The scripted model's model string parsed into Options, apart from the server so ``validate`` checks it too.

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
other key. A rate-limited, metered account: ``rpm=N`` admits N requests per ``window=S`` seconds (default 60)
for ``account=NAME`` (default: the key the request gives), answering 429 with a ``Retry-After`` above it, and
the server meters every account's accepted and refused requests and billed tokens (``GET /v1/meter``). Like a
strict provider, the server refuses (400) a conversation whose tool-call ids are missing or repeated, or whose
tool results answer no preceding call.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

POLICIES = ("oracle", "noop", "malformed", "overflow", "loop", "script", "toolcall")
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
    "rpm",
    "window",
    "account",
)


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
    rpm: int | None = None  # a rate-limited account: requests per ``window`` seconds
    window: float = 60.0
    account: str | None = None


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
        rpm = int(values["rpm"]) if "rpm" in values else None
        window = float(values.get("window", 60.0))
    except ValueError as exc:
        raise ModelError(400, f"'{shown}': bad option value: {str(exc)[:200]}") from None
    if latency < 0 or (fail or 0) < 0 or after < 0 or not 400 <= fail_status <= 599 or not 0 <= wrong <= 1:
        raise ModelError(
            400, f"'{shown}': latency, fail and after must be >= 0, fail_status in 400..599, wrong in 0..1"
        )
    if (rpm is not None and rpm < 1) or window <= 0:
        raise ModelError(400, f"'{shown}': rpm must be >= 1 and window > 0")
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
        rpm=rpm,
        window=window,
        account=values.get("account"),
        **waits,
    )
