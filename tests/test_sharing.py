"""A run's records held at once share their strings (runner/_util/sharing.py): equal to what was decoded, at well
under half the memory (the summary and an operator's rebuild read every record of a run)."""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

from conftest import trial_record

from mcpfleet.runner._util.sharing import shared_all


def texts(n: int) -> list[str]:
    """n trial records as stored (result.json), each with its own id, times, totals and an occasional error."""
    out = []
    for i in range(n):
        rec = trial_record(f"m{i % 3}.filesystem.standard.c.task{i % 50}.{i % 4 + 1}", passed=i % 3 != 0)
        rec.update(
            started_at=f"2026-12-03T10:{i % 60:02d}:00.{i:06d}+00:00",
            totals={"input_tokens": i, "output_tokens": 2 * i, "cost_usd": i / 1000, "turns": i % 9},
            timings={"state": i / 7, "agent": i / 3, "verify": 0.1},
            error=None if i % 10 else f"verifier said: assertion {i} failed" * 5,
        )
        out.append(json.dumps(rec))
    return out


def held(make: Callable[[], list[Any]]) -> tuple[float, list[Any]]:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        docs = make()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, docs
    finally:
        tracemalloc.stop()


def test_shared_records_are_equal_to_the_decoded_ones_at_under_half_their_memory() -> None:
    raw = texts(5000)
    plain_bytes, plain = held(lambda: [json.loads(t) for t in raw])
    shared_bytes, shared = held(lambda: shared_all(json.loads(t) for t in raw))
    assert shared == plain
    assert shared_bytes < 0.5 * plain_bytes, (shared_bytes / len(raw), plain_bytes / len(raw))
    a, b = shared[0], shared[1]
    assert next(iter(a)) is next(iter(b)) and a["model"] is not None  # one key object for every record
    a["totals"]["turns"] = -1
    assert b["totals"]["turns"] != -1  # documents stay apart: only strings are shared
