"""The matrix per service: tasks x models (x server variants), each cell a task's attempts and pass rate (pure).

A cell's pass rate is over its scored attempts (a not-scored attempt measured nothing of the model). A row's
disagreement is the spread of its cells' pass rates (highest less lowest): 1.0 when one model always passes
what another always fails, 0 when all agree. Difficulty sorts by the task's difficulty folder, then by how
rarely the task is passed over every model (the hardest first).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from mcpfleet.runner.report.viewer.index import FAILED, NOT_SCORED, PASSED, TrialRow, label

SORTS = ("task", "difficulty", "disagreement")
_DIFFICULTY_ORDER = {"easy": 0, "standard": 1, "hard": 2}


@dataclass
class Cell:
    attempts: list[TrialRow] = field(default_factory=list)

    @property
    def scored(self) -> int:
        return sum(r.outcome != NOT_SCORED for r in self.attempts)

    @property
    def passed(self) -> int:
        return sum(r.outcome == PASSED for r in self.attempts)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None

    def failures(self) -> list[str]:
        """The failure categories of its attempts, each once, in attempt order (not-scored ones too)."""
        out: list[str] = []
        for r in sorted(self.attempts, key=lambda r: r.attempt):
            if r.failure and r.failure not in out:
                out.append(r.failure)
        return out

    def marks(self) -> list[tuple[str, str, str]]:
        """(css class, one-letter mark, title) per attempt in attempt order."""
        out = []
        for r in sorted(self.attempts, key=lambda r: r.attempt):
            cls = {PASSED: "pass", FAILED: "fail", NOT_SCORED: "unscored"}[r.outcome]
            mark = {PASSED: "✓", FAILED: "✗", NOT_SCORED: "–"}[r.outcome]
            out.append((cls, mark, f"attempt {r.attempt}: {label(r)}"))
        return out


@dataclass
class MatrixRow:
    task_id: str
    task: str
    category: str
    difficulty: str
    cells: dict[str, Cell]

    @property
    def disagreement(self) -> float:
        rates = [c.pass_rate for c in self.cells.values() if c.pass_rate is not None]
        return max(rates) - min(rates) if len(rates) > 1 else 0.0

    @property
    def pass_rate(self) -> float | None:
        scored = sum(c.scored for c in self.cells.values())
        return sum(c.passed for c in self.cells.values()) / scored if scored else None


@dataclass
class Matrix:
    service: str
    columns: list[tuple[str, str, str]]  # (column label, model, variant)
    rows: list[MatrixRow]

    def column_rate(self, column: str) -> float | None:
        scored = sum(r.cells[column].scored for r in self.rows if column in r.cells)
        passed = sum(r.cells[column].passed for r in self.rows if column in r.cells)
        return passed / scored if scored else None


def _difficulty_key(row: MatrixRow) -> tuple[int, str, float, str]:
    rate = row.pass_rate
    return (_DIFFICULTY_ORDER.get(row.difficulty, 3), row.difficulty, rate if rate is not None else 2.0, row.task_id)


def sort_matrix_rows(rows: list[MatrixRow], sort: str) -> list[MatrixRow]:
    if sort == "difficulty":
        return sorted(rows, key=_difficulty_key)
    if sort == "disagreement":
        return sorted(rows, key=lambda r: (-r.disagreement, r.task_id))
    return sorted(rows, key=lambda r: r.task_id)


def matrices(rows: Iterable[TrialRow], sort: str = "task") -> list[Matrix]:
    """One matrix per service, services in name order; ``sort``: one of SORTS."""
    if sort not in SORTS:
        raise ValueError(f"sort={sort}: not a sort order; give one of {', '.join(SORTS)}")
    by_service: dict[str, list[TrialRow]] = defaultdict(list)
    for r in rows:
        by_service[r.service].append(r)
    out = []
    for service in sorted(by_service):
        cols = sorted({(r.column, r.model, r.variant) for r in by_service[service]})
        tasks: dict[str, MatrixRow] = {}
        for r in by_service[service]:
            row = tasks.get(r.task_id)
            if row is None:
                row = tasks[r.task_id] = MatrixRow(r.task_id, r.task, r.category, r.difficulty, {})
            row.cells.setdefault(r.column, Cell()).attempts.append(r)
        out.append(Matrix(service, cols, sort_matrix_rows(list(tasks.values()), sort)))
    return out
