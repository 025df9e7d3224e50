"""On-disk cache of judge answers (SQLite), keyed by a hash of everything the answer depends on.

The key is the sha256 of (tools, conversation, call, judge model, its endpoint, rubric version): re-running
an evaluation, or judging the same call in another run, costs no model call. Only validated answers are stored.

The cache is an optimisation, never a reason to lose a verdict: a read that fails (a corrupt file, a lock held
past the busy timeout) is a miss, and a write that fails (a read-only volume, a full disk, a lock) is logged
once and turns writing to that file off for the rest of the process (reads go on: a read-only pre-populated
cache still answers). Opening a file that is not a usable cache raises ``sqlite3.Error``; callers decide.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from mcpfleet.runner.toolcalls.models import Case

CACHE_ENV = "MCPFLEET_JUDGE_CACHE_DIR"
FILE_NAME = "judge-cache.sqlite"
BUSY_TIMEOUT_S = 30.0  # how long a statement waits for another process's lock before it counts as failed
log = logging.getLogger(__name__)
_no_writes: set[str] = set()  # cache files a write failed on: not written again by this process
_warned: set[tuple[str, str]] = set()


def _warn_once(path: Path, what: str, exc: BaseException) -> None:
    if (str(path), what) in _warned:
        return
    _warned.add((str(path), what))
    log.warning("judge cache %s: %s failed (%s: %s)", path, what, type(exc).__name__, exc)


def default_cache_dir() -> Path:
    """$MCPFLEET_JUDGE_CACHE_DIR, else $XDG_CACHE_HOME or ~/.cache, /mcpfleet/judge."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcpfleet" / "judge"


def cache_key(case: Case, model: str, rubric_version: str, api_base: str | None = None) -> str:
    """The answer's key; ``api_base`` is part of it: one model name on two endpoints may be two models."""
    payload: dict[str, Any] = {
        "tools": [t.as_dict() for t in case.tools],
        "history": case.history,
        "call": {"name": case.call.name, "arguments": case.call.arguments, "content": case.call_content or ""},
        "model": model,
        "rubric": rubric_version,
    }
    if api_base:  # left out when unset, so keys made before api_base counted stay valid
        payload["api_base"] = api_base.rstrip("/")
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class JudgeCache:
    """One SQLite file; safe for one process with many asyncio tasks (each call is short and synchronous)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / FILE_NAME
        self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
        try:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, model TEXT NOT NULL, rubric TEXT NOT NULL,"
                " score TEXT NOT NULL, reasoning TEXT NOT NULL, created REAL NOT NULL)"
            )
            self._db.commit()
        except sqlite3.Error:
            self._db.close()
            raise

    @property
    def writable(self) -> bool:
        return str(self.path) not in _no_writes

    def get(self, key: str) -> tuple[str, str] | None:
        """The cached (score, reasoning), or None: not cached, or the cache could not be read (a miss)."""
        try:
            row = self._db.execute("SELECT score, reasoning FROM answers WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            _warn_once(self.path, "reading", exc)
            return None
        return (str(row[0]), str(row[1])) if row else None

    def put(self, key: str, model: str, rubric: str, score: str, reasoning: str) -> None:
        """Store an answer; a failure is logged once and no more writes to this file are tried."""
        if not self.writable:
            return
        try:
            self._db.execute(
                "INSERT OR REPLACE INTO answers (key, model, rubric, score, reasoning, created)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (key, model, rubric, score, reasoning, time.time()),
            )
            self._db.commit()
        except sqlite3.Error as exc:
            _no_writes.add(str(self.path))
            _warn_once(self.path, "writing (no more answers are stored in it by this process)", exc)
            try:
                self._db.rollback()
            except sqlite3.Error:
                pass

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        self._db.close()
