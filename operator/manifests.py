"""Trial pod manifests: a pure function of (EvalRun, trial, settings), so they are easy to validate.

One pod per trial: an init container materialises the initial state into an emptyDir, the MCP server
runs as a native sidecar (init container with ``restartPolicy: Always``) serving streamable HTTP on
localhost or, a declared stdio server, on two FIFOs (services/bridge.py), and the runner container runs
``mcpfleet trial`` against it, as its service's ``pod_mcp`` says. Secrets arrive only through
``secretKeyRef``; the pod has no service-account token and runs as non-root with no privilege escalation.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.llm.pace import NAMESPACE_ENV, STORE_URL_ENV, WINDOW_ENV, judge_needs_pace, needs_pace
from mcpfleet.runner.plan.expand import trial_deadline
from mcpfleet.runner.services import SERVICES, Service, service_of
from mcpfleet.runner.services.base import PodContext, stdio_server_sidecar
from mcpfleet.runner.spec.evalrun import EvalRun
from mcpfleet.runner.spec.placement import merged
from mcpfleet.runner.spec.trial import TrialSpec

GROUP = "mcpfleet.io"
LABEL_RUN = f"{GROUP}/run"
LABEL_RUN_UID = f"{GROUP}/run-uid"
LABEL_MODEL = f"{GROUP}/model"
LABEL_SERVICE = f"{GROUP}/service"
LABEL_TASK = f"{GROUP}/task"
LABEL_ATTEMPT = f"{GROUP}/attempt"
LABEL_RETRY = f"{GROUP}/retry"
# The pod's own name as a label: the operator deletes the pods of counted tries in bulk, by a label selector
# (``<label> in (names)``), and a field selector cannot select a set of names.
LABEL_POD = f"{GROUP}/pod"
ANN_TRIAL = f"{GROUP}/trial-id"
ANN_SPEC_HASH = f"{GROUP}/spec-hash"
# SIGTERM to SIGKILL for a trial pod: the runner stores its record in this window (the operator waits as long)
TERMINATION_GRACE_SECONDS = 30
STATE_MOUNT = "/state"
TASK_MOUNT = "/task"  # an s3:// pack's task files, fetched by the init container
# The runner's HOME and temp folder, where its trial folder (messages.json) and each verifier's fresh HOME and
# TMPDIR are made (runner/environment/verifier.py): a volume of the runner's alone, never a sidecar's (issue 48:
# the verifier's HOME was /tmp, the volume the MCP server and browser sidecars mount).
GRADING_MOUNT = "/grading"
RUNNER_UID = 10001
TERMINATION_LOG = "/dev/termination-log"
API_KEY_ENV = "MCPFLEET_MODEL_API_KEY"
JUDGE_KEY_ENV = "MCPFLEET_JUDGE_API_KEY"  # a toolcall judge's apiKeySecretRef


# Scanner waivers (checkov's ``checkov.io/skipN: CHECK=reason`` annotations) for what a trial pod does on purpose,
# each a fixed key, set only while its check would fail on the pod (``scanner_waivers``); docs/kubernetes.md lists
# every finding. A reason must not contain "=" (checkov splits on it).
DEFAULT_NAMESPACE = "default"  # where a run without one is applied (the operator's own fallback, lifecycle.py)
SCANNER_WAIVERS = {
    "CKV_K8S_8": (
        "checkov.io/skip1",
        "a batch pod (restartPolicy Never) - a liveness restart would rerun half a trial; activeDeadlineSeconds "
        "bounds it",
    ),
    "CKV_K8S_9": (
        "checkov.io/skip2",
        "a batch pod behind no Service - readiness gates no traffic; its sidecars have startup probes",
    ),
    "CKV_K8S_11": (
        "checkov.io/skip3",
        "no CPU limit unless spec.pod resources set one - CFS throttling would stretch the agent, tool and "
        "verifier timings a trial measures and times out on",
    ),
    "CKV_K8S_43": (
        "checkov.io/skip4",
        "images pinned by tag unless named by digest (the chart's digest values, spec.pod runnerImage and "
        "sidecarImages)",
    ),
    "CKV_K8S_15": (
        "checkov.io/skip5",
        "IfNotPresent for a pinned tag - an image named by digest passes",
    ),
    "CKV_K8S_35": (
        "checkov.io/skip6",
        "model, judge and store keys arrive by secretKeyRef in the runner (and an s3 pack's in the state "
        "init container) only, read from the environment by LiteLLM and boto3; no MCP server gets them",
    ),
}


def _pull_policy(container: dict[str, Any]) -> str:
    """Kubernetes' effective imagePullPolicy: as given, else Always for an untagged or :latest image."""
    if policy := container.get("imagePullPolicy"):
        return str(policy)
    image = str(container.get("image", "")).split("@", 1)[0]
    name = image.rsplit("/", 1)[-1]
    return "Always" if ":" not in name or name.endswith(":latest") else "IfNotPresent"


