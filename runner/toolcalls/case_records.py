"""Per-case results of sharded trials, for the summaries: a shard's result.json lists its cases, and each case
counts as a task of its own (pass@1, pass@k and pass^k over cases, as over MCP tasks).

Kept free of heavy imports: summary.py (the launcher's and the operator's) calls it on every summary.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

SHARD_KEYS = ("cases", "shard", "totals", "timings", "turns", "error", "verifier")
JUDGE_ERROR = "judge_error"  # models.JUDGE_ERROR (not imported: this module stays light)
# A case the judge could not classify measured nothing of the model: it counts like an infrastructure error
# (outcome.NOT_SCORED), left out of pass@1, pass@k and pass^k and counted apart.
UNSCORED_AS = {JUDGE_ERROR: "infra_error"}


def expand(results: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each result as it is, except a shard's (a result with ``cases``): one pseudo-result per case, whose
    task is ``<task_id>#<case id>`` and whose totals are the case's own."""
    for r in results:
        cases = r.get("cases")
        if not isinstance(cases, list):
            yield r
            continue
        base = {k: v for k, v in r.items() if k not in SHARD_KEYS}
        for c in cases:
            yield {
                **base,
                "task_id": f"{r['task_id']}#{c.get('id')}",
                "passed": bool(c.get("passed")),
                "failure": UNSCORED_AS.get(c.get("failure"), c.get("failure")),
                "label": c.get("label"),
                "class": c.get("class"),
                "totals": {
                    "turns": 1,
                    "tool_calls": int(c.get("class") is not None),
                    "input_tokens": c.get("input_tokens") or 0,
                    "output_tokens": c.get("output_tokens") or 0,
                    "cost_usd": c.get("cost_usd"),
                },
                "timings": {"agent": c.get("seconds") or 0.0},
            }


def breakdown(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Per model: cases and passes by gold label, and the checker's classes of the model's calls (``(no call)``
    when it made none). Only over per-case results (those with a ``label`` key); empty when there are none."""
    by_model: dict[str, dict[str, Any]] = defaultdict(
        lambda: {
            "by_label": defaultdict(lambda: {"cases": 0, "passed": 0}),
            "classes": Counter(),
        }
    )
    seen = False
    for r in results:
        if "label" not in r or "class" not in r:
            continue
        seen = True
        m = by_model[r["model"]]
        group = m["by_label"][r.get("label") or "(unlabelled)"]
        group["cases"] += 1
        group["passed"] += bool(r["passed"])
        m["classes"][r.get("class") or "(no call)"] += 1
    if not seen:
        return {}
    out: dict[str, Any] = {}
    for model, m in sorted(by_model.items()):
        labels = {
            k: {**v, "pass_rate": v["passed"] / v["cases"] if v["cases"] else None}
            for k, v in sorted(m["by_label"].items())
        }
        out[model] = {"by_label": labels, "call_classes": dict(sorted(m["classes"].items()))}
    return out
