#!/usr/bin/env python3
"""Verifier for catalogue/integrity_constraints_indexes.

Checks the catalog (named CHECK/UNIQUE constraints on isrc, five validated foreign keys to the right keys with
the right ON DELETE action, every original constraint and index kept with its definition, no other constraint
added), the behaviour (bad inserts rejected, deletes cascade / restrict /
set NULL, all inside a transaction that is rolled back), the plans of the five application queries
(EXPLAIN after ANALYZE must scan an index led by the filtered column, never the table), and the data
fixes: the expected end state was computed once in plain Python from the state generator's rows
(seed 20261123) and is pinned as row counts plus md5 digests of the rows' canonical text (PostgreSQL's own
text output of each row, in key order, under a fixed time zone and date style; the server computes every
digest in one statement, so no row is fetched).
"""

from __future__ import annotations

import json
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
EXPECTED = {
    "labels": (36, "88b25f48908edbfcb772365a9b13bd99"),
    "label_contracts": (55, "59f10acf1b26b2a4e64bd147f1f89203"),
    "contract_rate_tiers": (78, "2adac4e0f11feab3e8b7606831875562"),
    "genres": (30, "465a8bb0f832671cd5ef1aa967920545"),
    "artists": (1488, "5cad70cc9431018fe92c506087a3ac4a"),
    "albums": (2767, "4c47429511af70cbe03adb9c03359bc0"),
    "tracks": (22235, "f3c21d626d76f8fb5ea5ea26e7fd5a40"),
    "track_artists": (25024, "ac52e0de2b05e3ee73f47c13869f25ca"),
    "listeners": (4050, "e1cd000d6a6d7880f21bed91648792ab"),
    "subscriptions": (4920, "41f7de13a443db079305c387a7d65e66"),
    "playlists": (700, "aae63b249931cfc275c486f9be1d5f16"),
    "playlist_entries": (14658, "1b321234cd2444b1831f29b6983d7f4e"),
    "play_events": (61448, "d9ab01b06af88e316470b97369094606"),
}
ISRC_NON_NULL = 20188
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
# (table, column, referenced table and key, confdeltype): c = CASCADE, r = RESTRICT, n = SET NULL
FKS = [
    ("playlist_entries", "playlist_id", "playlists(playlist_id)", "c"),
    ("playlist_entries", "track_id", "tracks(track_id)", "c"),
    ("play_events", "track_id", "tracks(track_id)", "r"),
    ("play_events", "listener_id", "listeners(listener_id)", "n"),
    ("albums", "label_id", "labels(label_id)", "n"),
]
QUERIES = [
    (
        "play_events",
        "track_id",
        "SELECT played_at, ms_played FROM play_events WHERE track_id = 1134 "
        "AND played_at >= '2026-10-01 00:00:00+00' AND played_at < '2026-11-01 00:00:00+00'",
    ),
    ("play_events", "listener_id", "SELECT count(*) FROM play_events WHERE listener_id = 19"),
    (
        "playlist_entries",
        "playlist_id",
        "SELECT position, track_id FROM playlist_entries WHERE playlist_id = 66 ORDER BY position",
    ),
    ("artists", "lower(name)", "SELECT artist_id, name FROM artists WHERE lower(name) = 'nadia haddad'"),
    ("tracks", "isrc", "SELECT track_id, title FROM tracks WHERE isrc = 'DESNY2000006'"),
]
BAD_ISRCS = [
    "usrc12600001",
    "US-RC1-26-00001",
    "USRC1260000",
    "USRC126000011",
    "U1RC12600001",
    "USRC12A00001",
    " USRC12600001",
    "USrc12600001",
    "",
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


def one(cur, sql: str, args: tuple = ()) -> object:
    cur.execute(sql, args)
    row = cur.fetchone()
    return row[0] if row else None


def attempt(cur, sql: str, args: tuple = ()) -> str | None:
    """Run one statement in a savepoint; return its SQLSTATE, or None if it succeeded."""
    cur.execute("SAVEPOINT s")
    try:
        cur.execute(sql, args)
        cur.execute("RELEASE SAVEPOINT s")
        return None
    except psycopg2.Error as exc:
        cur.execute("ROLLBACK TO SAVEPOINT s")
        return exc.pgcode or "error"


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


def check_catalog(cur) -> None:
    cur.execute(
        "SELECT ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.conrelid "
        "AND a.attnum = ANY (c.conkey) ORDER BY a.attnum), c.convalidated FROM pg_constraint c "
        "WHERE c.conname = 'tracks_isrc_format_check' AND c.conrelid = 'tracks'::regclass AND c.contype = 'c'"
    )
    row = cur.fetchone()
    if check(row is not None, "CHECK constraint tracks_isrc_format_check exists on tracks"):
        check(row[0] == ["isrc"], f"tracks_isrc_format_check constrains isrc and nothing else (columns {row[0]})")
        check(row[1], "tracks_isrc_format_check is validated (not NOT VALID)")
    row = one(
        cur,
        "SELECT array_agg(a.attname) FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid "
        "AND a.attnum = ANY (c.conkey) WHERE c.conname = 'tracks_isrc_key' AND c.contype = 'u' "
        "AND c.conrelid = 'tracks'::regclass",
    )
    check(row == ["isrc"], f"UNIQUE constraint tracks_isrc_key on tracks(isrc) (found {row})")
    names = {"c": "CASCADE", "r": "RESTRICT", "n": "SET NULL"}
    for table, col, ref, action in FKS:
        cur.execute(
            "SELECT c.confdeltype, c.convalidated, pg_get_constraintdef(c.oid) FROM pg_constraint c "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND c.conkey = ARRAY[a.attnum] WHERE c.contype = 'f' "
            "AND c.conrelid = %s::regclass AND a.attname = %s AND c.confrelid = %s::regclass",
            (table, col, ref.split("(")[0]),
        )
        rows = cur.fetchall()
        check(len(rows) == 1, f"exactly one foreign key {table}.{col} -> {ref} (found {len(rows)})")
        if rows:
            check(
                f" REFERENCES {ref}" in rows[0][2],
                f"{table}.{col} references {ref}, its primary key ({rows[0][2]})",
            )
            check(
                rows[0][0] == action,
                f"{table}.{col} -> {ref} has ON DELETE {names[action]} (confdeltype {rows[0][0]!r})",
            )
            check(rows[0][1], f"{table}.{col} -> {ref} is validated (not NOT VALID)")

    # every original constraint kept as it was; added: the two named ISRC constraints and the five foreign keys
    got = constraint_defs(cur)
    dropped = sorted((Counter(CONSTRAINTS) - got).elements())
    check(not dropped, f"every original constraint kept with its definition (missing or changed: {dropped[:4]})")
    cur.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'tracks_isrc_format_check' "
        "AND conrelid = 'tracks'::regclass AND contype = 'c'"
    )
    requested = [("tracks", "c", r[0]) for r in cur.fetchall()] + [("tracks", "u", "UNIQUE (isrc)")]
    added = got - Counter(CONSTRAINTS)
    for wanted in requested:
        if added[wanted]:
            added[wanted] -= 1
    for table, col, ref, _ in FKS:
        fk = next(
            (k for k in added if k[:2] == (table, "f") and k[2].startswith(f"FOREIGN KEY ({col}) REFERENCES {ref}")),
            None,
        )
        if fk is not None:
            added[fk] -= 1
    extra = sorted((+added).elements())
    check(not extra, f"no constraint other than the seven requested added (unrequested: {extra[:4]})")

    missing = sorted((Counter(INDEXES) - index_defs(cur)).elements())
    check(not missing, f"every original index kept with its definition (missing or changed: {missing[:4]})")
    bad = one(
        cur,
        "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relnamespace = 'public'::regnamespace AND NOT (i.indisvalid AND i.indisready)",
    )
    check(bad == 0, f"no invalid indexes ({bad})")


