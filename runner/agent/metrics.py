"""Prometheus metrics of a running trial, served by the runner container for a PodMonitor.

Labels are bounded: namespace, run, model, service, tool, kind, outcome — never a trial id. ``namespace`` is the
trial pod's (``MCPFLEET_NAMESPACE``, set by the operator; ``local`` elsewhere), so two same-named runs in two
namespaces are two series, as the operator's are. The operator's metrics
(operator/metrics.py) are the source of truth for dashboards, since trial pods are short-lived; these
show what a trial is doing while it runs (turns, tool calls, tokens, LLM and tool latency).
"""

from __future__ import annotations

import os

from prometheus_client import Counter, Histogram, start_http_server

from mcpfleet.runner.llm.faults import KINDS as FAULT_KINDS
from mcpfleet.runner.llm.meters import REGISTRY  # one registry: the LLM requests' metrics are served with these
from mcpfleet.runner.llm.pace import LOCAL_NAMESPACE, NAMESPACE_ENV

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

TURNS = Counter(
    "mcpfleet_runner_turns_total",
    "Agent turns (LLM calls) made by trials in this process.",
    ["namespace", "run", "model", "service"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "mcpfleet_runner_tool_calls_total",
    "MCP tool calls by outcome (ok, error, malformed).",
    ["namespace", "run", "model", "service", "tool", "outcome"],
    registry=REGISTRY,
)
TOKENS = Counter(
    "mcpfleet_runner_tokens_total",
    "LLM tokens by kind (input, output, reasoning, cached).",
    ["namespace", "run", "model", "service", "kind"],
    registry=REGISTRY,
)
LLM_RETRIES = Counter(
    "mcpfleet_runner_llm_retries_total",
    "LLM calls retried after 429/5xx/timeouts.",
    ["namespace", "run", "model"],
    registry=REGISTRY,
)
LLM_FAULTS = Counter(
    "mcpfleet_runner_llm_faults_total",
    "Failed LLM attempts by kind of fault (rate_limit, server_error, timeout, unusable_reply, auth, ...).",
    ["namespace", "run", "model", "kind"],
    registry=REGISTRY,
)
LLM_LATENCY = Histogram(
    "mcpfleet_runner_llm_request_duration_seconds",
    "Wall time of one LLM call, retries included.",
    ["namespace", "run", "model"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
TOOL_LATENCY = Histogram(
    "mcpfleet_runner_tool_call_duration_seconds",
    "Wall time of one MCP tool call.",
    ["namespace", "run", "service", "tool"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)


def serve(port: int, addr: str = "0.0.0.0") -> None:  # noqa: S104 - a pod's metrics port
    start_http_server(port, addr=addr, registry=REGISTRY)


class TrialMetrics:
    """Records one trial's activity; a no-op unless enabled, so local runs pay nothing."""

    def __init__(self, run: str, model: str, service: str, enabled: bool = True, namespace: str | None = None):
        self.ns = namespace or os.environ.get(NAMESPACE_ENV) or LOCAL_NAMESPACE
        self.run, self.model, self.service, self.enabled = run, model, service, enabled
        ns = self.ns
        if enabled:  # series at zero from the start, so the first increment is visible to rate()
            TURNS.labels(ns, run, model, service)
            LLM_RETRIES.labels(ns, run, model)
            for fault in FAULT_KINDS:
                LLM_FAULTS.labels(ns, run, model, fault)
            for kind in ("input", "output", "reasoning", "cached"):
                TOKENS.labels(ns, run, model, service, kind)

    def tools(self, names: list[str]) -> None:
        """Create each listed tool's ok/error series at zero (called once the server's tools are known)."""
        if not self.enabled:
            return
        for name in names:
            for outcome in ("ok", "error"):
                TOOL_CALLS.labels(self.ns, self.run, self.model, self.service, name, outcome)

    def turn(self, seconds: float, retries: int, tokens: dict[str, int]) -> None:
        if not self.enabled:
            return
        TURNS.labels(self.ns, self.run, self.model, self.service).inc()
        LLM_LATENCY.labels(self.ns, self.run, self.model).observe(seconds)
        if retries:
            LLM_RETRIES.labels(self.ns, self.run, self.model).inc(retries)
        for kind, n in tokens.items():
            if n:
                TOKENS.labels(self.ns, self.run, self.model, self.service, kind).inc(n)

    def llm_fault(self, kind: str) -> None:
        """One failed LLM attempt (retried or final), by the kind faults.classify gave it."""
        if self.enabled:
            LLM_FAULTS.labels(self.ns, self.run, self.model, kind).inc()

    def tool_call(self, tool: str, seconds: float, is_error: bool, malformed: bool) -> None:
        if not self.enabled:
            return
        outcome = "malformed" if malformed else "error" if is_error else "ok"
        # Tool names come from the MCP server's list; a malformed call may name anything: bound it.
        name = tool if not malformed else "invalid"
        TOOL_CALLS.labels(self.ns, self.run, self.model, self.service, name, outcome).inc()
        TOOL_LATENCY.labels(self.ns, self.run, self.service, name).observe(seconds)
