"""The ``mcpfleet`` command line."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mcpfleet.runner._util.plural import plural
from mcpfleet.runner.cli.output import console, err, escape, run_app
from mcpfleet.runner.cli.output import fail as _fail
from mcpfleet.runner.cli.packs import DEFAULT_TASKS, tasks_at
from mcpfleet.runner.cli.pods import pods
from mcpfleet.runner.cli.servers import compare, servers_app, tasks_new
from mcpfleet.runner.cli.stress import tasks_stress
from mcpfleet.runner.cli.toolcalls import judge_eval, toolcalls_app
from mcpfleet.runner.cli.view import show, view
from mcpfleet.runner.launch.progress_lines import DEFAULT_EVERY_SECONDS
from mcpfleet.runner.spec.load import SpecError, load_evalrun
from mcpfleet.runner.spec.task import Task, TaskError
from mcpfleet.runner.tasks.digest import task_digest

if TYPE_CHECKING:
    from mcpfleet.runner.launch.taskcheck import TaskReport

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Run MCP tool-use benchmarks at scale: locally or as a Kubernetes operator.",
)
tasks_app = typer.Typer(no_args_is_help=True, help="Inspect and validate task packs.")
app.add_typer(tasks_app, name="tasks")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"mcpfleet {version('mcpfleet')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print mcpfleet's version and exit."),
    ] = False,
) -> None:
    pass


STOPPED_EXIT = 3  # `mcpfleet run`: some model's launches were stopped (configuration error, retry budget)
UNRECORDED_EXIT = 4  # `mcpfleet run`: some trials ran but their records could not be stored
UNSCORED_EXIT = 5  # `mcpfleet run`: every trial ended unscored (infra, provider, config errors): nothing measured
LOST_EXIT = 6  # `mcpfleet run`: stopped early, a run-scoped resource (the PostgreSQL server) was lost for good
BUDGET_EXIT = 7  # `mcpfleet run`: a budget (spec.budget, spec.models[].budget) stopped launches, nothing else did


def shown_path(location: Path | str) -> str:
    """A run location as printed: s3:// as is, a folder normalised (relative to here when below it)."""
    text = str(location)
    if text.startswith("s3://"):
        return text
    path = Path(os.path.normpath(Path(text).absolute()))
    try:
        return str(path.relative_to(Path.cwd())) or "."
    except ValueError:
        return str(path)


SCRIPTED_FAILED = "scripted model server "  # how ScriptedServerProcess's start failure begins


def scripted_failure(text: str) -> str:
    """The scripted model server's start failure (its message, then its stderr: a traceback) in one line: what
    happened and the error it ended with (a task file it could not read)."""
    head, _, stderr = text.partition("\n")
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and line.strip() != "stderr:"]
    cause = lines[-1] if lines else ""
    said = f": {cause}" if cause and cause != "(empty)" else ""
    return f"{head.removesuffix('; stderr:')}{said}; check the pack with: mcpfleet tasks validate <pack>"


