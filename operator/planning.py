"""A run's trials and whether this operator can run them: what the reconciler checks before any pod exists, and
what ``mcpfleet pods`` prints without a cluster (the trial pods, from the same pure functions).

Pure apart from reading the task pack (an s3:// pack is fetched into the cache first, as planning does).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcpfleet.operator.manifests import trial_pod
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.launch.preflight import scripted_problems, selection
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.plan.trials import Plan, Trials, as_trials, lazy_plan
from mcpfleet.runner.spec.evalrun import EvalRun
from mcpfleet.runner.spec.load import SpecError
from mcpfleet.runner.spec.trial import TrialSpec
from mcpfleet.runner.tasks.discovery import bundled_root


def planned(run: EvalRun) -> list[TrialSpec]:
    """The run's trials; SpecError for what the local preflight refuses too, where the operator can see it: a
    scripted model string the scripted server would refuse (every trial's first call would fail on it), and the
    selection's problems (``preflight.selection``; the states are the pods' to check)."""
    if problems := scripted_problems(run):
        raise SpecError(problems)
    root = bundled_root()
    return plan(run, root, selection(run, root, states=False))


def planned_lazily(run: EvalRun) -> Plan:
    """``planned``, as the operator holds a run's plan: its trials computed when asked for (plan/trials.py)."""
    if problems := scripted_problems(run):
        raise SpecError(problems)
    root = bundled_root()
    return lazy_plan(run, root, selection(run, root, states=False))


def check_run(run: EvalRun, trials: Trials | Sequence[TrialSpec], settings: OperatorSettings) -> None:
    """What only the operator needs, as a ValueError naming the field: records where it and every pod see them,
    a pod per service (its sidecar image, its placement), and nothing its allow-lists refuse."""
    uri = run.spec.output.uri
    if not uri.startswith("s3://") and not Path(uri).is_absolute():  # e.g. the default "runs"
        raise ValueError(
            f"spec.output.uri: '{uri}' is a relative local path, which each trial pod would "
            "resolve on its own disk; set s3://<bucket>/<prefix> (or an absolute path shared "
            "by the operator and every pod)"
        )
    for trial in as_trials(trials).samples():  # each service, each server variant
        trial_pod(run, trial, settings)  # raises ValueError naming spec.pod.sidecarImages.<svc>, spec.pod.dnsPolicy
    if refused := settings.pod_refusals(run.spec.pod):
        raise ValueError("; ".join(refused))


def run_pods(
    run: EvalRun, trials: list[TrialSpec], settings: OperatorSettings, only: list[str] | None = None
) -> list[dict[str, Any]]:
    """The first try's pod of each trial (of those named in ``only``, in plan order), as the operator would create
    them; ValueError for what it would refuse instead (``check_run``), or a trial id the plan does not have."""
    check_run(run, trials, settings)
    if only:
        known = {t.trial_id for t in trials}
        if unknown := [t for t in only if t not in known]:
            shown = ", ".join(t.trial_id for t in trials[:3]) + (", ..." if len(trials) > 3 else "")
            raise ValueError(
                f"--trial {unknown[0]}: not a trial of this run ({len(trials)} planned: {shown}); "
                "give an id as the plan names it: <model>.<service>.<difficulty>.<category>.<task>.<attempt>"
            )
        trials = [t for t in trials if t.trial_id in only]
    return [trial_pod(run, t, settings) for t in trials]
