"""The pacer's limits across processes against a real redis-server (issue 47): requests in flight and tokens per
minute are shared by two worker processes, and the window's limit holds however their requests interleave. Each
worker is a separate Python process with its own Redis connection, reserving and settling as the LLM client does
(``Pacer.acquire`` / ``settle``), holding each "request" for a while in between."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from redisserver import Redis

WINDOW = 2.0

WORKER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from mcpfleet.runner.llm import pace

    async def main():
        url, requests, tokens, hold, rpm, tpm, fly = sys.argv[1:8]
        cfg = pace.PaceConfig(
            url=url, labels=("local", "limits", "m"), account="shared-account",
            requests_per_minute=int(rpm) or None, tokens_per_minute=int(tpm) or None,
            max_in_flight=int(fly) or None, window=float(sys.argv[8]), lease=60,
        )
        p = pace.Pacer(cfg)
        out = []
        async def one():
            t = await p.acquire("m", [], [], tokens=int(tokens))
            start = time.time()
            await asyncio.sleep(float(hold))
            out.append([start, time.time()])
            await p.settle(t, prompt_tokens=int(tokens))
        await asyncio.gather(*(one() for _ in range(int(requests))))
        await pace.close_clients()
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def workers(redis: Redis, *args: Any) -> list[list[float]]:
    cmd = [sys.executable, "-c", WORKER, redis.url, *map(str, args), str(WINDOW)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=os.environ.copy()) for _ in range(2)]
    spans: list[list[float]] = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        spans += json.loads(out)
    return spans


def max_overlap(spans: list[list[float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    now = peak = 0
    for _, d in events:
        now += d
        peak = max(peak, now)
    return peak


def max_in_window(starts: list[float], window: float) -> int:
    starts = sorted(starts)
    return max(sum(1 for u in starts[i:] if u < t + window) for i, t in enumerate(starts))


def test_two_processes_share_the_in_flight_cap(tmp_path: Path) -> None:
    redis = Redis(tmp_path)
    redis.start()
    try:
        spans = workers(redis, 4, 10, 0.4, 0, 0, 3)  # 8 requests of 0.4 s at once, 3 in flight allowed
    finally:
        redis.kill()
    assert len(spans) == 8
    assert max_overlap(spans) == 3, spans  # the cap, shared: reached, never passed
    assert max(e for _, e in spans) - min(s for s, _ in spans) >= 0.4 * 8 / 3  # spread over three lanes


def test_two_processes_share_tokens_per_minute(tmp_path: Path) -> None:
    redis = Redis(tmp_path)
    redis.start()
    try:
        spans = workers(redis, 3, 400, 0.05, 0, 1000, 0)  # 6 requests of 400 tokens, 1000 per window
    finally:
        redis.kill()
    starts = [s for s, _ in spans]
    assert len(starts) == 6
    assert max_in_window(starts, WINDOW) <= 2, sorted(starts)  # 2 x 400 fit in 1000, a third does not
    assert max(starts) - min(starts) >= 2 * WINDOW * 0.95
