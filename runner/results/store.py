"""Where a run's records live. One interface, two backends: a local folder and S3 (any S3-protocol endpoint).

Layout under a run root (``<output>/<run-name>[/<run-uid>]``): ``trials/<trial-id>/{messages.json,
meta.json, ..., result.json}``, ``run.json`` (what the run is) and ``summary.json`` (its aggregates).
Writing a trial is idempotent: the same trial id writes the same keys, and ``commit`` writes result.json,
the completion marker, after all of them. A store that cannot write raises (``StoreError`` for S3): the
trial then has no record and is never counted, let alone as passed.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from mcpfleet.runner._util.filemodes import file_mode
from mcpfleet.runner.results.records import usable_record

if TYPE_CHECKING:
    from mcpfleet.runner.spec.evalrun import Output

RESULT = "result.json"

# plan.trial_id's shape: <model>.<service>[@<variant>].<difficulty>.<category>.<task>[-s<shard>].<attempt>, the
# model and variant DNS labels, the task path parts as tasks.NAME_RE. What discard_unfinished may remove, and
# nothing else.
_PART = r"[A-Za-z0-9][A-Za-z0-9_-]*"
_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
TRIAL_ID_RE = re.compile(rf"{_LABEL}\.{_PART}(?:@{_LABEL})?(?:\.{_PART}){{3}}\.[0-9]+")


def is_trial_id(name: str) -> bool:
    """Whether ``name`` has a trial id's shape (a folder under trials/ the run may have made)."""
    return TRIAL_ID_RE.fullmatch(name) is not None


class ResultStore(Protocol):
    def write_files(self, trial_id: str, files: dict[str, bytes]) -> None: ...
    def commit(self, trial_id: str, result: bytes) -> None: ...
    def read_result(self, trial_id: str) -> dict[str, Any] | None: ...
    def read_trial_file(self, trial_id: str, name: str) -> bytes | None: ...
    def iter_results(self) -> Iterator[dict[str, Any]]: ...
    def iter_results_below(self, skip: str | None = None) -> Iterator[dict[str, Any]]: ...
    def write_json(self, name: str, obj: Any) -> None: ...
    def read_json(self, name: str) -> Any | None: ...
    def discard_unfinished(self) -> int: ...
    def exists(self) -> bool: ...
    def location(self) -> str: ...


