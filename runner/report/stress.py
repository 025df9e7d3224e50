"""What ``mcpfleet tasks stress`` found, per task: oracle passes / N, no-op fails / N, what failed, wall time.

Pure: records in, rows and a rich renderable (or a JSON document) out, so the table is tested without a run.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from mcpfleet.runner._util.plural import plural
from mcpfleet.runner._util.printable import literal
from mcpfleet.runner.results.outcome import is_scored

TAIL_LINES = 3  # of the verifier's output: where its failing checks are
TAIL_CHARS = 300
# A trial's own names in what a verifier or a server prints (its database, its role, its folder): without them
# the same failure of two attempts reads the same and is listed once.
_TRIAL_NAMES = re.compile(r"\b(trial|agent)_[0-9a-f]{8}\b")
_TRIAL_FOLDERS = re.compile(r"mcpfleet-trial-[\w.-]+")


@dataclass(frozen=True)
class Attempt:
    """One trial of a stress: the oracle's or the no-op's attempt at a task, as its record has it."""

    task_id: str
    oracle: bool  # else the no-op's
    passed: bool
    scored: bool  # False: an infra, provider or configuration error (or no record): nothing was judged
    seconds: float | None  # the trial's wall time
    detail: str = ""  # what failed (see attempt_detail); "" for an attempt that went as it should


def _tail(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    tail = " | ".join(lines[-TAIL_LINES:])
    return tail if len(tail) <= TAIL_CHARS else "..." + tail[-TAIL_CHARS:]


def _same_for_every_trial(text: str) -> str:
    return _TRIAL_FOLDERS.sub("mcpfleet-trial-*", _TRIAL_NAMES.sub(r"\1_*", text))


def _output_text(output: Any, depth: int = 3) -> str:
    """A tool result's text as messages.json keeps it: MCPMark's output is a JSON text part whose text is the JSON dump
    of the MCP result (its content's text parts); anything else is taken as plain text."""
    try:
        dumped = json.loads(output) if isinstance(output, str) else output
    except ValueError:
        return str(output)
    if depth and isinstance(dumped, dict) and isinstance(dumped.get("content"), list):
        return "\n".join(_output_text(p.get("text", ""), depth - 1) for p in dumped["content"] if isinstance(p, dict))
    if depth and isinstance(dumped, dict) and isinstance(dumped.get("text"), str):
        return _output_text(dumped["text"], depth - 1)
    return str(output)


def first_tool_error(record: dict[str, Any], messages: Any) -> str | None:
    """The first tool call of a trial that returned an error: its tool and what the server said (from
    messages.json), e.g. an oracle step whose statement failed. None when every call succeeded."""
    calls = [c for t in record.get("turns") or [] for c in t.get("tool_calls") or [] if c.get("is_error")]
    if not calls:
        return None
    first = calls[0]
    outputs = {
        m.get("call_id"): m.get("output")
        for m in (messages if isinstance(messages, list) else [])
        if isinstance(m, dict) and m.get("type") == "function_call_output"
    }
    said = outputs.get(first.get("call_id"))
    return f"{first.get('name')}: {_output_text(said)}" if said is not None else str(first.get("name"))


def attempt_detail(record: dict[str, Any] | None, tool_error: str | None = None) -> str:
    """What one failed attempt says about why: its error when nothing was judged, else the first tool call that
    returned an error (an oracle step that did not do what it means) and the tail of the verifier's output (its
    failing checks). Trial-specific names are blanked so equal failures compare equal."""
    if record is None:
        return "no record: the trial did not finish, or its record could not be stored"
    if not is_scored(record.get("failure")):
        return _same_for_every_trial(f"{record.get('failure')}: {_tail(str(record.get('error') or ''))}")
    verifier = record.get("verifier") or {}
    words = ["passed"] if record.get("passed") else []  # (a no-op's: the verifier accepts the untouched state)
    if tool_error:
        words.append(f"tool error: {_tail(tool_error)}")
    said = _tail(f"{verifier.get('stdout') or ''}\n{verifier.get('stderr') or ''}")
    if said:
        words.append(f"verifier: {said}")
    elif record.get("error"):
        words.append(_tail(str(record["error"])))
    return _same_for_every_trial("; ".join(words) or str(record.get("failure") or "failed"))


def attempt_of(record: dict[str, Any] | None, task_id: str, oracle: bool, tool_error: str | None = None) -> Attempt:
    """The Attempt a trial's record (None: it has none) makes."""
    if record is None:
        return Attempt(task_id, oracle, False, False, None, attempt_detail(None))
    passed, scored = bool(record.get("passed")), is_scored(record.get("failure"))
    seconds = (record.get("timings") or {}).get("total")
    went_well = scored and passed == oracle
    detail = "" if went_well else attempt_detail(record, tool_error)
    return Attempt(task_id, oracle, passed, scored, float(seconds) if seconds is not None else None, detail)


@dataclass
class TaskStress:
    """One task's row."""

    task_id: str
    oracle_runs: int = 0
    oracle_passes: int = 0
    noop_runs: int = 0
    noop_fails: int = 0  # scored failures only: a no-op that could not run proves nothing about the verifier
    errors: int = 0  # attempts (either kind) that were not judged
    failing: list[tuple[str, int]] = field(default_factory=list)  # what failed, deduplicated, with its count
    seconds: list[float] = field(default_factory=list)  # the oracle attempts' wall times

    @property
    def ok(self) -> bool:
        """Every oracle attempt passed and every no-op attempt was judged a failure."""
        return self.oracle_passes == self.oracle_runs and self.noop_fails == self.noop_runs

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def longest(self) -> float | None:
        return max(self.seconds) if self.seconds else None


def summarise(attempts: Iterable[Attempt]) -> list[TaskStress]:
    """Rows by task id; failures listed most frequent first (then as first seen)."""
    rows: dict[str, TaskStress] = {}
    said: dict[str, Counter[str]] = {}
    for a in attempts:
        row = rows.setdefault(a.task_id, TaskStress(a.task_id))
        counts = said.setdefault(a.task_id, Counter())
        if a.oracle:
            row.oracle_runs += 1
            row.oracle_passes += a.passed and a.scored
            if a.seconds is not None:
                row.seconds.append(a.seconds)
        else:
            row.noop_runs += 1
            row.noop_fails += a.scored and not a.passed
        row.errors += not a.scored
        if a.detail:
            counts[("" if a.oracle else "no-op ") + ("" if a.scored else "not judged: ") + a.detail] += 1
    for task_id, row in rows.items():
        row.failing = said[task_id].most_common()
    return [rows[k] for k in sorted(rows)]


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def stress_table(rows: list[TaskStress], title: str) -> RenderableType:
    """The table, then each failing task's failures (how many attempts said each)."""
    t = Table(title=literal(title), caption=literal(f"{sum(r.ok for r in rows)}/{len(rows)} tasks held every attempt"))
    for name in ("task", "oracle passes", "no-op fails", "not judged", "median s", "max s", ""):
        t.add_column(name, justify="left" if name in ("task", "") else "right", no_wrap=name != "task")
    for r in rows:
        t.add_row(
            literal(r.task_id),
            f"{r.oracle_passes}/{r.oracle_runs}",
            f"{r.noop_fails}/{r.noop_runs}",
            str(r.errors),
            _secs(r.median),
            _secs(r.longest),
            "ok" if r.ok else "FAIL",
        )
    parts: list[RenderableType] = [t]
    for r in rows:
        if r.failing:
            parts.append(literal(f"{r.task_id}:"))
            parts += [Text.assemble("  ", literal(f"{n}x {text}")) for text, n in r.failing]
    return Group(*parts)


def stress_title(rows: list[TaskStress], repeat: int, concurrency: int, seed: int, wall: float) -> str:
    return (
        f"tasks stress: {plural(len(rows), 'task')} x {repeat} oracle + {repeat} no-op attempts, concurrency "
        f"{concurrency}, seed {seed}, {wall:.1f} s"
    )


def stress_json(rows: list[TaskStress], repeat: int, concurrency: int, seed: int, wall: float) -> dict[str, Any]:
    """The same as a document (``--json``): what the benchmarks page's table is made from."""
    return {
        "repeat": repeat,
        "concurrency": concurrency,
        "seed": seed,
        "wall_seconds": round(wall, 3),
        "ok": all(r.ok for r in rows),
        "tasks": [
            {
                "task": r.task_id,
                "oracle_passes": r.oracle_passes,
                "oracle_runs": r.oracle_runs,
                "noop_fails": r.noop_fails,
                "noop_runs": r.noop_runs,
                "not_judged": r.errors,
                "median_seconds": None if r.median is None else round(r.median, 3),
                "max_seconds": None if r.longest is None else round(r.longest, 3),
                "ok": r.ok,
                "failing": [{"said": text, "attempts": n} for text, n in r.failing],
            }
            for r in rows
        ],
    }
