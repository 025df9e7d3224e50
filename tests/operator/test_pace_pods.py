"""Two trial pods share one rate limit (issue 47): the operator points every pod of a paced model at the pace
store (MCPFLEET_PACE_STORE_URL, here a real redis-server), and the pods, run by the test kubelet as local
processes, pace their requests through it: the metered provider (the scripted server's account) refuses none
and never sees more than the limit within a window, while two pods run at once."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest
import yaml
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from redisserver import Redis
from support import NS, evalrun, infra_errors, status_of, wait_until

WINDOW = 3.0


def max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u < t + window) for i, t in enumerate(times)), default=0)


async def test_two_trial_pods_share_one_limit(
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
    monkeypatch.setenv("MCPFLEET_PACE_WINDOW_SECONDS", str(WINDOW))
    account = uuid.uuid4().hex
    model = {
        "name": "m",
        "model": f"hosted_vllm/oracle?rpm=4&window={WINDOW:g}&account={account}",
        "apiBase": scripted_url,
        "rateLimit": {"requestsPerMinute": 4},
    }
    doc = evalrun("paced", image_pack, s3, bucket, models=[model], attempts=1, concurrency={"total": 2})
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    peak = 0
    try:
        async with Kubelet(kube.url) as kubelet:
            if kubelet.warm is not None:  # pods forked from it run this checkout's code, as a cold exec may not
                await asyncio.to_thread(kubelet.warm.ready.wait, 60)
            with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
                kube.kubectl("apply", "--validate=false", "-f", str(manifest))
                pods = await wait_until(lambda: kube.objects("pods", NS), 60, "the first trial pods")
                runner = next(c for c in pods[0]["spec"]["containers"] if c["name"] == "runner")
                env = {e["name"]: e.get("value") for e in runner["env"]}
                assert env["MCPFLEET_PACE_STORE_URL"] == redis.url and env["MCPFLEET_NAMESPACE"] == NS

                def done() -> bool:
                    nonlocal peak
                    peak = max(peak, len(kube.objects("pods", NS)))
                    return status_of(kube, "paced").get("phase") in ("Succeeded", "Failed")

                await wait_until(done, 240, "the run to end")
                status = status_of(kube, "paced")
            assert kubelet is not None
    finally:
        redis.kill()
    assert status["phase"] == "Succeeded", status
    assert status["counts"]["passed"] == 3, status["counts"]
    assert not infra_errors(s3, bucket)
    assert peak >= 2, "two pods ran at once"
    m = httpx.get(f"{scripted_url}/meter", timeout=10).json()["accounts"][account]
    assert m["refused"] == 0, m
    assert m["accepted"] == 18, m
    assert max_in_window(m["accepted_at"], WINDOW) <= 4, sorted(m["accepted_at"])
