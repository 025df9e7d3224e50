"""The few Kubernetes API calls the operator makes itself (kopf covers watching and events), as raw HTTP.

Bodies are plain dicts, never a client library's generated models: the operator needs none of them, decoding them
cost CPU at 10,000 pods (and broke on servers that omit fields the models insist on), and importing such a library
cost 65 MB of the operator's memory (login.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import kopf
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from mcpfleet.operator import metrics
from mcpfleet.operator.login import connection
from mcpfleet.operator.manifests import GROUP, LABEL_RUN_UID

VERSION = "v1alpha1"
PLURAL = "evalruns"
MERGE = "application/merge-patch+json"
REQUEST_TIMEOUT_SECONDS = 60.0  # as kopf's own calls (handlers.startup: settings.networking.request_timeout)


class ApiError(Exception):
    """A Kubernetes API call answered with an error status (a 4xx or 5xx)."""

    def __init__(self, status: int, reason: str, body: bytes | None = None):
        super().__init__(status, reason)
        self.status, self.reason, self.body = status, reason, body

    def __str__(self) -> str:
        return f"({self.status}) {self.reason}"


class ApiClient:
    """A session to the API server with the operator's credentials (login.py): the few calls the operator makes
    itself, as raw HTTP with plain dict bodies. A call refused as unauthorised (401: a rotated service-account
    token, an expired plugin token) logs in again and is made once more."""

    def __init__(self, info: kopf.ConnectionInfo, relogin: Callable[[], Awaitable[kopf.ConnectionInfo]]):
        self.relogin = relogin
        self.session: aiohttp.ClientSession | None = None
        self._use(info)

    def _use(self, info: kopf.ConnectionInfo) -> None:
        self.server = info.server.rstrip("/")
        self.headers = {"Accept": "application/json", "User-Agent": "mcpfleet-operator", **info.as_http_headers()}
        self.proxy, self.proxy_headers = env_proxy(info.proxy_url, self.server)
        self._ssl = info.as_ssl_context() if self.server.startswith("https:") else None

    def _session(self) -> aiohttp.ClientSession:
        # Not trusting the environment: aiohttp would re-read it on every request, in two thread pool round trips
        # (the proxy variables, then ~/.netrc), a tenth of the operator's CPU on a 5,080-pod sweep. The API server's
        # proxy, if the environment names one, was resolved once (env_proxy).
        if self.session is None:
            self.session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else True),
                trust_env=False,
                read_bufsize=2**21,
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS),
            )
        return self.session

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        """(status, body) of one call; an unreachable server raises aiohttp's error, as any client would."""
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (1, 2):
            headers = {**self.headers, **({"Content-Type": content_type} if data is not None else {})}
            async with self._session().request(
                method,
                self.server + path,
                params=params,
                data=data,
                headers=headers,
                proxy=self.proxy,
                proxy_headers=self.proxy_headers,
            ) as resp:
                status, content = resp.status, await resp.read()
            if status != 401 or attempt == 2:
                return status, content
            await self._login_again()
        raise AssertionError("unreachable")

    async def _login_again(self) -> None:
        info = await self.relogin()
        old, self.session = self.session, None
        self._use(info)
        if old is not None:
            await old.close()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None


async def api_client(settings: kopf.OperatorSettings | None = None) -> ApiClient:
    """In a pod: the service account; elsewhere: $KUBECONFIG or ~/.kube/config (login.py)."""
    settings = settings or kopf.OperatorSettings()
    logger = logging.getLogger("mcpfleet.operator.login")

    async def login() -> kopf.ConnectionInfo:
        return await connection(settings, logger)

    return ApiClient(await login(), login)


def env_proxy(own: str | None, host: str) -> tuple[str | None, dict[str, str] | None]:
    """(proxy, its headers) for ``host``: the kubeconfig's own proxy-url if it names one, else what a session
    trusting the environment would use: $HTTP(S)_PROXY unless $NO_PROXY says otherwise, with credentials from
    the URL or ~/.netrc."""
    if own or not host:
        return own, None
    try:
        proxy, auth = get_env_proxy_for_url(URL(host))
    except LookupError:  # none set, or $NO_PROXY covers the API server
        return None, None
    return str(proxy), ({"Proxy-Authorization": auth.encode()} if auth is not None else None)


class ForeignPod(Exception):
    """The pod's name is taken by a pod of another run."""


