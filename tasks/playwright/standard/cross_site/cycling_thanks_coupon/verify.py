#!/usr/bin/env python3
"""Verifier for cross_site/cycling_thanks_coupon.

f/cycling's busiest visible post is 637 (43 comments); its best visible top-level comment is 4216 by mateo1354
(score 10; a reply by copperEmber92 scores 14 but is not top-level, and mateo1354 has a second, weaker top-level
comment 4251). The verifier recomputes that from forum.db, then checks store.db for exactly one new coupon
THANKSMATEO1354 with the stated terms created by mgarcia (seeded coupons unchanged, no other store change in the
audit log), and forum.db for exactly one new comment by marlowe replying to comment 4216 with the exact text.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from pathlib import Path

POST, WINNER, USER = 637, 4216, "mateo1354"
CODE = "THANKSMATEO1354"
COUPON = {
    "code": CODE,
    "description": f"Thank-you coupon for {USER} from Commonplace",
    "kind": "percent",
    "amount": 15,
    "min_subtotal_cents": 5000,
    "starts_on": "2025-06-14",
    "expires_on": "2025-07-31",
    "is_active": 1,
    "usage_limit": 1,
    "times_used": 0,
}
REPLY = f"Thanks for the great advice, {USER}! Here is 15% off at Larkspur Goods: {CODE}"
SEED_COUPONS = (7, "97fe7fc6e15a88103a25cab9e74a2a0d")
SEED_MAX_COMMENT = 4290

SEED_STORE = {
    "orders": ("SELECT * FROM orders ORDER BY id", 860, "35ec4bce06fa4d5fa655386254b6cc13"),
    "order_items": ("SELECT * FROM order_items ORDER BY id", 1649, "2bab2e094a9a3351e4c7619dc0dd550d"),
    "order_history": ("SELECT * FROM order_history ORDER BY id", 3205, "c8a7e82423b2fe315441c56de7ccada8"),
    "customers": ("SELECT * FROM customers ORDER BY id", 320, "fb387be58dfcabcb6f6f67a358bb7bb3"),
    "addresses": ("SELECT * FROM addresses ORDER BY id", 433, "d7b0249ad6003e3ec2334f92dbf33113"),
    "store_settings": ("SELECT * FROM store_settings ORDER BY key", 6, "34bf0a5ffa1e155a8385b3c37b5d9fe6"),
    "reviews": ("SELECT * FROM reviews ORDER BY id", 1946, "df053699b00384ec2c915a00d5738428"),
    "products": ("SELECT * FROM products ORDER BY id", 455, "20f2cb4ff6693f756e458e725c6c7c27"),
    "coupons": ("SELECT * FROM coupons ORDER BY code", 7, "97fe7fc6e15a88103a25cab9e74a2a0d"),
}
SEED_FORUM = {
    "posts": (
        "SELECT id, forum_id, author_id, title, url, body, created_at, edited_at, is_locked, is_pinned, is_deleted,"
        " removed_by, removed_reason, removed_at, score, comment_count - (id = 637)"
        " FROM posts WHERE id <= 645 ORDER BY id",
        645,
        "32140e89c76b023365512a349f9839b7",
    ),
    "comments": ("SELECT * FROM comments WHERE id <= 4290 ORDER BY id", 4290, "7d9960c5cc62b85382bcbc9d9efd0053"),
    "post_votes": ("SELECT * FROM post_votes ORDER BY user_id, post_id", 5640, "cf932680188e830ab33974b3b255f386"),
    "comment_votes": (
        "SELECT * FROM comment_votes ORDER BY user_id, comment_id",
        15745,
        "b133b50ac82632a4a6d65af2eddfab7b",
    ),
    "reports": ("SELECT * FROM reports ORDER BY id", 40, "3d15cad52fc7073cfb4a1fd89fa8b556"),
    "subscriptions": (
        "SELECT * FROM subscriptions ORDER BY user_id, forum_id",
        529,
        "eba91b32269bdbd4f2a94ac5b9aa4d00",
    ),
    "bans": ("SELECT * FROM bans ORDER BY forum_id, user_id", 1, "2a35c30c00c3a6a6d48052dffd625d28"),
}

failures: list[str] = []


def check(cond: bool, msg: str) -> bool:
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def digest(conn: sqlite3.Connection, sql: str, params: tuple[object, ...] = ()) -> tuple[int, str]:
    h = hashlib.md5()
    n = 0
    for row in conn.execute(sql, params):
        h.update(repr(tuple(row)).encode())
        h.update(b"\n")
        n += 1
    return n, h.hexdigest()


def unchanged(conn: sqlite3.Connection, seeded: dict[str, tuple[str, int, str]], skip: set[str]) -> None:
    """Tables this task must not touch keep their seeded (row count, md5) fingerprint."""
    for table, (sql, rows, md5) in seeded.items():
        if table not in skip:
            check(digest(conn, sql) == (rows, md5), f"{table} unchanged since the seed")


def open_db(folder: Path, name: str) -> sqlite3.Connection | None:
    path = folder / name
    if not check(path.is_file(), f"{name} present in {folder}"):
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def check_forum(forum: sqlite3.Connection) -> None:
    busiest = forum.execute(
        "SELECT p.id FROM posts p JOIN forums f ON f.id = p.forum_id WHERE f.name = 'cycling'"
        " AND p.removed_by IS NULL AND p.is_deleted = 0 ORDER BY p.comment_count DESC, p.id DESC LIMIT 1"
    ).fetchone()[0]
    check(busiest == POST, f"f/cycling's busiest post is still {POST} ({busiest})")
    best = forum.execute(
        "SELECT c.id, u.username FROM comments c JOIN users u ON u.id = c.author_id WHERE c.post_id = ?"
        " AND c.parent_id IS NULL AND c.is_deleted = 0 AND c.removed_by IS NULL AND c.id <= ?"
        " ORDER BY c.score DESC, c.created_at, c.id LIMIT 1",
        (POST, SEED_MAX_COMMENT),
    ).fetchone()
    check(tuple(best) == (WINNER, USER), f"the winning comment is {WINNER} by {USER} ({tuple(best)})")
    marlowe = forum.execute("SELECT id FROM users WHERE username = 'marlowe'").fetchone()[0]
    new = forum.execute("SELECT * FROM comments WHERE id > ? ORDER BY id", (SEED_MAX_COMMENT,)).fetchall()
    check(len(new) == 1, f"exactly one new comment on the forum ({len(new)})")
    if new:
        c = new[0]
        check(c["post_id"] == POST and c["parent_id"] == WINNER, f"it replies to comment {WINNER} in post {POST}")
        check(c["author_id"] == marlowe, "written by marlowe")
        check(c["body"].strip() == REPLY, f"the reply text is exact (got {c['body']!r})")
    rows = forum.execute("SELECT action, actor FROM audit_log WHERE action NOT LIKE 'auth.%'").fetchall()
    check(
        [tuple(r) for r in rows] == [("comment.create", "marlowe")],
        f"the forum's only change is marlowe's comment ({[tuple(r) for r in rows]})",
    )


def check_store(store: sqlite3.Connection) -> None:
    seeded = digest(store, "SELECT * FROM coupons WHERE code != ? ORDER BY code", (CODE,))
    check(seeded == SEED_COUPONS, "the seven seeded coupons are unchanged")
    total = store.execute("SELECT COUNT(*) FROM coupons").fetchone()[0]
    check(total == 8, f"exactly one coupon was added ({total} coupons)")
    row = store.execute("SELECT * FROM coupons WHERE code = ?", (CODE,)).fetchone()
    if not check(row is not None, f"coupon {CODE} exists"):
        return
    for key, want in COUPON.items():
        check(row[key] == want, f"coupon {key} = {want!r} (got {row[key]!r})")
    rows = store.execute(
        "SELECT site, action, actor, target_id FROM audit_log WHERE action NOT LIKE 'auth.%' ORDER BY id"
    ).fetchall()
    check(
        [tuple(r) for r in rows] == [("admin", "coupon.create", "mgarcia", CODE)],
        f"the store's only change is mgarcia creating {CODE} ({[tuple(r) for r in rows]})",
    )


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    forum, store = open_db(data, "forum.db"), open_db(data, "store.db")
    if forum is not None:
        check_forum(forum)
        unchanged(forum, SEED_FORUM, set())
    if store is not None:
        check_store(store)
        unchanged(store, SEED_STORE, {"coupons"})
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
