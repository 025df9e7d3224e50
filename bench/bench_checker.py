"""Tool-call checker throughput on one core: ``classify_call`` against uncached jsonschema baselines.

The calls are the generator's labelled set (``--n`` cases of ``--seed``, or ``--data`` for a limbic file or
folder). The process is pinned to one core. Every method runs ``--rounds`` times and the best round counts;
the rate is calls per CPU second of this process (``time.process_time``), which stays meaningful on a machine
shared with other work, and the wall-clock rate of the same round is printed beside it.

Methods:
- ``classify_call``: the checker as shipped (validators built once per schema and cached, all errors);
- ``validator per call``: the same validation (format checking, all errors) with a validator built for
  every call, no cache;
- ``jsonschema.validate per call``: the one-liner a naive checker would use: checks the schema, builds a
  validator and stops at the first error, every call.

    .venv/bin/python bench/bench_checker.py [--n 5000] [--seed 0] [--rounds 5] [--baseline-n 1000]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import jsonschema
from jsonschema import Draft202012Validator, validators

from mcpfleet.runner.toolcalls import Case, Tool, classify_call
from mcpfleet.runner.toolcalls.checker import compiled
from mcpfleet.runner.toolcalls.generator import generate
from mcpfleet.runner.toolcalls.loader import load_cases


def _tool(case: Case) -> Tool | None:
    return next((t for t in case.tools if t.name == case.call.name), None)


def shipped(cases: list[Case]) -> None:
    for c in cases:
        classify_call(c.tools, c.call)


def validator_per_call(cases: list[Case]) -> None:
    for c in cases:
        tool = _tool(c)
        if tool is not None:
            cls = validators.validator_for(tool.input_schema, default=Draft202012Validator)
            list(cls(tool.input_schema, format_checker=cls.FORMAT_CHECKER).iter_errors(c.call.arguments))


def validate_per_call(cases: list[Case]) -> None:
    for c in cases:
        tool = _tool(c)
        if tool is not None:
            try:
                jsonschema.validate(c.call.arguments, tool.input_schema, format_checker=jsonschema.FormatChecker())
            except jsonschema.ValidationError:
                pass


def best_round(run: Callable[[list[Case]], None], cases: list[Case], rounds: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the fastest round."""
    best: tuple[float, float] | None = None
    for _ in range(rounds):
        cpu, wall = time.process_time(), time.perf_counter()
        run(cases)
        took = (time.process_time() - cpu, time.perf_counter() - wall)
        best = took if best is None or took[0] < best[0] else best
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="generated cases (ignored with --data)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, help="a limbic-format file or folder instead of the generated set")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-n", type=int, default=1000, help="cases the slow baselines run on")
    args = parser.parse_args()

    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    cases = load_cases(args.data).cases if args.data else list(generate(args.n, args.seed))
    compiled.cache_clear()
    shipped(cases)  # warm: build each schema's validators once, as a long run would
    schemas = compiled.cache_info().currsize

    rows = []
    for name, fn, subset in (
        ("classify_call (shipped)", shipped, cases),
        ("validator per call", validator_per_call, cases[: args.baseline_n]),
        ("jsonschema.validate per call", validate_per_call, cases[: args.baseline_n]),
    ):
        cpu, wall = best_round(fn, subset, args.rounds)
        rows.append((name, len(subset), cpu, len(subset) / cpu, len(subset) / wall))
    base = rows[-1][3]
    print(
        f"checker benchmark: {len(cases)} calls ({schemas} distinct schemas), pinned to core {core}, "
        f"best of {args.rounds} rounds"
    )
    print(f"{'method':<30} {'calls':>6} {'CPU s':>8} {'calls/s (CPU)':>14} {'calls/s (wall)':>15} {'speedup':>8}")
    for name, n, cpu, rate, wall_rate in rows:
        print(f"{name:<30} {n:>6} {cpu:>8.3f} {rate:>14,.0f} {wall_rate:>15,.0f} {rate / base:>7.1f}x")


if __name__ == "__main__":
    main()
