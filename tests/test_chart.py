"""The Helm chart (charts/mcpfleet): lints strictly, renders valid Kubernetes objects for the defaults and for
non-default value sets, and renders what the operator needs and nothing more: the operator's replicas with kopf
peering (one acts; a single Recreate replica without peering) and kopf's health probe, the peering object, the
settings as MCPFLEET_* variables the operator actually parses, least-privilege RBAC that switches between
namespaced and cluster-wide, a default-deny egress policy for trial pods with exactly the
allowed destinations, the monitoring objects and the Grafana dashboard.

Rendering is offline through ``helm_python`` (PyPI ``helm-python-sdk``: Helm v4's Go SDK as a library);
objects are validated with ``kubernetes_validate``; Prometheus-operator objects (ServiceMonitor, PodMonitor),
which it does not know, are checked structurally here.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "mcpfleet"
CRD_FILE = ROOT / "crds" / "evalrun.yaml"
CHART_CRD_FILE = CHART / "crds" / "evalrun.yaml"
PEERING_CRD_FILE = ROOT / "crds" / "kopfpeering.yaml"
CHART_PEERING_CRD_FILE = CHART / "crds" / "kopfpeering.yaml"
DASHBOARDS = sorted((CHART / "dashboards").glob("*.json"))

RELEASE, NAMESPACE = "mcpfleet", "evals"
K8S_VERSION = "1.30.0"
TRIAL_LABELS = {"app.kubernetes.io/managed-by": "mcpfleet", "app.kubernetes.io/component": "trial"}
DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")

# The RBAC the operator needs, as (apiGroup, resource, verb); anything else is a test failure.
BASE_RULES = (  # exactly the verbs the operator uses (measured against the emulator's request log)
    {("mcpfleet.io", "evalruns", v) for v in ("list", "watch", "patch", "delete")}
    | {("mcpfleet.io", "evalruns/status", "patch"), ("mcpfleet.io", "evalruns/finalizers", "update")}
    | {("", "pods", v) for v in ("get", "list", "watch", "create", "delete", "deletecollection")}
    | {("", "events", "create")}
)
PEERING_VERBS = ("list", "watch", "patch", "create")  # kopf's keep-alives; `mcpfleet operator` creates the object
NAMESPACED_RULES = BASE_RULES | {("kopf.dev", "kopfpeerings", v) for v in PEERING_VERBS}
CLUSTER_RULES = (
    BASE_RULES
    | {("", "namespaces", v) for v in ("list", "watch")}
    | {("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("list", "watch", "get")}
    | {("kopf.dev", "clusterkopfpeerings", v) for v in PEERING_VERBS}
)
PEERING_KINDS = ("KopfPeering", "ClusterKopfPeering")

PROMETHEUS = {"release": "prometheus"}
SCENARIOS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cluster-wide": {"clusterWide": True},
    "watch-namespaces": {"watchNamespaces": ["team-a", "team-b"]},
    "monitors": {
        "serviceMonitor": {"enabled": True, "additionalLabels": PROMETHEUS, "interval": "15s"},
        "podMonitor": {"enabled": True, "additionalLabels": PROMETHEUS, "interval": "10s"},
        "dashboard": {
            "label": "grafana_dashboard_mcpfleet",
            "labelValue": "yes",
            "namespace": "monitoring",
            "annotations": {"grafana_folder": "mcpfleet"},
        },
    },
    "monitors-cluster-wide": {
        "clusterWide": True,
        "serviceMonitor": {"enabled": True, "additionalLabels": PROMETHEUS, "namespace": "monitoring"},
        "podMonitor": {"enabled": True, "additionalLabels": PROMETHEUS, "namespace": "monitoring"},
        "networkPolicy": {"namespaces": ["evals", "evals-2"]},
    },
    "egress": {
        "watchNamespaces": ["evals-a"],
        "networkPolicy": {
            "llmEndpoints": [
                {"cidr": "203.0.113.0/24", "ports": [443]},
                {"cidr": "10.96.12.7/32", "ports": [{"port": 4000, "protocol": "TCP"}]},
            ],
            "s3Endpoints": [
                {"cidr": "52.216.0.0/15", "except": ["52.216.8.0/24"], "ports": [443]},
                {"cidr": "10.20.0.0/16", "ports": [{"port": 9000, "endPort": 9001}]},
            ],
            "extraEgress": [
                {
                    "to": [
                        {
                            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "evals-a"}},
                            "podSelector": {"matchLabels": {"app": "scripted-model"}},
                        }
                    ],
                    "ports": [{"protocol": "TCP", "port": 8080}],
                }
            ],
        },
    },
    # null deletes a default (Helm's coalescing); an empty map would be merged into the default instead.
    "custom-dns": {
        "networkPolicy": {
            "dns": {
                "namespaceSelector": None,
                "podSelector": {"matchLabels": {"k8s-app": "node-local-dns"}},
                "ports": [{"port": 53, "protocol": "UDP"}],
            }
        }
    },
    "deny-all-egress": {"networkPolicy": {"dns": {"enabled": False}}},
    "scrapers": {
        "networkPolicy": {
            "ingress": {
                "scrapers": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
                }
            }
        }
    },
    "ingress-off": {"networkPolicy": {"ingress": {"enabled": False}}},
    "network-policy-off": {"networkPolicy": {"enabled": False}},
    "dashboard-off": {"dashboard": {"enabled": False}, "metrics": {"service": {"enabled": False}}},
    "custom-images": {
        "fullnameOverride": "fleet",
        "image": {"repository": "registry.example.com/mcpfleet/operator", "tag": "1.2.3", "pullPolicy": "Always"},
        "imagePullSecrets": ["regcred"],
        "runner": {
            "image": {"repository": "registry.example.com/mcpfleet/runner", "digest": "sha256:" + "b" * 64},
            "metricsPort": 9200,
        },
        "sidecarImages": {
            "filesystem": {"repository": "registry.example.com/mcpfleet/mcp-filesystem", "tag": "2.0"},
            "postgres": {"repository": "registry.example.com/mcpfleet/mcp-postgres", "tag": "16-1"},
        },
        "operator": {
            "maxPods": 1000000,
            "createRate": 0.5,
            "statusInterval": 5,
            "podGraceSeconds": 60,
            "scriptedUrl": "http://scripted.evals.svc:8080/v1",
            "allowedImages": ["registry.example.com/evals/*", "ghcr.io/mcpfleet/*"],
            "allowedServiceAccounts": ["evals-*"],
            "extraEnv": [{"name": "X", "value": "y"}],
        },
        "metrics": {"port": 9091},
        "s3": {"credentialsSecret": "operator-s3", "region": "eu-west-1"},
        "serviceAccount": {
            "name": "fleet-operator",
            "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/mcpfleet"},
        },
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "evals", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["evals"]}]}
                    ]
                }
            }
        },
        "podAnnotations": {"example.com/team": "evals"},
        "priorityClassName": "system-cluster-critical",
    },
    # Cluster-wide trial-pod placement, and allow-lists for the classes an EvalRun may name.
    "trial-pods": {
        "operator": {"allowedPriorityClasses": ["evals-*"], "allowedRuntimeClasses": ["gvisor"]},
        "trialPods": {
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "evals", "effect": "NoSchedule"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["evals"]}]}
                        ]
                    }
                }
            },
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
            ],
            "priorityClassName": "evals-default",
            "runtimeClassName": "gvisor",
            "imagePullSecrets": ["regcred", {"name": "mirror-creds"}],
            "labels": {"kueue.x-k8s.io/queue-name": "evals", "cost-center": "ml"},
            "annotations": {"example.com/owner": "platform"},
            "dnsPolicy": "ClusterFirst",
            "dnsConfig": {"options": [{"name": "ndots", "value": "2"}]},
        },
    },
    # Every image by digest (a digest wins over a tag), CPU limits: the scanner waivers that need neither go.
    "digests": {
        "image": {
            "repository": "registry.example.com/mcpfleet/operator",
            "tag": "1.2.3",
            "digest": "sha256:" + "c" * 64,
        },
        "runner": {"image": {"repository": "registry.example.com/mcpfleet/runner", "digest": "sha256:" + "d" * 64}},
        "sidecarImages": {
            name: {"repository": f"registry.example.com/mcpfleet/{name}", "digest": "sha256:" + f"{n}" * 64}
            for n, name in enumerate(("filesystem", "playwright", "postgres", "postgres-db"))
        },
        "operator": {
            "allowedImages": ["registry.example.com/evals/*@sha256:*", "ghcr.io/x/runner@sha256:" + "e" * 64],
            "allowedServiceAccounts": ["evals-*"],
        },
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    },
    "operator-egress": {
        "operatorNetworkPolicy": {
            "ingressFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
            "egress": {
                "enabled": True,
                "apiServer": [{"cidr": "10.0.0.10/32", "ports": [6443]}, {"cidr": "10.0.0.11/32", "ports": [6443]}],
                "s3Endpoints": [{"cidr": "52.216.0.0/15", "ports": [443]}],
                "extraEgress": [{"to": [{"podSelector": {"matchLabels": {"app": "minio"}}}]}],
            },
        }
    },
    "operator-egress-no-dns": {
        "operatorNetworkPolicy": {"egress": {"enabled": True, "dns": False, "apiServer": [{"cidr": "10.0.0.10/32"}]}}
    },
    "operator-network-policy-off": {"operatorNetworkPolicy": {"enabled": False}},
    "replicas": {"replicaCount": 3, "peering": {"name": "fleet-peering", "lifetime": 20}},
    "no-peering": {"peering": {"enabled": False}},
    "no-peering-cluster-wide": {"clusterWide": True, "peering": {"enabled": False}},
}


def helm() -> Any:
    """helm_python (helm-python-sdk, a test dependency): Helm v4 as a library, since no helm binary exists here."""
    import helm_python

    return helm_python


# ------------------------------------------------------------------------------------------------ plumbing


@pytest.fixture(scope="module")
def chart() -> Any:
    with helm().Chart.load(CHART) as loaded:
        yield loaded


@cache
def _render(name: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    with helm().Chart.load(CHART) as loaded:
        values = loaded.merge_values(copy.deepcopy(SCENARIOS[name]))
        out = loaded.render(copy.deepcopy(SCENARIOS[name]), name=RELEASE, namespace=NAMESPACE)
    docs = [
        d for path, text in sorted(out.items()) if not path.endswith("NOTES.txt") for d in yaml.safe_load_all(text) if d
    ]
    notes = next((text for path, text in out.items() if path.endswith("NOTES.txt")), "")
    return values, docs, notes


def rendered(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    values, docs, _ = _render(name)
    return copy.deepcopy(values), copy.deepcopy(docs)


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = of_kind(docs, kind)
    assert len(found) == 1, f"expected exactly one {kind}, got {len(found)}"
    return found[0]


def image_ref(image: dict[str, Any]) -> str:
    if image.get("digest"):
        return f"{image['repository']}@{image['digest']}"
    return f"{image['repository']}:{image.get('tag') or '0.1.0'}"


def trial_policy_count(values: dict[str, Any]) -> int:
    """NetworkPolicies per trial namespace: egress, and ingress unless turned off; none with networkPolicy off."""
    np = values["networkPolicy"]
    return (1 + int(np["ingress"]["enabled"])) if np["enabled"] else 0


def policies_named(docs: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    """The NetworkPolicies <fullname>-<suffix>: trials-egress, trials-ingress (one per trial namespace) or
    operator."""
    return [d for d in of_kind(docs, "NetworkPolicy") if d["metadata"]["name"].endswith(f"-{suffix}")]


# A checkov waiver annotation's value: the check, then a reason (checkov splits the value on "=").
WAIVER = re.compile(r"^(CKV2?_K8S_\d+)=([^=]*\S[^=]*)$")


def waivers(meta: dict[str, Any]) -> dict[str, str]:
    """{check: reason} of an object's checkov.io/skipN annotations, each well-formed and each check once."""
    out: dict[str, str] = {}
    for key, value in (meta.get("annotations") or {}).items():
        if key.startswith("checkov.io/"):
            assert re.fullmatch(r"checkov\.io/skip\d+", key), key
            match = WAIVER.match(value)
            assert match, f"{key}: {value!r} is not CHECK=reason"
            assert match.group(1) not in out, f"{match.group(1)} waived twice"
            out[match.group(1)] = match.group(2)
    return out


