"""A realistic in-memory Kubernetes API server for tests: kopf and kubectl run against it.

``RealisticEmulator`` subclasses ``kmock.KubernetesEmulator`` (so it also works as the class of
kmock's pytest fixture: ``kmock_options`` -> ``{'cls': RealisticEmulator}``), but serves the
Kubernetes API itself, indexed by resource/namespace/name:

* object metadata: uid, resourceVersion (one global counter, bumped on every write),
  creationTimestamp, generation (1 on create, +1 when anything outside metadata/status changes,
  i.e. ``.spec`` or ``.data``), generateName, deletionTimestamp + finalizers, ownerReference GC;
* verbs: list (sorted, ``limit``/``continue`` paging), watch (``watch=true|True|1``,
  ``resourceVersion``, ``timeoutSeconds``, ``sendInitialEvents``, 410 Gone for an expired
  resourceVersion), get, create (201), replace (PUT), patch (merge, JSON and strategic-as-merge),
  delete (200, or 202 while finalizers hold the object), deletecollection;
* the ``/status`` subresource rule, label and field selectors, Kubernetes ``Status`` errors
  (400/404/405/409/415/422), ``dryRun``, server-side printing (``as=Table``) for kubectl;
* CRDs: storing a CRD serves its resource; CRs are defaulted, pruned and validated against the
  CRD's ``openAPIV3Schema`` (jsonschema, Draft 4 + ``nullable``);
* pods: status ``Pending`` on create, minimal validation (containers with name and image),
  spec immutability, a ``binding`` subresource (sets ``spec.nodeName`` once, as the scheduler does),
  a ``log`` subresource fed by :meth:`RealisticEmulator.set_pod_log`, and graceful deletion as the
  real server does it: a pod bound to a node and not yet Succeeded/Failed gets ``deletionTimestamp``
  (now + its grace: ``gracePeriodSeconds`` or ``spec.terminationGracePeriodSeconds``) and
  ``deletionGracePeriodSeconds`` and stays until its node deletes it with ``gracePeriodSeconds=0``
  (a node that never does, a lost node, leaves it Terminating for ever); an unbound or finished pod
  goes at once; ``spec.schedulingGates`` may only be removed, and a gated pod cannot be bound;
* Kueue's pod webhook, stood in for when ``kueue_webhook`` is set: a pod labelled
  ``kueue.x-k8s.io/queue-name`` is created with the gate ``kueue.x-k8s.io/admission`` (a test plays
  Kueue's admission by removing it);
* label/annotation/name syntax validation as a real server does it (422);
* protobuf request bodies of ConfigMaps, Secrets and Namespaces (kubectl's typed ``create``
  commands send protobuf); answers are always JSON, which client-go accepts.

Not emulated: strategic-merge list semantics and ``$patch`` directives (strategic merge patch is a
plain JSON merge patch here, and is refused with 415 for custom resources as a real server does),
server-side apply (415), admission webhooks (but Kueue's, above), RBAC/authentication (any token
works), foreground deletion (is treated as background), periodic watch bookmarks, managedFields,
other protobuf bodies (415),
``/openapi`` (404: use ``kubectl --validate=false``), ``follow=true`` log streaming (the current
text is returned), CRD conversion (each served version is stored separately).

Requests go straight to the emulator's own router; kmock's request recording and reaction DSL
(``emulator['get /x'] << 500``) are used only if reactions were added or ``record_requests=True``
(kmock checks every recorded request on every request, which is quadratic: keep it off in
benchmarks). ``request_counts`` counts requests by (verb, resource) in any case.

Use :func:`running_emulator` to serve it from a background thread with its own event loop, and
:func:`run_kopf_in_thread` to run a kopf operator against it.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import dataclasses
import datetime
import importlib
import inspect
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import traceback
import types
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import aiohttp.web
import attrs
import kmock
import yaml

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
EVALRUN_CRD_PATH = REPO / "crds" / "evalrun.yaml"


def operator_crds() -> list[dict[str, Any]]:
    """Every CRD the chart installs (crds/*.yaml: the EvalRun and kopf's peering resources), one dict each: what
    `mcpfleet operator` needs to act (with peering on, it waits without its peering CRD)."""
    import yaml

    return [
        doc
        for path in sorted(EVALRUN_CRD_PATH.parent.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


KUBECTL = str(Path(sys.executable).with_name("kubectl"))
# Kueue's plain-pod integration, as its documentation names it (not the operator's constants: the stand-in must
# catch an operator that got them wrong).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_GATE = "kueue.x-k8s.io/admission"
KUEUE_MANAGED_LABEL = "kueue.x-k8s.io/managed"
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_TRUE = {"true", "True", "TRUE", "1", "t", "T"}
_FALSE = {"false", "False", "FALSE", "0", "f", "F", ""}
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SYSTEM_META = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "name",
    "namespace",
)


# ----------------------------------------------------------------------------------------------
# Errors and small JSON helpers
# ----------------------------------------------------------------------------------------------


class ApiError(Exception):
    """An error answered as a Kubernetes ``Status`` body."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def body(self) -> dict:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _now(after: float = 0.0) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=after)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def deepcopy_json(value: Any) -> Any:
    """A fast deep copy of a JSON tree (dicts, lists, scalars)."""
    if type(value) is dict:
        return {k: deepcopy_json(v) for k, v in value.items()}
    if type(value) is list:
        return [deepcopy_json(v) for v in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new tree sharing the untouched subtrees of target."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    for part in parts:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            raise ApiError(
                422,
                "Invalid",
                f"the server rejected our request due to an error in our request: path {path!r} does not exist",
            )
    return doc


def apply_json_patch(doc: Any, ops: list) -> Any:
    """RFC 6902 JSON patch on a deep copy of doc; a failed op (incl. ``test``) is a 422."""
    doc = deepcopy_json(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, "BadRequest", f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind == "test":
            if _walk(doc, parts, path) != op.get("value"):
                raise ApiError(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an error in "
                    f"our request: testing value {path} failed: test failed",
                )
            continue
        if kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = deepcopy_json(_walk(doc, src, op.get("from", "")))
            if kind == "move":
                doc = _remove(doc, src, op["from"])
            doc = _add(doc, parts, path, value, replace=False)
        elif kind == "add":
            doc = _add(doc, parts, path, op.get("value"), replace=False)
        elif kind == "replace":
            _walk(doc, parts, path)
            doc = _add(doc, parts, path, op.get("value"), replace=True)
        elif kind == "remove":
            doc = _remove(doc, parts, path)
        else:
            raise ApiError(400, "BadRequest", f"unexpected JSON patch kind: {kind!r}")
    return doc


def _add(doc: Any, parts: list[str], path: str, value: Any, replace: bool) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    key = parts[-1]
    if isinstance(parent, dict):
        parent[key] = value
    elif isinstance(parent, list):
        if key == "-" and not replace:
            parent.append(value)
        elif key.isdigit() and int(key) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(key)] = value
            else:
                parent.insert(int(key), value)
        else:
            raise ApiError(422, "Invalid", f"the server rejected our request: index out of range: {path}")
    else:
        raise ApiError(422, "Invalid", f"the server rejected our request: cannot add at {path}")
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    _walk(doc, parts, path)
    if not parts:
        return None
    parent = _walk(doc, parts[:-1], path)
    if isinstance(parent, dict):
        del parent[parts[-1]]
    else:
        del parent[int(parts[-1])]
    return doc


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration, as kubectl prints ages."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m" if s % 60 == 0 else f"{m}m{s % 60}s"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h" if m % 60 == 0 else f"{h}h{m % 60}m"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d" if h % 24 == 0 else f"{h // 24}d{h % 24}h"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    return f"{h // (24 * 365)}y"


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    then = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return human_duration((datetime.datetime.now(datetime.UTC) - then).total_seconds())


def _jsonpath(obj: Any, path: str) -> Any:
    """The simple JSONPath subset of printer columns: ``.a.b``, ``.a[0].b``, ``.a['x.y']``."""
    for key, index in re.findall(r"\.([^.\[]+)|\[['\"]?([^\]'\"]+)['\"]?\]", path):
        if key:
            obj = obj.get(key) if isinstance(obj, dict) else None
        elif isinstance(obj, list) and index.lstrip("-").isdigit() and -len(obj) <= int(index) < len(obj):
            obj = obj[int(index)]
        elif isinstance(obj, dict):
            obj = obj.get(index)
        else:
            obj = None
    return obj


# ----------------------------------------------------------------------------------------------
# Selectors
# ----------------------------------------------------------------------------------------------


def _split_commas(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _check_label_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if (
        (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)))
        or len(name) > 63
        or not _QUALIFIED.match(name)
    ):
        raise ApiError(400, "BadRequest", f"unable to parse requirement: invalid label key {key!r}")


def parse_label_selector(text: str | None) -> list[tuple[str, str, Any]]:
    """``a=b,c!=d,e in (f,g),h notin (i),j,!k,l>3`` -> [(key, op, value)] (ANDed)."""
    requirements: list[tuple[str, str, Any]] = []  # value: a set for in/notin, None for exists/!, else a str
    for part in _split_commas(text or ""):
        if m := re.fullmatch(r"(\S+)\s+(in|notin)\s*\((.*)\)", part):
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            values.discard("")
            requirements.append((key, op, values))
        elif m := re.fullmatch(r"([^=!<>\s]+)\s*(==|=|!=|<|>)\s*([^=!<>\s]*)", part):
            key, op, value = m.groups()
            if op in "<>" and not value.lstrip("-").isdigit():
                raise ApiError(400, "BadRequest", f"unable to parse requirement: {part!r}: not an integer")
            if op not in "<>" and not _LABEL_VALUE.match(value):
                raise ApiError(400, "BadRequest", f"unable to parse requirement: invalid label value {value!r}")
            requirements.append((key, {"==": "=", "=": "="}.get(op, op), value))
        elif m := re.fullmatch(r"!\s*([^=!<>\s()]+)", part):
            requirements.append((m.group(1), "!", None))
        elif m := re.fullmatch(r"([^=!<>\s()]+)", part):
            requirements.append((m.group(1), "exists", None))
        else:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {part!r}")
        _check_label_key(requirements[-1][0])
    return requirements


def labels_match(requirements: list[tuple[str, str, Any]], labels: dict | None) -> bool:
    labels = labels or {}
    for key, op, value in requirements:
        present, actual = key in labels, labels.get(key)
        if op == "=":
            ok = present and actual == value
        elif op == "!=":
            ok = not present or actual != value
        elif op == "in":
            ok = present and actual in value
        elif op == "notin":
            ok = not present or actual not in value
        elif op == "exists":
            ok = present
        elif op == "!":
            ok = not present
        else:  # "<" / ">": integer comparison, false for absent or non-integer labels
            if actual is None:
                return False
            try:
                number = int(actual)
            except (TypeError, ValueError):
                return False
            ok = number < int(value) if op == "<" else number > int(value)
        if not ok:
            return False
    return True


def _field_getter(path: str) -> Callable[[dict], str]:
    keys = path.split(".")

    def get(obj: dict) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return ""
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    return get


# Field selectors a real server supports, by plural (metadata.name/namespace work everywhere).
FIELD_SELECTORS: dict[str, tuple[str, ...]] = {
    "pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "secrets": ("type",),
    "namespaces": ("status.phase",),
}
_GETTERS: dict[str, Callable[[dict], str]] = {}


def parse_field_selector(text: str | None, plural: str) -> list[tuple[Callable[[dict], str], str, str, str]]:
    requirements = []
    allowed = ("metadata.name", "metadata.namespace") + FIELD_SELECTORS.get(plural, ())
    for part in _split_commas(text or ""):
        m = re.fullmatch(r"([^=!\s]+)\s*(==|=|!=)\s*(.*)", part)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid selector: {text!r}; can't understand {part!r}")
        field, op, value = m.groups()
        if field not in allowed:
            raise ApiError(400, "BadRequest", f"field label not supported: {field}")
        getter = _GETTERS.setdefault(field, _field_getter(field))
        requirements.append((getter, "!=" if op == "!=" else "=", value, field))
    return requirements


def fields_match(requirements: list, obj: dict) -> bool:
    for getter, op, value, _ in requirements:
        if (getter(obj) == value) != (op == "="):
            return False
    return True


# ----------------------------------------------------------------------------------------------
# Resources, watchers, events
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class Resource:
    """One served resource type and its objects: ``by_ns[namespace or ''][name] -> object``."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    shortnames: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    custom: bool = False  # served because of a CRD (strategic merge patch is refused)
    printer_columns: list[dict] | None = None
    schema: dict | None = None
    by_ns: dict[str, dict[str, dict]] = dataclasses.field(default_factory=dict)
    watchers: set[_Watcher] = dataclasses.field(default_factory=set)
    history: collections.deque = dataclasses.field(default_factory=collections.deque)
    dropped_rv: int = 0  # the newest resourceVersion dropped from history (410 Gone below it)
    validator: Any = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def status_subresource(self) -> bool:
        return "status" in self.subresources

    def count(self) -> int:
        return sum(len(names) for names in self.by_ns.values())

    def iter_objects(self, namespace: str | None = None) -> Iterator[dict]:
        if namespace is None:
            for names in list(self.by_ns.values()):
                yield from list(names.values())
        else:
            yield from list(self.by_ns.get(namespace, {}).values())


class _Event:
    """One stored change; its JSON line is rendered once and shared by all watchers."""

    __slots__ = ("rv", "type", "obj", "old", "_line")

    def __init__(self, rv: int, type_: str, obj: dict, old: dict | None):
        self.rv, self.type, self.obj, self.old = rv, type_, obj, old
        self._line: bytes | None = None

    @property
    def line(self) -> bytes:
        if self._line is None:
            self._line = json.dumps({"type": self.type, "object": self.obj}, separators=(",", ":")).encode() + b"\n"
        return self._line


class _Watcher:
    __slots__ = ("namespace", "labels", "fields", "table", "render", "queue", "wake")

    def __init__(self, namespace, labels, fields, table: Callable[[dict], dict] | None):
        self.namespace, self.labels, self.fields, self.table = namespace, labels, fields, table
        self.queue: list[bytes] = []
        self.wake = asyncio.Event()

    def matches(self, obj: dict | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.labels and not labels_match(self.labels, meta.get("labels")):
            return False
        return not self.fields or fields_match(self.fields, obj)

    def event_line(self, event: _Event) -> bytes | None:
        """The line this watcher sees for an event (label/field transitions become ADDED/DELETED)."""
        now = self.matches(event.obj)
        type_ = event.type
        if type_ == "MODIFIED" and (self.labels or self.fields):
            before = self.matches(event.old)
            if not now and not before:
                return None
            type_ = "MODIFIED" if now and before else "ADDED" if now else "DELETED"
        elif not now:
            return None
        if self.table is not None:
            return json.dumps({"type": type_, "object": self.table(event.obj)}).encode() + b"\n"
        if type_ == event.type:
            return event.line
        return json.dumps({"type": type_, "object": event.obj}).encode() + b"\n"

    def push(self, line: bytes) -> None:
        self.queue.append(line)
        self.wake.set()


# ----------------------------------------------------------------------------------------------
# The emulator
# ----------------------------------------------------------------------------------------------

BUILTIN_RESOURCES: tuple[dict, ...] = (
    dict(
        group="",
        version="v1",
        plural="pods",
        kind="Pod",
        singular="pod",
        shortnames=("po",),
        categories=("all",),
        subresources=("status", "log", "binding"),
    ),
    dict(group="", version="v1", plural="events", kind="Event", singular="event", shortnames=("ev",)),
    dict(group="", version="v1", plural="secrets", kind="Secret", singular="secret"),
    dict(group="", version="v1", plural="configmaps", kind="ConfigMap", singular="configmap", shortnames=("cm",)),
    dict(
        group="",
        version="v1",
        plural="namespaces",
        kind="Namespace",
        singular="namespace",
        namespaced=False,
        shortnames=("ns",),
        subresources=("status",),
    ),
    dict(
        group="apiextensions.k8s.io",
        version="v1",
        plural="customresourcedefinitions",
        kind="CustomResourceDefinition",
        singular="customresourcedefinition",
        namespaced=False,
        shortnames=("crd", "crds"),
        subresources=("status",),
    ),
    dict(group="coordination.k8s.io", version="v1", plural="leases", kind="Lease", singular="lease"),
)
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@attrs.define(kw_only=True, slots=False)
class RealisticEmulator(kmock.KubernetesEmulator):
    """A realistic Kubernetes API emulator (see the module docstring). All state lives on one loop."""

    record_requests: bool = False  # also record kmock Requests (quadratic; tests only)
    enforce_namespaces: bool = False  # 404 when creating in a namespace that does not exist
    history_limit: int = 20000  # watch events kept per resource for resourceVersion replays
    validate_schemas: bool = True  # validate custom resources against their CRD's schema
    request_log_size: int = 2000  # recent (method, path?query, status) kept in request_log
    # Kueue's pod webhook, stood in for: a pod created with this label gets the scheduling gate KUEUE_GATE (and
    # Kueue's managed label) and stays unschedulable until a test (playing Kueue's admission) removes the gate.
    kueue_webhook: bool = False

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._payloads.clear()  # drop kmock's own fallbacks: this class routes requests itself
        self.rv = 0
        self.request_counts: collections.Counter = collections.Counter()
        self.request_log: collections.deque = collections.deque(maxlen=self.request_log_size)
        self.pod_logs: dict[tuple[str, str], dict[str, str]] = {}  # (ns, pod) -> container -> text
        self.closing = False
        self._registry: dict[tuple[str, str, str], Resource] = {}
        self._by_kind: dict[tuple[str, str], Resource] = {}
        self._by_uid: dict[str, tuple[Resource, str, str]] = {}
        self._dependents: dict[str, set[tuple[Resource, str, str]]] = collections.defaultdict(set)
        for spec in BUILTIN_RESOURCES:
            self.register_resource(**spec)
        for name in DEFAULT_NAMESPACES:
            self.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    # ---- registry ---------------------------------------------------------------------------

    def register_resource(self, *, group: str, version: str, plural: str, kind: str, **info: Any) -> Resource:
        key = (group, version, plural)
        res = self._registry.get(key)
        if res is None:
            res = Resource(group=group, version=version, plural=plural, kind=kind, **info)
            self._registry[key] = res
        else:  # re-registration (a CRD update) keeps objects and watchers
            for name, value in info.items():
                setattr(res, name, value)
            res.validator = None
        res.singular = res.singular or kind.lower()
        self._by_kind[(res.api_version, kind)] = res
        self.resources[f"{res.api_version}/{plural}"] = kmock.ResourceInfo(
            namespaced=res.namespaced,
            kind=kind,
            singular=res.singular,
            verbs=set(res.verbs),
            shortnames=set(res.shortnames),
            categories=set(res.categories),
            subresources=set(res.subresources),
        )
        return res

    def unregister_resource(self, res: Resource) -> None:
        self._registry.pop((res.group, res.version, res.plural), None)
        self._by_kind.pop((res.api_version, res.kind), None)
        with contextlib.suppress(KeyError):
            del self.resources[f"{res.api_version}/{res.plural}"]
        for watcher in list(res.watchers):
            watcher.wake.set()

    def find_resource(self, spec: str) -> Resource:
        """Find a served resource by any name kubectl accepts (``resource`` stays kmock's criterion constructor).

        'pods', 'v1/pods', 'po', 'Pod', 'evalruns.mcpfleet.io', 'mcpfleet.io/v1alpha1/evalruns'.
        """
        for res in self._registry.values():
            names = {
                res.plural,
                res.singular,
                res.kind,
                res.kind.lower(),
                *res.shortnames,
                f"{res.api_version}/{res.plural}",
                res.group_resource,
                f"{res.plural}.{res.version}.{res.group}",
            }
            if spec in names:
                return res
        raise KeyError(f"no such resource: {spec!r}")

    def served_resources(self) -> list[Resource]:
        return list(self._registry.values())

    # ---- direct (in-process) API; call on the emulator's loop (RunningEmulator routes it) ------

    # kmock's `objects` is a view of kmock's own object store, which this emulator replaces by its registry
    # (kmock's stays empty): the same name lists the real store, so kmock-fixture tests read what was served.
    def objects(self, resource: str, namespace: str | None = None) -> list[dict]:  # type: ignore[override]
        """Deep copies of the stored objects, sorted by (namespace, name). Safe from any thread."""
        res = self.find_resource(resource)
        objs = [deepcopy_json(obj) for obj in res.iter_objects(namespace)]
        return sorted(objs, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def get_object(self, resource: str, namespace: str | None, name: str) -> dict | None:
        res = self.find_resource(resource)
        obj = res.by_ns.get(namespace or "", {}).get(name)
        return deepcopy_json(obj) if obj is not None else None

    def create_object(self, obj: dict, namespace: str | None = None) -> dict:
        res = self._by_kind.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if res is None:
            raise KeyError(f"no resource serves {obj.get('apiVersion')}/{obj.get('kind')}")
        ns = (namespace or obj.get("metadata", {}).get("namespace") or "default") if res.namespaced else None
        return deepcopy_json(self._create(res, ns, deepcopy_json(obj)))

    def patch_object(
        self, resource: str, namespace: str | None, name: str, patch: dict | list, subresource: str | None = None
    ) -> dict:
        """A merge patch (dict) or a JSON patch (list), with the same rules as over HTTP."""
        res = self.find_resource(resource)
        ctype = "application/json-patch+json" if isinstance(patch, list) else "application/merge-patch+json"
        return deepcopy_json(self._patch(res, namespace, name, subresource, deepcopy_json(patch), ctype))

    def delete_object(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        propagation: str = "Background",
        grace_period_seconds: int | None = None,
    ) -> dict:
        res = self.find_resource(resource)
        options: dict[str, Any] = {"propagationPolicy": propagation}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return deepcopy_json(self._delete(res, namespace, name, options)[1])

    def bind_pod(self, namespace: str, name: str, node: str) -> dict:
        """What ``POST .../pods/<name>/binding`` does: the scheduler assigns the pod to ``node``."""
        return deepcopy_json(self._bind(self.find_resource("pods"), namespace, name, {"target": {"name": node}}))

    def install_crd(self, crd: dict | str | Path) -> dict:
        """Store a CRD object (a dict or a YAML file); its resource is served from then on."""
        obj = crd if isinstance(crd, dict) else yaml.safe_load(Path(crd).read_text())
        return self.create_object(obj)

    def set_pod_log(self, namespace: str, name: str, container: str, text: str) -> None:
        """What ``GET .../pods/<name>/log?container=<container>`` answers (the test kubelet's output)."""
        self.pod_logs.setdefault((namespace, name), {})[container] = text

    def reset_counts(self) -> None:
        self.request_counts.clear()
        self.request_log.clear()

    def close_watches(self) -> None:
        """End every watch stream (before shutting the server down)."""
        self.closing = True
        for res in self._registry.values():
            for watcher in list(res.watchers):
                watcher.wake.set()

    # ---- storage core -----------------------------------------------------------------------

    def _lookup(self, res: Resource, ns: str | None, name: str) -> dict:
        obj = res.by_ns.get(ns or "", {}).get(name)
        if obj is None:
            raise ApiError(
                404,
                "NotFound",
                f'{res.group_resource} "{name}" not found',
                {"name": name, "group": res.group, "kind": res.plural},
            )
        return obj

    def _emit(self, res: Resource, type_: str, obj: dict, old: dict | None) -> None:
        event = _Event(self.rv, type_, obj, old)
        history = res.history
        history.append(event)
        if len(history) > self.history_limit:
            res.dropped_rv = history.popleft().rv
        for watcher in res.watchers:
            line = watcher.event_line(event)
            if line is not None:
                watcher.push(line)

    def _store(self, res: Resource, ns: str | None, obj: dict, old: dict | None, type_: str) -> dict:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        meta = obj["metadata"]
        res.by_ns.setdefault(ns or "", {})[meta["name"]] = obj
        old_owners = {r.get("uid") for r in (old or {}).get("metadata", {}).get("ownerReferences") or ()}
        new_owners = {r.get("uid") for r in meta.get("ownerReferences") or ()}
        if old_owners != new_owners:
            key = (res, ns or "", meta["name"])
            for uid in old_owners - new_owners:
                self._dependents.get(uid, set()).discard(key)
            for uid in new_owners - old_owners:
                self._dependents[uid].add(key)
        self._by_uid[meta["uid"]] = (res, ns or "", meta["name"])
        self._emit(res, type_, obj, old)
        return obj

    def _remove(self, res: Resource, ns: str | None, obj: dict, orphan: bool = False) -> dict:
        """Drop an object for good: DELETED event, then GC of its dependents (soon, on the loop)."""
        self.rv += 1
        obj = dict(obj)
        obj["metadata"] = meta = dict(obj["metadata"])
        meta["resourceVersion"] = str(self.rv)
        names = res.by_ns.get(ns or "", {})
        names.pop(meta["name"], None)
        if not names:
            res.by_ns.pop(ns or "", None)
        uid = meta["uid"]
        self._by_uid.pop(uid, None)
        for ref in meta.get("ownerReferences") or ():
            self._dependents.get(ref.get("uid"), set()).discard((res, ns or "", meta["name"]))
        self._emit(res, "DELETED", obj, None)
        if res.plural == "pods":
            self.pod_logs.pop((ns or "", meta["name"]), None)
        if res.plural == "customresourcedefinitions":
            self._crd_removed(obj)
        if res.plural == "namespaces":
            pass
        elif ns and (nsobj := self._registry[("", "v1", "namespaces")].by_ns.get("", {}).get(ns)):
            if nsobj["metadata"].get("deletionTimestamp"):
                self._finish_namespace(nsobj)
        self._gc_soon(uid, orphan)
        return obj

    def _gc_soon(self, uid: str, orphan: bool) -> None:
        if uid not in self._dependents:
            return
        try:
            asyncio.get_running_loop().call_soon(self._collect, uid, orphan)
        except RuntimeError:  # not on a loop (setup code): collect right now
            self._collect(uid, orphan)

    def _collect(self, owner_uid: str, orphan: bool) -> None:
        """Background garbage collection of the dependents of a removed owner."""
        for res, ns, name in list(self._dependents.pop(owner_uid, ())):
            obj = res.by_ns.get(ns, {}).get(name)
            if obj is None:
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            alive = [ref for ref in refs if ref.get("uid") != owner_uid and ref.get("uid") in self._by_uid]
            if orphan or alive:
                self._update(res, ns or None, obj, merge_patch(obj, {"metadata": {"ownerReferences": alive or None}}))
            else:
                with contextlib.suppress(ApiError):
                    self._delete(res, ns or None, name, {})

    # ---- validation and defaulting ------------------------------------------------------------

    def _validate_meta(self, res: Resource, obj: dict) -> None:
        meta = obj["metadata"]
        name = meta["name"]
        pattern, limit = (_DNS_LABEL, 63) if res.plural == "namespaces" else (_DNS_SUBDOMAIN, 253)
        if len(name) > limit or not pattern.match(name):
            self._invalid(
                res,
                name,
                f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 "
                f"{'label' if limit == 63 else 'subdomain'} must consist of lower case "
                f"alphanumeric characters, '-' or '.'",
            )
        for key, value in (meta.get("labels") or {}).items():
            try:
                _check_label_key(key)
            except ApiError:
                self._invalid(
                    res,
                    name,
                    f"metadata.labels: Invalid value: {key!r}: name part must consist of "
                    f"alphanumeric characters, '-', '_' or '.'",
                )
            if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
                self._invalid(
                    res,
                    name,
                    f"metadata.labels: Invalid value: {value!r}: a valid label must be an "
                    f"empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    f"and must start and end with an alphanumeric character (max 63)",
                )
        annotations = meta.get("annotations") or {}
        for key, value in annotations.items():
            try:
                _check_label_key(key)
            except ApiError:
                self._invalid(res, name, f"metadata.annotations: Invalid value: {key!r}: invalid annotation key")
            if not isinstance(value, str):
                raise ApiError(400, "BadRequest", f"annotation {key!r} must be a string")
        if sum(len(k) + len(v) for k, v in annotations.items()) > 256 * 1024:
            self._invalid(res, name, "metadata.annotations: Too long: must have at most 262144 bytes")

    def _invalid(self, res: Resource, name: str, message: str) -> NoReturn:
        kind = f"{res.kind}.{res.group}" if res.group else res.kind
        raise ApiError(
            422,
            "Invalid",
            f'{kind} "{name}" is invalid: {message}',
            {
                "name": name,
                "group": res.group,
                "kind": res.kind,
                "causes": [{"reason": "FieldValueInvalid", "message": message}],
            },
        )

    def _validate_object(self, res: Resource, obj: dict, old: dict | None) -> dict:
        """Kind-specific validation/defaulting; may return a new object (never mutates shared trees)."""
        self._validate_meta(res, obj)
        name = obj["metadata"]["name"]
        if res.plural == "pods":
            spec = obj.get("spec") or {}
            if "restartPolicy" not in spec or "terminationGracePeriodSeconds" not in spec:  # server defaults
                obj = dict(obj, spec=dict({"restartPolicy": "Always", "terminationGracePeriodSeconds": 30}, **spec))
            containers = obj["spec"].get("containers")
            if not isinstance(containers, list) or not containers:
                self._invalid(res, name, "spec.containers: Required value")
            seen = set()
            for i, container in enumerate(containers):
                if not isinstance(container, dict) or not container.get("name"):
                    self._invalid(res, name, f"spec.containers[{i}].name: Required value")
                if not container.get("image"):
                    self._invalid(res, name, f"spec.containers[{i}].image: Required value")
                if container["name"] in seen:
                    self._invalid(res, name, f"spec.containers[{i}].name: Duplicate value: {container['name']!r}")
                seen.add(container["name"])
            if old is not None and not self._gates_removed_only(obj["spec"], old["spec"]):
                self._invalid(
                    res,
                    name,
                    "spec.schedulingGates: Forbidden: only deletion is allowed, but found new scheduling gate",
                )
            if old is not None and self._mutable_pod_spec(obj["spec"]) != self._mutable_pod_spec(old["spec"]):
                self._invalid(
                    res,
                    name,
                    "spec: Forbidden: pod updates may not change fields other than "
                    "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                    "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions "
                    "to existing tolerations)",
                )
        if res.plural == "secrets" and ("stringData" in obj or not obj.get("type")):
            obj = dict(obj, type=obj.get("type") or "Opaque")
            if "stringData" in obj:  # the API server folds stringData into data
                data = dict(obj.get("data") or {})
                data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in obj.pop("stringData").items()})
                obj["data"] = data
        if res.plural == "customresourcedefinitions":
            self._validate_crd(res, obj)
        if res.schema is not None:
            obj = deepcopy_json(obj)
            _apply_schema(res.schema, obj, top=True)
            if self.validate_schemas:
                self._validate_schema(res, obj)
        return obj

    @staticmethod
    def _mutable_pod_spec(spec: dict) -> dict:
        spec = dict(spec)
        for key in ("containers", "initContainers"):
            spec[key] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get(key) or ()]
        spec.pop("activeDeadlineSeconds", None)
        spec.pop("tolerations", None)
        spec.pop("schedulingGates", None)  # checked apart: gates may be removed, never added (_gates_removed_only)
        return spec

    @staticmethod
    def _gates_removed_only(spec: dict, old: dict) -> bool:
        before = [g.get("name") for g in old.get("schedulingGates") or []]
        return all(g.get("name") in before for g in spec.get("schedulingGates") or [])

    def _validate_schema(self, res: Resource, obj: dict) -> None:
        try:
            import jsonschema
        except ImportError:  # pragma: no cover - jsonschema is a test dependency
            return
        if res.validator is None:
            schema = _to_json_schema(res.schema)
            schema.get("properties", {}).pop("metadata", None)
            res.validator = jsonschema.Draft4Validator(schema)
        errors = sorted(res.validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
        if errors:
            messages = []
            for error in errors[:5]:
                path = ".".join(str(p) for p in error.absolute_path) or "<root>"
                messages.append(f"{path}: Invalid value: {error.message}")
            self._invalid(res, obj["metadata"]["name"], ", ".join(messages))

    def _validate_crd(self, res: Resource, crd: dict) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        name = crd["metadata"]["name"]
        if not spec.get("group") or not names.get("plural") or not names.get("kind") or not spec.get("versions"):
            self._invalid(res, name, "spec: Required value: group, names.plural, names.kind and versions")
        if name != f"{names['plural']}.{spec['group']}":
            self._invalid(
                res, name, f'metadata.name: Invalid value: {name!r}: must be spec.names.plural+"."+spec.group'
            )
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            self._invalid(res, name, "spec.scope: Unsupported value: must be Namespaced or Cluster")

    # ---- CRDs ---------------------------------------------------------------------------------

    def _crd_installed(self, crd: dict) -> None:
        spec, names = crd["spec"], crd["spec"]["names"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            self.register_resource(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                singular=names.get("singular", names["kind"].lower()),
                namespaced=spec["scope"] == "Namespaced",
                shortnames=tuple(names.get("shortNames", ())),
                categories=tuple(names.get("categories", ())),
                subresources=tuple(k for k in ("status", "scale") if k in (version.get("subresources") or {})),
                custom=True,
                printer_columns=version.get("additionalPrinterColumns"),
                schema=schema,
            )

    def _crd_removed(self, crd: dict) -> None:
        spec = crd["spec"]
        for version in spec["versions"]:
            res = self._registry.get((spec["group"], version["name"], spec["names"]["plural"]))
            if res is not None:
                for ns, names in list(res.by_ns.items()):
                    for obj in list(names.values()):
                        self._remove(res, ns or None, obj)
                self.unregister_resource(res)

    # ---- verbs (private: kmock's public patch/delete/... are its HTTP client shortcuts) ----------

    def _create(self, res: Resource, ns: str | None, body: Any, dry_run: bool = False) -> dict:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
        if body.get("kind", res.kind) != res.kind or body.get("apiVersion", res.api_version) != res.api_version:
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({body.get('apiVersion')}) does not "
                f"match the expected API version ({res.api_version}) or kind",
            )
        obj = dict(body, apiVersion=res.api_version, kind=res.kind)
        meta = obj["metadata"] = dict(body.get("metadata") or {})
        if res.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and ns and body_ns != ns:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            ns = ns or body_ns
            if not ns:
                raise ApiError(400, "BadRequest", "the namespace of the object is required")
            meta["namespace"] = ns
            self._check_namespace(ns)
        else:
            meta.pop("namespace", None)
            ns = None
        if not meta.get("name"):
            base = meta.get("generateName")
            if not base:
                self._invalid(res, "", "metadata.name: Required value: name or generateName is required")
            names = res.by_ns.get(ns or "", {})
            for _ in range(10):
                meta["name"] = base[:58] + "".join(random.choice(_GENERATE_ALPHABET) for _ in range(5))
                if meta["name"] not in names:
                    break
        name = meta["name"]
        if name in res.by_ns.get(ns or "", {}):
            raise ApiError(
                409,
                "AlreadyExists",
                f'{res.group_resource} "{name}" already exists',
                {"name": name, "group": res.group, "kind": res.plural},
            )
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta["generation"] = 1
        if res.status_subresource:
            obj.pop("status", None)
        if res.plural == "pods":
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
            if self.kueue_webhook and KUEUE_QUEUE_LABEL in (meta.get("labels") or {}):
                obj = self._kueue_gate(obj)
        elif res.plural == "namespaces":
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        obj = self._validate_object(res, obj, None)
        if res.plural == "customresourcedefinitions":
            names = obj["spec"]["names"]
            obj["status"] = {
                "acceptedNames": {k: v for k, v in names.items()},
                "conditions": [
                    {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": _now()}
                    for t, r, m in (
                        ("NamesAccepted", "NoConflicts", "no conflicts found"),
                        ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                    )
                ],
                "storedVersions": [v["name"] for v in obj["spec"]["versions"] if v.get("storage")],
            }
        if dry_run:
            return obj
        self._store(res, ns, obj, None, "ADDED")
        if res.plural == "customresourcedefinitions":
            self._crd_installed(obj)
        return obj

    def _check_namespace(self, ns: str) -> None:
        nsobj = self._registry[("", "v1", "namespaces")].by_ns.get("", {}).get(ns)
        if nsobj is None and self.enforce_namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
        if nsobj is not None and nsobj["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {ns} because it is being terminated",
                {"name": ns, "kind": "namespaces"},
            )

    def _replace(
        self, res: Resource, ns: str | None, name: str, sub: str | None, body: Any, dry_run: bool = False
    ) -> dict:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
        meta = body.get("metadata") or {}
        if meta.get("name") != name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})",
            )
        if res.namespaced and meta.get("namespace") not in (None, ns):
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        cur = self._lookup(res, ns, name)
        rv = meta.get("resourceVersion")
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise self._conflict(res, name)
        new = dict(body, apiVersion=res.api_version, kind=res.kind)
        new["metadata"] = dict(meta, resourceVersion=cur["metadata"]["resourceVersion"])
        return self._update(res, ns, cur, new, sub, dry_run)

    def _patch(
        self,
        res: Resource,
        ns: str | None,
        name: str,
        sub: str | None,
        body: Any,
        content_type: str,
        dry_run: bool = False,
    ) -> dict:
        cur = self._lookup(res, ns, name)
        if content_type == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiError(400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
            new = apply_json_patch(cur, body)
            if not isinstance(new, dict):
                raise ApiError(422, "Invalid", "the patched object is not a JSON object")
        elif content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if content_type.startswith("application/strategic") and res.custom:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - "
                    "accepted media types include: application/json-patch+json, "
                    "application/merge-patch+json, application/apply-patch+yaml",
                )
            if not isinstance(body, dict):
                raise ApiError(
                    400,
                    "BadRequest",
                    f"json: cannot unmarshal {type(body).__name__} into Go value of type map[string]interface {{}}",
                )
            new = merge_patch(cur, body)  # NB: strategic merge is a plain merge here (lists replaced)
        else:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format ({content_type or 'none'}) - accepted "
                f"media types include: application/json-patch+json, application/merge-patch+json, "
                f"application/strategic-merge-patch+json (server-side apply is not emulated)",
            )
        meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
        rv = meta.get("resourceVersion")
        if rv is not None and rv != cur["metadata"]["resourceVersion"]:
            raise self._conflict(res, name)
        new = dict(new)
        new["metadata"] = dict(meta, resourceVersion=cur["metadata"]["resourceVersion"])
        return self._update(res, ns, cur, new, sub, dry_run)

    @staticmethod
    def _conflict(res: Resource, name: str) -> ApiError:
        return ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {res.group_resource} "{name}": the '
            f"object has been modified; please apply your changes to the latest "
            f"version and try again",
            {"name": name, "group": res.group, "kind": res.plural},
        )

    def _update(
        self, res: Resource, ns: str | None, cur: dict, new: dict, sub: str | None = None, dry_run: bool = False
    ) -> dict:
        """Store an update of cur: the status rule, system fields, generation, no-op detection, finalization."""
        if sub == "status":
            status = new.get("status")
            new = dict(cur)
            new["metadata"] = dict(cur["metadata"])
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        else:
            new = dict(new)
            new["metadata"] = meta = dict(new.get("metadata") or {})
            cur_meta = cur["metadata"]
            for key in _SYSTEM_META:
                if key in cur_meta:
                    meta[key] = cur_meta[key]
                else:
                    meta.pop(key, None)
            new["apiVersion"], new["kind"] = res.api_version, res.kind
            if res.status_subresource:
                if "status" in cur:
                    new["status"] = cur["status"]
                else:
                    new.pop("status", None)
            if cur_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or ()) - set(cur_meta.get("finalizers") or ())
                if added:
                    self._invalid(
                        res,
                        meta["name"],
                        f"metadata.finalizers: Forbidden: no new finalizers can be "
                        f"added if the object is being deleted, found new finalizers "
                        f"{sorted(added)!r}",
                    )
            new = self._validate_object(res, new, cur)
            if any(
                new.get(k) != cur.get(k)
                for k in new.keys() | cur.keys()
                if k not in ("metadata", "status", "apiVersion", "kind")
            ):
                new["metadata"]["generation"] = cur_meta.get("generation", 1) + 1
        if res.schema is not None and sub == "status":
            new = self._validate_object(res, new, cur)
        if new == cur:
            return cur  # a no-op write: no new resourceVersion, no event (as a real server)
        if dry_run:
            return new
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            return self._remove(res, ns, new)  # the last finalizer is gone (a graceful pod waits for its node)
        self._store(res, ns, new, cur, "MODIFIED")
        if res.plural == "customresourcedefinitions":
            self._crd_installed(new)
        return new

    def _delete(
        self, res: Resource, ns: str | None, name: str, options: dict, dry_run: bool = False
    ) -> tuple[int, dict]:
        cur = self._lookup(res, ns, name)
        pre = options.get("preconditions") or {}
        if (
            pre.get("uid")
            and pre["uid"] != cur["metadata"]["uid"]
            or pre.get("resourceVersion")
            and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]
        ):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.group_resource} "{name}": Precondition failed',
                {"name": name, "kind": res.plural},
            )
        orphan = options.get("propagationPolicy") == "Orphan" or options.get("orphanDependents") is True
        if dry_run:
            return 200, cur
        meta = cur["metadata"]
        grace = self._pod_grace(cur, options) if res.plural == "pods" else 0
        if meta.get("deletionTimestamp"):
            held = meta.get("deletionGracePeriodSeconds") or 0
            if grace >= held:
                return 202, cur
            if grace == 0 and not meta.get("finalizers"):  # the node's final delete (or a forced one)
                return 200, self._remove(res, ns, cur, orphan)
            new = dict(cur)  # a shorter grace period replaces the longer one, as on a real server
            new["metadata"] = dict(meta, deletionTimestamp=_now(grace), deletionGracePeriodSeconds=grace)
            self._store(res, ns, new, cur, "MODIFIED")
            return 200, new
        if grace > 0:  # graceful pod deletion: its node stops the containers, then deletes it with grace 0
            new = dict(cur)
            new["metadata"] = dict(meta, deletionTimestamp=_now(grace), deletionGracePeriodSeconds=grace)
            self._store(res, ns, new, cur, "MODIFIED")
            if orphan:
                self._collect(meta["uid"], True)
            return 200, new
        if meta.get("finalizers") or res.plural == "namespaces":
            new = dict(cur)
            new["metadata"] = dict(meta, deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
            if res.plural == "namespaces":
                new["status"] = dict(new.get("status") or {}, phase="Terminating")
            self._store(res, ns, new, cur, "MODIFIED")
            if orphan:
                self._collect(meta["uid"], True)
            if res.plural == "namespaces":
                self._terminate_namespace(new)
            return 202, new
        return 200, self._remove(res, ns, cur, orphan)

    @staticmethod
    def _pod_grace(pod: dict, options: dict) -> int:
        """The grace period of a pod's deletion, as the real pod strategy computes it: the request's
        ``gracePeriodSeconds``, else the pod's ``terminationGracePeriodSeconds``; 0 (at once) for a pod no
        node runs (unbound) or whose containers are all done (Succeeded/Failed)."""
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        grace = options.get("gracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        try:
            return max(0, int(grace))
        except (TypeError, ValueError):
            raise ApiError(400, "BadRequest", f"invalid gracePeriodSeconds: {grace!r}") from None

    @staticmethod
    def _kueue_gate(pod: dict) -> dict:
        """What Kueue's pod webhook does to a pod of a LocalQueue at creation: its scheduling gate, its managed label;
        the scheduler then reports it SchedulingGated."""
        spec = dict(pod.get("spec") or {})
        spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": KUEUE_GATE}]
        meta = dict(pod["metadata"], labels={**(pod["metadata"].get("labels") or {}), KUEUE_MANAGED_LABEL: "true"})
        gated = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "lastTransitionTime": _now()}
        gated["message"] = "Scheduling is blocked due to non-empty scheduling gates"
        return dict(pod, metadata=meta, spec=spec, status=dict(pod["status"], conditions=[gated]))

    def _bind(self, res: Resource, ns: str | None, name: str, body: Any) -> dict:
        """pods/<name>/binding: set spec.nodeName once (a second binding is a 409, as on a real server); a pod with
        scheduling gates cannot be bound at all."""
        cur = self._lookup(res, ns, name)
        if (cur.get("spec") or {}).get("schedulingGates"):
            raise ApiError(409, "Conflict", f"pod {name} has non-empty .spec.schedulingGates")
        node = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
        if not node:
            self._invalid(res, name, "target.name: Required value")
        if cur["metadata"].get("deletionTimestamp"):
            raise ApiError(409, "Conflict", f'pod "{name}" is being deleted, cannot be assigned to a host')
        assigned = (cur.get("spec") or {}).get("nodeName")
        if assigned:
            raise ApiError(409, "Conflict", f'pod {name} is already assigned to node "{assigned}"')
        new = dict(cur, spec=dict(cur.get("spec") or {}, nodeName=node))
        new["metadata"] = dict(cur["metadata"])
        return self._store(res, ns, new, cur, "MODIFIED")

    def _terminate_namespace(self, nsobj: dict) -> None:
        ns = nsobj["metadata"]["name"]
        for res in list(self._registry.values()):
            if res.namespaced:
                for obj in list(res.by_ns.get(ns, {}).values()):
                    with contextlib.suppress(ApiError):
                        self._delete(res, ns, obj["metadata"]["name"], {})
        self._finish_namespace(nsobj)

    def _finish_namespace(self, nsobj: dict) -> None:
        ns = nsobj["metadata"]["name"]
        if any(res.by_ns.get(ns) for res in self._registry.values() if res.namespaced):
            return
        nsres = self._registry[("", "v1", "namespaces")]
        current = nsres.by_ns.get("", {}).get(ns)
        if current is not None and not current["metadata"].get("finalizers"):
            self._remove(nsres, None, current)

    # ---- HTTP ---------------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if self.record_requests or self._payloads:
            return await super().__call__(raw_request)  # kmock: record, match reactions, then _handle()
        return await self._serve(raw_request)

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        if self._payloads:
            try:
                return await kmock.RawHandler._handle(self, request)
            except NotImplementedError:  # no reaction matched: serve as the API server
                pass
        assert request._raw_request is not None
        return await self._serve(request._raw_request)

    async def _serve(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        try:
            response = await self._route(raw)
        except ApiError as e:
            response = aiohttp.web.json_response(e.body(), status=e.code)
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception as e:  # a bug in the emulator: answer like a real 500
            log.exception("kubeemu: internal error on %s %s", raw.method, raw.path_qs)
            body = ApiError(
                500, "InternalError", f"{type(e).__name__}: {e}", {"causes": [{"message": traceback.format_exc()}]}
            ).body()
            response = aiohttp.web.json_response(body, status=500)
        self.request_log.append((raw.method, raw.path_qs, response.status))
        return response

    def _count(self, verb: str, what: str) -> None:
        self.request_counts[(verb, what)] += 1

    async def _route(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        method, path, query = raw.method, raw.path.rstrip("/") or "/", raw.query
        parts = path.strip("/").split("/") if path != "/" else []
        if not parts or parts[0] not in ("api", "apis") or len(parts) <= 2 + (parts[0] == "apis"):
            self._count(method.lower(), path)
            if method != "GET":
                raise ApiError(
                    *((405, "MethodNotAllowed") if parts and parts[0] in ("api", "apis") else (404, "NotFound")),
                    "the server could not find the requested resource",
                )
            if path in ("/healthz", "/livez", "/readyz"):
                return aiohttp.web.Response(text="ok")
            return self._json(self._discovery(raw, parts))
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group, version, rest = parts[1], parts[2], parts[3:]
        watch = False
        if rest and rest[0] == "watch":  # the deprecated /api/v1/watch/... form
            watch, rest = True, rest[1:]
        ns = name = sub = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (
                len(rest) == 3 and rest[2] in ("status", "finalize") and (group, version, rest[2]) not in self._registry
            )
        ):
            ns, rest = rest[1], rest[2:]
        plural = rest[0] if rest else None
        name = rest[1] if len(rest) > 1 else None
        sub = "/".join(rest[2:]) or None
        res = self._registry.get((group, version, plural or ""))
        if res is None or (ns is not None and not res.namespaced):
            self._count(method.lower(), path)
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if name is not None and res.namespaced and ns is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub is not None and sub not in res.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        what = f"{res.plural}/{sub}" if sub else res.plural
        watch_param = query.get("watch")
        if watch_param is not None and watch_param not in _TRUE | _FALSE:
            raise ApiError(400, "BadRequest", f"invalid value for watch: {watch_param!r}")
        watch = watch or watch_param in _TRUE
        dry_run = "dryRun" in query
        if method == "GET":
            if watch:
                self._count("watch", what)
                return await self._watch(raw, res, ns, name)
            if name is None:
                self._count("list", what)
                return self._json(self._list(raw, res, ns))
            self._count("get", what)
            if sub == "log":
                return self._serve_log(raw, res, ns, name)
            obj = self._lookup(res, ns, name)
            return self._json(self._maybe_table(raw, res, [obj], single=True) or obj)
        body = await self._body(raw) if method in ("POST", "PUT", "PATCH", "DELETE") else None
        if method == "POST" and name is not None and sub == "binding":
            self._count("create", what)
            self._bind(res, ns, name, body)
            return self._json({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}, status=201)
        if method == "POST" and name is None:
            self._count("create", what)
            if res.namespaced and ns is None:
                raise ApiError(405, "MethodNotAllowed", "create is only allowed on the namespaced URL")
            return self._json(self._create(res, ns, body, dry_run), status=201)
        if method == "PUT" and name is not None and sub in (None, "status"):
            self._count("update", what)
            return self._json(self._replace(res, ns, name, sub, body, dry_run))
        if method == "PATCH" and name is not None and sub in (None, "status"):
            self._count("patch", what)
            ctype = raw.headers.get("Content-Type", "").split(";")[0].strip().lower()
            return self._json(self._patch(res, ns, name, sub, body, ctype, dry_run))
        if method == "DELETE" and name is not None and sub is None:
            self._count("delete", what)
            options = dict(body) if isinstance(body, dict) else {}
            for key in ("propagationPolicy", "orphanDependents", "gracePeriodSeconds"):
                if key in query:
                    options[key] = query[key] in _TRUE if key == "orphanDependents" else query[key]
            status, obj = self._delete(res, ns, name, options, dry_run)
            return self._json(obj, status=status)
        if method == "DELETE" and name is None:
            self._count("deletecollection", what)
            options = dict(body) if isinstance(body, dict) else {}
            if "propagationPolicy" in query:
                options["propagationPolicy"] = query["propagationPolicy"]
            listing = self._list(raw, res, ns, paged=False)
            items = [
                self._delete(res, obj["metadata"].get("namespace"), obj["metadata"]["name"], options, dry_run)[1]
                for obj in listing["items"]
            ]
            return self._json(dict(listing, items=items))
        self._count(method.lower(), what)
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    @staticmethod
    async def _body(raw: aiohttp.web.BaseRequest) -> Any:
        data = await raw.read()
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            ctype = raw.headers.get("Content-Type", "")
            if "protobuf" in ctype:  # kubectl's typed commands (create configmap/secret/namespace)
                return decode_k8s_protobuf(data)
            if "yaml" in ctype:
                raise ApiError(415, "UnsupportedMediaType", f"YAML bodies ({ctype}) are not emulated") from None
            raise ApiError(400, "BadRequest", "the request body is not valid JSON") from None

    @staticmethod
    def _json(body: Any, status: int = 200) -> aiohttp.web.Response:
        return aiohttp.web.Response(
            body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type="application/json"
        )

    def _selectors(self, raw: aiohttp.web.BaseRequest, res: Resource, name: str | None = None):
        labels = parse_label_selector(raw.query.get("labelSelector"))
        fields = parse_field_selector(raw.query.get("fieldSelector"), res.plural)
        if name is not None:
            fields.append(
                (_GETTERS.setdefault("metadata.name", _field_getter("metadata.name")), "=", name, "metadata.name")
            )
        return labels, fields

    def _matching(self, res: Resource, ns: str | None, labels: list, fields: list) -> list[dict]:
        names = [value for getter, op, value, field in fields if field == "metadata.name" and op == "="]
        candidates: Iterable[dict]
        if names and ns is not None:  # a direct lookup instead of a scan
            candidates = [obj for obj in [res.by_ns.get(ns, {}).get(names[0])] if obj is not None]
        else:
            candidates = res.iter_objects(ns if res.namespaced else None)
        return [
            obj
            for obj in candidates
            if (not labels or labels_match(labels, obj["metadata"].get("labels")))
            and (not fields or fields_match(fields, obj))
        ]

    def _list(self, raw: aiohttp.web.BaseRequest, res: Resource, ns: str | None, paged: bool = True) -> dict:
        labels, fields = self._selectors(raw, res)
        items = self._matching(res, ns, labels, fields)
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        rv = str(self.rv)
        meta: dict[str, Any] = {"resourceVersion": rv}
        limit = raw.query.get("limit", "")
        token = raw.query.get("continue")
        if paged and token:
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                start = tuple(state["start"])
                meta["resourceVersion"] = rv = state["rv"]
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "BadRequest", "invalid continue token") from None
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start]
        if paged and limit.isdigit() and 0 < int(limit) < len(items):
            last = items[int(limit) - 1]["metadata"]
            state = {"rv": rv, "start": [last.get("namespace", ""), last["name"]]}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
            meta["remainingItemCount"] = len(items) - int(limit)
            items = items[: int(limit)]
        table = self._maybe_table(raw, res, items)
        if table is not None:
            table["metadata"] = meta
            return table
        return {"apiVersion": res.api_version, "kind": f"{res.kind}List", "metadata": meta, "items": items}

    async def _watch(
        self, raw: aiohttp.web.BaseRequest, res: Resource, ns: str | None, name: str | None
    ) -> aiohttp.web.StreamResponse:
        labels, fields = self._selectors(raw, res, name)
        query = raw.query
        timeout = query.get("timeoutSeconds")
        if timeout is not None and not timeout.isdigit():
            raise ApiError(400, "BadRequest", f"invalid timeoutSeconds: {timeout!r}")
        rv = query.get("resourceVersion", "")
        if rv and not rv.isdigit():
            raise ApiError(400, "BadRequest", f"invalid resourceVersion: {rv!r}")
        table = (lambda obj: self._table(raw, res, [obj])) if self._wants_table(raw) else None
        watcher = _Watcher(ns if res.namespaced else None, labels, fields, table)
        initial: list[bytes] = []
        expired = False  # 410 Gone: the ERROR event, then the end of the stream
        send_initial = query.get("sendInitialEvents") in _TRUE
        if rv in ("", "0") or send_initial:
            for obj in sorted(
                self._matching(res, watcher.namespace, labels, fields),
                key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]),
            ):
                line = watcher.event_line(_Event(self.rv, "ADDED", obj, None))
                if line is not None:
                    initial.append(line)
            if send_initial:
                bookmark = {
                    "kind": res.kind,
                    "apiVersion": res.api_version,
                    "metadata": {"resourceVersion": str(self.rv), "annotations": {"k8s.io/initial-events-end": "true"}},
                }
                initial.append(json.dumps({"type": "BOOKMARK", "object": bookmark}).encode() + b"\n")
        elif int(rv) < res.dropped_rv:
            gone = ApiError(410, "Expired", f"too old resource version: {rv} ({res.dropped_rv})").body()
            initial.append(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
            expired = True
        else:
            for event in res.history:
                if event.rv > int(rv):
                    line = watcher.event_line(event)
                    if line is not None:
                        initial.append(line)
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        if not expired:
            res.watchers.add(watcher)  # registered in the same tick as the snapshot: no gaps
        try:
            await response.prepare(raw)
            if initial:
                await response.write(b"".join(initial))
            if expired:
                await response.write_eof()
                return response
            loop = asyncio.get_running_loop()
            deadline = loop.time() + int(timeout) if timeout else None
            while not self.closing and res.watchers is self._resource_watchers(res):
                if not watcher.queue:
                    watcher.wake.clear()
                    remaining = 1.0 if deadline is None else min(1.0, deadline - loop.time())
                    if remaining <= 0:
                        break
                    try:
                        async with asyncio.timeout(remaining):
                            await watcher.wake.wait()
                    except TimeoutError:
                        transport = raw.transport
                        if transport is None or transport.is_closing():
                            break
                        continue
                if watcher.queue:
                    batch, watcher.queue = b"".join(watcher.queue), []
                    await response.write(batch)
            await response.write_eof()
        except ConnectionError:
            pass
        finally:
            res.watchers.discard(watcher)
        return response

    def _resource_watchers(self, res: Resource) -> set | None:
        current = self._registry.get((res.group, res.version, res.plural))
        return current.watchers if current is res else None

    def _serve_log(
        self, raw: aiohttp.web.BaseRequest, res: Resource, ns: str | None, name: str
    ) -> aiohttp.web.Response:
        pod = self._lookup(res, ns, name)
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        container = raw.query.get("container")
        if container is None:
            if len(containers) != 1:
                raise ApiError(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]",
                )
            container = containers[0]
        elif container not in containers + [c["name"] for c in pod["spec"].get("initContainers", [])]:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        text = self.pod_logs.get((ns or "", name), {}).get(container, "")
        tail = raw.query.get("tailLines")
        if tail and tail.isdigit():
            lines = text.splitlines(keepends=True)
            text = "".join(lines[len(lines) - int(tail) :]) if int(tail) < len(lines) else text
        return aiohttp.web.Response(text=text, content_type="text/plain")

    # ---- discovery ----------------------------------------------------------------------------

    def _discovery(self, raw: aiohttp.web.BaseRequest, parts: list[str]) -> Any:
        groups: dict[str, list[str]] = {}
        for res in self._registry.values():
            if res.group and res.version not in groups.setdefault(res.group, []):
                groups[res.group].append(res.version)
        path = "/" + "/".join(parts)
        if path == "/":
            paths = {"/api", "/api/v1", "/apis", "/version", "/healthz", "/livez", "/readyz"}
            paths |= {f"/apis/{g}" for g in groups} | {f"/apis/{g}/{v}" for g, vs in groups.items() for v in vs}
            return {"paths": sorted(paths)}
        if path == "/version":
            return {
                "major": "1",
                "minor": "37",
                "gitVersion": "v1.37.0-kubeemu",
                "gitCommit": "0" * 40,
                "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.25",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        if path == "/api":
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": raw.host}],
            }

        def group_info(group: str) -> dict:
            versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in groups[group]]
            return {"name": group, "versions": versions, "preferredVersion": versions[0]}

        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_info(g) for g in sorted(groups)]}
        if parts[0] == "apis" and len(parts) == 2 and parts[1] in groups:
            return dict(group_info(parts[1]), kind="APIGroup", apiVersion="v1")
        if parts[0] == "api" and len(parts) == 2 or parts[0] == "apis" and len(parts) == 3:
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            resources = []
            for res in self._registry.values():
                if (res.group, res.version) != (group, version):
                    continue
                resources.append(
                    {
                        "name": res.plural,
                        "singularName": res.singular,
                        "namespaced": res.namespaced,
                        "kind": res.kind,
                        "verbs": list(res.verbs),
                        "shortNames": list(res.shortnames),
                        "categories": list(res.categories),
                    }
                )
                for sub in res.subresources:
                    resources.append(
                        {
                            "name": f"{res.plural}/{sub}",
                            "singularName": "",
                            "namespaced": res.namespaced,
                            "kind": res.kind,
                            "verbs": ["get"] if sub == "log" else ["get", "patch", "update"],
                        }
                    )
            if resources:
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}" if group else version,
                    "resources": resources,
                }
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    # ---- server-side printing (kubectl get) --------------------------------------------------

    @staticmethod
    def _wants_table(raw: aiohttp.web.BaseRequest) -> bool:
        return "as=Table" in raw.headers.get("Accept", "")

    def _maybe_table(
        self, raw: aiohttp.web.BaseRequest, res: Resource, objs: list[dict], single: bool = False
    ) -> dict | None:
        return self._table(raw, res, objs) if self._wants_table(raw) else None

    def _table(self, raw: aiohttp.web.BaseRequest, res: Resource, objs: list[dict]) -> dict:
        """A meta.k8s.io/v1 Table of objs (server-side printing, as kubectl asks for it)."""
        columns, cells = self._printer(res)
        include = raw.query.get("includeObject", "PartialObjectMetadata")
        rows = []
        for obj in objs:
            row: dict[str, Any] = {"cells": cells(obj)}
            if include == "Object":
                row["object"] = obj
            elif include != "None":
                row["object"] = {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj["metadata"],
                }
            rows.append(row)
        return {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": str(self.rv)},
            "columnDefinitions": columns,
            "rows": rows,
        }

    def _printer(self, res: Resource) -> tuple[list[dict], Callable[[dict], list]]:
        def col(name: str, type_: str = "string", priority: int = 0, fmt: str = "") -> dict:
            return {"name": name, "type": type_, "format": fmt, "description": name, "priority": priority}

        name_col = col("Name", fmt="name")
        age = lambda o: _age(o["metadata"].get("creationTimestamp"))  # noqa: E731
        if res.plural == "pods":

            def pod_cells(o: dict) -> list:
                statuses = (o.get("status") or {}).get("containerStatuses") or []
                total = len(o["spec"].get("containers", []))
                ready = sum(1 for s in statuses if s.get("ready"))
                reason = (o.get("status") or {}).get("reason") or (o.get("status") or {}).get("phase", "")
                for s in statuses:
                    state = s.get("state") or {}
                    reason = (
                        (state.get("waiting") or {}).get("reason")
                        or (state.get("terminated") or {}).get("reason")
                        or reason
                    )
                if o["metadata"].get("deletionTimestamp"):
                    reason = "Terminating"
                return [
                    o["metadata"]["name"],
                    f"{ready}/{total}",
                    reason,
                    sum(s.get("restartCount", 0) for s in statuses),
                    age(o),
                    (o.get("status") or {}).get("podIP", "<none>"),
                    o["spec"].get("nodeName", "<none>"),
                ]

            return (
                [
                    name_col,
                    col("Ready"),
                    col("Status"),
                    col("Restarts", "integer"),
                    col("Age"),
                    col("IP", priority=1),
                    col("Node", priority=1),
                ],
                pod_cells,
            )
        if res.printer_columns is not None or res.custom:
            specs = res.printer_columns or [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]

            def cr_cells(o: dict) -> list:
                cells = [o["metadata"]["name"]]
                for spec in specs:
                    value = _jsonpath(o, spec["jsonPath"])
                    cells.append(_age(value) if spec.get("type") == "date" and value else value)
                return cells

            return (
                [name_col]
                + [
                    col(
                        s["name"],
                        "string" if s.get("type") == "date" else s.get("type", "string"),
                        s.get("priority", 0),
                        s.get("format", ""),
                    )
                    for s in specs
                ],
                cr_cells,
            )
        extra: list[tuple[dict, Callable[[dict], Any]]] = {
            "configmaps": [
                (col("Data", "integer"), lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}))
            ],
            "secrets": [
                (col("Type"), lambda o: o.get("type", "Opaque")),
                (col("Data", "integer"), lambda o: len(o.get("data") or {})),
            ],
            "namespaces": [(col("Status"), lambda o: (o.get("status") or {}).get("phase", ""))],
            "leases": [(col("Holder"), lambda o: (o.get("spec") or {}).get("holderIdentity", ""))],
            "events": [
                (col("Type"), lambda o: o.get("type", "")),
                (col("Reason"), lambda o: o.get("reason", "")),
                (
                    col("Object"),
                    lambda o: (
                        f"{(o.get('involvedObject') or {}).get('kind', '').lower()}/"
                        f"{(o.get('involvedObject') or {}).get('name', '')}"
                    ),
                ),
                (col("Message"), lambda o: o.get("message", "")),
            ],
        }.get(res.plural, [])
        columns = [name_col] + [c for c, _ in extra] + [col("Age")]
        return columns, lambda o: [o["metadata"]["name"]] + [fn(o) for _, fn in extra] + [age(o)]


def _apply_schema(schema: dict, obj: Any, top: bool = False) -> None:
    """Structural defaulting and pruning of unknown fields, in place (on a private copy)."""
    if isinstance(obj, dict) and schema.get("type", "object") == "object":
        props = schema.get("properties")
        if props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            for key in list(obj):
                if key not in props and not (top and key in ("apiVersion", "kind", "metadata")):
                    del obj[key]
        for key, sub in (props or {}).items():
            if top and key == "metadata":
                continue
            if key not in obj and "default" in sub:
                obj[key] = deepcopy_json(sub["default"])
            if key in obj:
                _apply_schema(sub, obj[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and props is None:
            for value in obj.values():
                _apply_schema(extra, value)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            _apply_schema(schema["items"], item)


def _to_json_schema(node: Any) -> Any:
    """openAPIV3Schema -> JSON Schema Draft 4 (nullable -> null allowed; x-kubernetes-* dropped)."""
    if isinstance(node, list):
        return [_to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: _to_json_schema(v)
        for k, v in node.items()
        if not k.startswith("x-kubernetes-") and k not in ("nullable", "default", "example", "format")
    }
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["type"] = ["integer", "string"]
    if node.get("nullable"):
        if "type" in out:
            out["type"] = (out["type"] if isinstance(out["type"], list) else [out["type"]]) + ["null"]
        if "enum" in out:
            out["enum"] = list(out["enum"]) + [None]
    if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
        out.pop("additionalProperties", None)
    return out


# ----------------------------------------------------------------------------------------------
# Just enough Kubernetes protobuf for kubectl's typed "create configmap|secret|namespace"
# ----------------------------------------------------------------------------------------------


def _proto_fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value): an int for a varint, the raw bytes for the other wire types."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ApiError(400, "BadRequest", f"unsupported protobuf wire type {wire}")
        yield number, value


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, i


def _proto_bytes(value: int | bytes) -> bytes:
    """The payload of a string, bytes or message field; a varint in its place is a malformed body (400)."""
    if isinstance(value, int):
        raise ApiError(400, "BadRequest", "malformed protobuf: a varint where a string or message belongs")
    return value


def _proto_str(value: int | bytes) -> str:
    return _proto_bytes(value).decode()


def _proto_map(entry: bytes, binary: bool = False) -> tuple[str, str]:
    fields = dict(_proto_fields(entry))
    value = _proto_bytes(fields.get(2, b""))
    return _proto_str(fields.get(1, b"")), base64.b64encode(value).decode() if binary else value.decode()


def _proto_meta(data: bytes) -> dict:
    meta: dict[str, Any] = {}
    names = {1: "name", 2: "generateName", 3: "namespace"}
    for number, value in _proto_fields(data):
        if number in names:
            meta[names[number]] = _proto_str(value)
        elif number in (11, 12):
            key, val = _proto_map(_proto_bytes(value))
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = val
        elif number == 14:
            meta.setdefault("finalizers", []).append(_proto_str(value))
        elif number == 13:
            ref_names = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}
            fields = list(_proto_fields(_proto_bytes(value)))
            ref: dict[str, str | bool] = {ref_names[n]: _proto_str(v) for n, v in fields if n in ref_names}
            ref.update(("controller", bool(v)) for n, v in fields if n == 6)
            meta.setdefault("ownerReferences", []).append(ref)
    return meta


def decode_k8s_protobuf(data: bytes) -> dict:
    """Decode the ``k8s\\x00`` protobuf envelope of a ConfigMap, Secret or Namespace into JSON form."""
    if not data.startswith(b"k8s\x00"):
        raise ApiError(400, "BadRequest", "not a Kubernetes protobuf message")
    unknown = dict(_proto_fields(data[4:]))
    type_meta = dict(_proto_fields(_proto_bytes(unknown.get(1, b""))))
    api_version, kind = _proto_str(type_meta.get(1, b"")), _proto_str(type_meta.get(2, b""))
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    for number, value in _proto_fields(_proto_bytes(unknown.get(2, b""))):
        if number == 1:
            obj["metadata"] = _proto_meta(_proto_bytes(value))
        elif kind == "ConfigMap" and number in (2, 3):
            key, val = _proto_map(_proto_bytes(value), binary=number == 3)
            obj.setdefault("data" if number == 2 else "binaryData", {})[key] = val
        elif kind == "Secret" and number in (2, 4):
            key, val = _proto_map(_proto_bytes(value), binary=number == 2)
            obj.setdefault("data" if number == 2 else "stringData", {})[key] = val
        elif kind == "Secret" and number == 3:
            obj["type"] = _proto_str(value)
        elif kind in ("ConfigMap", "Secret") and number == 5 - (kind == "ConfigMap"):
            obj["immutable"] = bool(value)
        elif kind == "Namespace" and number in (2, 3):
            pass  # spec.finalizers / status: set by the server anyway
        else:
            raise ApiError(415, "UnsupportedMediaType", f"protobuf bodies of {kind} are not emulated; send JSON")
    if kind not in ("ConfigMap", "Secret", "Namespace"):
        raise ApiError(415, "UnsupportedMediaType", f"protobuf bodies of {kind} are not emulated; send JSON")
    return obj


# ----------------------------------------------------------------------------------------------
# Serving it from a background thread
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class RunningEmulator:
    """A RealisticEmulator served over HTTP on 127.0.0.1 from its own thread and event loop."""

    emulator: RealisticEmulator
    url: str
    kubeconfig_path: Path
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    tmpdir: Path
    token: str = "kubeemu-token"

    def call(self, fn: Any, *args: Any, timeout: float = 30.0, **kwargs: Any) -> Any:
        """Run a coroutine, or a plain callable with args, on the emulator's loop; return its result."""
        if asyncio.iscoroutine(fn):
            coro = fn
        else:

            async def _sync() -> Any:
                return fn(*args, **kwargs)

            coro = _sync()
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # Loop-routed shortcuts to the emulator's direct API.
    def create(self, obj: dict, namespace: str | None = None) -> dict:
        return self.call(self.emulator.create_object, obj, namespace)

    def get(self, resource: str, namespace: str | None, name: str) -> dict | None:
        return self.call(self.emulator.get_object, resource, namespace, name)

    def patch(
        self, resource: str, namespace: str | None, name: str, patch: dict | list, subresource: str | None = None
    ) -> dict:
        return self.call(self.emulator.patch_object, resource, namespace, name, patch, subresource)

    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        propagation: str = "Background",
        grace_period_seconds: int | None = None,
    ) -> dict:
        return self.call(self.emulator.delete_object, resource, namespace, name, propagation, grace_period_seconds)

    def bind_pod(self, namespace: str, name: str, node: str) -> dict:
        return self.call(self.emulator.bind_pod, namespace, name, node)

    def objects(self, resource: str, namespace: str | None = None) -> list[dict]:
        return self.call(self.emulator.objects, resource, namespace)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        headers: dict | None = None,
        timeout: float = 30.0,
    ) -> tuple[int, Any]:
        """A blocking HTTP call; returns (status, decoded JSON or text)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": content_type, **(headers or {})}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, payload, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            status, payload, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
        return status, json.loads(payload) if "json" in ctype and payload else payload.decode()

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess:
        """Run the real kubectl against the emulator (own kubeconfig and discovery cache dir)."""
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig_path), KUBECACHEDIR=str(self.tmpdir / "kubecache"))
        proc = subprocess.run([KUBECTL, *args], capture_output=True, text=True, input=input, env=env, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc


def write_kubeconfig(path: Path, url: str, token: str, namespace: str = "default") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "kubeemu",
        "preferences": {},
        "clusters": [{"name": "kubeemu", "cluster": {"server": url, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "kubeemu", "user": {"token": token}}],
        "contexts": [{"name": "kubeemu", "context": {"cluster": "kubeemu", "user": "kubeemu", "namespace": namespace}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.contextmanager
def running_emulator(
    *, crds: Iterable[str | Path | dict] = (), emulator: RealisticEmulator | None = None, **emulator_kwargs: Any
) -> Iterator[RunningEmulator]:
    """Serve a RealisticEmulator on 127.0.0.1:<random port> from a background thread with its own loop."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kubeemu", daemon=True)
    thread.start()
    tmpdir = Path(tempfile.mkdtemp(prefix="kubeemu-"))
    state: dict[str, Any] = {}

    async def start() -> tuple[RealisticEmulator, str]:
        emu = emulator if emulator is not None else RealisticEmulator(**emulator_kwargs)
        await emu.__aenter__()
        runner = aiohttp.web.ServerRunner(
            aiohttp.web.Server(emu, handler_cancellation=True, access_log=None),
            handle_signals=False,
            shutdown_timeout=1.0,
        )
        await runner.setup()
        site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state.update(emu=emu, runner=runner)
        for crd in crds:
            emu.install_crd(crd)
        host, port = runner.addresses[0][:2]
        return emu, f"http://{host}:{port}"

    async def stop() -> None:
        emu, runner = state.get("emu"), state.get("runner")
        if emu is not None:
            emu.close_watches()
        if runner is not None:
            await runner.cleanup()
        if emu is not None:
            await emu.__aexit__(None, None, None)

    try:
        emu, url = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
        running = RunningEmulator(
            emulator=emu, url=url, loop=loop, thread=thread, tmpdir=tmpdir, kubeconfig_path=tmpdir / "kubeconfig"
        )
        write_kubeconfig(running.kubeconfig_path, url, running.token)
        yield running
    finally:
        try:
            asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
            shutil.rmtree(tmpdir, ignore_errors=True)


# ----------------------------------------------------------------------------------------------
# kopf in a thread
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class KopfThread:
    thread: threading.Thread
    registry: Any
    settings: Any
    stop: Callable[[], None]  # asks the operator to stop (also done on exit)
    ready_flag: threading.Event
    errors: list[BaseException]
    memo: Any


def _read_kubeconfig(path: str | Path) -> tuple[str, str | None, bool]:
    config = yaml.safe_load(Path(path).read_text())
    context_name = config.get("current-context")
    context = next(
        (c["context"] for c in config.get("contexts", []) if c["name"] == context_name),
        config["contexts"][0]["context"] if config.get("contexts") else {},
    )
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context.get("cluster", c["name"]))
    user: dict[str, Any] = next((u["user"] for u in config.get("users", []) if u["name"] == context.get("user")), {})
    return cluster["server"], user.get("token"), bool(cluster.get("insecure-skip-tls-verify"))


@contextlib.contextmanager
def run_kopf_in_thread(
    module_or_callable: Any = None,
    kubeconfig: str | Path | None = None,
    namespace: str | None = None,
    *,
    clusterwide: bool | None = None,
    settings: Any = None,
    configure: Callable[[Any], None] | None = None,
    memo: Any = None,
    timeout: float = 15.0,
    standalone: bool = True,
) -> Iterator[KopfThread]:
    """Run ``kopf.operator(standalone=True, ...)`` in a thread with its own loop against a kubeconfig.

    ``module_or_callable``: a module object or dotted name (imported, or reloaded, with a fresh
    registry as kopf's default so that its decorators land in it), or a callable that registers
    handlers: called with the registry if it takes an argument, else with the registry set as the
    default one. ``namespace=None`` serves the whole cluster. ``configure(settings)`` tweaks the
    ``kopf.OperatorSettings``. ``standalone=False`` lets the operator use peering (kopf's KopfPeering CRD must
    be served and, for a peering name, its object exist). The operator logs in via an ``@kopf.on.login``
    handler built from the kubeconfig (server, token). Exits by setting the stop flag; errors in the thread are
    re-raised.
    """
    import kopf

    if kubeconfig is None:
        kubeconfig = os.environ["KUBECONFIG"]
    server, token, insecure = _read_kubeconfig(kubeconfig)
    registry = kopf.OperatorRegistry()
    previous = kopf.get_default_registry()
    kopf.set_default_registry(registry)
    try:
        if isinstance(module_or_callable, str):
            if module_or_callable in sys.modules:
                importlib.reload(sys.modules[module_or_callable])
            else:
                importlib.import_module(module_or_callable)
        elif isinstance(module_or_callable, types.ModuleType):
            importlib.reload(module_or_callable)
        elif callable(module_or_callable):
            if inspect.signature(module_or_callable).parameters:
                module_or_callable(registry)
            else:
                module_or_callable()
    finally:
        kopf.set_default_registry(previous)

    @kopf.on.login(registry=registry, id="kubeemu-login")
    def _login(**_: Any) -> Any:
        return kopf.ConnectionInfo(
            server=server,
            token=token,
            scheme="Bearer" if token else None,
            insecure=insecure or None,
            default_namespace=namespace,
        )

    if settings is None:
        settings = kopf.OperatorSettings()
        settings.watching.reconnect_backoff = 0.1
        settings.networking.error_backoffs = [0.1, 0.2, 0.5]
    if configure is not None:
        configure(settings)
    ready, finished = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    memo = memo if memo is not None else kopf.Memo()
    state: dict[str, Any] = {}

    async def main() -> None:
        # An asyncio stop flag set from outside with call_soon_threadsafe: with a threading.Event,
        # kopf waits for it in an executor thread and asyncio.run() then hangs at shutdown.
        state["loop"], state["stop"] = asyncio.get_running_loop(), asyncio.Event()
        await kopf.operator(
            registry=registry,
            settings=settings,
            standalone=standalone,
            clusterwide=clusterwide if clusterwide is not None else namespace is None,
            namespaces=[namespace] if namespace else (),
            stop_flag=state["stop"],
            ready_flag=ready,
            memo=memo,
        )

    def target() -> None:
        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)
        finally:
            finished.set()
            ready.set()

    def stop() -> None:
        with contextlib.suppress(RuntimeError, KeyError):  # the loop is gone already
            state["loop"].call_soon_threadsafe(state["stop"].set)

    thread = threading.Thread(target=target, name="kopf-operator", daemon=True)
    thread.start()
    if not ready.wait(timeout):
        stop()
        thread.join(timeout)
        raise TimeoutError(f"kopf was not ready in {timeout} s")
    if finished.is_set():  # kopf returns normally (no exception) when a startup handler fails
        thread.join(timeout)
        raise RuntimeError("kopf exited during startup (see its log)") from (errors[0] if errors else None)
    handle = KopfThread(
        thread=thread, registry=registry, settings=settings, stop=stop, ready_flag=ready, errors=errors, memo=memo
    )
    try:
        yield handle
    finally:
        stop()
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"kopf did not stop in {timeout} s")
        if errors:
            raise RuntimeError("kopf failed in its thread") from errors[0]


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01, message: str = "") -> Any:
    """Poll ``predicate`` until it returns a truthy value (returned) or fail after ``timeout`` s."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message or predicate}")
        time.sleep(interval)