def plan_nodes(node: dict) -> list[dict]:
    out = [node]
    for child in node.get("Plans", []):
        out.extend(plan_nodes(child))
    return out


def check_plans(cur) -> None:
    for table in ("play_events", "playlist_entries", "artists", "tracks"):
        cur.execute(f"ANALYZE {table}")
    for table, lead, sql in QUERIES:
        cur.execute("EXPLAIN (FORMAT JSON) " + sql)
        raw = cur.fetchone()[0]
        nodes = plan_nodes((raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"])
        seq = [n for n in nodes if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == table]
        used = []
        for n in nodes:
            if "Index Name" in n:
                cur.execute(
                    "SELECT c.relname, pg_get_indexdef(i.indexrelid, 1, true), i.indpred IS NULL "
                    "FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid JOIN pg_class c ON c.oid = i.indrelid "
                    "WHERE x.relname = %s AND x.relnamespace = 'public'::regnamespace",
                    (n["Index Name"],),
                )
                r = cur.fetchone()
                if r and r[0] == table and r[1].replace(" ", "") == lead.replace(" ", "") and r[2]:
                    used.append(n["Index Name"])
        kinds = sorted({n["Node Type"] for n in nodes if n.get("Relation Name") == table or "Index Name" in n})
        check(
            not seq and bool(used),
            f"plan of `{sql[:60]}...` scans a non-partial index on {table}({lead}) and no Seq Scan (nodes {kinds})",
        )


def check_behaviour(cur) -> None:
    ins = "INSERT INTO tracks (track_id, album_id, title, isrc) VALUES (%s, 120, 'verify', %s)"
    for i, bad in enumerate(BAD_ISRCS):
        code = attempt(cur, ins, (990001 + i, bad))
        check(code == "23514", f"insert of malformed ISRC {bad!r} rejected by a CHECK constraint (got {code})")
    check(attempt(cur, ins, (990101, "ZZQ9A2600001")) is None, "insert of a valid unused ISRC accepted")
    check(
        attempt(cur, ins, (990102, None)) is None and attempt(cur, ins, (990103, None)) is None,
        "several tracks without ISRC accepted",
    )
    code = attempt(cur, ins, (990104, "DESNY2000006"))
    check(code == "23505", f"insert of a duplicate ISRC rejected by the unique constraint (got {code})")
    fk_cases = [
        (
            "INSERT INTO playlist_entries (playlist_id, track_id, position) VALUES (66, 9999999, 99)",
            "entry, unknown track",
        ),
        (
            "INSERT INTO playlist_entries (playlist_id, track_id, position) VALUES (9999999, 1134, 1)",
            "entry, unknown playlist",
        ),
        (
            "INSERT INTO play_events (listener_id, track_id, played_at) VALUES (19, 9999999, '2026-11-01 00:00+00')",
            "play, unknown track",
        ),
        (
            "INSERT INTO play_events (listener_id, track_id, played_at) VALUES (9999999, 1134, '2026-11-01 00:00+00')",
            "play, unknown listener",
        ),
        (
            "INSERT INTO albums (artist_id, label_id, title, album_type) VALUES (1, 9999, 'verify', 'single')",
            "album, unknown label",
        ),
    ]
    for sql, what in fk_cases:
        code = attempt(cur, sql)
        check(code == "23503", f"insert of {what} rejected by a foreign key (got {code})")
    ok = attempt(cur, "INSERT INTO play_events (listener_id, track_id, played_at) VALUES (NULL, 1134, '2026-11-01+00')")
    check(ok is None, "play without listener still accepted")

    # deletes: RESTRICT, CASCADE, SET NULL
    attempt(cur, "DELETE FROM track_artists WHERE track_id = 1134")
    code = attempt(cur, "DELETE FROM tracks WHERE track_id = 1134")
    check(code == "23503", f"deleting a track that has plays is refused (got {code})")
    unplayed = one(
        cur,
        "SELECT e.track_id FROM playlist_entries e JOIN tracks t USING (track_id) WHERE NOT EXISTS "
        "(SELECT 1 FROM play_events p WHERE p.track_id = e.track_id) ORDER BY 1 LIMIT 1",
    )
    attempt(cur, "DELETE FROM track_artists WHERE track_id = %s", (unplayed,))
    code = attempt(cur, "DELETE FROM tracks WHERE track_id = %s", (unplayed,))
    left = one(cur, "SELECT count(*) FROM playlist_entries WHERE track_id = %s", (unplayed,))
    check(code is None and left == 0, f"deleting an unplayed track removes its playlist entries ({code}, {left} left)")
    code = attempt(cur, "DELETE FROM playlists WHERE playlist_id = 66")
    left = one(cur, "SELECT count(*) FROM playlist_entries WHERE playlist_id = 66")
    check(code is None and left == 0, f"deleting a playlist removes its entries ({code}, {left} left)")
    count_sql = (
        "SELECT count(*) FILTER (WHERE listener_id = 19), count(*) FILTER (WHERE listener_id IS NULL) FROM play_events"
    )
    cur.execute(count_sql)
    mine, anonymous = cur.fetchone()
    code = attempt(cur, "DELETE FROM listeners WHERE listener_id = 19")
    cur.execute(count_sql)
    after = cur.fetchone()
    check(
        code is None and mine > 0 and after == (0, anonymous + mine),
        f"deleting a listener keeps their {mine} plays with listener_id NULL ({code}, now {after})",
    )
    label = one(cur, "SELECT label_id FROM labels WHERE name = 'Atlas Beat'")
    count_sql = "SELECT count(*) FILTER (WHERE label_id = %s), count(*) FILTER (WHERE label_id IS NULL) FROM albums"
    cur.execute(count_sql, (label,))
    mine, unlabelled = cur.fetchone()
    code = attempt(cur, "DELETE FROM labels WHERE label_id = %s", (label,))
    cur.execute(count_sql, (label,))
    after = cur.fetchone()
    check(
        code is None and mine > 0 and after == (0, unlabelled + mine),
        f"deleting a label keeps its {mine} albums with label_id NULL ({code}, now {after})",
    )


def main() -> int:
    conn = connect()
    cur = conn.cursor()
    got = digests(cur, list(COLUMNS))
    for table in COLUMNS:
        (n, d), want = got[table], EXPECTED[table]
        check(
            (n, d) == want,
            f"{table}: expected content (rows {n}, expected {want[0]}; digest "
            f"{'matches' if d == want[1] else 'differs'})",
        )
    isrcs = one(cur, "SELECT count(isrc) FROM tracks")
    check(
        isrcs == ISRC_NON_NULL,
        f"tracks with an ISRC after normalising and de-duplicating: {isrcs}, expected {ISRC_NON_NULL}",
    )
    check_catalog(cur)
    conn.commit()
    check_plans(cur)
    conn.commit()
    check_behaviour(cur)
    conn.rollback()
    conn.close()
    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
