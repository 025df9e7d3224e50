"""kopf wiring: a daemon per EvalRun runs its reconciler; pod events are routed to that run's queue."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from . import metrics
from .kube import PLURAL, VERSION, Kube, api_client
from .manifests import GROUP, LABEL_RUN_UID
from .reconciler import Reconciler, Shared
from .settings import OperatorSettings

MANAGED_BY = "app.kubernetes.io/managed-by"


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    cfg = OperatorSettings.from_env()
    memo["shared"] = Shared(settings=cfg, kube=Kube(await api_client()))
    if cfg.operator_metrics_port:
        try:
            memo["metrics_server"] = metrics.serve(cfg.operator_metrics_port)
        except OSError as exc:  # metrics must never keep the operator from running
            logging.getLogger(__name__).warning("metrics port %s unavailable: %s", cfg.operator_metrics_port, exc)
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 600
    settings.networking.request_timeout = 60
    # Filter trial pods on the server: the operator never receives the namespace's other pods at all.
    settings.watching.label_selectors["v1", "pods"] = f"{MANAGED_BY}=mcpfleet,{LABEL_RUN_UID}"


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
    await Reconciler(memo["shared"], body, logger).main(stopped)


@kopf.on.event("v1", "pods", labels={LABEL_RUN_UID: kopf.PRESENT, MANAGED_BY: "mcpfleet"})
async def pod_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Hand the pod's new state to its run; the run's reconciler does all counting."""
    shared: Shared = memo["shared"]
    queue = shared.runs.get((body.metadata.labels or {}).get(LABEL_RUN_UID, ""))
    if queue is not None:
        queue.put_nowait((event.get("type") or "MODIFIED", dict(body)))
