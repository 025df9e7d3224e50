"""One LLM call through LiteLLM, with mcpfleet's own retries and per-call accounting.

Every failed attempt is judged by ``faults.classify``: faults of the provider (429, 5xx, hangs, dropped
connections, unusable replies) are retried after the wait the provider asked for (``Retry-After`` or a
rate-limit reset, capped) or a jittered exponential backoff, within the call's retries and the trial's
retry budget; time lost to them is given back to the agent's clock. When retries end, ``LLMFailure``
says which outcome the trial gets and why, in one line; the details go to the trial's log.

Imported once per worker process: LiteLLM's import costs seconds, so workers are kept warm.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import litellm  # noqa: E402 - the package __init__ configured LiteLLM's environment first

from mcpfleet.runner.llm import faults, meters, normalise
from mcpfleet.runner.llm.pace import BudgetExhausted, Pacer, Ticket, pause_from_headers
from mcpfleet.runner.llm.pricing import Price
from mcpfleet.runner.results.outcome import BUDGET_EXHAUSTED, CONTENT_FILTER, LLM_API_ERROR, is_scored

# Failed calls the model is charged for that a retry may turn out otherwise (``LLMTarget.model_fault_retries``); a
# context overflow recurs word for word (MCPMark compacts the history first; mcpfleet does not compact).
MODEL_RETRIED = frozenset({LLM_API_ERROR, CONTENT_FILTER})

litellm.suppress_debug_info = True
litellm.telemetry = False
litellm.drop_params = True  # a param a provider does not support is dropped, not a failed trial

ContextWindowExceededError = litellm.ContextWindowExceededError


@dataclass
class _ClientSlot:
    """A trial's HTTP client, held in one object that every copy of its target shares: an agent calls through a
    copy (``dataclasses.replace`` with MCPMark's params), the trial closes the target it made, and that closes the
    client the copy opened. Each copy holding its own left that client open (an aiohttp session per trial)."""

    client: Any = None
    ready: bool = False
    shared: bool = False  # a warm worker's, kept for its next trials: never closed by a trial


@dataclass
class LLMTarget:
    """Everything needed to reach one model, plus the trial's retry state; one per trial.

    The key is a value here, never an environment mutation."""

    model: str
    api_base: str | None = None
    api_key: str | None = None
    params: dict[str, Any] | None = None
    timeout: float = 600.0
    retries: int = 5
    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    retry_after_max: float = 60.0
    trial_retry_budget: int = 30
    # A failed call the model is charged for (a 4xx, a content-policy refusal) tried again this often, waiting
    # backoff_initial * 2, * 4, ... s: MCPMark's tool-calling loop tries any failed call 3 times in a row (2 more
    # times), so a refusal that does not recur passes there; 0 (mcpfleet's agent, ReAct's): the first one ends it.
    model_fault_retries: int = 0
    on_fault: Callable[[str], None] | None = None  # the runner's metrics, per failed attempt
    # The shared pace and budgets every request asks first (pace.py); None: the model has neither.
    pacer: Pacer | None = field(default=None, repr=False, compare=False)
    labels: tuple[str, str, str] | None = None  # namespace, run, model: the request metrics' (meters.py)
    price: Price | None = None  # the spec's pricing, when given: it prices every reply (else LiteLLM's map)
    # -- state of this trial's calls --
    answered: int = 0  # calls that got a usable reply
    retries_spent: int = 0  # retries over all calls (the trial's budget)
    log: list[str] = field(default_factory=list)  # one line per failed attempt, tracebacks of final failures
    _slot: _ClientSlot = field(default_factory=_ClientSlot, repr=False, compare=False)


class LLMFailure(Exception):
    """A call that failed for good: the outcome it gives the trial and a one-line reason."""

    def __init__(self, fault: faults.Fault, retries: int, seconds: float, why: str) -> None:
        super().__init__(why)
        self.fault, self.retries, self.seconds = fault, retries, seconds
        self.stop_reason = fault.category  # outcome categories double as the agent's stop reasons
        self.error_type = fault.cause.split(":", 1)[0]
        self.summary = why


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    total_tokens: int = 0  # as the provider reported it: some count tokens in it that no other field holds


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    """The assistant turn as the agent loop uses it: text, tool calls with unique ids, finish reason."""

    content: str
    tool_calls: list[ToolCall]
    finish_reason: str | None
    renamed: int = 0  # tool-call ids that were missing or duplicated and got a fresh one
    message: Any = field(default=None, compare=False, repr=False)  # the provider's message, as LiteLLM parsed it


def _detail(obj: Any, name: str) -> int:
    value = getattr(obj, name, None) if obj is not None else None
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):  # a provider's odd usage field is not worth a failed trial
        return 0


def usage_of(response: Any, target: LLMTarget) -> Usage:
    u = getattr(response, "usage", None)
    usage = Usage(
        input_tokens=_detail(u, "prompt_tokens"),
        output_tokens=_detail(u, "completion_tokens"),
        total_tokens=_detail(u, "total_tokens"),
        reasoning_tokens=_detail(getattr(u, "completion_tokens_details", None), "reasoning_tokens"),
        cached_tokens=_detail(getattr(u, "prompt_tokens_details", None), "cached_tokens"),
    )
    if target.price is not None:  # the spec's price, as the budget ledger settles it
        billed_output = max(usage.output_tokens, usage.total_tokens - usage.input_tokens)
        usage.cost_usd = target.price.cost(usage.input_tokens, billed_output)
        return usage
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:  # LiteLLM prices every response once already; do not do it twice
        cost = hidden["response_cost"]
        try:
            usage.cost_usd = float(cost) if cost is not None else None
        except (TypeError, ValueError):
            usage.cost_usd = None
        return usage
    try:
        usage.cost_usd = float(litellm.completion_cost(completion_response=response))
    except Exception:  # noqa: BLE001 - models missing from the cost map have no price, not an error
        usage.cost_usd = None
    return usage


def _message(response: Any) -> tuple[Any, Any]:
    """(choice, message) of a reply; UnusableReply if it has none."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise faults.UnusableReply("the reply has no choices (HTTP 200 with an empty 'choices' list)")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise faults.UnusableReply("the reply's first choice has no message")
    return choice, message


def reply_of(response: Any, messages: list[dict[str, Any]]) -> Reply:
    """The usable parts of a reply ``complete`` returned; every tool call gets an id unique in the conversation.

    Strict providers reject a conversation whose tool-call ids are missing or repeated, so a call without
    an id, or with one already used (in this reply or an earlier turn), gets a fresh one before its result
    goes back."""
    choice, message = _message(response)
    used = {c.get("id") for m in messages for c in (m.get("tool_calls") or []) if isinstance(c, dict)}
    calls: list[ToolCall] = []
    renamed = 0
    for i, c in enumerate(getattr(message, "tool_calls", None) or []):
        fn = getattr(c, "function", None)
        name = str(getattr(fn, "name", None) or "")
        args = getattr(fn, "arguments", None)
        args = args if isinstance(args, str) else ("" if args is None else json.dumps(args))
        cid = getattr(c, "id", None)
        if not isinstance(cid, str) or not cid or cid in used:
            n = len(used) + i
            while (cid := f"call_mcpfleet_{n}") in used:
                n += 1
            renamed += 1
        used.add(cid)
        calls.append(ToolCall(str(cid), name, args))
    content = normalise.text_of(getattr(message, "content", None)) or ""
    return Reply(content, calls, getattr(choice, "finish_reason", None), renamed, message)


# A warm worker's clients, by what they were made with, kept for its life (its one event loop's): its trials
# then share connections to a provider, as LiteLLM's own per-loop clients would, instead of each paying a new
# one (TCP, and TLS for a real provider) on its first call. None: a client per trial (a pod's one trial, the
# serial loop). Enabled by ``share_clients`` (worker.init_worker).
_shared: dict[tuple[Any, str, str | None, str | None, float], Any] | None = None


def share_clients() -> None:
    """Keep clients for the process's life from now on (call from the thread that runs its one loop)."""
    global _shared
    if _shared is None:
        _shared = {}


def dialect_of(model: str, api_base: str | None = None) -> str | None:
    """The provider LiteLLM calls ``model`` through when it speaks the OpenAI dialect ``normalise`` covers, else
    None (another dialect, or a model LiteLLM cannot place: that is the trial's to report, as a config_error)."""
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base)
    except Exception:  # noqa: BLE001
        return None
    return provider if provider in normalise.OPENAI_DIALECT else None


