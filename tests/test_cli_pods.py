"""``mcpfleet pods EVALRUN``: the trial pods the operator would create, printed without a cluster, as a user runs
it (a subprocess once; in-process through typer's runner otherwise: each process imports LiteLLM to plan). Its pods
are exactly what the operator's builder makes for the same run and settings."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from conftest import make_tiny_pack

from mcpfleet.operator.manifests import trial_pod
from mcpfleet.operator.planning import planned
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.spec.load import load_evalrun

REPO = Path(__file__).resolve().parents[1]
MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
PLACEMENT = {
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "evals", "effect": "NoSchedule"}],
    "runtimeClassName": "gvisor",
    "labels": {"kueue.x-k8s.io/queue-name": "evals"},
}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCPFLEET_") and k != "COLUMNS"}
    return subprocess.run(
        [str(MCPFLEET), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**clean, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("pods")
    pack = make_tiny_pack(base / "pack", tasks=2)
    path = base / "run.yaml"
    body = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "preview"},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}, {"name": "idle", "model": "scripted/noop"}],
            "tasks": {"path": str(pack)},
            "attempts": 2,
            "output": {"uri": "s3://mcpfleet-results/runs"},
            "pod": PLACEMENT,
        },
    }
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.fixture
def pods_cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``mcpfleet ARGS`` in this process with ``env`` as the only MCPFLEET_* variables: (exit code, stdout, stderr)."""
    from typer.testing import CliRunner

    from mcpfleet.runner.cli.app import app

    def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        for name in [k for k in os.environ if k.startswith("MCPFLEET_")]:
            monkeypatch.delenv(name)
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        result = CliRunner().invoke(app, list(args))
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        return result.exit_code, result.stdout, " ".join(result.stderr.split())

    return invoke


