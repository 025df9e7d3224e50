"""Deleting the pods of counted tries: in bulk (one deletecollection per batch), and again one by one when that fails.

A trial costs the API server its pod's create and, once its outcome is counted, its pod's delete: two writes a
trial. A counted try's pod has finished and its name is never used again (a retry is the next name), so nothing
waits on its delete: the names are gathered and deleted together, by a label selector on the run's uid and the
pods' name labels (``manifests.LABEL_POD``; a field selector cannot select a set of names), at most
``DELETE_EVERY_SECONDS`` after the first was counted. A pod whose name its trial's next try reuses (a try that did not
count) is deleted at once. A delete that fails (5xx, 429, a lost answer) never raises: its pods are deleted again,
one by one, at most every ``retry_seconds``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any, Protocol

from mcpfleet.operator.manifests import LABEL_POD, LABEL_RUN_UID

DELETE_EVERY_SECONDS = 1.0
# Names per call: ~60 bytes each, well inside an API server's URL limit (and the emulator's 8 KB request line).
DELETE_BATCH = 100


class PodApi(Protocol):
    async def delete_pod(self, namespace: str, name: str) -> bool: ...
    async def delete_pods(self, namespace: str, selector: str) -> list[str]: ...


def bulk_selectors(run_uid: str, names: Iterable[str], batch: int = DELETE_BATCH) -> list[tuple[list[str], str]]:
    """The label selectors that delete exactly the pods ``names`` of the run ``run_uid``, ``batch`` names each, with
    the names each selects. Pure."""
    ordered = sorted(set(names))
    chunks = [ordered[i : i + batch] for i in range(0, len(ordered), batch)]
    return [(chunk, f"{LABEL_RUN_UID}={run_uid},{LABEL_POD} in ({','.join(chunk)})") for chunk in chunks]


def bulk_deletable(pod: dict[str, Any]) -> bool:
    """Whether the bulk delete selects the pod: it carries its name label (a pod an older operator created does not),
    or is known by name only (podview.stub)."""
    labels = (pod.get("metadata") or {}).get("labels")
    return labels is None or LABEL_POD in labels


class PodDeletes:
    """One run's pods to delete: those of counted tries (``counted``, deleted in bulk by ``flush``) and those whose
    delete failed (``failed``, deleted one by one by ``retry``)."""

    def __init__(self, ns: str, uid: str, logger: logging.Logger | logging.LoggerAdapter[Any], retry_seconds: float):
        self.ns, self.uid, self.logger, self.retry_seconds = ns, uid, logger, retry_seconds
        self.counted: set[str] = set()
        self.due = 0.0  # when the counted pods are deleted (monotonic)
        self.failed: set[str] = set()
        self.retry_at = 0.0  # the earliest next one-by-one attempt (monotonic)

    def clear(self) -> None:
        self.counted.clear()
        self.failed.clear()

    def forget(self, name: str) -> None:
        """The pod is gone, or its name is a new try's now: never deleted for an old one."""
        self.counted.discard(name)
        self.failed.discard(name)

    def later(self, name: str, exc: BaseException) -> None:
        self.logger.warning("deleting pod %s failed (will try again): %s", name, exc)
        self.failed.add(name)

    async def one(self, api: PodApi, name: str) -> None:
        """Delete a pod now; a failure is retried later, never raised."""
        try:
            await api.delete_pod(self.ns, name)
        except Exception as exc:  # noqa: BLE001 - whatever failed, the pod is deleted again later
            self.later(name, exc)

    def count(self, name: str) -> None:
        """A counted try's pod, for the next bulk delete."""
        if not self.counted:
            self.due = time.monotonic() + DELETE_EVERY_SECONDS
        self.counted.add(name)

    async def flush(self, api: PodApi, force: bool = False) -> None:
        """The bulk delete, when due: DELETE_EVERY_SECONDS after the first pod was counted, DELETE_BATCH pods waiting,
        or ``force``. A call that fails leaves its pods to ``retry``."""
        if not self.counted or not (force or len(self.counted) >= DELETE_BATCH or time.monotonic() >= self.due):
            return
        names, self.counted = self.counted, set()
        for chunk, selector in bulk_selectors(self.uid, names):
            try:
                await api.delete_pods(self.ns, selector)
            except Exception as exc:  # noqa: BLE001 - deleted one by one later
                self.logger.warning("deleting %d pods failed (will try again one by one): %s", len(chunk), exc)
                self.failed.update(chunk)

    async def retry(self, api: PodApi) -> None:
        """Delete again the pods whose delete failed (at most every ``retry_seconds``; never raises)."""
        if not self.failed or time.monotonic() < self.retry_at:
            return
        for name in sorted(self.failed):
            try:
                await api.delete_pod(self.ns, name)
            except Exception as exc:  # noqa: BLE001 - the API server still fails: the rest waits as well
                self.logger.warning("deleting pod %s failed again (will try again): %s", name, exc)
                self.retry_at = time.monotonic() + self.retry_seconds
                return
            self.failed.discard(name)
