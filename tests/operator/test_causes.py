"""The cause label of a try that measured nothing (operator/causes.py), read from the reasons the operator's own
pure decisions write (podview, overdue), so a reworded reason cannot silently fall into "other"."""

from __future__ import annotations

from pathlib import Path

from test_podview import NOW, disruption, pod, waiting
from tiny import body, flight, trials

from mcpfleet.operator import metrics
from mcpfleet.operator.causes import CAUSES, infra_cause, not_scored_cause
from mcpfleet.operator.overdue import overdue_try
from mcpfleet.operator.podview import failure_reason, seen


def test_each_reason_the_operator_writes_has_its_cause(tmp_path: Path) -> None:
    trial = trials(tmp_path, body(tmp_path))[0]
    inf = flight(trial)
    pulled = seen("MODIFIED", pod(phase="Pending", containerStatuses=waiting("ImagePullBackOff", "x")), inf, NOW)
    secret = seen("MODIFIED", pod(phase="Pending", containerStatuses=waiting("CreateContainerConfigError")), inf, NOW)
    deleted = seen("DELETED", pod(phase="Running"), inf, NOW)
    disrupted = seen("DELETED", pod(), flight(trial, disrupted="EvictionByEvictionAPI"), NOW)
    pending = overdue_try(flight(trial), NOW, run_seconds=600, pending_seconds=60, slack=30)
    lost = overdue_try(flight(trial, started=1000.0), NOW, run_seconds=600, pending_seconds=60, slack=30)
    failed = failure_reason(pod(phase="Failed", conditions=disruption()), None)
    runner = failure_reason(pod(phase="Failed"), {"failure": "infra_error", "error": "server did not start"})
    assert pending is not None and lost is not None
    got = {
        why: infra_cause(why or "")
        for why in (
            pulled.reason,
            secret.reason,
            deleted.reason,
            disrupted.reason,
            pending.reason,
            lost.reason,
            failed,
            runner,
        )
    }
    assert list(got.values()) == [
        "image_pull",
        "container_config",
        "pod_deleted",
        "disrupted",
        "pending_timeout",
        "node_lost",
        "pod_failed",
        "runner_error",
    ], got
    assert set(got.values()) <= set(CAUSES)


def test_unscored_records_are_their_own_cause_and_every_cause_starts_at_zero() -> None:
    assert [not_scored_cause(o) for o in ("provider_error", "config_error", "budget_exhausted")] == [
        "provider_error",
        "config_error",
        "budget_exhausted",
    ]
    assert not_scored_cause("infra_error", "something new") == "other"
    metrics.init_run("ns-causes", "r", [("m", "filesystem")])
    metrics.not_scored("ns-causes", "r", "m", "infra_error", "pod still Pending after 60 s")
    series = {
        (s.labels["outcome"], s.labels["cause"]): s.value
        for family in metrics.REGISTRY.collect()
        if family.name == "mcpfleet_not_scored_tries"
        for s in family.samples
        if s.name.endswith("_total") and (s.labels["namespace"], s.labels["run"]) == ("ns-causes", "r")
    }
    assert series[("infra_error", "pending_timeout")] == 1.0
    assert {c for _, c in series} == set(CAUSES) and sum(series.values()) == 1.0


def test_every_reason_the_pod_reader_gives_up_on_has_a_cause_of_its_own(tmp_path: Path) -> None:
    """ErrImageNeverPull (imagePullPolicy Never, image not on the node) was counted as image_pull but waited for
    until the pending timeout: one list now decides both."""
    from mcpfleet.operator.waiting import CONFIG_REASONS, IMAGE_REASONS, STUCK_REASONS

    inf = flight(trials(tmp_path, body(tmp_path))[0])
    causes = {}
    for reason in sorted(STUCK_REASONS):
        got = seen("MODIFIED", pod(phase="Pending", containerStatuses=waiting(reason, "x")), inf, NOW)
        assert got.reason, f"{reason}: the try was not given up at once"
        causes[reason] = infra_cause(got.reason)
    assert causes == {r: "image_pull" for r in IMAGE_REASONS} | {r: "container_config" for r in CONFIG_REASONS}
