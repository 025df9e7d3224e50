"""Operator-wide settings, from ``MCPFLEET_*`` environment variables (the Helm chart sets them)."""

from __future__ import annotations

import fnmatch
import json
import os
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from mcpfleet.runner.spec.evalrun import PodSettings
from mcpfleet.runner.spec.load import format_validation_error
from mcpfleet.runner.spec.placement import PodPlacement

ENV_PREFIX = "MCPFLEET_"


class SettingsError(ValueError):
    """An MCPFLEET_* variable the operator cannot take (a chart value it refuses), named with what is wrong."""


class OperatorSettings(BaseModel):
    runner_image: str = "ghcr.io/mcpfleet/runner:0.1.0"
    sidecar_images: dict[str, str] = Field(
        default_factory=lambda: {
            "filesystem": "ghcr.io/mcpfleet/mcp-filesystem:0.1.0",
            "playwright": "ghcr.io/mcpfleet/mcp-playwright:0.1.0",
            "postgres": "ghcr.io/mcpfleet/mcp-postgres:0.1.0",  # postgres-mcp (servers/Dockerfile.postgres)
            "postgres-db": "ghcr.io/mcpfleet/postgres-db:0.1.0",  # the database sidecar (Dockerfile.postgres-db)
        }
    )
    tasks_root: str = Field(
        default="/opt/mcpfleet/tasks",
        description="Where the task packs are bundled, in the operator's and runner's images.",
    )
    mcp_port: int = 8000
    metrics_port: int = Field(default=9100, description="Trial pods serve /metrics here (PodMonitor port 'metrics').")
    operator_metrics_port: int = Field(default=9090, description="The operator serves /metrics here.")
    max_pods: int = Field(default=200, ge=1, description="Trial pods in flight across all EvalRuns.")
    create_rate: float = Field(default=20.0, gt=0, description="Pod creations per second, per operator.")
    status_interval: float = Field(default=2.0, gt=0, description="Seconds between status writes of a run.")
    scripted_url: str | None = Field(default=None, description="Scripted model server, for demos and tests.")
    pace_store_url: str | None = Field(
        default=None, description="The Redis trial pods pace their LLM requests and keep budgets in (chart: pace)."
    )
    pace_store_url_secret: str | None = Field(
        default=None, description="A Secret in the EvalRun's namespace holding the pace store's URL (with password)."
    )
    pace_store_url_secret_key: str = "url"
    pace_window_seconds: float | None = Field(
        default=None, gt=0, description="The pace's rate window (tests and benchmarks; default a minute)."
    )
    pod_grace_seconds: int = Field(
        default=300,
        ge=0,
        description=(
            "Added to the agent and verifier timeouts, and the provider time the agent may be given back, for a "
            "trial pod's activeDeadlineSeconds (set-up and teardown)."
        ),
    )
    peering: bool = Field(
        default=True,
        description=(
            "kopf peering: of several operator replicas (or an old and a new pod in a rollout) only one acts, the "
            "others stay paused until it is gone. Needs kopf's peering CRDs and the peering object (the chart "
            "creates both); false: standalone, for exactly one operator."
        ),
    )
    peering_name: str = Field(default="mcpfleet", description="The KopfPeering (or ClusterKopfPeering) object.")
    peering_priority: int | None = Field(
        default=None,
        description=(
            "This replica's peering priority (the highest acts). Unset: by start time, so the replica running "
            "longest keeps acting and a newcomer waits; two replicas never tie (kopf pauses all of a tie)."
        ),
    )
    peering_lifetime: int = Field(
        default=15,
        ge=5,
        description=(
            "Seconds a keep-alive lasts (renewed every 5-10 s): a replica that died without leaving is replaced "
            "then. As a Kubernetes leader-election lease: kopf's own default, 60 s, halts a run for a minute after "
            "every operator crash (bench/faults.py, operator-kill)."
        ),
    )
    peering_settle_seconds: float = Field(
        default=2.0,
        ge=0,
        description=(
            "A replica that takes over a run in flight (or any run in its first seconds) waits this long first: "
            "the one it replaces finishes the API call it had under way, and replicas starting together see "
            "each other before either acts."
        ),
    )
    allowed_images: list[str] = Field(
        default_factory=list,
        description=(
            "Images (shell patterns, e.g. registry.example.com/evals/*) an EvalRun may name in spec.pod.runnerImage "
            "and sidecarImages, besides the operator's own; empty: any image."
        ),
    )
    allowed_service_accounts: list[str] = Field(
        default_factory=list,
        description="Service accounts an EvalRun may name in spec.pod.serviceAccountName; empty: any.",
    )
    allowed_priority_classes: list[str] = Field(
        default_factory=list,
        description=(
            "PriorityClasses (patterns) an EvalRun may name in spec.pod.priorityClassName, besides pod_defaults'; "
            "empty: any (a run could preempt whatever its priority outranks)."
        ),
    )
    allowed_runtime_classes: list[str] = Field(
        default_factory=list,
        description=(
            "RuntimeClasses (patterns) an EvalRun may name in spec.pod.runtimeClassName, besides pod_defaults'; "
            "empty: any. With pod_defaults' runtimeClassName (e.g. gvisor) listed alone, every trial pod runs in it."
        ),
    )
    pod_defaults: PodPlacement = Field(
        default_factory=PodPlacement,
        description=(
            "Placement every trial pod gets unless its EvalRun's spec.pod sets the field (the chart's trialPods, as "
            "JSON): tolerations, affinity, topologySpreadConstraints, priorityClassName, runtimeClassName, "
            "imagePullSecrets, labels and annotations (merged key by key), dnsPolicy, dnsConfig."
        ),
    )

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> OperatorSettings:
        env = dict(os.environ if env is None else env)
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            key = ENV_PREFIX + name.upper()
            if key in env:
                raw = env[key]
                if field.annotation == dict[str, str]:
                    values[name] = dict(kv.split("=", 1) for kv in raw.split(",") if kv)
                elif field.annotation == list[str]:
                    values[name] = [v.strip() for v in raw.split(",") if v.strip()]
                elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                    try:
                        values[name] = json.loads(raw) if raw.strip() else {}
                    except ValueError as exc:
                        raise SettingsError(f"{key}: not JSON ({exc}); the chart writes it with toJson") from None
                else:
                    values[name] = raw
        try:
            return cls.model_validate(values)
        except ValidationError as exc:  # named as the variable and the field inside it, as spec errors are
            problems = "; ".join(_as_variable(p) for p in format_validation_error(exc))
            raise SettingsError(f"invalid operator settings: {problems}") from None

    def refusals(self, runner_image: str | None, sidecar_images: dict[str, str], account: str | None) -> list[str]:
        """What an EvalRun names that this operator does not allow (whoever may create an EvalRun would
        otherwise run any image under any service account of the namespace)."""
        own = {self.runner_image, *self.sidecar_images.values()}
        out = []
        named = [("spec.pod.runnerImage", runner_image)] + [
            (f"spec.pod.sidecarImages.{svc}", img) for svc, img in sorted(sidecar_images.items())
        ]
        for where, image in named:
            if image and self.allowed_images and image not in own and not _matches(image, self.allowed_images):
                out.append(f"{where}: '{image}' is not allowed here (allowed: {', '.join(self.allowed_images)})")
        if account and self.allowed_service_accounts and not _matches(account, self.allowed_service_accounts):
            out.append(
                f"spec.pod.serviceAccountName: '{account}' is not allowed here "
                f"(allowed: {', '.join(self.allowed_service_accounts)})"
            )
        return out

    def pod_refusals(self, pod: PodSettings) -> list[str]:
        """What an EvalRun's spec.pod names that this operator does not allow: images and service account
        (``refusals``), and a priority or runtime class outside its allow-list (the chart's own default passes)."""
        out = self.refusals(pod.runner_image, pod.sidecar_images, pod.service_account_name)
        for field, setting, allowed in (
            ("priority_class_name", "allowedPriorityClasses", self.allowed_priority_classes),
            ("runtime_class_name", "allowedRuntimeClasses", self.allowed_runtime_classes),
        ):
            name, own = getattr(pod, field), getattr(self.pod_defaults, field)
            if name and allowed and name != own and not _matches(name, allowed):
                out.append(
                    f"spec.pod.{PodPlacement.model_fields[field].alias}: '{name}' is not in the operator's {setting} "
                    f"({', '.join(allowed)}): name one of those, or leave it unset for the operator's default"
                )
        return out


def _as_variable(problem: str) -> str:
    """'pod_defaults.tolerations[0].effect: ...' -> 'MCPFLEET_POD_DEFAULTS: tolerations[0].effect: ...'."""
    head, _, what = problem.partition(": ")
    name, _, inner = head.partition(".")
    return f"{ENV_PREFIX}{name.upper()}: {inner + ': ' if inner else ''}{what}"


def _matches(value: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)
