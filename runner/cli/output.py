"""Where the commands print: the two consoles, text from outside shown literally, and the one way to refuse."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape as _markup_escape

from mcpfleet.runner._util.printable import printable

# Piped output gets a wide fixed width: the summary table is for reading in logs, not for wrapping.
console = Console(width=None if sys.stdout.isatty() else 200)
# Errors and warnings are never hard-wrapped: a path or a line in a log stays whole, to copy or grep.
err = Console(stderr=True, soft_wrap=True)


def escape(text: object) -> str:
    """Text from outside (a provider's error, a path, a task's name) shown literally: neither markup nor
    terminal control sequences (see printable)."""
    return _markup_escape(printable(text, one_line=False))


def fail(message: str, code: int = 2) -> NoReturn:
    """``error: <message>`` on stderr and exit ``code`` (2: the input was refused)."""
    err.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def run_app(app: typer.Typer, **kwargs: object) -> None:
    """Run a typer app as the ``mcpfleet`` command, a link that loops reported as one line."""
    try:
        app(**kwargs)
    except RuntimeError as exc:
        # Python 3.11's Path.resolve() raises RuntimeError (not OSError) on a link that loops, from any of the
        # places a command resolves a path the user gave (a pack, a states folder, a run folder, a DEST).
        if not str(exc).startswith("Symlink loop"):
            raise
        err.print(f"[red]error:[/] {escape(exc)}: a symbolic link that loops; fix or remove it", highlight=False)
        sys.exit(2)
