"""What a trial starts instead of a pre-forkable server: a few milliseconds of Python that gets the server forked.

Started by the MCP SDK like any stdio server (``python -I -S zygote_stub.py SOCKET IDENTITY -- SERVER ARGV``,
the server's environment as its own): it passes its stdin/stdout/stderr, the argv, its environment, working
directory and umask to the zygote (zygote.py), which forks the server onto those descriptors. It then stands
in for the server: SIGTERM and SIGINT are forwarded to it, and it exits with the server's status, so the
SDK's stop logic (close stdin, SIGTERM, SIGKILL to this process's group) works unchanged. Killed, it takes
the server with it (the zygote and the server both watch it).

If the zygote cannot be reached (not started, gone, refusing), it execs the server directly: a trial never
fails for want of a zygote; one line on stderr (the trial's server log) says so. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from typing import Any

PROTOCOL = 1


class Stub:
    def __init__(self, path: str, identity: str, server: list[str]):
        self.path, self.identity, self.server = path, identity, server
        self.conn: socket.socket | None = None
        self.forwarding = False  # the server's pid is known: signals go to it
        self.pending: list[int] = []

    def on_signal(self, sig: int, _frame: Any) -> None:
        if self.forwarding and self.conn is not None:
            try:
                self.conn.sendall(f"signal {sig}\n".encode())
            except OSError:
                pass
        else:
            self.pending.append(sig)

    def request(self) -> socket.socket:
        body = json.dumps(
            {
                "v": PROTOCOL,
                "server": self.identity,
                "argv": self.server,
                "env": dict(os.environ),
                "cwd": os.getcwd(),
                "umask": _umask(),
            }
        ).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.conn = conn
        conn.connect(self.path)
        socket.send_fds(conn, [struct.pack("!I", len(body)) + body], [0, 1, 2])
        return conn

    def run(self) -> int:
        for stop in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop, self.on_signal)
        try:
            replies = self.request().makefile("rb")
            first = replies.readline()
        except OSError as exc:
            return self.direct(exc.strerror or type(exc).__name__)
        if not first.startswith(b"pid "):
            return self.direct(first.decode(errors="replace").strip() or "it closed the connection")
        self.forwarding = True
        for sig in self.pending:
            self.on_signal(sig, None)
        # Only the server holds the client's pipes now: its exit alone ends them, as for a direct start.
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        try:
            last = replies.readline()
        except OSError:
            last = b""
        if not last.startswith(b"exit "):
            _say("the server zygote is gone, and the server with it")
            return 1
        code = int(last.split()[1])
        if code < 0:  # killed by a signal: so are we
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
            return 128 - code
        return code

    def direct(self, why: str) -> int:
        if self.conn is not None:
            self.conn.close()
        if self.pending:  # asked to stop before anything started: nothing to start
            return 128 + self.pending[0]
        _say(f"server zygote unavailable ({why}); starting {os.path.basename(self.server[0])} directly")
        for stop in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop, signal.SIG_DFL)
        try:
            os.execv(self.server[0], self.server)
        except OSError as exc:
            _say(f"cannot start {self.server[0]}: {exc.strerror}")
        return 127


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _say(line: str) -> None:
    try:
        os.write(2, f"mcpfleet: {line}\n".encode())
    except OSError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        _say("usage: zygote_stub.py SOCKET IDENTITY -- SERVER [ARGS...]")
        return 2
    return Stub(argv[0], argv[1], argv[3:]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
