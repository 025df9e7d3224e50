#!/usr/bin/env python3
"""Verifier for catalogue/denormalised_counters_triggers.

The counters are compared, for every album and artist, with a recomputation from the source tables
(tracks, play_events, albums), first as left by the agent (the backfill) and then after each step of a
scripted sequence of inserts, updates and deletes that runs in one transaction and is rolled back.
Pinned digests (computed from the state generator's rows, seed 20261123) prove that the agent changed
no source data, and the schema check that only the three requested columns were added.
"""

from __future__ import annotations

import hashlib
import os
import sys
from datetime import UTC, date, datetime

import psycopg2

SOURCES = {
    "artists": ("artist_id, name, country, formed_year, created_at", "artist_id", 1488, "26d98bafd8b0e2cad993"),
    "albums": (
        "album_id, artist_id, label_id, title, album_type, release_date, upc",
        "album_id",
        2767,
        "0c80ab372f97d06141ed",
    ),
    "tracks": (
        "track_id, album_id, disc_number, track_number, title, duration_ms, isrc, genre_id, explicit",
        "track_id",
        22235,
        "d6d2f776ef75abb06db7",
    ),
    "track_artists": ("track_id, artist_id, role", "track_id, artist_id", 25024, "a93738f8234d495d0d57"),
    "play_events": (
        "play_id, listener_id, track_id, played_at, ms_played, source, country",
        "play_id",
        61448,
        "2d7610ad5b40160e00b7",
    ),
    "playlist_entries": (
        "entry_id, playlist_id, track_id, position, added_at",
        "entry_id",
        14718,
        "9887a060e0f31c76bada",
    ),
}
NEW_COLUMNS = {
    ("albums", "track_count"): "integer",
    ("albums", "total_duration_ms"): "bigint",
    ("artists", "play_count"): "bigint",
}
TABLES = [
    "albums",
    "artists",
    "contract_rate_tiers",
    "genres",
    "label_contracts",
    "labels",
    "listeners",
    "play_events",
    "playlist_entries",
    "playlists",
    "subscriptions",
    "track_artists",
    "tracks",
]
STALE_ALBUMS = """
SELECT a.album_id, a.track_count, a.total_duration_ms, coalesce(s.n, 0), coalesce(s.d, 0)
FROM albums a LEFT JOIN (SELECT album_id, count(*) AS n, sum(coalesce(duration_ms, 0)) AS d
                         FROM tracks GROUP BY album_id) s ON s.album_id = a.album_id
WHERE a.track_count IS DISTINCT FROM coalesce(s.n, 0) OR a.total_duration_ms IS DISTINCT FROM coalesce(s.d, 0)
ORDER BY a.album_id"""
STALE_ARTISTS = """
SELECT ar.artist_id, ar.play_count, coalesce(s.n, 0)
FROM artists ar LEFT JOIN (SELECT al.artist_id, count(*) AS n FROM play_events p
                           JOIN tracks t ON t.track_id = p.track_id JOIN albums al ON al.album_id = t.album_id
                           GROUP BY al.artist_id) s ON s.artist_id = ar.artist_id
WHERE ar.play_count IS DISTINCT FROM coalesce(s.n, 0)
ORDER BY ar.artist_id"""
TS = "'2026-11-21 10:00:00+00'"

failures: list[str] = []


def check(ok: bool, msg: str) -> bool:
    print(("PASS: " if ok else "FAIL: ") + msg)
    if not ok:
        failures.append(msg)
    return ok


def connect():
    db = os.environ.get("POSTGRES_DATABASE") or (sys.argv[1] if len(sys.argv) > 1 else "")
    if not db:
        print("FAIL: no database given (POSTGRES_DATABASE or argv[1])")
        sys.exit(1)
    return psycopg2.connect(
        host=os.environ.get("POSTGRES_HOST", "localhost"),
        port=int(os.environ.get("POSTGRES_PORT", "5432")),
        user=os.environ.get("POSTGRES_USERNAME", "postgres"),
        password=os.environ.get("POSTGRES_PASSWORD", ""),
        dbname=db,
    )