@app.command()
def run(
    evalrun: Annotated[Path, typer.Argument(help="EvalRun YAML file.")],
    concurrency: Annotated[int | None, typer.Option(min=1, help="Override spec.concurrency.total.")] = None,
    new_run: Annotated[bool, typer.Option("--new-run", help="Write under a fresh run name if one exists.")] = False,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="No progress: neither the live bar nor progress lines.")
    ] = False,
    progress_every: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="Off a terminal (CI, nohup): print a plain progress line at least every SECONDS, and at each "
            "tenth of the trials.",
            metavar="SECONDS",
        ),
    ] = DEFAULT_EVERY_SECONDS,
) -> None:
    """Run an EvalRun on this machine (resumes if it was run before)."""
    import signal

    from mcpfleet.runner.launch.launcher import RunLost, RunRefused, execute
    from mcpfleet.runner.report.summary import mixed_harness, mixed_servers
    from mcpfleet.runner.report.table import comparison_table, summary_table
    from mcpfleet.runner.results.store import StoreError

    # SIGTERM (kill, timeout, CI cancellation) takes the same clean path as Ctrl-C: no orphaned servers.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        spec = load_evalrun(evalrun)
        summary, root = execute(
            spec,
            evalrun.resolve().parent,
            new_run=new_run,
            concurrency=concurrency,
            show_progress=not no_progress and sys.stderr.isatty(),
            progress_every=None if no_progress or sys.stderr.isatty() else progress_every,
        )
    except (SpecError, TaskError, RunRefused, StoreError) as exc:
        _fail(str(exc))
    except RunLost as exc:
        _fail(
            f"{exc}: the run stopped early. Finished trials are kept; the ones in flight run again. Fix the cause "
            "and run the same command again.",
            LOST_EXIT,
        )
    except RuntimeError as exc:
        if not str(exc).startswith(SCRIPTED_FAILED):
            raise
        _fail(scripted_failure(str(exc)))
    console.print(summary_table(summary))
    if compared := comparison_table(summary.get("comparisons") or []):
        console.print(compared)
    for mixed in [mixed_harness(summary), *mixed_servers(summary)]:
        if mixed:
            err.print(f"[yellow]note:[/] {escape(mixed)}", highlight=False, soft_wrap=True)
    shown = shown_path(root)
    console.print(f"records: {escape(shown)}/trials   summary: {escape(shown)}/summary.json", highlight=False)
    if summary.get("stopped"):  # a configuration error or a spent retry budget: not a finished run
        unrun = summary["trials_planned"] - summary["trials_recorded"]
        for model, why in summary["stopped"].items():
            err.print(f"[red]error:[/] model '{escape(model)}' stopped: {escape(why)}", highlight=False, soft_wrap=True)
        budget = all(str(why).startswith("budget_exhausted") for why in summary["stopped"].values())
        fix = "Raise the budget" if budget else "Fix the cause"
        err.print(
            f"{plural(unrun, 'trial')} not run. {fix} and run the same command again: the stopped models' "
            "trials resume, finished ones are kept.",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(BUDGET_EXIT if budget else STOPPED_EXIT)
    unrecorded = summary["trials_planned"] - summary["trials_recorded"]
    if summary.get("summary_error") and not unrecorded:
        err.print(
            f"[red]error:[/] {escape(summary['summary_error'])}. Every trial is recorded; fix the cause and run "
            "the same command again to write it.",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(UNRECORDED_EXIT)
    if unrecorded:  # ran, but nothing of them could be stored (a full disk, a store that refuses writes)
        err.print(
            f"[red]error:[/] {plural(unrecorded, 'trial has', 'trials have')} no record in {escape(shown)}: the "
            "results could not be stored, or the worker process died on every try. Fix the cause and run the same "
            "command again: finished trials are kept.",
            highlight=False,
            soft_wrap=True,
        )
        for tid, why in list((summary.get("unrecorded") or {}).items())[:3]:
            err.print(f"  {escape(tid)}: {escape(why)}", highlight=False, soft_wrap=True)
        if summary.get("summary_error"):
            err.print(f"  {escape(summary['summary_error'])}", highlight=False, soft_wrap=True)
        raise typer.Exit(UNRECORDED_EXIT)
    unscored = summary.get("not_scored") or {}
    if measured_nothing(summary):
        kinds = ", ".join(f"{n} {kind}" for kind, n in unscored.items())
        err.print(
            f"[red]error:[/] no trial was scored ({escape(kinds)}): the run measured nothing. Each record's "
            f"`error` and its trial.log under {escape(shown)}/trials say why (a failure MCPMark runs again says so); "
            "fix the cause and run the same command again: unscored trials run again.",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(UNSCORED_EXIT)


def measured_nothing(summary: dict[str, Any]) -> bool:
    """Whether every recorded trial measured nothing of its model. A tool-call shard whose judge failed on some
    cases is unscored as a whole (it runs again on resume), yet its other cases are scored: the run measured
    something once any row holds a scored case or trial."""
    unscored = sum((summary.get("not_scored") or {}).values())
    scored = sum(int(r.get("scored") or 0) for r in summary["rows"])
    return bool(summary["trials_recorded"]) and unscored >= summary["trials_recorded"] and not scored


@app.command(hidden=True)  # pod-internal: a trial pod runs it
def trial(
    evalrun: Annotated[
        Path | None,
        typer.Argument(help="EvalRun YAML file. Without it the trial comes from $MCPFLEET_TRIAL (a pod)."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="spec.models[].name")] = None,
    task: Annotated[str | None, typer.Option(help="Task id <service>/<difficulty>/<category>/<task>.")] = None,
    attempt: Annotated[int, typer.Option(min=1)] = 1,
    shard: Annotated[int, typer.Option(min=0, help="Shard of a sharded task (toolcall cases).")] = 0,
    mcp_url: Annotated[str | None, typer.Option(help="Streamable-HTTP MCP endpoint (a sidecar).")] = None,
    mcp_fifo: Annotated[
        Path | None, typer.Option(help="Folder of a sidecar's stdio server FIFOs, 'in' and 'out' (a pod's bridge).")
    ] = None,
    mcp_container: Annotated[
        str | None, typer.Option(help="The container serving --mcp-fifo, named when it never answers.")
    ] = None,
    state_dir: Annotated[Path | None, typer.Option(help="Already materialised initial state.")] = None,
    scripted_url: Annotated[
        str | None, typer.Option(envvar="MCPFLEET_SCRIPTED_URL", help="Scripted model server base URL.")
    ] = None,
    termination_log: Annotated[Path | None, typer.Option(help="Where to write the JSON outcome.")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="Serve Prometheus /metrics on this port.")] = None,
    tasks_root: Annotated[
        Path | None,
        typer.Option(help="Read the task from this pack root instead of the trial's (a pod's fetched task volume)."),
    ] = None,
) -> None:
    """Run exactly one trial and write its record (the command a trial pod runs).

    Exit code 0 means the record was stored (whatever the outcome); non-zero means it was not."""
    import os

    from pydantic import ValidationError

    from mcpfleet.runner.plan.expand import plan
    from mcpfleet.runner.results.store import StoreError, open_store
    from mcpfleet.runner.services import run_resources
    from mcpfleet.runner.spec.evalrun import Output
    from mcpfleet.runner.spec.trial import TrialContext, TrialSpec
    from mcpfleet.runner.trial.engine import run_trial

    if evalrun is None:
        raw = os.environ.get("MCPFLEET_TRIAL")
        if not raw:
            _fail("give an EvalRun file with --model/--task/--attempt, or set MCPFLEET_TRIAL (pods)")
        try:
            chosen = TrialSpec.model_validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ())) or "(root)"
            _fail(
                f"MCPFLEET_TRIAL: not a trial the operator wrote ({plural(exc.error_count(), 'problem')}; first, at "
                f"{where}: {first.get('msg', '')}); unset it and give an EvalRun file with --model/--task/--attempt"
            )
        output = Output(
            uri=os.environ.get("MCPFLEET_OUTPUT_URI", "runs"),
            endpoint_url=os.environ.get("MCPFLEET_OUTPUT_ENDPOINT_URL") or None,
        )
        try:
            store = open_store(output, chosen.run, Path.cwd(), run_uid=os.environ.get("MCPFLEET_RUN_UID") or None)
        except (SpecError, StoreError) as exc:
            _fail(str(exc))
    else:
        if not model or not task:
            _fail("--model and --task are required with an EvalRun file")
        try:
            spec = load_evalrun(evalrun)
            trials = [
                t
                for t in plan(spec, evalrun.resolve().parent)
                if t.model.name == model and t.task_id == task and t.attempt == attempt and (t.shard or 0) == shard
            ]
        except (SpecError, TaskError, StoreError) as exc:
            _fail(str(exc))
        if not trials:
            _fail(f"no trial (model={model}, task={task}, attempt={attempt}) in the plan of {evalrun}")
        chosen = trials[0]
        try:
            store = open_store(spec.spec.output, spec.name, evalrun.resolve().parent)
        except (SpecError, StoreError) as exc:
            _fail(str(exc))
    if tasks_root is not None:
        chosen = chosen.model_copy(update={"tasks_root": str(tasks_root), "states_path": None})
    raw_attempt = os.environ.get("MCPFLEET_INFRA_ATTEMPT", "1")
    if not re.fullmatch(r"[0-9]{1,9}", raw_attempt):  # (the operator writes it: a whole number, its try's count)
        _fail(
            f"MCPFLEET_INFRA_ATTEMPT: {raw_attempt[:40]!r} is not a whole number of at least 0; unset it (the "
            "operator sets it in a trial pod)"
        )
    infra_attempt = int(raw_attempt)
    if metrics_port:
        from mcpfleet.runner.agent.metrics import serve

        serve(metrics_port)
    # A pod's environment is its sidecars; locally the trial's service starts its run-scoped resource (a
    # PostgreSQL cluster) for this one trial.
    with run_resources([] if mcp_url or mcp_fifo else [chosen.service]) as resources:
        ctx = TrialContext(
            scripted_base_url=scripted_url,
            mcp_url=mcp_url,
            mcp_fifo=mcp_fifo,
            mcp_container=mcp_container,
            state_dir=state_dir,
            metrics=bool(metrics_port),
            resources=resources,
        )
        result = asyncio.run(run_trial(chosen, store, ctx, infra_attempt))
    # One short JSON line: the pod's termination message and a script's parseable output.
    line = json.dumps({"trial_id": result.trial_id, "passed": result.passed, "failure": result.failure})
    print(line)
    if termination_log is not None:
        try:
            termination_log.write_text(line)
        except OSError as exc:
            err.print(f"could not write the termination message to {termination_log}: {exc}")


