"""On-disk cache of judge answers (SQLite), keyed by a hash of everything the answer depends on.

The key is the sha256 of (tools, conversation, call, judge model, its endpoint, rubric version): re-running
an evaluation, or judging the same call in another run, costs no model call. Only validated answers are stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from .models import Case

CACHE_ENV = "MCPFLEET_JUDGE_CACHE_DIR"


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
        self.path = directory / "judge-cache.sqlite"
        self._db = sqlite3.connect(self.path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, model TEXT NOT NULL, rubric TEXT NOT NULL,"
            " score TEXT NOT NULL, reasoning TEXT NOT NULL, created REAL NOT NULL)"
        )
        self._db.commit()

    def get(self, key: str) -> tuple[str, str] | None:
        row = self._db.execute("SELECT score, reasoning FROM answers WHERE key = ?", (key,)).fetchone()
        return (str(row[0]), str(row[1])) if row else None

    def put(self, key: str, model: str, rubric: str, score: str, reasoning: str) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO answers (key, model, rubric, score, reasoning, created) VALUES (?, ?, ?, ?, ?, ?)",
            (key, model, rubric, score, reasoning, time.time()),
        )
        self._db.commit()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        self._db.close()
