"""Why a try measured nothing, as one bounded label: the ``cause`` of ``mcpfleet_not_scored_tries_total`` (the
dashboard's not-scored-causes panel). Pure: read from the outcome and the reason the operator wrote for the try
(podview, overdue and this package's scheduling module compose those reasons; tests/operator/test_causes.py
classifies their real output)."""

from __future__ import annotations

from mcpfleet.operator.waiting import CONFIG_REASONS, IMAGE_REASONS
from mcpfleet.runner.results.outcome import BUDGET_EXHAUSTED, CONFIG_ERROR, INFRA_ERROR, PROVIDER_ERROR

# Every cause of an infrastructure error, most specific first in ``infra_cause``; "other" for a reason none names.
INFRA_CAUSES = (
    "unschedulable",  # Pending with PodScheduled=False: Insufficient cpu, an untolerated taint, no matching node
    "image_pull",  # a waiting container that cannot pull its image
    "container_config",  # a container that cannot be created: a missing Secret or ConfigMap
    "oom_killed",  # a runner or sidecar container OOM-killed mid-trial
    "container_restarted",  # a container restarted mid-trial for another reason
    "pending_timeout",  # Pending past spec.pod.pendingTimeoutSeconds without a scheduler message
    "node_lost",  # its node stopped reporting, or the pod stuck terminating
    "disrupted",  # disrupted by Kubernetes too often in a row
    "pod_deleted",  # deleted (by anyone) before it finished
    "runner_error",  # the runner itself recorded an infrastructure error (a server that did not start, ...)
    "pod_failed",  # the pod failed without a usable record
    "other",
)
# The unscored outcomes a trial's record carries, each its own cause.
RECORD_CAUSES = (PROVIDER_ERROR, CONFIG_ERROR, BUDGET_EXHAUSTED)
CAUSES = INFRA_CAUSES + RECORD_CAUSES


def infra_cause(reason: str) -> str:
    """The cause of an infrastructure error from the operator's reason for it."""
    first = reason.split(";", 1)[0]
    if first.startswith("pod unschedulable"):
        return "unschedulable"
    if first.startswith("pod cannot start"):
        if any(r in first for r in IMAGE_REASONS):
            return "image_pull"
        if any(r in first for r in CONFIG_REASONS):
            return "container_config"
        return "other"
    if "OOMKilled" in reason:
        return "oom_killed"
    if first.startswith("container ") and "restarted" in first:
        return "container_restarted"
    if first.startswith("pod still Pending"):
        return "pending_timeout"
    if "node lost" in reason:
        return "node_lost"
    if first.startswith("pod disrupted"):
        return "disrupted"
    if first.startswith("pod deleted"):
        return "pod_deleted"
    if first.startswith("runner reported"):
        return "runner_error"
    if first.startswith("pod "):
        return "pod_failed"
    return "other"


def not_scored_cause(outcome: str, reason: str = "") -> str:
    """The cause label of an unscored try: its outcome when its record names one, else its infrastructure cause."""
    if outcome == INFRA_ERROR:
        return infra_cause(reason)
    return outcome if outcome in RECORD_CAUSES else "other"
