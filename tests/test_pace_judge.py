"""The tool-call judge under the shared pace and budgets (issue 47): a judge on a tested model's account shares
that model's limit, a judge with its own rateLimit is paced as its own account, and its spend counts toward the
run's budget. Real LiteLLM calls over HTTP to the test judge server, paced through a real redis-server.

The pace window is shortened to a few seconds (``MCPFLEET_PACE_WINDOW_SECONDS``): a limit of N per minute is then
N per window.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_tiny_pack
from judge_server import JudgeServer, judge_server
from redisserver import Redis

from mcpfleet.runner.launch.preflight import budget_problems
from mcpfleet.runner.llm import meters, pace
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.spec.trial import TrialContext, TrialSpec
from mcpfleet.runner.toolcalls.judge import JudgeError
from mcpfleet.runner.toolcalls.loader import load_cases
from mcpfleet.runner.toolcalls.suite import make_judge

WINDOW = 3.0
KEY_ENV = "PACE_JUDGE_TEST_KEY"
FIXTURE = Path(__file__).resolve().parent / "data" / "toolcalls_200.jsonl"


@pytest.fixture(scope="module")
def server() -> Iterator[JudgeServer]:
    with judge_server() as s:
        yield s


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    r = Redis(tmp_path)
    r.start()
    try:
        yield r
    finally:
        r.kill()


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached answer makes no call: every test judges with an empty cache of its own."""
    monkeypatch.setenv("MCPFLEET_JUDGE_CACHE_DIR", str(tmp_path / "judge-cache"))


def trial(tmp_path: Path, model: dict[str, Any], judge: dict[str, Any], budget: float | None = None) -> TrialSpec:
    pack = make_tiny_pack(tmp_path / "pack")
    spec: dict[str, Any] = {
        "models": [{"name": "m", **model}],
        "tasks": {"path": str(pack)},
        "toolcalls": {"judge": judge},
    }
    if budget is not None:
        spec["budget"] = {"usd": budget}
    doc = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "judged"}, "spec": spec}
    [s] = plan(parse_evalrun(doc), pack)
    return s


def arrivals(server: JudgeServer, model: str) -> list[float]:
    return sorted(t for body, t in zip(server.requests, server.arrived, strict=True) if body["model"] == model)


def max_in_window(times: list[float], window: float) -> int:
    return max((sum(1 for u in times[i:] if u < t + window) for i, t in enumerate(times)), default=0)


def env_of(redis: Redis) -> dict[str, str]:
    return {pace.STORE_URL_ENV: redis.url, pace.WINDOW_ENV: str(WINDOW), KEY_ENV: "sk-judge", "OTHER_KEY": "sk-o"}


async def judge_cases(spec: TrialSpec, env: dict[str, str], n: int) -> None:
    judge = make_judge(spec.judge, env, spec=spec)
    assert judge is not None
    try:
        await asyncio.gather(*(judge.judge(c) for c in load_cases(FIXTURE).cases[:n]))
    finally:
        await judge.aclose()


async def test_a_judge_on_a_tested_models_account_shares_its_limit(
    server: JudgeServer, tmp_path: Path, redis: Redis
) -> None:
    """The model and its judge on one account (apiBase, key reference, model string) that admits 2 requests per
    window: the model's 2 requests and the judge's 2 are spread over two windows, never 3 in one."""
    from mcpfleet.runner.llm.client import close, complete
    from mcpfleet.runner.llm.target import llm_target

    name = f"openai/answer=correct?run={uuid.uuid4().hex}"
    account = {"model": name, "apiBase": server.url, "apiKeyEnv": KEY_ENV}
    spec = trial(tmp_path, {**account, "rateLimit": {"requestsPerMinute": 2}}, dict(account))
    env = env_of(redis)
    target = llm_target(spec.model, spec, TrialContext(env=env))
    try:
        for _ in range(2):
            await complete(target, [{"role": "user", "content": "hello"}], [])
        await judge_cases(spec, env, 2)
    finally:
        await close(target)
        await pace.close_clients()
    times = arrivals(server, name.removeprefix("openai/"))
    assert len(times) == 4, times
    assert max_in_window(times, WINDOW) <= 2, [t - times[0] for t in times]
    assert spec.judge is not None and spec.judge.rate_limit is not None  # lent by the plan: a pod needs no other


async def test_a_judge_with_its_own_rate_limit_is_paced_as_its_own_account(
    server: JudgeServer, tmp_path: Path, redis: Redis
) -> None:
    """The judge on another key with rateLimit 1 per window: its 2 calls a window apart; the model's account (no
    rateLimit) is not what paces it."""
    name = f"openai/answer=correct?run={uuid.uuid4().hex}"
    model = {"model": name, "apiBase": server.url, "apiKeyEnv": "OTHER_KEY"}
    judge = {"model": name, "apiBase": server.url, "apiKeyEnv": KEY_ENV, "rateLimit": {"requestsPerMinute": 1}}
    spec = trial(tmp_path, model, judge)
    try:
        await judge_cases(spec, env_of(redis), 2)
    finally:
        await pace.close_clients()
    times = arrivals(server, name.removeprefix("openai/"))
    assert len(times) == 2 and times[1] - times[0] >= WINDOW * 0.95, times


