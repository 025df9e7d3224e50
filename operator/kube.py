"""The few Kubernetes API calls the operator makes itself (kopf covers watching and events).

Responses are not deserialised into models: the operator needs none of them, and skipping it saves CPU
at 10,000 pods (and tolerates servers that omit fields the generated models insist on)."""

from __future__ import annotations

import json
import os
from typing import Any, Protocol, cast

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from yarl import URL

from mcpfleet.operator import metrics
from mcpfleet.operator.manifests import GROUP, LABEL_RUN_UID

VERSION = "v1alpha1"
PLURAL = "evalruns"
MERGE = "application/merge-patch+json"


async def api_client() -> client.ApiClient:
    """In a pod: the service account; elsewhere: $KUBECONFIG or ~/.kube/config."""
    cfg = client.Configuration()
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
        config.load_incluster_config(client_configuration=cfg)
    else:
        await config.load_kube_config(config_file=os.environ.get("KUBECONFIG"), client_configuration=cfg)
    api = client.ApiClient(configuration=cfg)
    rest = api.rest_client
    env_proxy(rest, cfg.host or "")
    # The client's session trusts the environment, which aiohttp re-reads on every request, in two thread pool
    # round trips (the proxy variables, then ~/.netrc): a tenth of the operator's CPU on a 5,080-pod sweep. The
    # API server's proxy, if the environment names one, was resolved once above; nothing else is read from it.
    session = rest.pool_manager
    connector = session.connector
    session.detach()
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False, read_bufsize=2**21)
    return api


def env_proxy(rest: Any, host: str) -> None:
    """What a session trusting the environment would use for ``host``: $HTTP(S)_PROXY unless $NO_PROXY says
    otherwise, with credentials from the URL or ~/.netrc (a kubeconfig's own proxy-url wins)."""
    if rest.proxy or not host:
        return
    try:
        proxy, auth = get_env_proxy_for_url(URL(host))
    except LookupError:  # none set, or $NO_PROXY covers the API server
        return
    rest.proxy = str(proxy)
    if auth is not None:
        rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth.encode()}


class ForeignPod(Exception):
    """The pod's name is taken by a pod of another run."""


# A 4xx for the pod itself: the API server found the manifest invalid (a field's value, a type, a quantity) and
# will refuse it every time. Other 4xx (403 a quota or RBAC, 404 no namespace, 429 throttled) may pass later.
REFUSED_FOR_GOOD = (400, 413, 422)


class PodRefused(ApiException):
    """The API server refused to create a pod with a 4xx other than 409: ``message`` is what it said."""

    def __init__(self, status: int, message: str):
        super().__init__(status=status, reason=message)
        self.message = message

    @property
    def for_good(self) -> bool:
        return self.status in REFUSED_FOR_GOOD

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"


def _api_message(status: int, body: bytes | str | None) -> str:
    """The message of a Kubernetes Status body (one line, clipped), or the body itself, or the status code."""
    raw = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        parsed = json.loads(raw)
        message = parsed.get("message") if isinstance(parsed, dict) else None
    except ValueError:
        message = None
    text = " ".join(str(message or raw).split())
    return text[:800] or f"HTTP {status}"


class _RawCoreApi(Protocol):
    """The CoreV1Api calls the operator makes, as the client runs them: plain dict bodies and, with
    ``_preload_content=False``, the raw aiohttp response (the package's stubs declare models for both)."""

    async def create_namespaced_pod(
        self, namespace: str, body: dict[str, Any], *, _preload_content: bool
    ) -> aiohttp.ClientResponse: ...

    async def read_namespaced_pod(
        self, name: str, namespace: str, *, _preload_content: bool
    ) -> aiohttp.ClientResponse: ...

    async def delete_namespaced_pod(
        self, name: str, namespace: str, *, _preload_content: bool
    ) -> aiohttp.ClientResponse: ...

    async def list_namespaced_pod(
        self, namespace: str, *, label_selector: str, _preload_content: bool
    ) -> aiohttp.ClientResponse: ...

    async def delete_collection_namespaced_pod(
        self, namespace: str, *, label_selector: str, _preload_content: bool
    ) -> aiohttp.ClientResponse: ...


class _RawCustomObjectsApi(Protocol):
    """Likewise for the status patch, which also needs ``_content_type`` (accepted through ``**kwargs``)."""

    async def patch_namespaced_custom_object_status(
        self,
        group: str,
        version: str,
        namespace: str,
        plural: str,
        name: str,
        body: dict[str, Any],
        *,
        _content_type: str,
        _preload_content: bool,
    ) -> aiohttp.ClientResponse: ...

    async def delete_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, *, _preload_content: bool
    ) -> aiohttp.ClientResponse: ...


