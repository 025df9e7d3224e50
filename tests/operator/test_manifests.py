"""Trial pod manifests: valid Pods for the Kubernetes versions we support, locked down, secrets by reference only,
deterministic and distinct names. Pure: operator.manifests.trial_pod on parsed EvalRuns, no cluster."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from conftest import make_tiny_pack

from mcpfleet.operator.manifests import (
    LABEL_RETRY,
    SCANNER_WAIVERS,
    pod_deadline,
    pod_name,
    scanner_waivers,
    trial_pod,
)
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.evalrun import INT_MAX, EvalRun
from mcpfleet.runner.spec.load import SpecError, parse_evalrun
from mcpfleet.runner.spec.placement import WAIVER_KEYS
from mcpfleet.runner.spec.trial import TrialSpec
from mcpfleet.runner.tasks.discovery import bundled_root

VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
SCRIPTED_URL = "http://scripted.mcpfleet.svc:8080/v1"
UID = "0b6e2f0c-9a51-4d7e-8c55-3f1c2a9e7d10"
# Values that only ever live in Secrets: if one shows up in a manifest, a secret leaked into the pod spec.
SECRET_VALUES = ["sk-live-DO-NOT-LEAK", "AKIA-DO-NOT-LEAK", "aws-secret-DO-NOT-LEAK"]
DIGEST = "@sha256:" + "a" * 64


def cpu_limited(cpu: str) -> dict[str, Any]:
    return {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": cpu, "memory": "1Gi"}}


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_pack(tmp_path_factory.mktemp("manifests") / "pack", tasks=2)


def evalrun(name: str, pack: Path, **spec: Any) -> EvalRun:
    body: dict[str, Any] = {
        "models": [{"name": "oracle", "model": "scripted/oracle"}],
        "tasks": {"path": str(pack)},
        "attempts": 2,
        "output": {"uri": "s3://mcpfleet-results/runs"},
    }
    body.update(spec)
    return parse_evalrun(
        {
            "apiVersion": "mcpfleet.io/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": name, "namespace": "evals", "uid": UID},
            "spec": body,
        }
    )


def variants(pack: Path) -> dict[str, tuple[EvalRun, OperatorSettings]]:
    plain = OperatorSettings()
    return {
        "defaults": (evalrun("defaults", pack), plain),
        "custom-images-resources": (
            evalrun(
                "custom",
                pack,
                limits={"timeoutSeconds": 900, "verifierTimeoutSeconds": 120},
                pod={
                    "runnerImage": "registry.example.com/team/runner@sha256:" + "a" * 64,
                    "sidecarImages": {"filesystem": "registry.example.com/team/mcp-fs:2.0"},
                    "resources": {
                        "requests": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "1Gi"},
                        "limits": {"cpu": "4", "memory": "8Gi"},
                    },
                    "sidecarResources": {"requests": {"cpu": "50m"}, "limits": {"memory": "512Mi"}},
                },
            ),
            plain,
        ),
        # Every image by digest and every container CPU-limited: no scanner waiver but the batch pod's probes.
        "pinned": (
            evalrun(
                "pinned",
                pack,
                pod={
                    "runnerImage": "registry.example.com/team/runner" + DIGEST,
                    "sidecarImages": {"filesystem": "registry.example.com/team/mcp-fs:2.0" + DIGEST},
                    "resources": cpu_limited("2"),
                    "sidecarResources": cpu_limited("1"),
                    "initResources": cpu_limited("500m"),
                },
            ),
            plain,
        ),
        "node-selector-service-account": (
            evalrun(
                "placed",
                pack,
                pod={
                    "nodeSelector": {"kubernetes.io/arch": "amd64", "pool": "evals"},
                    "serviceAccountName": "mcpfleet-trials",
                },
            ),
            plain,
        ),
        "s3-credentials": (
            evalrun(
                "s3creds",
                pack,
                output={
                    "uri": "s3://mcpfleet-results/runs",
                    "endpointUrl": "https://minio.local:9000",
                    "region": "eu-west-1",
                    "credentialsSecretRef": "s3-credentials",
                },
            ),
            plain,
        ),
        "api-key-secret": (
            evalrun(
                "keyed",
                pack,
                models=[
                    {
                        "name": "gpt-5",
                        "model": "openai/gpt-5",
                        "apiKeySecretRef": {"name": "llm-keys", "key": "openai"},
                    },
                    {
                        "name": "claude",
                        "model": "anthropic/claude-sonnet-4",
                        "apiKeySecretRef": {"name": "llm-keys", "key": "anthropic"},
                    },
                ],
            ),
            plain,
        ),
        "scripted-url": (
            evalrun("scripted", pack),
            OperatorSettings(scripted_url=SCRIPTED_URL, mcp_port=9123, pod_grace_seconds=60),
        ),
        "long-names": (
            evalrun(
                "a-very-long-evaluation-run-name-that-goes-on-and-on-for-sixty3"[:63],
                pack,
                models=[
                    {"name": "model-with-a-rather-long-name-of-forty-c"[:40], "model": "scripted/noop"},
                    {"name": "model-with-a-rather-long-name-of-forty-d"[:40], "model": "scripted/oracle"},
                ],
            ),
            plain,
        ),
    }


def all_pods(pack: Path) -> list[tuple[str, EvalRun, OperatorSettings, TrialSpec, int, dict[str, Any]]]:
    out = []
    for variant, (run, settings) in variants(pack).items():
        for trial in plan(run, bundled_root()):
            for retry in (0, 1, 2):
                out.append((variant, run, settings, trial, retry, trial_pod(run, trial, settings, retry)))
    return out


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod["spec"].get("initContainers") or []) + list(pod["spec"]["containers"])


@pytest.mark.parametrize("version", VERSIONS)
def test_every_variant_is_a_valid_pod(pack: Path, version: str) -> None:
    seen = set()
    for variant, _, _, _, _, pod in all_pods(pack):
        try:
            kubernetes_validate.validate(pod, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(
                f"{variant}: {pod['metadata']['name']} is not a valid Pod for {version}: "
                f"{exc.message} at {list(exc.path)}"
            ) from None
        seen.add(variant)
    assert len(seen) == 8


def test_pods_are_locked_down(pack: Path) -> None:
    for variant, run, settings, trial, retry, pod in all_pods(pack):
        spec, where = pod["spec"], f"{variant}/{pod['metadata']['name']}"
        assert spec["restartPolicy"] == "Never", where
        limits, provider = run.spec.limits, run.spec.provider
        wait = max(provider.retry_after_max_seconds, provider.backoff_max_seconds)
        given_back = provider.trial_retry_budget * (limits.llm_call_timeout + wait)
        assert spec["activeDeadlineSeconds"] == (
            limits.timeout_seconds + limits.verifier_timeout_seconds + settings.pod_grace_seconds + given_back
        ), where
        assert spec["automountServiceAccountToken"] is False, where
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        assert spec["securityContext"]["runAsUser"] != 0, where
        for c in containers(pod):
            sc = c.get("securityContext") or {}
            assert sc.get("allowPrivilegeEscalation") is False, f"{where}: {c['name']}"
            assert sc.get("runAsNonRoot", spec["securityContext"]["runAsNonRoot"]) is True, f"{where}: {c['name']}"
            assert sc.get("privileged") in (None, False), f"{where}: {c['name']}"
            assert "ALL" in ((sc.get("capabilities") or {}).get("drop") or []), f"{where}: {c['name']}"
        # The MCP server is a native sidecar: an init container that keeps running, gated on a startup probe,
        # after the state is materialised and before the runner starts.
        inits = spec["initContainers"]
        sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
        assert len(sidecars) == 1 and sidecars[0]["name"] == f"mcp-{trial.service}", where
        assert sidecars[0]["startupProbe"]["exec"]["command"] == ["mcpfleet-probe", "MCP_PORT", "/healthz"], where
        assert inits.index(sidecars[0]) > 0 and inits[0].get("restartPolicy") is None, where
        assert [c["name"] for c in spec["containers"]] == ["runner"], where
        assert pod["metadata"]["annotations"]["mcpfleet.io/trial-id"] == trial.trial_id, where
        assert pod["metadata"]["labels"][LABEL_RETRY] == str(retry), where
        owner = pod["metadata"]["ownerReferences"]
        assert owner == [
            {
                "apiVersion": "mcpfleet.io/v1alpha1",
                "kind": "EvalRun",
                "name": run.name,
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ], where


def test_a_pods_deadline_is_the_local_launchers_and_leaves_room_for_provider_time(pack: Path) -> None:
    """A pod's activeDeadlineSeconds once held only the timeouts and a grace, while the agent's clock gives back
    the time lost to provider faults: a trial that waited out a long rate-limit spell was killed near its end
    and paid for again, where the local launcher let it finish. One sum now serves both (plan.trial_deadline),
    and a lost node's pod is waited for that long too."""
    from mcpfleet.runner.launch.launcher import TRIAL_GRACE_SECONDS, worker_deadline

    limits = {"timeoutSeconds": 600, "verifierTimeoutSeconds": 60, "llmTimeoutSeconds": 100}
    provider = {"trialRetryBudget": 4, "retryAfterMaxSeconds": 20, "backoffMaxSeconds": 45.1}
    run = evalrun("patient", pack, limits=limits, provider=provider)
    trial = plan(run, pack)[0]
    settings = OperatorSettings(pod_grace_seconds=TRIAL_GRACE_SECONDS)
    pod = trial_pod(run, trial, settings)
    # timeouts + grace + trialRetryBudget x (the LLM call + the longer wait) = 1540.4 s, rounded up: an integer
    assert pod["spec"]["activeDeadlineSeconds"] == math.ceil(600 + 60 + 300 + 4 * (100 + 45.1)) == 1541
    assert pod["spec"]["activeDeadlineSeconds"] == math.ceil(worker_deadline(trial)[0])
    assert pod_deadline(trial, OperatorSettings(pod_grace_seconds=0)) == 1241
    # The largest limits still give a deadline the API server keeps exactly.
    huge = {"timeoutSeconds": INT_MAX, "verifierTimeoutSeconds": INT_MAX, "llmTimeoutSeconds": INT_MAX - 1}
    run = evalrun("huge", pack, limits=huge, provider={"trialRetryBudget": 1000})
    assert pod_deadline(plan(run, pack)[0], settings) == INT_MAX