def _dest_problem(dest: Path) -> str | None:
    """Why ``materialise --dest`` cannot be filled: it, or the nearest of its folders that exists, is no folder
    (``--dest /dev/null`` was a FileExistsError traceback), or it cannot be looked at (a folder above it that the
    user may not enter was a PermissionError traceback)."""
    probe = dest
    try:
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if probe.is_dir():
            return None
    except OSError as exc:
        return f"--dest {dest}: cannot be looked at ({exc.strerror or exc}); give a folder you may write to"
    kind = "a file" if probe.is_file() else "not a folder"
    where = f"is {kind}" if probe == dest else f"is under {probe}, {kind}"
    return f"--dest {dest} {where}; give a folder to fill (it is created if missing)"


def _dest_overlap(dest: Path, task: Task) -> str | None:
    """Why ``materialise`` must not fill ``dest``: it is, or lies inside, the task's folder or its own initial
    state (copying a state into itself made a 100 KB shutil.Error, or a copy of the state inside the state)."""
    from mcpfleet.runner._util.overlap import inside
    from mcpfleet.runner.services import service_of

    owned = [("folder", task.path)] + [
        ("initial state", p) for p in service_of(task.service, task.pack_root).state_files(task)
    ]
    for what, own in owned:
        if own.is_dir() and inside(dest, own):
            return f"--dest {dest} is, or lies inside, the task's {what} {own}; give a folder outside it"
    return None


