"""The peering object kopf needs before it lets a replica act (see handlers.configure_peering).

kopf with mandatory peering keeps an operator paused, silently, while its peering object is missing. The chart
creates it; `mcpfleet operator` also creates it when it can, and says what is wrong when it cannot."""

from __future__ import annotations

from mcpfleet.operator.kube import ApiClient

GROUP, VERSION = "kopf.dev", "v1"


async def ensure_peering(api: ApiClient, name: str, namespaces: list[str], clusterwide: bool) -> list[str]:
    """Create the KopfPeering ``name`` in each namespace (a ClusterKopfPeering if ``clusterwide``) unless it
    exists. Returns the problems met (the CRD not installed, no permission), each naming the fix."""
    kind, plural = ("ClusterKopfPeering", "clusterkopfpeerings") if clusterwide else ("KopfPeering", "kopfpeerings")
    problems = []
    for ns in [None] if clusterwide else namespaces:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}}
        where_path = "" if ns is None else f"/namespaces/{ns}"
        code, _ = await api.request("POST", f"/apis/{GROUP}/{VERSION}{where_path}/{plural}", body=body)
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
