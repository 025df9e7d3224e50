"""Harness time per LLM round trip: mcpfleet's normalising client against LiteLLM's own, side by side.

Every mcpfleet call to an OpenAI-compatible endpoint (``hosted_vllm/``, ``openai/`` with a base URL) goes
through ``runner/llm/normalise.py``'s transport, which rewrites odd replies before LiteLLM parses them. This
prints what that costs per call against the scripted model server (no latency), in interleaved rounds so a
busy spell on a shared machine hits both modes alike:

    .venv/bin/python bench/bench_llm_client.py [--calls 150] [--rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess
from mcpfleet.runner.llm import client as llm
from mcpfleet.runner.llm.client import normalise

REPO = Path(__file__).resolve().parents[1]


async def round_trips(url: str, calls: int, normalising: bool) -> float:
    """Milliseconds per ``llm.complete`` (plus reading usage and reply, as the agent does), after a warm-up."""
    make = normalise.make_client
    if not normalising:
        normalise.make_client = lambda *a, **k: None  # LiteLLM's own client
    try:
        target = llm.LLMTarget(model="hosted_vllm/noop", api_base=url, api_key="scripted", params={}, timeout=60)
        messages = [{"role": "user", "content": "hello"}]
        for _ in range(10):
            await llm.complete(target, messages, [])
        start = time.perf_counter()
        for _ in range(calls):
            response, _, _ = await llm.complete(target, messages, [])
            llm.usage_of(response, target)
            llm.reply_of(response, messages)
        elapsed = time.perf_counter() - start
        await llm.close(target)
    finally:
        normalise.make_client = make
    return elapsed / calls * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    results: dict[str, list[float]] = {"normalising client (mcpfleet)": [], "LiteLLM's own client": []}
    with ScriptedServerProcess([REPO / "tasks"]) as url:
        for i in range(args.rounds):
            modes = list(results) if i % 2 == 0 else list(reversed(results))
            for mode in modes:
                results[mode].append(asyncio.run(round_trips(url, args.calls, mode.startswith("normalising"))))
    print(f"| client | ms per round trip (median of {args.rounds}) | rounds |")
    print("|---|---|---|")
    for mode, xs in results.items():
        print(f"| {mode} | {statistics.median(xs):.2f} | {', '.join(f'{x:.2f}' for x in xs)} |")


if __name__ == "__main__":
    main()
