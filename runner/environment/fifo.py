"""MCP's stdio transport over two FIFOs: a trial pod's declared stdio server (runner/services/bridge.py).

The server's sidecar (``mcpfleet-fifo-exec IN OUT -- COMMAND``) opens ``IN`` for reading, then ``OUT`` for
writing, then execs the server. This end opens ``IN`` for writing without blocking, retrying while nobody reads
it yet (ENXIO) up to a deadline, then ``OUT`` for reading, and then exchanges newline-delimited JSON-RPC as the
SDK's ``stdio_client`` does with a child's pipes. A server that never opens them, or that closes its stdout, ends
the connection with an error naming its container, never a hang.
"""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

SERVER_IN, SERVER_OUT = "in", "out"  # in the bridge folder: the server's stdin and stdout
OPEN_TIMEOUT_S = 30.0  # the sidecar starts before the runner: its helper is normally waiting already
RETRY_S = 0.05
NOT_JSON_KEPT = 5  # lines of the server's stdout that were no JSON-RPC, kept for the error when it goes


class FifoServerGone(ConnectionError):
    """The bridged server never opened its FIFOs, or closed them: the trial's infrastructure, not the model."""


def _unblock(path: Path) -> None:
    """Release a thread blocked opening ``path`` for reading, by opening it for writing once."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


async def open_fifos(folder: Path, container: str, timeout: float = OPEN_TIMEOUT_S) -> tuple[int, int]:
    """(write fd of the server's stdin, read fd of its stdout), both non-blocking, once the server has opened its
    ends; FifoServerGone naming ``container`` when it has not within ``timeout`` seconds."""
    deadline = anyio.current_time() + timeout
    gone = FifoServerGone(
        f"the MCP server's container {container} did not open its stdin ({folder / SERVER_IN}) within {timeout:g} s; "
        f"see its log (kubectl logs <pod> -c {container}): its image may lack the command"
    )
    while True:
        try:
            write_fd = os.open(folder / SERVER_IN, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # no FIFO at all: the pod's bridge init container did not make it
                raise FifoServerGone(f"cannot open {folder / SERVER_IN} for {container}: {exc.strerror}") from exc
            if anyio.current_time() >= deadline:
                raise gone from exc
        await anyio.sleep(RETRY_S)
    try:
        out = folder / SERVER_OUT
        with anyio.move_on_after(max(0.1, deadline - anyio.current_time())):
            read_fd = await anyio.to_thread.run_sync(
                lambda: os.open(out, os.O_RDONLY | os.O_CLOEXEC), abandon_on_cancel=True
            )
            os.set_blocking(read_fd, False)
            return write_fd, read_fd
        _unblock(out)  # the abandoned thread's open returns; its fd is closed by nobody: one fd, once, on failure
        raise gone
    except BaseException:
        os.close(write_fd)
        raise


async def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            await anyio.wait_writable(fd)
            continue
        view = view[n:]


@asynccontextmanager
async def fifo_client(
    folder: Path, container: str, timeout: float = OPEN_TIMEOUT_S
) -> AsyncIterator[tuple[TransportStreams, list[str]]]:
    """The session's streams over the bridge's FIFOs, and the lines of the server's stdout that were no JSON-RPC
    (the helper's "cannot run" among them), for the caller's error when the server goes."""
    write_fd, read_fd = await open_fifos(folder, container, timeout)
    read_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    stray: list[str] = []

    async def reader() -> None:
        buffer = b""
        async with read_send:
            while True:
                await anyio.wait_readable(read_fd)
                try:
                    chunk = os.read(read_fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    return  # EOF: the server closed its stdout; the session sees the stream end
                *lines, buffer = (buffer + chunk).split(b"\n")
                for raw in lines:
                    line = raw.decode("utf-8", errors="replace")
                    try:
                        item: SessionMessage | Exception = SessionMessage(
                            jsonrpc_message_adapter.validate_json(line, by_name=False)
                        )
                    except ValueError as exc:
                        stray[:] = [*stray, line.strip()[:500]][-NOT_JSON_KEPT:]
                        item = exc
                    try:
                        await read_send.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return

    async def writer() -> None:
        try:
            async with write_receive:
                async for message in write_receive:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await _write_all(write_fd, data.encode())
        except OSError:  # EPIPE: the server is gone; the session must see the end instead of waiting
            await read_send.aclose()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                yield (read_stream, write_stream), stray
            finally:
                tg.cancel_scope.cancel()
    finally:
        # Closing the server's stdin is its end of the session (MCP's stdio shutdown); its sidecar then exits.
        for fd in (write_fd, read_fd):
            os.close(fd)
        for stream in (read_stream, write_stream, read_send, write_receive):
            await stream.aclose()
