"""Moderation: the reports queue, removing and restoring content, locking and pinning, forum bans.

Moderators act only in their own forums; the site admin (role ``admin``) acts everywhere. Removing content
resolves every open report on it as ``actioned``.
"""

from __future__ import annotations

import sqlite3
from datetime import date, timedelta
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response

from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.forum import content
from mcpfleet.sites.forum.actions import _comment, _post, post_url
from mcpfleet.sites.forum.site import forum_by_name, moderated_forums, require_moderator, routes

PER_PAGE = 20
REPORT_STATUSES = {"open": "Open", "dismissed": "Dismissed", "actioned": "Actioned"}


@routes.get("/mod")
async def queue(page: Page) -> Response:
    page.require_user()
    forums = moderated_forums(page)
    if not forums:
        raise HTTPException(403, "The moderation queue is only for moderators.")
    filters = Form({"status": page.arg("status", "open"), "forum": page.arg("forum")})
    ids = [f["id"] for f in forums]
    names = {f["name"]: f["id"] for f in forums}
    if filters.get("forum") in names:
        ids = [names[filters.get("forum")]]
    where = [f"r.forum_id IN ({','.join('?' for _ in ids)})"]
    params: list[Any] = list(ids)
    if filters.get("status") in REPORT_STATUSES:
        where.append("r.status = ?")
        params.append(filters.get("status"))
    else:
        filters.values["status"] = "all"
    clause = " WHERE " + " AND ".join(where)
    total = page.db.execute(f"SELECT COUNT(*) FROM reports r{clause}", params).fetchone()[0]
    pager = page.paginate(total, PER_PAGE)
    reports = page.db.execute(
        "SELECT r.*, f.name AS forum_name, ru.username AS reporter, res.username AS resolver,"
        " p.title AS post_title, p.id AS pid, p.removed_by AS post_removed, pa.username AS post_author,"
        " c.body AS comment_body, c.removed_by AS comment_removed, ca.username AS comment_author,"
        " cp.id AS comment_post_id, cp.title AS comment_post_title"
        " FROM reports r JOIN forums f ON f.id = r.forum_id JOIN users ru ON ru.id = r.reporter_id"
        " LEFT JOIN users res ON res.id = r.resolved_by"
        " LEFT JOIN posts p ON p.id = r.post_id LEFT JOIN users pa ON pa.id = p.author_id"
        " LEFT JOIN comments c ON c.id = r.comment_id LEFT JOIN users ca ON ca.id = c.author_id"
        " LEFT JOIN posts cp ON cp.id = c.post_id"
        f"{clause} ORDER BY r.created_at DESC, r.id DESC LIMIT ? OFFSET ?",
        [*params, PER_PAGE, pager.offset],
    ).fetchall()
    return page.render(
        "mod_queue.html",
        reports=reports,
        pager=pager,
        filters=filters,
        status_options=[("all", "All"), *REPORT_STATUSES.items()],
        forum_options=[(f["name"], f"f/{f['name']}") for f in forums],
        reasons=content.REPORT_REASONS,
        report_statuses=REPORT_STATUSES,
    )


def _report(page: Page) -> tuple[sqlite3.Row, sqlite3.Row]:
    row = page.db.execute("SELECT * FROM reports WHERE id = ?", (page.int_path_param("id"),)).fetchone()
    if row is None:
        raise HTTPException(404, "There is no such report.")
    forum = page.db.execute("SELECT * FROM forums WHERE id = ?", (row["forum_id"],)).fetchone()
    require_moderator(page, forum)
    return row, forum


@routes.post("/mod/reports/{id:int}/dismiss")
async def dismiss(page: Page) -> Response:
    row, _ = _report(page)
    back = page.next_url("/mod")
    if row["status"] != "open":
        return page.redirect(back, f"Report #{row['id']} is already {row['status']}.", "info")
    page.db.execute(
        "UPDATE reports SET status = 'dismissed', resolved_by = ?, resolved_at = ? WHERE id = ?",
        (page.require_user()["id"], page.now(), row["id"]),
    )
    page.audit("report.dismiss", "report", row["id"], post_id=row["post_id"], comment_id=row["comment_id"])
    return page.redirect(back, f"Report #{row['id']} dismissed.")