def watched(values: dict[str, Any]) -> list[str]:
    if values["clusterWide"]:
        return []
    return list(dict.fromkeys(values["watchNamespaces"])) or [NAMESPACE]


def trial_namespaces(values: dict[str, Any]) -> list[str]:
    np = values["networkPolicy"]
    if np["namespaces"]:
        return list(dict.fromkeys(np["namespaces"]))
    return [NAMESPACE] if values["clusterWide"] else watched(values)


def operator_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["operator"]
    return containers[0]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    names = [e["name"] for e in container["env"]]
    assert len(names) == len(set(names)), f"duplicate env vars: {names}"
    return {e["name"]: e for e in container["env"]}


def plain_env(container: dict[str, Any]) -> dict[str, str]:
    return {k: e["value"] for k, e in env_of(container).items() if "value" in e}


def check_monitor(doc: dict[str, Any], kind: str, endpoints_key: str) -> None:
    """What kubernetes_validate cannot check: the Prometheus operator's monitoring.coreos.com/v1 shape."""
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == kind
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
    assert doc["metadata"].get("namespace")
    spec = doc["spec"]
    known = {
        "jobLabel",
        "namespaceSelector",
        "selector",
        endpoints_key,
        "podTargetLabels",
        "targetLabels",
        "sampleLimit",
        "targetLimit",
        "attachMetadata",
    }
    assert set(spec) <= known, f"unknown {kind} spec fields: {set(spec) - known}"
    selector = spec["selector"]
    assert set(selector) <= {"matchLabels", "matchExpressions"} and selector.get("matchLabels")
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in selector["matchLabels"].items())
    ns_sel = spec.get("namespaceSelector", {})
    assert set(ns_sel) <= {"any", "matchNames"} and not (ns_sel.get("any") and ns_sel.get("matchNames"))
    endpoints = spec[endpoints_key]
    assert isinstance(endpoints, list) and endpoints
    for ep in endpoints:
        assert set(ep) <= {
            "port",
            "path",
            "scheme",
            "interval",
            "scrapeTimeout",
            "relabelings",
            "metricRelabelings",
            "honorLabels",
        }, ep
        assert ep["port"] == "metrics" and ep["path"] == "/metrics" and ep["scheme"] == "http"
        for key in ("interval", "scrapeTimeout"):
            assert DURATION.match(str(ep[key])), f"{kind} {key}: {ep[key]!r} is not a Prometheus duration"


