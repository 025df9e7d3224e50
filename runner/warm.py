"""An MCP server started before its trial, so a worker's next trial does not wait for Node to boot.

A worker starts one spare server on a fresh, empty state folder while its current trial waits on the
model; the next trial materialises its state into that folder and takes the already-initialised
session. Each server still serves exactly one trial and dies with it: nothing is shared between trials.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Protocol

from mcp import ClientSession

from .mcp_client import connect_stdio
from .services import get_service

PREFIX = "mcpfleet-trial-"


class BootGate(Protocol):
    """A cross-process semaphore (``multiprocessing.Semaphore``): how many spare servers may boot at once."""

    def acquire(self, block: bool = ..., timeout: float | None = ...) -> bool: ...
    def release(self) -> None: ...


GATE_WAIT_S = 5.0  # a gate leaked by a killed worker delays a spare by this much, never blocks it


class WarmServer:
    def __init__(self, service: str, gate: BootGate | None = None):
        self.service = service
        self.gate = gate
        self.workdir = Path(tempfile.mkdtemp(prefix=PREFIX))
        self.state_dir = self.workdir / "state"
        self.state_dir.mkdir()
        self.log: IO[Any] = open(self.workdir / "mcp_server.log", "w+b")  # noqa: SIM115 - closed in close()
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._release = asyncio.Event()
        self._task = asyncio.create_task(self._hold(), name=f"warm-{service}")
        self._closed = False

    @classmethod
    def supports(cls, service: str) -> bool:
        """Only servers whose state is a folder given at start can be started before the state exists."""
        return service == "filesystem"

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
        cmd = get_service(self.service).server_command(self.state_dir)
        gated = False
        try:
            # Spares are speculative work: booting all workers' spares at once (a run's first wave
            # starts in lockstep) took the CPU the running trials' turns needed.
            gated = await self._pass_gate()
            async with connect_stdio(cmd, self.log, cwd=self.state_dir) as session:
                if gated:
                    self.gate.release()  # type: ignore[union-attr]
                    gated = False
                self._ready.set_result(session)
                await self._release.wait()
        except BaseException as exc:
            if gated:
                self.gate.release()  # type: ignore[union-attr]
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise

    async def session(self) -> ClientSession:
        """The initialised session; waits only if the server is still starting."""
        return await asyncio.shield(self._ready)

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
        self.log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