def _remove(page: Page, kind: str, target: sqlite3.Row, reason: str) -> None:
    user = page.require_user()
    now = page.now()
    page.db.execute(
        f"UPDATE {kind}s SET removed_by = ?, removed_reason = ?, removed_at = ? WHERE id = ?",
        (user["id"], reason, now, target["id"]),
    )
    if kind == "comment" and not target["is_deleted"]:
        page.db.execute("UPDATE posts SET comment_count = comment_count - 1 WHERE id = ?", (target["post_id"],))
    resolved = page.db.execute(
        f"UPDATE reports SET status = 'actioned', resolved_by = ?, resolved_at = ?"
        f" WHERE {kind}_id = ? AND status = 'open'",
        (user["id"], now, target["id"]),
    ).rowcount
    page.audit(f"{kind}.remove", kind, target["id"], reason=reason, reports_actioned=resolved)


def _reason(page: Page) -> str | None:
    reason = page.form.get("reason")
    return reason[:200] if reason else None


@routes.post("/mod/reports/{id:int}/remove")
async def remove_reported(page: Page) -> Response:
    row, forum = _report(page)
    back = page.next_url("/mod")
    reason = _reason(page)
    if not reason:
        return page.redirect(back, "Give a removal reason (it is shown to the author).", "error")
    kind = "post" if row["post_id"] else "comment"
    target = page.db.execute(f"SELECT * FROM {kind}s WHERE id = ?", (row[f"{kind}_id"],)).fetchone()
    if target["removed_by"] is not None:
        return page.redirect(back, f"That {kind} was already removed.", "info")
    _remove(page, kind, target, reason)
    return page.redirect(back, f"The reported {kind} was removed and report #{row['id']} closed.")


@routes.post("/p/{id:int}/moderate")
async def moderate_post(page: Page) -> Response:
    post, forum = _post(page)
    require_moderator(page, forum)
    action = page.form.get("action")
    back = page.next_url(post_url(post, forum["name"]))
    flags = {
        "lock": ("is_locked", 1, "locked"),
        "unlock": ("is_locked", 0, "unlocked"),
        "pin": ("is_pinned", 1, "pinned"),
        "unpin": ("is_pinned", 0, "unpinned"),
    }
    if action in flags:
        column, value, word = flags[action]
        page.db.execute(f"UPDATE posts SET {column} = ? WHERE id = ?", (value, post["id"]))
        page.audit(f"post.{action}", "post", post["id"])
        return page.redirect(back, f"Post {word}.")
    if action == "remove":
        reason = _reason(page)
        if not reason:
            return page.redirect(back, "Give a removal reason (it is shown to the author).", "error")
        if post["removed_by"] is not None:
            return page.redirect(back, "That post was already removed.", "info")
        _remove(page, "post", post, reason)
        return page.redirect(back, "Post removed.")
    if action == "restore":
        if post["removed_by"] is None:
            return page.redirect(back, "That post is not removed.", "info")
        page.db.execute(
            "UPDATE posts SET removed_by = NULL, removed_reason = NULL, removed_at = NULL WHERE id = ?", (post["id"],)
        )
        page.audit("post.restore", "post", post["id"])
        return page.redirect(back, "Post restored.")
    return page.redirect(back, "Unknown moderation action.", "error")