class Kube:
    def __init__(self, api: client.ApiClient):
        self.api = api
        self.core = cast(_RawCoreApi, client.CoreV1Api(api))
        self.custom = cast(_RawCustomObjectsApi, client.CustomObjectsApi(api))

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None:
        """Create; None once created. If it already exists as this run's (deterministic names make a repeat
        harmless, e.g. after a create whose answer was lost), that pod as read: it may have finished meanwhile, and
        its last event may have gone by. A pod of that name left by another run (a deleted and re-created EvalRun
        of the same name, its old pod still terminating) is not ours to count: ForeignPod, so the caller tries
        again once it is gone."""
        body: bytes | str | None = None
        try:  # without preloading, the client returns an error response instead of raising: check both ways
            resp = await self.core.create_namespaced_pod(namespace, pod, _preload_content=False)
            code = resp.status
            if 400 <= code < 500 and code != 409:
                body = await resp.read()
            resp.release()
        except ApiException as exc:
            code, body = exc.status, exc.body
        _count("create", "pods", code)
        if code < 300:
            return None
        if 400 <= code < 500 and code != 409:
            raise PodRefused(code, _api_message(code, body))
        if code != 409:
            raise ApiException(status=code, reason="pod creation failed")
        name, ours = pod["metadata"]["name"], pod["metadata"]["labels"].get(LABEL_RUN_UID)
        theirs, deleting = None, None  # gone meanwhile: not ours either, create it on the next try
        existing: dict[str, Any] = {}
        resp = await self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        _count("get", "pods", resp.status)
        if resp.status < 300:
            existing = await resp.json()
            meta = existing.get("metadata") or {}
            theirs, deleting = (meta.get("labels") or {}).get(LABEL_RUN_UID), meta.get("deletionTimestamp")
        resp.release()
        if resp.status >= 300 and resp.status != 404:
            raise ApiException(status=resp.status, reason="reading the existing pod failed")
        if theirs != ours:
            raise ForeignPod(f"pod {name} exists and belongs to run {theirs or '(gone)'}, not {ours}")
        if deleting:  # a stopped try's pod still terminating: never taken for the new try (as a Job never does)
            raise ForeignPod(f"pod {name} of this run is still terminating (deleted, due by {deleting})")
        return existing

    async def delete_pod(self, namespace: str, name: str) -> bool:
        """Delete gracefully: the pod's node sends its containers SIGTERM, gives them the pod's
        terminationGracePeriodSeconds, then SIGKILL, and removes the pod. A pod that has finished (or never ran
        on a node) goes at once. False if it was gone already (404)."""
        try:  # as in create_pod: an error may come back as a response or as an exception
            resp = await self.core.delete_namespaced_pod(name, namespace, _preload_content=False)
            code = resp.status
            resp.release()
        except ApiException as exc:
            code = exc.status
        _count("delete", "pods", code)
        if code == 404:
            return False
        if code >= 300:
            raise ApiException(status=code, reason="pod deletion failed")
        return True

    async def delete_pods(self, namespace: str, selector: str) -> list[str]:
        """Delete every pod the label selector matches, in one call (a deletecollection, graceful as one delete is);
        the names of those it deleted."""
        resp = await self.core.delete_collection_namespaced_pod(
            namespace, label_selector=selector, _preload_content=False
        )
        _count("deletecollection", "pods", resp.status)
        if resp.status >= 300:
            resp.release()
            raise ApiException(status=resp.status, reason="deleting pods failed")
        data = await resp.json()
        return [(p.get("metadata") or {}).get("name", "") for p in data.get("items") or []]

    async def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        resp = await self.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
        _count("list", "pods", resp.status)
        if resp.status >= 300:  # an error body is not an empty list: nothing would be deleted or adopted
            resp.release()
            raise ApiException(status=resp.status, reason="listing pods failed")
        data = await resp.json()
        return list(data.get("items") or [])

    async def delete_evalrun(self, namespace: str, name: str) -> None:
        """Its finalizer lets the operator see it go; its pods go with it (ownerReferences)."""
        resp = await self.custom.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _preload_content=False
        )
        _count("delete", "evalruns", resp.status)
        resp.release()
        if resp.status >= 300 and resp.status != 404:
            raise ApiException(status=resp.status, reason="deleting the EvalRun failed")

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        resp = await self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, {"status": status}, _content_type=MERGE, _preload_content=False
        )
        _count("patch", "evalruns/status", resp.status)
        resp.release()
        if resp.status >= 300 and resp.status != 404:  # 404: the run is gone, nothing left to say
            raise ApiException(status=resp.status, reason="writing the EvalRun's status failed")


def _count(verb: str, resource: str, code: int | None) -> None:
    metrics.API_REQUESTS.labels(verb, resource, str(code or 0)).inc()
