"""Commands: ``mcpfleet toolcalls generate`` and ``mcpfleet judge-eval`` (registered by runner/cli/app.py).

Heavy imports (LiteLLM, pyarrow) happen inside the commands so ``mcpfleet --help`` stays fast.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from mcpfleet.runner._util.plural import plural
from mcpfleet.runner.cli.output import console, err
from mcpfleet.runner.cli.output import fail as _fail

toolcalls_app = typer.Typer(no_args_is_help=True, help="Tool-call quality data (limbic format).")
FORMATS = ("jsonl", "json", "parquet")


def output_file_problem(option: str, path: Path, example: str) -> str | None:
    """Why ``path`` cannot take an output file, checked before any work is done (judge-eval's evaluation may be
    paid judge calls; a folder there was a traceback after them): a folder, a missing or unwritable folder. A
    missing folder is refused, not created, as ``report -o`` refuses it (a typo made ``/nonexist/`` at the
    root)."""
    if path.is_dir():
        return f"{option} {path}: is a folder; name the file to write, e.g. {path / example}"
    parent = path.parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        return f"{option} {path}: the folder {parent} {what}; create it, or write elsewhere"
    try:
        fd, probe = tempfile.mkstemp(prefix=".mcpfleet-probe-", dir=parent)
    except OSError as exc:
        return f"{option} {path}: {parent} cannot be written ({exc.strerror or exc}); write elsewhere"
    os.close(fd)
    os.unlink(probe)
    return None


def _write_parquet(rows: list[dict], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        _fail("--format parquet needs pyarrow: pip install 'mcpfleet[parquet]'")
    # Tool schemas differ per row, so the nested lists are stored as JSON strings (as published sets do).
    flat = [
        {**r, "available_tools": json.dumps(r["available_tools"]), "message_history": json.dumps(r["message_history"])}
        for r in rows
    ]
    pq.write_table(pa.Table.from_pylist(flat), path)


@toolcalls_app.command()
def generate(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the data set into.")],
    n: Annotated[int, typer.Option("--n", min=1, help="Number of cases.")] = 5000,
    seed: Annotated[int, typer.Option(help="Seed; the same seed and n give the same file.")] = 0,
    fmt: Annotated[str, typer.Option("--format", help="jsonl, json or parquet.")] = "jsonl",
) -> None:
    """Generate a labelled limbic-format set from real and hand-written MCP tool schemas."""
    from mcpfleet.runner.toolcalls.generator import generate as make

    if fmt not in FORMATS:
        _fail(f"--format must be one of {', '.join(FORMATS)}")
    if out.exists() and not out.is_dir():  # (a FileExistsError traceback from mkdir)
        kind = "a file" if out.is_file() else "not a folder"
        _fail(f"--out {out}: is {kind}; give a folder to write the data set into (it is created if missing)")
    rows = [case.to_row() for case in make(n, seed)]
    path = out / f"toolcalls.{fmt}"
    labels = Counter(r["score"] for r in rows)
    mutations = Counter((r["score"], r.get("mutation") or "-") for r in rows)
    manifest = {
        "seed": seed,
        "n": n,
        "file": path.name,
        "labels": dict(sorted(labels.items())),
        "mutations": {f"{label}/{m}": c for (label, m), c in sorted(mutations.items())},
    }
    try:
        out.mkdir(parents=True, exist_ok=True)
        if fmt == "jsonl":
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        elif fmt == "json":
            path.write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        else:
            _write_parquet(rows, path)
        (out / "_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:  # a read-only or full disk, a file in the way under --out
        _fail(f"--out {out}: cannot be written ({exc.strerror or exc}); choose another folder")
    table = Table(title=f"{plural(n, 'case')} (seed {seed}) -> {escape(str(path))}")
    for col in ("label", "mutation", "cases"):
        table.add_column(col, justify="right" if col == "cases" else "left")
    for (label, m), c in sorted(mutations.items()):
        table.add_row(label, m, str(c))
    console.print(table)


@toolcalls_app.command()
def task(
    data: Annotated[Path, typer.Argument(help="Limbic-format data: a .jsonl/.json/.parquet file or a folder.")],
    pack: Annotated[Path, typer.Option("--pack", help="Task pack root to write the task into.")],
    name: Annotated[str, typer.Option(help="Task name (part of trial ids).")],
    category: Annotated[str, typer.Option(help="Category folder.")] = "limbic",
    difficulty: Annotated[str, typer.Option(help="Difficulty folder.")] = "standard",
) -> None:
    """Make a toolcall task (pack/toolcall/<difficulty>/<category>/<name>/) from limbic-format data."""
    from mcpfleet.runner.spec.task import TaskError
    from mcpfleet.runner.tasks.toolcall_pack import make_task
    from mcpfleet.runner.toolcalls.loader import DataError

    try:
        folder = make_task(pack, data, category, name, difficulty)
    except (TaskError, DataError, OSError) as exc:
        _fail(str(exc))
    console.print(f"task: {escape(str(folder))}", highlight=False)


def judge_eval(
    data: Annotated[Path, typer.Argument(help="Limbic-format data: a .jsonl/.json/.parquet file or a folder.")],
    judge: Annotated[
        str | None, typer.Option(help="LiteLLM model string of the judge, e.g. openai/gpt-5-mini or hosted_vllm/...")
    ] = None,
    api_base: Annotated[str | None, typer.Option(help="Judge endpoint (self-hosted OpenAI-compatible).")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Name of the environment variable holding the judge's API key.")
    ] = None,
    judge_all: Annotated[
        bool,
        typer.Option(
            "--judge-all/--schema-valid-only", help="Judge every call (judge metrics) or only schema-valid ones."
        ),
    ] = True,
    concurrency: Annotated[int, typer.Option(min=1, help="Judge calls in flight.")] = 8,
    rate: Annotated[float, typer.Option(min=0, help="Judge calls started per second (0: no limit).")] = 0.0,
    attempts: Annotated[int, typer.Option(min=1, help="Answers per case until one is valid JSON.")] = 3,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Judge cache folder (default ~/.cache/mcpfleet/judge).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the judge cache.")] = False,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Skip and count bad rows instead of stopping.")] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N cases.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full report as JSON.")] = None,
    html_out: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML page.")] = None,
    show: Annotated[int, typer.Option(min=0, help="Disagreements printed.")] = 10,
) -> None:
    """Score the checker, a judge model and checker+judge against labelled tool calls."""
    from mcpfleet.runner.results.records import redact, redact_text
    from mcpfleet.runner.toolcalls.evaluate import evaluate
    from mcpfleet.runner.toolcalls.loader import DataError, load_cases
    from mcpfleet.runner.toolcalls.report import html_report, text_report

    for option, path, example in (("--json", json_out, "eval.json"), ("--html", html_out, "eval.html")):
        if path is not None and (problem := output_file_problem(option, path, example)):
            _fail(problem)  # before the evaluation: its judge calls may be paid
    try:
        loaded = load_cases(data, skip_bad=skip_bad)
    except DataError as exc:
        _fail(str(exc))
    for bad in loaded.skipped:
        err.print(f"[yellow]skipped:[/] {escape(str(bad))}", highlight=False)
    if limit:
        loaded.cases = loaded.cases[:limit]
    if not loaded.cases:
        _fail(f"{data}: no cases to evaluate")
    judge_obj = None
    if judge:
        from mcpfleet.runner.toolcalls.judge import Judge, JudgeError
        from mcpfleet.runner.toolcalls.judge_cache import FILE_NAME, JudgeCache, default_cache_dir

        key = None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                _fail(f"--api-key-env {api_key_env}: that environment variable is not set")
        cache = None
        if not no_cache:
            folder = cache_dir or default_cache_dir()
            try:
                cache = JudgeCache(folder)
            except (sqlite3.Error, OSError) as exc:
                _fail(
                    f"judge cache {folder / FILE_NAME}: {exc}. Judge without it with --no-cache, "
                    "or choose another folder with --cache-dir"
                )
        judge_obj = Judge.for_model(
            judge,
            api_base=api_base,
            api_key=key,
            cache=cache,
            concurrency=concurrency,
            rate_per_second=rate or None,
            attempts=attempts,
        )

        async def judged(judge: Judge) -> dict[str, Any]:
            try:
                return await evaluate(loaded, judge, judge_all, str(data))
            finally:
                await judge.aclose()

        try:
            result = asyncio.run(judged(judge_obj))
        except JudgeError as exc:
            _fail(redact_text(str(exc), [key or ""]) or "")
        result = json.loads(redact(json.dumps(result, ensure_ascii=False, default=str).encode(), [key or ""]))
    else:
        result = asyncio.run(evaluate(loaded, None, judge_all, str(data)))
    # The files first: a report that cannot be printed must not cost the evaluation. A file that cannot be
    # written (checked above, but a disk may fill) is named after the text report, which still prints.
    unwritten = []
    outputs = [("--json", json_out, lambda: json.dumps(result, indent=1, ensure_ascii=False, default=str) + "\n")]
    outputs.append(("--html", html_out, lambda: html_report(result)))
    for option, path, text in outputs:
        if path is not None:
            try:
                path.write_text(text(), encoding="utf-8")
            except OSError as exc:
                unwritten.append(f"{option} {path}: cannot be written ({exc.strerror or exc})")
    console.print(text_report(result, show))
    for option, path, _ in outputs:
        if path is not None and not any(u.startswith(f"{option} ") for u in unwritten):
            console.print(f"{option.removeprefix('--')}: {escape(str(path))}")
    if unwritten:
        _fail("; ".join(unwritten))
