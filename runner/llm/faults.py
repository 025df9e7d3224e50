"""Provider faults: who is to blame for a failed LLM call, and how long the provider asked us to wait.

Pure functions over exceptions and response headers, so the table of faults can be tested on its own. A
fault is charged to the model only when the model caused it (its conversation overflowed the context, its
output was filtered, the provider refused a request built from what it said); everything the provider
did on its own (rate limits, 5xx, hangs, dropped connections, unusable replies) is a ``provider_error``,
and a model that cannot be reached as configured (bad key, unknown model, wrong base URL) a
``config_error``. Neither is scored.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from mcpfleet.runner._util.printable import printable
from mcpfleet.runner.results.outcome import (
    CONFIG_ERROR,
    CONTENT_FILTER,
    CONTEXT_OVERFLOW,
    LLM_API_ERROR,
    PROVIDER_ERROR,
)
from mcpfleet.runner.results.records import epoch_seconds, redact_text

# Kinds of fault, for logs and the runner's metrics (a bounded label set).
RATE_LIMIT = "rate_limit"
SERVER_ERROR = "server_error"
TIMEOUT = "timeout"
DROPPED = "connection_dropped"
UNREACHABLE = "unreachable"
UNUSABLE = "unusable_reply"
AUTH = "auth"
FORBIDDEN = "forbidden"
PAYMENT = "payment_required"
NOT_FOUND = "not_found"
CONTEXT = "context_overflow"
FILTERED = "content_filter"
BAD_REQUEST = "bad_request"
OTHER = "other"
BUDGET = "budget_exhausted"  # not a provider's fault: a budget left no room, the request was not sent (pace.py)
KINDS = (
    RATE_LIMIT,
    SERVER_ERROR,
    TIMEOUT,
    DROPPED,
    UNREACHABLE,
    UNUSABLE,
    AUTH,
    FORBIDDEN,
    PAYMENT,
    NOT_FOUND,
    CONTEXT,
    FILTERED,
    BAD_REQUEST,
    OTHER,
    BUDGET,
)

# Names of exception types (anywhere in the cause chain) that mean the connection was never made.
_CONNECT_FAILURES = {"ConnectError", "ConnectTimeout", "ClientConnectorError", "ClientConnectorDNSError"}
_DROPPED = {"ReadError", "RemoteProtocolError", "ServerDisconnectedError", "ClientOSError", "WriteError"}
_UNUSABLE_TEXT = re.compile(
    r"invalid response object|unable to get json response|empty or invalid response|error in response object", re.I
)
# LiteLLM's own refusal to send a request without a key (an HTTP 500 it makes up locally, never the provider's).
_NO_CREDENTIALS = re.compile(
    r"missing credentials|api_key client option must be set|no api key provided|api key is required", re.I
)
_PREFIX = re.compile(r"^\s*(?:litellm\.\w+|\w+(?:Error|Exception)|Timeout Error)\s*[:\-]\s*")
_MAX_CAUSE = 300


class UnusableReply(Exception):
    """HTTP 200 whose body holds no usable assistant message (no choices, a choice without a message)."""


@dataclass(frozen=True)
class Fault:
    """One failed attempt, judged: its kind, the outcome it leads to if retries end, and whether to retry."""

    kind: str
    category: str
    retryable: bool
    cause: str  # "<ExceptionType>: <one line>"
    status: int | None = None
    retry_after: float | None = None  # seconds the provider asked for (Retry-After or a rate-limit reset)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _status(exc: BaseException) -> int | None:
    for e in _chain(exc):
        code = getattr(e, "status_code", None)
        if isinstance(code, int) and 100 <= code <= 599:
            return code
    return None


def headers_of(exc: BaseException) -> dict[str, str]:
    """The failed response's headers, lower-cased (LiteLLM keeps them in different places per provider)."""
    for e in _chain(exc):
        for raw in (
            getattr(e, "litellm_response_headers", None),
            getattr(getattr(e, "response", None), "headers", None),
        ):
            if raw:
                try:
                    return {str(k).lower(): str(v) for k, v in dict(raw).items()}
                except (TypeError, ValueError):
                    continue
    return {}


