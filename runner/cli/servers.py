"""Commands for a pack's own MCP servers: ``servers inspect`` (what a declared server offers a model, before any
trial of it), ``tasks new`` (a task folder to fill in) and ``compare`` (server variants on paired trials)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mcpfleet.runner.cli.output import console, err, escape
from mcpfleet.runner.cli.output import fail as _fail

if TYPE_CHECKING:
    from mcpfleet.runner.services import Service
    from mcpfleet.runner.spec.task import Task

servers_app = typer.Typer(no_args_is_help=True, help="Inspect the MCP servers packs declare.")


def _targets_of_pack(folder: Path) -> list[tuple[Service, Task, str]]:
    """PACK/<service>: the service its service.yaml declares, with its first task (whose state it is given)."""
    from mcpfleet.runner.services import register_pack
    from mcpfleet.runner.spec.service_decl import DECLARATION_FILE
    from mcpfleet.runner.tasks.discovery import discover

    if not (folder / DECLARATION_FILE).is_file():
        _fail(f"{folder}: no {DECLARATION_FILE} here; give PACK/<service> (the folder holding it) or an EvalRun file")
    pack, name = folder.resolve().parent, folder.resolve().name
    declared = register_pack(pack, [name])
    tasks = [t for t in discover(pack, overrides=[name]) if t.service == name]
    if not tasks:
        _fail(
            f"{folder}: the service has no task (<difficulty>/<category>/<task>/description.md), so no state to "
            "start its server on"
        )
    return [(declared[name], tasks[0], name)]


def _targets_of_run(path: Path) -> list[tuple[Service, Task, str]]:
    """An EvalRun: each declared service its selection reaches, once per server variant."""
    from mcpfleet.runner.plan.expand import variants_of, with_variant_paths
    from mcpfleet.runner.services import service_of
    from mcpfleet.runner.spec.load import load_evalrun
    from mcpfleet.runner.tasks.discovery import load_selection, resolve_pack

    run = load_evalrun(path)
    base = path.resolve().parent
    run = with_variant_paths(run, base)
    tasks = load_selection(run.spec.tasks, base)
    root, _ = resolve_pack(run.spec.tasks, base)
    out = []
    for service in sorted({t.service for t in tasks}):
        first = next(t for t in tasks if t.service == service)
        if not service_of(service, root).harness_root:
            continue  # a bundled service: its server is mcpfleet's own
        for variant in variants_of(run, first):
            label = service if variant is None else f"{service}@{variant.name}"
            out.append((service_of(service, root, variant), first, label))
    if not out:
        _fail(f"{path}: its tasks use no declared service (<pack>/<service>/service.yaml)")
    return out


@servers_app.command("inspect")
def inspect(
    target: Annotated[Path, typer.Argument(help="PACK/<service> (a folder with service.yaml) or an EvalRun file.")],
    model: Annotated[str, typer.Option(help="The LiteLLM model whose tokenizer counts the tool list.")] = "gpt-4o",
    as_json: Annotated[bool, typer.Option("--json", help="The reports as JSON, schemas whole.")] = False,
) -> None:
    """Start each declared server once (on a copy of its first task's state) and print its serverInfo, its tools
    with their input schemas, and the tokens the tool list costs a model. Exit 1 when a server does not start or
    lists no tools an agent may call."""
    from mcpfleet.runner.launch.inspect_servers import inspect_all
    from mcpfleet.runner.spec.load import SpecError
    from mcpfleet.runner.spec.task import TaskError

    try:
        targets = _targets_of_run(target) if target.is_file() else _targets_of_pack(target)
        reports = asyncio.run(inspect_all(targets, model))
    except (SpecError, TaskError) as exc:
        _fail(str(exc))
    if as_json:
        console.print_json(json.dumps([r.__dict__ for r in reports]))
    for r in reports:
        if not r.ok:
            err.print(f"[red]error:[/] {escape(r.label)}: {escape(r.error)}", highlight=False, soft_wrap=True)
            continue
        if as_json:
            continue
        tokens = f"{r.tokens:,} tokens ({escape(model)})" if r.tokens is not None else "tokens not counted"
        console.print(
            f"[bold]{escape(r.label)}[/]: {escape(r.name)} {escape(r.version)}, {len(r.tools)} tools, {tokens}, "
            f"{escape(r.digest)}",
            highlight=False,
        )
        for tool in r.tools:
            fn = tool["function"]
            first = (fn["description"] or "").strip().splitlines()[:1]
            console.print(f"  [cyan]{escape(fn['name'])}[/]  {escape(first[0] if first else '')}", highlight=False)
            console.print(
                f"    {escape(json.dumps(fn['parameters'], sort_keys=True))}", highlight=False, soft_wrap=True
            )
        if r.refused:
            console.print(f"  refused (refusedTools): {escape(', '.join(r.refused))}", highlight=False)
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


def tasks_new(
    path: Annotated[Path, typer.Argument(help="PACK/<service>/<category>/<task>: the task folder to create.")],
    difficulty: Annotated[str, typer.Option(help="The difficulty folder it goes in.")] = "standard",
) -> None:
    """Scaffold a task folder (description.md, meta.json, a verify.py stub, an empty oracle.json) that `tasks
    validate` accepts once filled in; for a declared service the stub reads its verifier's variables."""
    from mcpfleet.runner.spec.service_decl import DECLARATION_FILE
    from mcpfleet.runner.spec.task import TaskError
    from mcpfleet.runner.tasks.scaffold import scaffold

    parts = path.parts
    if len(parts) < 4:
        _fail(f"{path}: give PACK/<service>/<category>/<task> (e.g. mypack/shop/orders/refund_late_order)")
    pack, (service, category, name) = Path(*parts[:-3]), parts[-3:]
    env: list[str] = []
    declaration = pack / service / DECLARATION_FILE
    if declaration.is_file():
        from mcpfleet.runner.spec.service_decl import parse_declaration
        from mcpfleet.runner.spec.yamlload import load_file

        try:
            env = sorted(parse_declaration(declaration, load_file(declaration)[0]).verifier.env)
        except (TaskError, ValueError, IndexError) as exc:
            _fail(f"{declaration}: {exc}")
    try:
        folder = scaffold(pack, service, category, name, difficulty, env)
    except TaskError as exc:
        _fail(str(exc))
    console.print(f"created {escape(folder)}", highlight=False)
    console.print(
        "next: write description.md, the oracle's tool calls in oracle.json ({root} is the trial's state folder), "
        "verify.py's checks, and mutants.json (plausible wrong end states); the state goes in "
        f"{escape(pack / service / 'states' / category)}/; then: mcpfleet tasks validate {escape(folder)}",
        highlight=False,
        soft_wrap=True,
    )


def compare(
    run: Annotated[
        str, typer.Argument(help="Run root: a local run folder, s3://bucket/prefix/RUN or s3://bucket/prefix/RUN/UID.")
    ],
    baseline: Annotated[str, typer.Option(help="The server variant (spec.servers name) the others are compared to.")],
    fail_if_worse: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Exit 1 when a variant's pass@1 is below the baseline's by more than this, with 95% confidence "
            "(the interval's upper bound below -X), for any model: a CI gate for an MCP server.",
        ),
    ] = None,
    endpoint_url: Annotated[str | None, typer.Option(help="S3 endpoint for non-AWS stores.")] = None,
    region: Annotated[str | None, typer.Option(help="S3 region.")] = None,
) -> None:
    """Compare a run's server variants against one of them, per model, on paired trials (same task and attempt):
    pass@1 of each, the difference with a 95% paired-bootstrap interval, McNemar's exact p, the tasks that
    flipped, and token, turn and tool-call deltas."""
    from mcpfleet.runner.report.compare import compare, variants_by_service, worse_than
    from mcpfleet.runner.report.load import ReportError, load_run
    from mcpfleet.runner.report.table import comparison_table
    from mcpfleet.runner.results.store import StoreError

    try:
        loaded = load_run(run, endpoint_url=endpoint_url, region=region)
    except (ReportError, StoreError, ValueError) as exc:
        _fail(str(exc))
    services = {s: vs for s, vs in variants_by_service(loaded.records).items() if baseline in vs}
    if not services:
        known = sorted({f"{s}@{v}" for s, vs in variants_by_service(loaded.records).items() for v in vs})
        _fail(
            f"--baseline {baseline}: no trial of {run} ran that server variant; "
            + (f"its variants: {', '.join(known)}" if known else "the run has no server variants (spec.servers)")
        )
    results = [
        c
        for s, vs in sorted(services.items())
        for v in vs
        if v != baseline
        for c in compare(loaded.records, s, baseline, v)
    ]
    if not results:
        _fail(f"--baseline {baseline}: no other variant has a scored trial paired with one of {baseline}'s")
    console.print(comparison_table(results))
    for c in results:
        for way, tasks in (("better", c["flipped_up"]), ("worse", c["flipped_down"])):
            if tasks:
                console.print(
                    f"{escape(c['model'])} {escape(c['variant'])} {way} on: {escape(', '.join(tasks))}",
                    highlight=False,
                    soft_wrap=True,
                )
    if fail_if_worse is not None and (bad := worse_than(results, fail_if_worse)):
        for c in bad:
            err.print(
                f"[red]worse:[/] {escape(c['model'])}: {escape(c['variant'])} {c['difference']:+.2f} against "
                f"{escape(baseline)} (95% CI {c['ci95'][0]:+.2f} to {c['ci95'][1]:+.2f}, below -{fail_if_worse:g})",
                highlight=False,
                soft_wrap=True,
            )
        raise typer.Exit(1)
