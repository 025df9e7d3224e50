"""One ``mcpfleet run`` of an s3:// run root at a time: a lease object beside the run's files.

A local run folder has the kernel's flock (launcher.run_lock). A bucket has no such thing, and a second run
on the same root would run every unfinished trial again beside the first and delete the first one's in-flight
trial files as leftovers (``discard_unfinished``). The lease is taken with S3's conditional writes: a PUT with
``If-None-Match: *`` creates it only if absent, and every renewal is a PUT with ``If-Match`` on the ETag the
holder last wrote, so of two runs racing for it exactly one wins. A holder renews it every ``ttl/4``; a run
that was killed leaves it behind, and it is taken over once it has not been renewed for ``ttl`` (ages are
measured on the server's clock, LastModified against the response's Date: no clock skew between machines).

An endpoint that refuses conditional writes (501 NotImplemented) gets no lease, as before, with a warning."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpfleet.runner.results.store import S3Store

LEASE_NAME = ".mcpfleet-run.lease"
LEASE_TTL_S = 60.0
UNSUPPORTED = "(conditional writes unsupported)"

log = logging.getLogger(__name__)


class LeaseHeld(RuntimeError):
    """Another live run holds the lease; the message says which and when it would expire."""


def _code(exc: BaseException) -> str:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or exc.response["ResponseMetadata"]["HTTPStatusCode"])
    return ""


def _refused(exc: BaseException) -> bool:
    """412 (the condition failed) or 409 (a concurrent conditional write won): someone else's lease."""
    return _code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")


def _unsupported(exc: BaseException) -> bool:
    return _code(exc) in ("NotImplemented", "501")


@dataclass
class S3Lease:
    """The lease of one run root; ``with lease:`` holds it (renewed in a thread) and releases it at exit."""

    store: S3Store
    ttl_s: float = LEASE_TTL_S
    owner: str = field(default_factory=lambda: f"{socket.gethostname()} pid {os.getpid()}")
    etag: str | None = None
    supported: bool = True
    lost: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def key(self) -> str:
        return self.store.key(LEASE_NAME)

    def _body(self) -> bytes:
        return json.dumps({"owner": self.owner, "ttl_seconds": self.ttl_s}).encode()

    def _put(self, **condition: str) -> str | None:
        """A conditional PUT of our lease: its new ETag, None when the condition failed (not ours), or
        UNSUPPORTED when the endpoint refuses conditional writes."""
        from botocore.exceptions import ClientError

        def put() -> str | None:
            try:
                out = self.store.client.put_object(
                    Bucket=self.store.bucket,
                    Key=self.key,
                    Body=self._body(),
                    ContentType="application/json",
                    **condition,
                )
            except ClientError as exc:
                if _refused(exc):
                    return None
                if _unsupported(exc):
                    return UNSUPPORTED
                raise
            return str(out["ETag"])

        return self.store._op("write the run's lease", self.key, put)

    def _held(self) -> tuple[str, float, str] | None:
        """(ETag, seconds since its last renewal by the server's clock, holder) of the lease, None if absent."""
        from botocore.exceptions import ClientError

        def head() -> tuple[str, float, str] | None:
            try:
                out = self.store.client.get_object(Bucket=self.store.bucket, Key=self.key)
            except ClientError as exc:
                if _code(exc) in ("NoSuchKey", "404", "NotFound"):
                    return None
                raise
            now = parsedate_to_datetime(out["ResponseMetadata"]["HTTPHeaders"]["date"])
            try:
                holder = str(json.loads(out["Body"].read()).get("owner") or "?")
            except (ValueError, AttributeError):
                holder = "?"
            return str(out["ETag"]), (now - out["LastModified"]).total_seconds(), holder

        return self.store._op("read the run's lease", self.key, head)

    def acquire(self) -> None:
        """Take the lease, or raise LeaseHeld naming its live holder."""
        self.etag = self._put(IfNoneMatch="*")
        if self.etag == UNSUPPORTED:
            self.supported, self.etag = False, None
            log.warning(
                "%s does not support conditional writes: no lease, so run it from one place at a time",
                self.store.location(),
            )
            return
        while self.etag is None:
            held = self._held()
            if held is None:  # released between our PUT and our read
                self.etag = self._put(IfNoneMatch="*")
                continue
            etag, age, holder = held
            if age < self.ttl_s:
                raise LeaseHeld(
                    f"{self.store.location()}: another `mcpfleet run` ({holder}) is running this run (its lease "
                    f"was renewed {max(age, 0):.0f} s ago); wait for it to end or stop it, then run the same command "
                    f"again (finished trials are kept), or pass --new-run for a separate run. A run that was killed "
                    f"leaves its lease for {self.ttl_s - max(age, 0):.0f} s more"
                )
            self.etag = self._put(IfMatch=etag)  # a dead run's lease: of two takers, one wins
            if self.etag is None:
                continue  # someone else took it over first: read who

    def renew(self) -> bool:
        """Renew our lease; False when it is no longer ours (expired and taken over)."""
        if not self.supported or self.etag is None:
            return True
        etag = self._put(IfMatch=self.etag)
        if etag is None:
            return False
        self.etag = etag
        return True

    def release(self) -> None:
        """Delete the lease if it is still ours (a taken-over lease is its new holder's)."""
        if not self.supported or self.etag is None:
            return
        held = self._held()
        if held is not None and held[0] == self.etag:
            self.store._op(
                "delete the run's lease",
                self.key,
                lambda: self.store.client.delete_object(Bucket=self.store.bucket, Key=self.key),
            )
        self.etag = None

    def _renewing(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            try:
                if not self.renew():
                    self.lost = True
                    log.warning("%s: this run's lease was taken over by another run", self.store.location())
                    return
            except Exception as exc:  # noqa: BLE001 - an outage: try again next period (the lease may lapse)
                log.warning("could not renew the run's lease: %s", exc)

    def __enter__(self) -> S3Lease:
        self.acquire()
        if self.supported:
            self._thread = threading.Thread(target=self._renewing, name="s3-lease", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        try:
            self.release()
        except Exception as err:  # noqa: BLE001 - never in the way of the run's own exit; it expires by itself
            log.warning("could not release the run's lease: %s", err)
