"""Writing: submit, comment, vote, edit, delete, report, subscribe, create a forum."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response

from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.seeding import slugify
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.forum import content
from mcpfleet.sites.forum.browse import post_page
from mcpfleet.sites.forum.site import ban_of, forum_by_name, routes


def post_url(row: sqlite3.Row | dict[str, object], forum_name: str) -> str:
    return f"/f/{forum_name}/{row['id']}/{slugify(str(row['title']))[:60] or 'post'}"


def _post(page: Page) -> tuple[sqlite3.Row, sqlite3.Row]:
    row = page.db.execute("SELECT * FROM posts WHERE id = ?", (page.int_path_param("id"),)).fetchone()
    if row is None:
        raise HTTPException(404, "That post does not exist.")
    forum = page.db.execute("SELECT * FROM forums WHERE id = ?", (row["forum_id"],)).fetchone()
    return row, forum


def _comment(page: Page) -> tuple[sqlite3.Row, sqlite3.Row, sqlite3.Row]:
    row = page.db.execute("SELECT * FROM comments WHERE id = ?", (page.int_path_param("id"),)).fetchone()
    if row is None:
        raise HTTPException(404, "That comment does not exist.")
    post = page.db.execute("SELECT * FROM posts WHERE id = ?", (row["post_id"],)).fetchone()
    forum = page.db.execute("SELECT * FROM forums WHERE id = ?", (post["forum_id"],)).fetchone()
    return row, post, forum


def _gone(row: sqlite3.Row) -> bool:
    return bool(row["is_deleted"]) or row["removed_by"] is not None


def _refuse_banned(page: Page, forum: sqlite3.Row) -> None:
    ban = ban_of(page, forum["id"])
    if ban is not None:
        until = f" until {ban['expires_on']}" if ban["expires_on"] else ""
        raise HTTPException(403, f"You are banned from f/{forum['name']}{until}. Reason: {ban['reason']}")


# -- submit -------------------------------------------------------------------------------------------------
@routes.form("/submit")
async def submit(page: Page) -> Response:
    user = page.require_user()
    options = [(r["name"], f"f/{r['name']}") for r in page.db.execute("SELECT name FROM forums ORDER BY name")]
    if page.request.method == "GET":
        page.form = Form({"forum": page.arg("forum")})
        return page.render("submit.html", forum_options=options)
    form = page.form
    forum = page.db.execute("SELECT * FROM forums WHERE name = ?", (form.get("forum"),)).fetchone()
    if forum is None:
        form.error("forum", "Choose a forum to post in.")
    elif ban_of(page, forum["id"]) is not None:
        form.error("forum", f"You are banned from f/{forum['name']} and cannot post there.")
    title = form.required("title", "Title", 300)
    url = form.optional("url", "Link", 2000)
    body = form.optional("body", "Text", 20000)
    if url and not re.match(r"^https?://[^\s/]+\.[^\s]+$", url):
        form.error("url", "Enter a full link starting with http:// or https://.")
    if not url and not body and "title" not in form.errors:
        form.error("body", "Add some text or a link.")
    if not form.ok or forum is None:
        return page.render("submit.html", status_code=422, forum_options=options)
    cur = page.db.execute(
        "INSERT INTO posts (forum_id, author_id, title, url, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (forum["id"], user["id"], title, url or None, body, page.now()),
    )
    post_id = int(cur.lastrowid or 0)
    page.audit("post.create", "post", post_id, forum=forum["name"], title=title, url=url or None)
    return page.redirect(post_url({"id": post_id, "title": title}, forum["name"]), "Your post has been submitted.")


# -- comments -----------------------------------------------------------------------------------------------
@routes.post("/p/{id:int}/comments")
async def comment(page: Page) -> Response:
    user = page.require_user()
    post, forum = _post(page)
    back = post_url(post, forum["name"])
    if _gone(post):
        return page.redirect(back, "You can't comment on a deleted or removed post.", "error")
    if post["is_locked"]:
        return page.redirect(back, "This post is locked. New comments are not allowed.", "error")
    _refuse_banned(page, forum)
    form = page.form
    body = form.required("body", "Comment", 10000)
    parent_id = None
    if form.get("parent_id"):
        parent = page.db.execute(
            "SELECT id FROM comments WHERE id = ? AND post_id = ?", (form.get("parent_id"), post["id"])
        ).fetchone()
        if parent is None:
            form.error("body", "The comment you are replying to does not exist.")
        else:
            parent_id = parent["id"]
    if not form.ok:
        return await post_page(page, post["id"], forum["name"], form, reply_to=parent_id)
    cur = page.db.execute(
        "INSERT INTO comments (post_id, parent_id, author_id, body, created_at) VALUES (?, ?, ?, ?, ?)",
        (post["id"], parent_id, user["id"], body, page.now()),
    )
    page.db.execute("UPDATE posts SET comment_count = comment_count + 1 WHERE id = ?", (post["id"],))
    page.audit("comment.create", "comment", cur.lastrowid, post_id=post["id"], parent_id=parent_id)
    return page.redirect(f"{back}#c{cur.lastrowid}", "Your comment has been posted.")


# -- votes --------------------------------------------------------------------------------------------------
async def _vote(page: Page, kind: str, target: sqlite3.Row, forum: sqlite3.Row, back: str) -> Response:
    user = page.require_user()
    if _gone(target):
        return page.redirect(back, "You can't vote on deleted or removed content.", "error")
    _refuse_banned(page, forum)
    try:
        value = int(page.form.get("value"))
    except ValueError:
        value = 0
    if value not in (1, -1):
        return page.redirect(back, "Choose upvote or downvote.", "error")
    table = f"{kind}_votes"
    old_row = page.db.execute(
        f"SELECT value FROM {table} WHERE user_id = ? AND {kind}_id = ?", (user["id"], target["id"])
    ).fetchone()
    old = int(old_row[0]) if old_row else 0
    new = 0 if old == value else value  # the same button again takes the vote back
    if new == 0:
        page.db.execute(f"DELETE FROM {table} WHERE user_id = ? AND {kind}_id = ?", (user["id"], target["id"]))
    else:
        page.db.execute(
            f"INSERT INTO {table} (user_id, {kind}_id, value, created_at) VALUES (?, ?, ?, ?)"
            f" ON CONFLICT(user_id, {kind}_id) DO UPDATE SET value = excluded.value, created_at = excluded.created_at",
            (user["id"], target["id"], new, page.now()),
        )
    page.db.execute(f"UPDATE {kind}s SET score = score + ? WHERE id = ?", (new - old, target["id"]))
    page.audit(f"vote.{kind}", kind, target["id"], old=old, new=new)
    words = {1: "Upvoted", -1: "Downvoted", 0: "Vote removed"}
    return page.redirect(back, words[new] + ".", "success")


@routes.post("/p/{id:int}/vote")
async def vote_post(page: Page) -> Response:
    post, forum = _post(page)
    return await _vote(page, "post", post, forum, page.next_url(post_url(post, forum["name"])))


@routes.post("/c/{id:int}/vote")
async def vote_comment(page: Page) -> Response:
    row, post, forum = _comment(page)
    return await _vote(page, "comment", row, forum, page.next_url(f"{post_url(post, forum['name'])}#c{row['id']}"))


# -- edit and delete (authors) ------------------------------------------------------------------------------
def _own(page: Page, row: sqlite3.Row, what: str) -> None:
    user = page.require_user()
    if row["author_id"] != user["id"]:
        raise HTTPException(403, f"You can only change your own {what}.")
    if _gone(row):
        raise HTTPException(404, f"That {what} was deleted or removed.")


@routes.form("/p/{id:int}/edit")
async def edit_post(page: Page) -> Response:
    post, forum = _post(page)
    _own(page, post, "posts")
    if page.request.method == "GET":
        page.form = Form({"body": post["body"]})
        return page.render("edit.html", kind="post", item=post, forum=forum, back=post_url(post, forum["name"]))
    body = page.form.optional("body", "Text", 20000)
    if not body and not post["url"]:
        page.form.error("body", "A text post needs some text. Delete the post instead if you want it gone.")
    if not page.form.ok:
        return page.render(
            "edit.html", status_code=422, kind="post", item=post, forum=forum, back=post_url(post, forum["name"])
        )
    if body == post["body"]:
        return page.redirect(post_url(post, forum["name"]), "No changes to save.", "info")
    page.db.execute("UPDATE posts SET body = ?, edited_at = ? WHERE id = ?", (body, page.now(), post["id"]))
    page.audit("post.edit", "post", post["id"], old_length=len(post["body"]), new_length=len(body))
    return page.redirect(post_url(post, forum["name"]), "Your post has been updated.")


@routes.post("/p/{id:int}/delete")
async def delete_post(page: Page) -> Response:
    post, forum = _post(page)
    _own(page, post, "posts")
    page.db.execute("UPDATE posts SET is_deleted = 1 WHERE id = ?", (post["id"],))
    page.audit("post.delete", "post", post["id"], forum=forum["name"])
    return page.redirect(f"/f/{forum['name']}", "Your post has been deleted.")


@routes.form("/c/{id:int}/edit")
async def edit_comment(page: Page) -> Response:
    row, post, forum = _comment(page)
    _own(page, row, "comments")
    back = f"{post_url(post, forum['name'])}#c{row['id']}"
    if page.request.method == "GET":
        page.form = Form({"body": row["body"]})
        return page.render("edit.html", kind="comment", item=row, forum=forum, back=back)
    body = page.form.required("body", "Comment", 10000)
    if not page.form.ok:
        return page.render("edit.html", status_code=422, kind="comment", item=row, forum=forum, back=back)
    if body == row["body"]:
        return page.redirect(back, "No changes to save.", "info")
    page.db.execute("UPDATE comments SET body = ?, edited_at = ? WHERE id = ?", (body, page.now(), row["id"]))
    page.audit("comment.edit", "comment", row["id"], old_length=len(row["body"]), new_length=len(body))
    return page.redirect(back, "Your comment has been updated.")


@routes.post("/c/{id:int}/delete")
async def delete_comment(page: Page) -> Response:
    row, post, forum = _comment(page)
    _own(page, row, "comments")
    page.db.execute("UPDATE comments SET is_deleted = 1 WHERE id = ?", (row["id"],))
    page.db.execute("UPDATE posts SET comment_count = comment_count - 1 WHERE id = ?", (post["id"],))
    page.audit("comment.delete", "comment", row["id"], post_id=post["id"])
    return page.redirect(post_url(post, forum["name"]), "Your comment has been deleted.")


# -- reports ------------------------------------------------------------------------------------------------
async def _report(
    page: Page, kind: str, post: sqlite3.Row, comment_row: sqlite3.Row | None, forum: sqlite3.Row
) -> Response:
    user = page.require_user()
    target = comment_row if comment_row is not None else post
    back = post_url(post, forum["name"]) + (f"#c{target['id']}" if comment_row is not None else "")
    context: dict[str, Any] = {
        "kind": kind,
        "post": post,
        "comment": comment_row,
        "forum": forum,
        "back": back,
        "reasons": list(content.REPORT_REASONS.items()),
    }
    if page.request.method == "GET":
        return page.render("report.html", **context)
    form = page.form
    reason = form.get("reason")
    if reason not in content.REPORT_REASONS:
        form.error("reason", "Choose a reason for your report.")
    details = form.optional("details", "Details", 1000)
    if reason == "other" and not details:
        form.error("details", "Tell the moderators what is wrong when you choose Other.")
    column = f"{kind}_id"
    if page.db.execute(
        f"SELECT 1 FROM reports WHERE reporter_id = ? AND {column} = ? AND status = 'open'", (user["id"], target["id"])
    ).fetchone():
        form.error("reason", f"You have already reported this {kind}. The moderators will review it.")
    if not form.ok:
        return page.render("report.html", status_code=422, **context)
    cur = page.db.execute(
        f"INSERT INTO reports (reporter_id, forum_id, {column}, reason, details, status, created_at)"
        " VALUES (?, ?, ?, ?, ?, 'open', ?)",
        (user["id"], forum["id"], target["id"], reason, details, page.now()),
    )
    page.audit("report.create", kind, target["id"], report_id=cur.lastrowid, reason=reason)
    return page.redirect(back, "Thanks for your report. The moderators will take a look.")


@routes.form("/p/{id:int}/report")
async def report_post(page: Page) -> Response:
    post, forum = _post(page)
    return await _report(page, "post", post, None, forum)


@routes.form("/c/{id:int}/report")
async def report_comment(page: Page) -> Response:
    row, post, forum = _comment(page)
    return await _report(page, "comment", post, row, forum)


# -- subscriptions and new forums ---------------------------------------------------------------------------
@routes.post("/f/{name}/subscribe")
async def subscribe(page: Page) -> Response:
    user = page.require_user()
    forum = forum_by_name(page, page.path_param("name"))
    cur = page.db.execute(
        "INSERT OR IGNORE INTO subscriptions (user_id, forum_id, created_at) VALUES (?, ?, ?)",
        (user["id"], forum["id"], page.now()),
    )
    if cur.rowcount:
        page.audit("forum.subscribe", "forum", forum["name"])
    return page.redirect(page.next_url(f"/f/{forum['name']}"), f"Subscribed to f/{forum['name']}.")


@routes.post("/f/{name}/unsubscribe")
async def unsubscribe(page: Page) -> Response:
    user = page.require_user()
    forum = forum_by_name(page, page.path_param("name"))
    cur = page.db.execute("DELETE FROM subscriptions WHERE user_id = ? AND forum_id = ?", (user["id"], forum["id"]))
    if cur.rowcount:
        page.audit("forum.unsubscribe", "forum", forum["name"])
    return page.redirect(page.next_url(f"/f/{forum['name']}"), f"Unsubscribed from f/{forum['name']}.")


@routes.form("/forums/new")
async def new_forum(page: Page) -> Response:
    user = page.require_user()
    if page.request.method == "GET":
        return page.render("forum_form.html")
    form = page.form
    name = form.required("name", "Name", 21)
    if name and "name" not in form.errors:
        if not re.fullmatch(r"[A-Za-z0-9_]{3,21}", name):
            form.error("name", "Names are 3-21 letters, digits or underscores, without spaces.")
        elif page.db.execute("SELECT 1 FROM forums WHERE name = ?", (name,)).fetchone():
            form.error("name", f"f/{name} already exists.")
    title = form.required("title", "Title", 60)
    description = form.required("description", "Description", 500)
    if not form.ok:
        return page.render("forum_form.html", status_code=422)
    now = page.now()
    cur = page.db.execute(
        "INSERT INTO forums (name, title, description, rules, created_by, created_at) VALUES (?, ?, ?, '', ?, ?)",
        (name, title, description, user["id"], now),
    )
    page.db.execute(
        "INSERT INTO forum_moderators (forum_id, user_id, added_at) VALUES (?, ?, ?)", (cur.lastrowid, user["id"], now)
    )
    page.db.execute(
        "INSERT INTO subscriptions (user_id, forum_id, created_at) VALUES (?, ?, ?)", (user["id"], cur.lastrowid, now)
    )
    page.audit("forum.create", "forum", name, title=title)
    return page.redirect(f"/f/{name}", f"f/{name} has been created. You are its moderator.")
