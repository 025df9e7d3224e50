"""The filesystem service: a folder state, the pinned @modelcontextprotocol/server-filesystem over stdio.

No run-scoped resource; each trial's state is a copy of its category's folder with pinned file times.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.environment.server import SERVERS_ENV, ServerCommand, servers_bin
from mcpfleet.runner.services.base import Service, Spare, TrialEnv

if TYPE_CHECKING:
    from mcpfleet.runner.spec.task import Task

EXECUTABLE = "mcp-server-filesystem"


class FilesystemService(Service):
    name = "filesystem"
    spare_servers = True
    oracle_root_tool = "list_allowed_directories"
    mcpmark_states = "test_environments"

    def server_command(self, state_dir: Path) -> ServerCommand:
        exe = servers_bin() / EXECUTABLE
        if not exe.exists():
            raise FileNotFoundError(
                f"MCP server '{EXECUTABLE}' for service '{self.name}' not found at {exe}; "
                f"run scripts/setup.sh (npm ci in servers/) or set {SERVERS_ENV}"
            )
        # TZ pinned: the server prints file times in its local zone and tasks classify by date.
        return ServerCommand(str(exe), [str(state_dir)], {"TZ": "UTC"})

    @asynccontextmanager
    async def spare(self, state_dir: Path, resource: Any) -> AsyncIterator[Spare]:
        yield FolderSpare(self, state_dir)

    def verifier_env(self, state_dir: Path) -> dict[str, str]:
        return {"FILESYSTEM_TEST_DIR": str(state_dir)}

    @asynccontextmanager
    async def environment(
        self, task: Task, state_dir: Path, resource: Any, *, materialised: bool = False
    ) -> AsyncIterator[TrialEnv]:
        if not materialised:
            await asyncio.to_thread(self.materialise, task, state_dir)
        # The folder lives in the trial's working directory, which the engine removes.
        yield TrialEnv(state_dir, self.server_command(state_dir), self.verifier_env(state_dir))

    def materialise(self, task: Task, dest: Path) -> int:
        from mcpfleet.runner.environment.states import copy_state

        return copy_state(task.state_dir, dest, task.state_times, bound=task.state_bound)

    def state_files(self, task: Task) -> list[Path]:
        return [task.state_dir, task.state_times]

    def state_names(self, category: str) -> list[str]:
        return [category, f"{category}.times.json"]

    def check_state(self, task: Task) -> list[str]:
        """What ``materialise`` would refuse, found before any trial (``validate``, the run's preflight, ``tasks
        validate``): a missing state, links out of it or looping, a device, pipe or socket in it, a state too
        large to copy into every trial, and a malformed ``<category>.times.json``."""
        from mcpfleet.runner.environment.states import check_copyable, contained, load_times
        from mcpfleet.runner.spec.task import TaskError

        if not task.state_dir.is_dir():
            return [f"{task.id}: initial state {task.state_dir} not found"]
        try:
            check_copyable(task.state_dir, task.state_bound)
            times = task.state_times
            if times.exists() or times.is_symlink():
                contained(times, task.state_bound, "file times")
                load_times(times)
        except TaskError as exc:
            return [f"{task.id}: {exc}"]
        except OSError as exc:
            return [f"{task.id}: initial state {task.state_dir} cannot be read ({exc})"]
        return []


class FolderSpare(Spare):
    """A server started on an empty folder; the claiming trial's state is copied in before the agent starts
    (the server lists and reads the folder only when asked)."""

    def __init__(self, service: FilesystemService, state_dir: Path):
        self.service, self.state_dir = service, state_dir
        self.server = service.server_command(state_dir)

    def claim(self, task: Task) -> AbstractAsyncContextManager[TrialEnv]:
        return self.service.environment(task, self.state_dir, None)
