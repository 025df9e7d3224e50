"""The operator's Prometheus metrics: the source of truth for dashboards (trial pods are short-lived).

Names follow Prometheus conventions (``mcpfleet_`` prefix, base units, ``_total`` on counters); labels are
bounded to namespace, run, model, service, outcome/category, phase, verb/resource — never a trial id. Counters move
only on outcomes observed live; after a restart, gauges are rebuilt from the stored records while counters
start again from zero, which ``rate()``/``increase()`` read as the reset they are.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from mcpfleet.runner.toolcalls.models import CALL_CLASSES

REGISTRY = CollectorRegistry(auto_describe=True)
PHASES = ("state", "mcp_start", "agent", "verify", "record")
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

TRIALS = Counter(
    "mcpfleet_trials_total",
    "Finished trials by outcome (passed, failed; infra_error, provider_error, config_error: not scored) and category.",
    ["namespace", "run", "model", "service", "outcome", "category"],
    registry=REGISTRY,
)
IN_FLIGHT = Gauge(
    "mcpfleet_trials_in_flight", "Trial pods in flight.", ["namespace", "run", "model"], registry=REGISTRY
)
PENDING = Gauge("mcpfleet_trials_pending", "Trials not started yet.", ["namespace", "run"], registry=REGISTRY)
WAITING_ADMISSION = Gauge(
    "mcpfleet_trials_waiting_admission",
    "Trial pods created and waiting for admission (a scheduling gate: Kueue's queue and quota).",
    ["namespace", "run"],
    registry=REGISTRY,
)
RUN_TRIALS = Gauge(
    "mcpfleet_run_trials",
    "Trials of a run by state (total, finished, passed).",
    ["namespace", "run", "state"],
    registry=REGISTRY,
)
PASS_RATE = Gauge(
    "mcpfleet_pass_rate",
    "pass@1 so far per model and service.",
    ["namespace", "run", "model", "service"],
    registry=REGISTRY,
)
PHASE_SECONDS = Histogram(
    "mcpfleet_trial_phase_duration_seconds",
    "Trial time by phase: state, mcp_start, agent, verify, record, and pod scheduling.",
    ["namespace", "run", "model", "service", "phase"],
    buckets=DURATION_BUCKETS,
    registry=REGISTRY,
)
TRIAL_SECONDS = Histogram(
    "mcpfleet_trial_duration_seconds",
    "Whole trial, from the record.",
    ["namespace", "run", "model", "service"],
    buckets=DURATION_BUCKETS,
    registry=REGISTRY,
)
INFRA_RETRIES = Counter(
    "mcpfleet_infra_retries_total",
    "Trials retried after an infrastructure or provider failure.",
    ["namespace", "run", "model"],
    registry=REGISTRY,
)
DISRUPTIONS = Counter(
    "mcpfleet_trial_disruptions_total",
    "Trial pods disrupted by Kubernetes (DisruptionTarget: a drain, preemption, taint or kubelet eviction, PodGC) "
    "before their trial stored a record; run again as the same try unless disrupted too often in a row.",
    ["namespace", "run", "model"],
    registry=REGISTRY,
)
TOKENS = Counter(
    "mcpfleet_tokens_total",
    "LLM tokens of finished trials by kind (input, output, reasoning).",
    ["namespace", "run", "model", "service", "kind"],
    registry=REGISTRY,
)
COST = Counter(
    "mcpfleet_cost_usd_total",
    "LLM cost of finished trials in US dollars (known prices only).",
    ["namespace", "run", "model", "service"],
    registry=REGISTRY,
)
TOOL_CALL_CLASSES = Counter(
    "mcpfleet_tool_call_classes_total",
    "Tool calls of finished trials by class: the checker's (incorrect_tool, incorrect_parameter_names, "
    "incorrect_parameter_values, schema_valid) or, where a judge is named, its verdict on valid calls.",
    ["namespace", "run", "model", "service", "class"],
    registry=REGISTRY,
)
NOT_SCORED = Counter(
    "mcpfleet_not_scored_tries_total",
    "Tries that measured nothing, retried or final, by outcome (infra_error, provider_error, config_error, "
    "budget_exhausted) and cause (operator/causes.py: unschedulable, image_pull, container_config, oom_killed, ...).",
    ["namespace", "run", "model", "outcome", "cause"],
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "mcpfleet_reconcile_errors_total", "Errors in a run's reconcile loop.", ["namespace", "run"], registry=REGISTRY
)
API_REQUESTS = Counter(
    "mcpfleet_api_requests_total",
    "Kubernetes API requests made by the operator itself.",
    ["verb", "resource", "code"],
    registry=REGISTRY,
)


def serve(port: int, addr: str = "0.0.0.0") -> Any:  # noqa: S104 - the operator's metrics port
    """Serve /metrics; returns (server, thread) so the operator can stop it on cleanup."""
    return start_http_server(port, addr=addr, registry=REGISTRY)


def init_run(ns: str, run: str, model_services: list[tuple[str, str]]) -> None:
    """Create a run's counter and histogram series at zero, so rate()/increase() see the first trial of each
    kind (a labelled series that first appears at 1 hides that step: trials that all finish between two scrapes
    left the duration quantiles NaN) and dashboards show 0, not "no data"."""
    from mcpfleet.runner.results.outcome import CATEGORIES

    RECONCILE_ERRORS.labels(ns, run)
    from mcpfleet.operator.causes import INFRA_CAUSES, RECORD_CAUSES

    for model in {m for m, _ in model_services}:
        INFRA_RETRIES.labels(ns, run, model)
        DISRUPTIONS.labels(ns, run, model)
        for cause in INFRA_CAUSES:
            NOT_SCORED.labels(ns, run, model, "infra_error", cause)
        for outcome in RECORD_CAUSES:
            NOT_SCORED.labels(ns, run, model, outcome, outcome)
    for model, service in model_services:
        TRIALS.labels(ns, run, model, service, "passed", "none")
        for category in CATEGORIES:
            TRIALS.labels(ns, run, model, service, outcome_of(category), category)
        for kind in ("input", "output", "reasoning"):
            TOKENS.labels(ns, run, model, service, kind)
        COST.labels(ns, run, model, service)
        TRIAL_SECONDS.labels(ns, run, model, service)
        for phase in (*PHASES, "scheduling"):
            PHASE_SECONDS.labels(ns, run, model, service, phase)
        for cls in CALL_CLASSES:
            TOOL_CALL_CLASSES.labels(ns, run, model, service, cls)


def observe_record(ns: str, run: str, record: dict[str, Any], scheduling_s: float | None = None) -> None:
    """Count one finished trial from its full record (tokens, cost and phase times live there)."""
    from mcpfleet.runner.results.records import service_label

    model, service = str(record.get("model")), service_label(record)  # with its server variant, if any
    category = record.get("failure") or "none"
    outcome = "passed" if record.get("passed") else outcome_of(category)
    TRIALS.labels(ns, run, model, service, outcome, category).inc()
    totals = record.get("totals") or {}
    for kind, key in (("input", "input_tokens"), ("output", "output_tokens"), ("reasoning", "reasoning_tokens")):
        if totals.get(key):
            TOKENS.labels(ns, run, model, service, kind).inc(totals[key])
    # Unknown prices add 0: the series exists (dashboards show 0, not "no data"); its help says "known prices".
    COST.labels(ns, run, model, service).inc(float(totals.get("cost_usd") or 0.0))
    for cls, n in (totals.get("call_classes") or {}).items():
        if isinstance(n, int) and n > 0:  # a record's keys are bounded to the known classes, plus "other"
            TOOL_CALL_CLASSES.labels(ns, run, model, service, cls if cls in CALL_CLASSES else "other").inc(n)
    timings = record.get("timings") or {}
    if timings.get("total"):
        TRIAL_SECONDS.labels(ns, run, model, service).observe(timings["total"])
        for phase in PHASES:
            PHASE_SECONDS.labels(ns, run, model, service, phase).observe(float(timings.get(phase) or 0.0))
    if scheduling_s is not None:
        PHASE_SECONDS.labels(ns, run, model, service, "scheduling").observe(max(0.0, scheduling_s))


def not_scored(ns: str, run: str, model: str, outcome: str, reason: str = "") -> None:
    """Count one try that measured nothing (``reason``: the operator's, for an infrastructure error)."""
    from mcpfleet.operator.causes import not_scored_cause

    NOT_SCORED.labels(ns, run, model, outcome, not_scored_cause(outcome, reason)).inc()


def outcome_of(category: str) -> str:
    """The outcome label of a failure category: "failed" for the model's failures; an outcome that measured
    nothing of the model (infra_error, provider_error, config_error) is its own outcome, counted apart."""
    from mcpfleet.runner.results.outcome import is_scored

    return "failed" if is_scored(category) else category


def forget_run(ns: str, run: str) -> None:
    """Drop a finished or deleted run's gauges, so dashboards do not show stale in-flight numbers (only its
    own: a run of the same name in another namespace keeps its series)."""
    for gauge in (IN_FLIGHT, PENDING, WAITING_ADMISSION, RUN_TRIALS, PASS_RATE):
        for labels in list(gauge._metrics):  # noqa: SLF001 - prometheus_client has no public label listing
            if labels[:2] == (ns, run):
                gauge.remove(*labels)
