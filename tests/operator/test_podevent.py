"""A pod event waits in its run's queue slim (operator/podevent.py): what every decision reads is kept, the trial's
environment and the containers' arguments, mounts and probes are not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcpfleet.operator.admission import waiting_admission
from mcpfleet.operator.manifests import trial_pod
from mcpfleet.operator.podevent import essentials
from mcpfleet.operator.podview import Act, claims, failure_reason, runner_started, seen, termination_message
from mcpfleet.operator.runstate import RunState
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.load import parse_evalrun


def a_pod(pack: Path) -> tuple[RunState, dict[str, Any]]:
    body = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "r", "namespace": "default", "uid": "u-1"},
        "spec": {
            "models": [{"name": "m", "model": "scripted/oracle"}],
            "tasks": {"path": str(pack)},
            "output": {"uri": "s3://some-bucket/runs"},
            "pod": {"labels": {"kueue.x-k8s.io/queue-name": "evals"}},
        },
    }
    run = parse_evalrun(body)
    trials = plan(run, pack)
    pod = trial_pod(run, trials[0], OperatorSettings.from_env())
    pod["metadata"].update(creationTimestamp="2026-12-03T10:00:00Z", managedFields=[{"manager": "kubectl"}])
    pod["spec"].update(nodeName="n1", schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    return RunState.plan(trials, 1), pod


def test_a_slim_pod_event_decides_as_the_whole_pod_does_at_a_fraction_of_its_size(tiny_pack: Path) -> None:
    st, pod = a_pod(tiny_pack)
    message = json.dumps({"trial_id": "x", "passed": True})
    statuses: list[dict[str, Any]] = [
        {"phase": "Pending"},
        {
            "phase": "Pending",
            "containerStatuses": [{"name": "runner", "state": {"waiting": {"reason": "ErrImagePull"}}}],
        },
        {"phase": "Running", "containerStatuses": [{"name": "runner", "state": {"running": {}}}]},
        {
            "phase": "Failed",
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}],
            "containerStatuses": [
                {"name": "runner", "state": {"terminated": {"exitCode": 0, "message": message, "startedAt": "t"}}}
            ],
        },
    ]
    tid = next(iter(st.trials))
    st.launched(st.trials[tid], pod["metadata"]["name"], 0, 1.0)
    inf = st.in_flight[tid]
    for status in statuses:
        full = {**pod, "status": status}
        slim = essentials(full)
        for kind in ("ADDED", "MODIFIED", "DELETED"):
            assert seen(kind, slim, inf, 5.0) == seen(kind, full, inf, 5.0)
        assert runner_started(slim["status"]) == runner_started(full["status"])
        assert termination_message(slim) == termination_message(full)
        assert failure_reason(slim, None) == failure_reason(full, None)
        assert waiting_admission(slim) and slim["spec"]["terminationGracePeriodSeconds"] == 30
    assert seen("MODIFIED", essentials({**pod, "status": statuses[1]}), inf, 5.0).act is Act.END
    other = RunState.plan(list(st.trials.values()), 1)
    assert [c for _, c in claims([essentials(pod)], other, 5.0)] == [c for _, c in claims([pod], other, 5.0)]
    slim = essentials(pod)
    assert "managedFields" not in slim["metadata"] and slim["metadata"]["labels"] == pod["metadata"]["labels"]
    assert [c["name"] for c in slim["spec"]["containers"]] == [c["name"] for c in pod["spec"]["containers"]]
    assert "MCPFLEET_TRIAL" not in json.dumps(slim) and "MCPFLEET_TRIAL" in json.dumps(pod)
    assert len(json.dumps(slim)) * 3 < len(json.dumps(pod)), (len(json.dumps(slim)), len(json.dumps(pod)))
