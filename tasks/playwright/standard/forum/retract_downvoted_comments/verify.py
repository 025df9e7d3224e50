#!/usr/bin/env python3
"""Verifier for forum/retract_downvoted_comments.

quietfox's comments at -2 or lower (seed): 1778 (-4), 7, 371, 1519, 1668, 2430 without replies must be deleted
by him; 421 (-2, three replies) must be edited to the exact retraction text and stay up. His only negative
post, 38, must be deleted. Comments at -1 (some in the same threads as the deleted ones: 1785 next to 1778, 453
next to 421) must be untouched. Cached comment counts follow, every other row keeps its seeded fingerprint, the
audit log holds exactly these author actions, and the final answer lists the deleted ids in ascending order.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

DELETE = [7, 371, 1519, 1668, 1778, 2430]
EDIT = 421
EDIT_TEXT = "[Retracted by the author. Leaving this here so the replies keep their context.]"
NEGATIVE_POST = 38
SEED_COMMENT_COUNT_SUM = 4199
FINGERPRINTS = {
    "SELECT * FROM comments WHERE id NOT IN (1778, 7, 371, 421, 1519, 1668, 2430) ORDER BY id": (
        4283,
        "cd1a9e142b3325e143b2e2b0ceaf1477",
    ),
    "SELECT id, forum_id, author_id, title, url, body, created_at, edited_at, is_locked, is_pinned, is_deleted,"
    " removed_by, removed_reason, removed_at, score FROM posts WHERE id != 38 ORDER BY id": (
        644,
        "3dfe1681bd245bb90806f04a5eb02545",
    ),
    "SELECT * FROM comment_votes ORDER BY user_id, comment_id": (15745, "b133b50ac82632a4a6d65af2eddfab7b"),
    "SELECT * FROM post_votes ORDER BY user_id, post_id": (5640, "cf932680188e830ab33974b3b255f386"),
    "SELECT * FROM reports ORDER BY id": (40, "3d15cad52fc7073cfb4a1fd89fa8b556"),
    "SELECT * FROM subscriptions ORDER BY user_id, forum_id": (529, "eba91b32269bdbd4f2a94ac5b9aa4d00"),
    "SELECT id, username, email, password_hash, role, bio, is_banned FROM users ORDER BY id": (
        110,
        "26d33fc4c0953e4d59272dc328940aad",
    ),
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


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    path = data / "forum.db"
    if not check(path.is_file(), f"forum.db present in {data}"):
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    me = conn.execute("SELECT id FROM users WHERE username = 'quietfox'").fetchone()["id"]
    for cid in DELETE:
        c = conn.execute("SELECT * FROM comments WHERE id = ?", (cid,)).fetchone()
        check(c["is_deleted"] == 1 and c["removed_by"] is None, f"comment {cid} deleted by its author")
    c = conn.execute("SELECT * FROM comments WHERE id = ?", (EDIT,)).fetchone()
    check(c["is_deleted"] == 0 and c["removed_by"] is None, f"comment {EDIT} (has replies) is still up")
    check(c["body"].strip() == EDIT_TEXT, f"comment {EDIT} carries the exact retraction text (got {c['body']!r})")
    check(c["edited_at"] is not None, f"comment {EDIT} is marked edited")
    replies = conn.execute("SELECT COUNT(*) FROM comments WHERE parent_id = ? AND is_deleted = 0", (EDIT,)).fetchone()
    check(replies[0] == 3, "its three replies are intact")
    p = conn.execute("SELECT * FROM posts WHERE id = ?", (NEGATIVE_POST,)).fetchone()
    check(p["is_deleted"] == 1 and p["author_id"] == me, f"post {NEGATIVE_POST} (score -1) deleted by its author")
    total = conn.execute("SELECT SUM(comment_count) FROM posts").fetchone()[0]
    check(total == SEED_COMMENT_COUNT_SUM - len(DELETE), f"comment counts dropped by {len(DELETE)} ({total})")

    for sql, want in FINGERPRINTS.items():
        check(digest(conn, sql) == want, f"unchanged: {sql[:80]}")

    rows = conn.execute("SELECT * FROM audit_log WHERE action NOT LIKE 'auth.%' ORDER BY id").fetchall()
    check(all(r["actor"] == "quietfox" for r in rows), "every change was made by quietfox")
    got = Counter((r["action"], r["target_id"]) for r in rows)
    want = Counter(
        [("comment.delete", str(c)) for c in DELETE]
        + [("comment.edit", str(EDIT)), ("post.delete", str(NEGATIVE_POST))]
    )
    check(got == want, f"audit log: exactly the author's deletes and edit (extra {got - want}, missing {want - got})")

    answer = final_answer()
    m = re.search(r"Deleted comments:\s*([0-9,\s]+)", answer)
    listed = [int(x) for x in re.findall(r"\d+", m.group(1))] if m else []
    check(listed == DELETE, f"the answer lists {DELETE} in ascending order (got {listed})")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
