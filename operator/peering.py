"""The peering object kopf needs before it lets a replica act (see handlers.configure_peering).

kopf with mandatory peering keeps an operator paused, silently, while its peering object is missing. The chart
creates it; `mcpfleet operator` also creates it when it can, and says what is wrong when it cannot."""

from __future__ import annotations

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

GROUP, VERSION = "kopf.dev", "v1"


async def ensure_peering(api: client.ApiClient, name: str, namespaces: list[str], clusterwide: bool) -> list[str]:
    """Create the KopfPeering ``name`` in each namespace (a ClusterKopfPeering if ``clusterwide``) unless it
    exists. Returns the problems met (the CRD not installed, no permission), each naming the fix."""
    custom = client.CustomObjectsApi(api)
    kind, plural = ("ClusterKopfPeering", "clusterkopfpeerings") if clusterwide else ("KopfPeering", "kopfpeerings")
    problems = []
    for ns in [None] if clusterwide else namespaces:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}}
        try:
            if ns is None:
                resp = await custom.create_cluster_custom_object(GROUP, VERSION, plural, body, _preload_content=False)
            else:
                resp = await custom.create_namespaced_custom_object(
                    GROUP, VERSION, ns, plural, body, _preload_content=False
                )
            code = resp.status
            resp.release()
        except ApiException as exc:
            code = exc.status
        where = "cluster-wide" if ns is None else f"in namespace {ns}"
        if code == 404:
            problems.append(
                f"the {kind} CRD is not installed, so this operator stays paused: kubectl apply -f "
                "crds/kopfpeering.yaml (or run one replica with MCPFLEET_PEERING=false)"
            )
            break
        if code >= 300 and code != 409:
            problems.append(
                f"could not create {kind} {name} {where} (HTTP {code}); create it, or the operator stays paused"
            )
    return problems
