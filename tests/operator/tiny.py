"""A tiny planned EvalRun for the pure modules' tests: its body, parsed run, trials and RunState (no kopf, no API)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from conftest import make_tiny_pack

from mcpfleet.operator.runstate import InFlight, RunState
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.evalrun import EvalRun
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.spec.trial import TrialSpec


def body(tmp_path: Path, tasks: int = 2, **spec: Any) -> dict[str, Any]:
    """An EvalRun object of ``tasks`` tiny tasks and two models, records under tmp_path/out (an absolute path)."""
    pack = tmp_path / "pack"
    if not pack.exists():
        make_tiny_pack(pack, tasks=tasks)
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "tiny", "namespace": "ns", "generation": 1},
        "spec": {
            "models": [{"name": "a", "model": "scripted/oracle"}, {"name": "b", "model": "scripted/noop"}],
            "tasks": {"path": str(pack)},
            "attempts": 1,
            "output": {"uri": str(tmp_path / "out")},
            **spec,
        },
    }


def edited(raw: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """``raw`` with these spec fields replaced (the object after an edit)."""
    out = copy.deepcopy(raw)
    out["spec"].update(spec)
    return out


def parsed(raw: dict[str, Any]) -> EvalRun:
    return parse_evalrun(copy.deepcopy(raw))


def trials(tmp_path: Path, raw: dict[str, Any]) -> list[TrialSpec]:
    return plan(parsed(raw), tmp_path)


def state(ts: list[TrialSpec], retry_limit: int = 1) -> RunState:
    st = RunState.plan(ts, retry_limit=retry_limit)
    st.finish_rebuild()
    return st


def flight(trial: TrialSpec, **fields: Any) -> InFlight:
    """A try of ``trial`` in flight, created at t=1000 (wall seconds), with these fields set."""
    inf = InFlight(trial, f"pod-{trial.trial_id}", 0, 1000.0)
    for k, v in fields.items():
        setattr(inf, k, v)
    return inf
