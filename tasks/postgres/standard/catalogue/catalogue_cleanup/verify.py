#!/usr/bin/env python3
"""Verifier for catalogue/catalogue_cleanup.

The clean-up rewrites three tables, so the expected end state cannot be recomputed from the database
itself: it was computed once, in plain Python, from the state generator's rows (seed 20261123) and is
pinned here as row counts plus md5 digests of the rows' canonical text (PostgreSQL's own text output of
each row, in key order, under a fixed time zone and date style; the server computes every digest in one
statement, so no row is fetched). Readable checks come first (orphans gone, groups merged, positions
contiguous) so a failure says what went wrong; the digests then prove the exact end state, and that
untouched tables and the schema (tables, columns, and every constraint and index by its definition) are
unchanged.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

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
# expected end state: (row count, md5); tables the task must not touch keep their original digest
EXPECTED = {
    "labels": (36, "88b25f48908edbfcb772365a9b13bd99"),
    "label_contracts": (55, "59f10acf1b26b2a4e64bd147f1f89203"),
    "contract_rate_tiers": (78, "2adac4e0f11feab3e8b7606831875562"),
    "genres": (30, "465a8bb0f832671cd5ef1aa967920545"),
    "artists": (1431, "5f4d4d48a38154df03a56c49abc1cc55"),
    "albums": (2767, "efd814868829cc8b422f670d1f647d01"),
    "tracks": (22122, "b9362e98af073d26ec50aee9cbded4b8"),
    "track_artists": (24569, "c33c2462cfa25ac63543dd86f2903ef2"),
    "listeners": (4050, "e1cd000d6a6d7880f21bed91648792ab"),
    "subscriptions": (4920, "41f7de13a443db079305c387a7d65e66"),
    "playlists": (700, "aae63b249931cfc275c486f9be1d5f16"),
    "playlist_entries": (14609, "baf82ce558e36c740ae5eebe3180fd76"),
    "play_events": (61448, "e4408dcd932df74b295fcda9eb79b4df"),
}
DRAFT_TRACKS = 31
DANGLING_ENTRIES = 60  # entries whose track id is no longer in `tracks` (taken down): must be kept
ACCENT_DECOYS = 10  # names like 'Cyrus Réyes' that are NOT duplicates of 'Cyrus Reyes'
# The original schema's constraints and indexes, by definition (names aside: a renamed object is the same one),
# as PostgreSQL prints them (pg_get_constraintdef; pg_get_indexdef without the index's name).
CONSTRAINTS = [
    ("labels", "p", "PRIMARY KEY (label_id)"),
    ("labels", "u", "UNIQUE (name)"),
    ("label_contracts", "p", "PRIMARY KEY (contract_id)"),
    ("label_contracts", "f", "FOREIGN KEY (label_id) REFERENCES labels(label_id)"),
    ("label_contracts", "c", "CHECK (((valid_to IS NULL) OR (valid_to >= valid_from)))"),
    ("contract_rate_tiers", "p", "PRIMARY KEY (contract_id, from_play)"),
    ("contract_rate_tiers", "f", "FOREIGN KEY (contract_id) REFERENCES label_contracts(contract_id)"),
    ("contract_rate_tiers", "c", "CHECK ((from_play >= 1))"),
    ("genres", "p", "PRIMARY KEY (genre_id)"),
    ("genres", "u", "UNIQUE (name)"),
    ("genres", "f", "FOREIGN KEY (parent_genre_id) REFERENCES genres(genre_id)"),
    ("artists", "p", "PRIMARY KEY (artist_id)"),
    ("albums", "p", "PRIMARY KEY (album_id)"),
    ("albums", "f", "FOREIGN KEY (artist_id) REFERENCES artists(artist_id)"),
    (
        "albums",
        "c",
        "CHECK ((album_type = ANY (ARRAY['album'::text, 'single'::text, 'ep'::text, 'compilation'::text])))",
    ),
    ("tracks", "p", "PRIMARY KEY (track_id)"),
    ("tracks", "c", "CHECK ((duration_ms > 0))"),
    ("tracks", "f", "FOREIGN KEY (genre_id) REFERENCES genres(genre_id)"),
    ("track_artists", "p", "PRIMARY KEY (track_id, artist_id)"),
    ("track_artists", "f", "FOREIGN KEY (track_id) REFERENCES tracks(track_id)"),
    ("track_artists", "f", "FOREIGN KEY (artist_id) REFERENCES artists(artist_id)"),
    ("track_artists", "c", "CHECK ((role = ANY (ARRAY['primary'::text, 'featured'::text])))"),
    ("listeners", "p", "PRIMARY KEY (listener_id)"),
    ("listeners", "u", "UNIQUE (username)"),
    ("subscriptions", "p", "PRIMARY KEY (subscription_id)"),
    ("subscriptions", "f", "FOREIGN KEY (listener_id) REFERENCES listeners(listener_id) ON DELETE CASCADE"),
    (
        "subscriptions",
        "c",
        "CHECK ((plan = ANY (ARRAY['free'::text, 'premium'::text, 'family'::text, 'student'::text])))",
    ),
    ("playlists", "p", "PRIMARY KEY (playlist_id)"),
    ("playlists", "f", "FOREIGN KEY (owner_id) REFERENCES listeners(listener_id) ON DELETE SET NULL"),
    ("playlist_entries", "p", "PRIMARY KEY (entry_id)"),
    ("play_events", "p", "PRIMARY KEY (play_id)"),
]
INDEXES = [
    (t, f"CREATE UNIQUE INDEX ON public.{t} USING btree ({k})")
    for t, k in (
        ("labels", "label_id"),
        ("labels", "name"),
        ("label_contracts", "contract_id"),
        ("contract_rate_tiers", "contract_id, from_play"),
        ("genres", "genre_id"),
        ("genres", "name"),
        ("artists", "artist_id"),
        ("albums", "album_id"),
        ("tracks", "track_id"),
        ("track_artists", "track_id, artist_id"),
        ("listeners", "listener_id"),
        ("listeners", "username"),
        ("subscriptions", "subscription_id"),
        ("playlists", "playlist_id"),
        ("playlist_entries", "entry_id"),
        ("play_events", "play_id"),
    )
] + [
    (t, f"CREATE INDEX ON public.{t} USING btree ({k})")
    for t, k in (
        ("albums", "artist_id"),
        ("tracks", "album_id"),
        ("track_artists", "artist_id"),
        ("subscriptions", "listener_id"),
        ("playlists", "owner_id"),
        ("play_events", "played_at"),
    )
]

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
        # JIT compiled the views for tens of ms a query; 4 MB of work_mem sent the digests' sorts to disk. Neither
        # changes a result.
        options="-c jit=off -c work_mem=32MB",
    )


DIGEST_SETTINGS = (  # the text form of dates and times must not depend on the session
    "SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; SET LOCAL IntervalStyle = 'postgres'; "
    "SET LOCAL extra_float_digits = 1"
)


def digests(cur, tables: list[str]) -> dict[str, tuple[int, str]]:
    """(rows, md5 of the rows' text in key order) of each table's listed columns, computed by the server in one
    statement; the session settings it needs are undone afterwards (a savepoint)."""
    query = " UNION ALL ".join(
        f"SELECT '{t}', count(*), md5(coalesce(string_agg(r::text, E'\\n' ORDER BY {COLUMNS[t][1]}), '')) "
        f"FROM (SELECT {COLUMNS[t][0]} FROM {t}) r"
        for t in tables
    )
    cur.execute("SAVEPOINT digest")
    try:
        cur.execute(DIGEST_SETTINGS)
        cur.execute(query)
        out = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
    except psycopg2.Error as exc:
        print(f"   digest query failed: {str(exc).strip()[:200]}")
        out = {t: (-1, "error") for t in tables}
    cur.execute("ROLLBACK TO SAVEPOINT digest")
    return out


NORM = "lower(btrim(regexp_replace(name, '\\s+', ' ', 'g')))"


def constraint_defs(cur) -> Counter:
    """(table, type, definition) of every constraint in public (NOT NULL markers aside), whatever its name."""
    cur.execute(
        "SELECT t.relname, c.contype::text, pg_get_constraintdef(c.oid) FROM pg_constraint c "
        "JOIN pg_class t ON t.oid = c.conrelid WHERE c.connamespace = 'public'::regnamespace AND c.contype <> 'n'"
    )
    return Counter(cur.fetchall())


def index_defs(cur) -> Counter:
    """(table, definition without the index's own name) of every index in public."""
    cur.execute(
        "SELECT t.relname, quote_ident(i.relname), pg_get_indexdef(x.indexrelid) FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
        "WHERE t.relnamespace = 'public'::regnamespace"
    )
    return Counter((t, d.replace(f" INDEX {q} ON ", " INDEX ON ", 1)) for t, q, d in cur.fetchall())


def same_set(what: str, got: Counter, want: Counter) -> None:
    """One check: `got` holds exactly `want`; the message lists what is missing and what was added."""
    missing, added = sorted((want - got).elements()), sorted((got - want).elements())
    check(
        not missing and not added,
        f"{what} exactly as in the original schema (missing: {missing[:4] or 'none'}; added: {added[:4] or 'none'})",
    )


COUNTS_SQL = f"""
SELECT
  (SELECT count(*) FROM tracks t WHERE album_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM albums a WHERE a.album_id = t.album_id)),
  (SELECT count(*) FROM tracks WHERE album_id IS NULL),
  (SELECT count(*) FROM playlist_entries e WHERE NOT EXISTS (SELECT 1 FROM tracks t WHERE t.track_id = e.track_id)),
  (SELECT count(*) FROM (SELECT {NORM} FROM artists GROUP BY 1 HAVING count(*) > 1) s),
  (SELECT count(*) FROM artists WHERE name ~ '[^\\x01-\\x7e]'),
  (SELECT count(*) FROM artists WHERE name <> btrim(regexp_replace(name, '\\s+', ' ', 'g'))),
  (SELECT count(*) FROM track_artists ta WHERE NOT EXISTS (SELECT 1 FROM artists a WHERE a.artist_id = ta.artist_id)),
  (SELECT count(*) FROM (SELECT playlist_id FROM playlist_entries GROUP BY playlist_id
   HAVING min(position) <> 1 OR max(position) <> count(*) OR count(DISTINCT position) <> count(*)) s)
"""


def main() -> int:
    conn = connect()
    conn.set_session(readonly=True)
    cur = conn.cursor()

    # ---- schema: same tables, columns, constraints, indexes; no helper tables left behind
    cur.execute(
        "SELECT c.relname, (SELECT string_agg(a.attname, ', ' ORDER BY a.attnum) FROM pg_attribute a "
        "WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) FROM pg_class c "
        "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'm', 'f') ORDER BY 1"
    )
    found = dict(cur.fetchall())
    tables = sorted(found)
    check(tables == sorted(COLUMNS), f"public tables are exactly the original 13 (found {tables})")
    for table, (cols, _) in COLUMNS.items():
        check(found.get(table) == cols, f"{table} has its original columns")
    same_set("constraints (table, type, definition)", constraint_defs(cur), Counter(CONSTRAINTS))
    same_set("indexes (table, definition)", index_defs(cur), Counter(INDEXES))
    if tables != sorted(COLUMNS):
        return finish()
    cur.execute(COUNTS_SQL)
    orphans, drafts, dangling, dup, decoys, messy, credits_ok, bad_pl = cur.fetchone()
    got = digests(cur, list(COLUMNS))

    # ---- 1. orphans
    check(orphans == 0, f"no orphan tracks left ({orphans})")
    check(drafts == DRAFT_TRACKS, f"draft tracks (NULL album_id) kept ({drafts}, expected {DRAFT_TRACKS})")
    check(
        dangling == DANGLING_ENTRIES,
        f"entries of never-existing tracks kept, orphan entries deleted ({dangling}, expected {DANGLING_ENTRIES})",
    )

    # ---- 2. artists
    check(dup == 0, f"no two artists share a normalised name ({dup} groups left)")
    check(decoys == ACCENT_DECOYS, f"names differing only by accents were not merged ({decoys}/{ACCENT_DECOYS})")
    check(messy == 0, f"kept artists' names are trimmed and collapsed ({messy} still messy)")
    check(credits_ok == 0, "every credit points at an existing artist")
    for table in ("artists", "albums", "track_artists"):
        (n, d), want = got[table], EXPECTED[table]
        check(
            (n, d) == want,
            f"{table}: exact expected end state (rows {n}, expected {want[0]}; digest "
            f"{'matches' if d == want[1] else 'differs'}: survivor rule, re-pointing, roles, names)",
        )

    # ---- 3. playlist positions
    check(bad_pl == 0, f"every playlist numbered 1..n without gaps or repeats ({bad_pl} playlists are not)")
    (n, d), want = got["playlist_entries"], EXPECTED["playlist_entries"]
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
        (n, d), want = got[table], EXPECTED[table]
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
