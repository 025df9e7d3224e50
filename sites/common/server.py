"""Command line of every site: ``python -m mcpfleet.sites.<name> --data DIR --port N [--host H]``.

Binds the socket itself (``--port 0`` picks a free port), then prints one line ``<site> serving http://H:P`` on
stdout once requests are accepted, so a launcher can read the real port instead of racing for one.

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

from .web import Site, create_app

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
    parser.add_argument("--exit-with-parent", action="store_true", help="stop when the parent process dies")
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return parser.parse_args(argv)


def main(make_site: Callable[[], Site], argv: list[str] | None = None) -> int:
    site = make_site()
    args = parse_args(site.name, argv)
    try:
        app = create_app(site, args.data)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        print(f"error: cannot bind {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    sock.listen(128)
    sock.set_inheritable(True)
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
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
