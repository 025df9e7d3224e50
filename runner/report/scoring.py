"""Aggregates from trial results: pass@1 (mean and std over attempts), pass@k, pass^k, costs, failures.

Definitions follow the MCPMark paper: pass@1 is the mean over attempts of each attempt's success rate
across tasks (std is the population std over attempts); pass@k counts a task if any of its k attempts
passed, pass^k if all did. Besides those plain counts, the unbiased estimators (Chen et al. 2021 for
pass@k; C(c,k)/C(n,k) for pass^k) are given for every k up to the attempts actually recorded.

Only what the model did is scored: trials that measured nothing of it (``outcome.NOT_SCORED``: infra,
provider and configuration errors) are left out of every pass rate and of the per-trial averages, and
counted apart in ``not_scored``; ``failures`` holds the model's failures only. Token and cost totals cover
every recorded trial (they were spent).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from math import comb
from typing import Any

from pydantic import BaseModel, ConfigDict

from mcpfleet.runner.results.outcome import is_scored

ALL = "all"


def pass_at_k_unbiased(n: int, c: int, k: int) -> float:
    """Probability that at least one of k draws without replacement from n attempts (c passed) passes."""
    if k > n:
        raise ValueError(f"k={k} exceeds the {n} attempts recorded")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k_unbiased(n: int, c: int, k: int) -> float:
    """Probability that all of k draws without replacement from n attempts (c passed) pass."""
    if k > n:
        raise ValueError(f"k={k} exceeds the {n} attempts recorded")
    return comb(c, k) / comb(n, k)


class ScoreRow(BaseModel):
    """One row of ``summarize``: the shape summary.json's rows are written in, and checked against when read back
    (the report: summary.json is a file anyone may edit). Fields older summaries lack have defaults."""

    model_config = ConfigDict(extra="allow", strict=True)
    model: str
    service: str
    variant: str | None = None  # the server variant (spec.servers) of a declared service's rows
    trials: int
    scored: int | None = None
    not_scored: dict[str, int] = {}
    tasks: int | None = None
    attempts: int
    passed: int | None = None
    pass_at_1: float | None
    pass_at_1_std: float | None
    pass_at_k: float | None
    pass_hat_k: float | None
    pass_at_k_unbiased: float | None = None
    pass_hat_k_unbiased: float | None = None
    pass_at_k_curve: dict[str, float] = {}
    pass_hat_k_curve: dict[str, float] = {}
    tasks_with_all_attempts: int | None = None
    avg_turns: float | None = None
    avg_tool_calls: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    avg_tokens: float | None = None
    cost_usd: float | None = None
    avg_cost_usd: float | None = None
    avg_agent_seconds: float | None = None
    failures: dict[str, int] = {}
    call_classes: dict[str, int] = {}
    call_class_rates: dict[str, float] = {}


# What each ScoreRow field can hold when a run computed it: the types alone let an edited or damaged summary.json
# show NaN, Infinity or -500% as a pass rate (JSON readers parse NaN), so a summary read back is checked on these.
_RATES = ("pass_at_1", "pass_at_1_std", "pass_at_k", "pass_hat_k", "pass_at_k_unbiased", "pass_hat_k_unbiased")
_RATE_MAPS = ("pass_at_k_curve", "pass_hat_k_curve", "call_class_rates")
_COUNTS: tuple[str, ...] = ("trials", "scored", "tasks", "attempts", "passed", "tasks_with_all_attempts")
_COUNTS += ("input_tokens", "output_tokens", "reasoning_tokens")
_COUNT_MAPS = ("not_scored", "failures", "call_classes")
_AMOUNTS = ("avg_turns", "avg_tool_calls", "avg_tokens", "cost_usd", "avg_cost_usd", "avg_agent_seconds")


def value_problem(value: Any, *, most: float | None = None) -> str | None:
    """Why a number of a stored aggregate is impossible (not finite, negative, or above ``most``), else None."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None  # (the type is the schema's to check)
    if not math.isfinite(value):
        return f"{value} is not a finite number"
    if value < 0:
        return f"{value} is negative"
    if most is not None and value > most:
        return f"{value} is above {most:g}"
    return None


