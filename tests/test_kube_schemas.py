"""runner/spec/kube_schemas.json: Kubernetes' own schemas of the types spec.pod passes through, as
scripts/vendor_kube_schemas.py writes them from kubernetes-validate's bundle; and they judge values as the real Pod
schema does (what a Pod with the value is valid for, the fragment is valid for; enums and bounds beyond it)."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate
import pytest

from mcpfleet.runner.spec.kubetypes import SCHEMA_FILE, kube_problems, openapi, vendored

REPO = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vendor_kube_schemas", REPO / "scripts" / "vendor_kube_schemas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


script = _script()


def test_the_vendored_file_is_what_the_script_writes() -> None:
    assert (REPO / "runner" / "spec" / SCHEMA_FILE).read_text() == script.render(), (
        "runner/spec/kube_schemas.json is stale; regenerate it with: "
        ".venv/bin/python scripts/vendor_kube_schemas.py > runner/spec/kube_schemas.json"
    )
    assert vendored()["kubernetesVersion"] == script.VERSION


def test_every_vendored_field_is_one_kubernetes_has() -> None:
    """No property invented: each is in the bundled schema of its type, for the vendored version."""
    bundled = script.bundled_definitions()
    for name, schema in vendored()["definitions"].items():
        assert set(schema.get("properties", {})) == set(bundled[name].get("properties", {})), name
        assert schema.get("required", []) == sorted(bundled[name].get("required", [])), name


POD_FIELD = {  # root type -> (PodSpec field, a list of them)
    "io.k8s.api.core.v1.Toleration": ("tolerations", True),
    "io.k8s.api.core.v1.Affinity": ("affinity", False),
    "io.k8s.api.core.v1.TopologySpreadConstraint": ("topologySpreadConstraints", True),
    "io.k8s.api.core.v1.PodDNSConfig": ("dnsConfig", False),
    "io.k8s.api.core.v1.LocalObjectReference": ("imagePullSecrets", True),
}
VALUES: list[tuple[str, Any]] = [
    ("io.k8s.api.core.v1.Toleration", {"key": "a", "operator": "Exists"}),
    ("io.k8s.api.core.v1.Toleration", {"key": "a", "value": 5}),
    ("io.k8s.api.core.v1.Toleration", {"tolerationSeconds": "5"}),
    ("io.k8s.api.core.v1.Toleration", {"keys": "a"}),
    ("io.k8s.api.core.v1.Affinity", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}),
    ("io.k8s.api.core.v1.Affinity", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}),
    (
        "io.k8s.api.core.v1.Affinity",
        {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "z"}]}},
    ),
    (
        "io.k8s.api.core.v1.TopologySpreadConstraint",
        {"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"},
    ),
    ("io.k8s.api.core.v1.TopologySpreadConstraint", {"maxSkew": 1, "topologyKey": "z"}),
    ("io.k8s.api.core.v1.PodDNSConfig", {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots"}]}),
    ("io.k8s.api.core.v1.PodDNSConfig", {"nameservers": "1.1.1.1"}),
    ("io.k8s.api.core.v1.LocalObjectReference", {"name": "regcred"}),
    ("io.k8s.api.core.v1.LocalObjectReference", {"secret": "regcred"}),
]


@pytest.mark.parametrize(("name", "value"), VALUES)
def test_the_fragments_agree_with_the_real_pod_schema(name: str, value: Any) -> None:
    field, many = POD_FIELD[name]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], field: [value] if many else value},
    }
    try:
        kubernetes_validate.validate(copy.deepcopy(pod), script.VERSION, strict=True)
        real = True
    except kubernetes_validate.ValidationError:
        real = False
    assert (kube_problems(name, [value] if many else value, many) == []) is real, (name, value)


def test_enums_and_bounds_refuse_what_the_api_server_refuses() -> None:
    """Kubernetes publishes these only in prose (kubernetes-validate accepts any string), so they are added."""
    assert kube_problems("io.k8s.api.core.v1.Toleration", {"effect": "NoScheduel"})
    assert not kube_problems("io.k8s.api.core.v1.Toleration", {"effect": ""})  # Kubernetes' own "every effect"
    assert kube_problems(
        "io.k8s.api.core.v1.TopologySpreadConstraint", {"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "Always"}
    )
    weight = {"weight": 101, "preference": {}}
    assert kube_problems(
        "io.k8s.api.core.v1.Affinity", {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weight]}}
    )
    enum = openapi("io.k8s.api.core.v1.Toleration")["properties"]["operator"]["enum"]
    assert enum == ["", "Equal", "Exists", "Lt", "Gt"]
