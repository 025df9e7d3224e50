"""Trial pods Kueue admits (its plain-pod integration): a pod labelled ``kueue.x-k8s.io/queue-name`` is created with
Kueue's scheduling gate and waits, gated, until Kueue's quota admits it. Such a pod is waiting for admission, not
Pending too long: never counted failed, never retried, never hit by pendingTimeoutSeconds, and status (and a metric)
says how many wait. The emulator stands in for Kueue's webhook (it gates the pod at creation) and the test plays
Kueue's admission (it removes the gate); the test kubelet, like a scheduler, never places a gated pod.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubeemu import KUEUE_GATE, RunningEmulator, run_kopf_in_thread
from kubelet import Kubelet
from support import NS, evalrun, infra_errors, status_of, wait_until

from mcpfleet.operator import metrics
from mcpfleet.operator.admission import admission_seen, adopted_admission, waiting_admission
from mcpfleet.operator.overdue import overdue_try
from mcpfleet.operator.runstate import InFlight, RunState
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.load import parse_evalrun

QUEUE = {"kueue.x-k8s.io/queue-name": "evals"}
TASK = "filesystem/standard/tiny/move_todo_{}"


@contextlib.contextmanager
def operator(kube: RunningEmulator) -> Iterator[Any]:
    with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS) as op:
        yield op


def queued_run(name: str, pack: Path, s3: str, bucket: str, *, tasks: int = 3, attempts: int = 1) -> dict[str, Any]:
    """Three trials, two at a time, submitted to Kueue's LocalQueue "evals", with the shortest Pending deadline."""
    return evalrun(
        name, pack, s3, bucket, models=[{"name": "oracle", "model": "scripted/oracle"}], attempts=attempts,
        concurrency={"total": 2}, tasks={"path": str(pack), "include": [TASK.format(n) for n in range(tasks)]},
        pod={"labels": QUEUE, "pendingTimeoutSeconds": 10},
    )  # fmt: skip


ENDED = ("Succeeded", "Failed")


def pods(kube: RunningEmulator) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in kube.objects("pods", NS)}


def gated(kube: RunningEmulator) -> list[str]:
    return sorted(n for n, p in pods(kube).items() if (p.get("spec") or {}).get("schedulingGates"))


def admit(kube: RunningEmulator, name: str) -> None:
    """Kueue's admission: the gate removed (the pod's only change Kubernetes allows to its gates)."""
    kube.patch("pods", NS, name, {"spec": {"schedulingGates": []}})


def creations(kube: RunningEmulator) -> int:
    return kube.call(lambda: kube.emulator.request_counts[("create", "pods")])


def counts(kube: RunningEmulator, name: str) -> dict[str, Any]:
    return status_of(kube, name).get("counts") or {}


def waiting_gauge(name: str) -> float:
    return metrics.REGISTRY.get_sample_value("mcpfleet_trials_waiting_admission", {"namespace": NS, "run": name}) or 0


async def test_a_gated_pod_waits_for_admission_uncounted_through_a_restart_and_runs_once_admitted(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, image_pack: Path
) -> None:
    """Two of three trials' pods are created, gated by Kueue's webhook, and nothing more (concurrency 2). Past
    pendingTimeoutSeconds, and through an operator restart, they still wait: never deleted, counted failed or
    retried, status.counts.waitingAdmission and the metric saying 2. Admitted one by one, each runs once and passes."""
    kube.emulator.kueue_webhook = True
    body = queued_run("queued", image_pack, s3, bucket)
    async with Kubelet(kube.url) as kubelet:
        with operator(kube):
            kube.create(body)
            await wait_until(lambda: counts(kube, "queued").get("waitingAdmission") == 2, 30, "two pods gated")
            first = {n: p["metadata"]["uid"] for n, p in pods(kube).items()}
            assert len(first) == 2 and gated(kube) == sorted(first), pods(kube)
            assert all(KUEUE_GATE in str(p["spec"]["schedulingGates"]) for p in pods(kube).values())
            assert waiting_gauge("queued") == 2
        with operator(kube):  # restarted: the gated pods are adopted, still waiting
            await asyncio.sleep(11)  # past spec.pod.pendingTimeoutSeconds (10 s) since their creation
            await wait_until(lambda: counts(kube, "queued").get("waitingAdmission") == 2, 10, "adopted, gated")
            assert {n: p["metadata"]["uid"] for n, p in pods(kube).items()} == first, "a gated pod was replaced"
            c = counts(kube, "queued")
            assert (c["running"], c["pending"], c["retries"], c["infraErrors"]) == (0, 1, 0, 0), c
            assert creations(kube) == 2 and kubelet.started == [], (creations(kube), kubelet.started)
            seen = set(first)
            for _ in range(3):  # Kueue admits one pod at a time; the run's third pod comes gated too
                name = await wait_until(lambda: next(iter(gated(kube)), None), 30, "a gated pod")
                admit(kube, name)
                await wait_until(lambda n=name: n in kubelet.started, 30, f"{name} to start once admitted")
                seen.add(name)
                # Never more live pods than the run's concurrency (a counted try's ended pod may wait up to 1 s
                # for its bulk delete: operator/deletes.py).
                live = {n: p for n, p in pods(kube).items() if (p.get("status") or {}).get("phase") not in ENDED}
                assert len(live) <= 2, pods(kube)
            final = await wait_until(
                lambda: status_of(kube, "queued").get("phase") in ("Succeeded", "Failed") and status_of(kube, "queued"),
                60,
                "the run to end",
            )
    c = final["counts"]
    assert final["phase"] == "Succeeded", final
    assert (c["passed"], c["retries"], c["infraErrors"], c["waitingAdmission"]) == (3, 0, 0, 0), c
    assert creations(kube) == 3 and sorted(kubelet.started) == sorted(seen), (creations(kube), kubelet.started)
    assert infra_errors(s3, bucket) == []