def _client_for(target: LLMTarget) -> Any:
    """The trial's normalising client (created on first use, inside the trial's event loop; a warm worker's is
    shared with its other trials to the same endpoint with the same key)."""
    slot = target._slot
    if not slot.ready:
        slot.ready = True
        provider = dialect_of(target.model, target.api_base)
        if provider is not None:
            key = (asyncio.get_running_loop(), provider, target.api_base, target.api_key, target.timeout)
            if _shared is not None and key in _shared:
                slot.client = _shared[key]
            else:
                slot.client = normalise.make_client(provider, target.api_base, target.api_key, target.timeout)
                if _shared is not None and slot.client is not None:
                    _shared[key] = slot.client
            slot.shared = _shared is not None and slot.client is not None
    return slot.client


async def close_shared() -> None:
    """Close the clients kept for the process's life (a worker's exit): their connections end with a FIN the
    provider sees, not with a reset when the process is gone. Sharing stays on for any later trial."""
    if not _shared:
        return
    clients = list(_shared.values())
    _shared.clear()
    for client in clients:
        await normalise.close_client(client)


async def close(target: LLMTarget) -> None:
    """Release the trial's HTTP client (its connections), unless its worker keeps it for its next trials."""
    slot = target._slot
    client, shared = slot.client, slot.shared
    slot.client, slot.ready, slot.shared = None, False, False
    if not shared:
        await normalise.close_client(client)