@app.command(hidden=True)  # pod-internal: a trial pod's init container runs it
def materialise(
    task: Annotated[str, typer.Option(help="Task id <service>/<difficulty>/<category>/<task>.")],
    dest: Annotated[Path, typer.Option(help="Empty folder to fill (a pod's state volume).")],
    tasks_root: Annotated[str, typer.Option(help="Task pack root: a folder or s3://bucket/prefix.")] = str(
        DEFAULT_TASKS
    ),
    states: Annotated[str | None, typer.Option(help="States folder (or s3://bucket/prefix) for foreign packs.")] = None,
    task_dest: Annotated[
        Path | None, typer.Option(help="Where an s3:// pack's task files go (a pod's task volume).")
    ] = None,
    endpoint_url: Annotated[str | None, typer.Option(help="S3 endpoint of an s3:// pack.")] = None,
    region: Annotated[str | None, typer.Option(help="S3 region of an s3:// pack.")] = None,
    digest: Annotated[
        str | None, typer.Option(help="The task digest the run was planned with; a different task is refused.")
    ] = None,
) -> None:
    """Materialise a task's initial state (a trial pod's init container runs this).

    With an s3:// pack it first fetches the task's folder (and its state) into --task-dest. With --digest
    it refuses a task whose files differ from what the run was planned with (a pack edited in S3 since,
    or a runner image bundling other tasks than the operator's)."""
    from mcpfleet.runner.results.store import StoreError
    from mcpfleet.runner.tasks import packs
    from mcpfleet.runner.tasks.discovery import find_task
    from mcpfleet.runner.tasks.materialise import materialise as fill

    if problem := _dest_problem(dest):
        _fail(problem)
    root, states_root = Path(tasks_root), Path(states) if states else None
    try:
        remote = [p for p in (tasks_root, states) if p and p.startswith("s3://")]
        if remote and task_dest is None:
            _fail("--task-dest is required with an s3:// pack: the folder the task's files are fetched into")
        if tasks_root.startswith("s3://"):
            assert task_dest is not None
            packs.sync(
                tasks_root,
                task_dest,
                endpoint_url=endpoint_url,
                region=region,
                field="--tasks-root",
                only=packs.task_scopes(task, states_in_pack=not states),
            )
            root = task_dest
        if states and states.startswith("s3://"):
            assert task_dest is not None
            states_root = task_dest / ".states"
            packs.sync(
                states,
                states_root,
                endpoint_url=endpoint_url,
                region=region,
                field="--states",
                only=packs.state_scopes(task),
            )
        chosen = find_task(root, task, states_root)
        if digest and (found := task_digest(chosen)) != digest:
            _fail(
                f"task {task} from {tasks_root} is not the one this run was planned with (digest {found}, "
                f"planned {digest}): the pack changed since, or the runner image bundles other tasks than the "
                "operator's; start a new EvalRun (or use matching images)"
            )
        if problem := _dest_overlap(dest, chosen):
            _fail(problem)
        try:
            if dest.is_dir() and any(dest.iterdir()):  # what it holds would become part of the task's initial state
                _fail(f"--dest {dest} is not empty; give an empty or missing folder (the state is copied in as is)")
            n = fill(chosen, dest)
        except OSError as exc:  # (a destination the kernel refuses: /proc/x, a read-only or full disk)
            why = exc.strerror or (str(exc.args[0][0][-1]) if isinstance(exc, shutil.Error) else str(exc))
            _fail(f"--dest {dest}: the initial state could not be copied there ({why[:300]}); give a writable folder")
    except (TaskError, StoreError) as exc:
        _fail(str(exc))
    print(json.dumps({"task": task, "files": n, "dest": str(dest)}))


