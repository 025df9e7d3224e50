#!/usr/bin/env python3
"""Verifier for forum/newcomer_onboarding.

newbie_nate's row must carry the new email and bio and a password hash that checks against the new password
(PBKDF2 as the site stores it: ``pbkdf2_sha256$iterations$salt$hex``) and no longer against the old one. His
subscriptions must be exactly the three forums with the most visible posts (recomputed from forum.db with the
directory's tie rule, and pinned to the seed: cooking, personalfinance, gaming), and one new f/meta post by him
must carry the exact title and body. The audit log must hold only his settings, password, three subscriptions
and the post; the other users, posts and subscriptions keep their seeded fingerprints.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path

USER = "newbie_nate"
EMAIL = "nate.rivers@mail.example.net"
BIO = "Weekend baker and budget nerd. Here to learn."
NEW_PASSWORD, OLD_PASSWORD = "Breadcrumbs2025", "NewNate123"
TOP3 = ["cooking", "personalfinance", "gaming"]
TITLE = "Hi from newbie_nate"
BODY = "Hi all! I just joined and subscribed to f/cooking, f/personalfinance and f/gaming."
SEED_MAX_POST_ID = 645
FINGERPRINTS = {
    "SELECT id, username, email, password_hash, role, bio, is_banned FROM users WHERE username != 'newbie_nate'"
    " ORDER BY id": (109, "758d305e465b280d0561639ceafbc552"),
    f"SELECT * FROM posts WHERE id <= {SEED_MAX_POST_ID} ORDER BY id": (645, "32140e89c76b023365512a349f9839b7"),
    "SELECT * FROM subscriptions WHERE user_id != 4 ORDER BY user_id, forum_id": (
        529,
        "eba91b32269bdbd4f2a94ac5b9aa4d00",
    ),
    "SELECT * FROM comments ORDER BY id": (4290, "7d9960c5cc62b85382bcbc9d9efd0053"),
    "SELECT * FROM post_votes ORDER BY user_id, post_id": (5640, "cf932680188e830ab33974b3b255f386"),
    "SELECT * FROM reports ORDER BY id": (40, "3d15cad52fc7073cfb4a1fd89fa8b556"),
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


def password_ok(password: str, stored: str) -> bool:
    try:
        scheme, iterations, salt, want = stored.split("$")
    except ValueError:
        return False
    got = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), int(iterations)).hex()
    return scheme == "pbkdf2_sha256" and hmac.compare_digest(got, want)


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    path = data / "forum.db"
    if not check(path.is_file(), f"forum.db present in {data}"):
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    me = conn.execute("SELECT * FROM users WHERE username = ?", (USER,)).fetchone()
    check(me["id"] == 4, "newbie_nate has the seeded id")
    check(me["email"] == EMAIL, f"email is {EMAIL} (got {me['email']!r})")
    check(me["bio"].strip() == BIO, f"bio is exact (got {me['bio']!r})")
    check(password_ok(NEW_PASSWORD, me["password_hash"]), "the new password signs in")
    check(not password_ok(OLD_PASSWORD, me["password_hash"]), "the old password no longer works")

    ranked = [
        r[0]
        for r in conn.execute(
            "SELECT f.name, (SELECT COUNT(*) FROM posts p WHERE p.forum_id = f.id AND p.removed_by IS NULL"
            f" AND p.is_deleted = 0 AND p.id <= {SEED_MAX_POST_ID}) AS n FROM forums f ORDER BY n DESC, f.name LIMIT 3"
        )
    ]
    check(ranked == TOP3, f"the seeded ranking by posts is {TOP3} ({ranked})")
    subs = sorted(
        r[0]
        for r in conn.execute(
            "SELECT f.name FROM subscriptions s JOIN forums f ON f.id = s.forum_id WHERE s.user_id = ?", (me["id"],)
        )
    )
    check(subs == sorted(TOP3), f"subscribed to exactly {sorted(TOP3)} (got {subs})")

    new = conn.execute(
        "SELECT p.*, f.name AS forum FROM posts p JOIN forums f ON f.id = p.forum_id WHERE p.id > ? ORDER BY p.id",
        (SEED_MAX_POST_ID,),
    ).fetchall()
    check(len(new) == 1, f"exactly one new post ({len(new)})")
    if new:
        p = new[0]
        check(p["forum"] == "meta" and p["author_id"] == me["id"], "posted by newbie_nate in f/meta")
        check(p["title"] == TITLE, f"title is exact (got {p['title']!r})")
        check(p["body"].strip() == BODY, f"body is exact (got {p['body']!r})")
        check(p["url"] is None, "a text post without a link")

    for sql, want in FINGERPRINTS.items():
        check(digest(conn, sql) == want, f"unchanged: {sql[:80]}")
    rows = conn.execute("SELECT * FROM audit_log WHERE action NOT LIKE 'auth.%' ORDER BY id").fetchall()
    check(all(r["actor"] == USER for r in rows), "every change was made by newbie_nate")
    got = Counter(r["action"] for r in rows)
    kinds = set(got)
    check(
        kinds == {"account.update", "account.password_change", "forum.subscribe", "post.create"},
        f"the audit log holds settings, password, subscriptions and the post only ({dict(got)})",
    )
    check(got["post.create"] == 1 and got["account.password_change"] == 1, "one post and one password change")
    subscribed = {r["target_id"] for r in rows if r["action"] == "forum.subscribe"}
    check(subscribed == set(TOP3), f"subscribe events only for the three forums ({sorted(subscribed)})")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
