"""How the operator logs in to the Kubernetes API: one answer for kopf's watches and for its own calls (kube.py).

In a pod, its service account (the API server from ``KUBERNETES_SERVICE_HOST``/``PORT``, as client libraries find
it). Elsewhere the kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``), read by kopf's own reader when it holds all
it needs (a server, a CA, a token, a client certificate, basic auth). A user that needs a program run (an ``exec``
plugin: EKS, GKE), an auth provider, a token file or files named relative to the kubeconfig is read by
kubernetes-asyncio's loader instead, imported only then: the client's ~700 generated models cost the operator 65 MB
of memory, which nothing else in it needs (docs/operator.md, "Memory").
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import kopf
import yaml

# Kubeconfig user keys kopf's reader does not act on; a cluster or user file named by a relative path is read
# relative to the kubeconfig by kubectl, relative to the working directory by kopf.
CLIENT_ONLY_USER_KEYS = ("exec", "auth-provider", "tokenFile")
PATH_KEYS = ("certificate-authority", "client-certificate", "client-key")


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG")


def kubeconfig_paths() -> list[Path]:
    value = os.environ.get("KUBECONFIG") or ""
    paths = [Path(os.path.expanduser(p.strip())) for p in value.split(os.pathsep) if p.strip()]
    if not paths and os.path.exists(os.path.expanduser("~/.kube/config")):
        paths = [Path(os.path.expanduser("~/.kube/config"))]
    return paths


def needs_client(paths: list[Path]) -> str | None:
    """Why kopf's kubeconfig reader cannot log in with these files' current context (the key that needs a client
    library), or None. Merged as kubectl merges them: the first file to name a context, cluster or user wins."""
    current: str | None = None
    contexts: dict[str, dict[str, Any]] = {}
    clusters: dict[str, dict[str, Any]] = {}
    users: dict[str, dict[str, Any]] = {}
    for path in paths:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        current = current or doc.get("current-context")
        for items, into, key in (("contexts", contexts, "context"), ("clusters", clusters, "cluster")):
            for item in doc.get(items) or []:
                into.setdefault(item.get("name"), item.get(key) or {})
        for item in doc.get("users") or []:
            users.setdefault(item.get("name"), item.get("user") or {})
    context = contexts.get(current or "")
    if context is None:
        return None  # kopf's reader says what is missing
    user, cluster = users.get(context.get("user") or "", {}), clusters.get(context.get("cluster") or "", {})
    for key in CLIENT_ONLY_USER_KEYS:
        if user.get(key):
            return f"users[{context.get('user')}].{key}"
    for kind, entry in (("clusters", cluster), ("users", user)):
        for key in PATH_KEYS:
            if isinstance(entry.get(key), str) and not os.path.isabs(entry[key]):
                return f"{kind}[{context.get(kind[:-1])}].{key} (a relative path)"
    return None


async def connection(settings: kopf.OperatorSettings, logger: Any) -> kopf.ConnectionInfo:
    """The API server and the credentials to use now (called again when a call is refused as unauthorised: a
    rotated service-account token, an expired plugin token)."""
    if in_cluster():
        info = kopf.login_with_service_account(settings=settings, logger=logger)
        if info is None:
            raise kopf.LoginError("in a pod (KUBERNETES_SERVICE_HOST is set) without a service account token")
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT") or "443"
        host = f"[{host}]" if ":" in host else host
        return dataclasses.replace(info, server=f"https://{host}:{port}")
    paths = kubeconfig_paths()
    if not paths:
        raise kopf.LoginError("no kubeconfig: set KUBECONFIG, or run the operator in a pod with a service account")
    why = needs_client(paths)
    if why is None:
        info = kopf.login_with_kubeconfig(settings=settings, logger=logger)
        if info is None:
            raise kopf.LoginError(f"no usable kubeconfig at {os.pathsep.join(map(str, paths))}")
        return info
    try:
        import kubernetes_asyncio  # noqa: F401 - only for a kubeconfig kopf's reader cannot use
    except ImportError:
        raise kopf.LoginError(
            f"the kubeconfig's {why} needs the kubernetes-asyncio package (pip install kubernetes-asyncio), or "
            "a kubeconfig with a token or a client certificate"
        ) from None
    info = await kopf.login_via_async_client(settings=settings, logger=logger)
    if info is None:
        raise kopf.LoginError(f"kubernetes-asyncio could not log in with the kubeconfig ({why})")
    return info
