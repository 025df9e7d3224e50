"""The outcome verdict (operator/verdict.py): which stored record is a try's outcome and whether the try counts, on
plain records, as the reconciler asks it for every finished try."""

from __future__ import annotations

from typing import Any

import pytest

from mcpfleet.operator.verdict import DISRUPTION_LIMIT, Kind, backoff_budget, judge, this_try
from mcpfleet.runner.results.outcome import CONFIG_ERROR, INFRA_ERROR, PROVIDER_ERROR, TIMEOUT

HASH = "h1"


def rec(failure: str | None = None, tries: int | None = None, spec_hash: str = HASH, **fields: Any) -> dict[str, Any]:
    return {"trial_id": "t", "spec_hash": spec_hash, "failure": failure, "infra_attempts": tries, **fields}


def test_a_scored_record_is_the_outcome_whichever_try_stored_it() -> None:
    for failure in (None, TIMEOUT):  # passed, or a model's failure: scored either way
        r = rec(failure, tries=None)
        v = judge(r, HASH, tries=3)
        assert v.kind is Kind.RECORDED and v.stored is r and v.record is r and not v.stops_model


def test_an_unscored_record_of_an_earlier_try_is_no_outcome_of_this_one() -> None:
    """A provider error stored by try 1 is still in the store when try 2's pod is gone without a record: try 2 is
    an infrastructure failure, not a second provider error."""
    earlier = rec(PROVIDER_ERROR, tries=1)
    assert this_try(earlier, 2) is None
    v = judge(earlier, HASH, tries=2)
    assert v.kind is Kind.INFRA and v.record is None and v.stored is None
    assert this_try(earlier, 1) is earlier


def test_a_provider_error_of_this_try_is_retried_as_provider() -> None:
    r = rec(PROVIDER_ERROR, tries=2)
    v = judge(r, HASH, tries=2)
    assert v.kind is Kind.PROVIDER and v.stored is r


def test_a_config_error_is_recorded_and_stops_its_model() -> None:
    v = judge(rec(CONFIG_ERROR, tries=1), HASH, tries=1)
    assert v.kind is Kind.RECORDED and v.stops_model


def test_a_record_of_another_spec_or_the_operators_own_is_no_outcome() -> None:
    """Both are infrastructure failures, but the try's record is kept to say why (the runner's own infra report)."""
    other = rec(None, spec_hash="old")
    v = judge(other, HASH, tries=1)
    assert v.kind is Kind.INFRA and v.stored is None and v.record is other
    mine = rec(INFRA_ERROR, tries=1, error="the runner could not start its MCP server")
    v = judge(mine, HASH, tries=1)
    assert v.kind is Kind.INFRA and v.stored is None and v.record is mine


def test_no_record_is_an_infrastructure_failure() -> None:
    v = judge(None, HASH, tries=1)
    assert v.kind is Kind.INFRA and v.record is None and not v.disrupted


@pytest.mark.parametrize("disrupted", [None, "EvictionByEvictionAPI"])
def test_a_try_a_suspend_stopped_does_not_count_unless_it_stored_a_record(disrupted: str | None) -> None:
    v = judge(None, HASH, tries=1, suspended=True, disrupted=disrupted, disruptions=DISRUPTION_LIMIT)
    assert v.kind is Kind.UNCOUNTED and v.in_a_row is None  # a suspend, not a disruption, even past the limit
    r = rec(None)
    assert judge(r, HASH, tries=1, suspended=True).kind is Kind.RECORDED


def test_disruptions_do_not_count_up_to_the_limit_in_a_row_then_one_does() -> None:
    for before in range(DISRUPTION_LIMIT):
        v = judge(None, HASH, tries=1, disrupted="PreemptionByScheduler", disruptions=before)
        assert v.kind is Kind.UNCOUNTED and v.in_a_row == before + 1
    v = judge(None, HASH, tries=1, disrupted="PreemptionByScheduler", disruptions=DISRUPTION_LIMIT)
    assert v.kind is Kind.INFRA and v.disrupted and v.in_a_row is None


def test_a_disrupted_try_that_stored_its_record_has_that_outcome() -> None:
    r = rec(None)
    v = judge(r, HASH, tries=1, disrupted="EvictionByEvictionAPI", disruptions=2)
    assert v.kind is Kind.RECORDED and v.stored is r and v.in_a_row is None


def test_the_backoff_budget_is_the_spec_s_or_twice_the_concurrency_and_at_least_six() -> None:
    assert backoff_budget(0, 100) == 0
    assert backoff_budget(3, 100) == 3
    assert backoff_budget(None, 2) == 6
    assert backoff_budget(None, 10) == 20
