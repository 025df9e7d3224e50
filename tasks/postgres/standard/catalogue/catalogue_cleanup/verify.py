#!/usr/bin/env python3
"""Verifier for catalogue/catalogue_cleanup.

The clean-up rewrites three tables, so the expected end state cannot be recomputed from the database
itself: it was computed once, in plain Python, from the state generator's rows (seed 20261123) and is
pinned here as row counts plus SHA-256 digests of canonically formatted rows. Readable checks come
first (orphans gone, groups merged, positions contiguous) so a failure says what went wrong; the
digests then prove the exact end state, and that untouched tables and the schema are unchanged.
"""

from __future__ import annotations

import hashlib
import os
import sys
from datetime import UTC, date, datetime

import psycopg2

COLUMNS = {
    "labels": ("label_id, name, country, founded_year", "label_id"),
    "label_contracts": ("contract_id, label_id, valid_from, valid_to, min_ms_played", "contract_id"),
    "contract_rate_tiers": ("contract_id, from_play, rate_per_play", "contract_id, from_play"),
    "genres": ("genre_id, name, parent_genre_id", "genre_id"),
    "artists": ("artist_id, name, country, formed_year, created_at", "artist_id"),
    "albums": ("album_id, artist_id, label_id, title, album_type, release_date, upc", "album_id"),
    "tracks": (
        "track_id, album_id, disc_number, track_number, title, duration_ms, isrc, genre_id, explicit",
        "track_id",
    ),
    "track_artists": ("track_id, artist_id, role", "track_id, artist_id"),
    "listeners": ("listener_id, username, email, country, birth_year, signed_up_at", "listener_id"),
    "subscriptions": ("subscription_id, listener_id, plan, started_at, ended_at", "subscription_id"),
    "playlists": ("playlist_id, owner_id, name, is_public, created_at", "playlist_id"),
    "playlist_entries": ("entry_id, playlist_id, track_id, position, added_at", "entry_id"),
    "play_events": ("play_id, listener_id, track_id, played_at, ms_played, source, country", "play_id"),
}
# expected end state: (row count, digest); tables the task must not touch keep their original digest
EXPECTED = {
    "labels": (36, "164f42a8f5bf7d3d47a4"),
    "label_contracts": (55, "8bb5f874cbe7acdfa870"),
    "contract_rate_tiers": (78, "1edda101c95fe1c37d44"),
    "genres": (30, "12d4c00546c54b3bb6df"),
    "artists": (1431, "b2e4559a430a8e37724f"),
    "albums": (2767, "698f69503029b0f53e56"),
    "tracks": (22122, "9e34ea8b380a27fe73d4"),
    "track_artists": (24569, "46ffa045d42fed0f862f"),
    "listeners": (4050, "a5c57dfffc2defcf49fe"),
    "subscriptions": (4920, "acda2c4019709d8ff82d"),
    "playlists": (700, "f0e1bcfc3c2fdad186bc"),
    "playlist_entries": (14609, "8c4f90dadaea08eb70b8"),
    "play_events": (61448, "2d7610ad5b40160e00b7"),
}
DRAFT_TRACKS = 31
DANGLING_ENTRIES = 60  # entries whose track id is no longer in `tracks` (taken down): must be kept
ACCENT_DECOYS = 10  # names like 'Cyrus Réyes' that are NOT duplicates of 'Cyrus Reyes'
CONSTRAINTS = 31
INDEXES = 22

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
    """Session-timezone independent text form of one value."""
    if v is None:
        return "\\N"
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, datetime):
        return v.astimezone(UTC).isoformat()
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


def digest(cur, table: str) -> tuple[int, str]:
    cols, order = COLUMNS[table]
    cur.execute(f"SELECT {cols} FROM {table} ORDER BY {order}")
    h, n = hashlib.sha256(), 0
    for row in cur:
        h.update(("\t".join(canon(v) for v in row) + "\n").encode())
        n += 1
    return n, h.hexdigest()[:20]


def one(cur, sql: str) -> object:
    cur.execute(sql)
    return cur.fetchone()[0]


NORM = "lower(btrim(regexp_replace(name, '\\s+', ' ', 'g')))"


