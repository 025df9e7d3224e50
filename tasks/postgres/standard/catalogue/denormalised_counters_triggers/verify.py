#!/usr/bin/env python3
"""Verifier for catalogue/denormalised_counters_triggers.

The counters are compared, for every album and artist, with a recomputation from the source tables
(tracks, play_events, albums), first as left by the agent (the backfill) and then after each step of a
scripted sequence of inserts, updates and deletes that runs in one transaction and is rolled back.

The recomputation is a table of true counts kept by the verifier inside that transaction: built by full
aggregates before the first step, then, after each step, recounted from the source tables for every album
and artist whose true count may have changed, and compared with the counters of all albums and artists.
Which ones may have changed is logged by the verifier's own statement-level triggers (transition tables)
on tracks, play_events, albums and artists, which see every row any statement of the step touched, the
agent's triggers' statements included: the tracks and plays touched, the albums they were or are on, and
the artists those albums, and albums whose artist changed, belonged to. A count outside that set cannot
have changed, so every album and artist is still compared with an exact fresh count after every step, at
the cost of recounting a handful (a TRUNCATE, which no step runs, would recount everything). One full
recount after the last step catches a trigger that disabled the verifier's own to change data unseen.

Pinned md5 digests of the source rows' canonical text (computed from the state generator's rows, seed
20261123, by the server in one statement) prove that the agent changed no source data, and the schema
check that only the three requested columns were added.
"""

from __future__ import annotations

import os
import sys

import psycopg2

