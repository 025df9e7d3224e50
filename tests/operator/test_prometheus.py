"""The Grafana dashboard against a real Prometheus scraping a real run.

A real ``prometheus`` (scrape_interval 1s) scrapes the operator's /metrics (a static target: the operator
runs in a kopf thread with MCPFLEET_OPERATOR_METRICS_PORT on a free port) and the trial pods' runner
/metrics through ``file_sd_configs``: the test plays the part of Kubernetes service discovery, writing the
targets file from the test kubelet's ``port_maps`` (the host port its pod's ``metrics`` containerPort was
mapped to) as pods start, and dropping a pod's target when it ends. A small EvalRun runs end to end
(test_e2e's pieces: the API emulator, the kubelet, moto S3), then every PromQL expression of
charts/mcpfleet/dashboards/mcpfleet.json, and the ``run`` variable's ``label_values`` query, is evaluated
through Prometheus' HTTP API over the run's time range: each must parse and return a non-empty, finite series
for the run's namespace, and nothing for the same run name in another namespace (the ``namespace`` variable).

Prometheus batches discovery updates (about every 5 s), so a pod is first scraped 2 to 10 s after its
target is written; the trial pods here live long enough (init container, sidecar, runner start-up, a 1 s model
latency per turn) to be scraped several times, which rate() over a pod's counters needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet, free_port
from prometheus_client.parser import text_string_to_metric_families
from redisserver import Redis
from support import NS, evalrun, infra_errors, run_uid, s3_keys, status_of, wait_until

from mcpfleet.operator.settings import OperatorSettings

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "charts" / "mcpfleet" / "dashboards" / "mcpfleet.json"
PROMETHEUS = shutil.which("prometheus")
RUNNER_METRICS_PORT = OperatorSettings().metrics_port  # the pods' containerPort named `metrics`
# 6 turns of >= 1 s: a pod's runner counters are scraped several times while they move (the runner exits
# right after its last turn), which rate() over them needs; the idle model's single turn is rarely scraped.
ORACLE = {"name": "oracle", "model": "scripted/oracle?latency=1"}
IDLE = {"name": "idle", "model": "scripted/noop"}
TASKS = 3
# Grafana's variables, as a dashboard user would have them: the run picked, a 1m rate window, a range
# covering the whole run.
RATE_INTERVAL, RANGE = "1m", "10m"
# A trial id: <model>.<service>.<difficulty>.<category>.<task>.<attempt> (runner/plan/expand.py).
TRIAL_ID = re.compile(r"[a-z0-9-]+(\.[A-Za-z0-9_-]+){4}\.\d+")
DIGEST = re.compile(r"[0-9a-f]{10}")  # pod names carry a 10-hex digest of the trial

# Debian's prometheus is a test requirement (scripts/setup.sh --test installs it): never skipped.
assert PROMETHEUS is not None, "the prometheus binary is missing: run scripts/setup.sh --test"


# -- Prometheus ---------------------------------------------------------------------------------------


@dataclass
class Prom:
    url: str
    targets: Path
    operator_port: int
    proc: subprocess.Popen[bytes]
    log: Path
    ready_s: float = 0.0
    published: dict[str, float] = field(default_factory=dict)  # pod -> wall time its target was written
    dropped: dict[str, float] = field(default_factory=dict)  # pod -> wall time its target was removed


def write_targets(path: Path, ports: list[int]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([{"targets": [f"127.0.0.1:{p}" for p in sorted(ports)], "labels": {}}] if ports else []))
    os.replace(tmp, path)  # atomic: Prometheus never reads half a file


@pytest.fixture
def prometheus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Prom]:
    assert PROMETHEUS is not None
    operator_port, port = free_port(), free_port()
    monkeypatch.setenv("MCPFLEET_OPERATOR_METRICS_PORT", str(operator_port))
    home = tmp_path / "prometheus"
    home.mkdir()
    targets = home / "runners.json"
    write_targets(targets, [])
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "mcpfleet-operator", "static_configs": [{"targets": [f"127.0.0.1:{operator_port}"]}]},
            {"job_name": "mcpfleet-runner", "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}]},
        ],
    }
    (home / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = home / "prometheus.log"
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={home / 'prometheus.yml'}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    prom = Prom(f"http://127.0.0.1:{port}", targets, operator_port, proc, log)
    try:
        import urllib.request

        while True:
            assert proc.poll() is None, f"prometheus exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() - start < 30, f"prometheus not ready in 30 s:\n{log.read_text()[-3000:]}"
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=1) as r:  # noqa: S310 - localhost
                    if r.status == 200:
                        break
            time.sleep(0.1)
        prom.ready_s = time.monotonic() - start
        yield prom
    finally:
        proc.terminate()
        try:
            code = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("prometheus did not stop within 15 s of SIGTERM") from None
        assert code == 0, f"prometheus exited {code}:\n{log.read_text()[-3000:]}"


async def discover_runner_pods(kubelet: Kubelet, prom: Prom) -> None:
    """Service discovery for runner pods: a started pod's mapped `metrics` port is a target until it ends."""
    current: list[int] = []
    while True:
        ended = {pod for _, pod, what in kubelet.timeline if what == "end"}
        live = {
            pod: ports[RUNNER_METRICS_PORT]
            for pod, ports in list(kubelet.port_maps.items())
            if pod not in ended and RUNNER_METRICS_PORT in ports
        }
        now = time.time()
        for pod in live:
            prom.published.setdefault(pod, now)
        for pod in ended & prom.published.keys():
            prom.dropped.setdefault(pod, now)
        ports = sorted(live.values())
        if ports != current:
            write_targets(prom.targets, ports)
            current = ports
        await asyncio.sleep(0.1)


