"""Finished trials are counted, not held (operator/finished.py): the run's figures come from tallies kept as trials
finish, equal to what a pass over every finished trial's outcome gives, and a finished trial costs a dict entry,
not a record."""

from __future__ import annotations

import collections
import gc
import random
import tracemalloc
from typing import Any

from mcpfleet.operator.finished import Finished
from mcpfleet.operator.runstate import compact
from mcpfleet.runner.results.outcome import CONFIG_ERROR, INFRA_ERROR, is_scored

OUTCOMES = [None, "verifier_failed", INFRA_ERROR, CONFIG_ERROR, "provider_error", "premature_stop"]


def record(i: int, rng: random.Random) -> dict[str, Any]:
    """A trial's record as the store gives it: a fresh parse, its strings its own."""
    failure = rng.choice(OUTCOMES)
    return {
        "trial_id": f"m{i % 3}.filesystem.standard.c.t{i}.{i % 4 + 1}",
        "passed": failure is None,
        "failure": failure,
        "model": "".join(["m", str(i % 3)]),
        "service": "".join(["file", "system"]),
        "attempt": i % 4 + 1,
        "variant": "v2" if i % 5 == 0 else None,
        "totals": {"cost_usd": 0.01 * (i % 7)},
        "messages": ["a long conversation"] * 20,
    }


def by_hand(outcomes: list[dict[str, Any]]) -> tuple[collections.Counter[Any], dict[Any, list[bool]], float]:
    failures = collections.Counter(d["failure"] for d in outcomes)
    rates: dict[Any, list[bool]] = collections.defaultdict(list)
    for d in outcomes:
        if is_scored(d["failure"]):
            rates[(d["model"], d["service"], d.get("variant"), d["attempt"])].append(d["passed"])
    return failures, rates, sum(d["cost"] or 0 for d in outcomes)


def test_tallies_equal_a_pass_over_every_outcome_and_resuming_removes_exactly_the_resumed() -> None:
    rng = random.Random(5)
    fin, kept = Finished(), {}
    for i in range(2000):
        rec = record(i, rng)
        fin[rec["trial_id"]] = kept[rec["trial_id"]] = compact(rec)
    rec = record(7, rng)  # a trial's outcome replaced: counted once
    fin[rec["trial_id"]] = kept[rec["trial_id"]] = compact(rec)
    for tid in [t for t, d in kept.items() if d["failure"] == CONFIG_ERROR]:  # a stopped model resumed
        del fin[tid], kept[tid]
    failures, rates, cost = by_hand(list(kept.values()))
    tallied: collections.Counter[Any] = collections.Counter()
    cells: dict[Any, list[int]] = collections.defaultdict(lambda: [0, 0])
    for (passed, failure, model, service, attempt, variant), n in fin.counted():
        tallied[failure] += n
        if is_scored(failure):
            cells[(model, service, variant, attempt)][0] += n
            cells[(model, service, variant, attempt)][1] += n * passed
    assert tallied == failures and failures[CONFIG_ERROR] == 0 and len(fin) == len(kept)
    assert {k: (len(v), sum(v)) for k, v in rates.items()} == {k: tuple(v) for k, v in cells.items()}
    usd, priced = fin.spend()
    assert abs(usd - cost) < 1e-9 and priced == sum(1 for d in kept.values() if d["cost"])
    tid = next(iter(kept))
    assert {k: v for k, v in fin[tid].items() if k != "cost"} == {k: v for k, v in kept[tid].items() if k != "cost"}
    fin.keep(list(kept)[:10])
    assert len(fin) == 10 and sum(n for _, n in fin.counted()) == 10


def test_a_finished_trial_costs_a_dict_entry_not_its_record() -> None:
    """20,000 finished trials, each from a freshly parsed record: what the tally holds is under 150 bytes a trial
    (the compact dict per trial it replaced held its own strings: ~600)."""
    rng = random.Random(1)
    records = [record(i, rng) for i in range(20_000)]
    ids = [r["trial_id"] for r in records]  # the plan holds the ids already
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fin = Finished()
        for r in records:
            fin[r["trial_id"]] = compact(r)
        del r
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(fin) == len(ids) and held / len(ids) < 150, f"{held / len(ids):.0f} bytes per finished trial"