def builder_pods(path: Path, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    run = load_evalrun(path)
    settings = OperatorSettings.from_env(env or {})
    return [trial_pod(run, t, settings) for t in planned(run)]


def test_yaml_is_every_trials_pod_as_the_operators_builder_makes_it(run_file: Path) -> None:
    out = cli("pods", str(run_file))
    assert out.returncode == 0, out.stderr
    pods = list(yaml.safe_load_all(out.stdout))
    assert len(pods) == 8  # 2 models x 2 tasks x 2 attempts
    assert pods == builder_pods(run_file)
    for pod in pods:
        assert pod["kind"] == "Pod" and pod["spec"]["runtimeClassName"] == "gvisor"
        assert pod["spec"]["tolerations"] == PLACEMENT["tolerations"]
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "evals"
        kubernetes_validate.validate(pod, "1.30.0", strict=True)
    assert len({p["metadata"]["name"] for p in pods}) == 8
    # Every pod names its namespace (the run file names none: "default", as the operator would), never left to
    # whichever namespace a kubectl context has.
    assert {p["metadata"]["namespace"] for p in pods} == {"default"}


def test_json_with_trial_is_that_trials_pod_only(run_file: Path, pods_cli: Any) -> None:
    wanted = builder_pods(run_file)[3]
    trial = wanted["metadata"]["annotations"]["mcpfleet.io/trial-id"]
    code, stdout, stderr = pods_cli("pods", str(run_file), "--trial", trial, "-o", "json", "-n", "evals")
    assert code == 0, stderr
    listed = json.loads(stdout)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    [pod] = listed["items"]
    assert pod["metadata"]["namespace"] == "evals" and wanted["metadata"]["namespace"] == "default"
    for container in wanted["spec"].get("containers", []) + wanted["spec"].get("initContainers", []):
        for var in container.get("env") or []:
            if var["name"] == "MCPFLEET_NAMESPACE":  # the runner names its namespace (the pace store's keys)
                var["value"] = "evals"
    assert pod == {**wanted, "metadata": {**wanted["metadata"], "namespace": "evals"}}
    two = builder_pods(run_file)[:2]
    ids = [p["metadata"]["annotations"]["mcpfleet.io/trial-id"] for p in two]
    _, stdout, _ = pods_cli("pods", str(run_file), "--trial", ids[1], "--trial", ids[0], "-o", "json")
    assert json.loads(stdout)["items"] == two  # plan order


def test_the_operators_settings_come_from_the_environment_or_an_env_file(
    run_file: Path, tmp_path: Path, pods_cli: Any
) -> None:
    """As `kubectl set env deployment/mcpfleet --list` prints them: the chart's trial-pod defaults apply, and what
    the EvalRun sets wins."""
    defaults = {"priorityClassName": "evals-low", "runtimeClassName": "runc", "labels": {"cost-center": "ml"}}
    lines = ["# deployments/mcpfleet, container operator", f"MCPFLEET_POD_DEFAULTS={json.dumps(defaults)}", ""]
    env_file = tmp_path / "operator.env"
    env_file.write_text("\n".join(lines))
    code, stdout, stderr = pods_cli("pods", str(run_file), "--env-file", str(env_file))
    assert code == 0, stderr
    pods = list(yaml.safe_load_all(stdout))
    assert pods == builder_pods(run_file, {"MCPFLEET_POD_DEFAULTS": json.dumps(defaults)})
    assert pods[0]["spec"]["priorityClassName"] == "evals-low"  # the chart's
    assert pods[0]["spec"]["runtimeClassName"] == "gvisor"  # the EvalRun's, over the chart's runc
    assert pods[0]["metadata"]["labels"]["cost-center"] == "ml"
    env = {"MCPFLEET_POD_DEFAULTS": json.dumps(defaults), "MCPFLEET_RUNNER_IMAGE": "registry.example.com/r:1"}
    out = cli("pods", str(run_file), "-o", "json", env=env)
    assert {p["spec"]["containers"][0]["image"] for p in json.loads(out.stdout)["items"]} == {
        "registry.example.com/r:1"
    }


def test_what_the_operator_would_refuse_is_an_error_not_pods(run_file: Path, tmp_path: Path, pods_cli: Any) -> None:
    code, stdout, stderr = pods_cli("pods", str(run_file), env={"MCPFLEET_ALLOWED_RUNTIME_CLASSES": "kata"})
    assert code == 2 and not stdout
    assert "spec.pod.runtimeClassName: 'gvisor' is not in the operator's allowedRuntimeClasses (kata)" in stderr
    code, _, stderr = pods_cli("pods", str(run_file), "--trial", "oracle.filesystem.standard.tiny.nope.1")
    assert code == 2 and "--trial oracle.filesystem.standard.tiny.nope.1: not a trial of this run" in stderr
    bad = yaml.safe_load(run_file.read_text())
    bad["spec"]["pod"]["tolerations"][0]["effect"] = "NoScheduel"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    code, _, stderr = pods_cli("pods", str(tmp_path / "bad.yaml"))
    assert code == 2 and "spec.pod.tolerations[0].effect:" in stderr, stderr
    code, _, stderr = pods_cli("pods", str(run_file), env={"MCPFLEET_POD_DEFAULTS": '{"hostAliases": []}'})
    assert code == 2 and "MCPFLEET_POD_DEFAULTS: hostAliases is refused" in stderr, stderr


def test_every_pod_names_its_namespace_and_carries_its_scanner_waivers(
    run_file: Path, tmp_path: Path, pods_cli: Any
) -> None:
    """The run file's namespace, or -n over it: on every pod printed (a scanner reading the output sees where each
    pod goes, and its waivers: this run has no Secrets, so no secrets-as-env waiver)."""
    own = yaml.safe_load(run_file.read_text())
    own["metadata"]["namespace"] = "team-a"
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(own))
    code, stdout, stderr = pods_cli("pods", str(tmp_path / "own.yaml"))
    assert code == 0, stderr
    pods = list(yaml.safe_load_all(stdout))
    assert len(pods) == 8 and {p["metadata"]["namespace"] for p in pods} == {"team-a"}
    code, stdout, stderr = pods_cli("pods", str(tmp_path / "own.yaml"), "-n", "evals", "-o", "json")
    assert code == 0, stderr
    pods = json.loads(stdout)["items"]
    assert len(pods) == 8 and {p["metadata"]["namespace"] for p in pods} == {"evals"}
    for pod in pods:
        checks = {v.split("=", 1)[0] for k, v in pod["metadata"]["annotations"].items() if k.startswith("checkov.io/")}
        assert checks == {"CKV_K8S_8", "CKV_K8S_9", "CKV_K8S_11", "CKV_K8S_43", "CKV_K8S_15"}, checks
