"""SQLite access for the sites: one short-lived connection per request, explicit transactions, the site clock.

Rollback-journal mode (not WAL) on purpose: after every committed request the database file alone holds the
whole state, so a verifier (or a copy taken out of a pod) reads it without a ``-wal`` companion, and two
processes (shop and admin) can share one file on one volume.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

CLOCK_STEP = timedelta(minutes=1)

# Tables every site's database has: metadata (seed, fixed "today", the site clock), server-side sessions and
# the append-only audit log (triggers refuse UPDATE and DELETE).
COMMON_SCHEMA = """
CREATE TABLE site_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE sessions (
    token TEXT PRIMARY KEY,
    site TEXT NOT NULL,
    user_id INTEGER,
    csrf TEXT NOT NULL,
    data TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY,
    site TEXT NOT NULL,
    actor_id INTEGER,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target_type TEXT,
    target_id TEXT,
    details TEXT NOT NULL DEFAULT '{}',
    site_time TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX audit_log_action ON audit_log(action);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
"""


def connect(path: Path) -> sqlite3.Connection:
    """Autocommit connection (transactions are explicit), rows addressable by column name."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def meta(conn: sqlite3.Connection, key: str) -> str:
    row = conn.execute("SELECT value FROM site_meta WHERE key = ?", (key,)).fetchone()
    if row is None:
        raise KeyError(f"site_meta has no '{key}'")
    return str(row[0])


def today(conn: sqlite3.Connection) -> str:
    """The seed's fixed "today" (YYYY-MM-DD): every date a task can see or check derives from it."""
    return meta(conn, "today")


def tick(conn: sqlite3.Connection) -> str:
    """Advance the site clock by one step and return it (ISO seconds, no zone).

    New rows get their timestamps from this logical clock, never from the wall clock, so the same actions on
    the same seed produce the same data whenever they happen. Call it inside the request's transaction.
    """
    now = datetime.fromisoformat(meta(conn, "clock")) + CLOCK_STEP
    value = now.isoformat(timespec="seconds")
    conn.execute("UPDATE site_meta SET value = ? WHERE key = 'clock'", (value,))
    return value


def clock(conn: sqlite3.Connection) -> str:
    """The site clock's current value, without advancing it."""
    return meta(conn, "clock")


def content_hash(path: Path) -> str:
    """SHA-256 over the schema and every row of every table in rowid order: equal hashes, equal content."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        digest = hashlib.sha256()
        for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"):
            digest.update(f"{name}\n{sql}\n".encode())
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            if table.startswith("sqlite_"):
                continue
            digest.update(f"table {table}\n".encode())
            for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid'):
                digest.update(repr(tuple(row)).encode())
                digest.update(b"\n")
        return digest.hexdigest()
    finally:
        conn.close()
