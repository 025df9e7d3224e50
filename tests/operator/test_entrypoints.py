"""Both documented ways to start the operator work as processes: `mcpfleet operator` and
`kopf run -m mcpfleet.operator` (each validates an EvalRun it is given and writes its status)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubeemu import RunningEmulator

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "argv",
    [
        [str(BIN / "mcpfleet"), "operator", "-n", "default"],
        [str(BIN / "kopf"), "run", "--standalone", "-n", "default", "-m", "mcpfleet.operator"],
    ],
    ids=["mcpfleet-operator", "kopf-run-module"],
)
def test_operator_process_handles_an_evalrun(kube: RunningEmulator, argv: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig_path)}
    log = open(tmp_path / "operator.log", "wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd="/")
    try:
        kube.create(
            {
                "apiVersion": "mcpfleet.io/v1alpha1",
                "kind": "EvalRun",
                "metadata": {"name": "dup", "namespace": "default"},
                "spec": {
                    "models": [{"name": "a", "model": "scripted/noop"}, {"name": "a", "model": "scripted/oracle"}]
                },
            }
        )
        deadline = time.monotonic() + 30
        status: dict = {}
        while time.monotonic() < deadline and status.get("phase") != "Failed":
            assert proc.poll() is None, (tmp_path / "operator.log").read_text()[-3000:]
            time.sleep(0.2)
            status = (kube.get("evalruns", "default", "dup") or {}).get("status") or {}
        assert status.get("phase") == "Failed", (tmp_path / "operator.log").read_text()[-3000:]
        (valid,) = [c for c in status["conditions"] if c["type"] == "Valid"]
        assert valid["status"] == "False" and valid["reason"] == "InvalidSpec"
        assert "spec.models: model names must be unique; 'a' appears twice" in valid["message"]
        # It logs as `kopf run` does (INFO and up on stderr): without it, warnings reached only events.
        assert "Activity 'startup' succeeded." in (tmp_path / "operator.log").read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_the_operator_registers_no_handler_that_needs_kopfs_diff_base() -> None:
    """handlers.NoDiffBase switches kopf's diff base off (it deep-copied every pod on every event): right only
    while no on.create/update/delete/resume handler is registered, which would then see no changes."""
    import kopf

    import mcpfleet.operator  # noqa: F401 - registers the handlers

    registry = kopf.get_default_registry()
    assert not registry._changing.get_all_handlers()
    assert [h.id for h in registry._watching.get_all_handlers()] == ["pod_event"]
    assert [h.id for h in registry._spawning.get_all_handlers()] == ["run_evalrun"]  # a daemon: no idle reset


def test_kopfs_per_event_success_line_is_dropped_and_nothing_else() -> None:
    from mcpfleet.operator.handlers import QuietPodEvents

    def record(msg: str, level: int = logging.INFO) -> logging.LogRecord:
        return logging.LogRecord("kopf.objects", level, __file__, 1, msg, None, None)

    quiet = QuietPodEvents()
    assert not quiet.filter(record("Handler 'pod_event' succeeded."))
    assert quiet.filter(record("Handler 'pod_event' failed with an exception. Will retry.", logging.ERROR))
    assert quiet.filter(record("Daemon 'run_evalrun' succeeded."))