@app.command("operator")
def run_operator(
    namespace: Annotated[
        list[str], typer.Option("--namespace", "-n", help="Namespace(s) to watch; default $POD_NAMESPACE or 'default'.")
    ] = [],  # noqa: B006
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A")] = False,
    liveness: Annotated[
        str | None, typer.Option(help="kopf liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    ] = None,
) -> None:
    """Run the Kubernetes operator (EvalRun custom resources -> one pod per trial)."""
    import os

    import mcpfleet.operator  # noqa: F401 - registers the handlers (before kopf: it keeps client libraries from kopf)
    from mcpfleet.operator.kube import api_client
    from mcpfleet.operator.peering import ensure_peering
    from mcpfleet.operator.settings import OperatorSettings, SettingsError

    namespaces = namespace or [os.environ.get("POD_NAMESPACE", "default")]
    try:
        cfg = OperatorSettings.from_env()
    except SettingsError as exc:  # e.g. a chart's trialPods value the operator refuses: said once, plainly
        _fail(str(exc))
    if cfg.peering:  # kopf keeps a replica paused, silently, while its peering object is missing

        async def peering_problems() -> list[str]:
            try:
                api = await api_client()
            except Exception as exc:  # noqa: BLE001 - kopf reports the connection itself
                return [f"could not check the peering object: {exc}"]
            try:
                return await ensure_peering(api, cfg.peering_name, namespaces, all_namespaces)
            except Exception as exc:  # noqa: BLE001
                return [f"could not check the peering object: {exc}"]
            finally:
                await api.close()

        for problem in asyncio.run(peering_problems()):
            err.print(f"[yellow]warning:[/] peering: {escape(problem)}", highlight=False, soft_wrap=True)
    import kopf  # (here, once mcpfleet.operator has imported it)

    # Log to stderr as `kopf run` does (INFO and up): kopf.run() alone configures no handler, so the operator's
    # warnings and failed reconcile steps reached only Kubernetes events, never `kubectl logs`.
    kopf.configure()
    kopf.run(  # peering (one active replica) or standalone: MCPFLEET_PEERING, applied by the startup handler
        clusterwide=all_namespaces,
        namespaces=[] if all_namespaces else namespaces,
        liveness_endpoint=liveness,
    )


@app.command()
def crd() -> None:
    """Print the EvalRun CustomResourceDefinition generated from the pydantic spec."""
    from mcpfleet.runner.spec.crd import render_crd_yaml

    sys.stdout.write(render_crd_yaml())


@app.command()
def validate(evalrun: Annotated[Path, typer.Argument(help="EvalRun YAML file.")]) -> None:
    """Validate an EvalRun and print its plan size, without running anything."""
    from mcpfleet.runner.launch.preflight import credential_problems, preflight
    from mcpfleet.runner.plan.expand import plan
    from mcpfleet.runner.results.store import StoreError

    try:
        spec = load_evalrun(evalrun)
        selected = preflight(spec, evalrun.resolve().parent, os.environ, local=False)
        trials = plan(spec, evalrun.resolve().parent, selected)
    except (SpecError, TaskError, StoreError) as exc:
        _fail(str(exc))
    tasks = len({t.task_id for t in trials})
    console.print(
        f"{escape(evalrun)}: valid; {plural(len(spec.spec.models), 'model')} x {plural(tasks, 'task')} x "
        f"{plural(spec.spec.attempts, 'attempt')} = {plural(len(trials), 'trial')}"
    )
    # Valid for the operator, but `mcpfleet run` on this machine would refuse it (a Secret reference): say so.
    operator_only = set(credential_problems(spec, os.environ)) - set(credential_problems(spec, os.environ, local=False))
    for problem in sorted(operator_only):
        note = f"for the operator only; `mcpfleet run` would refuse: {problem}"
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)


@app.command("scripted-server")
def scripted_server(
    tasks: Annotated[list[Path], typer.Option("--tasks", help="Task pack root(s).")] = [DEFAULT_TASKS],  # noqa: B006
    host: str = "127.0.0.1",
    port: int = 0,
    latency: Annotated[float, typer.Option(help="Seconds per LLM call.")] = 0.0,
) -> None:
    """Serve the scripted OpenAI-compatible model (oracle, noop, malformed, ... policies)."""
    from mcpfleet.runner.launch.scripted_server import serve

    if not 0 <= port <= 65535:
        _fail(f"--port {port}: not a TCP port; give 0-65535 (0 picks a free one)")
    try:
        serve(tasks, host=host, port=port, latency=latency)
    except TaskError as exc:
        _fail(f"--tasks: {exc}")
    except OSError as exc:  # (only binding raises it: the address is taken, or no interface has it)
        _fail(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc}); give another")


