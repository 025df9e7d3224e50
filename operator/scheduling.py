"""Why trial pods do not start, explained: a pod Pending beyond a threshold has a cause (the scheduler's message, or a
container that cannot be created), and the run gets one condition and one aggregated event per cause, with how many
trials it holds up, never one event per pod. And which container restarts under a running trial (an OOM kill).

Pure: pods are the API's dicts; the reconciler keeps what was seen and acts (status, events).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcpfleet.operator.waiting import STUCK_REASONS

# A pod Pending this long with a cause gets it reported (the scheduler retries for a while on its own: a pod that
# waits a few seconds for a node scaling up is no news).
REPORT_AFTER_SECONDS = 30.0
# A cause's event is posted when it first holds trials up, and again, with the new count, at most this often.
EVENT_EVERY_SECONDS = 600.0
CONDITION = "PodsScheduled"


@dataclass(frozen=True)
class Blocked:
    """What holds a Pending pod up: ``reason`` (Unschedulable, ImagePullBackOff, CreateContainerConfigError, ...) and
    the message saying what to fix ('0/3 nodes are available: 3 Insufficient cpu.', 'secret "keys" not found')."""

    reason: str
    message: str

    @property
    def key(self) -> str:
        """Same cause, same key: counts and names in the message vary between pods and over time ('0/3 nodes',
        a pod's own image reference stays)."""
        return f"{self.reason}: {re.sub(r'[0-9]+', 'N', self.message)}"


def blocked(pod: Mapping[str, Any]) -> Blocked | None:
    """The cause a Pending pod reports: PodScheduled=False (the scheduler: Insufficient cpu, an untolerated taint,
    no node matching its selector or affinity), or a container waiting for what will not come by itself."""
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "Pending"):
        return None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return Blocked(str(cond.get("reason") or "Unschedulable"), str(cond.get("message") or "").strip()[:300])
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_REASONS:
            msg = str(waiting.get("message") or "").strip()[:300]
            return Blocked(str(waiting["reason"]), f"container {cs.get('name')}: {msg}" if msg else str(cs.get("name")))
    return None


@dataclass(frozen=True)
class Cause:
    """One cause and the trials it holds up (``example``: one of them, for the message)."""

    reason: str
    message: str
    trials: int
    example: str


def causes(seen: Mapping[str, tuple[float, Blocked]], now: float, after: float | None = None) -> list[Cause]:
    """The causes of the trials whose pods (``seen``: trial id -> (since when, what blocks it)) are held up: by the
    scheduler for longer than ``after`` (REPORT_AFTER_SECONDS), by a container that cannot start at once (its try
    is given up on the spot and retried, so it would never wait that long). Most trials first."""
    wait = REPORT_AFTER_SECONDS if after is None else after
    groups: dict[str, list[tuple[str, Blocked]]] = {}
    for tid, (since, why) in seen.items():
        if why.reason in STUCK_REASONS or now - since >= wait:
            groups.setdefault(why.key, []).append((tid, why))
    out = [Cause(v[0][1].reason, v[0][1].message, len(v), min(t for t, _ in v)) for v in groups.values()]
    return sorted(out, key=lambda c: (-c.trials, c.reason, c.message))


def trials_word(n: int) -> str:
    return f"{n} trial" if n == 1 else f"{n} trials"


def condition(found: Iterable[Cause]) -> tuple[str, str, str]:
    """The run's PodsScheduled condition (status, reason, message): False naming every cause and its count."""
    found = list(found)
    if not found:
        return "True", "Scheduled", "no trial pod is held up Pending"
    total = sum(c.trials for c in found)
    parts = [f"{c.reason} ({trials_word(c.trials)}): {c.message}" for c in found]
    message = f"{trials_word(total)} held up Pending: " + "; ".join(parts)
    return "False", found[0].reason, message[:1000]


def event_message(c: Cause) -> str:
    return f"{trials_word(c.trials)} held up Pending: {c.reason}: {c.message} (e.g. {c.example})"[:1000]


def events_due(
    found: Iterable[Cause], told: Mapping[str, tuple[float, int]], now: float, every: float = EVENT_EVERY_SECONDS
) -> list[Cause]:
    """The causes to post an event for: new ones, and ones whose count changed since their last event, once
    ``every`` seconds have passed since it (``told``: cause key -> (when, count) of its last event)."""
    out = []
    for c in found:
        key = Blocked(c.reason, c.message).key
        last = told.get(key)
        if last is None or (last[1] != c.trials and now - last[0] >= every):
            out.append(c)
    return out


