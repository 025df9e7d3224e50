"""Which of a run's records its plan counts (plan.json, else run.json's models and attempts): what summary.json,
``report``, ``export`` and ``view`` count. Apart from summary.py so that a reader of records imports no scoring."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcpfleet.runner.results.store import ResultStore

PLAN_FILE = "plan.json"  # the planned trials' ids and spec hashes, for readers without the task pack


def planned(store: ResultStore) -> dict[str, str] | None:
    """The run's planned trials (trial id -> spec hash), or None when plan.json is missing or damaged (older
    runs; an operator run before its first summary): readers then fall back to the models and attempts."""
    raw = store.read_json(PLAN_FILE)
    trials = raw.get("trials") if isinstance(raw, dict) else None
    if not isinstance(trials, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in trials.items()):
        return None
    return trials


def still_planned(
    store: ResultStore, models: set[str] | None = None, attempts: int | None = None
) -> Callable[[dict[str, Any]], bool]:
    """Which records the run plans now, as summary.json counts them: its planned trials (plan.json) at their
    spec; without plan.json, its models and attempts (run.json). Records of dropped tasks, models or attempts,
    and of an earlier spec, are left out. ``models``, ``attempts``: what to keep when neither file says."""
    plan = planned(store)
    if plan is not None:
        return lambda r: plan.get(r["trial_id"]) == r.get("spec_hash")
    run_json = store.read_json("run.json")  # damaged or foreign: its fields are ignored, never trusted
    evalrun = run_json.get("evalrun") if isinstance(run_json, dict) else None
    spec = evalrun.get("spec") if isinstance(evalrun, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    listed = spec.get("models")
    named = (
        {m["name"] for m in listed if isinstance(m, dict) and isinstance(m.get("name"), str)}
        if isinstance(listed, list)
        else set()
    )
    models = named or models
    given = spec.get("attempts")
    attempts = given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else attempts
    return lambda r: (
        (models is None or r.get("model") in models) and (attempts is None or int(r.get("attempt", 0)) <= attempts)
    )