@app.command()
def report(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="Run roots: a local run folder (holding summary.json and trials/), or s3://bucket/prefix/RUN "
            "(s3://bucket/prefix/RUN/UID for an operator run)."
        ),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write.")] = Path("report.html"),
    endpoint_url: Annotated[str | None, typer.Option(help="S3 endpoint for non-AWS stores.")] = None,
    region: Annotated[str | None, typer.Option(help="S3 region.")] = None,
    title: Annotated[str | None, typer.Option(help="Page title.")] = None,
) -> None:
    """Write one self-contained HTML report (leaderboard and plots) over one or more runs."""
    from mcpfleet.runner.report.html import write_report
    from mcpfleet.runner.report.load import ReportError
    from mcpfleet.runner.report.table import summary_table
    from mcpfleet.runner.results.store import StoreError

    try:
        loaded = write_report(runs, output, endpoint_url=endpoint_url, region=region, title=title)
    except (ReportError, StoreError, ValueError) as exc:
        _fail(str(exc))
    for run in loaded:
        summary = dict(run.summary)
        if summary.get("trials_planned") is None:
            summary["trials_planned"] = "?"
        console.print(summary_table(summary))
        for note in run.notes:
            console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    console.print(f"report: {escape(output)}", highlight=False)


class ExportFormat(StrEnum):
    mcpmark = "mcpmark"


