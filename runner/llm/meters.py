"""Prometheus metrics of LLM requests: spend, tokens, replies by code, and the pacer's waits.

In the runner's registry (agent/metrics.py serves it from a trial pod). Labels are bounded: namespace, run, model,
and a code or reason from a fixed set; never a trial id.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)
LABELS = ["namespace", "run", "model"]

COST = Counter(
    "mcpfleet_llm_cost_usd_total",
    "USD the provider bills for the run's LLM requests (its reported usage priced by spec pricing or LiteLLM's map).",
    LABELS,
    registry=REGISTRY,
)
TOKENS = Counter(
    "mcpfleet_llm_tokens_total",
    "LLM tokens the provider reported, by kind (input, output).",
    [*LABELS, "kind"],
    registry=REGISTRY,
)
REQUESTS = Counter(
    "mcpfleet_llm_requests_total",
    "LLM requests sent, by reply: an HTTP status (200, 429, 500, ...) or timeout, connection, other.",
    [*LABELS, "code"],
    registry=REGISTRY,
)
PACE_WAIT = Counter(
    "mcpfleet_llm_pace_wait_seconds_total",
    "Seconds requests waited for the shared pace, by reason (requests, tokens, in_flight, rate_limited, budget, "
    "store_unreachable).",
    [*LABELS, "reason"],
    registry=REGISTRY,
)
PACE_WAITING = Gauge(
    "mcpfleet_llm_pace_waiting_requests", "Requests waiting for the shared pace now.", LABELS, registry=REGISTRY
)
PACE_STORE_DOWN = Gauge(
    "mcpfleet_llm_pace_store_unreachable",
    "1 while the pace store cannot be reached (requests wait, none is sent unpaced).",
    LABELS,
    registry=REGISTRY,
)
RATE_LIMIT = Gauge(
    "mcpfleet_llm_rate_limit_requests_per_minute",
    "The model's rateLimit.requestsPerMinute (what its account allows), for request rate against the limit.",
    LABELS,
    registry=REGISTRY,
)
BUDGET_SPENT = Gauge(
    "mcpfleet_llm_budget_spent_usd",
    "USD spent against a budget, as its ledger last said (scope: run or model).",
    [*LABELS, "scope"],
    registry=REGISTRY,
)
BUDGET_LIMIT = Gauge(
    "mcpfleet_llm_budget_usd", "A budget's usd (scope: run or model).", [*LABELS, "scope"], registry=REGISTRY
)


WAIT_REASONS = ("requests", "tokens", "in_flight", "rate_limited", "budget", "store_unreachable")


def start_series(labels: tuple[str, str, str], paced: bool) -> None:
    """Create a model's series at zero, so that the first increment is visible to rate() and a dashboard's
    429 panel has a series before the first 429."""
    for code in ("200", "429"):
        REQUESTS.labels(*labels, code)
    for kind in ("input", "output"):
        TOKENS.labels(*labels, kind)
    COST.labels(*labels)
    if paced:
        for reason in WAIT_REASONS:
            PACE_WAIT.labels(*labels, reason)
        PACE_STORE_DOWN.labels(*labels).set(0)


def code_of(status: int | None, kind: str | None) -> str:
    """A request's code label: its HTTP status, else what kind of failure it was (bounded)."""
    if status is not None:
        return str(status)
    if kind in ("timeout",):
        return "timeout"
    if kind in ("connection_dropped", "unreachable"):
        return "connection"
    return "other"