def main() -> int:
    conn = connect()
    conn.set_session(readonly=True)
    cur = conn.cursor()

    # ---- schema: same tables, columns, constraints, indexes; no helper tables left behind
    cur.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace "
        "AND c.relkind IN ('r', 'p', 'm', 'f') ORDER BY 1"
    )
    tables = [r[0] for r in cur.fetchall()]
    check(tables == sorted(COLUMNS), f"public tables are exactly the original 13 (found {tables})")
    for table, (cols, _) in COLUMNS.items():
        cur.execute(
            "SELECT string_agg(column_name, ', ' ORDER BY ordinal_position) FROM information_schema.columns "
            "WHERE table_schema = 'public' AND table_name = %s",
            (table,),
        )
        check(cur.fetchone()[0] == cols, f"{table} has its original columns")
    n_con = one(cur, "SELECT count(*) FROM pg_constraint WHERE connamespace = 'public'::regnamespace")
    n_idx = one(
        cur,
        "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relnamespace = 'public'::regnamespace",
    )
    check(n_con == CONSTRAINTS, f"no constraint added or dropped ({n_con}, expected {CONSTRAINTS})")
    check(n_idx == INDEXES, f"no index added or dropped ({n_idx}, expected {INDEXES})")
    if tables != sorted(COLUMNS):
        return finish()

    # ---- 1. orphans
    orphans = one(
        cur,
        "SELECT count(*) FROM tracks t WHERE album_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM albums a WHERE a.album_id = t.album_id)",
    )
    check(orphans == 0, f"no orphan tracks left ({orphans})")
    drafts = one(cur, "SELECT count(*) FROM tracks WHERE album_id IS NULL")
    check(drafts == DRAFT_TRACKS, f"draft tracks (NULL album_id) kept ({drafts}, expected {DRAFT_TRACKS})")
    dangling = one(
        cur,
        "SELECT count(*) FROM playlist_entries e "
        "WHERE NOT EXISTS (SELECT 1 FROM tracks t WHERE t.track_id = e.track_id)",
    )
    check(
        dangling == DANGLING_ENTRIES,
        f"entries of never-existing tracks kept, orphan entries deleted ({dangling}, expected {DANGLING_ENTRIES})",
    )

    # ---- 2. artists
    dup = one(cur, f"SELECT count(*) FROM (SELECT {NORM} FROM artists GROUP BY 1 HAVING count(*) > 1) s")
    check(dup == 0, f"no two artists share a normalised name ({dup} groups left)")
    decoys = one(cur, "SELECT count(*) FROM artists WHERE name ~ '[^\\x01-\\x7e]'")
    check(decoys == ACCENT_DECOYS, f"names differing only by accents were not merged ({decoys}/{ACCENT_DECOYS})")
    messy = one(cur, "SELECT count(*) FROM artists WHERE name <> btrim(regexp_replace(name, '\\s+', ' ', 'g'))")
    check(messy == 0, f"kept artists' names are trimmed and collapsed ({messy} still messy)")
    credits_ok = one(
        cur,
        "SELECT count(*) FROM track_artists ta WHERE NOT EXISTS "
        "(SELECT 1 FROM artists a WHERE a.artist_id = ta.artist_id)",
    )
    check(credits_ok == 0, "every credit points at an existing artist")
    for table in ("artists", "albums", "track_artists"):
        n, d = digest(cur, table)
        want = EXPECTED[table]
        check(
            (n, d) == want,
            f"{table}: exact expected end state (rows {n}, expected {want[0]}; digest "
            f"{'matches' if d == want[1] else 'differs'}: survivor rule, re-pointing, roles, names)",
        )

    # ---- 3. playlist positions
    bad_pl = one(
        cur,
        "SELECT count(*) FROM (SELECT playlist_id FROM playlist_entries GROUP BY playlist_id "
        "HAVING min(position) <> 1 OR max(position) <> count(*) OR count(DISTINCT position) <> count(*)) s",
    )
    check(bad_pl == 0, f"every playlist numbered 1..n without gaps or repeats ({bad_pl} playlists are not)")
    n, d = digest(cur, "playlist_entries")
    want = EXPECTED["playlist_entries"]
    check(
        (n, d) == want,
        f"playlist_entries: exact expected end state (rows {n}, expected {want[0]}; digest "
        f"{'matches' if d == want[1] else 'differs'}: order preserved, ties by added_at then entry_id)",
    )

    # ---- tracks and everything that must not change
    for table in (
        "tracks",
        "labels",
        "label_contracts",
        "contract_rate_tiers",
        "genres",
        "listeners",
        "subscriptions",
        "playlists",
        "play_events",
    ):
        n, d = digest(cur, table)
        want = EXPECTED[table]
        check(
            (n, d) == want,
            f"{table}: expected content (rows {n}, expected {want[0]}; digest "
            f"{'matches' if d == want[1] else 'differs'})",
        )
    conn.rollback()
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
