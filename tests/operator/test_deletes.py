"""operator/deletes.py: counted tries' pods deleted in bulk, one deletecollection per batch, selecting exactly them
(against the emulator's label selectors, as a real API server reads them); a failed call left to one-by-one deletes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kubeemu import labels_match, parse_label_selector

from mcpfleet.operator import deletes
from mcpfleet.operator.deletes import DELETE_BATCH, PodDeletes, bulk_deletable, bulk_selectors
from mcpfleet.operator.manifests import LABEL_POD, LABEL_RUN_UID

LOG = logging.getLogger("test")


def pod(name: str, uid: str = "uid-1") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {LABEL_RUN_UID: uid, LABEL_POD: name}}}


def test_the_selectors_select_exactly_the_named_pods_of_the_run() -> None:
    names = [f"run-m-{i:010x}-1" for i in range(250)]
    pods = [pod(n) for n in names] + [pod("run-m-other-1"), pod(names[0], uid="uid-2")]  # another try, another run
    picked: list[str] = []
    for chunk, selector in bulk_selectors("uid-1", names):
        assert len(chunk) <= DELETE_BATCH and len(selector) < 8000  # inside the emulator's (and a server's) URL limit
        reqs = parse_label_selector(selector)
        hits = [p for p in pods if labels_match(reqs, p["metadata"]["labels"])]
        assert [p["metadata"]["name"] for p in hits] == chunk and all(
            p["metadata"]["labels"][LABEL_RUN_UID] == "uid-1" for p in hits
        )
        picked += chunk
    assert sorted(picked) == sorted(names) and len(bulk_selectors("uid-1", names)) == 3


def test_a_pod_without_its_name_label_is_deleted_by_name() -> None:
    assert bulk_deletable(pod("a")) and bulk_deletable({"metadata": {"name": "a"}})  # a stub: known by name only
    assert not bulk_deletable({"metadata": {"name": "a", "labels": {LABEL_RUN_UID: "uid-1"}}})  # an older operator's


class Api:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[str] = []
        self.one: list[str] = []

    async def delete_pods(self, namespace: str, selector: str) -> list[str]:
        self.calls.append(selector)
        if self.fail:
            raise RuntimeError("500")
        return []

    async def delete_pod(self, namespace: str, name: str) -> bool:
        self.one.append(name)
        return True


async def test_counted_pods_wait_for_one_bulk_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(deletes.time, "monotonic", lambda: clock[0])
    api, d = Api(), PodDeletes("ns", "uid-1", LOG, retry_seconds=2.0)
    for i in range(30):
        d.count(f"p{i}")
    d.forget("p3")  # its name is a new try's (or it is gone): not deleted for the old one
    await d.flush(api)
    assert api.calls == []  # not due yet
    clock[0] += deletes.DELETE_EVERY_SECONDS
    await d.flush(api)
    [selector] = api.calls
    assert "p3," not in selector and selector.count(",") == 29  # the run's uid and 29 names: one write for 29 pods
    await d.flush(api, force=True)
    assert len(api.calls) == 1 and api.one == []  # nothing left


async def test_a_failed_bulk_delete_is_retried_pod_by_pod() -> None:
    api, d = Api(fail=True), PodDeletes("ns", "uid-1", LOG, retry_seconds=0.0)
    d.count("a")
    d.count("b")
    await d.flush(api, force=True)  # never raises
    assert d.failed == {"a", "b"} and not d.counted
    await d.retry(api)
    assert api.one == ["a", "b"] and not d.failed