def record_unless_finished(
    store: ResultStore, trial_id: str, spec_hash: str, files: dict[str, bytes], result: Callable[[], bytes]
) -> dict[str, Any] | None:
    """Write a try's files, then its result.json (``result()``, made just before); unless a scored record of the
    same trial and spec is already stored: then nothing is written and that record is returned.

    A pod the operator gave up on (its node partitioned, past its deadline) may still finish after its retry
    did: its late record must neither replace the retry's nor mix its files with the retry's, since a finished
    trial is never run twice or overwritten. An unscored record (an infra error, the operator's own) is replaced.
    Raises RecordNotStored when the store cannot be read or written."""
    from mcpfleet.runner.results.outcome import is_scored

    try:
        old = store.read_result(trial_id)
        if old is not None and old.get("spec_hash") == spec_hash and is_scored(old.get("failure")):
            return old
        store.write_files(trial_id, files)
        store.commit(trial_id, result())
    except (OSError, StoreError) as exc:  # (an S3 store has retried its blips already: StoreError is for good)
        cause = str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
        raise RecordNotStored(trial_id, store.location(), cause) from exc
    return None


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())  # mkstemp's 0600 would keep records from anyone else (filemodes.py)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class LocalStore:
    """A run root on the local disk."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def location(self) -> str:
        return str(self.root)

    def exists(self) -> bool:
        """Whether anything was ever written under this run root."""
        return self.root.exists()

    def trial_dir(self, trial_id: str) -> Path:
        return self.root / "trials" / trial_id

    def _own_trial_dir(self, trial_id: str) -> Path:
        """The trial's folder, made if missing, and never through a link: a run folder from elsewhere whose
        ``trials/<id>`` links to another folder would have the records replace that folder's files of the same
        names. Such a link is replaced by a folder of the run's own; ``trials`` itself a link is an error (the
        launcher refuses it before any trial, see ``launcher.run_lock``)."""
        trials = self.root / "trials"
        if trials.is_symlink():
            raise OSError(f"{trials} is a symbolic link: records are written only into the run's own folder")
        d = trials / trial_id
        if d.is_symlink():
            d.unlink()  # (the link only, never what it points to)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def write_files(self, trial_id: str, files: dict[str, bytes]) -> None:
        """The trial's record files; not yet visible as finished."""
        d = self._own_trial_dir(trial_id)
        for name, data in files.items():
            _atomic_write(d / name, data)

    def commit(self, trial_id: str, result: bytes) -> None:
        """Write result.json, the completion marker, after every other file of the trial."""
        _atomic_write(self._own_trial_dir(trial_id) / RESULT, result)

    def read_result(self, trial_id: str) -> dict[str, Any] | None:
        try:
            raw = read_run_file(self.trial_dir(trial_id) / RESULT)
        except OSError:  # missing, a folder, a FIFO, a link or too large: unfinished
            return None
        return usable_record(raw, trial_id)  # damaged or another trial's: unfinished

    def read_trial_file(self, trial_id: str, name: str) -> bytes | None:
        """One of a trial's record files (messages.json, meta.json), or None (missing, or no regular file)."""
        try:
            return read_run_file(self.trial_dir(trial_id) / name)
        except OSError:
            return None

    def trial_names(self) -> list[str]:
        """The names of the folders under ``trials/``, sorted: the trials that may have a record."""
        trials = self.root / "trials"
        if not trials.is_dir():
            return []
        with os.scandir(trials) as entries:  # a stray file (NOTES.txt, .DS_Store) is no trial
            return sorted(e.name for e in entries if e.is_dir())

    def iter_results(self) -> Iterator[dict[str, Any]]:
        for name in self.trial_names():
            r = self.read_result(name)
            if r is not None:
                yield r

    def iter_results_below(self, skip: str | None = None) -> Iterator[dict[str, Any]]:
        """Records of this root and of every run UID folder in it (an operator keeps each run object of one
        name under its UID), but ``skip``'s."""
        for path in sorted([*self.root.glob(f"trials/*/{RESULT}"), *self.root.glob(f"*/trials/*/{RESULT}")]):
            rel = path.relative_to(self.root).parts
            if len(rel) == 4 and rel[0] == skip:
                continue
            try:
                rec = usable_record(read_run_file(path), rel[-2])
            except OSError:
                continue  # being written (or no regular file): not a finished trial
            if rec is not None:
                yield rec

    def discard_unfinished(self) -> int:
        """Remove trial folders without result.json (left by a crash or Ctrl-C); they will run again. Only real
        folders named like a trial id: anything else under trials/ (another run's folder put there, a link, a
        user's notes) is not this run's to remove."""
        trials = self.root / "trials"
        n = 0
        if trials.is_dir() and not trials.is_symlink():
            for d in trials.iterdir():
                if is_trial_id(d.name) and not d.is_symlink() and d.is_dir() and not (d / RESULT).exists():
                    shutil.rmtree(d, ignore_errors=True)
                    n += 1
        return n

    def write_json(self, name: str, obj: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.root / name, (json.dumps(obj, indent=2) + "\n").encode())

    def read_json(self, name: str) -> Any | None:
        """The run-level file (run.json, summary.json), or None when it is missing or damaged: both are rewritten
        from the records, which are what a run is."""
        try:
            return json.loads(read_run_file(self.root / name))
        except (OSError, ValueError, RecursionError):  # (a deeply nested document: damaged)
            return None


MAX_RUN_FILE_BYTES = 256 * 1024 * 1024  # a record is KBs, a long browser trial's messages.json some MBs


