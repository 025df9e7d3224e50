"""A real S3-protocol server for tests: ``moto_server`` in a subprocess on a free local port.

Use the ``moto_endpoint`` context manager, or the session fixture ``s3_endpoint`` (defined in
tests/conftest.py). Each test should use its own bucket (see
``new_bucket``), so one server serves the whole session. ``FaultProxy`` sits in front of it to inject
5xx answers and dropped connections.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MOTO_SERVER = Path(sys.executable).parent / "moto_server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/moto-api/", timeout=1) as r:
            return r.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except OSError:
        return False


@contextmanager
def moto_endpoint(timeout: float = 30.0) -> Iterator[str]:
    """Start ``moto_server -H 127.0.0.1 -p PORT``, wait until it answers, yield its URL, stop it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # moto itself needs no credentials; keep the parent's AWS_* out of its environment all the same.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    log = tempfile.TemporaryFile()  # werkzeug logs every request: a pipe nobody drains would block it
    proc = subprocess.Popen(
        [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + timeout
        while not _answers(url):
            if proc.poll() is not None:
                log.seek(0)
                err = log.read().decode(errors="replace")
                raise RuntimeError(f"moto_server exited with {proc.returncode}: {err[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not answer on {url} within {timeout} s")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def new_bucket(client: S3Client) -> str:
    """Create a bucket with a fresh name through a boto3 S3 client; return its name."""
    name = f"t-{uuid.uuid4().hex[:20]}"
    client.create_bucket(Bucket=name)
    return name


class FaultProxy:
    """An HTTP proxy in front of an S3 endpoint that can fail chosen requests.

    ``fault(method, path)`` decides per request: None forwards it, an int answers with that HTTP status
    (an S3-style XML error), "drop" closes the connection without an answer (the endpoint went away
    mid-request). Every request is logged in ``seen`` as (method, path, verdict).
    """

    def __init__(self, upstream: str, fault: Callable[[str, str], int | str | None]):
        self.upstream = urllib.parse.urlsplit(upstream)
        if not self.upstream.hostname:
            raise ValueError(f"FaultProxy needs an http://host:port endpoint, got {upstream!r}")
        self.upstream_host: str = self.upstream.hostname
        self.fault = fault
        self.seen: list[tuple[str, str, int | str | None]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def handle_one(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                assert "chunked" not in (self.headers.get("Transfer-Encoding") or ""), "chunked bodies unsupported"
                with proxy.lock:
                    verdict = proxy.fault(self.command, self.path)
                    proxy.seen.append((self.command, self.path, verdict))
                if verdict == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if isinstance(verdict, int):
                    data = (
                        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code>'
                        b"<Message>injected by FaultProxy</Message></Error>"
                    )
                    self.send_response(verdict)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                up = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream.port, timeout=30)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
                    up.request(self.command, self.path, body=body, headers=headers)
                    resp = up.getresponse()
                    data = resp.read()
                finally:
                    up.close()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in (
                        "transfer-encoding",
                        "connection",
                        "content-length",
                        "keep-alive",
                        "server",
                        "date",
                    ):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def count(self, verdict: int | str | None = None, method: str | None = None, suffix: str = "") -> int:
        with self.lock:
            return sum(
                1
                for m, p, v in self.seen
                if v == verdict and (method is None or m == method) and p.split("?", 1)[0].endswith(suffix)
            )