def test_settings_and_spec_reach_the_pod(pack: Path) -> None:
    by_variant = {v: (run, s, t, r, pod) for v, run, s, t, r, pod in all_pods(pack) if r == 0}
    _, _, _, _, pod = by_variant["custom-images-resources"]
    runner = pod["spec"]["containers"][0]
    assert runner["image"].startswith("registry.example.com/team/runner@sha256:")
    assert pod["spec"]["initContainers"][0]["image"] == runner["image"]  # the state init container
    # the runner names its image in every record it writes (records.harness_id)
    assert {e["name"]: e.get("value") for e in runner["env"]}["MCPFLEET_RUNNER_IMAGE"] == runner["image"]
    assert pod["spec"]["initContainers"][1]["image"] == "registry.example.com/team/mcp-fs:2.0"
    assert runner["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "1Gi"},
        "limits": {"cpu": "4", "memory": "8Gi"},
    }
    # timeouts + podGraceSeconds + trialRetryBudget x (the LLM call's half of timeoutSeconds + a 60 s wait)
    assert pod["spec"]["activeDeadlineSeconds"] == 900 + 120 + 300 + 30 * (450 + 60)
    _, _, _, _, pod = by_variant["node-selector-service-account"]
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64", "pool": "evals"}
    assert pod["spec"]["serviceAccountName"] == "mcpfleet-trials"
    assert pod["spec"]["automountServiceAccountToken"] is False  # a service account, but no token in the pod
    _, _, _, _, pod = by_variant["defaults"]
    assert "serviceAccountName" not in pod["spec"] and "nodeSelector" not in pod["spec"]
    assert pod["spec"]["containers"][0]["image"] == OperatorSettings().runner_image
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["MCPFLEET_RUNNER_IMAGE"] == OperatorSettings().runner_image
    _, _, _, _, pod = by_variant["scripted-url"]
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["MCPFLEET_SCRIPTED_URL"]["value"] == SCRIPTED_URL and env["MCP_PORT"]["value"] == "9123"
    assert pod["spec"]["initContainers"][1]["ports"][0]["containerPort"] == 9123
    assert pod["spec"]["activeDeadlineSeconds"] == 3600 + 300 + 60 + 30 * (1800 + 60)
    _, _, _, _, pod = by_variant["s3-credentials"]
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["MCPFLEET_OUTPUT_ENDPOINT_URL"]["value"] == "https://minio.local:9000"
    assert env["AWS_DEFAULT_REGION"]["value"] == "eu-west-1"
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[key] == {"name": key, "valueFrom": {"secretKeyRef": {"name": "s3-credentials", "key": key}}}
    for variant, (_run, _, trial, _, pod) in by_variant.items():  # the runner rebuilds its trial from the pod alone
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert TrialSpec.model_validate_json(env["MCPFLEET_TRIAL"]["value"]) == trial, variant
        assert env["MCPFLEET_RUN_UID"]["value"] == UID and env["MCPFLEET_INFRA_ATTEMPT"]["value"] == "1", variant


