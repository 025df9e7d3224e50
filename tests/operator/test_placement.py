"""spec.pod placement (tolerations, affinity, topologySpreadConstraints, priority and runtime classes, pull secrets,
labels, annotations, DNS): every field reaches the trial pod unchanged and the pod is still a valid Pod; the chart's
defaults (OperatorSettings.pod_defaults) apply unless the EvalRun sets a field; the allow-lists refuse a class; bad
values are refused naming the field; nothing in any service's pod needs what gVisor forbids. Pure: trial_pod, no
cluster."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from conftest import make_tiny_pack

from mcpfleet.operator.manifests import pod_labels, trial_pod
from mcpfleet.operator.planning import check_run, run_pods
from mcpfleet.operator.settings import OperatorSettings, SettingsError
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.evalrun import EvalRun
from mcpfleet.runner.spec.load import SpecError, parse_evalrun
from mcpfleet.runner.spec.placement import PodPlacement, merged, reserved

REPO = Path(__file__).resolve().parents[2]
VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
UID = "7d9f4f52-1d7e-4a57-9d5c-0c9d3c1e2b11"

# Every placement field, each with a value a real cluster takes (none newer than Kubernetes 1.30).
PLACEMENT: dict[str, Any] = {
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "evals", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    ],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["evals"]}]}]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}
            ],
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "trial"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        },
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 2,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"mcpfleet.io/run": "placed"}},
        }
    ],
    "priorityClassName": "evals-low",
    "runtimeClassName": "gvisor",
    "imagePullSecrets": [{"name": "regcred"}],
    "labels": {"kueue.x-k8s.io/queue-name": "evals", "team": "research"},
    "annotations": {"example.com/owner": "evals-team", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    "dnsPolicy": "None",
    "dnsConfig": {
        "nameservers": ["10.96.0.10"],
        "searches": ["evals.svc.cluster.local"],
        "options": [{"name": "ndots", "value": "2"}],
    },
}
POD_FIELDS = [k for k in PLACEMENT if k not in ("labels", "annotations")]


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_pack(tmp_path_factory.mktemp("placement") / "pack", tasks=2)


def doc(pack: Path, pod: dict[str, Any] | None = None, name: str = "placed") -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name, "namespace": "evals", "uid": UID},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}],
            "tasks": {"path": str(pack)},
            "output": {"uri": "s3://mcpfleet-results/runs"},
            **({"pod": pod} if pod is not None else {}),
        },
    }


def first_pod(run: EvalRun, settings: OperatorSettings | None = None, pack: Path | None = None) -> dict[str, Any]:
    return trial_pod(run, plan(run, pack or REPO)[0], settings or OperatorSettings())


def problems(body: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as err:
        parse_evalrun(body)
    return err.value.problems


@pytest.mark.parametrize("version", VERSIONS)
def test_every_field_lands_on_the_trial_pod_unchanged_and_the_pod_is_valid(pack: Path, version: str) -> None:
    run = parse_evalrun(doc(pack, copy.deepcopy(PLACEMENT)))
    trials = plan(run, pack)
    assert len(trials) == 2
    for retry in (0, 1):
        for trial in trials:
            pod = trial_pod(run, trial, OperatorSettings(), retry)
            for key in POD_FIELDS:
                assert pod["spec"][key] == PLACEMENT[key], key
            labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
            assert PLACEMENT["labels"].items() <= labels.items()
            assert PLACEMENT["annotations"].items() <= annotations.items()
            assert labels.items() >= pod_labels(run, trial, retry).items()  # the operator's own, all of them
            assert annotations["mcpfleet.io/trial-id"] == trial.trial_id
            kubernetes_validate.validate(pod, version, strict=True)
    # A copy, not the spec's own objects: one pod's edit never reaches another pod or the run.
    a, b = (trial_pod(run, t, OperatorSettings()) for t in trials)
    a["spec"]["tolerations"].append({"operator": "Exists"})
    assert b["spec"]["tolerations"] == PLACEMENT["tolerations"] == run.spec.pod.tolerations


def test_unset_fields_leave_the_pod_as_it_was(pack: Path) -> None:
    pod = first_pod(parse_evalrun(doc(pack)), pack=pack)
    assert not set(POD_FIELDS) & set(pod["spec"])
    assert all(reserved(k) for k in pod["metadata"]["labels"]), "every label the operator sets must be reserved"
    assert all(reserved(k) for k in pod["metadata"]["annotations"])


def test_chart_defaults_apply_and_an_evalrun_overrides_them(pack: Path) -> None:
    """Defaults come in as the chart writes them (MCPFLEET_POD_DEFAULTS, JSON); a field the EvalRun sets replaces
    the default whole, [] clears it, labels and annotations merge key by key with the EvalRun winning."""
    defaults = {
        "tolerations": [{"key": "pool", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}],
        "runtimeClassName": "gvisor",
        "priorityClassName": "evals-default",
        "imagePullSecrets": [{"name": "cluster-regcred"}],
        "labels": {"kueue.x-k8s.io/queue-name": "shared", "cost-center": "ml"},
        "annotations": {"example.com/by": "chart"},
        "dnsConfig": {"nameservers": ["10.0.0.53"]},
    }
    settings = OperatorSettings.from_env({"MCPFLEET_POD_DEFAULTS": json.dumps(defaults)})
    plain = first_pod(parse_evalrun(doc(pack)), settings, pack)["spec"]
    assert {k: plain[k] for k in defaults if k not in ("labels", "annotations")} == {
        k: v for k, v in defaults.items() if k not in ("labels", "annotations")
    }
    own = {
        "tolerations": [],  # cleared
        "priorityClassName": "evals-high",  # replaced
        "imagePullSecrets": [{"name": "team-regcred"}],  # replaced whole, not appended
        "labels": {"kueue.x-k8s.io/queue-name": "team-a"},  # one key replaced, the other kept
        "annotations": {"example.com/team": "a"},
        "dnsPolicy": "None",  # needs nameservers: the chart's dnsConfig gives them
    }
    pod = first_pod(parse_evalrun(doc(pack, own)), settings, pack)
    spec, meta = pod["spec"], pod["metadata"]
    assert spec["tolerations"] == []
    assert spec["priorityClassName"] == "evals-high" and spec["runtimeClassName"] == "gvisor"
    assert spec["imagePullSecrets"] == [{"name": "team-regcred"}]
    assert spec["dnsPolicy"] == "None" and spec["dnsConfig"] == {"nameservers": ["10.0.0.53"]}
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "team-a" and meta["labels"]["cost-center"] == "ml"
    assert {"example.com/by": "chart", "example.com/team": "a"}.items() <= meta["annotations"].items()
    kubernetes_validate.validate(pod, VERSIONS[-1], strict=True)
    # The merge itself, as a pure function of the two.
    both = merged(settings.pod_defaults, parse_evalrun(doc(pack, own)).spec.pod)
    assert both.tolerations == [] and both.runtime_class_name == "gvisor"
    assert merged(PodPlacement(), PodPlacement()).pod_fields() == {}


def test_dns_policy_none_needs_nameservers_from_either_side(pack: Path) -> None:
    run = parse_evalrun(doc(pack, {"dnsPolicy": "None"}))
    with pytest.raises(ValueError, match=r"spec\.pod\.dnsPolicy: None .* spec\.pod\.dnsConfig\.nameservers"):
        check_run(run, plan(run, pack), OperatorSettings())
    with_dns = OperatorSettings(pod_defaults=PodPlacement(dns_config={"nameservers": ["10.0.0.53"]}))
    check_run(run, plan(run, pack), with_dns)


def test_allow_lists_refuse_a_class_naming_the_list_and_pass_the_operators_own(pack: Path) -> None:
    settings = OperatorSettings.from_env(
        {
            "MCPFLEET_ALLOWED_PRIORITY_CLASSES": "evals-*",
            "MCPFLEET_ALLOWED_RUNTIME_CLASSES": "gvisor",
            "MCPFLEET_POD_DEFAULTS": json.dumps({"runtimeClassName": "kata", "priorityClassName": "batch"}),
        }
    )
    for ok in ({}, {"priorityClassName": "evals-low", "runtimeClassName": "gvisor"}, {"runtimeClassName": "kata"}):
        run = parse_evalrun(doc(pack, ok))
        check_run(run, plan(run, pack), settings)
    run = parse_evalrun(doc(pack, {"priorityClassName": "system-cluster-critical", "runtimeClassName": "runc"}))
    with pytest.raises(ValueError) as err:
        check_run(run, plan(run, pack), settings)
    message = str(err.value)
    assert "spec.pod.priorityClassName: 'system-cluster-critical' is not in the operator's allowedPriorityClasses" in (
        message
    )
    assert "allowedPriorityClasses (evals-*)" in message
    assert "spec.pod.runtimeClassName: 'runc' is not in the operator's allowedRuntimeClasses (gvisor)" in message
    assert settings.pod_refusals(run.spec.pod) == message.split("; ")
    with pytest.raises(ValueError):  # mcpfleet pods refuses as the operator does, before rendering anything
        run_pods(run, plan(run, pack), settings)


@pytest.mark.parametrize(
    ("pod", "named"),
    [
        ({"tolerations": [{"key": "a", "effect": "NoScheduel"}]}, "spec.pod.tolerations[0].effect: "),
        ({"tolerations": [{"key": "a"}, {"operatr": "Exists"}]}, "spec.pod.tolerations[1].operatr: unknown field"),
        ({"tolerations": [{"tolerationSeconds": "30"}]}, "spec.pod.tolerations[0].tolerationSeconds: must be an"),
        ({"tolerations": {"key": "a"}}, "spec.pod.tolerations: "),
        (
            {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}},
            "spec.pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: required",
        ),
        (
            {"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}]},
            "spec.pod.topologySpreadConstraints[0].maxSkew: must be >= 1",
        ),
        ({"topologySpreadConstraints": [{"maxSkew": 1}]}, "spec.pod.topologySpreadConstraints[0].topologyKey: "),
        ({"dnsConfig": {"nameserver": ["1.1.1.1"]}}, "spec.pod.dnsConfig.nameserver: unknown field"),
        ({"dnsPolicy": "ClusterFirstWithDNS"}, "spec.pod.dnsPolicy: must be one of"),
        ({"imagePullSecrets": ["regcred"]}, "spec.pod.imagePullSecrets[0]"),
        ({"runtimeClassName": "gVisor"}, "spec.pod.runtimeClassName: must be a DNS subdomain"),
        ({"priorityClassName": ""}, "spec.pod.priorityClassName: must be a DNS subdomain"),
        ({"labels": {"mcpfleet.io/run": "other"}}, "spec.pod.labels: 'mcpfleet.io/run' is the operator's own key"),
        ({"labels": {"app.kubernetes.io/managed-by": "me"}}, "spec.pod.labels: 'app.kubernetes.io/managed-by'"),
        ({"annotations": {"mcpfleet.io/trial-id": "x"}}, "spec.pod.annotations: 'mcpfleet.io/trial-id' is the"),
        (
            {"annotations": {"checkov.io/skip1": "CKV_K8S_8=mine"}},
            "spec.pod.annotations: 'checkov.io/skip1' is one of the operator's scanner waivers",
        ),
        ({"labels": {"team": "a b"}}, "spec.pod.labels: team: value 'a b' is not a label value"),
        ({"annotations": {"not a key": "x"}}, "spec.pod.annotations: key 'not a key': not an annotation key"),
        ({"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["api.openai.com"]}]}, "spec.pod: hostAliases is refused"),
        ({"hostNetwork": True}, "spec.pod: hostNetwork is refused"),
    ],
)
def test_bad_values_are_refused_naming_the_field(pack: Path, pod: dict[str, Any], named: str) -> None:
    found = problems(doc(pack, pod))
    assert len(found) == 1 and found[0].startswith(named), found


def test_a_bad_toleration_says_what_is_allowed(pack: Path) -> None:
    [problem] = problems(doc(pack, {"tolerations": [{"key": "a", "effect": "NoScheduel"}]}))
    assert problem == (
        'spec.pod.tolerations[0].effect: "NoScheduel" is not allowed; give one of "", NoSchedule, PreferNoSchedule, '
        "NoExecute (a Kubernetes Toleration)"
    )
    [problem] = problems(doc(pack, {"hostAliases": []}))
    assert "/etc/hosts" in problem and "dnsConfig" in problem  # why, and what to do instead


def test_the_chart_defaults_are_checked_alike() -> None:
    with pytest.raises(SettingsError, match=r"MCPFLEET_POD_DEFAULTS: tolerations\[0\]\.effect: "):
        OperatorSettings.from_env({"MCPFLEET_POD_DEFAULTS": json.dumps({"tolerations": [{"effect": "Never"}]})})
    with pytest.raises(SettingsError, match="MCPFLEET_POD_DEFAULTS: labels: 'mcpfleet.io/task' is the operator's"):
        OperatorSettings.from_env({"MCPFLEET_POD_DEFAULTS": json.dumps({"labels": {"mcpfleet.io/task": "x"}})})
    with pytest.raises(SettingsError, match="MCPFLEET_POD_DEFAULTS: annotations: 'checkov.io/skip6' is one of the"):
        OperatorSettings.from_env({"MCPFLEET_POD_DEFAULTS": json.dumps({"annotations": {"checkov.io/skip6": "x"}})})
    with pytest.raises(SettingsError, match="MCPFLEET_POD_DEFAULTS: not JSON"):
        OperatorSettings.from_env({"MCPFLEET_POD_DEFAULTS": "tolerations: []"})


def test_the_operators_labels_win_whatever_reaches_the_builder(pack: Path) -> None:
    """Validation refuses the operator's keys; should one get past it (a model built without validation), the
    operator's own value still wins on the pod, so its selectors and counts stay right."""
    run = parse_evalrun(doc(pack))
    sneaky = PodPlacement.model_construct(
        **{**PodPlacement().__dict__, "labels": {"mcpfleet.io/run": "other", "app.kubernetes.io/component": "x"}}
    )
    pod = first_pod(run, OperatorSettings(pod_defaults=sneaky), pack)
    assert pod["metadata"]["labels"]["mcpfleet.io/run"] == "placed"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "trial"
    # So do its scanner waivers: a waiver of a check the pod fails is never replaced by another.
    sneaky = PodPlacement.model_construct(**{**PodPlacement().__dict__, "annotations": {"checkov.io/skip3": "no"}})
    pod = first_pod(run, OperatorSettings(pod_defaults=sneaky), pack)
    assert pod["metadata"]["annotations"]["checkov.io/skip3"].startswith("CKV_K8S_11=")


