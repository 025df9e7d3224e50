"""Which tries, pods and runs are past their deadlines: what will not end by itself, decided from times alone."""

from __future__ import annotations

from dataclasses import dataclass

from mcpfleet.operator.runstate import InFlight


@dataclass(frozen=True)
class Overdue:
    """A try past a deadline. ``count``: its runner certainly stopped, though its pod does not say so: counted now;
    else it is still Pending: its pod is deleted and the outcome taken once it is gone. ``streak``: it counts towards
    backoffLimit (not a try Kubernetes or the operator stopped, whose pod merely never went)."""

    reason: str
    count: bool
    streak: bool = True


def overdue_try(inf: InFlight, now: float, *, run_seconds: float, pending_seconds: int, slack: float) -> Overdue | None:
    """Whether the try is overdue at ``now``. ``run_seconds``: the pod's activeDeadlineSeconds and termination grace,
    which its node enforces even when cut off; ``pending_seconds``: spec.pod.pendingTimeoutSeconds; ``slack``: how
    long past its kill time a deleted pod may take to go before its node counts as lost."""
    stopped = inf.disrupted is not None or inf.suspended
    if inf.started is not None and now - inf.started > run_seconds:
        # The runner has stopped, though its kubelet no longer reports (a lost node: Unknown, or stuck Terminating).
        why = f"pod still not finished {int(run_seconds)} s after it started (node lost, or stuck terminating)"
        return Overdue(f"{inf.reason}; {why}" if inf.reason else why, True, not stopped)
    if inf.started is None and inf.kill_by is not None and now > inf.kill_by + slack:
        # Deleted before its runner was seen running, and its node never finished deleting it.
        why = f"{inf.reason}; pod still terminating {int(now - (inf.ending or now))} s after its deletion (node lost?)"
        return Overdue(why, True, not stopped)
    if inf.gated:  # waiting for admission (Kueue's quota): not Pending too long, however long it waits
        return None
    pending_since = inf.admitted if inf.admitted is not None else inf.created
    if inf.started is None and inf.ending is None and now - pending_since > pending_seconds:
        admitted = " of its admission" if inf.admitted is not None else ""
        return Overdue(f"pod still Pending after {pending_seconds} s{admitted}", False)
    return None


def overdue_drains(draining: dict[str, float], now: float) -> list[str]:
    """Draining pods given up on (their node never finished deleting them: lost): their slots are free again."""
    return [name for name, until in draining.items() if now > until]


def over_active_deadline(limit: int | None, started: float | None, now: float) -> float | None:
    """spec.activeDeadlineSeconds: the seconds the run has been active (since status.startedAt, which a resume
    resets) if that is over ``limit``; None when it is not, or there is no limit or no start yet."""
    if limit is None or started is None or now - started <= limit:
        return None
    return now - started


def past_ttl(ttl: object, finished: float | None, now: float) -> bool:
    """spec.ttlSecondsAfterFinished: whether a run that finished at ``finished`` is due for deletion."""
    return isinstance(ttl, int) and finished is not None and now >= finished + ttl
