"""What of a trial pod's event the operator keeps while the event waits in its run's queue.

A trial pod carries its trial's spec (the runner's environment, the containers' arguments, probes, mounts): about
6 KB of JSON, several times that as Python objects, and a run turning over hundreds of pods a second holds
thousands of events at once. The reconciler reads a pod's metadata, its status (phases, conditions, container
states: what every decision in podview.py and beside it reads) and a few fields of its spec; the rest is dropped
before the event is queued. Pure.
"""

from __future__ import annotations

from typing import Any

# The spec fields kept: where it runs, its gates, its graceful-deletion and deadline settings, its containers by name.
SPEC_KEPT = (
    "nodeName",
    "schedulingGates",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "restartPolicy",
    "priorityClassName",
    "runtimeClassName",
)
CONTAINER_KEPT = ("name", "restartPolicy")  # a container by name, and whether it is a native sidecar


def _containers(items: Any) -> list[dict[str, Any]]:
    return [{k: c[k] for k in CONTAINER_KEPT if k in c} for c in items or [] if isinstance(c, dict)]


def essentials(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as the reconciler reads it: metadata (without managedFields), status whole, the spec's SPEC_KEPT
    fields and each container's CONTAINER_KEPT fields; the containers' environments, arguments, mounts and probes
    dropped."""
    meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k != "managedFields"}
    spec = pod.get("spec") or {}
    slim: dict[str, Any] = {k: spec[k] for k in SPEC_KEPT if k in spec}
    for key in ("initContainers", "containers"):
        if key in spec:
            slim[key] = _containers(spec[key])
    out = {"metadata": meta, "spec": slim, "status": pod.get("status") or {}}
    return {**{k: pod[k] for k in ("apiVersion", "kind") if k in pod}, **out}
