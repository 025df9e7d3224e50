"""A scripted, OpenAI-compatible model server for tests, the quickstart and overhead benchmarks.

The harness reaches it through LiteLLM over real HTTP exactly like a provider
(``model="openai/<policy>", api_base="http://127.0.0.1:PORT/v1"``), so the whole client path
(serialisation, streaming, error mapping, retries) is exercised without a paid model. Every
answer is derived statelessly from the request's messages, so concurrent trials never interfere.

The model string and its errors are scripted_options.py, the answers scripted_policies.py, the HTTP server
scripted_server.py; this module runs that server as a child process (``python -m`` this module).
"""

from __future__ import annotations

import argparse
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from mcpfleet.runner.launch.scripted_options import POLICIES
from mcpfleet.runner.launch.scripted_server import LISTEN_PREFIX, serve
from mcpfleet.runner.spec.task import TaskError


class ScriptedServerProcess:
    """Run the server as a subprocess; ``with ScriptedServerProcess(roots) as url:`` yields its base URL.

    The child gets its own session so a terminal Ctrl-C aimed at the parent (e.g. a benchmark)
    does not kill the model mid-run; the parent stops it on exit.
    """

    def __init__(
        self,
        tasks_roots: list[Path],
        latency: float = 0.0,
        startup_timeout: float = 30.0,
        script_base: Path | None = None,
    ) -> None:
        self.tasks_roots = [Path(r) for r in tasks_roots]
        self.latency = latency
        self.script_base = script_base  # where a relative script=<file> is read from: the EvalRun file's folder
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.url: str | None = None
        self._stderr: Any = None
        self._stopping = False

    def watch(self, on_death: Callable[[str], None]) -> None:
        """Call ``on_death`` (from a thread) if the server dies before it is stopped: a run must not take its
        trials' failed calls for the models' configuration errors."""
        proc = self.proc
        assert proc is not None, "watch() after the server started"

        def wait() -> None:
            code = proc.wait()
            if not self._stopping:
                on_death(f"mcpfleet's scripted model server died (exit status {code})")

        threading.Thread(target=wait, name="scripted-model-watch", daemon=True).start()

    def __enter__(self) -> str:
        cmd = [
            sys.executable,
            "-m",
            "mcpfleet.runner.launch.scripted_model",
            "--port",
            "0",
            "--latency",
            str(self.latency),
        ]
        cmd += ["--parent-pid", str(os.getpid())]  # its own session: Ctrl-C does not reach it, a SIGKILL must
        for root in self.tasks_roots:
            cmd += ["--tasks", str(root)]
        if self.script_base is not None:
            cmd += ["--script-base", str(self.script_base)]
        # stderr goes to a file, not a pipe nobody reads, so a chatty server can never block on it.
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL, start_new_session=True
        )
        try:
            line = self._read_line()
            port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        except BaseException:  # Ctrl-C while it starts too: it is in a session of its own, no signal reaches it
            self.__exit__()
            raise
        self.url = f"http://127.0.0.1:{port}/v1"
        return self.url

    def _read_line(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + self.startup_timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._fail(f"did not report listening within {self.startup_timeout:.0f}s")
                if sel.select(left):
                    data = os.read(self.proc.stdout.fileno(), 4096)
                    if not data:
                        self.proc.wait(timeout=5)
                        self._fail(f"exited with code {self.proc.returncode} before listening")
                    buf += data
        line = buf.split(b"\n", 1)[0].decode(errors="replace").strip()
        if not line.startswith(LISTEN_PREFIX):
            self._fail(f"printed an unexpected first line {line!r}")
        return line

    def _fail(self, why: str) -> NoReturn:
        self._stop()
        raise RuntimeError(f"scripted model server {why}; stderr:\n{self._stderr_text() or '(empty)'}")

    def _stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        data: bytes = self._stderr.read()
        return data.decode(errors="replace")[-4000:].strip()

    def _stop(self) -> None:
        self._stopping = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __exit__(self, *exc: object) -> None:
        self._stop()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m mcpfleet.runner.launch.scripted_model",
        description="OpenAI-compatible scripted model server (policies: " + ", ".join(POLICIES) + ").",
    )
    parser.add_argument(
        "--tasks",
        action="append",
        type=Path,
        default=[],
        help="task pack root in MCPMark layout (repeatable); the oracle policy plays its oracles",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    parser.add_argument(
        "--latency", type=float, default=0.0, help="default seconds each answer takes (its own work included)"
    )
    parser.add_argument(
        "--parent-pid", type=int, default=None, help="exit when this process (the one that started us) is gone"
    )
    parser.add_argument(
        "--script-base",
        type=Path,
        default=None,
        help="folder a relative script=<path> is read from (default: the current folder; a run passes its EvalRun's)",
    )
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        from mcpfleet.runner._util.lifeline import exit_with_parent

        exit_with_parent(args.parent_pid)
    try:
        serve(args.tasks, args.host, args.port, args.latency, args.script_base)
    except TaskError as exc:
        sys.exit(f"scripted model: {exc}")


if __name__ == "__main__":
    main()
