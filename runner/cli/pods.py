"""Command: ``mcpfleet pods EVALRUN`` prints the trial pods the operator would create, without a cluster.

The pods come from the operator's own pure functions (``mcpfleet.operator.planning.run_pods``: the plan,
``check_run``'s refusals, ``manifests.trial_pod``), with the operator's settings read from the same ``MCPFLEET_*``
variables it reads (and from ``--env-file``, e.g. ``kubectl set env deployment/mcpfleet --list`` of an install),
so a placement (tolerations, affinity, runtimeClassName, ...) can be checked before the EvalRun is applied.
"""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from mcpfleet.runner.cli.output import fail
from mcpfleet.runner.spec.load import SpecError, load_evalrun
from mcpfleet.runner.spec.task import TaskError


class PodFormat(StrEnum):
    yaml = "yaml"
    json = "json"


def env_file(path: Path) -> dict[str, str]:
    """``NAME=value`` lines (what ``kubectl set env --list`` prints); blank lines and ``#`` comments skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--env-file {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})")
    out = {}
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, eq, value = line.partition("=")
        if not eq or not name.strip():
            fail(f"--env-file {path}:{number}: not NAME=value")
        out[name.strip()] = value
    return out


def render(pods: list[dict[str, Any]], output: PodFormat) -> str:
    """YAML: one document per pod (``kubectl apply -f`` takes it); JSON: a v1 List, as ``kubectl get -o json``."""
    if output is PodFormat.json:
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}, indent=2) + "\n"
    return yaml.safe_dump_all(pods, sort_keys=False)


def pods(
    evalrun: Annotated[Path, typer.Argument(help="EvalRun YAML file.")],
    trial: Annotated[
        list[str], typer.Option("--trial", help="Only this trial's pod (its id; repeatable). Default: every trial.")
    ] = [],  # noqa: B006 - typer's list option
    output: Annotated[PodFormat, typer.Option("--output", "-o", help="yaml (one document per pod) or json.")] = (
        PodFormat.yaml
    ),
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="The namespace it would be applied in (metadata's).")
    ] = None,
    env_path: Annotated[
        Path | None,
        typer.Option("--env-file", help="MCPFLEET_* settings as NAME=value lines, over the environment's."),
    ] = None,
) -> None:
    """Print the trial pods the operator would create for an EvalRun (no cluster needed)."""
    from mcpfleet.operator.planning import planned, run_pods
    from mcpfleet.operator.settings import OperatorSettings, SettingsError
    from mcpfleet.runner.results.store import StoreError

    env = {**os.environ, **(env_file(env_path) if env_path else {})}
    try:
        settings = OperatorSettings.from_env(env)
        run = load_evalrun(evalrun)
        if namespace:
            run = run.model_copy(update={"metadata": run.metadata.model_copy(update={"namespace": namespace})})
        manifests = run_pods(run, planned(run), settings, trial)
    except (SettingsError, SpecError, TaskError, StoreError, ValueError) as exc:
        fail(str(exc))
    sys.stdout.write(render(manifests, output))
