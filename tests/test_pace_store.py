"""The pace store's failures and a provider that says 429 anyway (issue 47), one real trial each (the filesystem
MCP server, the task's verifier) against a real redis-server and the scripted model server over HTTP.

- The store goes down mid-trial and comes back: the trial waits (its log says so, the wait is metered), sends
  nothing unpaced meanwhile, and passes.
- Another client on the same key spends the account's window: the trial's first request gets a 429; the shared
  pace halves and pauses for the provider's Retry-After, and grows back to the whole limit once 429s stop.
- A model whose provider needs a key and has none (§5) is a configuration error at once, not a provider outage.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import make_tiny_pack
from redisserver import Redis

import mcpfleet.runner.llm.client  # noqa: F401 - LiteLLM's env defaults, as a worker sets them
from mcpfleet.runner.llm import meters, pace
from mcpfleet.runner.plan import expand as plan
from mcpfleet.runner.results import store
from mcpfleet.runner.results.records import TrialResult
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.trial import engine as trial

WINDOW = 3.0


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    r = Redis(tmp_path)
    r.start()
    try:
        yield r
    finally:
        r.kill()


def one(tmp_path: Path, model: dict[str, Any]) -> plan.TrialSpec:
    pack = make_tiny_pack(tmp_path / "pack")  # the session server's first tiny task: its oracle knows it
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": f"pace-{uuid.uuid4().hex[:8]}"},
        "spec": {"models": [{"name": "m", **model}], "tasks": {"path": str(pack)}},
    }
    [s] = plan.plan(parse_evalrun(doc), pack)
    return s


async def run(s: plan.TrialSpec, out: Path, env: dict[str, str]) -> tuple[TrialResult, str]:
    st = store.LocalStore(out)
    ctx = trial.TrialContext(backoff_initial=0.01, env=env)
    try:
        result = await trial.run_trial(s, st, ctx)
    finally:
        await pace.close_clients()
    log = st.trial_dir(s.trial_id) / "trial.log"
    return result, log.read_text() if log.is_file() else ""


def meter(url: str, account: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/meter", timeout=10).json()["accounts"].get(account) or {})


async def test_store_down_and_back(scripted_url: str, tmp_path: Path, redis: Redis) -> None:
    account = uuid.uuid4().hex
    s = one(
        tmp_path,
        {
            "model": f"hosted_vllm/oracle?account={account}",
            "apiBase": scripted_url,
            "rateLimit": {"requestsPerMinute": 2},  # 6 requests at 2 per window: about 6 s
            "pricing": {"inputPerMillionTokens": 2.0, "outputPerMillionTokens": 8.0},
        },
    )
    env = {pace.STORE_URL_ENV: redis.url, pace.WINDOW_ENV: str(WINDOW)}
    labels = {"namespace": "local", "run": s.run, "model": "m", "reason": "store_unreachable"}

    def waited() -> float:
        return meters.REGISTRY.get_sample_value("mcpfleet_llm_pace_wait_seconds_total", labels) or 0.0

    waited_before = waited()
    task = asyncio.ensure_future(run(s, tmp_path / "out", env))
    deadline = time.monotonic() + 60
    while meter(scripted_url, account).get("accepted", 0) < 2:
        assert time.monotonic() < deadline and not task.done(), "the trial did not get going"
        await asyncio.sleep(0.05)
    redis.kill()
    down_at = time.time()
    await asyncio.sleep(7.0)  # longer than a waiting request's longest look away (5 s): it meets the outage
    during = [t for t in meter(scripted_url, account)["accepted_at"] if t > down_at + 0.2]
    assert during == [], "a request was sent while the pace store was down"
    assert not task.done()
    redis.start()  # empty: a store that lost its state paces from scratch
    result, log = await asyncio.wait_for(task, 120)
    assert result.passed, (result.failure, result.error)
    assert "the pace store cannot be reached" in log and "none is sent unpaced" in log, log
    assert "the pace store is back after" in log, log
    assert waited() - waited_before >= 1.0
    m = meter(scripted_url, account)
    assert m["refused"] == 0
    # The request metrics (by namespace, run and model; no trial id): what the provider metered and would bill.
    run_labels = {"namespace": "local", "run": s.run, "model": "m"}
    sample = meters.REGISTRY.get_sample_value
    assert sample("mcpfleet_llm_requests_total", {**run_labels, "code": "200"}) == m["accepted"] == 6
    assert sample("mcpfleet_llm_tokens_total", {**run_labels, "kind": "input"}) == m["prompt_tokens"]
    assert sample("mcpfleet_llm_tokens_total", {**run_labels, "kind": "output"}) == m["output_tokens"]
    billed = (m["prompt_tokens"] * 2.0 + m["output_tokens"] * 8.0) / 1e6
    assert sample("mcpfleet_llm_cost_usd_total", run_labels) == pytest.approx(billed)
    assert sample("mcpfleet_llm_rate_limit_requests_per_minute", run_labels) == 2
    for name in ("mcpfleet_llm_requests_total", "mcpfleet_llm_pace_wait_seconds_total"):
        assert all("trial" not in k for f in meters.REGISTRY.collect() for smp in f.samples for k in smp.labels), name


async def test_a_429_from_another_client_slows_the_shared_pace(scripted_url: str, tmp_path: Path, redis: Redis) -> None:
    account = uuid.uuid4().hex
    provider = f"oracle?rpm=3&window={WINDOW:g}&account={account}"
    # Another client on the same key spends the account's window first (the harness does not know of it).
    async with httpx.AsyncClient(timeout=10) as other:
        for _ in range(3):
            r = await other.post(
                f"{scripted_url}/chat/completions",
                json={"model": provider.replace("oracle", "noop", 1), "messages": [{"role": "user", "content": "x"}]},
            )
            assert r.status_code == 200
    s = one(
        tmp_path,
        {"model": f"hosted_vllm/{provider}", "apiBase": scripted_url, "rateLimit": {"requestsPerMinute": 3}},
    )
    env = {pace.STORE_URL_ENV: redis.url, pace.WINDOW_ENV: str(WINDOW)}
    config = pace.pace_config(s.model, f"hosted_vllm/{provider}", scripted_url, s.run, None, env, 60)
    assert config is not None
    seen: list[float] = []  # the shared pace's share of the limit, as another process would read it

    async def watch() -> None:
        while True:
            seen.append(await pace.current_factor(redis.url, config.account, WINDOW))
            await asyncio.sleep(0.05)

    watcher = asyncio.ensure_future(watch())
    started = time.time()
    try:
        result, log = await run(s, tmp_path / "out", env)
    finally:
        watcher.cancel()
    assert result.passed, (result.failure, result.error)
    m = meter(scripted_url, account)
    # One 429, the first request's: the pace then kept under what the account had left.
    assert m["refused"] == 1, m
    assert "429 from the provider: the shared pace slows down" in log, log
    assert result.totals.llm_retries == 1
    run_labels = {"namespace": "local", "run": s.run, "model": "m"}
    sample = meters.REGISTRY.get_sample_value
    assert sample("mcpfleet_llm_requests_total", {**run_labels, "code": "429"}) == 1
    assert sample("mcpfleet_llm_requests_total", {**run_labels, "code": "200"}) == 6
    reasons = ("requests", "rate_limited", "tokens", "in_flight")  # (the retry's own wait covered the pause)
    waits = [sample("mcpfleet_llm_pace_wait_seconds_total", {**run_labels, "reason": r}) or 0.0 for r in reasons]
    assert sum(waits) > 0.5, waits  # requests waited for the shared pace, and the wait is metered
    ours = sorted(t for t in m["accepted_at"] if t >= started)
    assert len(ours) == 6 and ours[0] - started >= 2.0, ours  # after the Retry-After the provider asked for
    # The pace halved at the 429, then grew back to all of the limit once 429s stopped.
    assert seen and min(seen) <= 0.55, seen
    await asyncio.sleep(pace.effective_window(WINDOW) + 0.2)
    try:
        assert await pace.current_factor(redis.url, config.account, WINDOW) == 1.0
    finally:
        await pace.close_clients()


async def test_a_missing_key_stops_the_model_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """§5: LiteLLM's local "Missing credentials" is a config_error, not retried as a provider outage (it was
    retried for 106 s before ending as a provider_error)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    s = one(tmp_path, {"model": "openai/gpt-4o"})
    t = time.monotonic()
    result, log = await run(s, tmp_path / "out", {})
    assert result.failure == "config_error", (result.failure, result.error)
    assert result.totals.llm_retries == 0
    assert time.monotonic() - t < 30
    assert "Missing credentials" in (result.error or ""), result.error
