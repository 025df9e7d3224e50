"""A loopback TCP port in front of a cluster that has no network: a trial's own cluster (``isolation: cluster``)
runs in a network namespace of its own, listening on its Unix socket only, so its superuser's shell (``COPY ...
PROGRAM``) reaches nothing on the machine's loopback. Its clients (the MCP server, the verifier, the grader,
MCPMark's unchanged verifiers, which connect to ``POSTGRES_HOST:POSTGRES_PORT``) keep a TCP address: this relay,
in the trial's event loop, passes each connection's bytes to the socket and back."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path

CHUNK = 1 << 16


class Relay:
    """``HOST:port`` on the machine's loopback, each connection piped to the Unix socket at ``path``. It runs an
    event loop of its own in a thread: whoever starts it may then block its own loop on a connection through it
    (a psycopg2 call in the trial's event-loop thread would otherwise wait for itself)."""

    def __init__(self, host: str, path: Path) -> None:
        self.host, self.path = host, path
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mcpfleet-pgrelay", daemon=True)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @classmethod
    async def start(cls, host: str, path: Path) -> Relay:
        relay = cls(host, path)
        relay._thread.start()  # noqa: SLF001 - its own
        await asyncio.to_thread(relay._ready.wait)  # noqa: SLF001
        if relay._error is not None:  # noqa: SLF001
            raise relay._error  # noqa: SLF001
        return relay

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(asyncio.start_server(self._accepted, self.host, 0))
        except BaseException as exc:  # noqa: BLE001 - handed to start()
            self._error = exc
            self._ready.set()
            self._loop.close()
            return
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(str(self.path))
        except OSError:
            writer.close()  # the cluster is not there (not started yet, or gone): the client sees a closed socket
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except asyncio.CancelledError:
            pass  # (``close``: the trial is over, its connections with it)
        finally:
            for w in (writer, up_writer):
                w.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        """Stop listening, end every connection, stop the thread."""
        if not self._thread.is_alive():
            return
        done = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        await asyncio.wrap_future(done)
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 10)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
