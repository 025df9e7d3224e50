"""Reading trial pods: what a pod's state says of its try, which pods a rebuild adopts, which vanished unreported.

Pure: pods are the API's dicts, tries are runstate's; nothing here calls the API or reads the clock (``now`` is
given), so each decision is tested on plain data (tests/operator/test_podview.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mcpfleet.operator.manifests import ANN_TRIAL, LABEL_RETRY
from mcpfleet.operator.phase import POD_ENDED, PodPhase
from mcpfleet.operator.runstate import InFlight, RunState
from mcpfleet.operator.scheduling import restarted
from mcpfleet.operator.waiting import STUCK_REASONS
from mcpfleet.runner.results.outcome import INFRA_ERROR
from mcpfleet.runner.results.records import epoch_seconds


def epoch(value: object, now: float) -> float:
    """An API or status timestamp in epoch seconds; ``now`` when it is missing or unreadable (a hand-edited status
    must not stop the run's reconciling)."""
    t = epoch_seconds(value)
    return t if t is not None else now


def trial_of(pod: dict[str, Any]) -> str:
    """The trial id a pod runs (its annotation); "" for none."""
    tid = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANN_TRIAL)
    return tid if isinstance(tid, str) else ""


def ended(pod: dict[str, Any]) -> bool:
    """Every container of the pod stopped, as its node reports."""
    return (pod.get("status") or {}).get("phase") in POD_ENDED


def stub(name: str, tid: str) -> dict[str, Any]:
    """A pod known only by name (gone, or not reporting)."""
    return {"metadata": {"name": name, "annotations": {ANN_TRIAL: tid}}, "status": {}}


def runner_started(status: dict[str, Any]) -> bool:
    """Whether the pod's containers started, by its own status: phase Running or Unknown (a node that stopped
    reporting a pod it had), or a container that is, or was, running."""
    if status.get("phase") in (PodPhase.RUNNING, PodPhase.UNKNOWN):
        return True
    return any(
        (cs.get("state") or {}).get("running") or ((cs.get("state") or {}).get("terminated") or {}).get("startedAt")
        for cs in status.get("containerStatuses") or []
    )


def disruption(status: dict[str, Any]) -> str | None:
    """The reason of the pod's DisruptionTarget condition (status "True"), which Kubernetes sets on a pod it is about
    to stop for reasons not the pod's: EvictionByEvictionAPI (a drain), PreemptionByScheduler,
    DeletionByTaintManager, DeletionByPodGC, TerminationByKubelet. None if the pod has none."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return str(cond.get("reason") or "DisruptionTarget")
    return None


def disruption_seen(known: str | None, kind: str, pod: dict[str, Any]) -> str | None:
    """The try's disruption after this event (``known``: the one remembered). Remembered from the event that first
    shows it: a drain sets the condition, then deletes the pod, and the last event need not carry it. A live pod that
    no longer shows it was not disrupted after all (Kubernetes clears a DisruptionTarget no deletion followed)."""
    status = pod.get("status") or {}
    why = disruption(status)
    if why is not None:
        return known or why
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
    if known is not None and kind != "DELETED" and not deleting and status.get("phase") not in POD_ENDED:
        return None
    return known


def waiting_reason(status: dict[str, Any]) -> tuple[str | None, str]:
    """The first waiting container's reason and message (the message cut to 300 characters)."""
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return str(waiting["reason"]), str(waiting.get("message") or "").strip()[:300]
    return None, ""


def failure_reason(pod: dict[str, Any], record: dict[str, Any] | None) -> str:
    """Why a try without a usable record failed, for its infrastructure record: what the runner reported, else the
    pod's phase and reason and each stopped container's exit code and message."""
    status = pod.get("status") or {}
    if record is not None and record.get("failure") == INFRA_ERROR:
        return f"runner reported: {record.get('error')}"
    parts = [f"pod {status.get('phase', 'gone')}"]
    if status.get("reason"):
        parts.append(str(status["reason"]))
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        term = (cs.get("state") or {}).get("terminated")
        if term:
            why = f" {term['reason']}" if term.get("reason") in ("OOMKilled", "ContainerCannotRun") else ""
            parts.append(f"{cs.get('name')}{why} exit {term.get('exitCode')}")
            msg = (term.get("message") or "").strip()
            if msg:
                parts.append(msg[-300:])
    parts.append("no stored record" if record is None else "record does not match the trial")
    return "; ".join(parts)


