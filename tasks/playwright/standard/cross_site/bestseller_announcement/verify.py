#!/usr/bin/env python3
"""Verifier for cross_site/bestseller_announcement.

Recomputes May 2025's top three products by revenue from the trial's store.db exactly as the admin report
does (cancelled and refunded orders left out, ties by SKU), and checks the forum: one new text post in f/meta
by marlowe with the exact title and three-line body, pinned and locked, and nothing else written. In the store
the audit log must show the product-sales CSV download for 2025-05-01..2025-05-31 by tbennett and no change.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path

TITLE = "Larkspur Goods best sellers: May 2025"
START, END = "2025-05-01", "2025-05-31"
SEED_MAX_POST_ID = 645
EXPECTED_TOP = [  # hard-coded from the seed, cross-checked against the recomputation below
    ("SoundPeak Foldable Soundbar, Slate Gray", "HAU-1064", 64347),
    ("Trailhead Leather Chelsea Boots, Size 7", "FOO-2712", 41998),
    ("Copperleaf Enameled Stainless Saucepan, 10-inch", "COO-1568", 39596),
]

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
    "posts": ("SELECT * FROM posts WHERE id <= 645 ORDER BY id", 645, "32140e89c76b023365512a349f9839b7"),
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


def digest(conn: sqlite3.Connection, sql: str) -> tuple[int, str]:
    h = hashlib.md5()
    n = 0
    for row in conn.execute(sql):
        h.update(repr(tuple(row)).encode())
        h.update(b"\n")
        n += 1
    return n, h.hexdigest()


def money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def unchanged(conn: sqlite3.Connection, seeded: dict[str, tuple[str, int, str]], skip: set[str]) -> None:
    """Tables this task must not touch keep their seeded (row count, md5) fingerprint."""
    for table, (sql, rows, md5) in seeded.items():
        if table not in skip:
            check(digest(conn, sql) == (rows, md5), f"{table} unchanged since the seed")


def open_db(folder: Path, name: str) -> sqlite3.Connection | None:
    path = folder / name
    if not path.is_file():
        check(False, f"{name} present in {folder}")
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def top_products(store: sqlite3.Connection) -> list[tuple[str, str, int]]:
    rows = store.execute(
        "SELECT oi.sku, oi.name, SUM(oi.line_total_cents) AS revenue FROM order_items oi"
        " JOIN orders o ON o.id = oi.order_id WHERE o.status NOT IN ('cancelled', 'refunded')"
        " AND substr(o.created_at, 1, 10) BETWEEN ? AND ? GROUP BY oi.sku, oi.name ORDER BY revenue DESC, oi.sku"
        " LIMIT 3",
        (START, END),
    ).fetchall()
    return [(r["name"], r["sku"], r["revenue"]) for r in rows]


def check_store(store: sqlite3.Connection) -> None:
    top = top_products(store)
    check(top == EXPECTED_TOP, f"May 2025 top three recomputed from the store as seeded ({top})")
    rows = store.execute("SELECT * FROM audit_log ORDER BY id").fetchall()
    writes = [r for r in rows if not r["action"].startswith("auth.")]
    exports = [r for r in writes if r["action"] == "report.export_product-sales"]
    ok = [
        r
        for r in exports
        if (json.loads(r["details"]).get("start"), json.loads(r["details"]).get("end")) == (START, END)
    ]
    check(bool(ok), f"product sales CSV downloaded for {START}..{END} ({len(exports)} product exports)")
    check(all(r["site"] == "admin" and r["actor"] == "tbennett" for r in ok), "the download was made by tbennett")
    other = [r["action"] for r in writes if not r["action"].startswith("report.export_")]
    check(not other, f"no change in the store ({other})")


def check_forum(forum: sqlite3.Connection) -> None:
    uid = {r["username"]: r["id"] for r in forum.execute("SELECT id, username FROM users")}
    meta = forum.execute("SELECT id FROM forums WHERE name = 'meta'").fetchone()["id"]
    new = forum.execute("SELECT * FROM posts WHERE id > ? ORDER BY id", (SEED_MAX_POST_ID,)).fetchall()
    check(len(new) == 1, f"exactly one new post ({len(new)})")
    if not new:
        return
    post = new[0]
    check(post["forum_id"] == meta, "posted in f/meta")
    check(post["author_id"] == uid["marlowe"], "posted by marlowe")
    check(post["title"] == TITLE, f"title is exactly {TITLE!r} (got {post['title']!r})")
    check(post["url"] is None, "a text post without a link")
    want = [f"{i}. {name} ({sku}): {money(cents)}" for i, (name, sku, cents) in enumerate(EXPECTED_TOP, 1)]
    lines = [ln.rstrip() for ln in post["body"].replace("\r\n", "\n").strip().split("\n")]
    check(lines == want, f"body is exactly the three ranked lines (got {lines!r}, want {want!r})")
    check(post["is_pinned"] == 1, "the post is pinned")
    check(post["is_locked"] == 1, "the post is locked")
    check(post["removed_by"] is None and post["is_deleted"] == 0, "the post is live")
    pinned = forum.execute("SELECT COUNT(*) FROM posts WHERE is_pinned = 1").fetchone()[0]
    locked = forum.execute("SELECT COUNT(*) FROM posts WHERE is_locked = 1").fetchone()[0]
    check((pinned, locked) == (7, 5), f"no other post pinned or locked ({pinned} pinned, {locked} locked)")
    rows = forum.execute("SELECT * FROM audit_log ORDER BY id").fetchall()
    writes = [r for r in rows if not r["action"].startswith("auth.")]
    check(all(r["actor"] == "marlowe" for r in writes), "every forum change was made by marlowe")
    got = Counter((r["action"], r["target_id"]) for r in writes)
    pid = str(post["id"])
    want_log = Counter([("post.create", pid), ("post.pin", pid), ("post.lock", pid)])
    check(
        got == want_log, f"forum audit log: create, pin, lock only (extra {got - want_log}, missing {want_log - got})"
    )


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    store, forum = open_db(data, "store.db"), open_db(data, "forum.db")
    if store is not None:
        check_store(store)
        unchanged(store, SEED_STORE, set())
    if forum is not None:
        check_forum(forum)
        unchanged(forum, SEED_FORUM, set())
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
