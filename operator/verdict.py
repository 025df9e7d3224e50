"""The outcome verdict of a finished try: which stored record is its outcome, and whether the try counts at all.

Pure: the reconciler reads the record and the try, asks ``judge``, then acts (counts, stores, posts events).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from mcpfleet.runner.results.outcome import BUDGET_EXHAUSTED, CONFIG_ERROR, INFRA_ERROR, PROVIDER_ERROR, is_scored

# A trial whose pod Kubernetes disrupts (a drain, a preemption, an eviction) runs again as the same try, like a Job's
# podFailurePolicy ``Ignore`` on DisruptionTarget. A pod evicted for what it does itself (a kubelet eviction for its
# own disk or memory use) would be disrupted for ever: after this many disruptions of a trial in a row, the next is
# an ordinary infrastructure failure (charged, and retried under the retry limit). 5 outlasts a rolling drain of a
# few nodes, each moving the pod once, while a pod that evicts itself wastes at most 5 short tries per retry.
DISRUPTION_LIMIT = 5


class Kind(Enum):
    UNCOUNTED = "uncounted"  # stopped by a suspend or disrupted before it stored a record: as if never launched
    RECORDED = "recorded"  # its stored record is the outcome, even if the pod was deleted or misreported afterwards
    PROVIDER = "provider"  # its record is a provider error: tried again like an infra error, the pod having worked
    INFRA = "infra"  # no usable record: an infrastructure failure, which the operator records itself


@dataclass(frozen=True)
class Verdict:
    """``record``: what this try stored, usable or not (it names the failure); ``stored``: the record that is the
    outcome (RECORDED, PROVIDER); ``in_a_row``: UNCOUNTED by a disruption, the trial's disruptions in a row with this
    one; ``disrupted``: INFRA, a disruption that counts since the trial had DISRUPTION_LIMIT in a row already."""

    kind: Kind
    record: dict[str, Any] | None = None
    stored: dict[str, Any] | None = None
    in_a_row: int | None = None
    disrupted: bool = False

    @property
    def stops_model(self) -> bool:
        """A config error (a key or model string the provider refuses), or a spent budget: its model launches
        nothing more."""
        stored = self.stored
        return (
            self.kind is Kind.RECORDED
            and stored is not None
            and stored.get("failure") in (CONFIG_ERROR, BUDGET_EXHAUSTED)
        )


def this_try(record: dict[str, Any] | None, tries: int) -> dict[str, Any] | None:
    """The stored record if this try (the ``tries``-th) stored it: a scored record is any try's outcome (its trial
    stores one at most), an unscored one carries the try that stored it (infra_attempts); an earlier try's is not."""
    if record is None or (not is_scored(record.get("failure")) and record.get("infra_attempts") != tries):
        return None
    return record


def judge(
    record: dict[str, Any] | None,
    spec_hash: str,
    tries: int,
    *,
    suspended: bool = False,
    disrupted: str | None = None,
    disruptions: int = 0,
    restarted: str | None = None,
    parked: bool = False,
) -> Verdict:
    """The try's outcome from its trial's stored record (None: none), the trial's ``spec_hash`` and which try this is.
    ``suspended``: a suspend deleted its pod; ``disrupted``: Kubernetes marked it (the DisruptionTarget reason);
    ``disruptions``: the trial's tries disrupted in a row before this one. A record of another spec, or the
    operator's own infrastructure record, is no outcome: the try failed for the infrastructure. ``restarted``: a
    container of its pod restarted under it (an OOM-killed MCP server): even a record it stored is no outcome.
    ``parked``: its pod could not be scheduled and it gave its slot back (scheduling.park_due): not counted."""
    mine = this_try(record, tries)
    if restarted is not None:  # its server (or its state) changed under the agent: measured nothing
        return Verdict(Kind.INFRA, mine)
    if mine is not None and mine.get("spec_hash") == spec_hash and mine.get("failure") != INFRA_ERROR:
        return Verdict(Kind.PROVIDER if mine.get("failure") == PROVIDER_ERROR else Kind.RECORDED, mine, mine)
    if suspended or parked:  # no retry, no infra error, the run's streak unchanged: the trial waits
        return Verdict(Kind.UNCOUNTED, mine)
    if disrupted is not None:
        if disruptions < DISRUPTION_LIMIT:  # as a podFailurePolicy Ignore on DisruptionTarget
            return Verdict(Kind.UNCOUNTED, mine, in_a_row=disruptions + 1)
        return Verdict(Kind.INFRA, mine, disrupted=True)
    return Verdict(Kind.INFRA, mine)


def backoff_budget(backoff_limit: int | None, concurrency: int) -> int:
    """Infrastructure failures in a row the run survives (spec.retries.backoffLimit); unset: twice
    concurrency.total, so a full run's pods may each fail twice (a lost node), and at least 6 (a Job's default)."""
    return max(6, 2 * concurrency) if backoff_limit is None else backoff_limit
