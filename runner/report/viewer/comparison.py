"""Two or more runs, or server variants, aligned by task and attempt (pure).

A side is a run's trials, or one server variant's trials of a run. The first side is the baseline; each other
side is compared with it on the trials both scored for the same model, service, task and attempt (a variant's
trials are aligned without their variant): the trials that flipped each way, per model the pass@1 difference
with report/compare.py's paired bootstrap interval and McNemar's test, and the mean token and cost deltas. The
warnings say when the sides' task sets, attempts or harnesses differ: their scores then do not measure the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcpfleet.runner.report.compare import compare
from mcpfleet.runner.report.viewer.index import NOT_SCORED, PASSED, TrialRow

Key = tuple[str, str, str, str, int]  # model, service, variant ("" for a variant side), task id, attempt


@dataclass
class Side:
    label: str
    rows: list[TrialRow]
    by_variant: bool = False  # one variant's trials: aligned without the variant


@dataclass
class Flip:
    key: Key
    before: TrialRow
    after: TrialRow


@dataclass
class Versus:
    baseline: str
    other: str
    pairs: int
    up: list[Flip] = field(default_factory=list)  # failed on the baseline, passed here
    down: list[Flip] = field(default_factory=list)
    models: list[dict[str, Any]] = field(default_factory=list)  # compare.compare's rows, plus delta_cost_usd


@dataclass
class Comparison:
    sides: list[Side]
    versus: list[Versus]
    warnings: list[str]


def key_of(row: TrialRow, by_variant: bool) -> Key:
    return (row.model, row.service, "" if by_variant else row.variant, row.task_id, row.attempt)


def _scored(side: Side) -> dict[Key, TrialRow]:
    return {key_of(r, side.by_variant): r for r in side.rows if r.outcome != NOT_SCORED}


def _record(row: TrialRow, side: str, key: Key) -> dict[str, Any]:
    service = f"{key[1]}@{key[2]}" if key[2] else key[1]
    totals = {"input_tokens": row.tokens, "output_tokens": 0, "turns": row.turns, "tool_calls": row.tool_calls}
    return {
        "model": row.model,
        "service": service,
        "variant": side,
        "task_id": row.task_id,
        "attempt": row.attempt,
        "passed": row.outcome == PASSED,
        "failure": row.failure or None,
        "totals": totals,
    }


def warnings(sides: list[Side]) -> list[str]:
    out = []
    tasks = [{(r.service, r.task_id) for r in s.rows} for s in sides]
    attempts = [max((r.attempt for r in s.rows), default=0) for s in sides]
    harness = [sorted({r.harness for r in s.rows if r.harness}) for s in sides]
    base = sides[0].label
    for s, t, a, h in zip(sides[1:], tasks[1:], attempts[1:], harness[1:], strict=True):
        if t != tasks[0]:
            only_b, only_s = len(tasks[0] - t), len(t - tasks[0])
            out.append(
                f"task sets differ: {only_b} task(s) only in {base}, {only_s} only in {s.label}; "
                "compared on the tasks both have"
            )
        if a != attempts[0]:
            out.append(f"attempts differ: {base} has {attempts[0]}, {s.label} has {a}")
        if h != harness[0]:
            out.append(
                f"harness versions differ: {base}: {', '.join(harness[0]) or '?'}; {s.label}: {', '.join(h) or '?'}"
            )
    return out


def _mean_cost_delta(pairs: list[tuple[TrialRow, TrialRow]]) -> float | None:
    costs = [(b.cost_usd, a.cost_usd) for b, a in pairs if b.cost_usd is not None and a.cost_usd is not None]
    return sum(a - b for b, a in costs) / len(costs) if costs else None


def versus(base: Side, other: Side) -> Versus:
    before, after = _scored(base), _scored(other)
    shared = sorted(set(before) & set(after))
    out = Versus(base.label, other.label, len(shared))
    records = []
    for k in shared:
        b, a = before[k], after[k]
        if (b.outcome == PASSED) != (a.outcome == PASSED):
            (out.up if a.outcome == PASSED else out.down).append(Flip(k, b, a))
        records += [_record(b, "base", k), _record(a, "other", k)]
    services = sorted({r["service"] for r in records})
    for service in services:
        for row in compare(records, service, "base", "other"):
            pairs = [(before[k], after[k]) for k in shared if (f"{k[1]}@{k[2]}" if k[2] else k[1]) == service]
            row["delta_cost_usd"] = _mean_cost_delta([(b, a) for b, a in pairs if b.model == row["model"]])
            out.models.append(row)
    return out


def comparison(sides: list[Side]) -> Comparison:
    if len(sides) < 2:
        raise ValueError("a comparison needs two sides or more: give side= twice (a run, or run:variant)")
    return Comparison(sides, [versus(sides[0], s) for s in sides[1:]], warnings(sides))
