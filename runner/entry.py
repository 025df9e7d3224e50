"""The ``mcpfleet`` console script: Ctrl-C at any moment, the seconds of imports included, is one line.

This module imports nothing heavy, so that a KeyboardInterrupt raised while the CLI's own imports (typer,
rich, pydantic) run is caught here instead of ending in a traceback."""

from __future__ import annotations

import sys

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C


def interrupted_line(argv: list[str]) -> str:
    """The one line printed on Ctrl-C; a run is resumable, so say how."""
    if "run" in argv[1:2]:
        return "interrupted: finished trials are recorded; run the same command again to resume."
    return "interrupted."


def main() -> None:
    try:
        from .cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        try:
            sys.stderr.write(interrupted_line(sys.argv) + "\n")
            sys.stderr.flush()
        finally:
            sys.exit(INTERRUPTED)
