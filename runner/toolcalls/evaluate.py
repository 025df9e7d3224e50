"""``judge-eval``: score the checker, the judge and checker+judge against labelled cases.

The checker's ``schema_valid`` counts as predicting ``correct`` (the most it can say). Every case where a
system disagrees with its label is listed, with the checker's reasons and the judge's reasoning.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from mcpfleet.runner.results.records import now_iso
from mcpfleet.runner.toolcalls.judge import RUBRIC_VERSION, Assessment, Judge, assess_all
from mcpfleet.runner.toolcalls.loader import Loaded
from mcpfleet.runner.toolcalls.metrics import classification_report
from mcpfleet.runner.toolcalls.models import SCHEMA_VALID, Case

CHECKER, JUDGE, COMBINED = "checker", "judge", "checker+judge"


def predictions(a: Assessment, judged: bool, judge_all: bool) -> dict[str, str]:
    """Each system's label for one case (a call the judge did not see keeps the checker's label combined)."""
    out = {CHECKER: a.checker.predicted}
    if judged and judge_all:
        out[JUDGE] = a.judge.label if a.judge is not None else "(not judged)"
    if judged:
        out[COMBINED] = a.combined.predicted
    return out


def _row(case: Case, a: Assessment, predicted: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": case.id,
        "source": case.source,
        "gold": case.label,
        "mutation": case.mutation,
        "failure_reason": case.failure_reason,
        "call": {"name": case.call.name, "arguments": case.call.arguments},
        "predicted": predicted,
        "checker": a.checker.label,
        "checker_reasons": [r.message if r.path == "$" else f"{r.path}: {r.message}" for r in a.checker.reasons],
    }
    if a.judge is not None:
        row["judge_reasoning"] = a.judge.reasoning
    return row


def summarise(cases: list[Case], assessments: list[Assessment], judged: bool, judge_all: bool) -> dict[str, Any]:
    """Metrics per system, per mutation (generated data) and the disagreements."""
    preds = [predictions(a, judged, judge_all) for a in assessments]
    gold = [c.label or "" for c in cases]
    systems = [CHECKER] + ([JUDGE] if judged and judge_all else []) + ([COMBINED] if judged else [])
    report: dict[str, Any] = {
        "systems": {s: classification_report(gold, [p[s] for p in preds]) for s in systems},
        "checker_schema_valid": sum(1 for a in assessments if a.checker.label == SCHEMA_VALID),
        "checker_missed_wrong": sum(
            1
            for c, a in zip(cases, assessments, strict=True)
            if a.checker.label == SCHEMA_VALID and c.label != "correct"
        ),
    }
    by_mutation: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for c, p in zip(cases, preds, strict=True):
        if c.mutation or c.label == "correct":
            group = by_mutation[c.mutation or "(correct)"]
            group["n"] += 1
            for s in systems:
                group[s] += p[s] == c.label
    report["by_mutation"] = {
        m: {"n": g["n"], **{s: g[s] / g["n"] for s in systems}} for m, g in sorted(by_mutation.items())
    }
    report["disagreements"] = [
        _row(c, a, p)
        for c, a, p in zip(cases, assessments, preds, strict=True)
        if any(p[s] != c.label for s in systems)
    ]
    return report


async def evaluate(
    loaded: Loaded, judge: Judge | None = None, judge_all: bool = True, data: str = ""
) -> dict[str, Any]:
    """Run the checker (and the judge) over the loaded cases and summarise; the JSON report's content."""
    missing = [c.id for c in loaded.cases if c.label is None]
    if missing:
        raise ValueError(f"{len(missing)} case(s) have no label (first: {missing[0]}); judge-eval needs labels")
    assessments = await assess_all(loaded.cases, judge, judge_all)
    out: dict[str, Any] = {
        "generated_at": now_iso(),
        "data": {
            "path": data,
            "files": loaded.files,
            "rows": loaded.rows,
            "cases": len(loaded.cases),
            "skipped": [str(b) for b in loaded.skipped],
        },
        "judge": None,
    }
    if judge is not None:
        out["judge"] = {
            "model": judge.target.model,
            "rubric_version": RUBRIC_VERSION,
            "judged": "all calls" if judge_all else "schema-valid calls only",
            "stats": judge.stats.as_dict(),
        }
    out.update(summarise(loaded.cases, assessments, judge is not None, judge_all))
    return out
