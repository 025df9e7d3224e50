"""Server-side sessions in the site's own database: the cookie holds only a random token.

A row carries the signed-in user, the session's CSRF token and a small JSON bag (flash messages, a checkout in
progress). Kept in SQLite so sessions survive nothing but the trial, and a verifier can see who was signed in.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcpfleet.sites.common.security import token


@dataclass
class Session:
    token: str
    site: str
    user_id: int | None
    csrf: str
    data: dict[str, Any] = field(default_factory=dict)
    is_new: bool = False
    dirty: bool = False
    old_token: str | None = None  # set when the token was rotated (sign-in): the old row goes away

    def pop_flashes(self) -> list[dict[str, str]]:
        flashes: list[dict[str, str]] = self.data.pop("flash", [])
        if flashes:
            self.dirty = True
        return flashes

    def add_flash(self, message: str, level: str) -> None:
        self.data.setdefault("flash", []).append({"message": message, "level": level})
        self.dirty = True

    def rotate(self) -> None:
        """New token and CSRF token (on sign-in and sign-out), so a token seen before sign-in is worthless."""
        if not self.is_new and self.old_token is None:
            self.old_token = self.token
        self.token = token()
        self.csrf = token()
        self.is_new = True
        self.dirty = True


def new(site: str) -> Session:
    return Session(token=token(), site=site, user_id=None, csrf=token(), is_new=True, dirty=True)


def load(conn: sqlite3.Connection, site: str, value: str | None) -> Session | None:
    if not value:
        return None
    row = conn.execute(
        "SELECT token, user_id, csrf, data FROM sessions WHERE token = ? AND site = ?", (value, site)
    ).fetchone()
    if row is None:
        return None
    return Session(
        token=row["token"], site=site, user_id=row["user_id"], csrf=row["csrf"], data=json.loads(row["data"])
    )


def save(conn: sqlite3.Connection, session: Session) -> None:
    if not session.dirty:
        return
    if session.old_token:
        conn.execute("DELETE FROM sessions WHERE token = ?", (session.old_token,))
        session.old_token = None
    conn.execute(
        "INSERT INTO sessions (token, site, user_id, csrf, data, created_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(token) DO UPDATE SET user_id = excluded.user_id, csrf = excluded.csrf, data = excluded.data",
        (
            session.token,
            session.site,
            session.user_id,
            session.csrf,
            json.dumps(session.data, separators=(",", ":")),
            datetime.now(UTC).isoformat(timespec="seconds"),
        ),
    )
    session.dirty = False
