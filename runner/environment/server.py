"""How a trial's MCP server is started: its command, the environment it may inherit, where the pinned servers are."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SERVERS_ENV = "MCPFLEET_SERVERS_DIR"


def servers_root() -> Path:
    """Folder with the pinned MCP servers (servers/ in the repo, or the image's copy)."""
    base = os.environ.get(SERVERS_ENV)
    return Path(base) if base else Path(__file__).resolve().parents[2] / "servers"


def servers_bin() -> Path:
    """Folder with the pinned Node MCP server executables (``npm ci`` in servers/)."""
    return servers_root() / "node_modules" / ".bin"


# The only variables an MCP server inherits from mcpfleet's environment: never API keys or cloud credentials.
SAFE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "NODE_PATH", "SYSTEMROOT")


@dataclass(frozen=True)
class Prefork:
    """How a Python stdio MCP server can be forked from a zygote instead of started (see prefork.py): its own
    interpreter and its entry point, a console script found in that interpreter's entry-point metadata
    (``script``) or ``module:function`` (``entry``, importable from ``path``). ``env`` is what its import sees
    (never a secret: each forked server gets its own command's environment)."""

    python: str
    script: str | None = None
    entry: str | None = None
    path: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def identity(self) -> str:
        """What a stub asks its zygote for (a zygote serves one server)."""
        return self.entry or f"script:{self.script}"


@dataclass(frozen=True)
class ServerCommand:
    command: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict, repr=False)  # may hold a DSN with a password
    # Set when this command is that Python server's entry point with these args: a zygote can run it instead.
    prefork: Prefork | None = None
    # The server's working folder; None: the trial's state folder. A server that lets tool arguments write files
    # under its working folder (playwright-mcp's ``filename``) gets an empty one of its own.
    cwd: Path | None = None

    def argv(self) -> list[str]:
        return [self.command, *self.args]
