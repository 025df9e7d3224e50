"""Deterministic generator of the forum database: users, communities, posts, threaded comments, votes, reports.

The named accounts in :data:`USERS` are the documented credentials (``credentials.json``); every other user's
password is :data:`DEFAULT_PASSWORD`. Mess is deliberate: edited and deleted posts, spam and personal attacks
(some removed, some reported and waiting in the queue), a forum ban and a site-wide ban.
"""

from __future__ import annotations

import random
import re
import sqlite3
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from mcpfleet.sites.common import seeding
from mcpfleet.sites.common.names import FIRST_NAMES, USERNAME_WORDS
from mcpfleet.sites.common.security import hash_password
from mcpfleet.sites.forum import content

DEFAULT_SEED = 20250614
TODAY = date(2025, 6, 14)
CLOCK_START = datetime(2025, 6, 14, 12, 0)
START = datetime(2024, 9, 1)
END = datetime(2025, 6, 14, 11, 30)
SCHEMA = (Path(__file__).resolve().parent / "schema.sql").read_text(encoding="utf-8")
DEFAULT_PASSWORD = "forumpass1"
N_USERS = 110
N_POSTS = 640


@dataclass(frozen=True)
class NamedUser:
    username: str
    password: str
    role: str
    bio: str
    banned: bool
    note: str


USERS = (
    NamedUser(
        "marlowe",
        "ForumAdmin1",
        "admin",
        "Runs this place. Be nice.",
        False,
        "Site administrator: moderates every forum, sees every report.",
    ),
    NamedUser(
        "juniper_mod",
        "ModJuniper2",
        "member",
        "Gardener, cook, occasional carpenter.",
        False,
        "Moderator of f/gardening, f/cooking and f/homeimprovement; banned trollbait from f/cooking.",
    ),
    NamedUser(
        "quietfox",
        "QuietFox99",
        "member",
        "Lurker turned poster. Python by day, bikes by night.",
        False,
        "Active member: posts and comments in several forums, subscribed to gardening, cooking, python, "
        "cycling and books.",
    ),
    NamedUser("newbie_nate", "NewNate123", "member", "", False, "New member: no posts, no comments, no subscriptions."),
    NamedUser(
        "trollbait",
        "Trollbait7",
        "member",
        "I say what everyone is thinking.",
        False,
        "Banned from f/cooking; several of his comments are reported (open) or removed.",
    ),
    NamedUser(
        "spammer_sam",
        "SpamSam1",
        "member",
        "Best deals online!!!",
        True,
        "Banned site-wide: sign-in is refused. Some of his spam posts are still up and reported.",
    ),
)
JUNIPER_FORUMS = ("gardening", "cooking", "homeimprovement")
QUIETFOX_SUBSCRIPTIONS = ("gardening", "cooking", "python", "cycling", "books")
POPULAR = {
    "askscience": 1.6,
    "gaming": 1.5,
    "personalfinance": 1.4,
    "cooking": 1.4,
    "python": 1.3,
    "movies": 1.3,
    "gardening": 1.2,
    "meta": 0.4,
    "localnews": 0.8,
}


