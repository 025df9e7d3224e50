"""The shared pace and budgets end to end (issue 47): `mcpfleet run`'s worker processes against a rate-limited,
metered provider (the scripted model server's ``rpm``/``window``/``account`` options, reached over HTTP through
LiteLLM as ``hosted_vllm/...`` with an ``apiBase``, as any provider), through the run's own redis-server.

The pace window is shortened to a few seconds on both sides (``MCPFLEET_PACE_WINDOW_SECONDS`` for the pacer, the
model string's ``window`` for the provider): a limit of N per minute is then N per window.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import make_tiny_pack

from mcpfleet.runner.launch.launcher import execute
from mcpfleet.runner.llm.pace import WINDOW_ENV
from mcpfleet.runner.spec.load import parse_evalrun

WINDOW = 3.0
PRICE = 1000.0  # USD per million tokens, input and output alike: a scripted request costs about 0.2 USD
MCPFLEET = Path(sys.executable).parent / "mcpfleet"


def meter(url: str, account: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/meter", timeout=10).json()["accounts"].get(account) or {})


def bill(m: dict[str, Any]) -> float:
    """What the provider would bill the account: its metered tokens at the price."""
    return (m.get("prompt_tokens", 0) + m.get("output_tokens", 0)) * PRICE / 1e6


def max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u < t + window) for i, t in enumerate(times)), default=0)


def evalrun(
    tmp_path: Path, url: str, account: str, *, rpm: int | None, budget: float | None = None, concurrency: int = 2
) -> dict[str, Any]:
    pack = make_tiny_pack(tmp_path / "pack", tasks=3)  # the session server's tiny pack: its oracle knows them
    model: dict[str, Any] = {
        "name": "m",
        "model": f"hosted_vllm/oracle?rpm=4&window={WINDOW:g}&account={account}",
        "apiBase": url,
        "params": {"maxTokens": 100},
    }
    if rpm is not None:
        model["rateLimit"] = {"requestsPerMinute": rpm}
    if budget is not None:
        model["pricing"] = {"inputPerMillionTokens": PRICE, "outputPerMillionTokens": PRICE}
    spec: dict[str, Any] = {
        "models": [model],
        "tasks": {"path": str(pack)},
        "output": {"uri": str(tmp_path / "runs")},
        "concurrency": {"total": concurrency},
    }
    if budget is not None:
        spec["budget"] = {"usd": budget}
    return {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "paced"}, "spec": spec}


def results(folder: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for d in sorted((folder / "trials").iterdir()):
        r = json.loads((d / "result.json").read_text())
        out[r["trial_id"]] = r
    return out


def test_two_workers_share_one_limit(scripted_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two worker processes run three trials (18 requests) against an account that admits 4 per window: paced by
    the run's redis-server, the provider refuses none, and never more than 4 arrive within a window."""
    monkeypatch.setenv(WINDOW_ENV, str(WINDOW))
    account = uuid.uuid4().hex
    summary, folder = execute(
        parse_evalrun(evalrun(tmp_path, scripted_url, account, rpm=4)), tmp_path, show_progress=False
    )
    rs = results(Path(folder))
    assert [r["passed"] for r in rs.values()] == [True, True, True], [r["error"] for r in rs.values()]
    m = meter(scripted_url, account)
    assert m["refused"] == 0, m
    assert m["accepted"] == 18, m  # 6 requests per trial: more than the limit lets through in one window
    assert max_in_window(m["accepted_at"], WINDOW) <= 4, sorted(m["accepted_at"])
    # the requests were spread over the windows they needed, not sent at once and refused
    span = max(m["accepted_at"]) - min(m["accepted_at"])
    assert span >= (18 / 4 - 1) * WINDOW, span
    # ... and in flight at once, two workers' requests (the limit is shared, not per process)
    assert not summary["stopped"]


def test_without_a_rate_limit_the_provider_refuses(scripted_url: str, tmp_path: Path) -> None:
    """The same run without rateLimit: the provider answers 429s (the trials still pass, after its waits). What
    the pace prevents."""
    account = uuid.uuid4().hex
    execute(parse_evalrun(evalrun(tmp_path, scripted_url, account, rpm=None)), tmp_path, show_progress=False)
    assert meter(scripted_url, account)["refused"] > 0


