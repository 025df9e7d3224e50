"""Trial pods an admission controller holds back: Kueue's plain-pod integration, and any pod scheduling gate.

A pod labelled ``kueue.x-k8s.io/queue-name`` (``spec.pod.labels``, or the chart's trialPods default) is Kueue's:
its webhook gives it the scheduling gate ``kueue.x-k8s.io/admission`` at creation, and Kueue removes the gate once
the queue's quota admits it. Until then no scheduler looks at the pod, so it is waiting for admission, not Pending
too long: never counted as a failed try, and its pending clock (``spec.pod.pendingTimeoutSeconds``) starts when the
gate goes. Pure: pods are the API's dicts; ``now`` is given.
"""

from __future__ import annotations

from typing import Any

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_GATE = "kueue.x-k8s.io/admission"


def gates(pod: dict[str, Any]) -> list[str]:
    """The pod's scheduling gates, by name (none: the scheduler may place it)."""
    out = []
    for gate in (pod.get("spec") or {}).get("schedulingGates") or []:
        name = gate.get("name") if isinstance(gate, dict) else None
        if isinstance(name, str) and name:
            out.append(name)
    return out


def waiting_admission(pod: dict[str, Any]) -> bool:
    """Whether the pod waits for admission: it has a scheduling gate (Kueue's, or another admission controller's:
    any gate keeps the scheduler away, and only its controller lifts it)."""
    return bool(gates(pod))


def queue_of(pod: dict[str, Any]) -> str | None:
    """The Kueue LocalQueue a pod is submitted to (its ``kueue.x-k8s.io/queue-name`` label), None for none."""
    name = ((pod.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    return name if isinstance(name, str) and name else None


def admission_seen(gated: bool, admitted: float | None, pod: dict[str, Any], now: float) -> tuple[bool, float | None]:
    """A try's admission after one event of its pod: (whether it still waits, when it was admitted). ``gated`` and
    ``admitted``: what was known before. A gate seen gone is an admission at ``now``, from which the pod's pending
    clock counts; a pod never seen gated keeps ``admitted`` as it was (None: the clock counts from its creation)."""
    if waiting_admission(pod):
        return True, None
    if gated:
        return False, now
    return False, admitted


def adopted_admission(pod: dict[str, Any], now: float) -> tuple[bool, float | None]:
    """A pod a restarted operator adopts: whether it waits for admission, and when its pending clock starts. A Kueue
    pod no longer gated was admitted at some time the pod does not record: its clock starts now (at worst the pod
    gets a whole pendingTimeoutSeconds more), never at its creation (which could end it at once, having waited in
    its queue for longer than that)."""
    if waiting_admission(pod):
        return True, None
    return False, (now if queue_of(pod) is not None else None)