def backoff(target: LLMTarget, retry: int) -> float:
    """Jittered exponential backoff before retry number ``retry`` (1-based): half fixed, half random."""
    base = min(target.backoff_max, target.backoff_initial * 2 ** (retry - 1))
    return base / 2 + random.uniform(0, base / 2)


def wait_for(target: LLMTarget, fault: faults.Fault, retry: int) -> tuple[float, str]:
    """Seconds to wait before the next attempt, and why (for the log)."""
    asked = fault.retry_after
    if asked is not None and asked > 0:
        wait = min(target.retry_after_max, asked * random.uniform(1.0, 1.1))  # honoured, capped, a little spread
        capped = " (capped)" if asked > target.retry_after_max else ""
        return wait, f"provider asked for {asked:.3g} s{capped}"
    return backoff(target, retry), "backoff"


def _extend(deadline: asyncio.Timeout | None, seconds: float) -> None:
    """Give time lost to the provider back to the agent's clock: it measures the model, not the provider."""
    if deadline is None or seconds <= 0:
        return
    when = deadline.when()
    if when is None:
        return
    try:
        deadline.reschedule(when + seconds)
    except RuntimeError:  # already expiring: the agent's time ran out before this fault
        pass


async def complete(
    target: LLMTarget,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    deadline: asyncio.Timeout | None = None,
) -> tuple[Any, float, int]:
    """Call the model; returns (response, seconds spent, retries used). Raises ``LLMFailure`` when retries end."""
    kwargs: dict[str, Any] = dict(target.params or {})
    kwargs.update(model=target.model, messages=messages, timeout=target.timeout, num_retries=0, max_retries=0)
    if tools:
        kwargs["tools"] = tools
    if target.api_base:
        kwargs["api_base"] = target.api_base
    if target.api_key:
        kwargs["api_key"] = target.api_key
    client = _client_for(target)
    if client is not None:
        kwargs["client"] = client
    pacer = target.pacer
    if pacer is not None and pacer.config.send_max_tokens and "max_tokens" not in kwargs:
        kwargs["max_tokens"] = pacer.config.output_ceiling  # a budget's reservation needs a ceiling the provider keeps
    retries = model_retries = 0
    start = time.perf_counter()
    while True:
        ticket: Ticket | None = None
        if pacer is not None:
            try:
                ticket = await pacer.acquire(target.model, messages, tools)
            except BudgetExhausted as exc:
                fault = faults.Fault(faults.BUDGET, BUDGET_EXHAUSTED, False, f"BudgetExhausted: {exc}")
                target.log.append(f"{_now()} budget: {exc}")
                raise LLMFailure(fault, retries, time.perf_counter() - start, f"{BUDGET_EXHAUSTED}: {exc}") from None
            _extend(deadline, ticket.waited)  # time waiting for the shared pace is the harness's, not the model's
        t = time.perf_counter()
        response = None
        try:
            async with asyncio.timeout(target.timeout):  # a hang is the provider's, whatever the client does
                response = await litellm.acompletion(**kwargs)
            _message(response)
        except asyncio.CancelledError:
            if ticket is not None and pacer is not None:  # (the trial's time ran out): charged in full, never lost
                _background(pacer.settle(ticket, charge_reservation=True))
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is judged; cancellation passes through
            fault = faults.classify(exc, first_call=target.answered == 0, secrets=[target.api_key or ""])
            if fault.kind == faults.TIMEOUT and isinstance(exc, TimeoutError):
                fault = faults.Fault(
                    fault.kind, fault.category, True, f"Timeout: no reply within {target.timeout:g} s", fault.status
                )
            await _account_failure(target, ticket, fault, response)
            lost = not is_scored(fault.category)  # the provider's time, not the model's
            _extend(deadline, time.perf_counter() - t if lost else 0.0)
            if target.on_fault is not None:
                target.on_fault(fault.kind)
            if fault.category in MODEL_RETRIED and model_retries < target.model_fault_retries:
                model_retries += 1  # the model's time (no time given back) and not the provider's retry budget
                wait = target.backoff_initial * 2**model_retries
                target.log.append(
                    f"{_now()} {fault.kind}: {fault.cause} (the model's; attempt {model_retries}, trying again in "
                    f"{wait:.2f} s as MCPMark's loop does)"
                )
                await asyncio.sleep(wait)
                continue
            out_of_budget = target.retries_spent >= target.trial_retry_budget
            if not fault.retryable or retries >= target.retries or out_of_budget:
                seconds = time.perf_counter() - start
                target.log.append(f"{_now()} {fault.kind}: {fault.cause} (attempt {retries + 1}, giving up)")
                target.log.append("".join(traceback.format_exception(exc)).rstrip())
                raise LLMFailure(fault, retries, seconds, _why(fault, retries, out_of_budget, target)) from exc
            retries += 1
            target.retries_spent += 1
            wait, reason = wait_for(target, fault, retries)
            target.log.append(
                f"{_now()} {fault.kind}: {fault.cause} (attempt {retries}; retrying in {wait:.2f} s: {reason})"
            )
            _extend(deadline, wait if lost else 0.0)
            await asyncio.sleep(wait)
            continue
        target.answered += 1
        await _account(target, ticket, response)
        return response, time.perf_counter() - start, retries


