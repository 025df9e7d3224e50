#!/usr/bin/env python3
"""Verifier for forum/report_queue_triage.

Reads the trial's forum.db (``MCPFLEET_SITES_DATA``): the eight open reports of f/localnews, f/askscience,
f/books and f/cycling are resolved by marlowe by the stated rules (spam post and five attack comments removed
with the exact reasons, post 9 locked and its report dismissed, the other report dismissed), trollbait is
banned for 30 days from exactly the forums where he now has two or more removed comments, the audit log holds
exactly those moderation actions, and every other row is byte-for-byte the seeded one (fingerprints).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path

REMOVED_POSTS = {645: "Spam"}  # report 5 (f/books, spammer_sam)
REMOVED_COMMENTS = {858: 9, 986: 11, 2302: 17, 1302: 13, 2639: 19}  # comment id -> its report
ACTIONED = {5, 9, 11, 13, 17, 19}
DISMISSED = {30, 39}
LOCKED_POST = 9  # report 39: "This advice is wrong and could hurt someone."
UNTOUCHED_REPORTED_POST = 477  # report 30: dismissed only
BAN_FORUMS = {"localnews", "cycling"}  # trollbait: 1+2 and 2+1 removed comments
BAN_EXPIRES = "2025-07-14"  # site today 2025-06-14 + 30 days
SEED_COMMENT_COUNT_SUM = 4199
FINGERPRINTS = {
    "SELECT id, forum_id, author_id, title, url, body, created_at, edited_at, is_locked, is_pinned, is_deleted,"
    " removed_by, removed_reason, removed_at, score FROM posts WHERE id NOT IN (645, 9) ORDER BY id": (
        643,
        "1d2c12d61bac99592cbe755f419d8471",
    ),
    "SELECT * FROM comments WHERE id NOT IN (858, 986, 2302, 1302, 2639) ORDER BY id": (
        4285,
        "66a5a6e0a02bcc15c9e6a68c12aa9306",
    ),
    "SELECT * FROM reports WHERE id NOT IN (5, 9, 11, 13, 17, 19, 30, 39) ORDER BY id": (
        32,
        "926c6274acb7f7c80355bc1a71d1305a",
    ),
    "SELECT * FROM post_votes ORDER BY user_id, post_id": (5640, "cf932680188e830ab33974b3b255f386"),
    "SELECT * FROM comment_votes ORDER BY user_id, comment_id": (15745, "b133b50ac82632a4a6d65af2eddfab7b"),
    "SELECT * FROM subscriptions ORDER BY user_id, forum_id": (529, "eba91b32269bdbd4f2a94ac5b9aa4d00"),
    "SELECT id, username, email, password_hash, role, bio, is_banned FROM users ORDER BY id": (
        110,
        "26d33fc4c0953e4d59272dc328940aad",
    ),
    "SELECT * FROM forums ORDER BY id": (20, "500bf052edf1c6092c19244170a45cb5"),
    "SELECT * FROM forum_moderators ORDER BY forum_id, user_id": (36, "59362e369694296c5bea73e23f3b0858"),
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
    data = os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "")
    path = Path(data) / "forum.db"
    if not path.is_file():
        print(f"FAIL: no forum.db in {data!r}")
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    uid = {r["username"]: r["id"] for r in conn.execute("SELECT id, username FROM users")}
    marlowe, troll = uid["marlowe"], uid["trollbait"]
    fid = {r["name"]: r["id"] for r in conn.execute("SELECT id, name FROM forums")}

    for pid, reason in REMOVED_POSTS.items():
        p = conn.execute("SELECT * FROM posts WHERE id = ?", (pid,)).fetchone()
        check(
            p["removed_by"] == marlowe and p["removed_reason"] == reason and not p["is_locked"],
            f"post {pid} removed by marlowe with reason {reason!r}",
        )
    for cid, rid in REMOVED_COMMENTS.items():
        c = conn.execute("SELECT * FROM comments WHERE id = ?", (cid,)).fetchone()
        check(
            c["removed_by"] == marlowe and c["removed_reason"] == "Personal attack",
            f"comment {cid} (report #{rid}) removed by marlowe with reason 'Personal attack'",
        )
    p = conn.execute("SELECT * FROM posts WHERE id = ?", (LOCKED_POST,)).fetchone()
    check(p["is_locked"] == 1 and p["removed_by"] is None, f"post {LOCKED_POST} locked and not removed")
    p = conn.execute("SELECT * FROM posts WHERE id = ?", (UNTOUCHED_REPORTED_POST,)).fetchone()
    check(p["is_locked"] == 0 and p["removed_by"] is None, f"post {UNTOUCHED_REPORTED_POST} neither locked nor removed")
    for rid in sorted(ACTIONED | DISMISSED):
        r = conn.execute("SELECT * FROM reports WHERE id = ?", (rid,)).fetchone()
        want = "actioned" if rid in ACTIONED else "dismissed"
        check(
            r["status"] == want and r["resolved_by"] == marlowe, f"report #{rid} is {want} by marlowe ({r['status']})"
        )
    scope = [fid[n] for n in ("localnews", "askscience", "books", "cycling")]
    left = conn.execute(
        f"SELECT COUNT(*) FROM reports WHERE status = 'open' AND forum_id IN ({','.join('?' * len(scope))})", scope
    ).fetchone()[0]
    check(left == 0, f"no open report left in the four forums ({left})")
    total = conn.execute("SELECT SUM(comment_count) FROM posts").fetchone()[0]
    check(total == SEED_COMMENT_COUNT_SUM - len(REMOVED_COMMENTS), "comment counts dropped by the removed comments")

    bans = {
        r["forum"]: r
        for r in conn.execute(
            "SELECT b.*, f.name AS forum FROM bans b JOIN forums f ON f.id = b.forum_id WHERE b.user_id = ?", (troll,)
        )
    }
    check(set(bans) == BAN_FORUMS | {"cooking"}, f"trollbait banned from exactly {sorted(BAN_FORUMS)} + cooking")
    for name in BAN_FORUMS & set(bans):
        b = bans[name]
        check(
            b["reason"] == "Repeated personal attacks" and b["banned_by"] == marlowe and b["expires_on"] == BAN_EXPIRES,
            f"f/{name} ban: reason, by marlowe, expires {BAN_EXPIRES} (got {b['reason']!r}, {b['expires_on']})",
        )
    if "cooking" in bans:
        b = bans["cooking"]
        check(b["expires_on"] is None and b["banned_by"] == uid["juniper_mod"], "existing f/cooking ban untouched")
    others = conn.execute("SELECT COUNT(*) FROM bans WHERE user_id != ?", (troll,)).fetchone()[0]
    check(others == 0, "nobody else banned")

    for sql, want in FINGERPRINTS.items():
        check(digest(conn, sql) == want, f"unchanged: {sql.split(' FROM ')[1].split(' ')[0]} ({sql[-60:]})")

    rows = conn.execute("SELECT * FROM audit_log ORDER BY id").fetchall()
    writes = [r for r in rows if not r["action"].startswith("auth.")]
    check(all(r["site"] == "forum" and r["actor"] == "marlowe" for r in writes), "every change was made by marlowe")
    got = Counter((r["action"], r["target_id"]) for r in writes)
    want = Counter(
        [("post.remove", "645"), ("post.lock", str(LOCKED_POST))]
        + [("comment.remove", str(c)) for c in REMOVED_COMMENTS]
        + [("report.dismiss", str(r)) for r in DISMISSED]
        + [("ban.create", str(troll))] * len(BAN_FORUMS)
    )
    check(got == want, f"audit log holds exactly the expected actions (extra {got - want}, missing {want - got})")
    for r in writes:
        d = json.loads(r["details"])
        if r["action"] in ("post.remove", "comment.remove"):
            check(d.get("reports_actioned") == 1, f"{r['action']} {r['target_id']} closed its report")
        if r["action"] == "ban.create":
            check(d.get("forum") in BAN_FORUMS, f"ban logged for f/{d.get('forum')}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