# ------------------------------------------------------------------------------------------------ gVisor

SERVICE_TASKS = {  # one bundled task per service with an MCP server sidecar (toolcall runs none)
    "filesystem": "filesystem/standard/office_desktop/*",
    "postgres": "postgres/*/*/*",
    "playwright": "playwright/standard/cross_site/*",
}
SANDBOX_FREE_VOLUMES = {"emptyDir", "configMap", "secret", "projected", "downwardAPI", "persistentVolumeClaim"}


def gvisor_problems(pod: dict[str, Any]) -> list[str]:
    """What in a pod gVisor (runsc, GKE Sandbox) does not support or forbids: host namespaces, hostPath and other
    node-backed volumes, privileged containers or added capabilities, host ports, unmasked /proc, sysctls and
    raw devices."""
    spec, out = pod["spec"], []
    out += [f"spec.{key}" for key in ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace") if spec.get(key)]
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= SANDBOX_FREE_VOLUMES:
            out.append(f"volume {v['name']}: {sorted(kinds)}")
    if (spec.get("securityContext") or {}).get("sysctls"):
        out.append("spec.securityContext.sysctls")
    for c in [*(spec.get("initContainers") or []), *spec["containers"]]:
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"{c['name']}: privileged")
        if (sc.get("capabilities") or {}).get("add"):
            out.append(f"{c['name']}: capabilities.add")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"{c['name']}: procMount")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{c['name']}: allowPrivilegeEscalation")
        if c.get("volumeDevices"):
            out.append(f"{c['name']}: volumeDevices")
        out += [f"{c['name']}: hostPort" for p in c.get("ports") or [] if p.get("hostPort")]
    return out