def mcpfleet_run(path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, WINDOW_ENV: str(WINDOW), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [str(MCPFLEET), "run", str(path), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=path.parent,
        stdin=subprocess.DEVNULL,
    )


def test_budget_reached_mid_trial_then_resumed_with_more(scripted_url: str, tmp_path: Path) -> None:
    """A run budget that one trial fits and the second does not: the second is cut short before the request that
    could pass the budget (budget_exhausted, not scored), the third never starts, and `mcpfleet run` exits 7
    naming the budget. The provider's bill stays under the budget. Raised and resumed: the cut and the unrun
    trials run and pass, the finished one is kept, and the ledger counts both invocations."""
    account = uuid.uuid4().hex
    doc = evalrun(tmp_path, scripted_url, account, rpm=4, budget=5.0, concurrency=1)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    first = mcpfleet_run(path)
    assert first.returncode == 7, (first.returncode, first.stdout[-2000:], first.stderr[-2000:])
    assert "budget_exhausted: spec.budget of 5 USD" in first.stderr, first.stderr
    assert "Raise the budget" in first.stderr
    folder = tmp_path / "runs" / "paced"
    rs = results(folder)
    outcomes = sorted((r["passed"], r["failure"]) for r in rs.values())
    assert outcomes == [(False, "budget_exhausted"), (True, None)], outcomes
    cut = next(r for r in rs.values() if r["failure"] == "budget_exhausted")
    assert cut["turns"], "cut short mid-trial, after some requests"
    m = meter(scripted_url, account)
    assert m["refused"] == 0
    assert 0 < bill(m) <= 5.0, bill(m)
    spend = json.loads((folder / "spend.json").read_text())
    assert spend["budgets"]["spec.budget"]["spent"] == pytest.approx(bill(m), rel=1e-6)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["stopped"]["m"].startswith("budget_exhausted: spec.budget")

    doc["spec"]["budget"] = {"usd": 50.0}
    path.write_text(yaml.safe_dump(doc))
    second = mcpfleet_run(path)
    assert second.returncode == 0, (second.stdout[-2000:], second.stderr[-2000:])
    rs2 = results(folder)
    assert sorted(r["passed"] for r in rs2.values()) == [True, True, True]
    kept = next(tid for tid, r in rs.items() if r["passed"])
    assert rs2[kept]["finished_at"] == rs[kept]["finished_at"], "the finished trial is not run again"
    m2 = meter(scripted_url, account)
    spend2 = json.loads((folder / "spend.json").read_text())
    assert spend2["budgets"]["spec.budget"]["spent"] == pytest.approx(bill(m2), rel=1e-6)  # both invocations
    assert bill(m2) <= 50.0


def test_a_budget_without_a_price_is_refused(tmp_path: Path) -> None:
    doc = evalrun(tmp_path, "http://127.0.0.1:9/v1", "x", rpm=None)
    doc["spec"]["models"][0]["budget"] = {"usd": 1}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = subprocess.run([str(MCPFLEET), "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "spec.models[0].pricing" in out.stderr and "spec.models[0].budget" in out.stderr, out.stderr
    assert "inputPerMillionTokens" in out.stderr


def test_a_model_without_its_key_is_named_by_validate(tmp_path: Path) -> None:
    """§5: openai/gpt-4o with no apiKeyEnv and no OPENAI_API_KEY: validate names the missing key."""
    doc = evalrun(tmp_path, "http://127.0.0.1:9/v1", "x", rpm=None)
    doc["spec"]["models"] = [{"name": "g", "model": "openai/gpt-4o"}]
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    out = subprocess.run(
        [str(MCPFLEET), "validate", str(path)], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert out.returncode != 0
    assert "spec.models[0]" in out.stderr and "OPENAI_API_KEY" in out.stderr and "apiKeyEnv" in out.stderr, out.stderr


def test_the_runs_redis_server_dies_with_it(scripted_url: str, tmp_path: Path) -> None:
    """`mcpfleet run` starts its pace store only when a model sets rateLimit or a budget applies; SIGKILLed, the
    run takes it along (the kernel's parent-death signal): no redis-server outlives its run."""
    from proctree import children, processes_naming

    account = uuid.uuid4().hex
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(evalrun(tmp_path, scripted_url, account, rpm=1)))  # a slow run: ~1 min
    marker = f"pace-marker-{uuid.uuid4().hex}"
    env = {**os.environ, WINDOW_ENV: str(WINDOW), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PACE_TEST_MARKER": marker}
    proc = subprocess.Popen(
        [str(MCPFLEET), "run", str(path), "--no-progress"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not meter(scripted_url, account).get("accepted"):
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not get to its first request"
            time.sleep(0.1)
        # (redis-server writes its title over its environment: found as the run's child, not by the marker)
        stores = [p for p in children(proc.pid) if "redis-server" in Path(f"/proc/{p}/cmdline").read_text()]
        assert len(stores) == 1, [Path(f"/proc/{p}/cmdline").read_text() for p in children(proc.pid)]
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 5
        while Path(f"/proc/{stores[0]}").exists() and "Z" not in _state(stores[0]):
            assert time.monotonic() < deadline, "the run's redis-server outlived it"
            time.sleep(0.05)
        deadline = time.monotonic() + 30  # the workers follow within their grace (worker._watch_parent)
        while processes_naming(marker):
            assert time.monotonic() < deadline, processes_naming(marker)
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid, _ in processes_naming(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_no_store_without_rate_limits_or_budgets(scripted_url: str, tmp_path: Path) -> None:
    """A run whose models set neither rateLimit nor a budget starts no redis-server (nor needs one installed)."""
    from mcpfleet.runner.launch import launcher

    started: list[object] = []

    def refuse() -> object:
        started.append(1)
        raise AssertionError("a pace store was started")

    doc = evalrun(tmp_path, scripted_url, uuid.uuid4().hex, rpm=None)
    doc["spec"]["models"][0]["model"] = "hosted_vllm/oracle"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("mcpfleet.runner.launch.pacestore.local_store", refuse)
        summary, _ = launcher.execute(parse_evalrun(doc), tmp_path, show_progress=False)
    assert started == [] and summary["trials_recorded"] == 3