def scanner_waivers(spec: dict[str, Any]) -> dict[str, str]:
    """The waiver annotations that apply to a pod ``spec``: each check of SCANNER_WAIVERS that would fail on it."""
    containers = [*spec.get("initContainers", []), *spec.get("containers", [])]
    failing = {
        "CKV_K8S_8": any(not c.get("livenessProbe") for c in spec.get("containers", [])),
        "CKV_K8S_9": any(not c.get("readinessProbe") for c in spec.get("containers", [])),
        "CKV_K8S_11": any(not (c.get("resources") or {}).get("limits", {}).get("cpu") for c in containers),
        "CKV_K8S_43": any("@" not in c.get("image", "") for c in containers),
        "CKV_K8S_15": any("@" not in c.get("image", "") and _pull_policy(c) != "Always" for c in containers),
        "CKV_K8S_35": any("secretKeyRef" in (e.get("valueFrom") or {}) for c in containers for e in c.get("env") or []),
    }
    return {key: f"{check}={reason}" for check, (key, reason) in SCANNER_WAIVERS.items() if failing[check]}


def _label_value(value: str) -> str:
    """Kubernetes label values: <= 63 chars of [A-Za-z0-9_.-], alphanumeric at both ends."""
    v = re.sub(r"[^A-Za-z0-9_.-]", "-", value)[:63].strip("-_.")
    return v or "x"


def trial_service(trial: TrialSpec) -> Service | None:
    """The service a trial runs: its pack's declaration (with its server variant) before a bundled one; None for
    a service neither knows (refused by the plan's checks before any pod)."""
    try:
        return service_of(trial.service, trial.tasks_root, trial.server)
    except ValueError:
        return SERVICES.get(trial.service)


def pod_name(run: str, trial_id: str, retry: int = 0) -> str:
    """Deterministic per (run, model, task, attempt) and retry: creating it twice is a 409, not a duplicate."""
    model, attempt = trial_id.split(".")[0], trial_id.rsplit(".", 1)[-1]
    digest = hashlib.sha256(f"{run}/{trial_id}".encode()).hexdigest()[:10]
    head = f"{run}-{model}"[:36].rstrip("-")
    return f"{head}-{digest}-{attempt}" + (f"-r{retry}" if retry else "")


def pod_labels(run: EvalRun, trial: TrialSpec, retry: int) -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "mcpfleet",
        "app.kubernetes.io/component": "trial",
        LABEL_RUN: _label_value(run.name),
        LABEL_RUN_UID: _label_value(run.metadata.uid or "none"),
        LABEL_MODEL: _label_value(trial.model.name),
        LABEL_SERVICE: _label_value(trial.service),
        LABEL_TASK: _label_value(trial.task_id.rsplit("/", 1)[-1]),
        LABEL_ATTEMPT: str(trial.attempt),
        LABEL_RETRY: str(retry),
        LABEL_POD: _label_value(pod_name(run.name, trial.trial_id, retry)),
    }


def _container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _resources(res: Any) -> dict[str, Any]:
    out = {}
    if res.requests:
        out["requests"] = dict(res.requests)
    if res.limits:
        out["limits"] = dict(res.limits)
    return out


