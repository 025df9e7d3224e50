#!/usr/bin/env python3
"""Verifier for cross_site/bestseller_announcement.

Recomputes May 2025's top three products by revenue from the trial's store.db exactly as the admin report
does (cancelled and refunded orders left out, ties by SKU), and checks the forum: one new text post in f/meta
by marlowe with the exact title and three-line body, pinned and locked, and nothing else written. In the store
the audit log must show the product-sales CSV download for 2025-05-01..2025-05-31 by tbennett and no change.
"""

from __future__ import annotations

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

failures: list[str] = []


def check(cond: bool, msg: str) -> bool:
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


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
    if forum is not None:
        check_forum(forum)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