@routes.post("/c/{id:int}/moderate")
async def moderate_comment(page: Page) -> Response:
    row, post, forum = _comment(page)
    require_moderator(page, forum)
    action = page.form.get("action")
    back = page.next_url(f"{post_url(post, forum['name'])}#c{row['id']}")
    if action == "remove":
        reason = _reason(page)
        if not reason:
            return page.redirect(back, "Give a removal reason (it is shown to the author).", "error")
        if row["removed_by"] is not None:
            return page.redirect(back, "That comment was already removed.", "info")
        _remove(page, "comment", row, reason)
        return page.redirect(back, "Comment removed.")
    if action == "restore":
        if row["removed_by"] is None:
            return page.redirect(back, "That comment is not removed.", "info")
        page.db.execute(
            "UPDATE comments SET removed_by = NULL, removed_reason = NULL, removed_at = NULL WHERE id = ?", (row["id"],)
        )
        if not row["is_deleted"]:
            page.db.execute("UPDATE posts SET comment_count = comment_count + 1 WHERE id = ?", (post["id"],))
        page.audit("comment.restore", "comment", row["id"])
        return page.redirect(back, "Comment restored.")
    return page.redirect(back, "Unknown moderation action.", "error")


# -- bans ---------------------------------------------------------------------------------------------------
def _bans(page: Page, forum: sqlite3.Row) -> list[sqlite3.Row]:
    return page.db.execute(
        "SELECT b.*, u.username, m.username AS banned_by_name FROM bans b JOIN users u ON u.id = b.user_id"
        " JOIN users m ON m.id = b.banned_by WHERE b.forum_id = ? ORDER BY b.created_at DESC",
        (forum["id"],),
    ).fetchall()


@routes.form("/f/{name}/bans")
async def bans(page: Page) -> Response:
    forum = forum_by_name(page, page.path_param("name"))
    moderator = require_moderator(page, forum)
    if page.request.method == "GET":
        return page.render("bans.html", forum=forum, bans=_bans(page, forum))
    form = page.form
    username = form.required("username", "Username", 20)
    target = None
    if username:
        target = page.db.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
        if target is None:
            form.error("username", f"There is no user called {username}.")
        elif target["id"] == moderator["id"]:
            form.error("username", "You cannot ban yourself.")
        elif page.db.execute(
            "SELECT 1 FROM bans WHERE forum_id = ? AND user_id = ?", (forum["id"], target["id"])
        ).fetchone():
            form.error("username", f"{target['username']} is already banned from f/{forum['name']}.")
    reason = form.required("reason", "Reason", 300)
    days = form.integer("days", "Ban length in days", 1, 3650) if form.get("days") else None
    if not form.ok or target is None:
        return page.render("bans.html", status_code=422, forum=forum, bans=_bans(page, forum))
    expires = (date.fromisoformat(page.today) + timedelta(days=days)).isoformat() if days else None
    page.db.execute(
        "INSERT INTO bans (forum_id, user_id, reason, banned_by, created_at, expires_on) VALUES (?, ?, ?, ?, ?, ?)",
        (forum["id"], target["id"], reason, moderator["id"], page.now(), expires),
    )
    page.audit(
        "ban.create",
        "user",
        target["id"],
        forum=forum["name"],
        username=target["username"],
        reason=reason,
        expires_on=expires,
    )
    until = f" until {expires}" if expires else " permanently"
    return page.redirect(f"/f/{forum['name']}/bans", f"{target['username']} is banned from f/{forum['name']}{until}.")


@routes.post("/f/{name}/bans/{username}/unban")
async def unban(page: Page) -> Response:
    forum = forum_by_name(page, page.path_param("name"))
    require_moderator(page, forum)
    target = page.db.execute("SELECT * FROM users WHERE username = ?", (page.path_param("username"),)).fetchone()
    cur = page.db.execute(
        "DELETE FROM bans WHERE forum_id = ? AND user_id = ?", (forum["id"], target["id"] if target else -1)
    )
    if not cur.rowcount or target is None:
        return page.redirect(f"/f/{forum['name']}/bans", "That user is not banned here.", "error")
    page.audit("ban.remove", "user", target["id"], forum=forum["name"], username=target["username"])
    return page.redirect(f"/f/{forum['name']}/bans", f"{target['username']} has been unbanned from f/{forum['name']}.")