@app.command()
def export(
    run: Annotated[
        str, typer.Argument(help="Run root: a local run folder, s3://bucket/prefix/RUN or s3://bucket/prefix/RUN/UID.")
    ],
    dest: Annotated[Path, typer.Argument(help="Results folder to write into (MCPMark's ./results).")],
    fmt: Annotated[ExportFormat, typer.Option("--format", help="Layout to write.")] = ExportFormat.mcpmark,
    exp_name: Annotated[str | None, typer.Option(help="Experiment folder name; default: the run's name.")] = None,
    endpoint_url: Annotated[str | None, typer.Option(help="S3 endpoint for non-AWS stores.")] = None,
    region: Annotated[str | None, typer.Option(help="S3 region.")] = None,
) -> None:
    """Write a run's records in MCPMark's results layout (<exp>/<model>__<service>/run-N/<category>__<task>/),
    so MCPMark's aggregation script reads them. MCPMark's layout is the only --format so far."""
    assert fmt == ExportFormat.mcpmark
    from mcpfleet.runner.report.export import ExportError, export_mcpmark
    from mcpfleet.runner.report.load import ReportError, open_run
    from mcpfleet.runner.results.store import StoreError

    try:
        done = export_mcpmark(open_run(run, endpoint_url, region), dest, exp_name)
    except (ExportError, ReportError, StoreError) as exc:
        _fail(str(exc))
    console.print(
        f"exported {plural(done.trials, 'trial')} of {escape(', '.join(sorted(done.folders)))} to "
        f"{escape(shown_path(done.root))}",
        highlight=False,
    )
    if done.rebuilt:
        console.print(
            f"[yellow]note:[/] {done.rebuilt} meta.json rebuilt from result.json (recorded by an older mcpfleet)"
        )
    if done.unscored:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(done.unscored.items()))
        console.print(
            f"[yellow]note:[/] {plural(sum(done.unscored.values()), 'trial')} mcpfleet does not score ({kinds}): "
            "exported as MCPMark records them (success: false); MCPMark's aggregators count them as failures, "
            "mcpfleet's summary leaves them out. Run the same EvalRun again to re-run them, then export again.",
            highlight=False,
            soft_wrap=True,
        )
    if done.missing:
        console.print(
            f"[yellow]note:[/] {plural(done.missing, 'planned trial has', 'planned trials have')} no record yet (the "
            "run is not finished): MCPMark's aggregate_specific_results counts a task missing from a run folder as a "
            "failure, so its pass rates are lower than mcpfleet's summary until then. Run the same EvalRun again, then "
            "export again.",
            highlight=False,
            soft_wrap=True,
        )
    # aggregate_results --exp-name reports a model only with results for all five of MCPMark's services (and never
    # matches <service>-easy folders); aggregate_specific_results reads one <model>__<service> folder.
    console.print(
        f"MCPMark (from a checkout whose ./results is {escape(shown_path(done.root.parent))}), per folder:",
        highlight=False,
    )
    for folder in sorted(done.folders):
        console.print(
            "  python -m src.aggregators.aggregate_specific_results --result-dir "
            f"{escape(f'results/{done.root.name}/{folder}')} "
            f"--k {done.attempts}",
            highlight=False,
            soft_wrap=True,
        )
    if done.attempts == 1:
        # Its "pass@1" is both the per-run dict and, at --k 1, the pass@k it multiplies by 100: a TypeError.
        console.print(
            "  (at --k 1 MCPMark's script writes the folder's summary.json, then fails printing it: read that file)",
            highlight=False,
            soft_wrap=True,
        )