def canon(v: object) -> str:
    if v is None:
        return "\\N"
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, datetime):
        return v.astimezone(UTC).isoformat()
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


def digest(cur, cols: str, table: str, order: str) -> tuple[int, str]:
    cur.execute(f"SELECT {cols} FROM {table} ORDER BY {order}")
    h, n = hashlib.sha256(), 0
    for row in cur:
        h.update(("\t".join(canon(v) for v in row) + "\n").encode())
        n += 1
    return n, h.hexdigest()[:20]


def consistent(cur, when: str) -> bool:
    cur.execute(STALE_ALBUMS)
    albums = cur.fetchall()
    cur.execute(STALE_ARTISTS)
    artists = cur.fetchall()
    detail = []
    if albums:
        a = albums[0]
        detail.append(
            f"{len(albums)} album(s) wrong, e.g. album {a[0]} has ({a[1]}, {a[2]}), expected ({a[3]}, {a[4]})"
        )
    if artists:
        a = artists[0]
        detail.append(f"{len(artists)} artist(s) wrong, e.g. artist {a[0]} has {a[1]}, expected {a[2]}")
    return check(
        not albums and not artists, f"{when}: counters match the data" + (f" ({'; '.join(detail)})" if detail else "")
    )


def pick_ids(cur) -> dict[str, int]:
    """Deterministic test subjects: played tracks on albums of distinct artists, a draft, an orphan."""
    cur.execute(
        "SELECT t.track_id, al.album_id, al.artist_id FROM play_events p JOIN tracks t ON t.track_id = p.track_id "
        "JOIN albums al ON al.album_id = t.album_id GROUP BY 1, 2, 3 HAVING count(*) >= 6 ORDER BY 1"
    )
    played, seen = [], set()
    for track, album, artist in cur.fetchall():
        if artist not in seen and album not in {p[1] for p in played}:
            seen.add(artist)
            played.append((track, album, artist))
        if len(played) == 7:
            break
    cur.execute("SELECT min(track_id) FROM tracks WHERE album_id IS NULL")
    draft = cur.fetchone()[0]
    cur.execute(
        "SELECT min(track_id) FROM tracks t WHERE album_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM albums a WHERE a.album_id = t.album_id)"
    )
    orphan = cur.fetchone()[0]
    ids = {"draft": draft, "orphan": orphan}
    for i, name in enumerate("tuwvxz"):
        ids[name], ids[name + "_album"], ids[name + "_artist"] = played[i]
    ids["c"], ids["y"] = played[6][1], played[6][2]
    return ids