async def test_suspend_deletes_gated_pods_releasing_their_quota_without_counting_them(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str, tiny_pack: Path
) -> None:
    """spec.suspend deletes the run's gated pods (so Kueue frees the quota they reserve) without charging a try;
    the resume creates them again, gated, under the same names."""
    kube.emulator.kueue_webhook = True
    body = queued_run("held", tiny_pack, s3, bucket, tasks=1, attempts=3)
    with operator(kube):
        kube.create(body)
        await wait_until(lambda: counts(kube, "held").get("waitingAdmission") == 2, 30, "two pods gated")
        names = gated(kube)
        kube.patch("evalruns", NS, "held", {"spec": {"suspend": True}})
        await wait_until(lambda: not pods(kube), 20, "the gated pods to be deleted")
        await wait_until(lambda: status_of(kube, "held").get("phase") == "Suspended", 20, "Suspended")
        await wait_until(lambda: counts(kube, "held").get("waitingAdmission") == 0, 10, "none waiting")
        c = counts(kube, "held")
        assert (c["pending"], c["running"], c["retries"], c["infraErrors"]) == (3, 0, 0, 0), c
        assert waiting_gauge("held") == 0
        kube.patch("evalruns", NS, "held", {"spec": {"suspend": False}})
        await wait_until(lambda: counts(kube, "held").get("waitingAdmission") == 2, 30, "gated again")
        assert gated(kube) == names and creations(kube) == 4, (gated(kube), creations(kube))
        assert counts(kube, "held")["retries"] == 0


# -- the decisions, on plain data ---------------------------------------------------------------------


def gated_pod(*gates: str) -> dict[str, Any]:
    return {"metadata": {"labels": QUEUE}, "spec": {"schedulingGates": [{"name": g} for g in gates]}}


def test_the_pending_clock_of_a_gated_try_starts_at_its_admission(tiny_pack: Path) -> None:
    """A try gated for longer than pendingTimeoutSeconds is not overdue; once admitted it has the whole timeout."""
    run = parse_evalrun(queued_run("r", tiny_pack, "http://s3", "some-bucket", tasks=1))
    st = RunState.plan(plan(run, tiny_pack), 1)
    trial = next(iter(st.trials.values()))
    st.launched(trial, "p", 0, 1000.0)
    inf: InFlight = st.in_flight[trial.trial_id]

    def due(now: float) -> Any:
        return overdue_try(inf, now, run_seconds=3600, pending_seconds=600, slack=30)

    assert due(1700.0) is not None  # ungated: Pending too long
    inf.gated, inf.admitted = admission_seen(inf.gated, inf.admitted, gated_pod(KUEUE_GATE), 1001.0)
    assert inf.gated and due(5000.0) is None and st.counts()["waitingAdmission"] == 1
    assert st.counts()["running"] == 0
    inf.gated, inf.admitted = admission_seen(inf.gated, inf.admitted, gated_pod(), 5000.0)
    assert (inf.gated, inf.admitted) == (False, 5000.0)
    assert due(5599.0) is None
    late = due(5601.0)
    assert late is not None and not late.count and "of its admission" in late.reason
    assert st.counts()["running"] == 1 and st.counts()["waitingAdmission"] == 0


def test_an_adopted_pod_waits_while_gated_and_an_admitted_kueue_pod_gets_a_fresh_pending_clock() -> None:
    assert adopted_admission(gated_pod(KUEUE_GATE), 50.0) == (True, None)
    assert adopted_admission(gated_pod(), 50.0) == (False, 50.0)  # admitted at an unknown time: from now
    assert adopted_admission({"metadata": {"labels": {}}, "spec": {}}, 50.0) == (False, None)  # no Kueue: creation
    assert waiting_admission(gated_pod("other.example/gate")) and not waiting_admission(gated_pod())