SOURCES = {
    "artists": (
        "artist_id, name, country, formed_year, created_at",
        "artist_id",
        1488,
        "5cad70cc9431018fe92c506087a3ac4a",
    ),
    "albums": (
        "album_id, artist_id, label_id, title, album_type, release_date, upc",
        "album_id",
        2767,
        "4c47429511af70cbe03adb9c03359bc0",
    ),
    "tracks": (
        "track_id, album_id, disc_number, track_number, title, duration_ms, isrc, genre_id, explicit",
        "track_id",
        22235,
        "8e42e6c041f05d6574acdb51d87a42af",
    ),
    "track_artists": ("track_id, artist_id, role", "track_id, artist_id", 25024, "ac52e0de2b05e3ee73f47c13869f25ca"),
    "play_events": (
        "play_id, listener_id, track_id, played_at, ms_played, source, country",
        "play_id",
        61448,
        "e4408dcd932df74b295fcda9eb79b4df",
    ),
    "playlist_entries": (
        "entry_id, playlist_id, track_id, position, added_at",
        "entry_id",
        14718,
        "6790920df0afc03859df2049f05776a3",
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
DIGEST_SETTINGS = (  # the text form of dates and times must not depend on the session
    "SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; SET LOCAL IntervalStyle = 'postgres'; "
    "SET LOCAL extra_float_digits = 1"
)
STALE_ALBUMS = """
SELECT a.album_id, a.track_count, a.total_duration_ms, coalesce(s.n, 0), coalesce(s.d, 0)
FROM albums a LEFT JOIN (SELECT album_id, count(*) AS n, sum(coalesce(duration_ms, 0)) AS d
                         FROM tracks GROUP BY album_id) s ON s.album_id = a.album_id
WHERE a.track_count IS DISTINCT FROM coalesce(s.n, 0) OR a.total_duration_ms IS DISTINCT FROM coalesce(s.d, 0)
ORDER BY a.album_id"""
STALE_ARTISTS = """
SELECT ar.artist_id, ar.play_count, coalesce(s.n, 0)
FROM artists ar LEFT JOIN (SELECT al.artist_id, sum(p.n)::bigint AS n
                           FROM (SELECT track_id, count(*) AS n FROM play_events GROUP BY track_id) p
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
        # JIT compiled the views for tens of ms a query; 4 MB of work_mem sent the digests' sorts to disk. Neither
        # changes a result.
        options="-c jit=off -c work_mem=32MB",
    )


def digests(cur, tables: list[str]) -> dict[str, tuple[int, str]]:
    """(rows, md5 of the rows' text in key order) of each table's listed columns, computed by the server in one
    statement; the session settings it needs are undone afterwards (a savepoint)."""
    query = " UNION ALL ".join(
        f"SELECT '{t}', count(*), md5(coalesce(string_agg(r::text, E'\\n' ORDER BY {SOURCES[t][1]}), '')) "
        f"FROM (SELECT {SOURCES[t][0]} FROM {t}) r"
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


def consistent(cur, when: str, stale: tuple[str, str] = (STALE_ALBUMS, STALE_ARTISTS)) -> bool:
    """Every album's and artist's counters against the true counts: recomputed by full aggregates (the default)
    or kept in the verifier's truth tables (TRUTH_STALE)."""
    cur.execute(stale[0])
    albums = cur.fetchall()
    cur.execute(stale[1])
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


# The true counts, kept in temporary tables of the test transaction (gone with its rollback): built in full,
# then refreshed after each step for the albums and artists in the step's dirty set.
TRUTH_SETUP = """
CREATE TEMP TABLE verify_album_truth AS
    SELECT album_id, count(*) AS n, sum(coalesce(duration_ms, 0)) AS d FROM tracks
    WHERE album_id IS NOT NULL GROUP BY album_id;
CREATE TEMP TABLE verify_track_plays AS SELECT track_id, count(*) AS n FROM play_events GROUP BY track_id;
CREATE TEMP TABLE verify_artist_truth AS
    SELECT al.artist_id, sum(p.n)::bigint AS n FROM verify_track_plays p
    JOIN tracks t ON t.track_id = p.track_id JOIN albums al ON al.album_id = t.album_id
    GROUP BY al.artist_id;
CREATE TEMP TABLE verify_dirty (kind text NOT NULL, id bigint);
CREATE TEMP TABLE verify_keys (kind text NOT NULL, id bigint NOT NULL);
CREATE INDEX verify_counters_play_track ON play_events (track_id);
"""
TRUTH_STALE = (
    """
SELECT a.album_id, a.track_count, a.total_duration_ms, coalesce(s.n, 0), coalesce(s.d, 0)
FROM albums a LEFT JOIN verify_album_truth s ON s.album_id = a.album_id
WHERE a.track_count IS DISTINCT FROM coalesce(s.n, 0) OR a.total_duration_ms IS DISTINCT FROM coalesce(s.d, 0)
ORDER BY a.album_id""",
    """
SELECT ar.artist_id, ar.play_count, coalesce(s.n, 0)
FROM artists ar LEFT JOIN verify_artist_truth s ON s.artist_id = ar.artist_id
WHERE ar.play_count IS DISTINCT FROM coalesce(s.n, 0)
ORDER BY ar.artist_id""",
)
# What each logging trigger records of the rows a statement touched (before and after images): for tracks, the
# track and its album; for play_events, the track; for albums, the album and its artist; for artists, the artist.
LOGGED = {
    "tracks": "SELECT 'track', track_id FROM {rows} UNION ALL SELECT 'album', album_id FROM {rows}",
    "play_events": "SELECT 'track', track_id FROM {rows}",
    "albums": "SELECT 'album', album_id FROM {rows} UNION ALL SELECT 'artist', artist_id FROM {rows}",
    "artists": "SELECT 'artist', artist_id FROM {rows}",
}
LOG_FUNCTION = """
CREATE FUNCTION pg_temp.verify_log_{table}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO verify_dirty VALUES ('all', NULL);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO verify_dirty {old};
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO verify_dirty {new};
    END IF;
    RETURN NULL;
END $fn$;
CREATE TRIGGER verify_counters_log_i AFTER INSERT ON {table} REFERENCING NEW TABLE AS verify_new
    FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.verify_log_{table}();
CREATE TRIGGER verify_counters_log_u AFTER UPDATE ON {table} REFERENCING OLD TABLE AS verify_old
    NEW TABLE AS verify_new FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.verify_log_{table}();
CREATE TRIGGER verify_counters_log_d AFTER DELETE ON {table} REFERENCING OLD TABLE AS verify_old
    FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.verify_log_{table}();
CREATE TRIGGER verify_counters_log_t AFTER TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.verify_log_{table}();
"""
# After a step: the albums and artists whose true count may have changed (the logged albums and artists, the
# current albums of the logged tracks, the current artists of all those albums), recounted from the source
# tables. The log is then emptied for the next step.
REFRESH = """
DELETE FROM verify_keys;
INSERT INTO verify_keys SELECT DISTINCT kind, id FROM verify_dirty WHERE kind IN ('album', 'artist') AND id IS NOT NULL;
INSERT INTO verify_keys SELECT DISTINCT 'album', t.album_id FROM tracks t
    WHERE t.album_id IS NOT NULL AND t.track_id IN (SELECT id FROM verify_dirty WHERE kind = 'track');
INSERT INTO verify_keys SELECT DISTINCT 'artist', al.artist_id FROM albums al
    WHERE al.album_id IN (SELECT id FROM verify_keys WHERE kind = 'album');
DELETE FROM verify_album_truth WHERE album_id IN (SELECT id FROM verify_keys WHERE kind = 'album');
INSERT INTO verify_album_truth
    SELECT album_id, count(*), sum(coalesce(duration_ms, 0)) FROM tracks
    WHERE album_id IN (SELECT id FROM verify_keys WHERE kind = 'album') GROUP BY album_id;
DELETE FROM verify_artist_truth WHERE artist_id IN (SELECT id FROM verify_keys WHERE kind = 'artist');
INSERT INTO verify_artist_truth
    SELECT al.artist_id, count(*) FROM play_events p
    JOIN tracks t ON t.track_id = p.track_id JOIN albums al ON al.album_id = t.album_id
    WHERE al.artist_id IN (SELECT id FROM verify_keys WHERE kind = 'artist') GROUP BY al.artist_id;
DELETE FROM verify_dirty;
"""
# A logged TRUNCATE (which no step runs) recounts everything.
REBUILD = (
    """
DROP TABLE verify_album_truth, verify_track_plays, verify_artist_truth, verify_dirty, verify_keys;
DROP INDEX verify_counters_play_track;
"""
    + TRUTH_SETUP
)


def refresh_truth(cur) -> None:
    cur.execute("SELECT EXISTS (SELECT 1 FROM verify_dirty WHERE kind = 'all')")
    cur.execute(REBUILD if cur.fetchone()[0] else REFRESH)


def start_truth(cur) -> None:
    """The truth tables and the logging triggers, inside the test transaction."""
    cur.execute(TRUTH_SETUP)
    for table, logged in LOGGED.items():
        cur.execute(
            LOG_FUNCTION.format(table=table, old=logged.format(rows="verify_old"), new=logged.format(rows="verify_new"))
        )


def pick_ids(cur) -> dict[str, int]:
    """Deterministic test subjects: played tracks on albums of distinct artists, a draft, an orphan."""
    cur.execute(  # plays per track as they were before the first step (start_truth)
        "SELECT t.track_id, al.album_id, al.artist_id FROM verify_track_plays p "
        "JOIN tracks t ON t.track_id = p.track_id JOIN albums al ON al.album_id = t.album_id WHERE p.n >= 6 ORDER BY 1"
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
    got = digests(cur, list(SOURCES))
    for table, (_, _, n_want, d_want) in SOURCES.items():
        n, d = got[table]
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
    start_truth(cur)
    consistent(cur, "backfill", TRUTH_STALE)
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
        refresh_truth(cur)
        consistent(cur, f"after '{what}'", TRUTH_STALE)
    # A change the log cannot have missed, unless a trigger disabled the verifier's (session_replication_role,
    # ALTER TABLE ... DISABLE TRIGGER): one full recount after the last step catches that too.
    consistent(cur, "after the last step, by a full recount")
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
