#!/usr/bin/env python3
"""Verifier for catalogue/label_royalty_statement.

The expected statement is recomputed here, in Python with exact decimals, from the raw source tables
(play_events, tracks, albums, labels, label_contracts, contract_rate_tiers), which the task must not
change (pinned digests prove that). The agent's `royalty_statement(date)` is then compared for several
months (so a hard-coded October fails), under a far-off session time zone (months are UTC), and after a
rolled-back insert of one extra play and one duplicate play (so a function that ignores the data or
double-counts duplicates fails). The reported October total and top label are read from MCP_MESSAGES.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import psycopg2

SOURCES = {
    "labels": ("label_id, name, country, founded_year", "label_id", 36, "164f42a8f5bf7d3d47a4"),
    "label_contracts": (
        "contract_id, label_id, valid_from, valid_to, min_ms_played",
        "contract_id",
        55,
        "8bb5f874cbe7acdfa870",
    ),
    "contract_rate_tiers": (
        "contract_id, from_play, rate_per_play",
        "contract_id, from_play",
        78,
        "1edda101c95fe1c37d44",
    ),
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
    "play_events": (
        "play_id, listener_id, track_id, played_at, ms_played, source, country",
        "play_id",
        61448,
        "2d7610ad5b40160e00b7",
    ),
}
MONTHS = [date(2026, 10, 1), date(2026, 9, 1), date(2026, 8, 1), date(2026, 11, 1), date(2027, 1, 1)]
COLUMNS = ["label_id", "label_name", "qualifying_plays", "royalty_usd"]
CENT = Decimal("0.01")

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


def next_month(d: date) -> date:
    return date(d.year + d.month // 12, d.month % 12 + 1, 1)


def expected(cur, month: date) -> list[tuple]:
    """Statement for `month`, computed from raw rows with exact decimals."""
    last = date.fromordinal(next_month(month).toordinal() - 1)
    cur.execute("SELECT label_id, name FROM labels")
    names = dict(cur.fetchall())
    cur.execute("SELECT contract_id, label_id, valid_from, valid_to, min_ms_played FROM label_contracts")
    contracts = {}
    for cid, lid, start, end, min_ms in cur.fetchall():
        if start <= month and (end is None or end >= last):
            contracts[lid] = (cid, min_ms)
    cur.execute("SELECT contract_id, from_play, rate_per_play FROM contract_rate_tiers ORDER BY contract_id, from_play")
    tiers: dict[int, list[tuple[int, Decimal]]] = {}
    for cid, start, rate in cur.fetchall():
        tiers.setdefault(cid, []).append((start, rate))
    lo = datetime(month.year, month.month, 1, tzinfo=UTC)
    nm = next_month(month)
    hi = datetime(nm.year, nm.month, 1, tzinfo=UTC)
    cur.execute(
        "SELECT p.listener_id, p.track_id, p.played_at, p.ms_played, a.label_id FROM play_events p "
        "JOIN tracks t ON t.track_id = p.track_id JOIN albums a ON a.album_id = t.album_id "
        "WHERE p.played_at >= %s AND p.played_at < %s",
        (lo, hi),
    )
    seen: set[tuple] = set()
    counts = dict.fromkeys(contracts, 0)
    for listener, track, played, ms, label in cur.fetchall():
        key = (listener, track, played)
        if key in seen:
            continue
        seen.add(key)
        if label in contracts and ms is not None and ms >= contracts[label][1]:
            counts[label] += 1
    rows = []
    for lid, (cid, _) in contracts.items():
        n, amount = counts[lid], Decimal(0)
        for play in range(1, n + 1):
            amount += max((t for t in tiers[cid] if t[0] <= play), key=lambda t: t[0])[1]
        rows.append((lid, names[lid], n, amount.quantize(CENT, rounding=ROUND_HALF_UP)))
    rows.sort(key=lambda r: (-r[3], r[0]))
    return rows


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
    for table, (cols, order, n_want, d_want) in SOURCES.items():
        n, d = digest(cur, cols, table, order)
        check((n, d) == (n_want, d_want), f"source table {table} unchanged (rows {n}, expected {n_want})")
    cur.execute(
        "SELECT count(*) FROM pg_proc WHERE proname = 'royalty_statement' "
        "AND pronamespace = 'public'::regnamespace AND pg_get_function_identity_arguments(oid) ~ '^(\\w+ )?date$'"
    )
    if not check(cur.fetchone()[0] == 1, "function public.royalty_statement(p_month date) exists"):
        return finish()

    october = expected(cur, MONTHS[0])
    for month in MONTHS:
        compare(cur, month, october if month == MONTHS[0] else expected(cur, month), f"{month:%Y-%m}")
    compare(cur, date(2026, 10, 17), october, "any day of the month (2026-10-17)")
    cur.execute("SET LOCAL TimeZone = 'Pacific/Kiritimati'")
    compare(cur, MONTHS[0], october, "October under session TimeZone Pacific/Kiritimati (+14)")
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
