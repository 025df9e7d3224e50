"""A run's trials as rows to list, filter and group (pure): what result.json says of each, without its turns.

A trial id is ``<model>.<service>[@<variant>].<difficulty>.<category>.<task>.<attempt>``; the record's
``task_id`` (``<service>/<difficulty>/<category>/<task>``) gives the task's parts. Filters are the query string's
keys (several values of one key: any of them), so a filtered list is a URL that can be shared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from mcpfleet.runner.results.outcome import is_scored

PASSED = "passed"
FAILED = "failed"
NOT_SCORED = "not_scored"

#: Query keys a trial list is filtered by, with the label shown for each.
FILTERS: dict[str, str] = {
    "model": "model",
    "service": "service",
    "variant": "variant",
    "task": "task",
    "category": "category",
    "difficulty": "difficulty",
    "outcome": "outcome",
    "failure": "failure category",
    "cause": "not-scored cause",
}


@dataclass(frozen=True)
class TrialRow:
    trial_id: str
    model: str
    service: str
    variant: str  # "" without server variants
    task_id: str
    task: str
    category: str
    difficulty: str
    attempt: int
    outcome: str  # passed, failed, not_scored
    failure: str  # the failure category, "" for a pass
    cause: str  # a not-scored trial's error type ("" otherwise)
    error: str
    turns: int
    tool_calls: int
    tokens: int
    cost_usd: float | None
    seconds: float
    harness: str
    agent: str

    @property
    def column(self) -> str:
        """The matrix column: the model, with its server variant when it has one."""
        return f"{self.model} @{self.variant}" if self.variant else self.model

    def value(self, key: str) -> str:
        return str(getattr(self, key))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def row_of(rec: Mapping[str, Any]) -> TrialRow:
    """A record (result.json, parsed and checked by records.usable_record) as a row."""
    task_id = str(rec.get("task_id") or "")
    parts = task_id.split("/")
    service = str(rec.get("service") or (parts[0] if parts else ""))
    difficulty, category, task = (parts[-3:] if len(parts) >= 4 else ["", "", task_id])[:3]
    failure = rec.get("failure")
    passed = bool(rec.get("passed"))
    scored = is_scored(failure if isinstance(failure, str) else None)
    outcome = PASSED if passed else (FAILED if scored else NOT_SCORED)
    totals = _dict(rec.get("totals"))
    timings = _dict(rec.get("timings"))
    error = str(rec.get("error") or "")
    cause = ""
    if outcome == NOT_SCORED:
        cause = str(rec.get("error_type") or error.split(":", 1)[0] or rec.get("stop_reason") or failure)
    cost = totals.get("cost_usd")
    total = timings.get("total")
    return TrialRow(
        trial_id=str(rec.get("trial_id")),
        model=str(rec.get("model") or ""),
        service=service,
        variant=str(rec.get("variant") or ""),
        task_id=task_id,
        task=task,
        category=category,
        difficulty=difficulty,
        attempt=_int(rec.get("attempt")),
        outcome=outcome,
        failure=str(failure or ""),
        cause=cause,
        error=error,
        turns=_int(totals.get("turns")),
        tool_calls=_int(totals.get("tool_calls")),
        tokens=_int(totals.get("input_tokens")) + _int(totals.get("output_tokens")),
        cost_usd=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
        seconds=float(total) if isinstance(total, int | float) and not isinstance(total, bool) else 0.0,
        harness=str(rec.get("harness") or ""),
        agent=str(rec.get("agent") or ""),
    )


ROW_FIELDS = tuple(f.name for f in fields(TrialRow))


def row_from_values(values: Sequence[Any]) -> TrialRow:
    """A row from its field values in order (the viewer's cache, a reading worker), made as pickle makes one: its
    fields set, no __init__ (10,000 frozen dataclasses' __init__ cost a third of a cached start)."""
    if len(values) != len(ROW_FIELDS):
        raise ValueError("a row of another shape")
    row = object.__new__(TrialRow)
    row.__dict__.update(zip(ROW_FIELDS, values, strict=True))
    return row


def label(row: TrialRow) -> str:
    """A trial's outcome in a word: passed, its failure category, or "not scored: <category>"."""
    if row.outcome == PASSED:
        return PASSED
    return row.failure if row.outcome == FAILED else f"not scored: {row.failure}"


def filter_rows(rows: Iterable[TrialRow], params: Mapping[str, Sequence[str]]) -> list[TrialRow]:
    """The rows every given filter keeps (a key's values: any of them); unknown keys are ignored here."""
    wanted = {k: {v for v in vs if v != ""} for k, vs in params.items() if k in FILTERS}
    wanted = {k: vs for k, vs in wanted.items() if vs}
    return [r for r in rows if all(r.value(k) in vs for k, vs in wanted.items())]


def facets(rows: Sequence[TrialRow]) -> dict[str, list[tuple[str, int]]]:
    """For each filter, the values the rows have and how many rows have each (the filter form's choices)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for key in FILTERS:
        counts: dict[str, int] = {}
        for r in rows:
            v = r.value(key)
            if v:
                counts[v] = counts.get(v, 0) + 1
        out[key] = sorted(counts.items())
    return out


def sort_rows(rows: Iterable[TrialRow]) -> list[TrialRow]:
    return sorted(rows, key=lambda r: (r.service, r.task_id, r.model, r.variant, r.attempt))
