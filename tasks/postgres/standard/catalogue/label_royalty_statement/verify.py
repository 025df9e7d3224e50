#!/usr/bin/env python3
"""Verifier for catalogue/label_royalty_statement.

The expected statement is recomputed here, by a query of the verifier's own with exact numerics, from the
raw source tables (play_events, tracks, albums, labels, label_contracts, contract_rate_tiers), which the
task must not change, nor any other table (pinned md5 digests of every catalogue table's rows' canonical
text, computed server-side, prove that).
The agent's `royalty_statement(date)` is then compared for several months (so a hard-coded October fails),
under a far-off session time zone (months are UTC), and after a rolled-back insert of one extra play and
one duplicate play (so a function that ignores the data or double-counts duplicates fails); the tables must be
unchanged after the calls (the function must not modify data, even in a transaction that is rolled back). The reported
October total and top label are read from MCP_MESSAGES.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import psycopg2

# Every table of the catalogue: the six the statement reads, then the rest, none of which the task may change.
SOURCES = {  # table: (columns, key order, rows, md5 of the rows' text) of the untouched state
    "labels": ("label_id, name, country, founded_year", "label_id", 36, "88b25f48908edbfcb772365a9b13bd99"),
    "label_contracts": (
        "contract_id, label_id, valid_from, valid_to, min_ms_played",
        "contract_id",
        55,
        "59f10acf1b26b2a4e64bd147f1f89203",
    ),
    "contract_rate_tiers": (
        "contract_id, from_play, rate_per_play",
        "contract_id, from_play",
        78,
        "2adac4e0f11feab3e8b7606831875562",
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
    "play_events": (
        "play_id, listener_id, track_id, played_at, ms_played, source, country",
        "play_id",
        61448,
        "e4408dcd932df74b295fcda9eb79b4df",
    ),
    "genres": ("genre_id, name, parent_genre_id", "genre_id", 30, "465a8bb0f832671cd5ef1aa967920545"),
    "artists": (
        "artist_id, name, country, formed_year, created_at",
        "artist_id",
        1488,
        "5cad70cc9431018fe92c506087a3ac4a",
    ),
    "track_artists": ("track_id, artist_id, role", "track_id, artist_id", 25024, "ac52e0de2b05e3ee73f47c13869f25ca"),
    "listeners": (
        "listener_id, username, email, country, birth_year, signed_up_at",
        "listener_id",
        4050,
        "e1cd000d6a6d7880f21bed91648792ab",
    ),
    "subscriptions": (
        "subscription_id, listener_id, plan, started_at, ended_at",
        "subscription_id",
        4920,
        "41f7de13a443db079305c387a7d65e66",
    ),
    "playlists": (
        "playlist_id, owner_id, name, is_public, created_at",
        "playlist_id",
        700,
        "aae63b249931cfc275c486f9be1d5f16",
    ),
    "playlist_entries": (
        "entry_id, playlist_id, track_id, position, added_at",
        "entry_id",
        14718,
        "6790920df0afc03859df2049f05776a3",
    ),
}
READS = ("labels", "label_contracts", "contract_rate_tiers", "albums", "tracks", "play_events")
MONTHS = [date(2026, 10, 1), date(2026, 9, 1), date(2026, 8, 1), date(2026, 11, 1), date(2027, 1, 1)]
COLUMNS = ["label_id", "label_name", "qualifying_plays", "royalty_usd"]
# The declared result columns (RETURNS TABLE or OUT parameters, else the returned composite type's attributes).
RESULT = ["label_id integer", "label_name text", "qualifying_plays bigint", "royalty_usd numeric"]
RESULT_SQL = """
SELECT coalesce(
    (SELECT array_agg(a.n || ' ' || format_type(a.t, NULL) ORDER BY a.i)
     FROM unnest(p.proallargtypes, p.proargmodes::text[], p.proargnames) WITH ORDINALITY AS a (t, m, n, i)
     WHERE a.m IN ('o', 't')),
    (SELECT array_agg(attname || ' ' || format_type(atttypid, NULL) ORDER BY attnum) FROM pg_attribute
     WHERE attrelid = (SELECT typrelid FROM pg_type WHERE oid = p.prorettype) AND attnum > 0 AND NOT attisdropped))
FROM pg_proc p WHERE p.proname = 'royalty_statement' AND p.pronamespace = 'public'::regnamespace
  AND pg_get_function_identity_arguments(p.oid) ~ '^(\\w+ )?date$'
