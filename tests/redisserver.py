"""A redis-server for the pace tests, on a Unix socket in the test's folder, that a test can kill and start again
(Debian's, which scripts/setup.sh installs)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from mcpfleet.runner.launch.pacestore import redis_binary


class Redis:
    """A redis-server on a Unix socket in the test's folder, that the test can kill and start again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sock = folder / "r.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.sock}"

    def start(self) -> None:
        binary = redis_binary()
        assert binary, "redis-server is installed by scripts/setup.sh"
        self.proc = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", str(self.sock), "--save", "", "--appendonly", "no"],
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not self.sock.exists():
            assert time.monotonic() < deadline and self.proc.poll() is None, "redis-server did not start"
            time.sleep(0.01)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.sock.unlink(missing_ok=True)
