"""Write runner/spec/kube_schemas.json: the Kubernetes core/v1 types ``spec.pod`` passes to trial pods unchanged.

Run it with the test dependencies installed (kubernetes-validate bundles the real schemas):

    .venv/bin/python scripts/vendor_kube_schemas.py > runner/spec/kube_schemas.json

The schemas are Kubernetes' own, as kubernetes-validate bundles them for ``VERSION``, rewritten as the OpenAPI
v3.0 subset a CRD's structural schema takes (``nullable`` for ``[X, null]``, no descriptions, no
``x-kubernetes-*`` merge hints), with references kept as ``#/definitions/<name>`` (inlined where they are used:
runner/spec/kubetypes.py). Kubernetes publishes its enums and bounds only in prose; ``ENUMS`` and ``BOUNDS`` below
add the ones its API server enforces, so that a typo such as ``effect: NoScheduel`` is refused before any pod is
created. tests/test_kube_schemas.py regenerates the file and fails when the checked-in one differs.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from typing import Any

VERSION = "1.37.0"
ROOTS = (
    "io.k8s.api.core.v1.Toleration",
    "io.k8s.api.core.v1.Affinity",
    "io.k8s.api.core.v1.TopologySpreadConstraint",
    "io.k8s.api.core.v1.PodDNSConfig",
    "io.k8s.api.core.v1.LocalObjectReference",
)
_CORE, _META = "io.k8s.api.core.v1.", "io.k8s.apimachinery.pkg.apis.meta.v1."
# (definition, property) -> the values the API server accepts (k8s.io/kubernetes pkg/apis/core/validation). An
# empty effect or operator is Kubernetes' own default ("match every effect", "Equal"); Lt and Gt need the
# TaintTolerationComparisonOperators feature gate, which a cluster without it refuses at pod creation.
ENUMS: dict[tuple[str, str], list[str]] = {
    (_CORE + "Toleration", "effect"): ["", "NoSchedule", "PreferNoSchedule", "NoExecute"],
    (_CORE + "Toleration", "operator"): ["", "Equal", "Exists", "Lt", "Gt"],
    (_CORE + "TopologySpreadConstraint", "whenUnsatisfiable"): ["DoNotSchedule", "ScheduleAnyway"],
    (_CORE + "TopologySpreadConstraint", "nodeAffinityPolicy"): ["Honor", "Ignore"],
    (_CORE + "TopologySpreadConstraint", "nodeTaintsPolicy"): ["Honor", "Ignore"],
    (_CORE + "NodeSelectorRequirement", "operator"): ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
    (_META + "LabelSelectorRequirement", "operator"): ["In", "NotIn", "Exists", "DoesNotExist"],
}
BOUNDS: dict[tuple[str, str], dict[str, int]] = {
    (_CORE + "TopologySpreadConstraint", "maxSkew"): {"minimum": 1},
    (_CORE + "TopologySpreadConstraint", "minDomains"): {"minimum": 1},
    (_CORE + "WeightedPodAffinityTerm", "weight"): {"minimum": 1, "maximum": 100},
    (_CORE + "PreferredSchedulingTerm", "weight"): {"minimum": 1, "maximum": 100},
}
_KEEP = {"type", "properties", "items", "additionalProperties", "required", "format", "$ref"}


def bundled_definitions(version: str = VERSION) -> dict[str, Any]:
    """kubernetes-validate's ``$defs`` for one Kubernetes version (its strict variant: unknown fields refused)."""
    folder = resources.files("kubernetes_validate").joinpath(f"kubernetes-json-schema/v{version}-local-strict")
    return json.loads(folder.joinpath("_definitions.json").read_text())["$defs"]


def structural(node: dict[str, Any]) -> dict[str, Any]:
    """One bundled node as OpenAPI v3.0: ``type: [X, null]`` -> ``type: X`` + ``nullable``; only ``_KEEP`` keys."""
    unknown = set(node) - _KEEP - {"description", "$schema", "$id"} - {k for k in node if k.startswith("x-")}
    if unknown:
        raise ValueError(f"a schema keyword this script does not convert: {sorted(unknown)}")
    if "$ref" in node:  # a reference's siblings are descriptions only
        return {"$ref": "#/definitions/" + node["$ref"].rsplit("/", 1)[-1]}
    out: dict[str, Any] = {}
    kind = node.get("type")
    if isinstance(kind, list):
        out["type"] = next(t for t in kind if t != "null")
        if "null" in kind:
            out["nullable"] = True
    elif kind is not None:
        out["type"] = kind
    if "format" in node:
        out["format"] = node["format"]
    if "properties" in node:
        out["properties"] = {k: structural(v) for k, v in sorted(node["properties"].items())}
    if "required" in node:
        out["required"] = sorted(node["required"])
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out[key] = structural(node[key])
        elif key in node:
            out[key] = node[key]
    return out


def references(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[-1]} if "$ref" in node else set()
        return found.union(*(references(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(references(v) for v in node))
    return set()


def vendored(version: str = VERSION) -> dict[str, Any]:
    """The file's content: every root type and what it references, with the enums and bounds added."""
    bundled = bundled_definitions(version)
    names: set[str] = set()
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name not in names:
            names.add(name)
            todo += sorted(references(bundled[name]))
    definitions = {name: structural(bundled[name]) for name in sorted(names)}
    for (name, prop), values in ENUMS.items():
        definitions[name]["properties"][prop]["enum"] = values
    for (name, prop), bounds in BOUNDS.items():
        definitions[name]["properties"][prop].update(bounds)
    return {
        "source": f"kubernetes-validate's bundled Kubernetes {version} schemas (scripts/vendor_kube_schemas.py)",
        "kubernetesVersion": version,
        "roots": list(ROOTS),
        "definitions": definitions,
    }


def render(version: str = VERSION) -> str:
    return json.dumps(vendored(version), indent=1, sort_keys=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
