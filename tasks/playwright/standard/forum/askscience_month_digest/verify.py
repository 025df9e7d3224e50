#!/usr/bin/env python3
"""Verifier for forum/askscience_month_digest.

Recomputes, from the trial's forum.db, f/askscience's Top / Past month listing the way the site builds it
(visible posts created within 30 days of the site clock, score descending, ties by the newer id first) and,
for the first five, the best visible top-level comment (score descending, ties by the older one). The final
assistant message (``MCP_MESSAGES``) must list exactly those five lines in the stated format. Reading must not
write: the forum audit log may hold sign-ins only. The expected lines are also pinned to the seed, so a
verifier run against a modified database cannot pass by recomputing from the modification.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from datetime import datetime, timedelta
from pathlib import Path

EXPECTED = [
    "1. #376 Why is the sky purple at sunset? | copperEmber92 | 15 | juniper_mod (8)",
    "2. #14 How do sea turtles navigate? | prairie_velvet | 7 | avery773 (6)",
    "3. #213 How do bees navigate? | stormy_pebble | 6 | willow_ember (-1)",
    "4. #430 What would happen if Earth stopped spinning? | amber_willow | 5 | aaliyah997 (2)",
    "5. #627 What would happen if Earth stopped spinning? | garden_falcon | 4 | pebble_stormy (3)",
]
LINE = re.compile(r"^\s*(\d+)\.\s+#(\d+)\s+(.+?)\s*\|\s*(\S+)\s*\|\s*(-?\d+)\s*\|\s*(\S+)\s*\((-?\d+)\)\s*$")

SEED_FORUM = {  # (rows, md5) of the tables a read-only task must leave as seeded
    "posts": ("SELECT * FROM posts ORDER BY id", 645, "32140e89c76b023365512a349f9839b7"),
    "comments": ("SELECT * FROM comments ORDER BY id", 4290, "7d9960c5cc62b85382bcbc9d9efd0053"),
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


def final_answer() -> str:
    path = os.environ.get("MCP_MESSAGES")
    if not path or not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as fh:
        items = json.load(fh)
    for item in reversed(items):
        if item.get("type") == "message" and item.get("role") == "assistant" and item.get("status") == "completed":
            parts = item.get("content") or []
            return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "output_text")
    return ""


def recompute(conn: sqlite3.Connection) -> list[str]:
    clock = conn.execute("SELECT value FROM site_meta WHERE key = 'clock'").fetchone()[0]
    since = (datetime.fromisoformat(clock) - timedelta(days=30)).isoformat(timespec="seconds")
    posts = conn.execute(
        "SELECT p.id, p.title, p.score, u.username FROM posts p JOIN users u ON u.id = p.author_id"
        " JOIN forums f ON f.id = p.forum_id WHERE f.name = 'askscience' AND p.removed_by IS NULL"
        " AND p.is_deleted = 0 AND p.created_at >= ? ORDER BY p.score DESC, p.id DESC LIMIT 5",
        (since,),
    ).fetchall()
    lines = []
    for rank, (pid, title, score, author) in enumerate(posts, 1):
        best = conn.execute(
            "SELECT u.username, c.score FROM comments c JOIN users u ON u.id = c.author_id WHERE c.post_id = ?"
            " AND c.parent_id IS NULL AND c.is_deleted = 0 AND c.removed_by IS NULL"
            " ORDER BY c.score DESC, c.created_at, c.id LIMIT 1",
            (pid,),
        ).fetchone()
        who, pts = (best[0], best[1]) if best else ("none", 0)
        lines.append(f"{rank}. #{pid} {title} | {author} | {score} | {who} ({pts})")
    return lines


def normalise(line: str) -> str | None:
    m = LINE.match(line.strip().strip("`").replace("**", ""))
    if not m:
        return None
    rank, pid, title, author, score, who, pts = m.groups()
    return f"{rank}. #{pid} {title} | {author} | {score} | {who} ({pts})"


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    path = data / "forum.db"
    if not check(path.is_file(), f"forum.db present in {data}"):
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    writes = conn.execute("SELECT action FROM audit_log WHERE action NOT LIKE 'auth.%'").fetchall()
    check(not writes, f"nothing was changed on the forum ({[w[0] for w in writes]})")
    for table, (sql, rows, md5) in SEED_FORUM.items():
        check(digest(conn, sql) == (rows, md5), f"{table} unchanged since the seed")
    live = recompute(conn)
    check(live == EXPECTED, "the database still ranks the seeded posts (recomputed listing equals the pinned one)")

    answer = final_answer()
    check(bool(answer.strip()), "there is a final answer")
    got = [n for n in (normalise(ln) for ln in answer.splitlines()) if n is not None]
    check(len(got) == 5, f"the answer has exactly five formatted lines ({len(got)})")
    for i, want in enumerate(EXPECTED):
        have = got[i] if i < len(got) else "(missing)"
        check(have == want, f"line {i + 1}: {have!r} == {want!r}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
