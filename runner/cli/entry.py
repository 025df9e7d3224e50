"""The ``mcpfleet`` console script: Ctrl-C at any moment, the seconds of imports included, is one line.

This module imports nothing heavy, so that a KeyboardInterrupt raised while the CLI's own imports (typer,
rich, pydantic) run is caught here instead of ending in a traceback."""

from __future__ import annotations

import sys

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C
# Commands served by their own small typer app (cli/view.py's ``light_app``, the same functions): the full app
# imports the EvalRun model, the services and the launcher, a second or more before ``view`` could serve.
LIGHT = ("view", "show")


def interrupted_line(argv: list[str]) -> str:
    """The one line printed on Ctrl-C; a run is resumable, so say how."""
    if "run" in argv[1:2]:
        return "interrupted: finished trials are recorded; run the same command again to resume."
    return "interrupted."


def _from_interrupt(exc: SystemExit) -> bool:
    """Typer turns a KeyboardInterrupt raised inside a command into a silent exit 130 (``Exit(130) from`` it)."""
    if exc.code != INTERRUPTED:
        return False
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def _say_interrupted() -> None:
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):  # Python restores the default handlers as it exits: a late press
        signal.signal(sig, signal.SIG_IGN)  # then killed the process with -2 instead of exit code 130
    try:
        sys.stderr.write(interrupted_line(sys.argv) + "\n")
        sys.stderr.flush()
    finally:
        sys.exit(INTERRUPTED)


def main() -> None:
    """The CLI, with this module the only place that words a Ctrl-C: during the imports, inside a command (a
    run's own clean-up re-raises it) or in typer's parsing."""
    try:
        if sys.argv[1:2] and sys.argv[1] in LIGHT:
            from mcpfleet.runner.cli.view import light_main

            light_main()
        else:
            from mcpfleet.runner.cli.app import main as cli_main

            cli_main()
    except KeyboardInterrupt:
        _say_interrupted()
    except SystemExit as exc:
        if _from_interrupt(exc):
            _say_interrupted()
        raise