def test_secrets_only_by_reference(pack: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Secret values in the operator's own environment must never be copied into a pod.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", SECRET_VALUES[1])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_VALUES[2])
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_VALUES[0])
    refs = 0
    for variant, _run, _, trial, _, pod in all_pods(pack):
        text = json.dumps(pod)
        for value in SECRET_VALUES:
            assert value not in text, variant
        for c in containers(pod):
            for e in c.get("env") or []:
                assert set(e) in ({"name", "value"}, {"name", "valueFrom"}), (variant, e)
                if "valueFrom" in e:
                    assert set(e["valueFrom"]) == {"secretKeyRef"}, (variant, e)
                    refs += 1
                # no literal value of a secret-looking variable
                if re.search(r"KEY|SECRET|TOKEN|PASSWORD", e["name"]) and e["name"] != "MCPFLEET_RUN_UID":
                    assert "valueFrom" in e, (variant, e)
        if trial.model.api_key_secret_ref:
            env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
            ref = env["MCPFLEET_MODEL_API_KEY"]["valueFrom"]["secretKeyRef"]
            assert ref == {"name": "llm-keys", "key": trial.model.api_key_secret_ref.key}, variant
    assert refs > 0


def test_pod_names_deterministic_short_and_distinct(pack: Path) -> None:
    names: dict[str, tuple[str, str, int]] = {}
    for variant, run, settings, trial, retry, pod in all_pods(pack):
        name = pod["metadata"]["name"]
        assert len(name) <= 63 and DNS_LABEL.match(name), name
        assert name == pod_name(run.name, trial.trial_id, retry)
        assert trial_pod(run, trial, settings, retry)["metadata"]["name"] == name  # deterministic
        key = (run.name, trial.trial_id, retry)
        assert names.setdefault(name, key) == key, f"{name} names both {names[name]} and {key}"
        for k, v in pod["metadata"]["labels"].items():
            assert len(v) <= 63 and LABEL_VALUE.match(v), (variant, k, v)
    # every (model, task, attempt, retry) of every run got its own pod
    expected = sum(len(plan(run, bundled_root())) * 3 for run, _ in variants(pack).values())
    assert len(names) == expected
    # long names: two models sharing a 36-character prefix still get distinct pods
    long_run, _ = variants(pack)["long-names"]
    trials = plan(long_run, bundled_root())
    assert len({pod_name(long_run.name, t.trial_id) for t in trials}) == len(trials) == 8


