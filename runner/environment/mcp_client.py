"""Connect to an MCP server over stdio (local), streamable HTTP (a pod's sidecar) or a pod's FIFO bridge (a
declared stdio server's sidecar) with one API."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
import shutil
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any, TextIO, cast

import anyio
import mcp.client.stdio as sdk_stdio
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED

from mcpfleet.runner.environment.fifo import OPEN_TIMEOUT_S, FifoServerGone, fifo_client
from mcpfleet.runner.environment.server import SAFE_ENV, ServerCommand
from mcpfleet.runner.environment.verifier import reaped_command

# A trial's server is disposable: when it is stopped it has answered every call it will get, and the verifier
# reads the state, not the server. The SDK closes the server's stdin and then waits up to 2 s for it to exit
# before SIGTERM to its process group; postgres-mcp takes 0.5-2 s to exit on EOF (measured), which every
# PostgreSQL trial paid in its teardown. The group gets SIGTERM after this grace instead (SIGKILL 2 s later).
STOP_GRACE_S = 0.2
if not hasattr(sdk_stdio, "PROCESS_TERMINATION_TIMEOUT"):  # the pinned SDK has it: fail loudly on an upgrade
    raise ImportError("mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT is gone: update runner/environment/mcp_client.py")
sdk_stdio.PROCESS_TERMINATION_TIMEOUT = STOP_GRACE_S


# Each open session's initialize result (its serverInfo): what a record names as the server it measured.
_INITIALIZED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def server_info(session: Any) -> tuple[str | None, str | None]:
    """(name, version) the server gave in MCP's initialize, for a session opened here; (None, None) otherwise."""
    init = _INITIALIZED.get(session)
    info = getattr(init, "server_info", None)
    return (getattr(info, "name", None), getattr(info, "version", None)) if info is not None else (None, None)


def tools_digest(tools: list[Any]) -> str:
    """A digest of a tools/list: each tool as the server listed it (name, title, description, input and output
    schemas, annotations), in the server's order. Two versions that differ only in a tool's annotations differ."""
    listed = [t.model_dump(mode="json", exclude_none=True) if hasattr(t, "model_dump") else dict(t) for t in tools]
    text = json.dumps(listed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def server_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in SAFE_ENV if k in os.environ}
    env.update(extra)
    return env


@asynccontextmanager
async def connect_stdio(cmd: ServerCommand, errlog: IO[Any], cwd: Path | None = None) -> AsyncIterator[ClientSession]:
    """``cmd`` over stdio, in its own working folder if it names one, else in ``cwd``.

    Under the reaper (verifier.py's): whatever the server starts, even a helper that left its process group,
    which the SDK's stop (EOF, then SIGTERM and SIGKILL to the group) never reaches, dies when the server exits
    or is stopped, so nothing the agent made it start outlives the session into the verifier."""
    where = cmd.cwd or cwd
    env = server_env(cmd.env)
    command = cmd.command
    if where and os.sep in command and not os.path.isabs(command):  # relative to the folder it starts in
        command = os.path.join(where, command)
    exe = shutil.which(command, path=env.get("PATH", os.defpath))
    if exe is None:  # as the SDK's spawn said before the reaper stood between them
        raise FileNotFoundError(errno.ENOENT, "MCP server command not found", cmd.command)
    [python, *args] = reaped_command([exe, *cmd.args])
    params = StdioServerParameters(command=python, args=args, env=env, cwd=str(where) if where else None)
    # The server's stderr goes straight into ``errlog``'s file descriptor (the SDK hands it to the child process),
    # so a binary log file works although the SDK annotates a text stream.
    async with stdio_client(params, errlog=cast(TextIO, errlog)) as (read, write):
        async with ClientSession(read, write) as session:
            _INITIALIZED[session] = await session.initialize()
            yield session


