#!/usr/bin/env python3
"""Verifier for forum/gadget_thread_votes.

The search "worth it" in f/cooking returns six posts (seeded; two share the title "Is a pressure cooker worth
it?"). quietfox's votes must end up +1 on the three with 5+ comments (442 was a downvote, so it must be
switched) and absent on the three with fewer (166 was an upvote, so it must be taken back, not turned into a
downvote). Cached scores must follow, one exact top-level comment by quietfox must sit on post 340 (the one with
the most comments), and every other row must be the seeded one. The audit log must show only votes on the six
results and the one comment, all by quietfox.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
from pathlib import Path

RESULTS = {166: 3, 442: 43, 603: 3, 340: 44, 373: 6, 460: 1}  # post id -> seeded comment count
SEED_SCORE = {166: 4, 442: 0, 603: 1, 340: 6, 373: 1, 460: 3}
SEED_VOTE = {166: 1, 442: -1}  # quietfox's votes before the task
WANT_VOTE = {pid: (1 if n >= 5 else 0) for pid, n in RESULTS.items()}
MOST_COMMENTS = 340
COMMENT = 'Collected the gadget threads: search "worth it" in f/cooking to compare them all.'
SEED_MAX_COMMENT = 4290
FINGERPRINTS = {
    "SELECT * FROM post_votes WHERE NOT (user_id = 3 AND post_id IN (166, 442, 603, 340, 373, 460))"
    " ORDER BY user_id, post_id": (5638, "bcd8ae8a9e077f2374fbcdc0d043af83"),
    "SELECT id, forum_id, author_id, title, url, body, created_at, edited_at, is_locked, is_pinned, is_deleted,"
    " removed_by, removed_reason, removed_at FROM posts ORDER BY id": (645, "ac669cab77f6bfe9389e6315d19801c7"),
    "SELECT id, score, comment_count FROM posts WHERE id NOT IN (166, 442, 603, 340, 373, 460) ORDER BY id": (
        639,
        "bac0dcfb2fd9e92b877f5d6905b30777",
    ),
    f"SELECT * FROM comments WHERE id <= {SEED_MAX_COMMENT} ORDER BY id": (4290, "7d9960c5cc62b85382bcbc9d9efd0053"),
    "SELECT * FROM comment_votes ORDER BY user_id, comment_id": (15745, "b133b50ac82632a4a6d65af2eddfab7b"),
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


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    path = data / "forum.db"
    if not check(path.is_file(), f"forum.db present in {data}"):
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    me = conn.execute("SELECT id FROM users WHERE username = 'quietfox'").fetchone()["id"]
    check(me == 3, "quietfox has the seeded id")

    votes = {
        r["post_id"]: r["value"]
        for r in conn.execute("SELECT post_id, value FROM post_votes WHERE user_id = ?", (me,))
        if r["post_id"] in RESULTS
    }
    for pid, want in WANT_VOTE.items():
        have = votes.get(pid, 0)
        what = {1: "an upvote", 0: "no vote", -1: "a downvote"}
        check(have == want, f"post {pid} ({RESULTS[pid]} comments): {what[want]} (got {what[have]})")
        score = conn.execute("SELECT score FROM posts WHERE id = ?", (pid,)).fetchone()["score"]
        expected = SEED_SCORE[pid] - SEED_VOTE.get(pid, 0) + want
        check(score == expected, f"post {pid} score is {expected} (got {score})")

    new = conn.execute("SELECT * FROM comments WHERE id > ? ORDER BY id", (SEED_MAX_COMMENT,)).fetchall()
    check(len(new) == 1, f"exactly one new comment ({len(new)})")
    if new:
        c = new[0]
        check(c["post_id"] == MOST_COMMENTS, f"the comment is on post {MOST_COMMENTS} (got {c['post_id']})")
        check(c["parent_id"] is None, "it is a top-level comment")
        check(c["author_id"] == me, "written by quietfox")
        check(c["body"].strip() == COMMENT, f"the comment text is exact (got {c['body']!r})")
    counts = {r["id"]: r["comment_count"] for r in conn.execute("SELECT id, comment_count FROM posts")}
    for pid, n in RESULTS.items():
        want = n + (1 if pid == MOST_COMMENTS and new else 0)
        check(counts[pid] == want, f"post {pid} comment count {want} (got {counts[pid]})")

    for sql, want in FINGERPRINTS.items():
        check(digest(conn, sql) == want, f"unchanged: {sql[:90]}")

    rows = conn.execute("SELECT * FROM audit_log WHERE action NOT LIKE 'auth.%' ORDER BY id").fetchall()
    check(all(r["actor"] == "quietfox" for r in rows), "every change was made by quietfox")
    last: dict[int, int] = {}
    for r in rows:
        if r["action"] == "vote.post":
            last[int(r["target_id"])] = json.loads(r["details"])["new"]
    check(set(last) <= set(RESULTS), f"votes only on the search results ({sorted(set(last) - set(RESULTS))})")
    check(
        all(last.get(pid, SEED_VOTE.get(pid, 0)) == WANT_VOTE[pid] for pid in RESULTS),
        "the logged votes end in the wanted values",
    )
    other = [r["action"] for r in rows if r["action"] not in ("vote.post", "comment.create")]
    check(not other, f"no other kind of change ({other})")
    check(sum(r["action"] == "comment.create" for r in rows) == 1, "one comment.create in the audit log")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
