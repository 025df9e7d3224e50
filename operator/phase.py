"""Phases as enums: an EvalRun's (what status.phase says) and a trial pod's (what its status says)."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """status.phase of an EvalRun. A str enum: it equals, and is written as, the same strings as before."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @classmethod
    def read(cls, value: object) -> Phase | None:
        """A phase as status shows it; None for none, or one no operator writes (a hand-edited status)."""
        if not isinstance(value, str):
            return None
        try:
            return cls(value)
        except ValueError:
            return None


# The run is over: nothing launches until its spec is edited (or a restart resumes its stopped models).
TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED})
# A peer that takes over a run in one of these may have been driving it a moment ago (handlers.run_evalrun).
ACTIVE = frozenset({Phase.RUNNING, Phase.SUSPENDED})


class PodPhase(StrEnum):
    """status.phase of a pod, as Kubernetes reports it."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"  # its node stopped reporting it


# Every container of the pod has stopped: a node reports these only then.
POD_ENDED = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