@asynccontextmanager
async def connect_http(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            _INITIALIZED[session] = await session.initialize()
            yield session


# How long a bridged server may take to answer MCP's initialize once it has opened its FIFOs (it has no startup
# probe: this is its readiness), before the try ends as an infrastructure error naming its container.
FIFO_INITIALIZE_TIMEOUT_S = 120.0


@asynccontextmanager
async def connect_fifo(
    folder: Path,
    container: str = "the MCP server's",
    open_timeout: float = OPEN_TIMEOUT_S,
    initialize_timeout: float = FIFO_INITIALIZE_TIMEOUT_S,
) -> AsyncIterator[ClientSession]:
    """The stdio server of a trial pod's sidecar ``container``, over the FIFOs in ``folder`` (fifo.py). A server
    that never opens them, exits before initialize's answer, or does not answer it in time raises FifoServerGone
    naming the container and what it last wrote that was no JSON-RPC (the helper's "cannot run 'x'")."""
    failure: FifoServerGone | None = None
    async with fifo_client(folder, container, open_timeout) as ((read, write), stray):
        async with ClientSession(read, write) as session:
            try:
                with anyio.fail_after(initialize_timeout):
                    _INITIALIZED[session] = await session.initialize()
            except (MCPError, TimeoutError) as exc:
                if isinstance(exc, MCPError) and exc.error.code != CONNECTION_CLOSED:
                    raise  # the server's own answer: its message says what is wrong
                said = f"; it wrote: {' | '.join(stray)}" if stray else ""
                what = "did not answer" if isinstance(exc, TimeoutError) else "closed its stdout before answering"
                failure = FifoServerGone(
                    f"the MCP server in container {container} {what} MCP's initialize{said}; see its log "
                    f"(kubectl logs <pod> -c {container})"
                )
                failure.__cause__ = exc
            else:
                yield session
    if failure is not None:  # raised once the transport is closed: as itself, not inside its task groups' group
        raise failure


class AbandonedCalls:
    """One agent run's tool calls abandoned at their timeout and still running. The trial makes one per agent
    run and ends it when the agent ends, so it stops that run's calls and no other's (the session the agent
    gets is wrapped, ToolGate and AfterFirstCall, and may be a warm spare's: no session identity to match on).
    Held here too so a call is not garbage-collected mid-call."""

    def __init__(self) -> None:
        self._calls: set[asyncio.Future[Any]] = set()

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, call: asyncio.Future[Any]) -> None:
        self._calls.add(call)
        call.add_done_callback(self._forget)

    async def end(self, wait: float = 5.0) -> int:
        """Cancel the calls that still run, once the agent has ended: MCPMark stops the server then, and what it
        was doing with it, before the verifier reads the end state. Returns how many."""
        calls = list(self._calls)
        for call in calls:
            call.cancel()
        if calls:
            await asyncio.wait(calls, timeout=wait)
        return len(calls)

    def _forget(self, call: asyncio.Future[Any]) -> None:
        self._calls.discard(call)
        if not call.cancelled():
            call.exception()  # read, so a call that failed after it was abandoned is not reported as unretrieved


async def call_tool_abandoning(
    session: Any, name: str, arguments: Any, timeout: float, abandoned: AbandonedCalls
) -> Any:
    """``session.call_tool`` bounded by ``timeout`` the way MCPMark's agents bound it: ``asyncio.wait_for`` on an
    MCP client (1.12) that sends no cancellation. At the timeout the request is abandoned, not cancelled, and
    raises TimeoutError: the server finishes it while the model reads that it timed out and goes on, so a slow
    PostgreSQL statement commits as under MCPMark (a cancelled one rolled back). It is kept in ``abandoned``,
    whose ``end`` stops what is left when the agent ends."""
    call = asyncio.ensure_future(session.call_tool(name, arguments))
    try:
        done, _ = await asyncio.wait({call}, timeout=timeout)
    except BaseException:  # the agent itself was stopped (its run's time is up): nothing waits for the call
        call.cancel()
        raise
    if call in done:
        return call.result()
    abandoned.add(call)
    raise TimeoutError


def tool_to_openai(tool: Any) -> dict[str, Any]:
    """MCP tool -> OpenAI function tool; '$schema' is dropped since some providers reject it."""
    schema = {k: v for k, v in (tool.input_schema or {}).items() if k != "$schema"}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description or "", "parameters": schema},
    }


def result_text(result: Any) -> str:
    """Flatten a CallToolResult's content blocks to text, never truncated (MCPMark does not truncate)."""
    parts = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        if text is not None:
            parts.append(text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} omitted]")
    return "\n".join(parts)
