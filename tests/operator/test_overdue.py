"""Deadlines (operator/overdue.py): which tries will not end by themselves, which draining pods are given up on, and
when a run is past its activeDeadlineSeconds or its ttlSecondsAfterFinished, decided from times alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny import body, flight, trials

from mcpfleet.operator.overdue import over_active_deadline, overdue_drains, overdue_try, past_ttl
from mcpfleet.runner.spec.trial import TrialSpec

RUN, PENDING, SLACK = 400.0, 600, 30.0  # created at 1000 (tiny.flight)


@pytest.fixture
def trial(tmp_path: Path) -> TrialSpec:
    return trials(tmp_path, body(tmp_path))[0]


def check(trial: TrialSpec, now: float, **fields: object) -> object:
    return overdue_try(flight(trial, **fields), now, run_seconds=RUN, pending_seconds=PENDING, slack=SLACK)


def test_a_try_in_time_is_not_overdue(trial: TrialSpec) -> None:
    assert check(trial, 1000.0 + PENDING) is None  # Pending, not past the limit yet
    assert check(trial, 5000.0, started=4700.0) is None  # running, within its deadline and grace
    assert check(trial, 1100.0, ending=1050.0, kill_by=1080.0) is None  # deleted, its node has the slack yet


def test_a_try_pending_too_long_is_ended_not_counted(trial: TrialSpec) -> None:
    due = overdue_try(flight(trial), 1000.0 + PENDING + 1, run_seconds=RUN, pending_seconds=PENDING, slack=SLACK)
    assert due is not None and not due.count and due.reason == "pod still Pending after 600 s"
    # Already being ended (its pod deleted): it waits for the pod to go, or for the kill time's slack.
    assert check(trial, 1000.0 + PENDING + 1, ending=1500.0, kill_by=1700.0) is None


def test_a_started_try_past_its_deadline_and_grace_is_counted(trial: TrialSpec) -> None:
    due = overdue_try(flight(trial, started=2000.0), 2401.0, run_seconds=RUN, pending_seconds=PENDING, slack=SLACK)
    assert due is not None and due.count and due.streak
    assert due.reason == "pod still not finished 400 s after it started (node lost, or stuck terminating)"
    why = "pod deleted before it finished"
    due = overdue_try(
        flight(trial, started=2000.0, reason=why), 2401.0, run_seconds=RUN, pending_seconds=PENDING, slack=SLACK
    )
    assert due is not None and due.reason.startswith(f"{why}; pod still not finished 400 s")


def test_a_deleted_try_whose_pod_never_goes_is_counted(trial: TrialSpec) -> None:
    fields = {"ending": 1050.0, "kill_by": 1080.0, "reason": "pod still Pending after 600 s"}
    due = overdue_try(flight(trial, **fields), 1111.0, run_seconds=RUN, pending_seconds=PENDING, slack=SLACK)
    assert due is not None and due.count and due.streak
    assert due.reason == "pod still Pending after 600 s; pod still terminating 61 s after its deletion (node lost?)"


@pytest.mark.parametrize("stopped", [{"suspended": True}, {"disrupted": "EvictionByEvictionAPI"}])
def test_a_try_kubernetes_or_a_suspend_stopped_does_not_count_towards_backoff_limit(
    trial: TrialSpec, stopped: dict[str, object]
) -> None:
    inf = flight(trial, ending=1050.0, kill_by=1080.0, reason="pod deleted", **stopped)
    due = overdue_try(inf, 1111.0, run_seconds=RUN, pending_seconds=PENDING, slack=SLACK)
    assert due is not None and due.count and not due.streak


def test_draining_pods_past_their_time_are_given_up() -> None:
    assert overdue_drains({"a": 100.0, "b": 200.0, "c": 150.0}, 150.0) == ["a"]


def test_the_active_deadline_counts_from_the_start() -> None:
    assert over_active_deadline(None, 0.0, 1e9) is None
    assert over_active_deadline(60, None, 1e9) is None  # not started (created suspended)
    assert over_active_deadline(60, 1000.0, 1060.0) is None
    assert over_active_deadline(60, 1000.0, 1060.5) == 60.5


def test_a_finished_run_expires_after_its_ttl() -> None:
    assert not past_ttl(None, 1000.0, 1e9)
    assert not past_ttl("60", 1000.0, 1e9)  # not an int: never
    assert not past_ttl(60, None, 1e9)  # not finished
    assert not past_ttl(60, 1000.0, 1059.9)
    assert past_ttl(60, 1000.0, 1060.0) and past_ttl(0, 1000.0, 1000.0)