def test_pod_name_is_stable_across_processes() -> None:
    """Restart safety rests on the name being a pure function (no hash randomisation, no clock)."""
    assert pod_name("e2e", "oracle.filesystem.standard.tiny.move_todo_0.1") == pod_name(
        "e2e", "oracle.filesystem.standard.tiny.move_todo_0.1", 0
    )
    import subprocess
    import sys

    code = (
        "from mcpfleet.operator.manifests import pod_name;"
        "print(pod_name('e2e', 'oracle.filesystem.standard.tiny.move_todo_0.1', 2))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "123"}
    ).stdout.strip()
    assert out == pod_name("e2e", "oracle.filesystem.standard.tiny.move_todo_0.1", 2)
    assert out.endswith("-1-r2")


@pytest.mark.parametrize("version", VERSIONS)
def test_an_s3_pack_is_fetched_by_the_init_container_and_checked_by_digest(pack: Path, version: str) -> None:
    local = evalrun("fetch", pack)
    remote = evalrun(
        "fetch",
        pack,
        tasks={
            "path": "s3://team-packs/mcpmark",
            "statesPath": "s3://team-packs/states",
            "endpointUrl": "https://minio.local:9000",
            "region": "eu-west-1",
            "credentialsSecretRef": "pack-reader",
        },
    )
    trial = plan(local, bundled_root())[0]  # the plan an S3 mirror gives is the same (tests/test_packs.py)
    assert trial.task_digest
    pod = trial_pod(remote, trial, OperatorSettings())
    kubernetes_validate.validate(pod, version, strict=True)
    init, sidecar = pod["spec"]["initContainers"]
    assert init["args"] == [
        "--task",
        trial.task_id,
        "--dest",
        "/state",
        "--tasks-root",
        "s3://team-packs/mcpmark",
        "--task-dest",
        "/task",
        "--states",
        "s3://team-packs/states",
        "--endpoint-url",
        "https://minio.local:9000",
        "--region",
        "eu-west-1",
        "--digest",
        trial.task_digest,
    ]
    env = {e["name"]: e for e in init["env"]}
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[key] == {"name": key, "valueFrom": {"secretKeyRef": {"name": "pack-reader", "key": key}}}
    runner = pod["spec"]["containers"][0]
    assert runner["args"][-2:] == ["--tasks-root", "/task"]
    assert {"name": "task", "mountPath": "/task", "readOnly": True} in runner["volumeMounts"]
    assert {"name": "task", "emptyDir": {"sizeLimit": "2Gi"}} in pod["spec"]["volumes"]
    assert all(m["name"] != "task" for m in sidecar["volumeMounts"])  # the MCP server sees the state only

    # A bundled pack is read from the image, with the same digest check against image/operator skew.
    pod = trial_pod(local, trial, OperatorSettings())
    init = pod["spec"]["initContainers"][0]
    assert init["args"] == [
        "--task",
        trial.task_id,
        "--dest",
        "/state",
        "--tasks-root",
        trial.tasks_root,
        "--digest",
        trial.task_digest,
    ]
    assert "task" not in {v["name"] for v in pod["spec"]["volumes"]}
    assert "--tasks-root" not in pod["spec"]["containers"][0]["args"]


