#!/usr/bin/env python3
"""Verifier for cross_site/cast_iron_restock.

The forum's five visible f/cooking posts "Cast iron or carbon steel for <dish>?" (recomputed from forum.db and
pinned to the seed) name biscuits, chili, curry, lasagna and risotto; the busiest is post 61 (biscuits, 5
comments). In store.db the two "Cast Iron" products (74 COO-1512, 86 COO-1608; stock 0 and 1) must carry their
seeded description plus the exact sentence and stock 20, with every other column and product unchanged; the
store audit log may only show mgarcia's two product updates touching description and stock. On the forum,
marlowe's single top-level comment on post 61 must list the SKUs exactly, and nothing else may change.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from pathlib import Path

DISHES = ["biscuits", "chili", "curry", "lasagna", "risotto"]
SENTENCE = "Commonplace cooks have asked about it for: " + ", ".join(DISHES) + "."
BUSIEST = 61
PRODUCTS = {
    74: (
        "COO-1512",
        "Meet the cast iron skillet our customers keep coming back for. Even heating with no hot spots. PFAS-free"
        " ceramic coating. Oven safe to 500°F. Works on gas, electric, ceramic and induction cooktops. Ships in"
        " recyclable packaging.",
    ),
    86: (
        "COO-1608",
        "Chef's Table's cast iron skillet combines thoughtful design with honest materials. Dishwasher safe for easy"
        " cleanup. Riveted stay-cool handle. PFAS-free ceramic coating. Ships in recyclable packaging.",
    ),
}
COMMENT = "Larkspur Goods has restocked its cast iron skillets: COO-1512, COO-1608."
SEED_MAX_COMMENT = 4290
STORE_FINGERPRINTS = {
    "SELECT * FROM products WHERE id NOT IN (74, 86) ORDER BY id": (453, "71c334dddecbced07966c02c1f76f9e3"),
    "SELECT id, sku, slug, name, category_id, brand, price_cents, sale_price_cents, status, color, weight_grams,"
    " created_at FROM products WHERE id IN (74, 86) ORDER BY id": (2, "190295170b83ff4dcfa7d024fb37b148"),
}

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
        " removed_by, removed_reason, removed_at, score, comment_count - (id = 61)"
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


def digest(conn: sqlite3.Connection, sql: str) -> tuple[int, str]:
    h = hashlib.md5()
    n = 0
    for row in conn.execute(sql):
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


def check_store(store: sqlite3.Connection) -> None:
    names = [r[0] for r in store.execute("SELECT id FROM products WHERE name LIKE '%Cast Iron%' ORDER BY id")]
    check(names == sorted(PRODUCTS), f"the Cast Iron products are {sorted(PRODUCTS)} ({names})")
    for pid, (sku, seeded) in PRODUCTS.items():
        row = store.execute("SELECT * FROM products WHERE id = ?", (pid,)).fetchone()
        want = f"{seeded} {SENTENCE}"
        got = row["description"].replace("\r\n", "\n").strip()
        check(got == want, f"{sku}: description is the seeded one plus the sentence (got {got[-90:]!r})")
        check(row["stock"] == 20, f"{sku}: stock 20 (got {row['stock']})")
    for sql, want in STORE_FINGERPRINTS.items():
        check(digest(store, sql) == want, f"unchanged: {sql[:70]}")
    rows = store.execute("SELECT * FROM audit_log WHERE action NOT LIKE 'auth.%' ORDER BY id").fetchall()
    check(all(r["action"] == "product.update" and r["actor"] == "mgarcia" for r in rows), "only mgarcia's updates")
    targets = sorted(int(r["target_id"]) for r in rows)
    check(targets == sorted(PRODUCTS), f"exactly one update per Cast Iron product ({targets})")
    for r in rows:
        changed = set(json.loads(r["details"]).get("changed", {}))
        check(changed == {"description", "stock"}, f"update of {r['target_id']} changed description and stock only")


def check_forum(forum: sqlite3.Connection) -> None:
    posts = forum.execute(
        "SELECT p.id, p.title, p.comment_count, p.score FROM posts p JOIN forums f ON f.id = p.forum_id"
        " WHERE f.name = 'cooking' AND p.removed_by IS NULL AND p.is_deleted = 0"
        " AND p.title LIKE 'Cast iron or carbon steel for %?'"
    ).fetchall()
    dishes = sorted(re.match(r"Cast iron or carbon steel for (.+)\?$", p["title"]).group(1) for p in posts)
    check(dishes == DISHES, f"the forum still asks about {DISHES} ({dishes})")
    new = forum.execute("SELECT * FROM comments WHERE id > ? ORDER BY id", (SEED_MAX_COMMENT,)).fetchall()
    check(len(new) == 1, f"exactly one new comment ({len(new)})")
    if new:
        c = new[0]
        marlowe = forum.execute("SELECT id FROM users WHERE username = 'marlowe'").fetchone()[0]
        check(c["post_id"] == BUSIEST, f"on post {BUSIEST}, the question with the most comments (got {c['post_id']})")
        check(c["parent_id"] is None, "a top-level comment")
        check(c["author_id"] == marlowe, "written by marlowe")
        check(c["body"].strip() == COMMENT, f"exact text (got {c['body']!r})")
    rows = forum.execute("SELECT action, actor FROM audit_log WHERE action NOT LIKE 'auth.%'").fetchall()
    check(
        [tuple(r) for r in rows] == [("comment.create", "marlowe")],
        f"the forum's only change is the comment ({[tuple(r) for r in rows]})",
    )


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    forum, store = open_db(data, "forum.db"), open_db(data, "store.db")
    if forum is not None:
        check_forum(forum)
        unchanged(forum, SEED_FORUM, set())
    if store is not None:
        check_store(store)
        unchanged(store, SEED_STORE, {"products"})
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