STEPS = [
    (
        "insert three tracks (one without duration) into one album in one statement",
        "INSERT INTO tracks (track_id, album_id, title, duration_ms) VALUES (990001, %(t_album)s, 'v1', 200000), "
        "(990002, %(t_album)s, 'v2', NULL), (990003, %(t_album)s, 'v3', 180000)",
    ),
    (
        "update the durations of two tracks",
        "UPDATE tracks SET duration_ms = CASE track_id WHEN 990001 THEN 250000 ELSE 100000 END "
        "WHERE track_id IN (990001, 990002)",
    ),
    (
        "insert plays, including plays of a draft and of an orphan track",
        f"INSERT INTO play_events (listener_id, track_id, played_at, ms_played) VALUES (1, %(t)s, {TS}, 90000), "
        f"(NULL, %(t)s, {TS}, 1000), (3, 990001, {TS}, 200000), (4, %(draft)s, {TS}, 50000), "
        f"(5, %(orphan)s, {TS}, 50000)",
    ),
    ("move a played track to an album of another artist", "UPDATE tracks SET album_id = %(c)s WHERE track_id = %(t)s"),
    (
        "re-point some plays to a track of another artist",
        "UPDATE play_events SET track_id = %(w)s WHERE play_id IN "
        "(SELECT play_id FROM play_events WHERE track_id = %(u)s ORDER BY play_id LIMIT 4)",
    ),
    (
        "update a column the counters do not depend on",
        "UPDATE play_events SET ms_played = coalesce(ms_played, 0) + 1, source = 'radio' WHERE track_id = %(w)s",
    ),
    ("hand an album to another artist", "UPDATE albums SET artist_id = %(y)s WHERE album_id = %(v_album)s"),
    (
        "delete some plays",
        "DELETE FROM play_events WHERE play_id IN "
        "(SELECT play_id FROM play_events WHERE track_id = %(w)s ORDER BY play_id DESC LIMIT 3)",
    ),
    ("turn a played track into a draft", "UPDATE tracks SET album_id = NULL WHERE track_id = %(x)s"),
    (
        "point a played track at an album id that does not exist",
        "UPDATE tracks SET album_id = 999999 WHERE track_id = %(u)s",
    ),
    (
        "move a track and change its duration in one update",
        "UPDATE tracks SET album_id = %(t_album)s, duration_ms = 123456 WHERE track_id = %(z)s",
    ),
    (
        "delete tracks that have plays",
        "DELETE FROM track_artists WHERE track_id IN (%(t)s, %(w)s, 990003); "
        "DELETE FROM tracks WHERE track_id IN (%(t)s, %(w)s, 990003)",
    ),
    ("give a draft track an album", "UPDATE tracks SET album_id = %(z_album)s WHERE track_id = %(x)s"),
]


def main() -> int:
    conn = connect()
    cur = conn.cursor()
    for table, (cols, order, n_want, d_want) in SOURCES.items():
        n, d = digest(cur, cols, table, order)
        check((n, d) == (n_want, d_want), f"{table}: source data unchanged (rows {n}, expected {n_want})")
    cur.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
        "AND relkind IN ('r', 'p', 'm', 'f') ORDER BY 1"
    )
    tables = [r[0] for r in cur.fetchall()]
    check(tables == TABLES, f"no tables added or dropped (found {tables})")
    ok = True
    for (table, col), typ in NEW_COLUMNS.items():
        cur.execute(
            "SELECT data_type, is_nullable, column_default FROM information_schema.columns "
            "WHERE table_schema = 'public' AND table_name = %s AND column_name = %s",
            (table, col),
        )
        row = cur.fetchone()
        ok &= check(
            row is not None and row[0] == typ and row[1] == "NO" and (row[2] or "").strip("()") == "0",
            f"column {table}.{col} {typ} NOT NULL DEFAULT 0 (found {row})",
        )
    cur.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public' "
        "AND table_name IN ('albums', 'artists')"
    )
    check(cur.fetchone()[0] == 7 + 5 + 3, "albums and artists have only the three new columns added")
    if not ok:
        return finish()
    consistent(cur, "backfill")
    cur.execute("SELECT count(*) FROM artists WHERE play_count > 0")
    check(cur.fetchone()[0] > 1000, "backfill counted plays for the artists")

    ids = pick_ids(cur)
    for what, sql in STEPS:
        cur.execute("SAVEPOINT s")
        try:
            cur.execute(sql, ids)
        except psycopg2.Error as exc:
            cur.execute("ROLLBACK TO SAVEPOINT s")
            check(False, f"step '{what}' raised {str(exc).strip()[:160]}")
            continue
        consistent(cur, f"after '{what}'")
    cur.execute(
        "INSERT INTO albums (album_id, artist_id, title, album_type) VALUES (990001, 1, 'v', 'single') "
        "RETURNING track_count, total_duration_ms"
    )
    check(cur.fetchone() == (0, 0), "a new album starts with track_count 0 and total_duration_ms 0")
    conn.rollback()
    consistent(cur, "after rollback")
    conn.close()
    return finish()


def finish() -> int:
    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