# A 4xx for the pod itself: the API server found the manifest invalid (a field's value, a type, a quantity) and
# will refuse it every time. Other 4xx (403 a quota or RBAC, 404 no namespace, 429 throttled) may pass later.
REFUSED_FOR_GOOD = (400, 413, 422)


class PodRefused(ApiError):
    """The API server refused to create a pod with a 4xx other than 409: ``message`` is what it said."""

    def __init__(self, status: int, message: str):
        super().__init__(status, message)
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


def pods_path(namespace: str, name: str | None = None) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def evalrun_path(namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}"


class Kube:
    def __init__(self, api: ApiClient):
        self.api = api

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None:
        """Create; None once created. If it already exists as this run's (deterministic names make a repeat
        harmless, e.g. after a create whose answer was lost), that pod as read: it may have finished meanwhile, and
        its last event may have gone by. A pod of that name left by another run (a deleted and re-created EvalRun
        of the same name, its old pod still terminating) is not ours to count: ForeignPod, so the caller tries
        again once it is gone."""
        code, body = await self.api.request("POST", pods_path(namespace), body=pod)
        _count("create", "pods", code)
        if code < 300:
            return None
        if 400 <= code < 500 and code != 409:
            raise PodRefused(code, _api_message(code, body))
        if code != 409:
            raise ApiError(code, "pod creation failed", body)
        name, ours = pod["metadata"]["name"], pod["metadata"]["labels"].get(LABEL_RUN_UID)
        theirs, deleting = None, None  # gone meanwhile: not ours either, create it on the next try
        existing: dict[str, Any] = {}
        code, body = await self.api.request("GET", pods_path(namespace, name))
        _count("get", "pods", code)
        if code < 300:
            existing = json.loads(body)
            meta = existing.get("metadata") or {}
            theirs, deleting = (meta.get("labels") or {}).get(LABEL_RUN_UID), meta.get("deletionTimestamp")
        elif code != 404:
            raise ApiError(code, "reading the existing pod failed", body)
        if theirs != ours:
            raise ForeignPod(f"pod {name} exists and belongs to run {theirs or '(gone)'}, not {ours}")
        if deleting:  # a stopped try's pod still terminating: never taken for the new try (as a Job never does)
            raise ForeignPod(f"pod {name} of this run is still terminating (deleted, due by {deleting})")
        return existing

    async def delete_pod(self, namespace: str, name: str) -> bool:
        """Delete gracefully: the pod's node sends its containers SIGTERM, gives them the pod's
        terminationGracePeriodSeconds, then SIGKILL, and removes the pod. A pod that has finished (or never ran
        on a node) goes at once. False if it was gone already (404)."""
        code, body = await self.api.request("DELETE", pods_path(namespace, name))
        _count("delete", "pods", code)
        if code == 404:
            return False
        if code >= 300:
            raise ApiError(code, "pod deletion failed", body)
        return True

    async def delete_pods(self, namespace: str, selector: str) -> list[str]:
        """Delete every pod the label selector matches, in one call (a deletecollection, graceful as one delete is);
        the names of those it deleted."""
        code, body = await self.api.request("DELETE", pods_path(namespace), params={"labelSelector": selector})
        _count("deletecollection", "pods", code)
        if code >= 300:
            raise ApiError(code, "deleting pods failed", body)
        return [(p.get("metadata") or {}).get("name", "") for p in json.loads(body).get("items") or []]

    async def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        code, body = await self.api.request("GET", pods_path(namespace), params={"labelSelector": selector})
        _count("list", "pods", code)
        if code >= 300:  # an error body is not an empty list: nothing would be deleted or adopted
            raise ApiError(code, "listing pods failed", body)
        return list(json.loads(body).get("items") or [])

    async def delete_evalrun(self, namespace: str, name: str) -> None:
        """Its finalizer lets the operator see it go; its pods go with it (ownerReferences)."""
        code, body = await self.api.request("DELETE", evalrun_path(namespace, name))
        _count("delete", "evalruns", code)
        if code >= 300 and code != 404:
            raise ApiError(code, "deleting the EvalRun failed", body)

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        path = evalrun_path(namespace, name) + "/status"
        code, body = await self.api.request("PATCH", path, body={"status": status}, content_type=MERGE)
        _count("patch", "evalruns/status", code)
        if code >= 300 and code != 404:  # 404: the run is gone, nothing left to say
            raise ApiError(code, "writing the EvalRun's status failed", body)


def _count(verb: str, resource: str, code: int | None) -> None:
    metrics.API_REQUESTS.labels(verb, resource, str(code or 0)).inc()
