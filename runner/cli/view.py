"""``mcpfleet view`` (the runs' pages from a local HTTP server) and ``mcpfleet show`` (the same in the terminal)."""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mcpfleet.runner.cli.output import console, err, escape, run_app
from mcpfleet.runner.cli.output import fail as _fail

if TYPE_CHECKING:
    from rich.console import RenderableType

    from mcpfleet.runner.report.viewer.runs import Run

RUNS_HELP = (
    "Run roots: a local run folder (holding trials/), or s3://bucket/prefix/RUN (s3://bucket/prefix/RUN/UID for an "
    "operator run)."
)


def _open(refs: list[str], endpoint_url: str | None, region: str | None, use_cache: bool = True) -> list[Run]:
    from mcpfleet.runner.report.roots import ReportError
    from mcpfleet.runner.report.viewer.runs import open_runs
    from mcpfleet.runner.results.store import StoreError

    try:
        return open_runs(refs, endpoint_url, region, use_cache)
    except (ReportError, StoreError) as exc:
        _fail(str(exc))


def view(
    runs: Annotated[list[str], typer.Argument(help=RUNS_HELP)],
    port: Annotated[int, typer.Option(help="TCP port to listen on; 0 picks a free one.")] = 8765,
    host: Annotated[str, typer.Option(help="Address to listen on; the default is this machine only.")] = "127.0.0.1",
    endpoint_url: Annotated[str | None, typer.Option(help="S3 endpoint for non-AWS stores.")] = None,
    region: Annotated[str | None, typer.Option(help="S3 region.")] = None,
    cache: Annotated[
        bool, typer.Option(help="Keep a local run's index and search index in the viewer's cache, and read them.")
    ] = True,
) -> None:
    """Serve the runs' pages: a task x model matrix per service, every trial's transcript, filters, search and
    run-to-run comparison, read from the run folders on demand (Ctrl-C stops)."""
    import uvicorn

    from mcpfleet.runner.report.viewer.app import make_app

    if not 0 <= port <= 65535:
        _fail(f"--port {port}: not a TCP port; give 0-65535 (0 picks a free one)")
    loaded = _open(runs, endpoint_url, region, cache)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)  # before the URL is printed: a browser pointed at it at once is not refused
    except OSError as exc:
        _fail(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc}); give another")
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    trials = sum(len(r.rows) for r in loaded)
    console.print(
        f"serving {len(loaded)} run(s), {trials} trial(s) at http://{escape(shown)}:{bound}/ (Ctrl-C stops)",
        highlight=False,
    )
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print(
            f"[yellow]warning:[/] --host {escape(host)}: anyone who can reach it reads these runs' transcripts",
            highlight=False,
        )
    config = uvicorn.Config(make_app(loaded, search_index=cache), log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


def show(
    run: Annotated[str, typer.Argument(help=RUNS_HELP.replace("Run roots: a", "Run root: a"))],
    trial: Annotated[str | None, typer.Argument(help="A trial id: its transcript instead of the matrix.")] = None,
    sort: Annotated[str, typer.Option(help="Matrix rows: task, difficulty or disagreement.")] = "task",
    full: Annotated[bool, typer.Option("--full", help="Long entries whole, not cut.")] = False,
    endpoint_url: Annotated[str | None, typer.Option(help="S3 endpoint for non-AWS stores.")] = None,
    region: Annotated[str | None, typer.Option(help="S3 region.")] = None,
) -> None:
    """Print a run's matrix (tasks x models per service), or one trial's transcript, verifier output and log;
    paged when stdout is a terminal."""
    from mcpfleet.runner.report.viewer.matrix import SORTS, matrices
    from mcpfleet.runner.report.viewer.terminal import matrix_tables, trial_view

    if sort not in SORTS:
        _fail(f"--sort {sort}: not a sort order; give one of {', '.join(SORTS)}")
    (loaded,) = _open([run], endpoint_url, region)
    renderables: list[RenderableType]
    if trial is None:
        renderables = list(matrix_tables(matrices(loaded.rows, sort)))
    else:
        row = loaded.by_id.get(trial)
        if row is None:
            near = [t for t in loaded.by_id if trial in t][:5]
            hint = f"; did you mean {', '.join(near)}" if near else "; `mcpfleet show RUN` lists the run's tasks"
            _fail(f"{trial}: no such trial in {run}{hint}")
        rec, transcript = loaded.transcript(trial)
        log = (loaded.read(trial, "trial.log") or b"").decode("utf-8", "replace")
        renderables = [trial_view(row, rec, transcript, log, full)]
    if sys.stdout.isatty():
        with console.pager(styles=True):
            for r in renderables:
                console.print(r)
    else:
        for r in renderables:
            console.print(r)


# ``mcpfleet view`` and ``mcpfleet show`` alone (entry.py runs this app for them): the same commands as in the full
# app (cli/app.py registers these functions too), without its imports.
light_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
light_app.command()(view)
light_app.command()(show)


def light_main() -> None:
    run_app(light_app, prog_name="mcpfleet")
