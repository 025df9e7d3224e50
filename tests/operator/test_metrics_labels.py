"""Operator metrics are labelled by namespace as well as run: same-named runs in two namespaces are two series."""

from __future__ import annotations

from prometheus_client import Gauge, generate_latest

from mcpfleet.operator import metrics


def series(gauge: Gauge) -> set[tuple[str, ...]]:
    return {tuple(k) for k in gauge._metrics}  # noqa: SLF001 - prometheus_client has no public label listing


def test_forgetting_a_run_keeps_a_same_named_run_of_another_namespace() -> None:
    for ns in ("team-a", "team-b"):
        metrics.init_run(ns, "sweep", [("gpt", "filesystem")])
        metrics.PENDING.labels(ns, "sweep").set(3)
        metrics.IN_FLIGHT.labels(ns, "sweep", "gpt").set(2)
        metrics.observe_record(ns, "sweep", {"model": "gpt", "service": "filesystem", "passed": True})
    metrics.forget_run("team-a", "sweep")
    assert ("team-a", "sweep") not in series(metrics.PENDING)
    assert ("team-b", "sweep") in series(metrics.PENDING) and ("team-b", "sweep", "gpt") in series(metrics.IN_FLIGHT)
    assert metrics.PENDING.labels("team-b", "sweep")._value.get() == 3  # noqa: SLF001
    text = generate_latest(metrics.REGISTRY).decode()
    assert 'mcpfleet_trials_total{category="none",model="gpt",namespace="team-b",outcome="passed",run="sweep"' in text
    assert 'mcpfleet_trials_total{category="none",model="gpt",namespace="team-a",outcome="passed",run="sweep"' in text
    metrics.forget_run("team-b", "sweep")


def test_a_new_run_has_its_duration_histograms_at_zero_before_any_trial_finishes() -> None:
    """rate() over a histogram series that first appears with its final count is 0 and the quantile NaN: the
    dashboard's duration panels stayed empty when every trial finished between two scrapes."""
    metrics.init_run("ns-hist", "r", [("m", "filesystem")])
    lines = set(generate_latest(metrics.REGISTRY).decode().splitlines())
    labels = 'model="m",namespace="ns-hist",run="r",service="filesystem"'
    assert f"mcpfleet_trial_duration_seconds_count{{{labels}}} 0.0" in lines
    for phase in (*metrics.PHASES, "scheduling"):
        phased = f'model="m",namespace="ns-hist",phase="{phase}",run="r",service="filesystem"'
        assert f"mcpfleet_trial_phase_duration_seconds_count{{{phased}}} 0.0" in lines
