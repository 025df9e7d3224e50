"""Hostile EvalRuns the operator must settle, not loop on (review findings 5 and 10): any exception from planning
(not only the spec's and the pack's own errors) fails the run with an InvalidSpec condition naming the cause,
and a trial pod the API server refuses for good (a 4xx such as 422 Invalid) fails the run naming what the API
server said, instead of being created again on every step for ever."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kubeemu import RunningEmulator, run_kopf_in_thread
from support import NS, evalrun, status_of, wait_until

import mcpfleet.operator.planning as planning

ONE = {"models": [{"name": "idle", "model": "scripted/noop"}], "attempts": 1}


def failed(kube: RunningEmulator, name: str) -> dict[str, Any] | None:
    st = status_of(kube, name)
    return st if st.get("phase") == "Failed" else None


def pod_creates(kube: RunningEmulator) -> int:
    return kube.call(lambda: kube.emulator.request_counts.get(("create", "pods"), 0))


def warnings(kube: RunningEmulator, name: str, reason: str) -> list[str]:
    return [
        e.get("message", "")
        for e in kube.objects("events", NS)
        if e.get("reason") == reason and e["involvedObject"]["name"] == name
    ]


async def test_any_planning_failure_is_an_invalid_spec_not_a_crash_loop(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: only SpecError/TaskError/ValueError were caught; a TypeError from a pack's meta.json (finding 5)
    escaped the daemon, which kopf restarted again and again, with no status."""
    real_plan = planning.lazy_plan  # how the operator plans (planning.planned_lazily)
    calls = []

    def plan(run: Any, root: Any, tasks: Any = None) -> Any:
        calls.append(run.name)
        if run.name == "plan-bug":
            raise TypeError("string indices must be integers, not 'str'")
        return real_plan(run, root, tasks)

    monkeypatch.setattr(planning, "lazy_plan", plan)
    with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
        kube.create(evalrun("plan-bug", image_pack, s3, bucket, **ONE))
        status = await wait_until(lambda: failed(kube, "plan-bug"), 30, "the run to fail")
        valid = next(c for c in status["conditions"] if c["type"] == "Valid")
        assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec"), valid
        assert "TypeError: string indices must be integers" in valid["message"], valid
        await wait_until(lambda: warnings(kube, "plan-bug", "InvalidSpec"), 10, "the InvalidSpec event")
        seen = calls.count("plan-bug")
        await asyncio.sleep(3)
        assert calls.count("plan-bug") == seen == 1, "the run was planned again and again (a crash loop)"
        assert status_of(kube, "plan-bug")["phase"] == "Failed"
    assert not kube.objects("pods", NS)


async def test_a_pod_the_api_server_refuses_for_good_fails_the_run(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
) -> None:
    """Before: a 422 on create_pod was logged and the trial unlaunched, counting no retry and posting nothing, so
    the pod was created again on every step (about every second) for ever, the run Running without a word."""
    emulator = kube.emulator
    validate = emulator._validate_object

    def strict(res: Any, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        """The emulator's pod validation, plus the real server's int64 bound on activeDeadlineSeconds, which
        this run's pods break (as a spec with limits.timeoutSeconds past 2**63 makes them do)."""
        if res.plural == "pods" and (obj["metadata"].get("labels") or {}).get("mcpfleet.io/run") == "refused":
            emulator._invalid(
                res,
                obj["metadata"]["name"],
                "spec.activeDeadlineSeconds: Invalid value: 9223372036854775808: must be between 1 and 2^63-1",
            )
        return validate(res, obj, old)

    def refuse() -> None:
        emulator._validate_object = strict  # type: ignore[method-assign]

    kube.call(refuse)
    with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
        one_task = {"path": str(image_pack), "include": ["*/move_todo_0"]}
        kube.create(evalrun("refused", image_pack, s3, bucket, tasks=one_task, **ONE))
        status = await wait_until(lambda: failed(kube, "refused"), 30, "the run to fail")
        valid = next(c for c in status["conditions"] if c["type"] == "Valid")
        assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec"), valid
        assert "refused the pod" in valid["message"] and "422" in valid["message"], valid
        assert "spec.activeDeadlineSeconds: Invalid value" in valid["message"], valid
        events = await wait_until(lambda: warnings(kube, "refused", "InvalidSpec"), 10, "the InvalidSpec event")
        assert "spec.activeDeadlineSeconds: Invalid value" in events[0]
        creates = pod_creates(kube)
        await asyncio.sleep(3)
        assert pod_creates(kube) == creates == 1, "the refused pod was created again and again"
        assert status_of(kube, "refused")["phase"] == "Failed"


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (
            {"models": ONE["models"], "pod": {"sidecarImages": {"filesytem": "ghcr.io/me/mcp-fs:1"}}},
            "spec.pod.sidecarImages.filesytem: no service or pod image is named 'filesytem'",
        ),
        ({"models": [{"name": "o", "model": "scripted/orcale"}]}, "spec.models[0].model: unknown scripted model"),
        (
            {"models": [{"name": "o", "model": "scripted/oracle"}], "break_oracle": True},
            "spec: the run replays oracle solutions, and 1 selected task has none that can be replayed",
        ),
    ],
    ids=["sidecar-image-typo", "scripted-typo", "broken-oracle"],
)
async def test_a_typo_no_trial_could_survive_fails_the_run_before_any_pod(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    image_pack: Path,
    spec: dict[str, Any],
    said: str,
) -> None:
    """Before: a misspelt sidecarImages key was ignored (every trial ran on the default image, silently), a
    misspelt scripted policy failed every trial's first call, scored as the model's llm_api_error, and an oracle
    run over a broken oracle.json (refused locally) failed that task's trials, read as the task failing."""
    spec = dict(spec)  # the parameter's own dict stays as it is
    if spec.pop("break_oracle", False):
        sorted(image_pack.rglob("oracle.json"))[0].write_text('{"steps": []}')
    with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
        kube.create(evalrun("typo", image_pack, s3, bucket, attempts=1, **spec))
        status = await wait_until(lambda: failed(kube, "typo"), 30, "the run to fail")
        valid = next(c for c in status["conditions"] if c["type"] == "Valid")
        assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec"), valid
        assert said in valid["message"], valid
    assert pod_creates(kube) == 0
