"""Where and how trial pods are scheduled: Kubernetes' own pod fields, passed to every trial pod unchanged.

``spec.pod`` takes them (``PodSettings`` extends ``PodPlacement``), and so does the operator's chart
(``trialPods``, as ``MCPFLEET_POD_DEFAULTS``): ``merged`` lays a run's over the chart's. The Kubernetes types are
checked against Kubernetes' own schemas (kubetypes.py), the names and labels here, so a bad one is refused
naming its field before any pod exists. Labels and annotations may not take the operator's own keys (it selects
and counts its pods by them): such a key is refused, never silently overwritten.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from mcpfleet.runner.spec.checks import DNS_SUBDOMAIN, check_labels, label_key_problem
from mcpfleet.runner.spec.kubetypes import KubeSchema
from mcpfleet.runner.spec.specmodel import SpecModel

CORE = "io.k8s.api.core.v1."
# The operator's own label and annotation keys (operator/manifests.py): it lists, selects and counts its pods by
# them, and the chart's NetworkPolicy and PodMonitor select trial pods by the two app.kubernetes.io ones.
RESERVED_PREFIX = "mcpfleet.io/"
RESERVED_KEYS = frozenset({"app.kubernetes.io/managed-by", "app.kubernetes.io/component"})
# The scanner waivers the operator annotates trial pods with (operator/manifests.py SCANNER_WAIVERS): a run's own
# annotation under one of these keys would be replaced by the operator's, so it is refused instead.
WAIVER_KEYS = frozenset(f"checkov.io/skip{n}" for n in range(1, 7))
MAX_ANNOTATION_BYTES = 256 * 1024  # the API server's limit for all of an object's annotations together
CLASS_NAME = rf"^{DNS_SUBDOMAIN}$"  # a PriorityClass or RuntimeClass name: a DNS subdomain (at most 253 characters)
MAPS = ("labels", "annotations")  # merged key by key; every other field is replaced whole
# Pod fields a trial pod must not have, and why (refused with that reason, not as an unknown field).
REFUSED = {
    "hostAliases": (
        "it rewrites the pod's /etc/hosts, so a run could send the model provider's or the results store's host name "
        "to another address than DNS gives; name the address in apiBase or output.endpointUrl, or use dnsConfig"
    ),
    "hostNetwork": "trial pods run untrusted agent actions and MCP servers; they never share the node's network",
    "hostPID": "trial pods never share the node's process namespace",
    "hostIPC": "trial pods never share the node's IPC namespace",
}


class DnsPolicy(StrEnum):
    ClusterFirst = "ClusterFirst"
    ClusterFirstWithHostNet = "ClusterFirstWithHostNet"
    Default = "Default"
    None_ = "None"


def reserved(key: str) -> bool:
    return key.startswith(RESERVED_PREFIX) or key in RESERVED_KEYS or key in WAIVER_KEYS


def _check_keys(values: dict[str, str]) -> None:
    taken = sorted(k for k in values if reserved(k))
    if taken and taken[0] in WAIVER_KEYS:
        raise ValueError(
            f"'{taken[0]}' is one of the operator's scanner waivers (checkov.io/skip1 to skip{len(WAIVER_KEYS)}, see "
            f"docs/kubernetes.md#scanner-findings); number your own from checkov.io/skip{len(WAIVER_KEYS) + 1}"
        )
    if taken:
        raise ValueError(
            f"'{taken[0][:80]}' is the operator's own key ({RESERVED_PREFIX}*, {', '.join(sorted(RESERVED_KEYS))}: "
            f"it marks, lists and selects its trial pods by them); use a key of your own, e.g. example.com/"
            f"{taken[0].rsplit('/', 1)[-1][:40]}"
        )


Tolerations = Annotated[list[dict[str, Any]], KubeSchema(CORE + "Toleration", many=True)]
Affinity = Annotated[dict[str, Any], KubeSchema(CORE + "Affinity")]
Spreads = Annotated[list[dict[str, Any]], KubeSchema(CORE + "TopologySpreadConstraint", many=True)]
DnsConfig = Annotated[dict[str, Any], KubeSchema(CORE + "PodDNSConfig")]
PullSecrets = Annotated[list[dict[str, Any]], KubeSchema(CORE + "LocalObjectReference", many=True)]


class PodPlacement(SpecModel):
    """Kubernetes pod fields given to every trial pod as they are (Kubernetes' own schemas). Unset: the operator's
    default (the chart's trialPods); set, the EvalRun's value replaces it (labels and annotations: key by key)."""

    tolerations: Tolerations | None = Field(
        default=None, description="Kubernetes tolerations of every trial pod (core/v1 Toleration); [] for none."
    )
    affinity: Affinity | None = Field(
        default=None, description="Kubernetes affinity of every trial pod (node, pod and pod anti-affinity)."
    )
    topology_spread_constraints: Spreads | None = Field(
        default=None, description="Kubernetes topologySpreadConstraints of every trial pod; [] for none."
    )
    priority_class_name: str | None = Field(
        default=None,
        pattern=CLASS_NAME,
        max_length=253,
        description="PriorityClass of every trial pod (the operator's allowedPriorityClasses may restrict it).",
    )
    runtime_class_name: str | None = Field(
        default=None,
        pattern=CLASS_NAME,
        max_length=253,
        description=(
            "RuntimeClass of every trial pod, e.g. gvisor (the operator's allowedRuntimeClasses may restrict it); "
            "trial pods use nothing a sandboxed runtime forbids (docs/kubernetes.md)."
        ),
    )
    image_pull_secrets: PullSecrets | None = Field(
        default=None, description="Secrets ({name}) in the EvalRun's namespace to pull the trial pods' images with."
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Labels of every trial pod besides the operator's own (mcpfleet.io/*, app.kubernetes.io/managed-by and "
            "component are refused), e.g. kueue.x-k8s.io/queue-name."
        ),
    )
    annotations: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Annotations of every trial pod besides the operator's own (mcpfleet.io/*, and checkov.io/skip1 to skip6: "
            "its scanner waivers)."
        ),
    )
    dns_policy: DnsPolicy | None = Field(
        default=None, description="Kubernetes dnsPolicy of every trial pod; None needs dnsConfig.nameservers."
    )
    dns_config: DnsConfig | None = Field(default=None, description="Kubernetes dnsConfig of every trial pod.")

    @model_validator(mode="before")
    @classmethod
    def _refused(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, why in REFUSED.items():
                if key in data:
                    raise ValueError(f"{key} is refused: {why}")
        return data

    @field_validator("labels")
    @classmethod
    def _pod_labels(cls, v: dict[str, str]) -> dict[str, str]:
        _check_keys(v)
        return check_labels(v)

    @field_validator("annotations")
    @classmethod
    def _pod_annotations(cls, v: dict[str, str]) -> dict[str, str]:
        _check_keys(v)
        for key in v:
            if problem := label_key_problem(key):  # annotation keys are qualified names, as label keys are
                raise ValueError(f"key '{key[:80]}': {problem.replace('not a label key', 'not an annotation key')}")
        size = sum(len(k.encode()) + len(value.encode()) for k, value in v.items())
        if size > MAX_ANNOTATION_BYTES:
            raise ValueError(f"{size:,} bytes in all; the API server takes at most {MAX_ANNOTATION_BYTES:,}")
        return v

    @field_validator("topology_spread_constraints")
    @classmethod
    def _distinct_spreads(cls, v: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        seen: set[tuple[Any, Any]] = set()
        for i, c in enumerate(v or []):
            pair = (c.get("topologyKey"), c.get("whenUnsatisfiable"))
            if pair in seen:
                raise ValueError(
                    f"[{i}]: a second constraint with topologyKey {json.dumps(pair[0])} and whenUnsatisfiable "
                    f"{pair[1]}; the API server refuses duplicates: merge them"
                )
            seen.add(pair)
        return v

    def problems(self) -> list[str]:
        """What the API server would refuse in these fields together (checked once a run's are merged over the
        operator's defaults: either may give the dnsConfig a dnsPolicy of None needs)."""
        if self.dns_policy == DnsPolicy.None_ and not (self.dns_config or {}).get("nameservers"):
            return [
                "spec.pod.dnsPolicy: None gives the pod no DNS but dnsConfig's: set spec.pod.dnsConfig.nameservers "
                "(at least one), or another dnsPolicy"
            ]
        return []

    def pod_fields(self) -> dict[str, Any]:
        """The PodSpec fields these set (camelCase, as given), for the trial pod's spec."""
        out = {}
        for name, field in PodPlacement.model_fields.items():
            value = getattr(self, name)
            if name not in MAPS and value is not None:
                out[field.alias or name] = json.loads(json.dumps(value))  # a copy: pods never share a spec's lists
        return out


def merged(defaults: PodPlacement, own: PodPlacement) -> PodPlacement:
    """``own`` (an EvalRun's spec.pod) over the operator's ``defaults``: labels and annotations key by key, the
    run's value winning; any other field the run sets replaces the default whole (``[]`` or ``{}`` clears it)."""
    values: dict[str, Any] = {}
    for name in PodPlacement.model_fields:
        mine, theirs = getattr(own, name), getattr(defaults, name)
        values[name] = {**theirs, **mine} if name in MAPS else (theirs if mine is None else mine)
    return PodPlacement.model_construct(**values)  # both were validated; their union needs only problems()