class _Builder:
    def __init__(self, conn: sqlite3.Connection, seed: int) -> None:
        self.conn = conn
        self.rng = random.Random(seed)
        self.users: list[dict[str, Any]] = []
        self.by_name: dict[str, dict[str, Any]] = {}
        self.forums: list[tuple[int, content.Community]] = []
        self.forum_ids: dict[str, int] = {}
        self.moderators: dict[int, list[int]] = {}

    def insert(self, table: str, row: dict[str, Any]) -> int:
        cols = ", ".join(row)
        cur = self.conn.execute(
            f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values())
        )
        return int(cur.lastrowid or 0)

    def people(self) -> None:
        rng = self.rng
        for named in USERS:
            self.user(named.username, named.password, named.role, named.bio, named.banned)
        taken = {u.username.lower() for u in USERS}
        while len(self.users) < N_USERS:
            style = rng.random()
            if style < 0.4:
                name = f"{rng.choice(USERNAME_WORDS)}_{rng.choice(USERNAME_WORDS)}"
            elif style < 0.75:
                name = f"{rng.choice(USERNAME_WORDS)}{rng.choice(USERNAME_WORDS).capitalize()}{rng.randint(1, 99)}"
            else:
                name = f"{rng.choice(FIRST_NAMES).lower()}{rng.randint(70, 2005)}"
            name = re.sub(r"[^A-Za-z0-9_]", "", name)[:20]
            if name.lower() in taken:
                continue
            taken.add(name.lower())
            bio = rng.choice(
                (
                    "",
                    "",
                    "Just here for the discussions.",
                    "Coffee, code, and cats.",
                    "Weekend hiker.",
                    "Dad of two, amateur cook.",
                    "Grad student. Opinions my own.",
                    "Retired teacher.",
                )
            )
            self.user(name, DEFAULT_PASSWORD, "member", bio, False)

    def user(self, username: str, password: str, role: str, bio: str, banned: bool) -> None:
        rng = self.rng
        created = seeding.moment(rng, datetime(2022, 1, 1), datetime(2025, 5, 1))
        if username == "newbie_nate":
            created = datetime(2025, 6, 12, 19, 40)
        row = {
            "username": username,
            "email": f"{username.lower()}@mail.example.net",
            "password_hash": hash_password(password, f"{rng.getrandbits(64):016x}"),
            "role": role,
            "bio": bio,
            "is_banned": int(banned),
            "created_at": seeding.iso(created),
        }
        row["id"] = self.insert("users", row)
        row["activity"] = {"newbie_nate": 0.0, "quietfox": 5.0}.get(username, min(rng.paretovariate(1.2), 6.0))
        self.users.append(row)
        self.by_name[username] = row

    def communities(self) -> None:
        rng = self.rng
        admin = self.by_name["marlowe"]
        regulars = [u for u in self.users[6:]]
        mod_pool = rng.sample(regulars, k=12)
        for index, community in enumerate(content.COMMUNITIES):
            fid = self.insert(
                "forums",
                {
                    "name": community.name,
                    "title": community.title,
                    "description": community.description,
                    "rules": content.RULES,
                    "created_by": admin["id"],
                    "created_at": seeding.iso(datetime(2022, 1, 3) + timedelta(days=index * 9)),
                },
            )
            self.forums.append((fid, community))
            self.forum_ids[community.name] = fid
            mods = [admin["id"]] if community.name == "meta" else []
            if community.name in JUNIPER_FORUMS:
                mods.append(self.by_name["juniper_mod"]["id"])
            for u in rng.sample(mod_pool, k=rng.randint(1, 2)):
                if u["id"] not in mods:
                    mods.append(u["id"])
            self.moderators[fid] = mods
            for uid in mods:
                self.insert("forum_moderators", {"forum_id": fid, "user_id": uid, "added_at": "2023-01-15T10:00:00"})

    def subscriptions(self) -> None:
        rng = self.rng
        for user in self.users:
            if user["username"] == "newbie_nate":
                continue
            if user["username"] == "quietfox":
                names = list(QUIETFOX_SUBSCRIPTIONS)
            else:
                names = [c.name for _, c in rng.sample(self.forums, k=rng.randint(2, 8))]
            for name in names:
                self.insert(
                    "subscriptions",
                    {"user_id": user["id"], "forum_id": self.forum_ids[name], "created_at": user["created_at"]},
                )

    def _fill(self, template: str, fills: dict[str, tuple[str, ...]]) -> str:
        return re.sub(r"\{(\w+)\}", lambda m: self.rng.choice(fills[m.group(1)]), template)

    def _author(self, exclude: tuple[str, ...] = ("newbie_nate", "spammer_sam", "trollbait")) -> dict[str, Any]:
        pool = [u for u in self.users if u["username"] not in exclude]
        return self.rng.choices(pool, weights=[u["activity"] for u in pool], k=1)[0]

    def posts(self) -> None:
        rng = self.rng
        weights = [POPULAR.get(c.name, 1.0) for _, c in self.forums]
        titles_seen: set[str] = set()
        for _ in range(N_POSTS):
            fid, community = rng.choices(self.forums, weights=weights, k=1)[0]
            title = self._fill(rng.choice(community.titles), community.fills)
            if title in titles_seen and rng.random() < 0.7:
                title = self._fill(rng.choice(community.titles), community.fills)
            titles_seen.add(title)
            author = self._author()
            since = START if rng.random() < 0.6 else datetime(2025, 4, 1)
            created = seeding.moment(rng, max(since, datetime.fromisoformat(author["created_at"])), END)
            body = " ".join(rng.sample(community.bodies, k=min(len(community.bodies), rng.randint(1, 3))))
            url = None
            if rng.random() < 0.08:
                url = f"https://news.example.org/{community.name}/{created:%Y/%m}/{seeding.slugify(title)[:40]}"
                body = "" if rng.random() < 0.6 else body
            edited = None
            if rng.random() < 0.08:
                edited = seeding.iso(created + timedelta(minutes=rng.randint(5, 600)))
                body += "\n\nEdit: thanks everyone for the answers!"
            self.post(fid, community, author, title, url, body, created, edited)
        self.mess()

    def post(
        self,
        fid: int,
        community: content.Community,
        author: dict[str, Any],
        title: str,
        url: str | None,
        body: str,
        created: datetime,
        edited: str | None,
        **extra: Any,
    ) -> int:
        rng = self.rng
        row = {
            "forum_id": fid,
            "author_id": author["id"],
            "title": title,
            "url": url,
            "body": body,
            "created_at": seeding.iso(min(created, END)),
            "edited_at": edited,
            "is_deleted": int(rng.random() < 0.02),
            **extra,
        }
        if row["is_deleted"]:
            row["body"] = ""
        pid = self.insert("posts", row)
        self.comments(pid, community, min(created, END))
        self.votes("post", pid, rng.uniform(0.55, 0.95), int(rng.paretovariate(1.2) * 3) % 80, min(created, END))
        return pid

    def comments(self, post_id: int, community: content.Community, posted: datetime) -> None:
        rng = self.rng
        count = min(int(rng.paretovariate(1.1) * 2) - 1, 45)
        ids: list[tuple[int, datetime]] = []
        pool: list[str] = []
        for _ in range(max(count, 0)):
            author = self.by_name["trollbait"] if rng.random() < 0.008 else self._author()
            parent: tuple[int, datetime] | None = rng.choice(ids) if ids and rng.random() < 0.4 else None
            after = parent[1] if parent else posted
            created = min(after + timedelta(minutes=rng.randint(3, 60 * 30)), END)
            if author["username"] == "trollbait":
                body = rng.choice(content.TOXIC[:2] + content.TOXIC[3:])
            else:
                if not pool:  # draw replies without repeats until the thread has used them all
                    pool = list(community.replies) + rng.sample(content.GENERIC_REPLIES, k=6)
                    rng.shuffle(pool)
                core = pool.pop()
                opener = rng.choice(content.OPENERS)
                first = core.split()[0].strip(",.!")
                if (
                    opener
                    and not opener.endswith(". ")
                    and first != "I"
                    and not first[1:2].isupper()
                    and first not in content.PROPER
                ):
                    core = core[0].lower() + core[1:]  # "Honestly, the ..." but "Honestly, Python ..."
                body = opener + core + rng.choice(content.CLOSERS)
            deleted = rng.random() < 0.02
            cid = self.insert(
                "comments",
                {
                    "post_id": post_id,
                    "parent_id": parent[0] if parent else None,
                    "author_id": author["id"],
                    "body": "" if deleted else body,
                    "created_at": seeding.iso(created),
                    "is_deleted": int(deleted),
                    "edited_at": seeding.iso(created + timedelta(minutes=rng.randint(2, 90)))
                    if rng.random() < 0.05
                    else None,
                },
            )
            ids.append((cid, created))
            self.votes("comment", cid, rng.uniform(0.5, 0.95), min(int(rng.paretovariate(1.4) * 2) - 1, 25), created)
        self.conn.execute(
            "UPDATE posts SET comment_count = (SELECT COUNT(*) FROM comments WHERE post_id = ? AND is_deleted = 0"
            " AND removed_by IS NULL) WHERE id = ?",
            (post_id, post_id),
        )

    def votes(self, kind: str, target: int, up: float, count: int, created: datetime) -> None:
        rng = self.rng
        voters = rng.sample(self.users[1:], k=max(0, min(count, len(self.users) - 1)))
        total = 0
        for voter in voters:
            if voter["username"] in ("newbie_nate", "spammer_sam"):
                continue
            value = 1 if rng.random() < up else -1
            total += value
            when = min(created + timedelta(minutes=rng.randint(1, 60 * 48)), END)
            self.insert(
                f"{kind}_votes",
                {"user_id": voter["id"], f"{kind}_id": target, "value": value, "created_at": seeding.iso(when)},
            )
        self.conn.execute(f"UPDATE {kind}s SET score = ? WHERE id = ?", (total, target))

    def mess(self) -> None:
        """Spam, attacks, removals, reports and bans: the moderation queue tasks work through."""
        rng = self.rng
        sam, troll = self.by_name["spammer_sam"], self.by_name["trollbait"]
        juniper = self.by_name["juniper_mod"]
        reporters = [u for u in self.users[6:]]
        spam_titles = (
            "Make $5,000 a week from home!!!",
            "Cheap designer watches, free shipping",
            "Lose 20 lbs in 10 days with this one trick",
            "Crypto giveaway, limited time",
            "Best replica bags online",
        )
        for n, title in enumerate(spam_titles):
            fid, community = self.forums[(n * 7) % len(self.forums)]
            created = datetime(2025, 6, 1 + n * 2, 3, 15)
            removed = n < 2
            pid = self.post(
                fid,
                community,
                sam,
                title,
                "https://totally-legit-deals.example/offer",
                "Click now!!!",
                created,
                None,
                **(
                    {
                        "removed_by": self.moderators[fid][0],
                        "removed_reason": "Spam",
                        "removed_at": seeding.iso(created + timedelta(hours=3)),
                    }
                    if removed
                    else {}
                ),
            )
            reporter = rng.choice(reporters)
            self.report(
                reporter,
                fid,
                pid,
                None,
                "spam",
                "",
                created + timedelta(hours=1),
                "actioned" if removed else "open",
                self.moderators[fid][0] if removed else None,
            )
        troll_comments = self.conn.execute(
            "SELECT c.id, c.created_at, p.forum_id FROM comments c JOIN posts p ON p.id = c.post_id"
            " WHERE c.author_id = ? ORDER BY c.id",
            (troll["id"],),
        ).fetchall()
        cooking = self.forum_ids["cooking"]
        for i, (cid, created, fid) in enumerate(troll_comments):
            when = datetime.fromisoformat(created) + timedelta(hours=2)
            if i % 3 == 0:
                self.conn.execute(
                    "UPDATE comments SET removed_by = ?, removed_reason = ?, removed_at = ? WHERE id = ?",
                    (self.moderators[fid][0], "Personal attack", seeding.iso(when), cid),
                )
                self.report(
                    rng.choice(reporters), fid, None, cid, "harassment", "", when, "actioned", self.moderators[fid][0]
                )
            elif i % 3 == 1:
                self.report(
                    rng.choice(reporters), fid, None, cid, "harassment", "Rude for no reason.", when, "open", None
                )
        self.conn.execute(
            "INSERT INTO bans (forum_id, user_id, reason, banned_by, created_at, expires_on) VALUES (?, ?, ?, ?, ?, ?)",
            (cooking, troll["id"], "Repeated personal attacks", juniper["id"], "2025-05-20T18:02:00", None),
        )
        legit = self.conn.execute(
            "SELECT id, forum_id, created_at FROM posts WHERE author_id NOT IN (?, ?) AND is_deleted = 0 ORDER BY id",
            (sam["id"], troll["id"]),
        ).fetchall()
        for pid, fid, created in rng.sample(legit, k=14):
            when = datetime.fromisoformat(created) + timedelta(hours=rng.randint(1, 72))
            status = rng.choice(("open", "open", "dismissed"))
            self.report(
                rng.choice(reporters),
                fid,
                pid,
                None,
                rng.choice(("off_topic", "misinformation", "other")),
                rng.choice(("", "Not really on topic here.", "This advice is wrong and could hurt someone.")),
                min(when, END),
                status,
                self.moderators[fid][0] if status == "dismissed" else None,
            )
        locked = rng.sample(legit, k=4)
        for pid, _, _ in locked:
            self.conn.execute("UPDATE posts SET is_locked = 1 WHERE id = ?", (pid,))
        for fid, _ in self.forums[:6]:
            top = self.conn.execute(
                "SELECT id FROM posts WHERE forum_id = ? AND removed_by IS NULL AND is_deleted = 0 ORDER BY score DESC"
                " LIMIT 1",
                (fid,),
            ).fetchone()
            self.conn.execute("UPDATE posts SET is_pinned = 1 WHERE id = ?", (top[0],))
        self.conn.execute(
            "UPDATE posts SET comment_count = (SELECT COUNT(*) FROM comments c WHERE c.post_id = posts.id"
            " AND c.is_deleted = 0 AND c.removed_by IS NULL)"
        )

    def report(
        self,
        reporter: dict[str, Any],
        fid: int,
        post_id: int | None,
        comment_id: int | None,
        reason: str,
        details: str,
        created: datetime,
        status: str,
        resolver: int | None,
    ) -> None:
        self.insert(
            "reports",
            {
                "reporter_id": reporter["id"],
                "forum_id": fid,
                "post_id": post_id,
                "comment_id": comment_id,
                "reason": reason,
                "details": details,
                "status": status,
                "created_at": seeding.iso(min(created, END)),
                "resolved_by": resolver,
                "resolved_at": seeding.iso(min(created + timedelta(hours=5), END)) if resolver else None,
            },
        )


def build(path: Path, seed: int = DEFAULT_SEED) -> None:
    """Write a fresh forum database to ``path`` (replaced if present)."""
    conn = seeding.create_database(path, SCHEMA)
    try:
        conn.execute("BEGIN")
        seeding.write_meta(
            conn,
            {"kind": "forum", "seed": str(seed), "today": TODAY.isoformat(), "clock": seeding.iso(CLOCK_START)},
        )
        builder = _Builder(conn, seed)
        builder.people()
        builder.communities()
        builder.subscriptions()
        builder.posts()
        conn.execute("COMMIT")
        conn.execute("VACUUM")
    finally:
        conn.close()