def test_scratch_space_is_bounded_and_every_container_requests_it(pack: Path) -> None:
    """A trial cannot fill the node's disk: every emptyDir has a sizeLimit, every container (the init container
    with resources of its own) requests and limits ephemeral storage."""
    for variant, _, _, _, retry, pod in all_pods(pack):
        if retry:
            continue
        assert pod["spec"]["volumes"] and all(v["emptyDir"]["sizeLimit"] for v in pod["spec"]["volumes"]), variant
        init, sidecar = pod["spec"]["initContainers"]
        assert init["resources"] != sidecar["resources"], variant
        if variant == "defaults":
            for c in [init, sidecar, *pod["spec"]["containers"]]:
                assert c["resources"]["requests"]["ephemeral-storage"], c["name"]
                assert c["resources"]["limits"]["ephemeral-storage"], c["name"]
            assert pod["spec"]["volumes"][0] == {"name": "state", "emptyDir": {"sizeLimit": "2Gi"}}
    run = evalrun("small", pack, pod={"volumeSizeLimit": "500Mi", "initResources": {"requests": {"cpu": "1"}}})
    [trial, *_] = plan(run, pack)
    pod = trial_pod(run, trial, OperatorSettings())
    assert {v["emptyDir"]["sizeLimit"] for v in pod["spec"]["volumes"]} == {"500Mi"}
    assert pod["spec"]["initContainers"][0]["resources"] == {"requests": {"cpu": "1"}}