def one_line(exc: BaseException, secrets: Sequence[str] = ()) -> str:
    """``<ExceptionType>: <cause>`` on one short line: no traceback, no response dump, no site-packages paths, no
    control characters. ``secrets`` are redacted before the line is cut short: a provider's error that echoes the
    key across the cut would otherwise keep the key's first part, which no later redaction recognises."""
    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:  # "unhandled errors in a TaskGroup"
        leaf = leaf.exceptions[0]
    text = str(leaf)
    if secrets:  # first, as written: a key holding a tab, a line break or two spaces is no longer itself once
        text = redact_text(text, list(secrets)) or ""  # the text is cut to a line and its whitespace normalised
    text = text.split("Traceback (most recent call last)")[0]
    text = text.split("received_args=")[0]
    for _ in range(4):
        stripped = _PREFIX.sub("", text, count=1)
        if stripped == text:
            break
        text = stripped
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if text.startswith("{"):  # a provider's JSON error body: its message says it best
        try:
            body = json.loads(text)
            err = body.get("error", body) if isinstance(body, dict) else {}
            msg = err.get("message") if isinstance(err, dict) else None
            text = str(msg) if msg else text
        except ValueError:
            pass
    text = printable(text)
    if secrets:  # again, with each key as the normalising made it (JSON's own escapes of it undone by parsing)
        text = redact_text(text, [f for s in secrets for f in (s, printable(s))]) or ""
    if len(text) > _MAX_CAUSE:
        text = text[: _MAX_CAUSE - 3] + "..."
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def classify(exc: BaseException, *, first_call: bool, secrets: Sequence[str] = ()) -> Fault:
    """Judge one failed attempt. ``first_call``: no call of this trial has been answered yet; ``secrets``: the
    keys its cause must not show (see one_line)."""
    import litellm  # already imported by llm.py; here so this module stays importable without it

    names = {type(e).__name__ for e in _chain(exc)}
    status = _status(exc)
    cause = one_line(exc, secrets)

    def fault(kind: str, category: str, retryable: bool, retry_after: float | None = None) -> Fault:
        return Fault(kind, category, retryable, cause, status, retry_after)

    if isinstance(exc, UnusableReply):
        return fault(UNUSABLE, PROVIDER_ERROR, True)
    if names & _CONNECT_FAILURES or any(isinstance(e, (ConnectionRefusedError, socket.gaierror)) for e in _chain(exc)):
        # Nothing was ever sent: cheap to retry. A trial that never got through is misconfigured (a wrong
        # apiBase, a host that does not resolve); one that was talking to its provider saw an outage.
        return fault(UNREACHABLE, CONFIG_ERROR if first_call else PROVIDER_ERROR, True)
    if isinstance(exc, TimeoutError | litellm.Timeout) or status == 408:
        return fault(TIMEOUT, PROVIDER_ERROR, True)
    if isinstance(exc, litellm.ContextWindowExceededError):
        return fault(CONTEXT, CONTEXT_OVERFLOW, False)
    if isinstance(exc, litellm.ContentPolicyViolationError):
        return fault(FILTERED, CONTENT_FILTER, False)
    if status == 401 or isinstance(exc, litellm.AuthenticationError) or _NO_CREDENTIALS.search(str(exc)):
        return fault(AUTH, CONFIG_ERROR, False)
    if status == 402:  # the account has no credit left: nothing the model did, and no retry will help
        return fault(PAYMENT, CONFIG_ERROR, False)
    if status == 403 or isinstance(exc, litellm.PermissionDeniedError):
        return fault(FORBIDDEN, CONFIG_ERROR, False)
    if status == 404 or isinstance(exc, litellm.NotFoundError):
        return fault(NOT_FOUND, CONFIG_ERROR, False)
    if status == 429 or isinstance(exc, litellm.RateLimitError):
        return fault(RATE_LIMIT, PROVIDER_ERROR, True, retry_after_seconds(headers_of(exc)))
    if names & _DROPPED:
        return fault(DROPPED, PROVIDER_ERROR, True)
    if _UNUSABLE_TEXT.search(str(exc)):
        return fault(UNUSABLE, PROVIDER_ERROR, True)
    if status is not None and status >= 500:
        return fault(SERVER_ERROR, PROVIDER_ERROR, True, retry_after_seconds(headers_of(exc)))
    if status is not None and 400 <= status < 500:
        # The provider refused a request built from the conversation: the model's, as in MCPMark.
        return fault(BAD_REQUEST, LLM_API_ERROR, False)
    return fault(OTHER, PROVIDER_ERROR, True)


# -- Retry-After ----------------------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _seconds(value: str, now: float) -> float | None:
    """A delay in seconds from a header value: seconds, an HTTP date, an RFC 3339 time, or '1m30s'/'20ms'."""
    v = value.strip()
    if not v:
        return None
    try:
        x = float(v)
    except ValueError:
        pass
    else:
        return x - now if x > 1e9 else x  # a large number is an epoch time (x-ratelimit-reset)
    if re.fullmatch(r"(\d+(\.\d+)?(ms|h|m|s))+", v):
        unit = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        return sum(float(n) * unit[u] for n, u in _DURATION.findall(v))
    for parse in (_http_date, epoch_seconds):
        when = parse(v)
        if when is not None:
            return when - now
    return None


def _http_date(v: str) -> float | None:
    try:
        return parsedate_to_datetime(v).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """How long the provider asked us to wait, or None if it did not say.

    ``Retry-After`` (seconds or HTTP date) and ``retry-after-ms`` are authoritative. Otherwise the
    rate-limit reset headers (OpenAI's ``x-ratelimit-reset-{requests,tokens}``, Anthropic's
    ``anthropic-ratelimit-*-reset``, the generic ``x-ratelimit-reset``): the reset of an exhausted limit
    when the matching ``remaining`` header says which one, else the latest reset.
    """
    now = time.time() if now is None else now
    h = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in h:
        try:
            return max(0.0, float(h["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    if "retry-after" in h:
        s = _seconds(h["retry-after"], now)
        if s is not None:
            return max(0.0, s)
    resets: dict[str, float] = {}
    for key, value in h.items():
        m = re.fullmatch(r"(x-ratelimit-reset|anthropic-ratelimit-[a-z-]+-reset)(?:-([a-z-]+))?", key)
        if m:
            s = _seconds(value, now)
            if s is not None:
                resets[key] = max(0.0, s)
    if not resets:
        return None
    exhausted = [s for key, s in resets.items() if h.get(key.replace("reset", "remaining"), "").strip() in ("0", "0.0")]
    return max(exhausted) if exhausted else max(resets.values())
