"""Expand an EvalRun into trials: pure, deterministic, and the same for the launcher and the operator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcpfleet.runner._util.plural import plural
from mcpfleet.runner.spec.evalrun import INT_MAX, EvalRun, ModelSpec, ToolCallSettings
from mcpfleet.runner.spec.load import SpecError, canonical_hash
from mcpfleet.runner.spec.service_decl import ServerVariant
from mcpfleet.runner.spec.task import Task
from mcpfleet.runner.spec.trial import TrialSpec
from mcpfleet.runner.tasks.digest import task_digest
from mcpfleet.runner.tasks.discovery import load_selection, resolve_pack


def trial_deadline(trial: TrialSpec, grace_seconds: float) -> tuple[float, str]:
    """The longest a try of ``trial`` still making progress can take, and the sum in words: past it, whatever
    holds the try (the local launcher's worker, a pod) is wedged and is killed, and the trial retried as an
    infrastructure error. One sum for the launcher and the operator (a pod's ``activeDeadlineSeconds``, and how
    long a pod on a lost node is waited for), so a trial is never killed in one and let finish in the other.

    Besides the agent's and verifier's timeouts and ``grace_seconds`` (set-up, teardown, a worker's or pod's
    start), it holds the provider time the agent's clock gives back (time lost to provider faults does not count
    against ``timeoutSeconds``): at most ``provider.trialRetryBudget`` failed calls of the LLM call's timeout,
    each followed by the longest wait (``retryAfterMaxSeconds`` or ``backoffMaxSeconds``). Without it a trial
    that waited out a long rate-limit spell would be killed near its end and paid for again. Lower those to have
    a wedged try found sooner. Capped at ``INT_MAX`` (a pod's deadline is an integer a JSON number keeps)."""
    lim, provider = trial.limits, trial.provider
    wait = max(provider.retry_after_max_seconds, provider.backoff_max_seconds)
    given_back = provider.trial_retry_budget * (lim.llm_call_timeout + wait)
    total = min(float(INT_MAX), lim.timeout_seconds + lim.verifier_timeout_seconds + grace_seconds + given_back)
    why = (
        f"{total:g} s (limits.timeoutSeconds {lim.timeout_seconds} + limits.verifierTimeoutSeconds "
        f"{lim.verifier_timeout_seconds} + {grace_seconds:g} s for set-up and teardown + {given_back:g} s the "
        f"provider may take back: provider.trialRetryBudget {provider.trial_retry_budget} x (the LLM call's "
        f"{lim.llm_call_timeout} s + a {wait:g} s wait))"
    )
    return total, why


def trial_id(model: str, task: Task, attempt: int, shard: int | None = None, variant: str | None = None) -> str:
    """Readable and unique: model and variant names are DNS labels, task path parts match [A-Za-z0-9_-]."""
    name = task.name if shard is None else f"{task.name}-s{shard:04d}"
    service = task.service if variant is None else f"{task.service}@{variant}"
    return f"{model}.{service}.{task.difficulty}.{task.category}.{name}.{attempt}"


def variants_of(run: EvalRun, task: Task) -> list[ServerVariant | None]:
    """The server variants a task's trials run: spec.servers' entries naming its service, else [None]."""
    return [v for v in run.spec.servers if v.service == task.service] or [None]


def check_variants(run: EvalRun, tasks: list[Task]) -> None:
    """Refuse, naming the entry and the fix, variants of a service that is not declared by the pack."""
    from mcpfleet.runner.services import BUNDLED, SERVICES

    selected = {t.service for t in tasks}
    problems = []
    for i, v in enumerate(run.spec.servers):
        where = f"spec.servers[{i}] ({v.name})"
        known = SERVICES.get(v.service)
        if known is None or not getattr(known, "harness_root", False):
            if v.service in BUNDLED and known is BUNDLED[v.service]:
                why = "is bundled; variants are for services a pack declares (<pack>/<service>/service.yaml)"
            else:
                why = "is not a service the pack declares"
            declared = sorted(n for n, s in SERVICES.items() if getattr(s, "harness_root", False))
            problems.append(f"{where}: service '{v.service}' {why}; declared: {', '.join(declared) or 'none'}")
        elif v.service not in selected:
            problems.append(f"{where}: service '{v.service}' has no selected task (spec.tasks filters)")
    if problems:
        raise SpecError(problems)


def trial_hash(
    run: EvalRun,
    model: ModelSpec,
    task: Task,
    attempt: int,
    shard: int | None = None,
    variant: ServerVariant | None = None,
) -> str:
    what: dict[str, object] = {
        "model": model.model_dump(mode="json", include={"name", "model", "api_base", "params"}),
        "agent": run.spec.agent,
        "limits": run.spec.limits.model_dump(mode="json"),
        "task": task.id,
        "task_digest": task_digest(task),
        "attempt": attempt,
    }
    if shard is not None:  # only for sharded tasks: every other trial keeps the hash it had
        what["shard"] = shard
        what["toolcalls"] = (run.spec.toolcalls or ToolCallSettings()).measured()
    if variant is not None:  # likewise: only a variant's trial has one
        what["server"] = variant.model_dump(mode="json", exclude_none=True)
    return canonical_hash(what)


def shards_of(run: EvalRun, task: Task) -> list[int | None]:
    """The trials one attempt of a task is cut into: [None] for a whole task, else its shard numbers."""
    from mcpfleet.runner.services import SERVICES

    service = SERVICES.get(task.service)
    count = service.shards(task, run.spec) if service is not None else None
    return [None] if count is None else list(range(count))


def service_params(task: Task) -> dict[str, Any]:
    """The task's service's ``trial_params`` (what its pod needs to know), {} for a service not registered."""
    from mcpfleet.runner.services import SERVICES

    service = SERVICES.get(task.service)
    return service.trial_params(task) if service is not None else {}


def task_weight(task: Task) -> int:
    """Expected size of a task: its oracle's length when it has one (a fair proxy for agent turns)."""
    try:
        return len(task.oracle) if task.has_oracle else 0
    except Exception:  # noqa: BLE001 - a broken oracle is reported by `tasks validate`, not here
        return 0


MAX_TRIALS = 100_000  # a sweep is a few thousand trials; past this the plan alone costs minutes and gigabytes


def check_plan_size(run: EvalRun, tasks: int, slices: int) -> None:
    """Refuse a plan of more than MAX_TRIALS trials (models x tasks' slices x attempts), naming the factors,
    before any of it is built: a 200 KB spec could ask for millions, held in memory, in plan.json and in the
    operator's status."""
    models, attempts = len(run.spec.models), run.spec.attempts
    total = models * slices * attempts
    if total > MAX_TRIALS:
        shards = f" in {plural(slices, 'shard')}" if slices != tasks else ""
        raise SpecError(
            [
                f"spec: {plural(models, 'model')} x {plural(tasks, 'task')}{shards} x {plural(attempts, 'attempt')} = "
                f"{total:,} trials; "
                f"at most {MAX_TRIALS:,} are allowed in one run: select fewer models or tasks (tasks.include, "
                "tasks.categories), lower attempts (or raise toolcalls.shardSize), or split the sweep into runs"
            ]
        )


def expand(run: EvalRun, tasks: list[Task], tasks_root: Path, states_path: Path | None = None) -> list[TrialSpec]:
    """models x tasks x attempts in launch order.

    Largest tasks first across the whole run (longest-processing-time first keeps the tail of a concurrent
    run short: no big task starts last); a task's attempts next to each other, so a run stopped early has
    whole pass@k / pass^k evidence for the tasks it reached; models interleaved on every step so provider
    rate limits spread out.
    """
    ordered = sorted(tasks, key=lambda t: (-task_weight(t), t.id))
    check_variants(run, ordered)
    cuts = {task.id: shards_of(run, task) for task in ordered}
    check_plan_size(run, len(ordered), sum(len(cuts[t.id]) * len(variants_of(run, t)) for t in ordered))
    judge = run.spec.toolcalls.judge.lent(run.spec.models) if run.spec.toolcalls and run.spec.toolcalls.judge else None
    out = []
    for task in ordered:
        shards = cuts[task.id]
        params = service_params(task)
        settings = (run.spec.toolcalls or ToolCallSettings()) if shards != [None] else None
        if settings is not None and settings.judge is not None:  # the judge's limit and price, lent by its account
            settings = settings.model_copy(update={"judge": judge})
        variants = variants_of(run, task)
        for shard in shards:
            for attempt in range(1, run.spec.attempts + 1):
                for model, variant in ((m, v) for m in run.spec.models for v in variants):
                    out.append(
                        TrialSpec(
                            run=run.name,
                            trial_id=trial_id(model.name, task, attempt, shard, variant.name if variant else None),
                            spec_hash=trial_hash(run, model, task, attempt, shard, variant),
                            model=model,
                            task_id=task.id,
                            tasks_root=str(tasks_root),
                            states_path=str(states_path) if states_path else None,
                            task_digest=task_digest(task),
                            attempt=attempt,
                            agent=run.spec.agent,
                            limits=run.spec.limits,
                            shard=shard,
                            toolcalls=settings,
                            provider=run.spec.provider,
                            budget=run.spec.budget,
                            judge=judge if shard is None else None,
                            service_params=params,
                            server=variant,
                        )
                    )
    return out


def plan(run: EvalRun, base_dir: Path, tasks: list[Task] | None = None) -> list[TrialSpec]:
    """The run's trials; ``tasks``: its selection when already loaded (``preflight`` returns it)."""
    root, states = resolve_pack(run.spec.tasks, base_dir)
    chosen = load_selection(run.spec.tasks, base_dir) if tasks is None else tasks
    return expand(with_variant_paths(run, base_dir), chosen, root, states)


def with_variant_paths(run: EvalRun, base_dir: Path) -> EvalRun:
    """``run`` with each variant's relative command path made absolute against the EvalRun file's folder (a name
    on PATH stays a name): a worker or the verifier's folder must not change what it names."""
    if not any(v.command and "/" in v.command and not v.command.startswith("/") for v in run.spec.servers):
        return run
    servers = [
        v.model_copy(update={"command": str((base_dir / v.command).resolve())})
        if v.command and "/" in v.command and not v.command.startswith("/")
        else v
        for v in run.spec.servers
    ]
    return run.model_copy(update={"spec": run.spec.model_copy(update={"servers": servers})})