"""
# The statement for one month (its first and last day, its UTC bounds lo and hi), from the raw rows: the
# contract in force all month, the month's plays deduplicated on (listener_id, track_id, played_at) (NULLs
# equal; the first row by play_id stands for its duplicates, which all have the same ms_played here), the
# qualifying ones counted per label, and the marginal tiers summed exactly: tier [from_play, next from_play
# - 1] pays its rate for each of the plays 1..n that fall in it. Rounded once, half away from zero (as
# ROUND_HALF_UP on these positive sums). One query per month: the plays are most of the work, and a query
# over several months at once is no cheaper.
EXPECTED_SQL = """
WITH contracts AS (
    SELECT DISTINCT ON (c.label_id) c.label_id, c.contract_id, c.min_ms_played
    FROM label_contracts c
    WHERE c.valid_from <= %(first)s AND (c.valid_to IS NULL OR c.valid_to >= %(last)s)
    ORDER BY c.label_id, c.contract_id DESC
), plays AS (
    SELECT DISTINCT ON (p.listener_id, p.track_id, p.played_at) p.ms_played, a.label_id
    FROM play_events p JOIN tracks t ON t.track_id = p.track_id JOIN albums a ON a.album_id = t.album_id
    WHERE p.played_at >= %(lo)s AND p.played_at < %(hi)s
    ORDER BY p.listener_id, p.track_id, p.played_at, p.play_id
), counted AS (
    SELECT c.label_id, c.contract_id, count(p.label_id) AS n
    FROM contracts c LEFT JOIN plays p ON p.label_id = c.label_id AND p.ms_played >= c.min_ms_played
    GROUP BY c.label_id, c.contract_id
), tiers AS (
    SELECT contract_id, from_play, rate_per_play,
           lead(from_play) OVER (PARTITION BY contract_id ORDER BY from_play) - 1 AS to_play
    FROM contract_rate_tiers
)
SELECT n.label_id, l.name, n.n,
       round(coalesce(sum(t.rate_per_play * greatest(0, least(n.n, coalesce(t.to_play, n.n)) - t.from_play + 1)),
                      0), 2) AS royalty