async def test_the_judges_spend_counts_toward_the_run_budget(server: JudgeServer, tmp_path: Path, redis: Redis) -> None:
    """The judge's reported usage (100 prompt + 20 output tokens per answer), priced by its pricing, is settled in
    the run's budget ledger and metered as the judge's cost; a request its reservation would take past the budget
    is not sent."""
    name = f"openai/answer=correct?run={uuid.uuid4().hex}"
    price = {"inputPerMillionTokens": 10.0, "outputPerMillionTokens": 10.0}
    model = {"model": name, "apiBase": server.url, "apiKeyEnv": "OTHER_KEY", "pricing": price}
    judge = {"model": name, "apiBase": server.url, "apiKeyEnv": KEY_ENV, "pricing": price}
    spec = trial(tmp_path, model, judge, budget=1.0)
    env = env_of(redis)
    ledger = pace.budget_key(pace.LOCAL_NAMESPACE, spec.run, None)
    cost = meters.COST.labels(pace.LOCAL_NAMESPACE, spec.run, "judge")  # the judge's model label
    before = cost._value.get()
    try:
        await judge_cases(spec, env, 2)
        [spent] = await pace.spent(redis.url, [ledger])
    finally:
        await pace.close_clients()
    assert spent == pytest.approx(2 * 120 * 10.0 / 1e6), spent
    assert cost._value.get() - before == pytest.approx(spent)
    assert len(arrivals(server, name.removeprefix("openai/"))) == 2

    # A budget below one request's reservation (its prompt and an 8,192-token output ceiling at 10 USD/M): not sent.
    name2 = f"openai/answer=correct?run={uuid.uuid4().hex}"
    tight = trial(tmp_path / "tight", {**model, "model": name2}, {**judge, "model": name2}, budget=0.05)
    try:
        with pytest.raises(JudgeError, match="spec.budget"):
            await judge_cases(tight, env, 1)
    finally:
        await pace.close_clients()
    assert arrivals(server, name2.removeprefix("openai/")) == []


def test_a_run_budget_with_an_unpriced_judge_is_refused_naming_its_pricing(tmp_path: Path) -> None:
    pack = make_tiny_pack(tmp_path / "pack")
    price = {"inputPerMillionTokens": 1.0, "outputPerMillionTokens": 1.0}
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "judged"},
        "spec": {
            "models": [{"name": "m", "model": "openai/unpriced-x", "apiKeyEnv": "K", "pricing": price}],
            "tasks": {"path": str(pack)},
            "toolcalls": {"judge": {"model": "openai/unpriced-judge", "apiKeyEnv": "K"}},
            "budget": {"usd": 5},
        },
    }
    [problem] = budget_problems(parse_evalrun(doc))
    assert problem.startswith("spec.toolcalls.judge.pricing:"), problem
    doc["spec"]["toolcalls"]["judge"]["pricing"] = price  # type: ignore[index]
    assert budget_problems(parse_evalrun(doc)) == []
    # a judge on a priced model's account is priced by it
    doc["spec"]["toolcalls"]["judge"] = {"model": "openai/unpriced-x", "apiKeyEnv": "K"}  # type: ignore[index]
    assert budget_problems(parse_evalrun(doc)) == []


def test_a_trial_pod_whose_judge_is_paced_gets_the_store(tmp_path: Path) -> None:
    """The model needs no pace, its judge does (its own rateLimit): the pod still gets the pace store, or its
    judge could not be paced there."""
    from mcpfleet.operator.manifests import trial_pod
    from mcpfleet.operator.settings import OperatorSettings

    pack = make_tiny_pack(tmp_path / "pack")
    ref = {"name": "k", "key": "k"}
    doc: dict[str, Any] = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "judged", "namespace": "evals", "uid": "u-1"},
        "spec": {
            "models": [{"name": "m", "model": "openai/gpt-5", "apiKeySecretRef": ref}],
            "tasks": {"path": str(pack)},
            "output": {"uri": "s3://mcpfleet-results/runs"},
            "toolcalls": {"judge": {"model": "openai/gpt-5-mini", "apiKeySecretRef": ref}},
        },
    }

    def runner_env() -> dict[str, Any]:
        run = parse_evalrun(doc)
        pod = trial_pod(run, plan(run, pack)[0], OperatorSettings(pace_store_url="redis://pace:6379/0"))
        runner = next(c for c in pod["spec"]["containers"] if c["name"] == "runner")
        return {e["name"]: e.get("value") for e in runner["env"]}

    assert pace.STORE_URL_ENV not in runner_env()
    doc["spec"]["toolcalls"]["judge"]["rateLimit"] = {"requestsPerMinute": 60}
    assert runner_env()[pace.STORE_URL_ENV] == "redis://pace:6379/0"


async def test_a_paced_judge_without_a_store_leaves_the_trial_alone(
    server: JudgeServer, scripted_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge that needs the pace and has no store is not run unpaced: its calls stay schema_valid, the trial's
    log says why, and the trial's outcome is the model's (it passes)."""
    from mcpfleet.runner.results.store import LocalStore
    from mcpfleet.runner.trial.engine import run_trial

    monkeypatch.delenv(pace.STORE_URL_ENV, raising=False)
    name = f"openai/answer=correct?run={uuid.uuid4().hex}"
    judge = {"model": name, "apiBase": server.url, "apiKeyEnv": KEY_ENV, "rateLimit": {"requestsPerMinute": 60}}
    spec = trial(tmp_path, {"model": "hosted_vllm/oracle", "apiBase": scripted_url}, judge)
    st = LocalStore(tmp_path / "out")
    result = await run_trial(spec, st, TrialContext(env={KEY_ENV: "sk-judge"}))
    assert result.passed, result.error
    log = (st.trial_dir(spec.trial_id) / "trial.log").read_text()
    assert "judge not started; calls stay schema_valid" in log and "no pace store is configured" in log, log
    assert arrivals(server, name.removeprefix("openai/")) == []
