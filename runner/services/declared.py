"""A service declared as data (``<pack>/<service>/service.yaml``, spec/service_decl.py): no Python of its own.

Its trial is the engine's usual sequence: the state (a folder copied fresh with its file times, or none), its
backing services (backing.py), the declared MCP server (stdio, in the same sandbox as a bundled browser's, with
``SAFE_ENV`` and its declared ``env`` only; or a running streamable-HTTP ``url``), the agent, the verifier with the
declared ``verifier.env``. A variant of ``spec.servers`` is the same service with some server keys replaced
(``with_variant``). ``{root}`` in a tool call's arguments is the trial's state folder, substituted by the harness
(``tool_arguments``): many servers have no tool that names their folder, so the oracle cannot ask one.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.environment.server import ServerCommand, servers_bin, servers_root
from mcpfleet.runner.services.base import PodContext, Service, Spare, TrialEnv
from mcpfleet.runner.services.bridge import (
    bridge_init,
    bridge_mount,
    bridge_runner_args,
    bridge_volume,
    bridged_sidecar,
)
from mcpfleet.runner.spec.service_decl import (
    DECLARATION_FILE,
    ServerBlock,
    ServerVariant,
    ServiceDeclaration,
    StateKind,
    substitute,
)
from mcpfleet.runner.spec.task import substitute_root

if TYPE_CHECKING:
    from mcpfleet.runner.spec.task import Task


class DeclaredService(Service):
    """One pack's declared service, or a variant of it (``variant`` set)."""

    oracle_root_tool = None
    harness_root = True

    def __init__(
        self, name: str, declaration: ServiceDeclaration, folder: Path, variant: ServerVariant | None = None
    ) -> None:
        self.name = name
        self.declaration = declaration
        self.folder = folder  # <pack>/<service>/, where service.yaml is
        self.variant = variant
        self.refused_tools = frozenset(declaration.refused_tools)
        self.mcp_server = True
        self.spare_servers = self._spares()

    @property
    def path(self) -> Path:
        return self.folder / DECLARATION_FILE

    def _spares(self) -> bool:
        """Only a server declared ``warmStart`` (it reads its state when called, never at start), started by a
        command and with no backing service (which needs the trial's state first), may start before its trial."""
        server = self.server
        return server.warm_start and server.command is not None and not self.declaration.backing

    @asynccontextmanager
    async def spare(self, state_dir: Path, resource: Any) -> AsyncIterator[Spare]:
        # Off the event loop: a sandboxed command's plan and launcher file took ~8 ms of it (2 of CPU) on a loaded
        # machine, while the worker's current trial, whose agent that loop runs, is mid-way (docs/benchmarks.md).
        server = await asyncio.to_thread(self.server_command, state_dir, {}, [self.folder.parent])  # pack hidden
        yield DeclaredSpare(self, state_dir, server)

    @property
    def server(self) -> ServerBlock:
        """The server block with the variant's keys in place of the pack's."""
        if self.variant is None:
            return self.declaration.server
        block = self.declaration.server.model_dump(exclude_none=True)
        overrides = self.variant.overrides()
        if "url" in overrides:
            block.pop("command", None)
        if "command" in overrides:
            block.pop("url", None)
        return ServerBlock.model_validate({**block, **overrides})

    def with_variant(self, variant: ServerVariant | None) -> DeclaredService:
        return self if variant is None else DeclaredService(self.name, self.declaration, self.folder, variant)

    def launch_problems(self) -> list[str]:
        command = self.server.command
        if command is None:
            return []
        try:
            self.executable(command)
        except FileNotFoundError as exc:
            return [str(exc)]
        return []

    def own_image(self) -> str | None:
        return self.server.image

    def image_hint(self) -> str | None:
        where = f"spec.servers[{self.variant.name}].image or " if self.variant is not None else ""
        return f"{where}server.image in {self.path} (the image a trial pod runs the server in)"

    def tool_arguments(self, arguments: Any, state_dir: Path) -> Any:
        return substitute_root(arguments, str(state_dir))

    # -- the state -------------------------------------------------------------------------------------------

    def _folder_state(self) -> Service:
        from mcpfleet.runner.services.filesystem import FilesystemService

        return FilesystemService()

    def materialise(self, task: Task, dest: Path) -> int:
        if self.declaration.state.kind == StateKind.none:
            dest.mkdir(parents=True, exist_ok=True)
            return 0
        return self._folder_state().materialise(task, dest)

    def state_files(self, task: Task) -> list[Path]:
        # The declaration is part of what every task of the service measures: a changed server or prompt is a
        # changed task (its digest), so a resumed run never mixes records of the two.
        own = [self.path]
        if self.declaration.state.kind == StateKind.none:
            return own
        return own + self._folder_state().state_files(task)

    def state_names(self, category: str) -> list[str]:
        return [] if self.declaration.state.kind == StateKind.none else [category, f"{category}.times.json"]

    def check_state(self, task: Task) -> list[str]:
        if self.declaration.state.kind == StateKind.none:
            return []
        return self._folder_state().check_state(task)

    # -- the server ------------------------------------------------------------------------------------------

    def executable(self, command: str) -> Path:
        """``command`` as a path: relative to service.yaml's folder when it names a path (a variant's was made
        absolute against its EvalRun's folder when planned), else found on PATH or among mcpfleet's pinned servers
        (servers/node_modules/.bin). FileNotFoundError naming the key and the fix."""
        if os.sep in command:
            path = Path(command) if os.path.isabs(command) else (self.folder / command)
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise FileNotFoundError(
                    f"{self._origin('command')}: '{command}' is not an executable file (resolved: {path})"
                )
            return path
        found = shutil.which(command) or shutil.which(command, path=str(servers_bin()))
        if found is None:
            raise FileNotFoundError(
                f"{self._origin('command')}: '{command}' is not on PATH nor among mcpfleet's pinned servers "
                f"({servers_bin()}); install it, or give its path"
            )
        return Path(found)

    def _origin(self, key: str) -> str:
        if self.variant is not None and key in self.variant.overrides():
            return f"spec.servers[{self.variant.name}].{key}"
        return f"{self.path}: server.{key}"

    def server_command(self, state_dir: Path, ports: dict[str, int], hide: list[Path]) -> ServerCommand:
        from mcpfleet.runner.environment import sandbox
        from mcpfleet.runner.services.playwright import write_server_launcher

        server = self.server
        assert server.command is not None
        exe = self.executable(server.command)
        args = [substitute(a, state_dir, ports) for a in server.args]
        env = {k: substitute(v, state_dir, ports) for k, v in server.env.items()}
        real = Path(os.path.realpath(exe))
        # mcpfleet's pinned servers stay visible (a pinned Node server needs its node_modules, and a pack's
        # wrapper script may start one): they hold no secret and no task's answers.
        keep = [state_dir, exe, real, Path(os.path.realpath(servers_root()))]
        if not real.is_relative_to(self.folder.parent.resolve()):
            keep.append(real.parent)  # an installed server's own folder (a virtualenv's bin); never the pack
        hidden = sandbox.plan(keep, hide, own_pids=True)
        if hidden is None:
            return ServerCommand(str(exe), args, env)
        launcher = write_server_launcher(state_dir.parent / "declared-server", sandbox.command([str(exe)], hidden))
        return ServerCommand(str(launcher), args, env)

    def verifier_env(self, state_dir: Path, ports: dict[str, int]) -> dict[str, str]:
        return {k: substitute(v, state_dir, ports) for k, v in self.declaration.verifier.env.items()}

    def prompt(self, state_dir: Path, ports: dict[str, int]) -> str | None:
        text = self.declaration.prompt
        return substitute(text, state_dir, ports) if text else None

    @asynccontextmanager
    async def environment(
        self, task: Task, state_dir: Path, resource: Any, *, materialised: bool = False
    ) -> AsyncIterator[TrialEnv]:
        async with self._environment(task, state_dir, materialised, with_server=True) as env:
            yield env

    @asynccontextmanager
    async def _environment(
        self, task: Task, state_dir: Path, materialised: bool, with_server: bool
    ) -> AsyncIterator[TrialEnv]:
        """``with_server`` False: a spare's claim, whose server is running already (its command is not made).

        Without backing services the server's command is made in the same worker thread as the state's copy, right
        after it: a second thread's hand-off (two wake-ups) cost a cold trial ~2 ms on a loaded machine, which the
        bundled module, whose command is made on the loop in microseconds, does not pay (docs/benchmarks.md)."""
        from mcpfleet.runner.services import backing

        server = self.server
        make = with_server and not server.url  # a ``url`` server is running already: no command
        early = make and not self.declaration.backing  # (a backing service's port may be in the command)
        command = ServerCommand("", [])
        if early or not materialised:
            made = await asyncio.to_thread(self._prepare, task, state_dir, materialised, early)
            command = made or command
        async with AsyncExitStack() as stack:
            if materialised:  # a pod: its backing services are its sidecars, ready before this runner started
                ports = backing.pod_ports(self.declaration)
            else:
                ports = await stack.enter_async_context(backing.started(self.declaration, self.path, state_dir))
            url = substitute(server.url, state_dir, ports) if server.url else None
            if make and not early:
                command = await asyncio.to_thread(self._command, task, state_dir, ports, materialised)
            yield TrialEnv(
                state_dir,
                command,
                self.verifier_env(state_dir, ports),
                url=url,
                prompt=self.prompt(state_dir, ports),
            )

    def _prepare(self, task: Task, state_dir: Path, materialised: bool, command: bool) -> ServerCommand | None:
        """In a worker thread: the state (unless ``materialised``), then the server's command if asked."""
        if not materialised:
            self.materialise(task, state_dir)
        return self._command(task, state_dir, {}, materialised) if command else None

    def _command(self, task: Task, state_dir: Path, ports: dict[str, int], materialised: bool) -> ServerCommand:
        try:
            return self.server_command(state_dir, ports, [task.pack_root])
        except FileNotFoundError:
            # A pod's runner (state materialised by its init container): the server is its own image's, served
            # by the sidecar, and the runner image need not hold it. Elsewhere: the error stands.
            if not materialised:
                raise
            return ServerCommand("", [])

    # -- pods ------------------------------------------------------------------------------------------------

    @property
    def _bridged(self) -> bool:
        """Whether a trial pod runs the server from its image over the FIFO bridge (a command; not a ``url``)."""
        return self.server.command is not None and not self.server.url

    def pod_sidecars(self, params: dict[str, Any], pod: PodContext) -> list[dict[str, Any]]:
        """The backing services, then the server from its own image over the FIFO bridge (bridge.py): the image
        needs the server and nothing else, the helper comes from the runner image through the bridge volume."""
        from mcpfleet.runner.services.backing import pod_backing_sidecars, pod_port_env, pod_port_refs, pod_value

        server = self.server
        refs = pod_port_refs(self.declaration)
        sidecars = pod_backing_sidecars(self.declaration, self.path, pod)
        if server.url:
            return sidecars
        if server.command is None or server.image is None:
            raise ValueError(f"no MCP sidecar image for service '{self.name}'; set {self.image_hint()}")
        argv = [server.command.replace("$", "$$"), *(pod_value(a, pod.state_mount, refs) for a in server.args)]
        env = [{"name": k, "value": pod_value(v, pod.state_mount, refs)} for k, v in server.env.items()]
        env = [*pod_port_env(self.declaration), *env]
        return [*sidecars, bridge_init(pod), bridged_sidecar(self._container, server.image, argv, pod, env)]

    @property
    def _container(self) -> str:
        return f"mcp-{self.name}"

    def pod_volumes(self, params: dict[str, Any], pod: PodContext) -> list[dict[str, Any]]:
        return [bridge_volume(pod)] if self._bridged else []

    def pod_runner(self, params: dict[str, Any], pod: PodContext) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The bridge's mount, and the backing services' port variables (``verifier.env``, a ``url``)."""
        from mcpfleet.runner.services.backing import pod_port_env

        return ([bridge_mount()] if self._bridged else []), pod_port_env(self.declaration)

    def pod_mcp(self, params: dict[str, Any], pod: PodContext) -> list[str]:
        return bridge_runner_args(self._container) if self._bridged else []

    def fingerprint_key(self) -> str:
        """What identifies the declaration and variant a trial measured (before the server's own fingerprint)."""
        data = self.path.read_bytes() if self.path.is_file() else b""
        extra = repr(sorted(self.variant.overrides().items())).encode() if self.variant else b""
        return hashlib.sha256(data + b"\0" + extra).hexdigest()[:16]


class DeclaredSpare(Spare):
    """A declared ``warmStart`` server started on the worker's empty state folder; the claiming trial's state is
    copied in before its agent starts."""

    def __init__(self, service: DeclaredService, state_dir: Path, server: ServerCommand) -> None:
        self.service, self.state_dir, self.server = service, state_dir, server

    def claim(self, task: Task) -> AbstractAsyncContextManager[TrialEnv]:
        return self.service._environment(task, self.state_dir, materialised=False, with_server=False)
