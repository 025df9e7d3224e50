"""How each MCP service is started and what its verifier is told.

One place per service: the pinned server command (stdio locally, behind a streamable-HTTP bridge in a
pod sidecar) and the verifier's environment in MCPMark's contract. Adding PostgreSQL or Playwright
means adding a ``Service`` here, not touching the trial engine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SERVERS_ENV = "MCPFLEET_SERVERS_DIR"


def servers_bin() -> Path:
    """Folder with the pinned MCP server executables (``npm ci`` in servers/, or the image's copy)."""
    base = os.environ.get(SERVERS_ENV)
    root = Path(base) if base else Path(__file__).resolve().parents[1] / "servers"
    return root / "node_modules" / ".bin"


@dataclass(frozen=True)
class ServerCommand:
    command: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        return [self.command, *self.args]


@dataclass(frozen=True)
class Service:
    name: str
    executable: str

    def server_command(self, state_dir: Path) -> ServerCommand:
        exe = servers_bin() / self.executable
        if not exe.exists():
            raise FileNotFoundError(
                f"MCP server '{self.executable}' for service '{self.name}' not found at {exe}; "
                f"run scripts/setup.sh (npm ci in servers/) or set {SERVERS_ENV}"
            )
        # TZ pinned: the filesystem server prints file times in its local zone and tasks classify by date.
        return ServerCommand(str(exe), [str(state_dir)], {"TZ": "UTC"})

    def verifier_env(self, state_dir: Path) -> dict[str, str]:
        return {"FILESYSTEM_TEST_DIR": str(state_dir)}


SERVICES: dict[str, Service] = {
    "filesystem": Service("filesystem", "mcp-server-filesystem"),
}


def get_service(name: str) -> Service:
    try:
        return SERVICES[name]
    except KeyError:
        raise ValueError(f"service '{name}' is not supported yet; known: {', '.join(sorted(SERVICES))}") from None