_settling: set[asyncio.Future[Any]] = set()


def _background(coro: Any) -> None:
    fut = asyncio.ensure_future(coro)
    _settling.add(fut)
    fut.add_done_callback(_settling.discard)


def _billed_tokens(response: Any) -> tuple[int, int]:
    """(prompt, output) tokens as the provider bills them: thinking tokens counted only in ``total_tokens`` are
    output (faults: hidden-tokens)."""
    u = getattr(response, "usage", None)
    prompt, output, total = _detail(u, "prompt_tokens"), _detail(u, "completion_tokens"), _detail(u, "total_tokens")
    return prompt, max(output, total - prompt)


async def _account(target: LLMTarget, ticket: Ticket | None, response: Any, code: str = "200") -> None:
    """Settle an answered request with its reported usage; count it, its tokens and its cost."""
    prompt, output = _billed_tokens(response)
    cost: float | None = None
    if target.pacer is not None and ticket is not None:
        headers = (getattr(response, "_hidden_params", None) or {}).get("additional_headers") or {}
        cost = await target.pacer.settle(
            ticket, prompt_tokens=prompt, output_tokens=output, pause_s=pause_from_headers(headers)
        )
        if target.pacer.config.price is None:
            cost = None
    if cost is None:
        cost = usage_of(response, target).cost_usd
    if target.labels is not None:
        meters.REQUESTS.labels(*target.labels, code).inc()
        meters.TOKENS.labels(*target.labels, "input").inc(prompt)
        meters.TOKENS.labels(*target.labels, "output").inc(output)
        if cost:
            meters.COST.labels(*target.labels).inc(cost)


async def _account_failure(target: LLMTarget, ticket: Ticket | None, fault: faults.Fault, response: Any) -> None:
    """Settle a failed request: a reply that came (an unusable one) with its usage; a timeout or a dropped
    connection in full (the provider may have billed it); a refusal with nothing; a 429 slows the shared pace."""
    if response is not None and getattr(response, "usage", None) is not None:
        await _account(target, ticket, response, meters.code_of(fault.status or 200, fault.kind))
        return
    cost = 0.0
    if target.pacer is not None and ticket is not None:
        limited = fault.kind == faults.RATE_LIMIT
        cost = await target.pacer.settle(
            ticket,
            charge_reservation=fault.kind in (faults.TIMEOUT, faults.DROPPED),
            rate_limited=limited,
            pause_s=fault.retry_after if limited else None,
        )
    if target.labels is not None:
        meters.REQUESTS.labels(*target.labels, meters.code_of(fault.status, fault.kind)).inc()
        if cost:  # (a timeout charged at its reservation: what the ledger counts, the cost metric counts too)
            meters.COST.labels(*target.labels).inc(cost)


def _why(fault: faults.Fault, retries: int, out_of_budget: bool, target: LLMTarget) -> str:
    """The record's one-line error: the cause, the HTTP status, and how the retries ended."""
    bits = [f"HTTP {fault.status}"] if fault.status else []
    if out_of_budget and fault.retryable:
        bits.append(f"the trial's retry budget of {target.trial_retry_budget} is spent")
    elif fault.retryable:
        bits.append(f"gave up after {retries} retr{'y' if retries == 1 else 'ies'}")
    else:
        bits.append("not retried")
    return f"{fault.cause} ({'; '.join(bits)})"


def _now() -> str:
    return time.strftime("%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
