"""The forum as a :class:`~mcpfleet.sites.common.web.Site`, plus the lookups and permission checks every forum
page shares (who moderates what, who is banned where, relative times on the site clock)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from starlette.exceptions import HTTPException

from mcpfleet.sites.common import db
from mcpfleet.sites.common.web import Page, RouteTable

routes = RouteTable()


def load_user(conn: sqlite3.Connection, user_id: int) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM users WHERE id = ? AND is_banned = 0", (user_id,)).fetchone()


def forum_by_name(page: Page, name: str) -> sqlite3.Row:
    row = page.db.execute("SELECT * FROM forums WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise HTTPException(404, f"There is no forum called f/{name}.")
    return row


def is_moderator(page: Page, forum_id: int) -> bool:
    if page.user is None:
        return False
    if page.user["role"] == "admin":
        return True
    return bool(
        page.db.execute(
            "SELECT 1 FROM forum_moderators WHERE forum_id = ? AND user_id = ?", (forum_id, page.user["id"])
        ).fetchone()
    )


def require_moderator(page: Page, forum: sqlite3.Row) -> sqlite3.Row:
    user = page.require_user()
    if not is_moderator(page, forum["id"]):
        raise HTTPException(403, f"Only moderators of f/{forum['name']} can do that.")
    return user


def ban_of(page: Page, forum_id: int, user_id: int | None = None) -> sqlite3.Row | None:
    """The user's active ban in this forum, if any (a ban with an expiry date lasts through that day)."""
    uid = user_id if user_id is not None else (page.user["id"] if page.user is not None else None)
    if uid is None:
        return None
    return page.db.execute(
        "SELECT * FROM bans WHERE forum_id = ? AND user_id = ? AND (expires_on IS NULL OR expires_on >= ?)",
        (forum_id, uid, page.today),
    ).fetchone()


def moderated_forums(page: Page) -> list[sqlite3.Row]:
    if page.user is None:
        return []
    if page.user["role"] == "admin":
        return page.db.execute("SELECT * FROM forums ORDER BY name").fetchall()
    return page.db.execute(
        "SELECT f.* FROM forums f JOIN forum_moderators m ON m.forum_id = f.id WHERE m.user_id = ? ORDER BY f.name",
        (page.user["id"],),
    ).fetchall()


def _ago(now: datetime, value: str | None) -> str:
    if not value:
        return ""
    seconds = int((now - datetime.fromisoformat(value)).total_seconds())
    for size, unit in (
        (365 * 86400, "year"),
        (30 * 86400, "month"),
        (7 * 86400, "week"),
        (86400, "day"),
        (3600, "hour"),
        (60, "minute"),
    ):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'} ago"
    return "just now"


def _layout(page: Page) -> dict[str, Any]:
    now = datetime.fromisoformat(db.clock(page.db))
    open_reports = 0
    mod_forums = moderated_forums(page)
    if mod_forums:
        marks = ",".join("?" for _ in mod_forums)
        open_reports = page.db.execute(
            f"SELECT COUNT(*) FROM reports WHERE status = 'open' AND forum_id IN ({marks})",
            [f["id"] for f in mod_forums],
        ).fetchone()[0]
    return {"ago": lambda value: _ago(now, value), "is_mod_anywhere": bool(mod_forums), "open_reports": open_reports}
