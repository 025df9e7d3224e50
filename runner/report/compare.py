"""Server variants compared: did the change to an MCP server make agents better or worse?

Pure functions over trial records. Two variants of a service are compared per model on the trials both have
scored for the same task and attempt (paired), so a task only one variant reached never tilts the difference:

- pass@1 of each on those pairs, and their difference (variant - baseline);
- a 95% confidence interval of the difference by a paired bootstrap that resamples tasks (a task's attempts
  stay together: they share its difficulty), with a fixed seed, so the same records always give the same bounds;
- McNemar's exact test on the discordant pairs (one variant passed, the other did not): a p-value that needs
  no resampling;
- the tasks that flipped either way (their pass rate over the paired attempts rose or fell), and the mean
  per-trial deltas of tokens, turns and tool calls.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable
from math import comb
from typing import Any

from mcpfleet.runner.results.outcome import is_scored

BOOTSTRAP_SAMPLES = 4000
SEED = 20260  # fixed: a report, a CI gate and a re-run agree on the interval


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (a binomial test at 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_bootstrap(by_task: dict[str, list[float]], samples: int = BOOTSTRAP_SAMPLES) -> tuple[float, float]:
    """95% percentile interval of the mean paired difference, resampling tasks with replacement."""
    tasks = sorted(by_task)
    if not tasks:
        return (0.0, 0.0)
    sums = [sum(by_task[t]) for t in tasks]
    counts = [len(by_task[t]) for t in tasks]
    rng = random.Random(SEED)
    n = len(tasks)
    means = []
    for _ in range(samples):
        picked = [rng.randrange(n) for _ in range(n)]
        means.append(sum(sums[i] for i in picked) / sum(counts[i] for i in picked))
    means.sort()
    return (means[int(0.025 * (samples - 1))], means[int(0.975 * (samples - 1))])


def _total(rec: dict[str, Any], key: str) -> float:
    value = (rec.get("totals") or {}).get(key)
    return float(value) if isinstance(value, int | float) else 0.0


def _tokens(rec: dict[str, Any]) -> float:
    return _total(rec, "input_tokens") + _total(rec, "output_tokens")


def variants_by_service(records: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """The variants each service's records have, in order of first appearance."""
    out: dict[str, list[str]] = {}
    for r in records:
        v = r.get("variant")
        if isinstance(v, str) and v not in out.setdefault(r["service"], []):
            out[r["service"]].append(v)
    return out


def compare(records: list[dict[str, Any]], service: str, baseline: str, variant: str) -> list[dict[str, Any]]:
    """Per model: ``variant`` against ``baseline`` of ``service``, on their paired scored trials."""
    cells: dict[tuple[str, str, int], dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        if r.get("service") != service or r.get("variant") not in (baseline, variant):
            continue
        if not is_scored(r.get("failure")):
            continue
        cells[(r["model"], r["task_id"], int(r["attempt"]))][r["variant"]] = r
    out = []
    for model in sorted({m for m, _, _ in cells}):
        pairs = [
            (task, cell[baseline], cell[variant])
            for (m, task, _), cell in sorted(cells.items())
            if m == model and baseline in cell and variant in cell
        ]
        if not pairs:
            continue
        by_task: dict[str, list[float]] = defaultdict(list)
        rates: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
        for task, base, new in pairs:
            by_task[task].append(float(bool(new["passed"])) - float(bool(base["passed"])))
            rates[task].append((bool(base["passed"]), bool(new["passed"])))
        n = len(pairs)
        base_pass = sum(bool(b["passed"]) for _, b, _ in pairs) / n
        new_pass = sum(bool(v["passed"]) for _, _, v in pairs) / n
        worse = sum(bool(b["passed"]) and not bool(v["passed"]) for _, b, v in pairs)
        better = sum(bool(v["passed"]) and not bool(b["passed"]) for _, b, v in pairs)
        low, high = paired_bootstrap(by_task)
        up = sorted(t for t, rs in rates.items() if sum(v for _, v in rs) > sum(b for b, _ in rs))
        down = sorted(t for t, rs in rates.items() if sum(v for _, v in rs) < sum(b for b, _ in rs))

        def delta(f: Any) -> float:
            return sum(f(v) - f(b) for _, b, v in pairs) / n  # noqa: B023 - used at once, in this iteration

        out.append(
            {
                "service": service,
                "model": model,
                "baseline": baseline,
                "variant": variant,
                "pairs": n,
                "tasks": len(by_task),
                "baseline_pass_at_1": base_pass,
                "variant_pass_at_1": new_pass,
                "difference": new_pass - base_pass,
                "ci95": [low, high],
                "ci_method": f"paired bootstrap over tasks ({BOOTSTRAP_SAMPLES} resamples, seed {SEED})",
                "mcnemar_p": mcnemar_exact(worse, better),
                "better_pairs": better,
                "worse_pairs": worse,
                "flipped_up": up,
                "flipped_down": down,
                "delta_tokens": delta(_tokens),
                "delta_turns": delta(lambda r: _total(r, "turns")),
                "delta_tool_calls": delta(lambda r: _total(r, "tool_calls")),
            }
        )
    return out


def compare_all(records: list[dict[str, Any]], baselines: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every other variant of each service against its baseline (``baselines[service]``, else its first)."""
    out = []
    for service, variants in sorted(variants_by_service(records).items()):
        base = (baselines or {}).get(service) or variants[0]
        for v in variants:
            if v != base:
                out.extend(compare(records, service, base, v))
    return out


def worse_than(comparisons: list[dict[str, Any]], margin: float) -> list[dict[str, Any]]:
    """Comparisons whose variant is worse than its baseline by more than ``margin`` with 95% confidence: the
    interval's upper bound of (variant - baseline) is below ``-margin``."""
    return [c for c in comparisons if c["ci95"][1] < -margin]