def _checkov_fails(pod: dict[str, Any]) -> set[str]:
    """The checks that checkov (3.x, kubernetes framework) fails on this pod, of those the operator waives: its
    rules restated, so the waivers are tested without the scanner (not a test dependency)."""

    def pull_policy(c: dict[str, Any]) -> str:
        name = c["image"].split("@")[0].rsplit("/", 1)[-1]
        return c.get("imagePullPolicy") or ("Always" if ":" not in name or name.endswith(":latest") else "IfNotPresent")

    every, mains = containers(pod), pod["spec"]["containers"]
    rules = {
        "CKV_K8S_8": any("livenessProbe" not in c for c in mains),
        "CKV_K8S_9": any("readinessProbe" not in c for c in mains),
        "CKV_K8S_11": any(not c.get("resources", {}).get("limits", {}).get("cpu") for c in every),
        "CKV_K8S_43": any("@" not in c["image"] for c in every),
        "CKV_K8S_15": any("@" not in c["image"] and pull_policy(c) != "Always" for c in every),
        "CKV_K8S_35": any("secretKeyRef" in e.get("valueFrom", {}) for c in every for e in c.get("env", [])),
    }
    return {check for check, fails in rules.items() if fails}


def test_scanner_waivers_are_only_where_the_check_fails(pack: Path) -> None:
    """Each trial pod carries a checkov.io/skipN waiver, with a reason, for exactly the checks of SCANNER_WAIVERS it
    would fail (a CPU limit everywhere, images by digest, no Secrets: each takes its waiver away), under keys an
    EvalRun cannot set."""
    assert {key for key, _ in SCANNER_WAIVERS.values()} == WAIVER_KEYS
    by_variant: dict[str, set[str]] = {}
    for variant, _, _, _, _, pod in all_pods(pack):
        notes = pod["metadata"]["annotations"]
        given = {k: v for k, v in notes.items() if k.startswith("checkov.io/")}
        assert set(given) <= WAIVER_KEYS, given
        checks = set()
        for key, value in given.items():
            check, _, reason = value.partition("=")
            assert SCANNER_WAIVERS[check][0] == key and reason.strip() and "=" not in reason, value
            checks.add(check)
        assert checks == _checkov_fails(pod), f"{variant}: waived {checks}, failing {_checkov_fails(pod)}"
        assert given == scanner_waivers(pod["spec"])
        by_variant.setdefault(variant, checks)
    assert by_variant["defaults"] == {"CKV_K8S_8", "CKV_K8S_9", "CKV_K8S_11", "CKV_K8S_43", "CKV_K8S_15"}
    assert by_variant["pinned"] == {"CKV_K8S_8", "CKV_K8S_9"}  # batch pods: no probes, whatever else is set
    assert "CKV_K8S_35" in by_variant["api-key-secret"] and "CKV_K8S_35" in by_variant["s3-credentials"]
    # An annotation of the run's own under a waiver key would be replaced: refused, naming a key to use.
    with pytest.raises(SpecError, match=r"checkov.io/skip3.*number your own from checkov.io/skip7"):
        evalrun("own", pack, pod={"annotations": {"checkov.io/skip3": "CKV_K8S_11=mine"}})
    run = evalrun("own", pack, pod={"annotations": {"checkov.io/skip7": "CKV_K8S_40=ours"}})
    assert trial_pod(run, plan(run, pack)[0], OperatorSettings())["metadata"]["annotations"]["checkov.io/skip7"]


