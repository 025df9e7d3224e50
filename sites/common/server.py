"""Command line of every site: ``python -m mcpfleet.sites.<name> --data DIR --port N [--host H]``.

Binds the socket itself (``--port 0`` picks a free port), then prints one line ``<site> serving http://H:P`` on
stdout once requests are accepted, so a launcher can read the real port instead of racing for one.

``--fd N``: serve on an inherited TCP socket the launcher already bound (and keeps bound), instead of binding
one: a port reserved before the site starts (a browser configured with it earlier) is never free for another
process to take in between. ``--host`` and ``--port`` are then ignored.

``--exit-with-parent``: a watchdog thread polls the parent pid (every 0.1 s) and stops the server when the
process is re-parented, i.e. when whoever started it died, even by SIGKILL. Polling rather than Linux's
PR_SET_PDEATHSIG, which fires when the *thread* that forked exits: a launcher that spawns from a worker
thread would see its sites killed early. SIGTERM and SIGINT shut down gracefully (at most one second).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import uvicorn

from mcpfleet.sites.common.web import Site, create_app

POLL = 0.1


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready_line: str) -> None:
        super().__init__(config)
        self.ready_line = ready_line

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(self.ready_line, flush=True)


def _watch_parent(server: _Server) -> None:
    parent = os.getppid()
    while True:
        time.sleep(POLL)
        if os.getppid() != parent:
            server.should_exit = True
            server.force_exit = True
            time.sleep(2)
            os._exit(0)  # the graceful path did not finish in time


def parse_args(name: str, argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m mcpfleet.sites.{name}", description=f"Serve the {name} site.")
    parser.add_argument("--data", required=True, type=Path, help="folder with the site's SQLite file")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--fd", type=int, help="serve on this inherited, already bound TCP socket (not --port)")
    parser.add_argument("--exit-with-parent", action="store_true", help="stop when the parent process dies")
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return parser.parse_args(argv)


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot bind {host}:{port}: {exc}") from None
    return sock


def _inherited(fd: int) -> socket.socket:
    """The launcher's socket: it must be a bound TCP socket (listening on it is ours to do)."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise OSError(f"--fd {fd} is not an open socket: {exc}") from None
    if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
        raise OSError(f"--fd {fd} is not a TCP socket")
    if sock.getsockname()[1] == 0:
        raise OSError(f"--fd {fd} is not bound to a port")
    return sock


def main(make_site: Callable[[], Site], argv: list[str] | None = None) -> int:
    site = make_site()
    args = parse_args(site.name, argv)
    try:
        app = create_app(site, args.data)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        sock = _inherited(args.fd) if args.fd is not None else _bound(args.host, args.port)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sock.listen(128)
    sock.set_inheritable(True)
    address, port = sock.getsockname()[:2]
    host = f"[{address}]" if sock.family == socket.AF_INET6 else address
    config = uvicorn.Config(
        app,
        log_level=args.log_level,
        access_log=args.log_level in ("debug", "info"),
        lifespan="off",
        http="h11",
        loop="asyncio",
        timeout_graceful_shutdown=1,
    )
    server = _Server(config, f"{site.name} serving http://{host}:{port}")
    if args.exit_with_parent:
        threading.Thread(target=_watch_parent, args=(server,), daemon=True, name="exit-with-parent").start()
    asyncio.run(server.serve(sockets=[sock]))
    return 0