class Tracker:
    """What the run's pods showed of their scheduling, between reconciler steps: which trials are held up, since
    when and why (kept across a trial's tries until one of its pods starts, or it finishes), and which causes were
    told by an event. ``report`` says what to write; the reconciler writes it."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[float, Blocked]] = {}
        self.told: dict[str, tuple[float, int]] = {}
        self.shown: tuple[str, str, str] | None = None  # the condition as last written

    def see(self, tid: str, pod: Mapping[str, Any], started: bool, now: float) -> None:
        if started:
            self.seen.pop(tid, None)
            return
        why = blocked(pod)
        if why is not None:
            self.seen[tid] = (self.seen.get(tid, (now, why))[0], why)

    def forget(self, done: Iterable[str]) -> None:
        for tid in done:
            self.seen.pop(tid, None)

    def report(self, now: float) -> tuple[tuple[str, str, str] | None, list[Cause]]:
        """The condition to write (None: unchanged, or never False so far) and the causes to post an event for."""
        found = causes(self.seen, now)
        cond = condition(found)
        write = cond if cond != self.shown and (found or self.shown is not None) else None
        if write is not None:
            self.shown = cond
        due = events_due(found, self.told, now)
        for c in due:
            self.told[Blocked(c.reason, c.message).key] = (now, c.trials)
        return write, due


# -- unschedulable trials never hold the run's slots ------------------------------------------------------------
# How long a try's pod may stay unschedulable before it gives its slot back (Kueue's waitForPodsReady timeout for a
# workload whose pods do not start; a Job would hold the slot until its pod runs). The trial is then requeued behind
# the waiting ones, not before REQUEUE_BASE_SECONDS * 2^(times requeued) (at most REQUEUE_MAX_SECONDS), its try not
# counted (no retry, no infrastructure failure): a trial that can run takes the slot meanwhile.
PARK_AFTER_SECONDS = 30.0
REQUEUE_BASE_SECONDS = 10.0
REQUEUE_MAX_SECONDS = 300.0


def park_due(
    why: Blocked | None,
    created: float,
    first_blocked: float,
    now: float,
    *,
    pending_timeout: float,
    others_waiting: bool,
    after: float | None = None,
) -> bool:
    """Whether a try whose pod the scheduler cannot place (``why``: its cause, ``created``: its pod's creation,
    ``first_blocked``: when the trial was first seen unschedulable, across its tries) gives its slot back now. Only
    when some other trial waits for a slot (else requeueing only churns pods), and only until the trial has been
    unschedulable for ``pending_timeout`` (spec.pod.pendingTimeoutSeconds) in all: from then on its try ends at its
    Pending deadline as an infrastructure error, as before, so a run that can never be placed still ends."""
    wait = PARK_AFTER_SECONDS if after is None else after
    return (
        why is not None
        and why.reason == "Unschedulable"
        and others_waiting
        and now - created >= wait
        and now - first_blocked < pending_timeout
    )


def requeue_delay(parked: int) -> float:
    """Seconds a trial requeued ``parked`` times before waits before its next try."""
    return float(min(REQUEUE_MAX_SECONDS, REQUEUE_BASE_SECONDS * 2 ** max(0, parked - 1)))


# -- a container restarted under a running trial ---------------------------------------------------------------
def restarted(pod: Mapping[str, Any]) -> str | None:
    """A container of the pod that restarted (restartCount > 0: a native sidecar, the MCP server, is restarted in
    place by its node) or was OOM-killed: the trial's MCP server (and the state it held) is not the one the agent
    started with, so the try measures nothing. Names the container and the cause, e.g. 'container mcp
    OOMKilled (exit 137), restarted 1 time'. (A trial pod never restarts its runner: restartPolicy Never; an
    OOM-killed runner fails the pod, and podview.failure_reason names it.)"""
    status = pod.get("status") or {}
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        count = int(cs.get("restartCount") or 0)
        if count <= 0:
            continue
        term = (cs.get("lastState") or {}).get("terminated") or {}
        cause = str(term.get("reason") or "exited")
        code = f" (exit {term['exitCode']})" if term.get("exitCode") is not None else ""
        return f"container {cs.get('name')} {cause}{code}, restarted {count} time{'s' if count != 1 else ''}"
    return None
