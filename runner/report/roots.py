"""A run root as a store: a local run folder or ``s3://bucket/prefix/<run>[/<uid>]``, refused with a message that
says what to give instead. Apart from load.py so that the viewer opens runs without importing the report's
scoring."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.runner.results.store import LocalStore, ResultStore, S3Store, parse_s3_uri


class ReportError(ValueError):
    """A run could not be read; the message says which and why."""


def open_run(ref: str, endpoint_url: str | None = None, region: str | None = None) -> ResultStore:
    """The store of a run root: a local folder or ``s3://bucket/prefix/<run>[/<uid>]``."""
    if ref.startswith("s3://"):
        bucket, key = parse_s3_uri(ref)
        if not key:
            raise ReportError(f"{ref}: give the run root, s3://<bucket>/<prefix>/<run>[/<uid>], not a bare bucket")
        return S3Store(bucket, "", key, None, endpoint_url, region)
    if "://" in ref:
        raise ReportError(f"{ref}: only local folders and s3:// URIs can be reported")
    path = local_root(ref)
    if path.exists() and not path.is_dir():
        kind = "a file (an EvalRun?)" if path.is_file() else "not a folder"
        raise ReportError(f"{ref}: is {kind}, not a run folder; give the run folder, e.g. runs/<metadata.name>")
    if not path.is_dir():
        raise ReportError(f"{ref}: no such run folder")
    if not any((path / n).exists() for n in ("summary.json", "trials", "run.json")):
        subs = sorted(p.name for p in path.iterdir() if (p / "summary.json").exists() or (p / "trials").is_dir())
        hint = f"; it holds the run(s) {', '.join(subs[:5])}: give one of those" if subs else ""
        raise ReportError(f"{ref}: not a run folder (no summary.json or trials/){hint}")
    return LocalStore(path)


def local_root(ref: str) -> Path:
    """The folder a local run reference names (its summary.json or run.json stands for the run folder)."""
    path = Path(ref)
    if path.is_file() and path.name in ("summary.json", "run.json"):
        path = path.parent
    return path