FROM counted n JOIN labels l ON l.label_id = n.label_id LEFT JOIN tiers t ON t.contract_id = n.contract_id
GROUP BY n.label_id, l.name, n.n
ORDER BY royalty DESC, n.label_id
"""
DIGEST_SETTINGS = (  # the text form of dates and times must not depend on the session
    "SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; SET LOCAL IntervalStyle = 'postgres'; "
    "SET LOCAL extra_float_digits = 1"
)

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


def next_month(d: date) -> date:
    return date(d.year + d.month // 12, d.month % 12 + 1, 1)


def expected(cur, month: date) -> list[tuple]:
    """Statement for `month` (its first day), computed from the raw rows (one query, exact numerics)."""
    nm = next_month(month)
    bounds = {
        "first": month,
        "last": date.fromordinal(nm.toordinal() - 1),
        "lo": datetime(month.year, month.month, 1, tzinfo=UTC),
        "hi": datetime(nm.year, nm.month, 1, tzinfo=UTC),
    }
    cur.execute(EXPECTED_SQL, bounds)
    return [tuple(r) for r in cur.fetchall()]


def actual(cur, month: date) -> tuple[list[tuple] | None, str]:
    cur.execute("SAVEPOINT s")
    try:
        cur.execute("SELECT * FROM royalty_statement(%s::date)", (month,))
        cols = [d[0] for d in cur.description]
        rows = cur.fetchall()
        cur.execute("RELEASE SAVEPOINT s")
    except psycopg2.Error as exc:
        cur.execute("ROLLBACK TO SAVEPOINT s")
        return None, f"error: {str(exc).strip()[:200]}"
    if cols != COLUMNS:
        return None, f"columns {cols}, expected {COLUMNS}"
    bad = [r for r in rows if not isinstance(r[3], Decimal) or not isinstance(r[2], int)]
    if bad:
        return None, f"qualifying_plays must be an integer and royalty_usd numeric (got {bad[0]})"
    return [tuple(r) for r in rows], ""


def compare(cur, month: date, exp: list[tuple], what: str) -> None:
    got, err = actual(cur, month)
    if not check(got is not None, f"{what}: royalty_statement('{month}') runs and returns {COLUMNS} ({err})"):
        return
    if got == exp:
        check(True, f"{what}: {len(exp)} label rows exactly as expected, in order")
        return
    diff = [f"{e} vs got {g}" for e, g in zip(exp, got, strict=False) if e != g][:3]
    if sorted(got, key=lambda r: r[0]) == sorted(exp, key=lambda r: r[0]):
        diff = ["rows right, order wrong (royalty_usd DESC, label_id)"]
    check(False, f"{what}: {len(got)} rows, expected {len(exp)}; first differences: {diff}")


def final_answer() -> str:
    path = os.environ.get("MCP_MESSAGES", "")
    try:
        items = json.loads(Path(path).read_text(encoding="utf-8")) if path else []
    except (OSError, ValueError):
        return ""
    for item in reversed(items if isinstance(items, list) else []):
        if (
            isinstance(item, dict)
            and item.get("type") == "message"
            and item.get("role") == "assistant"
            and item.get("status") == "completed"
        ):
            parts = item.get("content") or []
            return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "output_text")
    return ""


def main() -> int:
    conn = connect()
    cur = conn.cursor()
    got = digests(cur, list(SOURCES))
    for table, (_, _, n_want, d_want) in SOURCES.items():
        n, d = got[table]
        what = "source table" if table in READS else "table"
        check((n, d) == (n_want, d_want), f"{what} {table} unchanged (rows {n}, expected {n_want})")
    cur.execute(
        "SELECT count(*) FROM pg_proc WHERE proname = 'royalty_statement' "
        "AND pronamespace = 'public'::regnamespace AND pg_get_function_identity_arguments(oid) ~ '^(\\w+ )?date$'"
    )
    if not check(cur.fetchone()[0] == 1, "function public.royalty_statement(p_month date) exists"):
        return finish()
    cur.execute(RESULT_SQL)
    declared = cur.fetchone()[0]
    check(declared == RESULT, f"royalty_statement returns a table ({', '.join(RESULT)}) (declared: {declared})")

    october = expected(cur, MONTHS[0])
    for month in MONTHS:
        compare(cur, month, october if month == MONTHS[0] else expected(cur, month), f"{month:%Y-%m}")
    compare(cur, date(2026, 10, 17), october, "any day of the month (2026-10-17)")
    cur.execute("SET LOCAL TimeZone = 'Pacific/Kiritimati'")
    compare(cur, MONTHS[0], october, "October under session TimeZone Pacific/Kiritimati (+14)")
    # the calls above run in a transaction that is rolled back, so a function that writes (deletes the loader's
    # duplicates, say) would leave no trace: compare every table with its state before the first call
    after = digests(cur, list(SOURCES))
    changed = sorted(t for t in SOURCES if after[t] != got[t])
    check(not changed, f"calling royalty_statement modifies no data (changed: {changed or 'none'})")
    conn.rollback()

    # the function must read the data: one new qualifying play, one duplicate of an existing play
    cur.execute(
        "SELECT p.track_id, p.played_at FROM play_events p JOIN tracks t USING (track_id) "
        "JOIN albums a USING (album_id) JOIN labels l USING (label_id) WHERE l.name = 'Northbound Records' "
        "AND p.listener_id IS NULL AND p.played_at >= '2026-10-01 00:00+00' AND p.played_at < '2026-11-01 00:00+00' "
        "AND p.ms_played >= 60000 ORDER BY p.play_id LIMIT 1"
    )
    track, played = cur.fetchone()
    cur.execute(
        "INSERT INTO play_events (play_id, listener_id, track_id, played_at, ms_played) VALUES "
        "(990001, NULL, %s, %s, 61000), (990002, 4, %s, '2026-10-31 23:59:59.5+00', 240000)",
        (track, played, track),
    )
    compare(cur, MONTHS[0], expected(cur, MONTHS[0]), "after adding a duplicate and a new October play")
    conn.rollback()

    # reported answer
    total = sum((r[3] for r in october), Decimal(0))
    top = october[0][1]
    text = final_answer()
    m = re.search(r"TOTAL_USD:\s*\$?\s*([0-9][0-9,]*\.[0-9]{2})\b", text)
    got_total = Decimal(m.group(1).replace(",", "")) if m else None
    check(got_total == total, f"reported TOTAL_USD {got_total} equals the October 2026 total {total}")
    m = re.search(r"TOP_LABEL:\s*(.+)", text)
    got_top = m.group(1).strip().strip("`*\"'.") if m else None
    check(got_top == top, f"reported TOP_LABEL {got_top!r} equals {top!r}")
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