async def api(session: aiohttp.ClientSession, prom: Prom, path: str, **params: Any) -> dict[str, Any]:
    async with session.get(f"{prom.url}{path}", params=params) as r:
        return await r.json(content_type=None)


# -- the dashboard ------------------------------------------------------------------------------------


def dashboard_queries() -> list[tuple[str, str]]:
    """(what, expr) for every panel target and every query variable."""
    d = json.loads(DASHBOARD.read_text())
    out = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            for t in p.get("targets") or []:
                if t.get("expr"):
                    out.append((f"{p['title']} [{t.get('refId', '')}]", t["expr"]))
            walk(p.get("panels") or [])

    walk(d["panels"])
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict) and q.get("query"):
            out.append((f"${v['name']} variable", q["query"]))
    return out


def substitute(expr: str, run: str, namespace: str = NS) -> str:
    return (
        expr.replace("$namespace", namespace)
        .replace("$run", run)
        .replace("$__rate_interval", RATE_INTERVAL)
        .replace("$__range", RANGE)
        .replace("${run}", run)
    )


LABEL_VALUES = re.compile(r"^label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$")


def finite_values(result: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The series holding at least one finite value (Grafana draws nothing for NaN, an empty result is
    "No data")."""
    return [s for s in result if any(math.isfinite(float(v)) for _, v in s.get("values", []))]


def peak(result: list[dict[str, Any]]) -> float:
    """The largest finite value of a query_range result (for the report: what the panel would peak at)."""
    values = [float(v) for s in result for _, v in s["values"] if math.isfinite(float(v))]
    return max(values) if values else math.nan


# -- the test -----------------------------------------------------------------------------------------


async def test_dashboard_queries_against_a_real_prometheus(
    kube: RunningEmulator,
    prometheus: Prom,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prom = prometheus
    run = f"prom-{uuid.uuid4().hex[:6]}"
    oracle_trials = TASKS  # x 1 attempt
    manifest = tmp_path / "run.yaml"
    # Paced and priced, under a run budget, through a real pace store: the spend, rate-limit and 429 panels' series.
    pace_store = Redis(tmp_path)
    pace_store.start()
    monkeypatch.setenv("MCPFLEET_PACE_STORE_URL", pace_store.url)
    priced = {"pricing": {"inputPerMillionTokens": 1.0, "outputPerMillionTokens": 4.0}}
    models = [{**ORACLE, **priced, "rateLimit": {"requestsPerMinute": 600}}, {**IDLE, **priced}]
    manifest.write_text(
        yaml.safe_dump(
            evalrun(
                run, image_pack, s3, bucket, models=models, attempts=1, concurrency={"total": 3}, budget={"usd": 100}
            )
        )
    )
    t0 = time.time()
    timings: dict[str, float] = {"prometheus ready": prom.ready_s}
    async with aiohttp.ClientSession() as session, Kubelet(kube.url) as kubelet:
        discovery = asyncio.create_task(discover_runner_pods(kubelet, prom))
        try:
            if kubelet.warm is not None:  # pods forked from it run this checkout's code, as a cold exec may not
                await asyncio.to_thread(kubelet.warm.ready.wait, 60)
            with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
                kube.kubectl("apply", "--validate=false", "-f", str(manifest))
                status = await wait_until(
                    lambda: status_of(kube, run).get("phase") == "Succeeded" and status_of(kube, run),
                    120,
                    "the run to succeed",
                )
                timings["run (apply -> Succeeded)"] = time.time() - t0
                assert not infra_errors(s3, bucket)
                assert status["counts"]["passed"] == oracle_trials and status["counts"]["failed"] == TASKS
                await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to be deleted")

                # What the operator exposes, read directly.
                async with session.get(f"http://127.0.0.1:{prom.operator_port}/metrics") as r:
                    assert r.status == 200
                    exposition = await r.text()
                samples = [s for fam in text_string_to_metric_families(exposition) for s in fam.samples]
                ours = [s for s in samples if s.labels.get("run") == run]
                passed = [
                    s
                    for s in ours
                    if s.name == "mcpfleet_trials_total"
                    and s.labels["model"] == "oracle"
                    and s.labels["outcome"] == "passed"
                ]
                assert passed and sum(s.value for s in passed) == oracle_trials, passed
                rates = {s.labels["model"]: s.value for s in ours if s.name == "mcpfleet_pass_rate"}
                assert rates == {"oracle": 1.0, "idle": 0.0}, rates

                # Prometheus has the final state once it has scraped the last status write.
                async def scraped_final() -> bool:
                    body = await api(
                        session, prom, "/api/v1/query", query=f'mcpfleet_run_trials{{run="{run}",state="finished"}}'
                    )
                    res = body.get("data", {}).get("result", [])
                    return bool(res) and float(res[0]["value"][1]) == 2 * TASKS

                deadline = time.monotonic() + 15
                while not await scraped_final():
                    assert time.monotonic() < deadline, "Prometheus never saw the finished run"
                    await asyncio.sleep(0.5)

                # Every dashboard query, over the run's time range, until all answer (or 20 s pass).
                start, queries = t0 - 10, dashboard_queries()
                deadline = time.monotonic() + 20
                while True:
                    end = time.time() + 1  # the last 1 s step at or after the latest scrape
                    table, failures = [], []
                    for what, expr in queries:
                        lv = LABEL_VALUES.match(expr)
                        if lv:  # Grafana's label_values(metric, label): the label values API, as Grafana does
                            metric, label = lv.groups()
                            body = await api(
                                session,
                                prom,
                                f"/api/v1/label/{label}/values",
                                **{"match[]": substitute(metric, run), "start": str(start), "end": str(end)},
                            )
                            values = body.get("data") or []
                            table.append((what, expr, len(values), math.nan))
                            wanted = NS if label == "namespace" else run
                            if body.get("status") != "success" or wanted not in values:
                                failures.append(f"{what}: {expr} -> {body.get('error') or values}")
                            continue
                        # One run picked, "All" (allValue .*), and the run's name in another namespace: a
                        # same-named run there must not add to this one's panels.
                        for chosen, ns in ((run, NS), (".*", ".*"), (run, f"{NS}-other")):
                            if ns != NS and "$namespace" not in expr:
                                continue
                            query = substitute(expr, chosen, ns)
                            body = await api(
                                session,
                                prom,
                                "/api/v1/query_range",
                                query=query,
                                start=str(start),
                                end=str(end),
                                step="1",
                            )
                            if body.get("status") != "success":
                                failures.append(f"{what}: {query} -> {body.get('error')}")
                                continue
                            if ns == f"{NS}-other" and finite_values(body["data"]["result"]):
                                failures.append(f"{what}: {query} -> data of namespace {NS}: not filtered by namespace")
                            if chosen == run and ns == NS:
                                result = body["data"]["result"]
                                good = finite_values(result)
                                table.append((what, expr, len(good), peak(good)))
                                if not good:
                                    failures.append(
                                        f"{what}: {query} -> {len(result)} series, none with a finite value"
                                    )
                    if not failures or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(1)
                timings["queries answered (after Succeeded)"] = time.time() - t0 - timings["run (apply -> Succeeded)"]

                # Runner pods: how each was discovered and scraped (raw samples of `up`).
                body = await api(session, prom, "/api/v1/query", query='up{job="mcpfleet-runner"}[15m]')
                scrapes = {s["metric"]["instance"]: s["values"] for s in body["data"]["result"]}
                body = await api(
                    session, prom, "/api/v1/query", query=f'mcpfleet_runner_turns_total{{run="{run}"}}[15m]'
                )
                turns = {s["metric"]["instance"]: [v for _, v in s["values"]] for s in body["data"]["result"]}
                # No series carries a per-trial label (trial id, pod name, its digest, the run uid).
                body = await api(
                    session,
                    prom,
                    "/api/v1/series",
                    **{"match[]": '{job=~"mcpfleet-.+"}', "start": str(start), "end": str(time.time())},
                )
                series = body["data"]
        finally:
            discovery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await discovery
            pace_store.kill()
        port_maps = dict(kubelet.port_maps)
        ports_of = {ports[RUNNER_METRICS_PORT]: pod for pod, ports in port_maps.items()}
        pods = list(kubelet.started)
    # The operator's cleanup handler closed its metrics server.
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", prom.operator_port), timeout=1):
        pass

    print(f"\n{'query':<45} {'series':>6} {'max':>8}  expr")
    for what, expr, n, top in table:
        print(f"{what[:45]:<45} {n:>6} {top:>8.3g}  {expr}")
    print("\nrunner pod                        target written  first scrape  up scrapes  dropped  turns scraped")
    for inst, values in sorted(scrapes.items(), key=lambda kv: kv[1][0][0]):
        pod = ports_of.get(int(inst.rsplit(":", 1)[1]), inst)
        up = sum(1 for _, v in values if v == "1")
        first = min(float(ts) for ts, v in values if v == "1") if up else float("nan")
        wrote, dropped = prom.published.get(pod, math.nan), prom.dropped.get(pod, math.nan)
        print(
            f"{pod:<34} {wrote - t0:>13.1f}s {first - wrote:>+12.1f}s {up:>11} {dropped - t0:>7.1f}s  "
            f"{','.join(turns.get(inst, []))}"
        )
    print("\n" + "\n".join(f"{k}: {v:.1f} s" for k, v in timings.items()))

    assert not failures, "dashboard queries without data:\n" + "\n".join(failures)
    assert len(pods) == 2 * TASKS
    # Every oracle pod was discovered and scraped while up (an idle pod may be too short-lived for that).
    ups = {
        pod: sum(1 for _, v in scrapes.get(f"127.0.0.1:{ports[RUNNER_METRICS_PORT]}", []) if v == "1")
        for pod, ports in port_maps.items()
    }
    assert all(ups[p] >= 2 for p in pods if "-oracle-" in p), ups
    uid = run_uid(kube, run)
    trial_ids = {k.split("/trials/")[1].split("/")[0] for k in s3_keys(s3, bucket) if k.endswith("/result.json")}
    assert len(trial_ids) == 2 * TASKS
    per_trial = set(trial_ids) | set(pods) | {uid}
    suspicious = sorted(
        {
            f"{name}={value}"
            for labels in series + [dict(s.labels) for s in samples]
            for name, value in labels.items()
            if name != "__name__"
            and (
                value in per_trial
                or TRIAL_ID.fullmatch(value)
                or DIGEST.search(value)
                or any(t in value for t in per_trial)
            )
        }
    )
    assert not suspicious, f"labels that identify a trial: {suspicious[:10]}"
