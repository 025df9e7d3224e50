"""An MCP server started before its trial, so a worker's next trial does not wait for Node to boot.

A worker starts one spare server on a fresh, empty state folder while its current trial waits on the
model; the next trial materialises its state into that folder and takes the already-initialised
session. Each server still serves exactly one trial and dies with it: nothing is shared between trials.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import IO, Any, Protocol

from mcp import ClientSession

from mcpfleet.runner._util import tmpdirs
from mcpfleet.runner.environment.mcp_client import connect_stdio
from mcpfleet.runner.services import Spare, TrialEnv, service_of
from mcpfleet.runner.spec.task import Task
from mcpfleet.runner.spec.trial import SpareBoot


class BootGate(Protocol):
    """A cross-process semaphore (``multiprocessing.Semaphore``): how many spare servers may boot at once."""

    def acquire(self, block: bool = ..., timeout: float | None = ...) -> bool: ...
    def release(self) -> None: ...


GATE_WAIT_S = 5.0  # a gate leaked by a killed worker delays a spare by this much, never blocks it


class WarmServer:
    def __init__(
        self,
        service: str,
        gate: BootGate | None = None,
        resource: Any = None,
        pack: str | None = None,
        variant: Any = None,
    ):
        self.service = service
        self.pack, self.variant = pack, variant  # a declared service's pack, and the server variant it runs
        self.gate = gate
        self.resource = resource  # the service's run-scoped resource (the run's PostgreSQL cluster)
        # The spare environment (e.g. a login role and database name) outlives the server: it is removed in
        # close(), after the verifier, or, once claimed, by the claiming trial.
        self._spare_stack = AsyncExitStack()
        self._spare: asyncio.Future[Spare] = asyncio.get_running_loop().create_future()
        self.workdir = tmpdirs.make()
        self.state_dir = self.workdir / "state"
        self.state_dir.mkdir()
        self.log: IO[Any] = open(self.workdir / "mcp_server.log", "w+b")  # noqa: SIM115 - closed in close()
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._release = asyncio.Event()
        self._task = asyncio.create_task(self._hold(), name=f"warm-{service}")
        self._closed = False
        self.boot = SpareBoot()

    @classmethod
    def supports(cls, service: str, pack: str | None = None, variant: Any = None) -> bool:
        """Only servers whose state is a folder given at start can be started before the state exists.
        ``pack``: the trial's pack, whose declared services are found there; ``variant``: its server variant."""
        return service_of(service, pack, variant).spare_servers

    async def _pass_gate(self) -> bool:
        """Wait (without blocking the loop) until few enough spares are booting; False if not gated."""
        if self.gate is None:
            return False
        deadline = asyncio.get_running_loop().time() + GATE_WAIT_S
        while not self.gate.acquire(False):
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def _hold(self) -> None:
        gated = False
        try:
            # Spares are speculative work: booting all workers' spares at once (a run's first wave
            # starts in lockstep) took the CPU the running trials' turns needed.
            gated = await self._pass_gate()
            service = service_of(self.service, self.pack, self.variant)
            t = time.perf_counter()
            spare = await self._spare_stack.enter_async_context(service.spare(self.state_dir, self.resource))
            self._spare.set_result(spare)
            async with connect_stdio(spare.server, self.log, cwd=self.state_dir) as session:
                self.boot.mcp_start = time.perf_counter() - t
                t = time.perf_counter()
                await spare.started(session)
                self.boot.started = time.perf_counter() - t
                if gated and self.gate is not None:  # gated implies a gate
                    self.gate.release()
                    gated = False
                self._ready.set_result(session)
                await self._release.wait()
        except BaseException as exc:
            if gated and self.gate is not None:
                self.gate.release()
            failure = exc if isinstance(exc, Exception) else RuntimeError(repr(exc))
            for fut in (self._spare, self._ready):
                if not fut.done():
                    fut.set_exception(failure)
            if not isinstance(exc, Exception):
                raise

    async def session(self) -> ClientSession:
        """The initialised session; waits only if the server is still starting."""
        return await asyncio.shield(self._ready)

    def fits(self, task: Task, variant: Any = None) -> bool:
        """Whether this spare can become ``task``'s environment (its trial running server ``variant``)."""
        if task.service != self.service or variant != self.variant:
            return False
        return service_of(self.service, self.pack, self.variant).spare_fits(task)

    @asynccontextmanager
    async def environment(self, task: Task) -> AsyncIterator[TrialEnv]:
        """The spare claimed as ``task``'s environment (for a filesystem spare: its state copied in while the
        server may still be booting; for a database spare: once the server is up)."""
        spare = await asyncio.shield(self._spare)
        if spare.needs_session:
            await self.session()
        # The server's log is the trial's record: say where the spare's start-up ends (a database spare's
        # start-up includes the error of its one discarded call).
        # os.write: at the offset the server's own writes share (its stderr is this file), not a buffered copy's.
        os.write(
            self.log.fileno(), b"--- mcpfleet: spare server claimed by this trial; earlier lines: its start-up ---\n"
        )
        async with spare.claim(task) as env:
            yield env

    def release(self) -> None:
        """Let the server stop without waiting for it (the agent's run is over); ``stop``, which the trial awaits
        before its verifier (nothing of the agent's may run on under it), or ``close`` then waits for it."""
        self._release.set()

    async def stop(self) -> None:
        """Stop the server process (the folder stays for the verifier and the record)."""
        self._release.set()
        try:
            await self._task
        except BaseException:  # noqa: BLE001 - a server that died is reported by the trial that used it
            pass

    async def close(self) -> None:
        """Stop the server and remove its folder."""
        if self._closed:
            return
        self._closed = True
        await self.stop()
        try:
            await self._spare_stack.aclose()
        except Exception:  # noqa: BLE001 - a spare that could not be removed goes with the run's resource
            pass
        self.log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