def termination_message(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The runner container's termination message (its JSON summary of the trial), None if it has no readable one."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == "runner":
            msg = ((cs.get("state") or {}).get("terminated") or {}).get("message")
            try:
                return json.loads(msg) if msg else None
            except json.JSONDecodeError:
                return None
    return None


def scheduling_seconds(pod: dict[str, Any], now: float) -> float | None:
    """Pod creation to runner start, from the pod's own timestamps (None if the pod does not say)."""
    started = (pod.get("status") or {}).get("startTime")
    created = (pod.get("metadata") or {}).get("creationTimestamp")
    if not (started and created):
        return None
    return epoch(started, now) - epoch(created, now)


# -- what a pod event means for its try -------------------------------------------------------------
class Act(Enum):
    NOTHING = "nothing"  # nothing to do yet
    TAKE = "take"  # the try is over: take its outcome now
    ENDING = "ending"  # its pod is being deleted: its outcome waits until the pod is gone (or its node killed it)
    END = "end"  # give up on it: delete its pod (gracefully); the outcome is taken once it is gone


@dataclass(frozen=True)
class Seen:
    """What a pod event means for the try it runs. ``reason``: why the try failed if no record turns up;
    ``kill_by``: (ENDING) when its node kills what is left; ``gone_later``: (END) its DELETED event is still to come."""

    act: Act
    reason: str | None = None
    kill_by: float | None = None
    gone_later: bool = False


NOTHING = Seen(Act.NOTHING)


def seen(kind: str, pod: dict[str, Any], inf: InFlight, now: float) -> Seen:
    """One event of the try's own pod (``inf``: its try, already told whether it started and was disrupted)."""
    status = pod.get("status") or {}
    done = status.get("phase") in POD_ENDED
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
    if inf.suspended or inf.disrupted:
        # Deleted by a suspend, or disrupted by Kubernetes: taken once the pod is gone (its trial runs again under the
        # same pod name if the try does not count), its record if it stored one deciding, as always.
        if kind == "DELETED":
            return Seen(Act.TAKE, inf.reason or f"pod disrupted ({inf.disrupted})")
        if inf.suspended:
            return NOTHING  # the suspend deleted it
        if deleting:  # a drain or a preemption deletes it: its node stops it first
            if inf.ending is not None:
                return NOTHING
            return Seen(Act.ENDING, inf.reason or f"pod disrupted ({inf.disrupted})", epoch(deleting, now))
        if done and inf.ending is None:  # stopped on its node (a kubelet eviction): remove it
            return Seen(Act.END, f"pod disrupted ({inf.disrupted})", gone_later=True)
        return NOTHING
    if kind == "DELETED" and not done:  # gone (404 from now on): nothing of it runs any more
        return Seen(Act.TAKE, inf.reason or "pod deleted before it finished")
    if done:  # a node reports this only once every container has stopped
        return Seen(Act.TAKE, inf.reason)
    if deleting:
        # Deleted (by anyone) while it runs: its containers have their grace period, in which the runner may still
        # store its record. Wait for the pod to be gone; only then is the try's outcome known.
        if inf.ending is not None:
            return NOTHING
        return Seen(Act.ENDING, inf.reason or "pod deleted before it finished", epoch(deleting, now))
    reason, message = waiting_reason(status)
    if reason in STUCK_REASONS and inf.ending is None:
        # The kubelet's message says what to fix: 'secret "llm-keys" not found', the image that failed.
        return Seen(Act.END, f"pod cannot start: {reason}" + (f": {message}" if message else ""))
    if inf.ending is None and (why := inf.restarted or restarted(pod)):
        # A native sidecar (the MCP server) restarted in place under the agent: end the try now (retried).
        return Seen(Act.END, why)
    return NOTHING


# -- the run's pods, listed ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    """A pod found on rebuild that is its trial's current try: it is adopted (tracked in flight again)."""

    tid: str
    name: str
    retry: int
    created: float  # epoch seconds
    deleting: float | None  # its deletionTimestamp (epoch seconds) if it is being deleted


def claims(pods: Iterable[dict[str, Any]], state: RunState, now: float) -> list[tuple[dict[str, Any], Claim | None]]:
    """Each listed pod of the run with its claim, in list order; None: its try's outcome is already recorded (or it
    is no trial of this plan, or an older try, or a second pod of one trial): the pod is drained, never counted."""
    out: list[tuple[dict[str, Any], Claim | None]] = []
    adopted: set[str] = set()
    for pod in pods:
        meta = pod["metadata"]
        tid = trial_of(pod)
        retry = int((meta.get("labels") or {}).get(LABEL_RETRY, "0"))
        if (
            tid in state.trials
            and tid not in state.done
            and tid not in state.in_flight
            and tid not in adopted
            and retry >= state.retries.get(tid, 0)
        ):
            adopted.add(tid)
            created, deleting = epoch(meta.get("creationTimestamp"), now), meta.get("deletionTimestamp")
            out.append((pod, Claim(tid, meta["name"], retry, created, epoch(deleting, now) if deleting else None)))
        else:
            out.append((pod, None))
    return out


def vanished(listed: set[str], watched: Iterable[str], unlisted: set[str]) -> tuple[list[str], set[str]]:
    """Pods gone without a DELETED event. ``watched``: the pods the run waits on; ``unlisted``: those the previous
    list lacked. Returns the pods missing from two lists in a row (taken as deleted: a DELETED event on its way had
    a whole interval to arrive), and the pods this list lacks for the first time (``unlisted`` next time)."""
    missing = {name for name in watched if name not in listed}
    return sorted(missing & unlisted), missing - unlisted
