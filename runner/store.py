"""Where a run's records live. One interface; the local folder now, S3 with the same layout next.

Layout under a run root: ``trials/<trial-id>/{messages.json, meta.json, ..., result.json}``,
``run.json`` (what the run is) and ``summary.json`` (its aggregates). Writing a trial is idempotent:
the same trial id writes the same keys, and ``commit`` writes result.json after all of them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

RESULT = "result.json"


class ResultStore(Protocol):
    def write_files(self, trial_id: str, files: dict[str, bytes]) -> None: ...
    def commit(self, trial_id: str, result: bytes) -> None: ...
    def read_result(self, trial_id: str) -> dict[str, Any] | None: ...
    def iter_results(self) -> Iterator[dict[str, Any]]: ...
    def write_json(self, name: str, obj: Any) -> None: ...
    def read_json(self, name: str) -> Any | None: ...
    def location(self) -> str: ...


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
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

    def trial_dir(self, trial_id: str) -> Path:
        return self.root / "trials" / trial_id

    def write_files(self, trial_id: str, files: dict[str, bytes]) -> None:
        """The trial's record files; not yet visible as finished."""
        d = self.trial_dir(trial_id)
        d.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            _atomic_write(d / name, data)

    def commit(self, trial_id: str, result: bytes) -> None:
        """Write result.json, the completion marker, after every other file of the trial."""
        d = self.trial_dir(trial_id)
        d.mkdir(parents=True, exist_ok=True)
        _atomic_write(d / RESULT, result)

    def read_result(self, trial_id: str) -> dict[str, Any] | None:
        path = self.trial_dir(trial_id) / RESULT
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except json.JSONDecodeError:
            return None  # cannot happen with atomic writes; treat as unfinished rather than crash

    def iter_results(self) -> Iterator[dict[str, Any]]:
        trials = self.root / "trials"
        if not trials.is_dir():
            return
        for d in sorted(trials.iterdir()):
            r = self.read_result(d.name)
            if r is not None:
                yield r

    def discard_unfinished(self) -> int:
        """Remove trial folders without result.json (left by a crash or Ctrl-C); they will run again."""
        trials = self.root / "trials"
        n = 0
        if trials.is_dir():
            for d in trials.iterdir():
                if d.is_dir() and not (d / RESULT).exists():
                    shutil.rmtree(d, ignore_errors=True)
                    n += 1
        return n

    def write_json(self, name: str, obj: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.root / name, (json.dumps(obj, indent=2) + "\n").encode())

    def read_json(self, name: str) -> Any | None:
        try:
            return json.loads((self.root / name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None


def open_store(output_uri: str, run_name: str, base_dir: Path) -> ResultStore:
    """The store for a run: ``<output>/<run-name>/``."""
    if output_uri.startswith("s3://"):
        raise NotImplementedError("the S3 results store arrives with the operator; use a local output.uri")
    root = Path(output_uri)
    if not root.is_absolute():
        root = base_dir / root
    return LocalStore(root / run_name)
