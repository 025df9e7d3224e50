"""A run budget on Kubernetes (issue 47), end to end: the operator, the test kubelet running trial pods as local
processes, a real redis-server holding the budget's ledger, the metered scripted provider priced by the spec. The
budget fits one trial and not the next: the cut trial is budget_exhausted (not scored), no new pod starts for
it, a condition and one event name the budget; raising the budget (an edit) runs the cut trial, which passes."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest
from kubeemu import RunningEmulator
from kubelet import Kubelet
from redisserver import Redis
from support import NS, evalrun, status_of, wait_until
from test_faults import ONE_TASK, events, finished_run, operator, pod_creations, records

PRICE = 1000.0  # USD per million tokens: a trial of the tiny task costs about 2.1 USD
# Each request reserves about 2 USD first (its prompt as estimated, 14 tools' schemas included, plus its 100-token
# output ceiling): the first trial needs at most about 3.9 USD of room, the second is cut by its fifth request.
BUDGET = 4.5


async def test_a_run_budget_cuts_the_next_trial_and_raising_it_runs_it(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
    scripted_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    redis = Redis(tmp_path)
    redis.start()
    monkeypatch.setenv("MCPFLEET_PACE_STORE_URL", redis.url)
    account = uuid.uuid4().hex
    model = {
        "name": "m",
        "model": f"hosted_vllm/oracle?account={account}",
        "apiBase": scripted_url,
        "params": {"maxTokens": 100},
        "pricing": {"inputPerMillionTokens": PRICE, "outputPerMillionTokens": PRICE},
    }
    body = evalrun(
        "budgeted",
        image_pack,
        s3,
        bucket,
        models=[model],
        attempts=2,
        concurrency={"total": 1},  # one trial after the other: the first fits the budget, the second does not
        tasks={"path": str(image_pack), "include": [ONE_TASK]},
        budget={"usd": BUDGET},
    )
    try:
        async with Kubelet(kube.url) as kubelet:
            if kubelet.warm is not None:
                await asyncio.to_thread(kubelet.warm.ready.wait, 60)
            with operator(kube):
                kube.create(body)

                def stopped() -> dict[str, object] | None:
                    st = status_of(kube, "budgeted")
                    cond = {c["type"]: c for c in st.get("conditions", [])}
                    return st if cond.get("ModelsStopped", {}).get("status") == "True" else None

                status = await wait_until(stopped, 180, "the budget to stop the model")
                await wait_until(lambda: events(kube, "BudgetExhausted"), 10, "the BudgetExhausted event")
                await wait_until(lambda: not kube.objects("pods", NS), 30, "the cut trial's pod to be deleted")
                await asyncio.sleep(2.0)  # nothing more is launched while the budget stays spent
                assert pod_creations(kube) == 2, kubelet.started  # the trial that fit, then the one cut: no retry
                recs = records(s3, bucket)
                assert sorted((r["passed"], r["failure"]) for r in recs.values()) == [
                    (False, "budget_exhausted"),
                    (True, None),
                ], recs
                cond = {c["type"]: c for c in status_of(kube, "budgeted")["conditions"]}
                assert cond["ModelsStopped"]["reason"] == "BudgetExhausted", cond
                assert "spec.budget of 4.5 USD" in cond["ModelsStopped"]["message"], cond["ModelsStopped"]
                [event] = events(kube, "BudgetExhausted")
                assert "spec.budget of 4.5 USD" in event["message"], event
                st = status_of(kube, "budgeted")
                assert st["notScored"]["budget_exhausted"] == 1 and st["counts"]["passed"] == 1, st
                assert 0 < st["spend"]["usd"] <= BUDGET, st["spend"]  # the records' cost: within the budget
                m = httpx.get(f"{scripted_url}/meter", timeout=10).json()["accounts"][account]
                bill = (m["prompt_tokens"] + m["output_tokens"]) * PRICE / 1e6  # what the provider would bill
                assert 0 < bill <= BUDGET, (bill, m)

                kube.patch("evalruns", NS, "budgeted", {"spec": {"budget": {"usd": 100}}})
                status = await finished_run(kube, "budgeted", timeout=180)
    finally:
        redis.kill()
    assert pod_creations(kube) == 3
    assert status["counts"]["passed"] == 2 and status["notScored"]["budget_exhausted"] == 0, status
    assert all(r["passed"] for r in records(s3, bucket).values())
