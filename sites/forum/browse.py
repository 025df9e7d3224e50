"""Reading: front page and /all, the forum list, a forum, a post with its comment tree, search, profiles."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response

from mcpfleet.sites.common import db
from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.forum.site import ban_of, forum_by_name, is_moderator, routes

PER_PAGE = 25
SORTS = {"hot": "Hot", "new": "New", "top": "Top", "comments": "Most comments"}
WINDOWS = {
    "day": ("Past 24 hours", 1),
    "week": ("Past week", 7),
    "month": ("Past month", 30),
    "year": ("Past year", 365),
    "all": ("All time", None),
}
POST_SELECT = (
    "SELECT p.*, f.name AS forum_name, u.username AS author FROM posts p JOIN forums f ON f.id = p.forum_id"
    " JOIN users u ON u.id = p.author_id"
)
VISIBLE = "p.removed_by IS NULL AND p.is_deleted = 0"


def listing(
    page: Page, where: list[str], params: list[Any], pinned_first: bool = False, default_sort: str = "hot"
) -> dict[str, Any]:
    """Sort (hot, new, top in a time window, most comments) and paginate visible posts under ``where``."""
    now = db.clock(page.db)
    sort = page.arg("sort", default_sort)
    sort = sort if sort in SORTS else default_sort
    window = page.arg("t", "all")
    window = window if window in WINDOWS else "all"
    where = [VISIBLE, *where]
    params = list(params)
    if sort == "top" and WINDOWS[window][1]:
        days = WINDOWS[window][1] or 0
        where.append("p.created_at >= ?")
        params.append((datetime.fromisoformat(now) - timedelta(days=days)).isoformat(timespec="seconds"))
    order = {
        # hot: votes, minus three points per day of age on the site clock
        "hot": "(p.score - (julianday(?) - julianday(p.created_at)) * 3.0) DESC, p.id DESC",
        "new": "p.created_at DESC, p.id DESC",
        "top": "p.score DESC, p.id DESC",
        "comments": "p.comment_count DESC, p.id DESC",
    }[sort]
    order_params: list[Any] = [now] if sort == "hot" else []
    if pinned_first:
        order = "p.is_pinned DESC, " + order
    clause = " WHERE " + " AND ".join(where)
    total = page.db.execute(f"SELECT COUNT(*) FROM posts p{clause}", params).fetchone()[0]
    pager = page.paginate(total, PER_PAGE)
    posts = page.db.execute(
        f"{POST_SELECT}{clause} ORDER BY {order} LIMIT ? OFFSET ?", [*params, *order_params, PER_PAGE, pager.offset]
    ).fetchall()
    return {
        "posts": posts,
        "pager": pager,
        "sort": sort,
        "window": window,
        "sorts": SORTS,
        "windows": {k: v[0] for k, v in WINDOWS.items()},
        "my_votes": my_votes(page, "post", [p["id"] for p in posts]),
    }


def my_votes(page: Page, kind: str, ids: list[int]) -> dict[int, int]:
    if page.user is None or not ids:
        return {}
    marks = ",".join("?" for _ in ids)
    rows = page.db.execute(
        f"SELECT {kind}_id, value FROM {kind}_votes WHERE user_id = ? AND {kind}_id IN ({marks})",
        [page.user["id"], *ids],
    )
    return {r[0]: r[1] for r in rows}


@routes.get("/")
async def front(page: Page) -> Response:
    where: list[str] = []
    params: list[Any] = []
    feed = "all"
    if page.user is not None and page.arg("feed") != "all":
        subscribed = page.db.execute(
            "SELECT COUNT(*) FROM subscriptions WHERE user_id = ?", (page.user["id"],)
        ).fetchone()[0]
        if subscribed:
            feed = "subscribed"
            where.append("p.forum_id IN (SELECT forum_id FROM subscriptions WHERE user_id = ?)")
            params.append(page.user["id"])
    return page.render(
        "front.html",
        feed=feed,
        heading="Your feed" if feed == "subscribed" else "All posts",
        **listing(page, where, params),
    )


@routes.get("/forums")
async def forums(page: Page) -> Response:
    q = page.arg("q")
    sort = page.arg("sort", "subscribers")
    orders = {
        "subscribers": "subscribers DESC, f.name",
        "name": "f.name",
        "posts": "posts DESC, f.name",
        "newest": "f.created_at DESC, f.id DESC",
    }
    sort = sort if sort in orders else "subscribers"
    where, params = "", []
    if q:
        where = " WHERE f.name LIKE ? OR f.title LIKE ? OR f.description LIKE ?"
        params = [f"%{q}%"] * 3
    rows = page.db.execute(
        "SELECT f.*, (SELECT COUNT(*) FROM subscriptions s WHERE s.forum_id = f.id) AS subscribers,"
        f" (SELECT COUNT(*) FROM posts p WHERE p.forum_id = f.id AND {VISIBLE}) AS posts FROM forums f{where}"
        f" ORDER BY {orders[sort]}",
        params,
    ).fetchall()
    subscribed: set[int] = set()
    if page.user is not None:
        subscribed = {
            r[0] for r in page.db.execute("SELECT forum_id FROM subscriptions WHERE user_id = ?", (page.user["id"],))
        }
    filters = Form({"q": q, "sort": sort})
    sort_options = [
        ("subscribers", "Most subscribers"),
        ("name", "Name"),
        ("posts", "Most posts"),
        ("newest", "Newest"),
    ]
    return page.render("forums.html", forums=rows, subscribed=subscribed, filters=filters, sort_options=sort_options)


@routes.get("/f/{name}")
async def forum(page: Page) -> Response:
    row = forum_by_name(page, page.path_param("name"))
    data = listing(page, ["p.forum_id = ?"], [row["id"]], pinned_first=True)
    return page.render("forum.html", forum=row, **forum_sidebar(page, row), **data)


def forum_sidebar(page: Page, row: sqlite3.Row) -> dict[str, Any]:
    subscribers = page.db.execute("SELECT COUNT(*) FROM subscriptions WHERE forum_id = ?", (row["id"],)).fetchone()[0]
    moderators = page.db.execute(
        "SELECT u.username FROM forum_moderators m JOIN users u ON u.id = m.user_id WHERE m.forum_id = ?"
        " ORDER BY m.added_at, u.username",
        (row["id"],),
    ).fetchall()
    subscribed = page.user is not None and bool(
        page.db.execute(
            "SELECT 1 FROM subscriptions WHERE forum_id = ? AND user_id = ?", (row["id"], page.user["id"])
        ).fetchone()
    )
    return {
        "subscribers": subscribers,
        "moderators": moderators,
        "subscribed": subscribed,
        "is_mod": is_moderator(page, row["id"]),
        "ban": ban_of(page, row["id"]),
    }


COMMENT_SORTS = {"best": "Best", "new": "Newest", "old": "Oldest"}


def comment_tree(page: Page, post_id: int, sort: str) -> list[dict[str, Any]]:
    rows = page.db.execute(
        "SELECT c.*, u.username AS author FROM comments c JOIN users u ON u.id = c.author_id WHERE c.post_id = ?",
        (post_id,),
    ).fetchall()
    if sort == "best":
        ordered = sorted(rows, key=lambda r: (-r["score"], r["created_at"], r["id"]))
    else:
        ordered = sorted(rows, key=lambda r: (r["created_at"], r["id"]), reverse=sort == "new")
    nodes = {r["id"]: {"c": r, "children": []} for r in ordered}
    roots: list[dict[str, Any]] = []
    for node in nodes.values():
        parent = node["c"]["parent_id"]
        (nodes[parent]["children"] if parent in nodes else roots).append(node)
    return roots


@routes.get("/f/{name}/{id:int}")
async def post(page: Page) -> Response:
    return await post_page(page, page.int_path_param("id"), page.path_param("name"), reply_to=page.int_arg("reply"))


@routes.get("/f/{name}/{id:int}/{slug}")
async def post_with_slug(page: Page) -> Response:
    return await post(page)


async def post_page(
    page: Page, post_id: int, forum_name: str, form: Form | None = None, reply_to: int | None = None
) -> Response:
    """A post with its comment tree; ``form`` carries a rejected comment back with its errors."""
    row = page.db.execute(f"{POST_SELECT} WHERE p.id = ?", (post_id,)).fetchone()
    if row is None or row["forum_name"].lower() != forum_name.lower():
        raise HTTPException(404, "That post does not exist.")
    forum_row = forum_by_name(page, row["forum_name"])
    sidebar = forum_sidebar(page, forum_row)
    if (
        row["removed_by"] is not None
        and not sidebar["is_mod"]
        and (page.user is None or page.user["id"] != row["author_id"])
    ):
        raise HTTPException(404, "This post was removed by the moderators.")
    sort = page.arg("sort", "best")
    sort = sort if sort in COMMENT_SORTS else "best"
    tree = comment_tree(page, row["id"], sort)
    comment_ids = [r[0] for r in page.db.execute("SELECT id FROM comments WHERE post_id = ?", (row["id"],))]
    return page.render(
        "post.html",
        status_code=422 if form is not None and form.errors else 200,
        post=row,
        forum=forum_row,
        tree=tree,
        comment_sort=sort,
        comment_sorts=COMMENT_SORTS,
        post_vote=my_votes(page, "post", [row["id"]]).get(row["id"], 0),
        comment_votes=my_votes(page, "comment", comment_ids),
        reply_to=reply_to,
        comment_form=form or Form({}),
        **sidebar,
    )


@routes.get("/search")
async def search(page: Page) -> Response:
    q = page.arg("q")
    kind = page.arg("type", "posts")
    kind = kind if kind in ("posts", "comments") else "posts"
    forum_name = page.arg("forum")
    filters = Form(
        {"q": q, "type": kind, "forum": forum_name, "sort": page.arg("sort", "new"), "t": page.arg("t", "all")}
    )
    forum_options = [(r["name"], f"f/{r['name']}") for r in page.db.execute("SELECT name FROM forums ORDER BY name")]
    context: dict[str, Any] = {"filters": filters, "forum_options": forum_options, "kind": kind, "q": q}
    words = q.split()[:8]
    if kind == "posts":
        where: list[str] = []
        params: list[Any] = []
        for word in words:
            where.append("(p.title LIKE ? OR p.body LIKE ?)")
            params += [f"%{word}%"] * 2
        if forum_name:
            where.append("p.forum_id = (SELECT id FROM forums WHERE name = ?)")
            params.append(forum_name)
        context.update(listing(page, where, params, default_sort="new"))
        return page.render("search.html", **context)
    where = ["c.removed_by IS NULL", "c.is_deleted = 0", "p.removed_by IS NULL", "p.is_deleted = 0"]
    params = []
    for word in words:
        where.append("c.body LIKE ?")
        params.append(f"%{word}%")
    if forum_name:
        where.append("f.name = ?")
        params.append(forum_name)
    clause = " WHERE " + " AND ".join(where)
    base = (
        "FROM comments c JOIN posts p ON p.id = c.post_id JOIN forums f ON f.id = p.forum_id"
        " JOIN users u ON u.id = c.author_id"
    )
    total = page.db.execute(f"SELECT COUNT(*) {base}{clause}", params).fetchone()[0]
    pager = page.paginate(total, PER_PAGE)
    comments = page.db.execute(
        f"SELECT c.*, u.username AS author, p.title AS post_title, f.name AS forum_name {base}{clause}"
        " ORDER BY c.created_at DESC, c.id DESC LIMIT ? OFFSET ?",
        [*params, PER_PAGE, pager.offset],
    ).fetchall()
    context.update(comments=comments, pager=pager)
    return page.render("search.html", **context)


@routes.get("/u/{username}")
async def profile(page: Page) -> Response:
    user = page.db.execute("SELECT * FROM users WHERE username = ?", (page.path_param("username"),)).fetchone()
    if user is None:
        raise HTTPException(404, f"There is no user called {page.path_param('username')}.")
    tab = page.arg("tab", "posts")
    tab = tab if tab in ("posts", "comments") else "posts"
    karma = page.db.execute(
        f"SELECT COALESCE((SELECT SUM(score) FROM posts p WHERE p.author_id = ? AND {VISIBLE}), 0)"
        " + COALESCE((SELECT SUM(score) FROM comments WHERE author_id = ? AND removed_by IS NULL"
        " AND is_deleted = 0), 0)",
        (user["id"], user["id"]),
    ).fetchone()[0]
    moderates = page.db.execute(
        "SELECT f.name FROM forum_moderators m JOIN forums f ON f.id = m.forum_id WHERE m.user_id = ? ORDER BY f.name",
        (user["id"],),
    ).fetchall()
    context: dict[str, Any] = {"profile": user, "tab": tab, "karma": karma, "moderates": moderates}
    if tab == "posts":
        context.update(listing(page, ["p.author_id = ?"], [user["id"]], default_sort="new"))
    else:
        where = "c.author_id = ? AND c.removed_by IS NULL AND c.is_deleted = 0"
        total = page.db.execute(f"SELECT COUNT(*) FROM comments c WHERE {where}", (user["id"],)).fetchone()[0]
        pager = page.paginate(total, PER_PAGE)
        comments = page.db.execute(
            "SELECT c.*, p.title AS post_title, f.name AS forum_name FROM comments c JOIN posts p ON p.id = c.post_id"
            f" JOIN forums f ON f.id = p.forum_id WHERE {where} ORDER BY c.created_at DESC, c.id DESC LIMIT ? OFFSET ?",
            (user["id"], PER_PAGE, pager.offset),
        ).fetchall()
        context.update(comments=comments, pager=pager)
    return page.render("profile.html", **context)