def row_problem(row: dict[str, Any]) -> str | None:
    """``<field>: <why>`` for the first number of a summary row (of ScoreRow's types) that no run computes: a rate
    outside [0, 1] or not finite, a negative count, cost or average; None when every number is possible."""
    checks: list[tuple[str, Any, float | None]] = [(k, row.get(k), 1.0) for k in _RATES]
    checks += [(k, row.get(k), None) for k in (*_COUNTS, *_AMOUNTS)]
    for key, most in [(k, 1.0) for k in _RATE_MAPS] + [(k, None) for k in _COUNT_MAPS]:
        got = row.get(key)
        checks += [(f"{key}.{name}", v, most) for name, v in (got.items() if isinstance(got, dict) else [])]
    for key, value, most in checks:
        if (why := value_problem(value, most=most)) is not None:
            return f"{key}: {why}"
    return None


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def score_group(results: list[dict[str, Any]], attempts: int) -> dict[str, Any]:
    """Aggregate one (model, service) group of trial results."""
    by_task: dict[str, dict[int, bool]] = defaultdict(dict)
    by_attempt: dict[int, list[bool]] = defaultdict(list)
    failures: dict[str, int] = defaultdict(int)
    not_scored: dict[str, int] = defaultdict(int)
    scored: list[dict[str, Any]] = []
    for r in results:
        if not is_scored(r.get("failure")):
            not_scored[r["failure"]] += 1
            continue
        scored.append(r)
        by_task[r["task_id"]][r["attempt"]] = bool(r["passed"])
        by_attempt[r["attempt"]].append(bool(r["passed"]))
        if not r["passed"]:
            failures[r.get("failure") or "verifier_failed"] += 1
    rates = [sum(v) / len(v) for _, v in sorted(by_attempt.items())]
    complete = [t for t, runs in by_task.items() if len(runs) >= attempts]
    any_k = [any(by_task[t].values()) for t in complete]
    all_k = [all(by_task[t].values()) for t in complete]
    curve_at: dict[str, float] = {}
    curve_hat: dict[str, float] = {}
    for k in range(1, attempts + 1):
        eligible = [runs for runs in by_task.values() if len(runs) >= k]
        if eligible:
            curve_at[str(k)] = _mean([pass_at_k_unbiased(len(r), sum(r.values()), k) for r in eligible]) or 0.0
            curve_hat[str(k)] = _mean([pass_hat_k_unbiased(len(r), sum(r.values()), k) for r in eligible]) or 0.0

    def total(key: str, rows: list[dict[str, Any]] = results) -> float:
        return sum(float((r.get("totals") or {}).get(key) or 0) for r in rows)

    costs = [(r.get("totals") or {}).get("cost_usd") for r in results]
    known_costs = [c for c in costs if c is not None]
    n = len(scored)
    return {
        "trials": len(results),
        "scored": n,
        "not_scored": dict(sorted(not_scored.items())),
        "tasks": len(by_task),
        "attempts": attempts,
        "passed": sum(1 for r in scored if r["passed"]),
        "pass_at_1": _mean(rates),
        "pass_at_1_std": statistics.pstdev(rates) if len(rates) > 1 else (0.0 if rates else None),
        "pass_at_k": _mean([float(x) for x in any_k]),
        "pass_hat_k": _mean([float(x) for x in all_k]),
        "pass_at_k_unbiased": curve_at.get(str(attempts)),
        "pass_hat_k_unbiased": curve_hat.get(str(attempts)),
        "pass_at_k_curve": curve_at,
        "pass_hat_k_curve": curve_hat,
        "tasks_with_all_attempts": len(complete),
        "avg_turns": total("turns", scored) / n if n else None,
        "avg_tool_calls": total("tool_calls", scored) / n if n else None,
        "input_tokens": int(total("input_tokens")),
        "output_tokens": int(total("output_tokens")),
        "reasoning_tokens": int(total("reasoning_tokens")),
        "avg_tokens": (total("input_tokens", scored) + total("output_tokens", scored)) / n if n else None,
        "cost_usd": sum(known_costs) if known_costs else None,
        "avg_cost_usd": sum(known_costs) / len(known_costs) if known_costs else None,
        "avg_agent_seconds": _mean([float((r.get("timings") or {}).get("agent") or 0) for r in scored]),
        "failures": dict(sorted(failures.items())),
        # The agents' tool calls by class (call_classes.py), over scored trials: counts and shares of all calls.
        "call_classes": (classes := _call_classes(scored)),
        "call_class_rates": {c: n / sum(classes.values()) for c, n in classes.items()} if classes else {},
    }


def _call_classes(results: list[dict[str, Any]]) -> dict[str, int]:
    from mcpfleet.runner.toolcalls.models import CALL_CLASSES

    c: dict[str, int] = defaultdict(int)
    for r in results:
        for cls, n in ((r.get("totals") or {}).get("call_classes") or {}).items():
            if isinstance(n, int):
                c[cls] += n
    order = {k: i for i, k in enumerate(CALL_CLASSES)}
    return {k: c[k] for k in sorted(c, key=lambda k: (order.get(k, len(order)), k)) if c[k]}


def summarize(results: Iterable[dict[str, Any]], attempts: int) -> list[dict[str, Any]]:
    """Rows per (model, service, server variant), plus one 'all' row per model when it has several."""
    groups: dict[tuple[str, str, str | None], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        variant = r.get("variant") if isinstance(r.get("variant"), str) else None
        groups[(r["model"], r["service"], variant)].append(r)
        groups[(r["model"], ALL, None)].append(r)
    rows = []
    models = sorted({m for m, _, _ in groups}, key=lambda m: m)
    for model in models:
        own = sorted(((s, v) for m, s, v in groups if m == model and s != ALL), key=lambda k: (k[0], k[1] or ""))
        keys = [(model, s, v) for s, v in own] + ([(model, ALL, None)] if len(own) > 1 else [])
        for key in keys:
            fields = {"model": key[0], "service": key[1], **({"variant": key[2]} if key[2] else {})}
            row = ScoreRow.model_validate({**fields, **score_group(groups[key], attempts)})
            rows.append(row.model_dump(exclude_none=False) if key[2] else _without_variant(row.model_dump()))
    return rows


def _without_variant(row: dict[str, Any]) -> dict[str, Any]:
    """A row of a service without variants, as summary.json wrote it before variants existed."""
    row.pop("variant", None)
    return row
