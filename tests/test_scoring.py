"""pass@1 / pass@k / pass^k against hand-computed cases (MCPMark's definitions and the unbiased ones)."""

from __future__ import annotations

import math

import pytest

from mcpfleet.runner.report.scoring import pass_at_k_unbiased, pass_hat_k_unbiased, score_group, summarize


def r(
    task: str,
    attempt: int,
    passed: bool,
    model: str = "m",
    service: str = "filesystem",
    failure: str | None = None,
    **totals: float,
) -> dict:
    return {
        "model": model,
        "service": service,
        "task_id": f"{service}/standard/c/{task}",
        "attempt": attempt,
        "passed": passed,
        "failure": None if passed else (failure or "verifier_failed"),
        "totals": {"turns": 10, "tool_calls": 8, "input_tokens": 100, "output_tokens": 10, **totals},
        "timings": {"agent": 1.0},
    }


# Task A passes attempts 1 and 3; task B never passes.
CASE = [
    r("A", 1, True),
    r("A", 2, False),
    r("A", 3, True),
    r("B", 1, False),
    r("B", 2, False, failure="turn_limit"),
    r("B", 3, False),
]


def test_pass_at_1_is_mean_of_per_attempt_rates_with_population_std() -> None:
    row = score_group(CASE, attempts=3)
    # per-attempt success rates: 1/2, 0, 1/2
    assert row["pass_at_1"] == pytest.approx(1 / 3)
    assert row["pass_at_1_std"] == pytest.approx(math.sqrt(1 / 18))


def test_plain_pass_at_k_and_pass_hat_k() -> None:
    row = score_group(CASE, attempts=3)
    assert row["pass_at_k"] == pytest.approx(0.5)  # A has a pass, B none
    assert row["pass_hat_k"] == pytest.approx(0.0)  # no task passed all three
    assert row["failures"] == {"turn_limit": 1, "verifier_failed": 3}
    assert row["trials"] == 6 and row["tasks"] == 2 and row["passed"] == 2


def test_unbiased_curve_by_hand() -> None:
    row = score_group(CASE, attempts=3)
    # k=1: mean(c/n) = (2/3 + 0) / 2
    assert row["pass_at_k_curve"]["1"] == pytest.approx(1 / 3)
    assert row["pass_hat_k_curve"]["1"] == pytest.approx(1 / 3)
    # k=2: A: 1 - C(1,2)/C(3,2) = 1, B: 0; pass^2: A: C(2,2)/C(3,2) = 1/3, B: 0
    assert row["pass_at_k_curve"]["2"] == pytest.approx(0.5)
    assert row["pass_hat_k_curve"]["2"] == pytest.approx(1 / 6)
    # k = n: the unbiased estimators equal the plain any/all counts
    assert row["pass_at_k_unbiased"] == pytest.approx(row["pass_at_k"])
    assert row["pass_hat_k_unbiased"] == pytest.approx(row["pass_hat_k"])


@pytest.mark.parametrize(
    ("n", "c", "k", "at", "hat"),
    [
        (5, 2, 2, 1 - 3 / 10, 1 / 10),
        (4, 0, 1, 0.0, 0.0),
        (4, 4, 4, 1.0, 1.0),
        (10, 3, 5, 1 - math.comb(7, 5) / math.comb(10, 5), 0.0),
        (6, 5, 3, 1.0, math.comb(5, 3) / math.comb(6, 3)),
    ],
)
def test_estimators(n: int, c: int, k: int, at: float, hat: float) -> None:
    assert pass_at_k_unbiased(n, c, k) == pytest.approx(at)
    assert pass_hat_k_unbiased(n, c, k) == pytest.approx(hat)


def test_k_beyond_recorded_attempts_is_an_error() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        pass_at_k_unbiased(2, 1, 3)


def test_incomplete_tasks_are_left_out_of_pass_at_k_but_not_pass_at_1() -> None:
    rows = CASE[:5]  # task B lacks its third attempt
    row = score_group(rows, attempts=3)
    assert row["tasks_with_all_attempts"] == 1
    assert row["pass_at_k"] == 1.0 and row["pass_hat_k"] == 0.0  # only task A counts
    assert row["pass_at_1"] == pytest.approx((0.5 + 0.0 + 1.0) / 3)


def test_single_attempt_has_zero_std() -> None:
    row = score_group([r("A", 1, True), r("B", 1, False)], attempts=1)
    assert row["pass_at_1"] == 0.5 and row["pass_at_1_std"] == 0.0
    assert row["pass_at_k"] == 0.5 and row["pass_hat_k"] == 0.5


def test_costs_tokens_and_averages() -> None:
    rows = [r("A", 1, True, cost_usd=0.25, turns=4), r("B", 1, False, cost_usd=0.75, turns=8)]
    row = score_group(rows, attempts=1)
    assert row["cost_usd"] == pytest.approx(1.0)
    assert row["avg_cost_usd"] == pytest.approx(0.5)
    assert row["avg_turns"] == pytest.approx(6.0)
    assert row["input_tokens"] == 200 and row["avg_tokens"] == pytest.approx(110.0)
    assert score_group([r("A", 1, True)], attempts=1)["cost_usd"] is None  # unknown price is not $0


def test_summarize_groups_by_model_and_service_with_all_row() -> None:
    results = CASE + [r("P", 1, True, service="postgres"), r("A", 1, False, model="n")]
    rows = summarize(results, attempts=3)
    keys = [(x["model"], x["service"]) for x in rows]
    assert keys == [("m", "filesystem"), ("m", "postgres"), ("m", "all"), ("n", "filesystem")]
    assert rows[2]["trials"] == 7


def test_outcomes_that_measured_nothing_are_not_scored_but_counted_apart() -> None:
    """A provider's bad day must not move pass@1: infra, provider and config errors leave every pass rate,
    every per-trial average and the failure breakdown, and are counted in not_scored."""
    faults = [
        r("A", 2, False, failure="provider_error", turns=1),
        r("B", 1, False, failure="config_error", turns=0),
        r("B", 3, False, failure="infra_error", turns=0),
    ]
    clean = [x for x in CASE if not (x["task_id"].endswith("/A") and x["attempt"] == 2)]
    clean = [x for x in clean if not (x["task_id"].endswith("/B") and x["attempt"] in (1, 3))]
    row = score_group(clean + faults, attempts=3)
    alone = score_group(clean, attempts=3)
    for key in ("pass_at_1", "pass_at_1_std", "pass_at_k", "pass_hat_k", "pass_at_k_curve", "avg_turns", "failures"):
        assert row[key] == alone[key], key
    # A: attempts 1 and 3 passed; B: attempt 2 failed (turn_limit) -> per-attempt rates 1, 0, 1
    assert row["pass_at_1"] == pytest.approx(2 / 3)
    assert row["failures"] == {"turn_limit": 1}
    assert row["not_scored"] == {"config_error": 1, "infra_error": 1, "provider_error": 1}
    assert (row["trials"], row["scored"], row["passed"]) == (6, 3, 2)
    assert row["input_tokens"] == 600  # spent by every recorded trial, scored or not
    assert row["tasks_with_all_attempts"] == 0  # no task has three scored attempts
    only_faults = score_group(faults, attempts=3)
    assert only_faults["pass_at_1"] is None and only_faults["scored"] == 0