def read_run_file(path: Path, limit: int = MAX_RUN_FILE_BYTES) -> bytes:
    """A run folder's file, read only if it is a regular file (not through a link) of at most ``limit`` bytes;
    OSError otherwise. Run folders come from elsewhere (a teammate's run to resume, a sync): a FIFO planted in
    one hung ``report``, ``export`` and a resume in open(), and a sparse 1 GiB result.json cost 2 GB of memory."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", str(path))
        with open(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while read
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", str(path))
    return data


# ------------------------------------------------------------------------------------------------ S3


class StoreError(RuntimeError):
    """A store operation failed for good (after retries). The message names the object and the cause,
    never a credential."""


class RecordNotStored(StoreError):
    """A finished trial's record could not be written (a full or read-only disk, an S3 store that gave up). Not
    the trial's failure, and no retry of the trial can fix the store: the launcher stops launching instead of
    paying for every remaining trial again (a worker death is what it retries). Picklable across the worker pool."""

    def __init__(self, trial_id: str, location: str, cause: str) -> None:
        super().__init__(f"record of {trial_id} not stored in {location}: {cause}")
        self.trial_id, self.location, self.cause = trial_id, location, cause

    def __reduce__(self) -> tuple[type[RecordNotStored], tuple[str, str, str]]:
        return type(self), (self.trial_id, self.location, self.cause)


#: The AWS variables of the standard credential chain that a store built elsewhere (a worker process)
#: must see as the launching process saw them.
AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CA_BUNDLE",
)
_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "ServiceUnavailable", "InternalError"}
_T = TypeVar("_T")


@dataclass(frozen=True)
class S3Tuning:
    """Timeouts and retries of an S3 store. Defaults suit a real endpoint; tests shrink them."""

    max_attempts: int = 5  # botocore "standard" retry mode, total tries per request (5xx, throttling, conn. errors)
    op_attempts: int = 3  # whole operation again on connection errors / 5xx left after botocore's retries
    backoff_s: float = 1.0  # first wait between whole-operation attempts; doubles, capped at 30 s
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    read_concurrency: int = 8  # parallel GETs in iter_results


S3_DEFAULTS = S3Tuning()


def _join(*parts: str | None) -> str:
    """Key path from parts: no empty segments, so no ``//`` and no leading or trailing ``/``."""
    return "/".join(seg for part in parts if part for seg in part.split("/") if seg)


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> ("bucket", "some/prefix")."""
    m = re.match(r"^s3://([^/]+)/?(.*)$", uri)
    if not m:
        raise ValueError(f"not an s3://bucket/prefix URI: {uri!r}")
    return m.group(1), _join(m.group(2))


def _transient(exc: BaseException) -> bool:
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    if isinstance(exc, ConnectionError | HTTPClientError):  # EndpointConnectionError, ConnectTimeout, ReadTimeout...
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return status >= 500 or exc.response.get("Error", {}).get("Code") in _THROTTLED
    return False


class S3Store:
    """A run root in an S3 bucket: ``s3://<bucket>/<prefix>/<run-name>[/<run-uid>]/...``.

    Path-style addressing, so any S3-protocol endpoint works (MinIO, Ceph, moto, R2...). Credentials come
    from the standard chain only: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (the operator puts a Secret's
    keys there), a profile or the config files. ``env`` is where those variables are read (default: the
    process environment); a worker process gets the launcher's through ``StoreConfig``.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str,
        run_name: str,
        run_uid: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        *,
        tuning: S3Tuning | None = None,
        env: Mapping[str, str] | None = None,
        bare: bool = False,
    ):
        if not bare and not _join(run_name):
            raise ValueError("run_name must not be empty")
        self.bucket = bucket
        self.root = _join(prefix) if bare else _join(prefix, run_name, run_uid)
        self.endpoint_url, self.region = endpoint_url, region
        self.tuning = tuning or S3_DEFAULTS
        src = os.environ if env is None else env
        self._env = {k: src[k] for k in AWS_ENV if src.get(k)}
        self.client = self._make_client()

    def __repr__(self) -> str:
        shown = None if self.endpoint_url is None else self._redact(self.endpoint_url)
        return f"S3Store({self.location()!r}, endpoint_url={shown!r})"

    def _make_client(self) -> Any:
        import boto3
        import botocore.session
        from botocore.config import Config

        env, t = self._env, self.tuning
        core = botocore.session.Session()
        for var, name in (("AWS_CONFIG_FILE", "config_file"), ("AWS_SHARED_CREDENTIALS_FILE", "credentials_file")):
            if var in env:
                core.set_config_variable(name, env[var])
        creds: dict[str, Any] = {}
        if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            creds = {
                "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
                "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
                "aws_session_token": env.get("AWS_SESSION_TOKEN"),
            }
        elif env.get("AWS_PROFILE"):
            creds = {"profile_name": env["AWS_PROFILE"]}
        session = boto3.session.Session(
            botocore_session=core,
            region_name=self.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
            **creds,
        )
        extra: dict[str, Any] = {}
        if self.endpoint_url:
            # Non-AWS endpoints often reject botocore's newer default (CRC trailers on every request).
            extra = {"request_checksum_calculation": "when_required", "response_checksum_validation": "when_required"}
        config = Config(
            s3={"addressing_style": "path"},
            retries={"mode": "standard", "total_max_attempts": t.max_attempts},
            connect_timeout=t.connect_timeout,
            read_timeout=t.read_timeout,
            max_pool_connections=max(10, 2 * t.read_concurrency),
            **extra,
        )
        return session.client(
            "s3", endpoint_url=self.endpoint_url, config=config, verify=env.get("AWS_CA_BUNDLE") or None
        )

    # -- plumbing

    def location(self) -> str:
        return f"s3://{self.bucket}/{self.root}"

    def key(self, *parts: str) -> str:
        return _join(self.root, *parts)

    def _trial_key(self, trial_id: str, name: str) -> str:
        if not trial_id or "/" in trial_id or "/" in name or not name:
            raise ValueError(f"bad trial id or file name: {trial_id!r}, {name!r}")
        return self.key("trials", trial_id, name)

    def _redact(self, text: str) -> str:
        if self.endpoint_url:  # user-info or a signed query in the endpoint (`report --endpoint-url`), as botocore
            from mcpfleet.runner.spec.checks import shown_url  # repeats it in its errors too

            text = text.replace(self.endpoint_url.rstrip("/"), shown_url(self.endpoint_url).rstrip("/"))
        for k in ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN"):
            if len(self._env.get(k, "")) >= 4:
                text = text.replace(self._env[k], "***")
        return text

    def _op(self, what: str, key: str, fn: Callable[[], _T]) -> _T:
        """Run one S3 operation with whole-operation retries on transient errors; StoreError when it gives up."""
        from botocore.exceptions import BotoCoreError, ClientError
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

        t = self.tuning
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(max(1, t.op_attempts)),
                reraise=True,
                wait=wait_exponential(multiplier=t.backoff_s, max=30),
                retry=retry_if_exception(_transient),
            ):
                with attempt:
                    return fn()
        except (BotoCoreError, ClientError) as exc:
            raise StoreError(
                self._redact(
                    f"could not {what} s3://{self.bucket}/{key}"
                    f"{' at ' + self.endpoint_url if self.endpoint_url else ''}: "  # (shown_url'd by _redact)
                    f"{type(exc).__name__}: {exc}"
                )
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover - Retrying either returns or raises

    def _put(self, key: str, data: bytes) -> None:
        ctype = "application/json" if key.endswith(".json") else "application/octet-stream"
        self._op(
            "write", key, lambda: self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=ctype)
        )

    def _get(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        def get() -> bytes | None:
            try:
                return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                    return None
                raise

        return self._op("read", key, get)

    def _get_json(self, key: str) -> Any | None:
        data = self._get(key)
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError:  # a PUT is atomic, so garbage (not JSON, not UTF-8) was put by hand: unfinished
            return None

    def _list(self, prefix: str) -> list[str]:
        def listing() -> list[str]:
            keys: list[str] = []
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                keys.extend(o["Key"] for o in page.get("Contents", []))
            return keys

        return self._op("list", prefix, listing)

    def list_objects(self, prefix: str) -> list[tuple[str, str, int]]:
        """(key, ETag, size) of every object under ``prefix`` (a key prefix, not a run folder)."""

        def listing() -> list[tuple[str, str, int]]:
            out: list[tuple[str, str, int]] = []
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                out.extend((o["Key"], str(o.get("ETag", "")), int(o.get("Size", 0))) for o in page.get("Contents", []))
            return out

        return self._op("list", prefix, listing)

    def get_bytes(self, key: str) -> bytes | None:
        return self._get(key)

    def get_to_file(self, key: str, path: Path) -> bool:
        """Download ``key`` into ``path`` in chunks (a pack's large state file never sits in memory whole);
        False when it is gone. A retried attempt starts the file again."""
        from botocore.exceptions import ClientError

        def get() -> bool:
            try:
                body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                    return False
                raise
            with path.open("wb") as f:
                for chunk in body.iter_chunks(1 << 20):
                    f.write(chunk)
            return True

        return self._op("read", key, get)

    def _delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            batch = keys[i : i + 1000]

            def delete_batch(b: list[str] = batch) -> Any:
                return self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in b], "Quiet": True}
                )

            out = self._op("delete", batch[0], delete_batch)
            if out.get("Errors"):
                e = out["Errors"][0]
                raise StoreError(
                    f"could not delete s3://{self.bucket}/{e.get('Key')}: {e.get('Code')}: "
                    f"{e.get('Message')} ({len(out['Errors'])} object(s) not deleted)"
                )

    # -- the ResultStore interface

    def exists(self) -> bool:
        prefix = self.root + "/"
        out = self._op(
            "list", prefix, lambda: self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
        )
        return bool(out.get("KeyCount") or out.get("Contents"))

    def write_files(self, trial_id: str, files: dict[str, bytes]) -> None:
        """The trial's record files; not yet visible as finished."""
        for name, data in files.items():
            self._put(self._trial_key(trial_id, name), data)

    def commit(self, trial_id: str, result: bytes) -> None:
        """Write result.json, the completion marker, after every other file of the trial."""
        self._put(self._trial_key(trial_id, RESULT), result)

    def read_result(self, trial_id: str) -> dict[str, Any] | None:
        return self._get_record(self._trial_key(trial_id, RESULT))

    def _get_record(self, key: str) -> dict[str, Any] | None:
        """The record at ``.../trials/<trial id>/result.json`` (records.usable_record), else None: unfinished."""
        data = self._get(key)
        return None if data is None else usable_record(data, key.split("/")[-2])

    def read_trial_file(self, trial_id: str, name: str) -> bytes | None:
        """One of a trial's record files (messages.json, meta.json), or None."""
        return self._get(self._trial_key(trial_id, name))

    def _result_keys(self) -> list[str]:
        base = self.key("trials") + "/"
        keys = [k for k in self._list(base) if k.endswith("/" + RESULT) and k[len(base) :].count("/") == 1]
        return sorted(keys)

    def iter_results(self) -> Iterator[dict[str, Any]]:
        keys = self._result_keys()
        if not keys:
            return
        with ThreadPoolExecutor(max(1, min(self.tuning.read_concurrency, len(keys)))) as pool:
            for rec in pool.map(self._get_record, keys):
                if rec is not None:
                    yield rec

    def iter_results_below(self, skip: str | None = None) -> Iterator[dict[str, Any]]:
        """Records of this root and of every run UID prefix in it (see LocalStore's), but ``skip``'s."""
        base = self.root + "/"
        keys = []
        for k in self._list(base):
            parts = k[len(base) :].split("/")
            if parts[-1] != RESULT or parts[-3:-2] != ["trials"] or len(parts) not in (3, 4):
                continue
            if len(parts) == 4 and parts[0] == skip:
                continue
            keys.append(k)
        if not keys:
            return
        with ThreadPoolExecutor(max(1, min(self.tuning.read_concurrency, len(keys)))) as pool:
            for rec in pool.map(self._get_record, sorted(keys)):
                if rec is not None:
                    yield rec

    def discard_unfinished(self) -> int:
        """Delete trial prefixes without result.json (left by a crash or a failed commit); they will run again."""
        base = self.key("trials") + "/"
        by_trial: dict[str, list[str]] = {}
        for k in self._list(base):
            trial, sep, _ = k[len(base) :].partition("/")
            if sep:  # like the local store, only trial "folders" count; a stray object beside them stays
                by_trial.setdefault(trial, []).append(k)
        doomed = {t: ks for t, ks in by_trial.items() if is_trial_id(t) and self._trial_key(t, RESULT) not in ks}
        self._delete([k for ks in doomed.values() for k in ks])
        return len(doomed)

    def write_json(self, name: str, obj: Any) -> None:
        self._put(self.key(name), (json.dumps(obj, indent=2) + "\n").encode())

    def read_json(self, name: str) -> Any | None:
        return self._get_json(self.key(name))


