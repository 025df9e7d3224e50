"""One LLM call through LiteLLM, with retries on transient errors and per-call accounting.

Imported once per worker process: LiteLLM's import costs seconds, so workers are kept warm.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import litellm  # noqa: E402 - the package __init__ configured LiteLLM's environment first
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter  # noqa: E402

litellm.suppress_debug_info = True
litellm.telemetry = False
litellm.drop_params = True  # a param a provider does not support is dropped, not a failed trial

RETRYABLE = (
    litellm.RateLimitError,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.BadGatewayError,
    litellm.APIConnectionError,
    litellm.Timeout,
)
ContextWindowExceededError = litellm.ContextWindowExceededError


@dataclass
class LLMTarget:
    """Everything needed to reach one model; the key is a value here, never an environment mutation."""

    model: str
    api_base: str | None = None
    api_key: str | None = None
    params: dict[str, Any] | None = None
    timeout: float = 600.0
    retries: int = 5
    backoff_initial: float = 1.0
    backoff_max: float = 60.0


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None


def _detail(obj: Any, name: str) -> int:
    value = getattr(obj, name, None) if obj is not None else None
    return int(value or 0)


def usage_of(response: Any, target: LLMTarget) -> Usage:
    u = getattr(response, "usage", None)
    usage = Usage(
        input_tokens=_detail(u, "prompt_tokens"),
        output_tokens=_detail(u, "completion_tokens"),
        reasoning_tokens=_detail(getattr(u, "completion_tokens_details", None), "reasoning_tokens"),
        cached_tokens=_detail(getattr(u, "prompt_tokens_details", None), "cached_tokens"),
    )
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:  # LiteLLM prices every response once already; do not do it twice
        cost = hidden["response_cost"]
        usage.cost_usd = float(cost) if cost is not None else None
        return usage
    try:
        usage.cost_usd = float(litellm.completion_cost(completion_response=response))
    except Exception:  # noqa: BLE001 - models missing from the cost map have no price, not an error
        usage.cost_usd = None
    return usage


async def complete(
    target: LLMTarget, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[Any, float, int]:
    """Call the model; returns (response, seconds spent, retries used). Raises after retries run out."""
    kwargs: dict[str, Any] = dict(target.params or {})
    kwargs.update(model=target.model, messages=messages, timeout=target.timeout, num_retries=0, max_retries=0)
    if tools:
        kwargs["tools"] = tools
    if target.api_base:
        kwargs["api_base"] = target.api_base
    if target.api_key:
        kwargs["api_key"] = target.api_key
    attempts = 0
    start = time.perf_counter()
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(target.retries + 1),
            wait=wait_exponential_jitter(
                multiplier=target.backoff_initial, max=target.backoff_max, jitter=target.backoff_initial
            ),
            retry=retry_if_exception_type(RETRYABLE),
            reraise=True,
        ):
            with attempt:
                attempts += 1
                response = await litellm.acompletion(**kwargs)
    except Exception as exc:
        # The caller records what the failed call cost: its retries and the time spent waiting.
        # Riding on the exception itself (re-raised unchanged, so callers' except clauses keep matching
        # LiteLLM's types); exceptions accept new attributes, which mypy cannot know.
        exc.mcpfleet_retries = attempts - 1  # type: ignore[attr-defined]  # see above
        exc.mcpfleet_seconds = time.perf_counter() - start  # type: ignore[attr-defined]  # see above
        raise
    return response, time.perf_counter() - start, attempts - 1