def test_every_pod_names_its_namespace(pack: Path) -> None:
    """A trial pod always carries metadata.namespace: its run's, or "default" for a run that names none (where the
    operator, lifecycle.py, would put it), never left to the namespace of whoever applies it."""
    assert {pod["metadata"].get("namespace") for *_, pod in all_pods(pack)} == {"evals"}
    body = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "nowhere"},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}],
            "tasks": {"path": str(pack)},
            "output": {"uri": "s3://mcpfleet-results/runs"},
        },
    }
    run = parse_evalrun(body)
    assert trial_pod(run, plan(run, pack)[0], OperatorSettings())["metadata"]["namespace"] == "default"


def test_images_by_digest_everywhere_an_image_is_named(pack: Path) -> None:
    """A digest (repository[:tag]@sha256:...) is taken wherever an image is named: the operator's images (the chart's
    digest values become MCPFLEET_RUNNER_IMAGE / SIDECAR_IMAGES), spec.pod runnerImage and sidecarImages, and the
    allow-list, whose patterns match a digest like any other reference (and can require one)."""
    runner, sidecar = "registry.example.com/team/runner" + DIGEST, "registry.example.com/team/mcp-fs:2.0" + DIGEST
    settings = OperatorSettings.from_env(
        {
            "MCPFLEET_RUNNER_IMAGE": "ghcr.io/mcpfleet/runner" + DIGEST,
            "MCPFLEET_SIDECAR_IMAGES": f"filesystem=ghcr.io/mcpfleet/mcp-filesystem{DIGEST},postgres=pg:16{DIGEST}",
            "MCPFLEET_ALLOWED_IMAGES": "registry.example.com/team/*@sha256:*,docker.io/library/python" + DIGEST,
        }
    )
    assert settings.sidecar_images == {
        "filesystem": "ghcr.io/mcpfleet/mcp-filesystem" + DIGEST,
        "postgres": "pg:16" + DIGEST,
    }
    plain = evalrun("chart-images", pack)
    pod = trial_pod(plain, plan(plain, pack)[0], settings)
    assert [c["image"] for c in containers(pod)] == [
        "ghcr.io/mcpfleet/runner" + DIGEST,
        "ghcr.io/mcpfleet/mcp-filesystem" + DIGEST,
        "ghcr.io/mcpfleet/runner" + DIGEST,
    ]
    own = evalrun("own-images", pack, pod={"runnerImage": runner, "sidecarImages": {"filesystem": sidecar}})
    assert not settings.pod_refusals(own.spec.pod)
    pod = trial_pod(own, plan(own, pack)[0], settings)
    assert [c["image"] for c in containers(pod)] == [runner, sidecar, runner]
    kubernetes_validate.validate(pod, VERSIONS[0], strict=True)
    assert not settings.refusals("docker.io/library/python" + DIGEST, {}, None)  # an exact digest in the list
    assert settings.refusals("docker.io/library/python@sha256:" + "b" * 64, {}, None)  # another digest: refused
    assert settings.refusals("registry.example.com/team/runner:2.0", {}, None)  # a tag where the list wants a digest
    with pytest.raises(SpecError, match="not a container image reference"):
        evalrun("short", pack, pod={"runnerImage": "registry.example.com/team/runner@sha256:abc"})