def runner_env(
    run: EvalRun, trial: TrialSpec, settings: OperatorSettings, retry: int = 0, image: str = ""
) -> list[dict[str, Any]]:
    out = run.spec.output
    env: list[dict[str, Any]] = [
        {"name": "MCPFLEET_TRIAL", "value": trial.model_dump_json()},
        {"name": "MCPFLEET_RUNNER_IMAGE", "value": image},  # named in each record (records.harness_id)
        {"name": "MCPFLEET_INFRA_ATTEMPT", "value": str(retry + 1)},
        {"name": "MCPFLEET_OUTPUT_URI", "value": out.uri},
        {"name": "MCPFLEET_RUN_UID", "value": run.metadata.uid or ""},
        {"name": "MCP_PORT", "value": str(settings.mcp_port)},
        {"name": "METRICS_PORT", "value": str(settings.metrics_port)},
        {"name": "TZ", "value": "UTC"},
        {"name": "HOME", "value": GRADING_MOUNT},
        {"name": "TMPDIR", "value": GRADING_MOUNT},
    ]
    if out.endpoint_url:
        env.append({"name": "MCPFLEET_OUTPUT_ENDPOINT_URL", "value": out.endpoint_url})
    if out.region:
        env.append({"name": "AWS_DEFAULT_REGION", "value": out.region})
    if out.credentials_secret_ref:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": out.credentials_secret_ref, "key": key}}})
    model = trial.model
    if model.api_key_secret_ref:
        env.append(
            {
                "name": API_KEY_ENV,
                "valueFrom": {
                    "secretKeyRef": {"name": model.api_key_secret_ref.name, "key": model.api_key_secret_ref.key}
                },
            }
        )
    judge = trial.toolcalls.judge if trial.toolcalls else trial.judge  # a shard's judge, or an MCP trial's
    if judge is not None and judge.api_key_secret_ref:
        ref = judge.api_key_secret_ref
        env.append({"name": JUDGE_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    if model.is_scripted and settings.scripted_url:
        env.append({"name": "MCPFLEET_SCRIPTED_URL", "value": settings.scripted_url})
    env.append({"name": NAMESPACE_ENV, "value": run.metadata.namespace or DEFAULT_NAMESPACE})  # budgets', metrics'
    # the shared pace and budget ledgers (runner/llm/pace.py), for the model's calls or the judge's
    if needs_pace(model, trial.budget) or judge_needs_pace(judge, trial.budget):
        if settings.pace_store_url_secret:
            url_ref = {"name": settings.pace_store_url_secret, "key": settings.pace_store_url_secret_key}
            env.append({"name": STORE_URL_ENV, "valueFrom": {"secretKeyRef": url_ref}})
        elif settings.pace_store_url:
            env.append({"name": STORE_URL_ENV, "value": settings.pace_store_url})
        if settings.pace_window_seconds is not None:
            env.append({"name": WINDOW_ENV, "value": f"{settings.pace_window_seconds:g}"})
    return env


def state_init_args(run: EvalRun, trial: TrialSpec) -> tuple[list[str], list[dict[str, Any]]]:
    """The state init container's arguments and extra environment.

    A bundled pack is read from the runner image; an s3:// pack is fetched (task folder and state only)
    with the credentials of ``spec.tasks.credentialsSecretRef``. Either way the task must have the digest
    the operator planned with, so an edited pack or a skewed image fails the try instead of measuring
    something else."""
    sel = run.spec.tasks
    args = ["--task", trial.task_id, "--dest", STATE_MOUNT]
    env: list[dict[str, Any]] = [{"name": "HOME", "value": "/tmp"}]
    if sel.in_s3:
        args += ["--tasks-root", sel.path, "--task-dest", TASK_MOUNT]
        if sel.states_path:
            args += ["--states", sel.states_path]
        if sel.endpoint_url:
            args += ["--endpoint-url", sel.endpoint_url]
        if sel.region:
            args += ["--region", sel.region]
        if sel.credentials_secret_ref:
            for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
                env.append(
                    {"name": key, "valueFrom": {"secretKeyRef": {"name": sel.credentials_secret_ref, "key": key}}}
                )
    else:
        args += ["--tasks-root", trial.tasks_root]
        if trial.states_path:
            args += ["--states", trial.states_path]
    if trial.task_digest:
        args += ["--digest", trial.task_digest]
    return args, env


def pod_deadline(trial: TrialSpec, settings: OperatorSettings) -> int:
    """A trial pod's ``activeDeadlineSeconds``: the local launcher's worker deadline (plan.trial_deadline) with the
    operator's ``podGraceSeconds``, so a try still making progress (its agent's clock given back the time lost to
    provider faults) is never killed, and only a wedged pod is."""
    return math.ceil(trial_deadline(trial, settings.pod_grace_seconds)[0])


def trial_pod(run: EvalRun, trial: TrialSpec, settings: OperatorSettings, retry: int = 0) -> dict[str, Any]:
    """The Pod for one trial (one try of it). Its placement (tolerations, affinity, labels, ...) is the run's
    spec.pod over the operator's defaults, passed on unchanged; the operator's own labels and annotations come
    last, so nothing given can replace them (validation refuses such keys before this)."""
    pod = run.spec.pod
    placement = merged(settings.pod_defaults, pod)
    if problems := placement.problems():
        raise ValueError("; ".join(problems))
    service = trial.service
    runner_image = pod.runner_image or settings.runner_image
    known = trial_service(trial)
    own_image = known.own_image() if known is not None else None  # a declared server names its image
    sidecar_image = own_image or pod.sidecar_images.get(service) or settings.sidecar_images.get(service)
    with_server = known is None or known.mcp_server  # a suite whose tools come with each case has no MCP server
    if not sidecar_image and with_server:
        where = known.image_hint() if known is not None else None
        raise ValueError(
            f"no MCP sidecar image for service '{service}'; set {where or f'spec.pod.sidecarImages.{service}'}"
        )
    deadline = pod_deadline(trial, settings)
    state_mount = {"name": "state", "mountPath": STATE_MOUNT}
    remote = run.spec.tasks.in_s3
    init_args, init_env = state_init_args(run, trial)
    init_mounts = [state_mount, {"name": "tmp", "mountPath": "/tmp"}]
    runner_mounts: list[dict[str, Any]] = [
        state_mount,
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "grading", "mountPath": GRADING_MOUNT},
    ]
    runner_extra_env: list[dict[str, Any]] = []
    runner_args = [
        "--state-dir",
        STATE_MOUNT,
        "--termination-log",
        TERMINATION_LOG,
        "--metrics-port",
        "$(METRICS_PORT)",
    ]
    volumes: list[dict[str, Any]] = [
        {"name": name, "emptyDir": {"sizeLimit": pod.volume_size_limit}}
        for name in ("state", "tmp", "task", "grading")
        if remote or name != "task"
    ]
    if remote:
        init_mounts.append({"name": "task", "mountPath": TASK_MOUNT})
        runner_mounts.append({"name": "task", "mountPath": TASK_MOUNT, "readOnly": True})
        runner_args += ["--tasks-root", TASK_MOUNT]
    sidecars: list[dict[str, Any]] = []
    if with_server:  # the service says what serves its MCP server in a pod (and whatever that server needs)
        context = PodContext(
            runner_image=runner_image,
            server_image=str(sidecar_image),
            mcp_port=settings.mcp_port,
            state_mount=STATE_MOUNT,
            resources=_resources(pod.sidecar_resources),
            security=_container_security(),
            images={**settings.sidecar_images, **pod.sidecar_images},
            volume_size_limit=pod.volume_size_limit,
            taken_ports={settings.metrics_port: "the runner's metrics port (the chart's runner.metricsPort)"},
        )
        if known is not None:
            sidecars = known.pod_sidecars(trial.service_params, context)
            volumes += known.pod_volumes(trial.service_params, context)
            extra_mounts, runner_extra_env = known.pod_runner(trial.service_params, context)
            runner_mounts += extra_mounts
            runner_args[:0] = known.pod_mcp(trial.service_params, context)
        else:  # a service this build does not know: its image serves ``mcp-server-<service>`` over stdio
            sidecars = [stdio_server_sidecar(service, context)]
            runner_args[:0] = Service().pod_mcp({}, context)
    meta: dict[str, Any] = {
        "name": pod_name(run.name, trial.trial_id, retry),
        # Always named: a pod is never applied to whichever namespace a kubectl context happens to have.
        "namespace": run.metadata.namespace or DEFAULT_NAMESPACE,
        "labels": {**placement.labels, **pod_labels(run, trial, retry)},
        "annotations": {**placement.annotations, ANN_TRIAL: trial.trial_id, ANN_SPEC_HASH: trial.spec_hash},
    }
    if run.metadata.uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "EvalRun",
                "name": run.name,
                "uid": run.metadata.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": deadline,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUNNER_UID,
            "runAsGroup": RUNNER_UID,
            "fsGroup": RUNNER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumes": volumes,
        "initContainers": [
            {
                "name": "state",
                "image": runner_image,
                "command": ["mcpfleet", "materialise"],
                "args": init_args,
                "env": init_env,
                "volumeMounts": init_mounts,
                "resources": _resources(pod.init_resources),
                "securityContext": _container_security(),
                "terminationMessagePolicy": "FallbackToLogsOnError",
            },
            *sidecars,
        ],
        "containers": [
            {
                "name": "runner",
                "image": runner_image,
                "command": ["mcpfleet", "trial"],
                "args": runner_args,
                "ports": [{"name": "metrics", "containerPort": settings.metrics_port, "protocol": "TCP"}],
                "env": [*runner_env(run, trial, settings, retry, runner_image), *runner_extra_env],
                "volumeMounts": runner_mounts,
                "resources": _resources(pod.resources),
                "securityContext": _container_security(),
                "terminationMessagePath": TERMINATION_LOG,
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }
        ],
    }
    if pod.service_account_name:
        spec["serviceAccountName"] = pod.service_account_name
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    spec.update(placement.pod_fields())
    meta["annotations"].update(scanner_waivers(spec))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