# ------------------------------------------------------------------------------------------ opening


@dataclass(frozen=True)
class StoreConfig:
    """Everything needed to open the same store in another process (picklable, hashable).

    ``uri`` is an absolute folder or ``s3://bucket/prefix``. ``aws_env`` is the launching process's
    AWS_* variables (see ``AWS_ENV``), so a worker forked from a long-lived forkserver uses the
    credentials the launcher saw; it never appears in ``repr``.
    """

    uri: str
    run_name: str
    run_uid: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    tuning: S3Tuning = field(default_factory=lambda: S3_DEFAULTS)
    aws_env: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def is_s3(self) -> bool:
        return self.uri.startswith("s3://")

    def with_name(self, run_name: str) -> StoreConfig:
        return replace(self, run_name=run_name)

    def open(self) -> ResultStore:
        if self.is_s3:
            bucket, prefix = parse_s3_uri(self.uri)
            return S3Store(
                bucket,
                prefix,
                self.run_name,
                self.run_uid,
                self.endpoint_url,
                self.region,
                tuning=self.tuning,
                env=dict(self.aws_env),
            )
        root = Path(self.uri) / self.run_name
        return LocalStore(root / self.run_uid if self.run_uid else root)


def store_config(
    output: Output | str,
    run_name: str,
    base_dir: Path,
    run_uid: str | None = None,
    env: Mapping[str, str] | None = None,
) -> StoreConfig:
    """Resolve an EvalRun's output (or a bare URI) into a ``StoreConfig``; relative folders are under base_dir."""
    uri, endpoint_url, region = (
        (output, None, None) if isinstance(output, str) else (output.uri, output.endpoint_url, output.region)
    )
    if uri.startswith("s3://"):
        src = os.environ if env is None else env
        return StoreConfig(
            uri, run_name, run_uid, endpoint_url, region, aws_env=tuple((k, src[k]) for k in AWS_ENV if src.get(k))
        )
    root = Path(uri).expanduser()  # `~/runs` is the home folder's, as in a shell (not a folder named `~`)
    return StoreConfig(str(root if root.is_absolute() else base_dir / root), run_name, run_uid)


def open_store(output: Output | str, run_name: str, base_dir: Path, run_uid: str | None = None) -> ResultStore:
    """The store for a run: ``<output>/<run-name>[/<run-uid>]/``, a folder or an S3 prefix.

    ``output`` is the EvalRun's ``spec.output`` (S3 endpoint and region are taken from it) or a bare URI.
    """
    return store_config(output, run_name, base_dir, run_uid).open()
