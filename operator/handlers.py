"""kopf wiring: a daemon per EvalRun runs its reconciler; pod events are routed to that run's queue.

Of several operator replicas only one acts (kopf peering, on by default): the others are paused by kopf
(no watching, no daemons) until the active one is gone, then one of them takes over and rebuilds each run
from its pods and records."""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf

from mcpfleet.operator import metrics
from mcpfleet.operator.kube import PLURAL, VERSION, Kube, api_client
from mcpfleet.operator.login import connection
from mcpfleet.operator.manifests import GROUP, LABEL_RUN_UID
from mcpfleet.operator.phase import ACTIVE, Phase
from mcpfleet.operator.podevent import essentials
from mcpfleet.operator.reconciler import Reconciler
from mcpfleet.operator.settings import OperatorSettings, SettingsError
from mcpfleet.operator.shared import Shared

MANAGED_BY = "app.kubernetes.io/managed-by"
POD_WORKER_IDLE_SECONDS = 0.5


class NoDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base (an object's last handled state) serves on.create/update/delete/resume handlers only, and
    the operator has none; yet kopf builds it on every watch event, deep-copying the whole object, and a trial
    pod carries its trial's spec: a quarter of the operator's CPU on a 5,080-pod sweep. Nothing is built or read
    here (tests/operator/test_entrypoints.py fails if a changing handler is ever registered)."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None


class QuietPodEvents(logging.Filter):
    """Drop kopf's "Handler 'pod_event' succeeded." line: three per trial, saying nothing (failures still log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "Handler 'pod_event' succeeded."


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    try:
        cfg = OperatorSettings.from_env()
    except SettingsError as exc:  # the install's values, not a run's: stop with the reason rather than retry
        raise kopf.PermanentError(str(exc)) from None
    memo["shared"] = Shared(settings=cfg, kube=Kube(await api_client(settings)))
    if cfg.operator_metrics_port:
        try:
            memo["metrics_server"] = metrics.serve(cfg.operator_metrics_port)
        except OSError as exc:  # metrics must never keep the operator from running
            logging.getLogger(__name__).warning("metrics port %s unavailable: %s", cfg.operator_metrics_port, exc)
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.diffbase_storage = NoDiffBase()
    if not any(isinstance(f, QuietPodEvents) for f in logging.getLogger("kopf.objects").filters):
        logging.getLogger("kopf.objects").addFilter(QuietPodEvents())
    settings.posting.level = logging.INFO
    # A pod's event worker exits once its backlog has been empty this long (kopf's default: 5 s). Each worker holds
    # its pod's last body, so at a few hundred trials a second the lingering ones were ~1,800 pod bodies, most of
    # them of pods already gone, and the largest share of the operator's memory (docs/benchmarks.md, Operator
    # memory). A trial's next pod event comes seconds to minutes later and starts a worker anew, at a task's cost.
    settings.queueing.idle_timeout = POD_WORKER_IDLE_SECONDS
    settings.watching.server_timeout = 600
    settings.networking.request_timeout = 60
    # Filter trial pods on the server: the operator never receives the namespace's other pods at all.
    settings.watching.label_selectors["v1", "pods"] = f"{MANAGED_BY}=mcpfleet,{LABEL_RUN_UID}"
    configure_peering(settings, cfg)
    memo["shared"].peering = not settings.peering.standalone


def configure_peering(settings: kopf.OperatorSettings, cfg: OperatorSettings) -> None:
    """kopf peering, mandatory: the operator starts paused and acts only while no live peer outranks it
    (kopf pauses every replica of a tie, so priorities never tie: by default the earlier start ranks higher,
    to the microsecond). Without the peering CRD or object it stays paused (`mcpfleet operator` creates the
    object if it can). An operator started standalone (`kopf run --standalone`) stays standalone."""
    if not cfg.peering or settings.peering.standalone:  # MCPFLEET_PEERING=false, or `kopf run --standalone`
        settings.peering.standalone = True
        return
    settings.peering.standalone = False
    settings.peering.mandatory = True
    settings.peering.name = cfg.peering_name
    settings.peering.lifetime = cfg.peering_lifetime
    priority = cfg.peering_priority
    settings.peering.priority = -(time.time_ns() // 1000) if priority is None else priority


@kopf.on.login()
async def login(settings: kopf.OperatorSettings, logger: Any, **_: Any) -> kopf.ConnectionInfo:
    """kopf's watches log in as the operator's own calls do (login.py), not with a client library kopf finds."""
    return await connection(settings, logger)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    shared: Shared | None = memo.get("shared")
    if shared is not None:
        await shared.kube.api.close()
    server = memo.get("metrics_server")
    if server is not None:
        server[0].shutdown()
        server[0].server_close()


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10.0)
async def run_evalrun(body: kopf.Body, memo: kopf.Memo, logger: Any, stopped: kopf.DaemonStopped, **_: Any) -> None:
    """Owns one EvalRun from start to summary; kopf restarts it on operator restart (resume)."""
    shared: Shared = memo["shared"]
    cfg = shared.settings
    if shared.peering and (
        Phase.read(body.status.get("phase")) in ACTIVE
        or time.monotonic() - shared.born < 2 * cfg.peering_settle_seconds
    ):
        # A run in flight may have been driven by another replica until a moment ago (a takeover), or a peer
        # starting at the same time may not be seen yet: wait, acting on nothing, before taking it.
        await stopped.wait(cfg.peering_settle_seconds)
        if stopped:
            return
    await Reconciler(shared, body, logger).main(stopped)


@kopf.on.event("v1", "pods", labels={LABEL_RUN_UID: kopf.PRESENT, MANAGED_BY: "mcpfleet"})
async def pod_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Hand the pod's new state to its run; the run's reconciler does all counting."""
    shared: Shared = memo["shared"]
    queue = shared.runs.get((body.metadata.labels or {}).get(LABEL_RUN_UID, ""))
    if queue is not None:
        # Only what the reconciler reads: an event may wait in the queue behind thousands of others (podevent.py).
        queue.put_nowait((event.get("type") or "MODIFIED", essentials(dict(body))))
