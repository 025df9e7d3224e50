"""Tests of the Kubernetes API emulator in tests/kubeemu.py: semantics, kubectl, kopf, kmock."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import time
from typing import Any, cast

import aiohttp
import kopf
import pytest
import yaml
from kubeemu import (
    EVALRUN_CRD_PATH,
    KUBECTL,
    REPO,
    RealisticEmulator,
    human_duration,
    labels_match,
    parse_label_selector,
    run_kopf_in_thread,
    running_emulator,
    wait_for,
)

MERGE = "application/merge-patch+json"
JSONPATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
PODS = "/api/v1/namespaces/default/pods"
CMS = "/api/v1/namespaces/default/configmaps"
ERS = "/apis/mcpfleet.io/v1alpha1/namespaces/default/evalruns"


@pytest.fixture
def emu():
    with running_emulator(crds=[EVALRUN_CRD_PATH]) as running:
        yield running


def pod(name: str, labels: dict | None = None, **meta) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, **meta},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def cm(name: str, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": {"k": "v"}}


def evalrun(name: str = "er1") -> dict:
    doc = yaml.safe_load((REPO / "examples" / "evalrun.yaml").read_text())
    doc["metadata"]["name"] = name
    return doc


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


# ---- object metadata ---------------------------------------------------------------------------


def test_create_sets_server_metadata_and_201(emu):
    status, a = emu.request("POST", PODS, pod("a"))
    assert status == 201
    meta = a["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and meta["generation"] == 1
    assert a["status"]["phase"] == "Pending"  # status is the server's on create
    status, b = emu.request("POST", CMS, cm("b"))
    assert status == 201 and rv(b) == rv(a) + 1  # one global counter across resources
    status, got = emu.request("GET", f"{PODS}/a")
    assert status == 200 and got == a


def test_generate_name_and_duplicates(emu):
    _, a = emu.request("POST", PODS, pod("", generateName="trial-"))
    _, b = emu.request("POST", PODS, pod("", generateName="trial-"))
    assert a["metadata"]["name"].startswith("trial-") and len(a["metadata"]["name"]) == len("trial-") + 5
    assert a["metadata"]["name"] != b["metadata"]["name"]
    status, body = emu.request("POST", PODS, pod(a["metadata"]["name"]))
    assert status == 409 and body["reason"] == "AlreadyExists" and body["kind"] == "Status"
    status, body = emu.request("POST", PODS, pod(""))
    assert status == 422 and body["reason"] == "Invalid"


def test_not_found_is_a_status_body(emu):
    status, body = emu.request("GET", f"{PODS}/nope")
    assert status == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "code": 404,
        "details": {"name": "nope", "group": "", "kind": "pods"},
    }
    status, body = emu.request("GET", "/apis/example.com/v1/namespaces/default/widgets")
    assert status == 404 and body["reason"] == "NotFound"
    status, _ = emu.request("PATCH", f"{ERS}/nope", {"spec": {}}, MERGE)
    assert status == 404


def test_generation_bumps_only_on_spec_changes(emu):
    emu.create(evalrun())
    er = emu.get("evalruns", "default", "er1")
    assert er["metadata"]["generation"] == 1
    status, er2 = emu.request("PATCH", f"{ERS}/er1", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    assert status == 200 and er2["metadata"]["generation"] == 1 and rv(er2) > rv(er)
    _, er3 = emu.request("PATCH", f"{ERS}/er1/status", {"status": {"phase": "Running"}}, MERGE)
    assert er3["metadata"]["generation"] == 1 and er3["status"]["phase"] == "Running"
    _, er4 = emu.request("PATCH", f"{ERS}/er1", {"spec": {"attempts": 2}}, MERGE)
    assert er4["metadata"]["generation"] == 2 and rv(er4) > rv(er3)
    _, er5 = emu.request("PATCH", f"{ERS}/er1", {"spec": {"attempts": 2}}, MERGE)
    assert er5 == er4  # a no-op write: same resourceVersion, no event
    _, c = emu.request("POST", CMS, cm("c"))
    _, c2 = emu.request("PATCH", f"{CMS}/c", {"data": {"k": "w"}}, MERGE)
    assert c2["metadata"]["generation"] == 2


def test_status_subresource_rule(emu):
    emu.create(evalrun())
    _, er = emu.request("PATCH", f"{ERS}/er1", {"spec": {"attempts": 3}, "status": {"phase": "Hacked"}}, MERGE)
    assert er["spec"]["attempts"] == 3 and "status" not in er  # main endpoint ignores .status
    _, er = emu.request(
        "PATCH",
        f"{ERS}/er1/status",
        {"spec": {"attempts": 9}, "status": {"phase": "Running"}, "metadata": {"labels": {"x": "y"}}},
        MERGE,
    )
    assert er["spec"]["attempts"] == 3 and er["status"] == {"phase": "Running"}  # only .status changes
    assert "labels" not in er["metadata"]
    er["status"] = {"phase": "Done"}
    er["spec"]["attempts"] = 5
    status, put = emu.request("PUT", f"{ERS}/er1", er)
    assert status == 200 and put["spec"]["attempts"] == 5 and put["status"] == {"phase": "Running"}
    put["status"] = {"phase": "Done"}
    put["spec"]["attempts"] = 7
    _, put2 = emu.request("PUT", f"{ERS}/er1/status", put)
    assert put2["spec"]["attempts"] == 5 and put2["status"] == {"phase": "Done"}
    # Pods too; a JSON patch on /status with kopf's resourceVersion test.
    _, p = emu.request("POST", PODS, pod("p"))
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": p["metadata"]["resourceVersion"]},
        {"op": "replace", "path": "/status/phase", "value": "Running"},
    ]
    status, p2 = emu.request("PATCH", f"{PODS}/p/status", ops, JSONPATCH)
    assert status == 200 and p2["status"]["phase"] == "Running"
    _, p3 = emu.request("PATCH", f"{PODS}/p", {"status": {"phase": "Failed"}}, MERGE)
    assert p3["status"]["phase"] == "Running"


def test_optimistic_concurrency_conflicts(emu):
    _, c = emu.request("POST", CMS, cm("c"))
    stale = c["metadata"]["resourceVersion"]
    emu.request("PATCH", f"{CMS}/c", {"data": {"k": "1"}}, MERGE)
    status, body = emu.request("PATCH", f"{CMS}/c", {"metadata": {"resourceVersion": stale}, "data": {"k": "2"}}, MERGE)
    assert status == 409 and body["reason"] == "Conflict"
    c["data"] = {"k": "3"}
    status, body = emu.request("PUT", f"{CMS}/c", c)
    assert status == 409 and body["reason"] == "Conflict"
    del c["metadata"]["resourceVersion"]  # an unconditional update
    status, body = emu.request("PUT", f"{CMS}/c", c)
    assert status == 200 and body["data"] == {"k": "3"}
    status, body = emu.request("PUT", f"{CMS}/other", c)
    assert status == 400


def test_json_patch_ops_and_failed_test_is_422(emu):
    _, c = emu.request("POST", CMS, cm("c", labels={"a": "1"}))
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "0"},
        {"op": "add", "path": "/data/x", "value": "y"},
    ]
    status, body = emu.request("PATCH", f"{CMS}/c", ops, JSONPATCH)
    assert status == 422 and body["code"] == 422
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": c["metadata"]["resourceVersion"]},
        {"op": "add", "path": "/metadata/finalizers", "value": ["f/1"]},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "f/2"},
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "replace", "path": "/data/k", "value": "w"},
        {"op": "copy", "from": "/data/k", "path": "/data/copy"},
    ]
    status, body = emu.request("PATCH", f"{CMS}/c", ops, JSONPATCH)
    assert status == 200
    assert body["metadata"]["finalizers"] == ["f/1", "f/2"] and body["metadata"]["labels"] == {}
    assert body["data"] == {"k": "w", "copy": "w"}
    status, _ = emu.request("PATCH", f"{CMS}/c", [{"op": "remove", "path": "/data/nope"}], JSONPATCH)
    assert status == 422


def test_patch_content_type_checks(emu):
    emu.request("POST", CMS, cm("c"))
    emu.create(evalrun())
    ops = [{"op": "add", "path": "/data/x", "value": "y"}]
    assert emu.request("PATCH", f"{CMS}/c", ops, MERGE)[0] == 400  # a JSON patch sent as a merge patch
    assert emu.request("PATCH", f"{CMS}/c", {"data": {"x": "y"}}, JSONPATCH)[0] == 400  # and vice versa
    assert emu.request("PATCH", f"{CMS}/c", {"data": {"x": "y"}}, "application/json")[0] == 415
    assert emu.request("PATCH", f"{CMS}/c", b"data: {}", "application/apply-patch+yaml")[0] == 415
    status, body = emu.request("PATCH", f"{CMS}/c", {"data": {"x": "y"}}, STRATEGIC)  # built-in: as a merge
    assert status == 200 and body["data"] == {"k": "v", "x": "y"}
    assert emu.request("PATCH", f"{ERS}/er1", {"spec": {"attempts": 2}}, STRATEGIC)[0] == 415  # custom: refused
    assert emu.request("PATCH", f"{CMS}/c", b"{not json", MERGE)[0] == 400


# ---- deletion ----------------------------------------------------------------------------------


def test_finalizers_hold_deletion_until_removed(emu):
    emu.request("POST", CMS, cm("c", finalizers=["example.com/hold"]))
    status, body = emu.request("DELETE", f"{CMS}/c")
    assert status == 202 and body["metadata"]["deletionTimestamp"]
    _, still = emu.request("GET", f"{CMS}/c")
    assert still["metadata"]["deletionTimestamp"] == body["metadata"]["deletionTimestamp"]
    assert emu.request("DELETE", f"{CMS}/c")[0] == 202  # again: a no-op
    status, body = emu.request("PATCH", f"{CMS}/c", {"metadata": {"finalizers": ["example.com/hold", "new"]}}, MERGE)
    assert status == 422  # no new finalizers on an object being deleted
    status, body = emu.request("PATCH", f"{CMS}/c", {"data": {"k": "edited"}}, MERGE)
    assert status == 200  # other edits are fine while terminating
    status, body = emu.request("PATCH", f"{CMS}/c", {"metadata": {"finalizers": None}}, MERGE)
    assert status == 200
    assert emu.request("GET", f"{CMS}/c")[0] == 404
    status, _ = emu.request("DELETE", f"{CMS}/c")
    assert status == 404
    _, d = emu.request("POST", CMS, cm("d"))
    status, body = emu.request("DELETE", f"{CMS}/d")  # no finalizers: gone at once
    assert status == 200 and body["metadata"]["uid"] == d["metadata"]["uid"]
    assert emu.request("GET", f"{CMS}/d")[0] == 404


def test_delete_preconditions(emu):
    _, c = emu.request("POST", CMS, cm("c"))
    status, _ = emu.request("DELETE", f"{CMS}/c", {"preconditions": {"uid": "other"}})
    assert status == 409
    assert emu.request("DELETE", f"{CMS}/c", {"preconditions": {"uid": c["metadata"]["uid"]}})[0] == 200


def owned(name: str, *owners: dict) -> dict:
    refs = [
        {"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]}
        for o in owners
    ]
    return pod(name, {"run": "r"}, ownerReferences=refs)


def test_owner_reference_garbage_collection(emu):
    er = emu.create(evalrun())
    for i in range(3):
        emu.request("POST", PODS, owned(f"p{i}", er))
    other = emu.create(cm("other"))
    emu.request("POST", PODS, owned("shared", er, other))
    emu.request("POST", PODS, owned("held", er) | {})
    emu.request("PATCH", f"{PODS}/held", {"metadata": {"finalizers": ["x/y"]}}, MERGE)
    start = time.monotonic()
    emu.request("DELETE", f"{ERS}/er1")
    wait_for(lambda: [p["metadata"]["name"] for p in emu.objects("pods")] == ["held", "shared"], timeout=1)
    assert time.monotonic() - start < 0.5  # GC runs on the loop iteration right after the DELETE
    shared = emu.get("pods", "default", "shared")
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other"]  # dangling ref dropped
    assert emu.get("pods", "default", "held")["metadata"]["deletionTimestamp"]  # finalizers still honoured
    emu.request("DELETE", f"{CMS}/other")
    wait_for(lambda: emu.get("pods", "default", "shared") is None, timeout=1)


def test_orphan_propagation_keeps_dependents(emu):
    owner = emu.create(cm("owner"))
    emu.request("POST", PODS, owned("p", owner))
    assert emu.request("DELETE", f"{CMS}/owner?propagationPolicy=Orphan")[0] == 200
    time.sleep(0.05)
    p = emu.get("pods", "default", "p")
    assert p is not None and not p["metadata"].get("ownerReferences")


def test_delete_collection_with_label_selector(emu):
    for name, run in (("a", "x"), ("b", "x"), ("c", "y")):
        emu.request("POST", PODS, pod(name, {"run": run}))
    status, body = emu.request("DELETE", f"{PODS}?labelSelector=run%3Dx")
    assert status == 200 and sorted(i["metadata"]["name"] for i in body["items"]) == ["a", "b"]
    assert [p["metadata"]["name"] for p in emu.objects("pods")] == ["c"]


def test_namespace_deletion_removes_its_objects(emu):
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "scratch"}})
    emu.create(cm("c"), namespace="scratch")
    emu.create(cm("held", finalizers=["x/y"]), namespace="scratch")
    status, body = emu.request("DELETE", "/api/v1/namespaces/scratch")
    assert status == 202 and body["status"]["phase"] == "Terminating"
    assert [o["metadata"]["name"] for o in emu.objects("configmaps", "scratch")] == ["held"]
    assert emu.request("POST", "/api/v1/namespaces/scratch/configmaps", cm("new"))[0] == 403
    emu.patch("configmaps", "scratch", "held", {"metadata": {"finalizers": None}})
    assert emu.get("namespaces", None, "scratch") is None


# ---- listing, selectors, namespaces -------------------------------------------------------------


@pytest.mark.parametrize(
    "selector, expected",
    [
        ("run=x", "ab"),
        ("run==x", "ab"),
        ("run!=x", "cd"),
        ("run in (x,y)", "abc"),
        ("run notin (x)", "cd"),
        ("tier", "ad"),
        ("!tier", "bc"),
        ("run=x,tier=web", "a"),
        ("run in (x, y),!tier", "bc"),
        ("gen>2", "c"),
        ("gen<2", "a"),
        ("", "abcd"),
    ],
)
def test_label_selectors(emu, selector, expected):
    for name, labels in (
        ("a", {"run": "x", "tier": "web", "gen": "1"}),
        ("b", {"run": "x", "gen": "2"}),
        ("c", {"run": "y", "gen": "3"}),
        ("d", {"tier": "db"}),
    ):
        emu.create(pod(name, labels))
    status, body = emu.request("GET", f"{PODS}?labelSelector={selector.replace(' ', '%20')}")
    assert status == 200
    assert "".join(i["metadata"]["name"] for i in body["items"]) == expected


def test_label_selector_parsing_and_errors(emu):
    reqs = parse_label_selector("a in (1,2), b notin (3), c, !d, e=f")
    assert labels_match(reqs, {"a": "1", "c": "", "e": "f"})
    assert not labels_match(reqs, {"a": "1", "b": "3", "c": "", "e": "f"})
    assert emu.request("GET", f"{PODS}?labelSelector=a%20in%20")[0] == 400
    assert emu.request("GET", f"{PODS}?labelSelector=a%3D%3Db%3Dc")[0] == 400


def test_field_selectors(emu):
    emu.create(pod("a"))
    emu.create(pod("b"))
    emu.create(pod("a"), namespace="kube-system")
    emu.patch("pods", "default", "b", {"status": {"phase": "Running"}}, subresource="status")

    def names(path):
        return [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in emu.request("GET", path)[1]["items"]]  # noqa: E731

    assert names("/api/v1/pods?fieldSelector=metadata.name%3Da") == [("default", "a"), ("kube-system", "a")]
    assert names("/api/v1/pods?fieldSelector=metadata.namespace%3Ddefault") == [("default", "a"), ("default", "b")]
    assert names(f"{PODS}?fieldSelector=status.phase%3DRunning") == [("default", "b")]
    assert names(f"{PODS}?fieldSelector=status.phase!%3DRunning,metadata.name%3Da") == [("default", "a")]
    status, body = emu.request("GET", f"{PODS}?fieldSelector=spec.image%3Dx")
    assert status == 400 and "field label not supported" in body["message"]
    assert emu.request("GET", f"{ERS}?fieldSelector=status.phase%3DRunning")[0] == 400


def test_namespaced_and_clusterwide_lists(emu):
    emu.create(pod("a"))
    emu.create(pod("b"), namespace="kube-system")
    _, everything = emu.request("GET", "/api/v1/pods")
    _, default = emu.request("GET", PODS)
    assert [i["metadata"]["name"] for i in everything["items"]] == ["a", "b"]
    assert [i["metadata"]["name"] for i in default["items"]] == ["a"]
    assert everything["kind"] == "PodList" and int(everything["metadata"]["resourceVersion"]) >= rv(
        emu.get("pods", "kube-system", "b")
    )
    _, nss = emu.request("GET", "/api/v1/namespaces")
    assert {"default", "kube-system"} <= {i["metadata"]["name"] for i in nss["items"]}
    assert emu.request("GET", "/api/v1/namespaces/default")[1]["status"]["phase"] == "Active"
    assert emu.request("GET", "/apis/apiextensions.k8s.io/v1/namespaces/default/customresourcedefinitions")[0] == 404


def test_list_pagination(emu):
    for i in range(7):
        emu.create(cm(f"c{i}"))
    seen, token, rvs = [], "", set()
    while True:
        _, body = emu.request("GET", f"{CMS}?limit=3" + (f"&continue={token}" if token else ""))
        seen += [i["metadata"]["name"] for i in body["items"]]
        rvs.add(body["metadata"]["resourceVersion"])
        token = body["metadata"].get("continue")
        if not token:
            break
    assert seen == [f"c{i}" for i in range(7)] and len(rvs) == 1


# ---- validation ---------------------------------------------------------------------------------


def test_crd_defaulting_pruning_and_validation(emu):
    body = evalrun()
    body["spec"]["unknownField"] = 1
    body["spec"].pop("attempts")
    body["status"] = {"phase": "Set by client"}
    status, er = emu.request("POST", ERS, body)
    assert status == 201
    assert er["spec"]["attempts"] == 1 and er["spec"]["agent"] == "mcpmark"  # schema defaults
    assert er["spec"]["limits"]["verifierTimeoutSeconds"] == 300
    assert "unknownField" not in er["spec"] and "status" not in er  # pruned; status only via /status
    bad = evalrun("bad")
    bad["spec"]["attempts"] = 0
    status, body = emu.request("POST", ERS, bad)
    assert status == 422 and "spec.attempts" in body["message"]
    bad["spec"]["attempts"] = 1
    bad["spec"]["models"][0]["params"] = {"reasoningEffort": "extreme"}
    assert emu.request("POST", ERS, bad)[0] == 422
    bad["spec"]["models"][0]["params"] = {"temperature": None}  # nullable
    assert emu.request("POST", ERS, bad)[0] == 201
    status, _ = emu.request("PATCH", f"{ERS}/bad", {"spec": {"models": []}}, MERGE)
    assert status == 422  # minItems on updates too


def test_name_label_and_pod_validation(emu):
    assert emu.request("POST", CMS, cm("Upper_Case"))[0] == 422
    status, body = emu.request("POST", PODS, pod("p", {"model": "openai/gpt-5"}))
    assert status == 422 and "metadata.labels" in body["message"]  # '/' is not allowed in label values
    assert emu.request("POST", PODS, pod("p", {"x" * 64: "v"}))[0] == 422
    nameless = pod("p")
    del nameless["spec"]["containers"][0]["image"]
    assert emu.request("POST", PODS, nameless)[0] == 422
    assert emu.request("POST", PODS, pod("p"))[0] == 201
    status, body = emu.request("PATCH", f"{PODS}/p", {"spec": {"restartPolicy": "Never"}}, MERGE)
    assert status == 422 and "Forbidden" in body["message"]  # pod specs are immutable
    patch = [{"op": "replace", "path": "/spec/containers/0/image", "value": "alpine"}]
    assert emu.request("PATCH", f"{PODS}/p", patch, JSONPATCH)[0] == 200


def test_enforced_namespaces():
    with running_emulator(enforce_namespaces=True) as emu:
        status, body = emu.request("POST", "/api/v1/namespaces/missing/configmaps", cm("c"))
        assert status == 404 and body["message"] == 'namespaces "missing" not found'
        assert emu.request("POST", CMS, cm("c"))[0] == 201


def test_dry_run_does_not_store(emu):
    status, body = emu.request("POST", f"{CMS}?dryRun=All", cm("c"))
    assert status == 201 and body["metadata"]["name"] == "c"
    assert emu.request("GET", f"{CMS}/c")[0] == 404


# ---- discovery, logs, counters -----------------------------------------------------------------


def test_discovery(emu):
    _, api = emu.request("GET", "/api")
    assert api["versions"] == ["v1"]
    _, v1 = emu.request("GET", "/api/v1")
    by_name = {r["name"]: r for r in v1["resources"]}
    assert {"pods", "pods/status", "pods/log", "events", "secrets", "configmaps", "namespaces"} <= set(by_name)
    assert by_name["namespaces"]["namespaced"] is False and "watch" in by_name["pods"]["verbs"]
    _, apis = emu.request("GET", "/apis")
    assert {g["name"] for g in apis["groups"]} == {"apiextensions.k8s.io", "coordination.k8s.io", "mcpfleet.io"}
    _, grp = emu.request("GET", "/apis/mcpfleet.io/v1alpha1")
    ers = {r["name"]: r for r in grp["resources"]}
    assert ers["evalruns"]["kind"] == "EvalRun" and ers["evalruns"]["shortNames"] == ["er"]
    assert "evalruns/status" in ers
    assert emu.request("GET", "/version")[1]["major"] == "1"
    assert emu.request("GET", "/openapi/v2")[0] == 404
    assert emu.request("GET", "/healthz") == (200, "ok")


def test_crd_lifecycle_serves_and_unserves_the_resource(emu):
    crd = yaml.safe_load(EVALRUN_CRD_PATH.read_text())
    assert (
        emu.get("customresourcedefinitions", None, "evalruns.mcpfleet.io")["status"]["conditions"][1]["type"]
        == "Established"
    )
    emu.create(evalrun())
    emu.request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/evalruns.mcpfleet.io")
    assert emu.request("GET", ERS)[0] == 404
    assert emu.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    _, listing = emu.request("GET", ERS)
    assert listing["items"] == []  # the old objects went with the CRD


def test_pod_logs(emu):
    emu.create(pod("p"))
    emu.emulator.set_pod_log("default", "p", "main", "line 1\nline 2\nline 3\n")
    assert emu.request("GET", f"{PODS}/p/log") == (200, "line 1\nline 2\nline 3\n")
    assert emu.request("GET", f"{PODS}/p/log?container=main&tailLines=1") == (200, "line 3\n")
    assert emu.request("GET", f"{PODS}/p/log?container=sidecar")[0] == 400
    assert emu.request("GET", f"{PODS}/nope/log")[0] == 404


def test_request_counts_and_snapshots(emu):
    emu.emulator.reset_counts()
    emu.request("POST", PODS, pod("p"))
    emu.request("PATCH", f"{PODS}/p/status", {"status": {"phase": "Running"}}, MERGE)
    emu.request("GET", PODS)
    emu.request("GET", f"{PODS}/p")
    emu.request("DELETE", f"{PODS}/p")
    counts = emu.emulator.request_counts
    assert counts == {
        ("create", "pods"): 1,
        ("patch", "pods/status"): 1,
        ("list", "pods"): 1,
        ("get", "pods"): 1,
        ("delete", "pods"): 1,
    }
    snapshot = emu.emulator.objects("namespaces")
    snapshot[0]["metadata"]["name"] = "mutated"  # a deep copy: the store is untouched
    assert emu.get("namespaces", None, "default") is not None
    assert list(emu.emulator.request_log)[-1][2] == 200


# ---- watch --------------------------------------------------------------------------------------


async def read_events(url: str, count: int, timeout: float = 5.0) -> list[tuple[str, str]]:
    """Open a watch, read `count` events (or until the server ends the stream)."""
    events = []
    async with aiohttp.ClientSession() as session:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            assert resp.status == 200
            async for line in resp.content:
                event = json.loads(line)
                events.append((event["type"], event["object"]["metadata"].get("name")))
                if len(events) >= count:
                    break
    return events


async def test_watch_streams_events_in_order(emu):
    emu.create(pod("old"))
    events: list = []
    task = asyncio.create_task(read_events(emu.url + PODS + "?watch=true", 6))
    await asyncio.sleep(0.1)
    await asyncio.to_thread(emu.request, "POST", PODS, pod("new"))
    await asyncio.to_thread(emu.request, "PATCH", f"{PODS}/new/status", {"status": {"phase": "Running"}}, MERGE)
    await asyncio.to_thread(emu.request, "PATCH", f"{PODS}/new/status", {"status": {"phase": "Running"}}, MERGE)
    await asyncio.to_thread(emu.request, "PATCH", f"{PODS}/new", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    await asyncio.to_thread(emu.request, "DELETE", f"{PODS}/new")
    await asyncio.to_thread(emu.request, "POST", "/api/v1/namespaces/kube-system/pods", pod("elsewhere"))
    await asyncio.to_thread(emu.request, "POST", PODS, pod("last"))
    events = await task
    assert events == [
        ("ADDED", "old"),
        ("ADDED", "new"),
        ("MODIFIED", "new"),
        ("MODIFIED", "new"),
        ("DELETED", "new"),
        ("ADDED", "last"),
    ]  # the no-op patch made no event


@pytest.mark.parametrize("flag", ["true", "True", "1"])
async def test_watch_from_resource_version_replays_history(emu, flag):
    first = emu.create(pod("a"))
    emu.patch("pods", "default", "a", {"metadata": {"labels": {"x": "1"}}})
    emu.create(pod("b"))
    emu.delete("pods", "default", "a")
    url = f"{emu.url}/api/v1/pods?watch={flag}&resourceVersion={first['metadata']['resourceVersion']}"
    events = await read_events(url, 3)
    assert events == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    events = await read_events(f"{emu.url}/api/v1/pods?watch={flag}&resourceVersion=0", 1)
    assert events == [("ADDED", "b")]


async def test_watch_timeout_seconds_ends_the_stream(emu):
    start = time.monotonic()
    events = await read_events(emu.url + PODS + "?watch=1&timeoutSeconds=1", 100)
    assert events == [] and 0.9 < time.monotonic() - start < 2.5


async def test_watch_selectors_and_transitions(emu):
    emu.create(pod("a", {"run": "x"}))
    emu.create(pod("b", {"run": "y"}))
    task = asyncio.create_task(read_events(emu.url + PODS + "?watch=true&labelSelector=run%3Dx", 4))
    await asyncio.sleep(0.1)
    await asyncio.to_thread(emu.patch, "pods", "default", "b", {"metadata": {"labels": {"run": "x"}}})
    await asyncio.to_thread(emu.patch, "pods", "default", "a", {"metadata": {"labels": {"run": "z"}}})
    await asyncio.to_thread(emu.patch, "pods", "default", "a", {"metadata": {"labels": {"other": "1"}}})
    await asyncio.to_thread(emu.patch, "pods", "default", "b", {"status": {"phase": "Running"}}, "status")
    events = await task
    assert events == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b")]
    task = asyncio.create_task(read_events(emu.url + PODS + "?watch=true&fieldSelector=status.phase%3DRunning", 2))
    await asyncio.sleep(0.1)
    await asyncio.to_thread(emu.patch, "pods", "default", "b", {"status": {"phase": "Succeeded"}}, "status")
    assert await task == [("ADDED", "b"), ("DELETED", "b")]


async def test_watch_expired_resource_version_is_410_and_initial_events_bookmark():
    with running_emulator(history_limit=3) as emu:
        first = emu.create(cm("c"))
        for i in range(5):
            emu.patch("configmaps", "default", "c", {"data": {"i": str(i)}})
        async with aiohttp.ClientSession() as session:
            url = f"{emu.url}{CMS}?watch=true&resourceVersion={first['metadata']['resourceVersion']}"
            async with session.get(url) as resp:
                lines = [json.loads(line) async for line in resp.content]
            assert len(lines) == 1 and lines[0]["type"] == "ERROR" and lines[0]["object"]["code"] == 410
            url = f"{emu.url}{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
            async with session.get(url) as resp:
                first_line, second = (
                    json.loads(await resp.content.readline()),
                    json.loads(await resp.content.readline()),
                )
            assert first_line["type"] == "ADDED" and second["type"] == "BOOKMARK"
            assert second["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_server_stop_ends_open_watches():
    with running_emulator() as emu:
        task = asyncio.create_task(read_events(emu.url + PODS + "?watch=true", 10, timeout=10))
        await asyncio.sleep(0.1)
        start = time.monotonic()
    assert await task == [] and time.monotonic() - start < 2


# ---- kubectl -----------------------------------------------------------------------------------


def test_kubectl_against_the_emulator(emu, tmp_path):
    example = REPO / "examples" / "evalrun.yaml"
    out = emu.kubectl("apply", "--validate=false", "-f", str(example)).stdout
    assert "evalrun.mcpfleet.io/filesystem-gpt5-vs-sonnet created" in out
    emu.patch(
        "evalruns",
        "default",
        "filesystem-gpt5-vs-sonnet",
        {"status": {"phase": "Running", "progress": "3/16", "passAt1": "0.50"}},
        "status",
    )
    table = emu.kubectl("get", "evalruns").stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "PROGRESS", "PASS@1", "AGE"]
    assert table[1].split()[:4] == ["filesystem-gpt5-vs-sonnet", "Running", "3/16", "0.50"]
    assert emu.kubectl("get", "er", "-o", "jsonpath={.items[0].spec.agent}").stdout == "mcpmark"  # defaulted
    changed = yaml.safe_load(example.read_text())
    changed["spec"]["attempts"] = 2
    (tmp_path / "changed.yaml").write_text(yaml.safe_dump(changed))
    assert "configured" in emu.kubectl("apply", "--validate=false", "-f", str(tmp_path / "changed.yaml")).stdout
    er = emu.get("evalruns", "default", "filesystem-gpt5-vs-sonnet")
    assert er["spec"]["attempts"] == 2 and er["metadata"]["generation"] == 2 and er["status"]["phase"] == "Running"
    for name, run in (("p1", "x"), ("p2", "x"), ("p3", "y")):
        emu.create(pod(name, {"run": run}))
    out = emu.kubectl("get", "pods", "-l", "run=x", "-o", "jsonpath={.items[*].metadata.name}").stdout
    assert out == "p1 p2"
    assert "p3" in emu.kubectl("get", "pods").stdout
    emu.kubectl("wait", "--for=jsonpath={.status.phase}=Running", "evalrun/filesystem-gpt5-vs-sonnet", "--timeout=5s")
    out = emu.kubectl("delete", "evalrun", "filesystem-gpt5-vs-sonnet").stdout
    assert "deleted" in out and emu.get("evalruns", "default", "filesystem-gpt5-vs-sonnet") is None
    bad = yaml.safe_load(example.read_text())
    bad["spec"]["attempts"] = 0
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    proc = emu.kubectl("apply", "--validate=false", "-f", str(tmp_path / "bad.yaml"), check=False)
    assert proc.returncode != 0 and "spec.attempts" in proc.stderr


def test_kubectl_applies_builtin_objects(emu, tmp_path):
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod("web", {"run": "w"})))
    emu.kubectl("apply", "--validate=false", "-f", str(tmp_path / "pod.yaml"))
    emu.kubectl("label", "pod", "web", "extra=1")
    assert emu.get("pods", "default", "web")["metadata"]["labels"] == {"run": "w", "extra": "1"}
    # Typed "kubectl create" commands send protobuf bodies.
    emu.kubectl("create", "configmap", "settings", "--from-literal=a=1", "--from-literal=b=two")
    assert emu.get("configmaps", "default", "settings")["data"] == {"a": "1", "b": "two"}
    emu.kubectl("create", "namespace", "team-a")
    emu.kubectl("create", "secret", "generic", "llm-keys", "--from-literal=openai=sk-1", "-n", "team-a")
    secret = emu.get("secrets", "team-a", "llm-keys")
    assert secret["type"] == "Opaque" and base64.b64decode(secret["data"]["openai"]) == b"sk-1"
    emu.kubectl("delete", "pods", "-l", "run=w")
    assert emu.objects("pods") == []


def test_protobuf_bodies_are_decoded_and_malformed_ones_are_400(emu):
    def field(number: int, payload: bytes) -> bytes:  # a length-delimited field (payloads under 128 bytes)
        return bytes([number << 3 | 2, len(payload)]) + payload

    ctype = "application/vnd.kubernetes.protobuf"
    type_meta = field(1, field(1, b"v1") + field(2, b"ConfigMap"))
    configmap = field(1, field(1, b"proto")) + field(2, field(1, b"k") + field(2, b"v"))
    status, body = emu.request("POST", CMS, b"k8s\x00" + type_meta + field(2, configmap), ctype)
    assert status == 201 and body["metadata"]["name"] == "proto" and body["data"] == {"k": "v"}
    metadata_as_varint = bytes([1 << 3 | 0, 7])
    status, body = emu.request("POST", CMS, b"k8s\x00" + type_meta + field(2, metadata_as_varint), ctype)
    assert status == 400 and "malformed protobuf" in body["message"]  # was a 500: the decoder took the int for bytes


def test_kubectl_get_watch(emu):
    emu.kubectl("apply", "--validate=false", "-f", str(REPO / "examples" / "evalrun.yaml"))
    env = dict(os.environ, KUBECONFIG=str(emu.kubeconfig_path), KUBECACHEDIR=str(emu.tmpdir / "kubecache"))
    proc = subprocess.Popen([KUBECTL, "get", "er", "-w"], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None  # stdout=PIPE
    try:
        assert proc.stdout.readline().split() == ["NAME", "PHASE", "PROGRESS", "PASS@1", "AGE"]
        assert proc.stdout.readline().split()[0] == "filesystem-gpt5-vs-sonnet"
        emu.patch("evalruns", "default", "filesystem-gpt5-vs-sonnet", {"status": {"phase": "Running"}}, "status")
        assert proc.stdout.readline().split()[:2] == ["filesystem-gpt5-vs-sonnet", "Running"]  # a Table watch
    finally:
        proc.terminate()
        proc.wait(5)


# ---- kopf ---------------------------------------------------------------------------------------


def test_kopf_operator_in_a_thread(emu):
    seen: list[tuple[str, str]] = []

    def handlers(registry):
        @kopf.on.create("mcpfleet.io", "v1alpha1", "evalruns", id="create_run", registry=registry)
        def create_run(name, body, patch, **_):
            seen.append(("create", name))
            kopf.info(body, reason="Started", message="posted as a v1 Event")
            patch.status["phase"] = "Running"
            return {"started": True}  # kopf stores it as status.create_run

        @kopf.on.delete("mcpfleet.io", "v1alpha1", "evalruns", registry=registry)
        def delete_run(name, **_):
            seen.append(("delete", name))

        @kopf.on.create("configmaps", registry=registry)
        def touch_cm(name, patch, **_):
            seen.append(("cm", name))
            patch.metadata.annotations["touched"] = "yes"

    with run_kopf_in_thread(handlers, emu.kubeconfig_path, namespace="default") as op:
        assert op.thread.is_alive()
        emu.create(evalrun())
        emu.create(cm("c"))
        er = wait_for(lambda: (o := emu.get("evalruns", "default", "er1")) and o.get("status", {}).get("phase") and o)
        assert er["status"]["phase"] == "Running"
        assert er["status"]["create_run"] == {"started": True}
        assert "kopf.zalando.org/KopfFinalizerMarker" in er["metadata"]["finalizers"]
        wait_for(lambda: emu.get("configmaps", "default", "c")["metadata"].get("annotations", {}).get("touched"))
        counts = emu.emulator.request_counts
        assert counts[("patch", "evalruns/status")] >= 1 and counts[("watch", "evalruns")] >= 1
        events = wait_for(lambda: emu.objects("events", "default"))  # kopf posts k8s Events
        assert any(e["involvedObject"]["name"] == "er1" and e["reason"] == "Started" for e in events)
        emu.delete("evalruns", "default", "er1")
        wait_for(lambda: emu.get("evalruns", "default", "er1") is None)
        assert seen.count(("delete", "er1")) == 1
    assert not op.thread.is_alive()
    assert ("create", "er1") in seen and ("cm", "c") in seen


def test_kopf_module_handlers_and_startup_errors(emu, tmp_path, monkeypatch):
    module = tmp_path / "throwaway_operator.py"
    module.write_text(
        "import kopf\n"
        "@kopf.on.create('configmaps')\n"
        "def mark(patch, **_):\n"
        "    patch.metadata.labels['handled'] = 'true'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with run_kopf_in_thread("throwaway_operator", emu.kubeconfig_path):  # cluster-wide
        emu.create(cm("x"), namespace="kube-public")
        wait_for(lambda: emu.get("configmaps", "kube-public", "x")["metadata"].get("labels", {}).get("handled"))
    with pytest.raises(RuntimeError):

        def broken(registry):
            @kopf.on.startup(registry=registry)
            def boom(**_):
                raise kopf.PermanentError("no")

        with run_kopf_in_thread(broken, emu.kubeconfig_path):
            pass


# ---- kmock compatibility ------------------------------------------------------------------------


@pytest.fixture
def kmock_options():
    return {"cls": RealisticEmulator, "record_requests": True}


async def test_works_as_the_kmock_fixture_class(kmock):
    assert isinstance(kmock, RealisticEmulator)
    resp = await kmock.post(PODS, json=pod("p"))
    assert resp.status == 201
    kmock["get", kmock.resource("v1/configmaps")] << 503  # kmock reactions still work, others fall through
    assert (await kmock.get(CMS)).status == 503
    resp = await kmock.get(f"{PODS}/p")
    assert resp.status == 200 and (await resp.json())["metadata"]["name"] == "p"
    assert len(list(kmock["post"])) == 1 and len(list(kmock)) == 3  # recorded for kmock's assertions
    assert [o["metadata"]["name"] for o in kmock.objects("pods")] == ["p"]
    # kmock's client shortcuts are its own: the emulator's verbs no longer shadow them (a TypeError before).
    patch = json.dumps({"metadata": {"labels": {"x": "1"}}})
    resp = await kmock.patch(f"{PODS}/p", data=patch, headers={"Content-Type": MERGE})
    assert resp.status == 200 and (await resp.json())["metadata"]["labels"] == {"x": "1"}
    assert (await kmock.delete(f"{PODS}/p")).status == 200 and kmock.objects("pods") == []


def test_python_kubernetes_client(emu):
    from kubernetes import client, config, watch

    api = config.new_client_from_config(config_file=str(emu.kubeconfig_path))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    # The client sends a plain dict body as it is (sanitize_for_serialization); its signature names only the model.
    created = core.create_namespaced_pod("default", cast(client.V1Pod, pod("x", {"run": "r"})))
    assert created.status is not None and created.status.phase == "Pending"
    listed = core.list_namespaced_pod("default", label_selector="run=r").items
    assert [p.metadata.name if p.metadata else None for p in listed] == ["x"]
    running = core.patch_namespaced_pod_status("x", "default", {"status": {"phase": "Running"}}).status
    assert running is not None and running.phase == "Running"
    emu.emulator.set_pod_log("default", "x", "main", "hello\n")
    assert core.read_namespaced_pod_log("x", "default") == "hello\n"
    events = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1)
    ]
    assert events == [("ADDED", "x")]
    # Custom objects come back as decoded JSON; the client declares them `object`.
    er = cast(
        dict[str, Any],
        custom.create_namespaced_custom_object("mcpfleet.io", "v1alpha1", "default", "evalruns", evalrun()),
    )
    patched = cast(
        dict[str, Any],
        custom.patch_namespaced_custom_object_status(  # kubernetes 37 defaults to a merge patch here
            "mcpfleet.io", "v1alpha1", "default", "evalruns", er["metadata"]["name"], {"status": {"phase": "X"}}
        ),
    )
    assert patched["status"] == {"phase": "X"}
    core.delete_namespaced_pod("x", "default")
    assert emu.objects("pods") == []


def test_human_duration():
    assert [human_duration(s) for s in (0, 59, 119, 130, 600, 7200, 3 * 86400, 400 * 86400)] == [
        "0s",
        "59s",
        "119s",
        "2m10s",
        "10m",
        "120m",
        "3d",
        "400d",
    ]


# ---- throughput (a smoke version of the 10k-pod benchmark) ---------------------------------------


async def test_throughput_with_a_watch_open(emu):
    n = 300
    async with aiohttp.ClientSession() as session:
        seen: list[str] = []

        async def watch():
            async with session.get(emu.url + "/api/v1/pods?watch=true") as resp:
                async for line in resp.content:
                    seen.append(json.loads(line)["type"])
                    if len(seen) == 4 * n:
                        return

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.05)
        start = time.monotonic()

        async def one(i: int) -> None:
            async with session.post(emu.url + PODS, json=pod(f"p{i}")) as r:
                assert r.status == 201
            for phase in ("Running", "Succeeded"):
                async with session.patch(
                    f"{emu.url}{PODS}/p{i}/status",
                    data=json.dumps({"status": {"phase": phase}}),
                    headers={"Content-Type": MERGE},
                ) as r:
                    assert r.status == 200
            async with session.delete(f"{emu.url}{PODS}/p{i}") as r:
                assert r.status == 200

        await asyncio.gather(*(one(i) for i in range(n)))
        await asyncio.wait_for(watcher, 5)
        elapsed = time.monotonic() - start
    assert seen.count("ADDED") == n and seen.count("DELETED") == n and seen.count("MODIFIED") == 2 * n
    assert elapsed < 5, f"{4 * n} requests took {elapsed:.2f} s"