# ------------------------------------------------------------------------------------------------ chart & CRD


def test_chart_metadata(chart: Any) -> None:
    meta = chart.metadata
    assert (meta["apiVersion"], meta["name"], meta["appVersion"]) == ("v2", "mcpfleet", "0.1.0")
    assert re.fullmatch(r"\d+\.\d+\.\d+", meta["version"])
    assert chart.schema is not None, "values.schema.json is missing"


def test_more_than_one_replica_needs_peering() -> None:
    with helm().Chart.load(CHART) as loaded, pytest.raises(Exception, match="replicaCount > 1 needs peering"):
        loaded.render({"replicaCount": 2, "peering": {"enabled": False}}, name=RELEASE, namespace=NAMESPACE)


def test_crd_copy_in_sync() -> None:
    """Helm installs charts/mcpfleet/crds/; it must be the generated CRD, byte for byte."""
    assert CHART_CRD_FILE.read_bytes() == CRD_FILE.read_bytes(), (
        "charts/mcpfleet/crds/evalrun.yaml differs from crds/evalrun.yaml (generated by `mcpfleet crd`). "
        "Sync it: cp crds/evalrun.yaml charts/mcpfleet/crds/evalrun.yaml"
    )


def test_helm_sees_the_crd(chart: Any) -> None:
    crds = sorted(chart.crds, key=lambda c: c["name"])
    assert [c["name"] for c in crds] == ["crds/evalrun.yaml", "crds/kopfpeering.yaml"]
    assert crds[0]["data"] == CRD_FILE.read_text()
    doc = yaml.safe_load(crds[0]["data"])
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert doc["metadata"]["name"] == "evalruns.mcpfleet.io"
    assert crds[1]["data"] == PEERING_CRD_FILE.read_text() == CHART_PEERING_CRD_FILE.read_text()
    peering = list(yaml.safe_load_all(crds[1]["data"]))
    for doc in peering:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert sorted(d["metadata"]["name"] for d in peering) == ["clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_lint_strict(scenario: str) -> None:
    report = helm().lint(
        CHART, copy.deepcopy(SCENARIOS[scenario]), strict=True, namespace=NAMESPACE, kube_version=f"v{K8S_VERSION}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not problems and not report["errors"], json.dumps(report, indent=1)


# ------------------------------------------------------------------------------------------------ every object


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_manifests_are_valid(scenario: str) -> None:
    values, docs = rendered(scenario)
    for doc in docs:
        where = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if doc["kind"] in PEERING_KINDS:  # kopf's own CRD (crds/kopfpeering.yaml): no schema to validate against
            assert doc["apiVersion"] == "kopf.dev/v1" and set(doc) == {"apiVersion", "kind", "metadata"}, doc
            assert doc["metadata"]["name"] == values["peering"]["name"]
        elif doc["kind"] == "ServiceMonitor":
            check_monitor(doc, "ServiceMonitor", "endpoints")
        elif doc["kind"] == "PodMonitor":
            check_monitor(doc, "PodMonitor", "podMetricsEndpoints")
        else:
            try:
                kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
            except kubernetes_validate.ValidationError as exc:
                raise AssertionError(f"{scenario}: {where}: {exc.message} at {list(exc.path)}") from None
        assert len(doc["metadata"]["name"]) <= 63, where
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE, where
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding", "ClusterKopfPeering"):
            assert doc["metadata"].get("namespace"), f"{where} has no namespace"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_renders_exactly_the_toggled_objects(scenario: str) -> None:
    values, docs = rendered(scenario)
    cluster = values["clusterWide"]
    n_watched = len(watched(values))
    expected = {
        "Deployment": 1,
        "ServiceAccount": 1,
        "Role": 0 if cluster else n_watched,
        "RoleBinding": 0 if cluster else n_watched,
        "ClusterRole": 1 if cluster else 0,
        "ClusterRoleBinding": 1 if cluster else 0,
        "Service": int(values["metrics"]["service"]["enabled"]),
        "ServiceMonitor": int(values["serviceMonitor"]["enabled"]),
        "PodMonitor": int(values["podMonitor"]["enabled"]),
        "ConfigMap": int(values["dashboard"]["enabled"]),
        "NetworkPolicy": len(trial_namespaces(values)) * trial_policy_count(values)
        + int(values["operatorNetworkPolicy"]["enabled"]),
        "KopfPeering": 0 if cluster or not values["peering"]["enabled"] else n_watched,
        "ClusterKopfPeering": int(cluster and values["peering"]["enabled"]),
    }
    got = {kind: len(of_kind(docs, kind)) for kind in expected}
    assert got == expected
    assert {d["kind"] for d in docs} <= set(expected), "unexpected kinds rendered"
    assert not of_kind(docs, "Secret"), "the chart must not render Secrets"
    if scenario == "defaults":  # the Prometheus-operator CRDs may be absent: off by default, the Service on
        assert got["ServiceMonitor"] == got["PodMonitor"] == 0 and got["Service"] == 1
        assert got["NetworkPolicy"] == 3 and got["ConfigMap"] == 1  # the trials' egress and ingress, the operator's


# ------------------------------------------------------------------------------------------------ the operator


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_deployment(scenario: str) -> None:
    values, docs = rendered(scenario)
    dep = one(docs, "Deployment")
    spec, pod = dep["spec"], dep["spec"]["template"]["spec"]
    if values["peering"]["enabled"]:  # one replica acts; a rollout's new pod waits for the old one to go
        assert spec["replicas"] == values["replicaCount"]
        assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
        assert env_of(operator_container(docs))["POD_ID"]["valueFrom"] == {
            "fieldRef": {"fieldPath": "metadata.name"}
        }  # kopf's peer identity
    else:
        assert spec["replicas"] == 1
        assert spec["strategy"] == {"type": "Recreate"}, "never two operators at once"
    assert spec["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    c = operator_container(docs)
    assert c["image"] == image_ref(values["image"])
    assert ":latest" not in c["image"] and (":" in c["image"].rsplit("/", 1)[-1] or "@sha256:" in c["image"])
    assert c["imagePullPolicy"] == values["image"]["pullPolicy"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": 8080, "metrics": values["metrics"]["port"]}
    for probe in ("livenessProbe", "readinessProbe"):
        get = c[probe]["httpGet"]
        assert get["path"] == "/healthz" and ports.get(get["port"], get["port"]) == 8080, probe
    assert c["command"] == ["mcpfleet", "operator"]
    args = c["args"]
    assert args[:2] == ["--liveness", "http://0.0.0.0:8080/healthz"]
    if values["clusterWide"]:
        assert args[2:] == ["--all-namespaces"]
    else:
        assert args[2:] == [a for ns in watched(values) for a in ("--namespace", ns)]
    # Locked down.
    psc, csc = pod["securityContext"], c["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 10001
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert csc["readOnlyRootFilesystem"] is True and csc["allowPrivilegeEscalation"] is False
    assert csc["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}} in pod["volumes"]
    assert pod["serviceAccountName"] == one(docs, "ServiceAccount")["metadata"]["name"]
    assert pod["automountServiceAccountToken"] is True  # kopf talks to the API server
    # Values pass through.
    assert c["resources"] == values["resources"]
    for key in ("nodeSelector", "tolerations", "affinity"):
        assert pod.get(key, type(values[key])()) == values[key], key
    assert values["podAnnotations"].items() <= dep["spec"]["template"]["metadata"]["annotations"].items()
    if values["imagePullSecrets"]:
        assert pod["imagePullSecrets"] == [{"name": n} for n in values["imagePullSecrets"]]
    if values["priorityClassName"]:
        assert pod["priorityClassName"] == values["priorityClassName"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scanner_waivers_on_the_deployment_are_only_where_the_check_fails(scenario: str) -> None:
    """checkov's findings the chart keeps on purpose are waived on the Deployment with a reason, each only while the
    rendered container would fail that check (checkov's own rules, restated): a CPU limit, an image digest or
    pullPolicy Always in the values takes its waiver away."""
    values, docs = rendered(scenario)
    dep = one(docs, "Deployment")
    c = operator_container(docs)
    pinned = "@" in c["image"]
    expected = {"CKV_K8S_38"}  # kopf's API token: always
    if not (c.get("resources") or {}).get("limits", {}).get("cpu"):
        expected.add("CKV_K8S_11")
    if not pinned:
        expected.add("CKV_K8S_43")
        if c["imagePullPolicy"] != "Always":
            expected.add("CKV_K8S_15")
    assert set(waivers(dep["metadata"])) == expected
    assert dep["spec"]["template"]["spec"]["automountServiceAccountToken"] is True  # what CKV_K8S_38 is about
    if scenario == "defaults":
        assert set(waivers(dep["metadata"])) == {"CKV_K8S_38", "CKV_K8S_11", "CKV_K8S_43", "CKV_K8S_15"}
    if scenario == "digests":
        assert set(waivers(dep["metadata"])) == {"CKV_K8S_38"}


def test_readme_says_the_deployment_strategy_that_renders() -> None:
    """The chart README's Deployment row names each mode's replicas and update strategy as the chart renders them
    (it once said "1 replica, Recreate" while peering, the default, rendered RollingUpdate)."""
    row = next(line for line in (CHART / "README.md").read_text().splitlines() if line.startswith("| Deployment"))
    with_peering = re.search(r"with peering, the default: `replicaCount` replicas, `(\w+)`", row)
    without = re.search(r"without peering: 1 replica, `(\w+)`", row)
    assert with_peering and without, row
    values, docs = rendered("defaults")
    assert values["peering"]["enabled"] is True  # "the default"
    assert one(docs, "Deployment")["spec"]["strategy"]["type"] == with_peering.group(1)
    values, docs = rendered("replicas")
    assert one(docs, "Deployment")["spec"]["replicas"] == values["replicaCount"] == 3
    assert one(docs, "Deployment")["spec"]["strategy"]["type"] == with_peering.group(1)
    _, docs = rendered("no-peering")
    assert one(docs, "Deployment")["spec"]["replicas"] == 1
    assert one(docs, "Deployment")["spec"]["strategy"]["type"] == without.group(1)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_operator_env_carries_the_settings(scenario: str) -> None:
    from mcpfleet.operator.settings import OperatorSettings

    values, docs = rendered(scenario)
    c = operator_container(docs)
    env, plain = env_of(c), plain_env(c)
    op = values["operator"]
    sidecars = {svc: image_ref(img) for svc, img in values["sidecarImages"].items()}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert plain["MCPFLEET_RUNNER_IMAGE"] == image_ref(values["runner"]["image"])
    assert dict(kv.split("=", 1) for kv in plain["MCPFLEET_SIDECAR_IMAGES"].split(",")) == sidecars
    assert int(plain["MCPFLEET_MAX_PODS"]) == op["maxPods"]
    assert float(plain["MCPFLEET_CREATE_RATE"]) == op["createRate"]
    assert float(plain["MCPFLEET_STATUS_INTERVAL"]) == op["statusInterval"]
    assert plain.get("MCPFLEET_SCRIPTED_URL", "") == op["scriptedUrl"]
    # The operator parses what the chart sets, to the values given.
    settings = OperatorSettings.from_env(plain)
    assert settings.runner_image == image_ref(values["runner"]["image"])
    assert settings.sidecar_images == sidecars
    assert (settings.max_pods, settings.create_rate, settings.status_interval, settings.pod_grace_seconds) == (
        op["maxPods"],
        op["createRate"],
        op["statusInterval"],
        op["podGraceSeconds"],
    )
    assert settings.scripted_url == (op["scriptedUrl"] or None)
    peering = values["peering"]
    assert settings.peering is peering["enabled"]
    if peering["enabled"]:
        assert (settings.peering_name, settings.peering_lifetime) == (peering["name"], peering["lifetime"])
    assert (settings.allowed_images, settings.allowed_service_accounts) == (
        op["allowedImages"],
        op["allowedServiceAccounts"],
    )
    assert (settings.allowed_priority_classes, settings.allowed_runtime_classes) == (
        op["allowedPriorityClasses"],
        op["allowedRuntimeClasses"],
    )
    given = {k: v for k, v in values["trialPods"].items() if v}  # an empty value is no default
    if "imagePullSecrets" in given:
        given["imagePullSecrets"] = [s if isinstance(s, dict) else {"name": s} for s in given["imagePullSecrets"]]
    assert settings.pod_defaults.model_dump(mode="json", by_alias=True, exclude_defaults=True) == given
    assert ("MCPFLEET_POD_DEFAULTS" in plain) == bool(given)
    if op["allowedImages"]:  # the allow-list is enforced: the chart's own images pass, others are refused
        assert not settings.refusals(settings.runner_image, {"filesystem": sidecars["filesystem"]}, "evals-a")
        if scenario == "digests":  # an allow-list of digests: by content only, a tag of the same image refused
            digest = "@sha256:" + "f" * 64
            assert not settings.refusals("registry.example.com/evals/runner" + digest, {}, None)
            assert not settings.refusals(
                "ghcr.io/x/runner@sha256:" + "e" * 64, {"filesystem": settings.runner_image}, None
            )
            assert settings.refusals("registry.example.com/evals/runner:2", {}, None)
            assert settings.refusals("ghcr.io/x/runner@sha256:" + "f" * 64, {}, None)
        else:
            assert not settings.refusals("registry.example.com/evals/runner:2", {}, None)
            assert not settings.refusals("registry.example.com/evals/runner@sha256:" + "f" * 64, {}, None)
        refused = settings.refusals("docker.io/evil/miner:1", {"filesystem": "evil/fs"}, "cluster-admin-sa")
        assert [r.split(":")[0] for r in refused] == [
            "spec.pod.runnerImage",
            "spec.pod.sidecarImages.filesystem",
            "spec.pod.serviceAccountName",
        ], refused
    if "metrics_port" in OperatorSettings.model_fields:
        assert settings.metrics_port == values["runner"]["metricsPort"]
    if "operator_metrics_port" in OperatorSettings.model_fields:
        assert settings.operator_metrics_port == values["metrics"]["port"]
    # S3 credentials of the operator: by reference only.
    s3 = values["s3"]
    if s3["credentialsSecret"]:
        for var, key in (
            ("AWS_ACCESS_KEY_ID", s3["accessKeyIdKey"]),
            ("AWS_SECRET_ACCESS_KEY", s3["secretAccessKeyKey"]),
        ):
            assert env[var] == {
                "name": var,
                "valueFrom": {"secretKeyRef": {"name": s3["credentialsSecret"], "key": key}},
            }
    else:
        assert "AWS_ACCESS_KEY_ID" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert plain.get("AWS_DEFAULT_REGION", "") == s3["region"]
    for extra in op["extraEnv"]:
        assert env[extra["name"]] == extra


@pytest.mark.parametrize("scenario", ["defaults", "cluster-wide", "watch-namespaces"])
def test_operator_cli_accepts_the_args(scenario: str) -> None:
    """The container's command line parses with the real `mcpfleet operator` command."""
    import typer.core
    import typer.main

    from mcpfleet.runner.cli.app import app

    values, docs = rendered(scenario)
    c = operator_container(docs)
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)  # several commands: a group
    ctx = group.commands["operator"].make_context("operator", list(c["args"]))
    assert ctx.params["liveness"] == "http://0.0.0.0:8080/healthz"
    assert ctx.params["all_namespaces"] is values["clusterWide"]
    assert list(ctx.params["namespace"]) == watched(values)


# ------------------------------------------------------------------------------------------------ RBAC


def rule_triples(rules: list[dict[str, Any]], where: str) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, f"{where}: unexpected rule fields {rule}"
        for field in rule.values():
            assert "*" not in field, f"{where}: wildcard in {rule}"
        out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rbac_is_least_privilege(scenario: str) -> None:
    values, docs = rendered(scenario)
    sa = one(docs, "ServiceAccount")
    assert sa["metadata"]["namespace"] == NAMESPACE
    assert sa["metadata"].get("annotations", {}) == values["serviceAccount"]["annotations"]
    subject = [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}]
    roles, bindings = of_kind(docs, "Role"), of_kind(docs, "RoleBinding")
    croles, cbindings = of_kind(docs, "ClusterRole"), of_kind(docs, "ClusterRoleBinding")
    if values["clusterWide"]:
        assert not roles and not bindings
        assert len(croles) == len(cbindings) == 1
        expected = (
            CLUSTER_RULES
            if values["peering"]["enabled"]
            else CLUSTER_RULES - {("kopf.dev", "clusterkopfpeerings", v) for v in PEERING_VERBS}
        )
        assert rule_triples(croles[0]["rules"], "ClusterRole") == expected
        assert cbindings[0]["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": croles[0]["metadata"]["name"],
        }
        assert cbindings[0]["subjects"] == subject
    else:
        assert not croles and not cbindings, "namespaced mode must not grant anything cluster-wide"
        assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(watched(values))
        assert sorted(b["metadata"]["namespace"] for b in bindings) == sorted(watched(values))
        by_ns = {b["metadata"]["namespace"]: b for b in bindings}
        for role in roles:
            ns = role["metadata"]["namespace"]
            expected = NAMESPACED_RULES if values["peering"]["enabled"] else BASE_RULES
            assert rule_triples(role["rules"], f"Role {ns}") == expected
            assert by_ns[ns]["roleRef"] == {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": role["metadata"]["name"],
            }
            assert by_ns[ns]["subjects"] == subject
    for role in roles + croles:
        assert not any(r in ("secrets", "configmaps") for _, r, _ in rule_triples(role["rules"], "")), (
            "the operator must not read Secrets: the kubelet resolves secretKeyRefs"
        )


# ------------------------------------------------------------------------------------------------ NetworkPolicy


def expected_egress(np: dict[str, Any]) -> list[dict[str, Any]]:
    def ports(items: list[Any]) -> list[dict[str, Any]]:
        out = []
        for p in items:
            p = {"port": p} if isinstance(p, int) else dict(p)
            out.append(
                {
                    "protocol": p.get("protocol", "TCP"),
                    "port": p["port"],
                    **({"endPort": p["endPort"]} if p.get("endPort") else {}),
                }
            )
        return out

    rules: list[dict[str, Any]] = []
    if np["dns"]["enabled"]:
        peer = {k: np["dns"][k] for k in ("namespaceSelector", "podSelector") if np["dns"].get(k)}
        rules.append({"to": [peer], "ports": ports(np["dns"]["ports"])})
    for ep in np["llmEndpoints"] + np["s3Endpoints"]:
        block = {"cidr": ep["cidr"], **({"except": ep["except"]} if ep.get("except") else {})}
        rules.append({"to": [{"ipBlock": block}], **({"ports": ports(ep["ports"])} if ep.get("ports") else {})})
    return rules + np["extraEgress"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_network_policy_denies_egress_but_the_allow_list(scenario: str) -> None:
    values, docs = rendered(scenario)
    policies = policies_named(docs, "trials-egress")
    np = values["networkPolicy"]
    if not np["enabled"]:
        assert not policies
        return
    assert sorted(p["metadata"]["namespace"] for p in policies) == sorted(trial_namespaces(values))
    for policy in policies:
        spec = policy["spec"]
        assert spec["podSelector"] == {"matchLabels": TRIAL_LABELS}
        assert spec["policyTypes"] == ["Egress"], "only egress is restricted (ingress: metrics scraping)"
        assert "ingress" not in spec
        assert spec["egress"] == expected_egress(np)
        for rule in spec["egress"]:
            assert rule.get("to"), f"an egress rule without `to` allows every destination: {rule}"
            assert all(peer for peer in rule["to"]), f"an empty peer allows every destination: {rule}"
    if scenario == "defaults":
        (policy,) = policies
        assert policy["spec"]["egress"] == [
            {
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            }
        ]
    if scenario == "custom-dns":
        assert policies[0]["spec"]["egress"] == [
            {
                "to": [{"podSelector": {"matchLabels": {"k8s-app": "node-local-dns"}}}],
                "ports": [{"protocol": "UDP", "port": 53}],
            }
        ]
    if scenario == "deny-all-egress":
        assert all(p["spec"]["egress"] == [] for p in policies)
    if scenario == "egress":
        assert len(policies[0]["spec"]["egress"]) == 1 + 2 + 2 + 1


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_operator_network_policy_admits_only_the_operators_ports(scenario: str) -> None:
    """The operator pod's policy selects exactly the Deployment's pods and admits exactly the ports its container
    declares (health, metrics); its egress is restricted only on request, and then to the API server, DNS, the
    store and the extra rules."""
    values, docs = rendered(scenario)
    onp = values["operatorNetworkPolicy"]
    policies = policies_named(docs, "operator")
    if not onp["enabled"]:
        assert not policies
        return
    (policy,) = policies
    dep = one(docs, "Deployment")
    assert policy["metadata"]["namespace"] == dep["metadata"]["namespace"] == NAMESPACE
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": dep["spec"]["selector"]["matchLabels"]}
    assert spec["podSelector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert not spec["podSelector"]["matchLabels"].items() <= TRIAL_LABELS.items()
    declared = [{"protocol": p["protocol"], "port": p["containerPort"]} for p in operator_container(docs)["ports"]]
    (rule,) = spec["ingress"]
    assert sorted(rule["ports"], key=lambda p: p["port"]) == sorted(declared, key=lambda p: p["port"])
    assert {p["port"] for p in rule["ports"]} == {values["operator"]["healthPort"], values["metrics"]["port"]}
    if onp["ingressFrom"]:
        assert rule["from"] == onp["ingressFrom"]
    else:
        assert "from" not in rule  # any source, those ports only
    egress = onp["egress"]
    if not egress["enabled"]:
        assert spec["policyTypes"] == ["Ingress"] and "egress" not in spec
        return
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    np = values["networkPolicy"]
    dns = expected_egress({**np, "llmEndpoints": [], "s3Endpoints": [], "extraEgress": []})[:1] if egress["dns"] else []
    cidr_rules = expected_egress(
        {"dns": {"enabled": False}, "llmEndpoints": egress["apiServer"], "s3Endpoints": [], "extraEgress": []}
    )
    store_rules = expected_egress(
        {"dns": {"enabled": False}, "llmEndpoints": [], "s3Endpoints": egress["s3Endpoints"], "extraEgress": []}
    )
    assert spec["egress"] == cidr_rules + dns + store_rules + egress["extraEgress"]
    assert spec["egress"][0]["to"] == [{"ipBlock": {"cidr": egress["apiServer"][0]["cidr"]}}]


def expected_ingress(values: dict[str, Any]) -> list[dict[str, Any]]:
    scrapers = values["networkPolicy"]["ingress"]["scrapers"]
    peer = {k: scrapers[k] for k in ("namespaceSelector", "podSelector") if scrapers.get(k)}
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": values["runner"]["metricsPort"]}]}
    return [{**rule, "from": [peer]}] if peer else [rule]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_network_policy_denies_ingress_to_trial_pods_but_the_metrics_port(scenario: str) -> None:
    values, docs = rendered(scenario)
    policies = policies_named(docs, "trials-ingress")
    np = values["networkPolicy"]
    if not (np["enabled"] and np["ingress"]["enabled"]):
        assert not policies
        return
    assert sorted(p["metadata"]["namespace"] for p in policies) == sorted(trial_namespaces(values))
    for policy in policies:
        spec = policy["spec"]
        assert spec["podSelector"] == {"matchLabels": TRIAL_LABELS}
        assert spec["policyTypes"] == ["Ingress"] and "egress" not in spec
        assert spec["ingress"] == expected_ingress(values)
        for rule in spec["ingress"]:
            assert rule["ports"], f"an ingress rule without ports admits every port: {rule}"
            assert all(peer for peer in rule.get("from", [{"any": True}])), f"an empty peer admits anyone: {rule}"
    if scenario == "scrapers":
        assert policies[0]["spec"]["ingress"][0]["from"] == [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
            }
        ]


def bound_address(container: dict[str, Any]) -> str | None:
    """The address a container's server is told to listen on, from its command line: supergateway's (through
    mcpfleet-gateway), playwright-mcp's and the sites' --host, PostgreSQL's last listen_addresses; None if unsaid."""
    argv = [*container.get("command", []), *container.get("args", [])]
    found = None
    for i, arg in enumerate(argv):
        if arg == "--host" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("listen_addresses="):
            found = arg.split("=", 1)[1]
    return found


SERVICE_TASKS = {  # one bundled task per service with MCP servers in its pod
    "filesystem": "filesystem/standard/office_desktop/*",
    "postgres": "postgres/*/*/*",
    "playwright": "playwright/standard/cross_site/*",
}


@pytest.mark.parametrize("scenario", ["defaults", "custom-images", "scrapers"])
@pytest.mark.parametrize("service", SERVICE_TASKS)
def test_trial_pods_are_reachable_by_nobody_but_on_the_metrics_port(scenario: str, service: str) -> None:
    """From the rendered policy and a trial pod rendered by operator/manifests.py (with the settings the chart
    gives the operator): the ingress policy selects the pod, admits only the runner's metrics containerPort, and
    every other server of the pod (MCP server, sites, database) is told to listen on 127.0.0.1, with a startup probe
    that runs inside its container (a kubelet's httpGet or tcpSocket probe would go to the pod IP)."""
    from mcpfleet.operator.manifests import trial_pod
    from mcpfleet.operator.settings import OperatorSettings
    from mcpfleet.runner.plan.expand import plan
    from mcpfleet.runner.spec.load import parse_evalrun

    values, docs = rendered(scenario)
    (policy,) = policies_named(docs, "trials-ingress")
    settings = OperatorSettings.from_env(plain_env(operator_container(docs)))
    run = parse_evalrun(
        {
            "apiVersion": "mcpfleet.io/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "r", "namespace": NAMESPACE, "uid": "u-1"},
            "spec": {
                "models": [{"name": "m", "model": "scripted/oracle"}],
                "tasks": {"path": str(ROOT / "tasks"), "include": [SERVICE_TASKS[service]]},
                "output": {"uri": "s3://mcpfleet-results/runs"},
            },
        }
    )
    pod = trial_pod(run, plan(run, ROOT)[0], settings)
    assert pod["metadata"]["namespace"] == policy["metadata"]["namespace"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    runner, *others = pod["spec"]["containers"]
    assert runner["name"] == "runner" and not others
    metrics = {p["name"]: p["containerPort"] for p in runner["ports"]}
    assert list(metrics) == ["metrics"] and metrics["metrics"] == values["runner"]["metricsPort"]
    admitted = [p for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    assert admitted == [{"protocol": "TCP", "port": metrics["metrics"]}], "the metrics port, and nothing else"
    servers = [c for c in pod["spec"]["initContainers"] if c.get("ports")]
    assert servers, "the pod's MCP server (and the service's others) declare their ports"
    for c in servers:
        assert bound_address(c) == "127.0.0.1", f"{c['name']} listens beyond the pod's loopback: {c['args']}"
        probe = c["startupProbe"]
        assert set(probe) - {"periodSeconds", "failureThreshold"} == {"exec"}, f"{c['name']}: {probe}"
        assert metrics["metrics"] not in {p["containerPort"] for p in c["ports"]}
    assert runner["args"][:2] == ["--mcp-url", "http://127.0.0.1:$(MCP_PORT)/mcp"]  # the runner: over loopback
    if service == "postgres":
        assert [c["name"] for c in servers] == ["postgres", "mcp-postgres"]
    if service == "playwright":
        names = [c["name"] for c in servers]  # a cross-site task: two sites or more, then the MCP server
        assert names[-1] == "mcp-playwright" and len(names) >= 3 and all(n.startswith("site-") for n in names[:-1])


def test_operator_pod_is_not_a_trial_pod() -> None:
    _, docs = rendered("defaults")
    labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert not TRIAL_LABELS.items() <= labels.items(), "the trial egress policy would cut off the operator"


def test_selectors_match_the_pods_the_operator_creates(tmp_path: Path) -> None:
    """Trial pods built by operator/manifests.py from the settings the chart sets are what the NetworkPolicy and
    the PodMonitor select, with the images from values and the metrics port the PodMonitor scrapes."""
    from conftest import make_tiny_pack

    from mcpfleet.operator.manifests import trial_pod
    from mcpfleet.operator.settings import OperatorSettings
    from mcpfleet.runner.plan.expand import plan
    from mcpfleet.runner.spec.load import parse_evalrun
    from mcpfleet.runner.tasks.discovery import bundled_root

    pack = make_tiny_pack(tmp_path / "pack")
    run = parse_evalrun(
        {
            "apiVersion": "mcpfleet.io/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "r", "namespace": "evals-a", "uid": "u-1"},
            "spec": {
                "models": [{"name": "m", "model": "scripted/oracle"}],
                "tasks": {"path": str(pack)},
                "output": {"uri": "s3://mcpfleet-results/runs"},
            },
        }
    )
    for scenario in ("egress", "custom-images", "monitors", "digests"):
        values, docs = rendered(scenario)
        settings = OperatorSettings.from_env(plain_env(operator_container(docs)))
        pod = trial_pod(run, plan(run, bundled_root())[0], settings)
        labels = pod["metadata"]["labels"]
        for policy in policies_named(docs, "trials-egress"):
            assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
        runner = pod["spec"]["containers"][0]
        assert runner["image"] == image_ref(values["runner"]["image"])
        sidecar = next(c for c in pod["spec"]["initContainers"] if c["name"] == "mcp-filesystem")
        assert sidecar["image"] == image_ref(values["sidecarImages"]["filesystem"])
        if scenario == "digests":  # by content, and the scanner waivers for tags are gone from the pod too
            assert all("@sha256:" in c["image"] for c in pod["spec"]["initContainers"] + pod["spec"]["containers"])
            assert not {"CKV_K8S_43", "CKV_K8S_15"} & set(waivers(pod["metadata"]))
        for monitor in of_kind(docs, "PodMonitor"):
            assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
            names = {p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
            assert names.get("metrics") == values["runner"]["metricsPort"], (
                "the runner container must expose the port named `metrics` that the PodMonitor scrapes"
            )


def test_trial_pod_defaults_reach_the_pods_and_an_evalrun_overrides_them(tmp_path: Path) -> None:
    """The chart's trialPods, through the operator's settings, are every trial pod's placement unless its EvalRun
    sets the field; the allow-lists refuse a class outside them (a Valid=False condition naming the list)."""
    from conftest import make_tiny_pack

    from mcpfleet.operator.manifests import trial_pod
    from mcpfleet.operator.planning import check_run
    from mcpfleet.operator.settings import OperatorSettings
    from mcpfleet.runner.plan.expand import plan
    from mcpfleet.runner.spec.load import parse_evalrun

    pack = make_tiny_pack(tmp_path / "pack")
    values, docs = rendered("trial-pods")
    settings = OperatorSettings.from_env(plain_env(operator_container(docs)))
    defaults = values["trialPods"]

    def run(pod: dict[str, Any]) -> Any:
        return parse_evalrun(
            {
                "apiVersion": "mcpfleet.io/v1alpha1",
                "kind": "EvalRun",
                "metadata": {"name": "r", "namespace": "evals", "uid": "u-1"},
                "spec": {
                    "models": [{"name": "m", "model": "scripted/oracle"}],
                    "tasks": {"path": str(pack)},
                    "output": {"uri": "s3://mcpfleet-results/runs"},
                    "pod": pod,
                },
            }
        )

    plain = run({})
    pod = trial_pod(plain, plan(plain, pack)[0], settings)
    for key in ("tolerations", "affinity", "topologySpreadConstraints", "priorityClassName", "runtimeClassName"):
        assert pod["spec"][key] == defaults[key], key
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror-creds"}]
    assert (pod["spec"]["dnsPolicy"], pod["spec"]["dnsConfig"]) == (defaults["dnsPolicy"], defaults["dnsConfig"])
    assert defaults["labels"].items() <= pod["metadata"]["labels"].items()
    assert defaults["annotations"].items() <= pod["metadata"]["annotations"].items()
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    own = run(
        {
            "tolerations": [],
            "priorityClassName": "evals-urgent",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
            "dnsConfig": {"searches": ["team-a.svc.cluster.local"]},
        }
    )
    check_run(own, plan(own, pack), settings)
    pod = trial_pod(own, plan(own, pack)[0], settings)
    assert "tolerations" in pod["spec"] and pod["spec"]["tolerations"] == []
    assert pod["spec"]["priorityClassName"] == "evals-urgent" and pod["spec"]["runtimeClassName"] == "gvisor"
    assert pod["spec"]["dnsConfig"] == {"searches": ["team-a.svc.cluster.local"]}  # whole, not merged
    assert pod["spec"]["affinity"] == defaults["affinity"]
    labels = pod["metadata"]["labels"]
    assert (labels["kueue.x-k8s.io/queue-name"], labels["cost-center"]) == ("team-a", "ml")
    refused = run({"priorityClassName": "system-node-critical", "runtimeClassName": "runc"})
    with pytest.raises(ValueError, match="allowedPriorityClasses .evals-.*allowedRuntimeClasses .gvisor"):
        check_run(refused, plan(refused, pack), settings)


# ------------------------------------------------------------------------------------------------ monitoring


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_metrics_service_and_monitors(scenario: str) -> None:
    values, docs = rendered(scenario)
    dep = one(docs, "Deployment")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    services = of_kind(docs, "Service")
    if services:
        (svc,) = services
        assert svc["spec"]["selector"].items() <= pod_labels.items()
        assert svc["spec"]["ports"] == [
            {
                "name": "metrics",
                "port": values["metrics"]["service"]["port"],
                "targetPort": "metrics",
                "protocol": "TCP",
            }
        ]
        assert "metrics" in {p["name"] for p in operator_container(docs)["ports"]}
    for sm in of_kind(docs, "ServiceMonitor"):
        sm_values = values["serviceMonitor"]
        assert sm["metadata"]["namespace"] == (sm_values["namespace"] or NAMESPACE)
        assert sm_values["additionalLabels"].items() <= sm["metadata"]["labels"].items()
        assert sm["spec"]["selector"]["matchLabels"].items() <= services[0]["metadata"]["labels"].items()
        assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        assert sm["spec"]["endpoints"][0]["interval"] == sm_values["interval"]
        assert sm["spec"]["endpoints"][0]["honorLabels"] is True  # the runs' namespace label survives the scrape
    for pm in of_kind(docs, "PodMonitor"):
        pm_values = values["podMonitor"]
        assert pm["metadata"]["namespace"] == (pm_values["namespace"] or NAMESPACE)
        assert pm_values["additionalLabels"].items() <= pm["metadata"]["labels"].items()
        assert pm["spec"]["selector"] == {"matchLabels": TRIAL_LABELS}
        expected_ns = {"any": True} if values["clusterWide"] else {"matchNames": watched(values)}
        assert pm["spec"]["namespaceSelector"] == expected_ns
        assert pm["spec"]["podMetricsEndpoints"][0]["interval"] == pm_values["interval"]
        assert pm["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True  # the runner's namespace label stays
    if scenario in ("monitors", "monitors-cluster-wide"):
        assert of_kind(docs, "ServiceMonitor") and of_kind(docs, "PodMonitor")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_dashboard_configmap(scenario: str) -> None:
    values, docs = rendered(scenario)
    maps = of_kind(docs, "ConfigMap")
    dash = values["dashboard"]
    if not dash["enabled"]:
        assert not maps
        return
    assert DASHBOARDS, "no dashboards in charts/mcpfleet/dashboards/*.json"
    (cm,) = maps
    assert cm["metadata"]["namespace"] == (dash["namespace"] or NAMESPACE)
    assert cm["metadata"]["labels"][dash["label"]] == dash["labelValue"]
    assert dash["annotations"].items() <= cm["metadata"].get("annotations", {}).items()
    assert sorted(cm["data"]) == [p.name for p in DASHBOARDS]
    for path in DASHBOARDS:
        board = json.loads(cm["data"][path.name])
        assert board == json.loads(path.read_text())
        assert board.get("title") and board.get("uid") and isinstance(board.get("panels"), list), path.name
    assert sum(len(v.encode()) for v in cm["data"].values()) < 900_000, "ConfigMaps are limited to 1 MiB"


# ------------------------------------------------------------------------------------------------ NOTES, bad values


def test_notes_give_next_steps() -> None:
    notes = _render("defaults")[2]
    for needle in (
        "kubectl -n evals apply -f examples/evalrun.yaml",
        "kubectl -n evals get evalruns",
        "create secret generic llm-keys",
        "--from-literal=openai=",
        "create secret generic s3-credentials",
        "uri: s3://mcpfleet-results/runs",
    ):
        assert needle in notes, needle
    notes = _render("custom-images")[2]
    assert "create secret generic operator-s3" in notes


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"clusterwide": True}, "additional properties 'clusterwide' not allowed"),
        ({"watchNamespaces": "team-a"}, "want array"),
        ({"watchNamespaces": ["Team_A"]}, "watchNamespaces/0"),
        ({"operator": {"maxPods": 0}}, "maxPods"),
        ({"operator": {"createRate": 0}}, "createRate"),
        ({"image": {"repository": "x", "tag": "latest"}}, "/image/tag"),
        ({"networkPolicy": {"llmEndpoints": [{"ports": [443]}]}}, "cidr"),
        ({"serviceMonitor": {"enabled": True}, "metrics": {"service": {"enabled": False}}}, "metrics.service.enabled"),
        ({"networkPolicy": {"dns": {"namespaceSelector": None, "podSelector": None}}}, "namespaceSelector"),
        ({"trialPods": {"labels": {"mcpfleet.io/run": "x"}}}, "mcpfleet.io/run"),
        ({"trialPods": {"runtimeClassName": "gVisor"}}, "runtimeClassName"),
        ({"trialPods": {"hostAliases": []}}, "hostAliases"),
        ({"operator": {"allowedRuntimeClasses": ["a,b"]}}, "allowedRuntimeClasses"),
        ({"image": {"repository": "x", "digest": "sha256:abc"}}, "/image/digest"),
        ({"runner": {"image": {"repository": "x", "digest": "md5:" + "a" * 32}}}, "/runner/image/digest"),
        ({"operatorNetworkPolicy": {"egress": {"enabled": True}}}, "operatorNetworkPolicy.egress.apiServer"),
        ({"operatorNetworkPolicy": {"ingressFrom": [{}]}}, "ingressFrom"),
        ({"trialPods": {"annotations": {"checkov.io/skip3": "CKV_K8S_11=x"}}}, "checkov.io/skip3"),
    ],
)
def test_bad_values_are_rejected(chart: Any, bad: dict[str, Any], message: str) -> None:
    with pytest.raises(helm().HelmError) as exc:
        chart.render(bad, name=RELEASE, namespace=NAMESPACE)
    assert message in str(exc.value)