@tasks_app.command("list")
def tasks_list(
    path: Annotated[Path, typer.Argument(help="Task pack root or a folder inside one.")] = DEFAULT_TASKS,
) -> None:
    """List the tasks of a pack, or of a folder inside one (a service, difficulty, category or task folder)."""
    from rich.table import Table

    try:
        _, found = tasks_at(path)
    except TaskError as exc:
        _fail(str(exc))
    table = Table(title=f"{plural(len(found), 'task')} in {escape(path)}")
    for col in ("id", "difficulty", "oracle", "words"):
        table.add_column(col)
    broken = []
    for t in found:
        try:
            difficulty, words = str(t.meta.get("difficulty", "")), str(len(t.description.split()))
        except (TaskError, OSError) as exc:  # listed all the same; the reason is printed below the table
            difficulty = words = "?"
            broken.append(str(exc) if isinstance(exc, TaskError) else f"{t.id}: unreadable: {exc}")
        table.add_row(escape(t.id), escape(difficulty), "yes" if t.has_oracle else "no", words)
    console.print(table)
    for problem in broken:
        err.print(f"[yellow]warning:[/] {escape(problem)}", highlight=False, soft_wrap=True)
    if broken:
        err.print(f"check with: mcpfleet tasks validate {escape(str(path))}", highlight=False, soft_wrap=True)


def check_outcome(r: TaskReport) -> str:
    """What ``tasks validate`` found of one task, in words: "oracle passes, no-op fails, 3/3 mutants rejected". A
    check that did not run says so (no oracle.json; the checks stopped at a problem listed below it)."""
    oracle = {True: "oracle passes", False: "oracle fails", None: "oracle not run"}[r.oracle_passed]
    if r.oracle_passed is None and not r.task.has_oracle:
        oracle = "no oracle"
    words = [oracle, {True: "no-op fails", False: "no-op passes", None: "no-op not run"}[r.noop_failed]]
    if r.mutants_run:
        words.append(f"{len(r.mutants_rejected)}/{plural(r.mutants_run, 'mutant')} rejected")
    elif r.ok:  # every check ran
        words.append("no mutants")
    return ", ".join(words)


@tasks_app.command("validate")
def tasks_validate(
    path: Annotated[Path, typer.Argument(help="Task pack root or one task folder.")] = DEFAULT_TASKS,
    states: Annotated[Path | None, typer.Option(help="States folder for foreign packs.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Trials (oracle, no-op, mutants) run at once.")] = 2,
) -> None:
    """Check files, meta.json and mutants.json, then that the oracle passes and that the no-op agent and every
    mutant (a plausible wrong end state) fail."""
    from mcpfleet.runner.launch.taskcheck import validate as run_validation

    path = path.resolve()
    try:
        root, found = tasks_at(path, states)
    except TaskError as exc:
        _fail(str(exc))
    if not found:
        _fail(f"no task found at {path}")
    reports = asyncio.run(run_validation(found, root, states, concurrency))
    bad = 0
    for r in reports:
        status = "[green]ok[/]" if r.ok else "[red]FAIL[/]"
        console.print(f"{status} {escape(r.task.id)}  {escape(check_outcome(r))}", highlight=False)
        for p in r.problems:
            console.print(f"    [red]{escape(p)}[/]", highlight=False)
        for w in r.warnings:
            console.print(f"    [yellow]{escape(w)}[/]", highlight=False)
        bad += not r.ok
    console.print(f"{len(reports) - bad}/{plural(len(reports), 'task')} valid")
    if states is None and bad == len(reports) and all(r.state_missing for r in reports):
        err.print(  # one hint, not forty: MCPMark's tasks/ folder keeps no states (they are its test_environments/)
            f"[yellow]hint:[/] no task under {escape(path)} has its initial state; a foreign pack's states (MCPMark's "
            "test_environments/) are given with --states <folder>",
            highlight=False,
            soft_wrap=True,
        )
    if bad:
        raise typer.Exit(1)


tasks_app.command("stress")(tasks_stress)
tasks_app.command("new")(tasks_new)
app.command()(compare)
app.command("judge-eval")(judge_eval)
app.command("pods")(pods)
app.command()(view)
app.command()(show)
app.add_typer(servers_app, name="servers")
app.add_typer(toolcalls_app, name="toolcalls")


def main() -> None:
    run_app(app)


if __name__ == "__main__":
    main()