def test_gvisor_problems_finds_what_gvisor_forbids() -> None:
    bad = {
        "spec": {
            "hostNetwork": True,
            "volumes": [{"name": "h", "hostPath": {"path": "/var/run"}}],
            "containers": [
                {
                    "name": "c",
                    "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}},
                    "ports": [{"containerPort": 80, "hostPort": 80}],
                }
            ],
        }
    }
    assert gvisor_problems(bad) == [
        "spec.hostNetwork",
        "volume h: ['hostPath']",
        "c: privileged",
        "c: capabilities.add",
        "c: allowPrivilegeEscalation",
        "c: hostPort",
    ]


@pytest.mark.parametrize("service", SERVICE_TASKS)
def test_a_sandboxed_trial_pod_needs_nothing_gvisor_forbids(service: str) -> None:
    """runtimeClassName: gvisor is passed on, and nothing else in the pod (its sidecars included: the database,
    the sites, Chromium) relies on what gVisor does not support."""
    tasks = {"path": str(REPO / "tasks"), "include": [SERVICE_TASKS[service]]}
    body = doc(REPO / "tasks", {"runtimeClassName": "gvisor"})
    body["spec"]["tasks"] = tasks
    run = parse_evalrun(body)
    pod = first_pod(run)
    assert pod["spec"]["runtimeClassName"] == "gvisor"
    assert len(pod["spec"]["initContainers"]) >= 2, "the state init container and the service's sidecars"
    assert gvisor_problems(pod) == []
    kubernetes_validate.validate(pod, VERSIONS[-1], strict=True)
