#!/usr/bin/env python3
"""Verifier for hr/normalize_bonus_sheet.

The wide `bonuses` table is gone after the task, so its content is known here only as fixed fingerprints, counts and
sums taken from the generated initial state (tasks/postgres/states/hr.py, fixed seed): the compatibility view, the
two new tables and v_annual_bonus_totals must reproduce them exactly. Keys, cascades and the check constraint are
proven by statements inside a transaction that is rolled back.
"""

from __future__ import annotations

import os
import sys
from decimal import Decimal

import psycopg2
from psycopg2.extensions import connection, cursor

WIDE = (
    "bonus_id",
    "bonus_id, employee_id, fiscal_year, q1_amount::numeric(10,2), q2_amount::numeric(10,2), "
    "q3_amount::numeric(10,2), q4_amount::numeric(10,2), spot_amount::numeric(10,2), currency::text, approved_by, "
    "extract(epoch FROM created_at)::bigint",
)
TABLES = {
    "bonuses": WIDE,
    "bonus_awards": (
        "bonus_id",
        "bonus_id, employee_id, fiscal_year, currency::text, approved_by, extract(epoch FROM created_at)::bigint",
    ),
    "bonus_payments": ("bonus_id, period", "bonus_id, period::text, amount::numeric(10,2)"),
    "v_annual_bonus_totals": (
        "employee_id, fiscal_year, currency",
        "employee_id, fiscal_year, currency::text, total_amount::numeric(14,2), sheet_rows",
    ),
    "employees": (
        "employee_id",
        "employee_id, employee_number, first_name, last_name, preferred_name, email, "
        "hire_date, original_hire_date, department_id, job_title_id, manager_id, employment_type, status, "
        "country_code, extract(epoch FROM created_at)::bigint, extract(epoch FROM updated_at)::bigint",
    ),
    "salaries": (
        "salary_id",
        "salary_id, employee_id, amount, currency, effective_from, effective_to, change_reason, "
        "approved_by, extract(epoch FROM created_at)::bigint, extract(epoch FROM updated_at)::bigint",
    ),
}
EXPECTED_FP = {
    "bonuses": (22827, "a5090e17bf1aa8537d23449081c99558"),
    "bonus_awards": (22827, "5ec348603d60c0dd14da73b946773a03"),
    "bonus_payments": (41732, "2acfc78365bf4b8174066cfeb1dd2aff"),
    "v_annual_bonus_totals": (22795, "41bdacc1c3e2822bb302498ba4d9694c"),
    "employees": (8261, "c52beff273d587dbd405d5479d3670e7"),
    "salaries": (59450, "dc64f7ca64f18f3bd4f9ea9c5f4dba54"),
}
PERIODS = {
    "Q1": (6973, "28375793.47"),
    "Q2": (7025, "28532015.06"),
    "Q3": (5900, "24018533.89"),
    "Q4": (19114, "154309708.84"),
    "SPOT": (2720, "2824000.00"),
}
VIEW_TYPES = [
    ("bonus_id", "integer"),
    ("employee_id", "integer"),
    ("fiscal_year", "smallint"),
    ("q1_amount", "numeric(10,2)"),
    ("q2_amount", "numeric(10,2)"),
    ("q3_amount", "numeric(10,2)"),
    ("q4_amount", "numeric(10,2)"),
    ("spot_amount", "numeric(10,2)"),
    ("currency", "character(3)"),
    ("approved_by", "integer"),
    ("created_at", "timestamp with time zone"),
]
AWARD_TYPES = {
    "bonus_id": ("integer", True),
    "employee_id": ("integer", True),
    "fiscal_year": ("smallint", True),
    "currency": ("character(3)", True),
    "approved_by": ("integer", False),
    "created_at": ("timestamp with time zone", True),
}
PAYMENT_TYPES = {"bonus_id": ("integer", True), "period": ("text", True), "amount": ("numeric(10,2)", True)}
RELATIONS = dict.fromkeys(
    "bonus_awards bonus_payments departments employees exchange_rates job_titles leave_requests performance_reviews "
    "salaries terminations".split(),
    "r",
) | dict.fromkeys(["bonuses", "v_active_headcount", "v_annual_bonus_totals"], "v")

failures: list[str] = []


def check(ok: bool, msg: str) -> bool:
    if not ok:
        failures.append(msg)
        print(f"FAIL: {msg}")
    return ok


def connect() -> connection:
    db = os.environ.get("POSTGRES_DATABASE") or (sys.argv[1] if len(sys.argv) > 1 else "")
    if not db:
        print("FAIL: no database name (POSTGRES_DATABASE or argv[1])")
        sys.exit(1)
    conn = psycopg2.connect(
        host=os.environ.get("POSTGRES_HOST", "localhost"),
        port=int(os.environ.get("POSTGRES_PORT", "5432")),
        user=os.environ.get("POSTGRES_USERNAME"),
        password=os.environ.get("POSTGRES_PASSWORD"),
        dbname=db,
        # JIT compiled the views for tens of ms a query; 4 MB of work_mem sent the digests' sorts to disk. Neither
        # changes a result.
        options="-c jit=off -c work_mem=32MB",
    )
    with conn.cursor() as cur:
        cur.execute("SET datestyle = 'ISO, YMD'")  # fingerprints render dates as text
    conn.commit()
    return conn


def fingerprints(cur: cursor, tables: list[str]) -> dict[str, tuple[int, str]]:
    """(rows, md5 of the rows' text in key order) of each relation, computed by the server in one statement;
    (-1, "missing") for a relation that does not exist."""
    cur.execute("SELECT t FROM unnest(%s::text[]) t WHERE to_regclass(t) IS NOT NULL", (tables,))
    present = [r[0] for r in cur.fetchall()]
    out = dict.fromkeys(tables, (-1, "missing"))
    if present:
        cur.execute(
            " UNION ALL ".join(
                f"SELECT '{t}', count(*), md5(coalesce(string_agg(ROW({TABLES[t][1]})::text, E'\\n' "
                f"ORDER BY {TABLES[t][0]}), '')) FROM {t}"
                for t in present
            )
        )
        out.update({r[0]: (r[1], r[2]) for r in cur.fetchall()})
    return out


def columns(cur: cursor, rel: str) -> dict[str, tuple[str, bool]]:
    cur.execute(
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute WHERE attrelid = "
        "%s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        (rel,),
    )
    return {r[0]: (r[1], r[2]) for r in cur.fetchall()}


def check_structure(cur: cursor) -> bool:
    cur.execute(
        "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'p', 'f')"
    )
    rels = dict(cur.fetchall())
    for name, kind in RELATIONS.items():
        check(
            rels.get(name) == kind,
            f"{name} should be a {'view' if kind == 'v' else 'table'} (found {rels.get(name, 'nothing')!r})",
        )
    extra = sorted(set(rels) - set(RELATIONS))
    check(not extra, f"leftover tables/views (backups, scratch): {extra}")
    if not all(rels.get(n) == k for n, k in RELATIONS.items() if n.startswith("bonus")):
        return False
    view_cols = [(n, t) for n, (t, _) in columns(cur, "bonuses").items()]
    check(view_cols == VIEW_TYPES, f"view bonuses has columns {view_cols}, expected {VIEW_TYPES}")
    for rel, spec in (("bonus_awards", AWARD_TYPES), ("bonus_payments", PAYMENT_TYPES)):
        got = columns(cur, rel)
        check(set(got) == set(spec), f"{rel} has columns {sorted(got)}, expected {sorted(spec)}")
        for col, (typ, notnull) in spec.items():
            if col in got:
                check(got[col][0] == typ, f"{rel}.{col} is {got[col][0]}, expected {typ}")
                check(got[col][1] == notnull, f"{rel}.{col} should {'' if notnull else 'not '}be NOT NULL")
    cur.execute(
        "SELECT conrelid::regclass::text, contype, confrelid::regclass::text, confdeltype, "
        "(SELECT array_agg(attname::text ORDER BY attname) FROM pg_attribute WHERE attrelid = conrelid "
        "AND attnum = ANY(conkey)) FROM pg_constraint WHERE conrelid IN ('bonus_awards'::regclass, "
        "'bonus_payments'::regclass)"
    )
    cons = cur.fetchall()
    has = {(r[0], r[1], r[2] if r[1] == "f" else None, tuple(r[4])): r[3] for r in cons}
    check(("bonus_awards", "p", None, ("bonus_id",)) in has, "bonus_awards needs PRIMARY KEY (bonus_id)")
    check(
        ("bonus_payments", "p", None, ("bonus_id", "period")) in has,
        "bonus_payments needs PRIMARY KEY (bonus_id, period)",
    )
    check(
        ("bonus_awards", "f", "employees", ("employee_id",)) in has, "bonus_awards.employee_id needs a FK to employees"
    )
    check(
        ("bonus_awards", "f", "employees", ("approved_by",)) in has, "bonus_awards.approved_by needs a FK to employees"
    )
    check(
        has.get(("bonus_payments", "f", "bonus_awards", ("bonus_id",))) == "c",
        "bonus_payments.bonus_id needs a FK to bonus_awards with ON DELETE CASCADE",
    )
    check(
        any(r[0] == "bonus_payments" and r[1] == "c" and "period" in (r[4] or []) for r in cons),
        "bonus_payments needs a CHECK on period",
    )
    cur.execute(  # any name, any further keys; but it must serve every lookup by employee: valid, not partial
        "SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
        "WHERE i.indrelid = 'bonus_awards'::regclass AND a.attname = 'employee_id' AND i.indpred IS NULL "
        "AND i.indisvalid"
    )
    check(cur.fetchone() is not None, "bonus_awards has no valid, non-partial index led by employee_id")
    return True


def check_data(cur: cursor) -> None:
    rels = ["bonuses", "bonus_awards", "bonus_payments", "v_annual_bonus_totals", "employees", "salaries"]
    fps = fingerprints(cur, rels)
    for rel in rels:
        got = fps[rel]
        if check(got[0] >= 0, f"{rel} is missing"):
            check(
                got == EXPECTED_FP[rel],
                f"{rel}: {got[0]} rows, content differs from the original data"
                if got[0] == EXPECTED_FP[rel][0]
                else f"{rel}: {got[0]} rows, expected {EXPECTED_FP[rel][0]}",
            )
    cur.execute("SELECT period, count(*), sum(amount) FROM bonus_payments GROUP BY period")
    got = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
    for period, (n, total) in PERIODS.items():
        check(
            got.get(period) == (n, Decimal(total)),
            f"period {period}: (count, sum) = {got.get(period)}, expected ({n}, {total})",
        )


def attempt(cur: cursor, sql: str, expect: str | None, what: str) -> None:
    cur.execute("SAVEPOINT t")
    try:
        cur.execute(sql)
        state = None
    except psycopg2.Error as exc:
        state = exc.pgcode
    cur.execute("ROLLBACK TO SAVEPOINT t")
    check(state == expect, f"{what}: expected {expect or 'success'}, got {state or 'success'}")


def check_behaviour(conn: connection) -> None:
    cur = conn.cursor()
    cur.execute(
        "SELECT min(bonus_id) FROM bonus_awards a WHERE (SELECT count(*) FROM bonus_payments p "
        "WHERE p.bonus_id = a.bonus_id) >= 2"
    )
    award = cur.fetchone()[0]
    attempt(
        cur,
        f"INSERT INTO bonus_payments (bonus_id, period, amount) VALUES ({award}, 'Q5', 10)",
        "23514",
        "a payment for period 'Q5'",
    )
    for bad in ("q1", "Spot", "Q1 ", "Q0", ""):  # the CHECK allows exactly the five codes, as written
        attempt(
            cur,
            f"INSERT INTO bonus_payments (bonus_id, period, amount) VALUES ({award}, '{bad}', 10)",
            "23514",
            f"a payment for period {bad!r}",
        )
    attempt(
        cur,
        "INSERT INTO bonus_payments (bonus_id, period, amount) VALUES (-1, 'Q1', 10)",
        "23503",
        "a payment for a missing award",
    )
    attempt(
        cur,
        "INSERT INTO bonus_awards (bonus_id, employee_id, fiscal_year, currency, created_at) "
        "VALUES (990001, -5, 2026, 'USD', '2026-10-01 00:00:00+00')",
        "23503",
        "an award for a missing employee",
    )
    cur.execute(f"SELECT period FROM bonus_payments WHERE bonus_id = {award} LIMIT 1")
    attempt(
        cur,
        f"INSERT INTO bonus_payments (bonus_id, period, amount) VALUES ({award}, '{cur.fetchone()[0]}', 1)",
        "23505",
        "a second payment for the same award and period",
    )
    cur.execute(f"DELETE FROM bonus_awards WHERE bonus_id = {award}")
    cur.execute(f"SELECT count(*) FROM bonus_payments WHERE bonus_id = {award}")
    check(cur.fetchone()[0] == 0, "deleting an award did not delete its payments")
    cur.execute(
        "INSERT INTO bonus_awards (bonus_id, employee_id, fiscal_year, currency, approved_by, created_at) "
        "VALUES (990002, 1009, 2027, 'EUR', NULL, '2027-01-15 08:00:00+00'), "
        "(990003, 1010, 2027, 'USD', 1009, '2027-01-16 08:00:00+00')"
    )
    cur.execute(
        "INSERT INTO bonus_payments (bonus_id, period, amount) VALUES (990002, 'Q2', 12.5), "
        "(990002, 'SPOT', 0), (990002, 'Q4', -250)"
    )
    cur.execute(
        "SELECT bonus_id, employee_id, fiscal_year, q1_amount, q2_amount, q3_amount, q4_amount, spot_amount, "
        "currency, approved_by FROM bonuses WHERE bonus_id >= 990000 ORDER BY bonus_id"
    )
    check(
        cur.fetchall()
        == [
            (990002, 1009, 2027, None, Decimal("12.50"), None, Decimal("-250.00"), Decimal("0.00"), "EUR", None),
            (990003, 1010, 2027, None, None, None, None, None, "USD", 1009),
        ],
        "view bonuses does not show newly inserted awards/payments correctly (it must read the new tables)",
    )
    cur.execute(
        "SELECT total_amount, sheet_rows FROM v_annual_bonus_totals WHERE employee_id = 1009 AND fiscal_year = 2027"
    )
    check(cur.fetchall() == [(Decimal("-237.50"), 1)], "v_annual_bonus_totals does not reflect new payments")
    conn.rollback()


def main() -> int:
    conn = connect()
    with conn.cursor() as cur:
        ok = check_structure(cur)
        if ok:
            check_data(cur)
    conn.rollback()
    if ok:
        try:
            check_behaviour(conn)
        except psycopg2.Error as exc:
            check(False, f"working with the new tables failed: {exc.pgerror or exc}")
    conn.close()
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("PASS: bonus sheet normalised without losing a row, with a faithful compatibility view")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except psycopg2.Error as exc:  # e.g. a column the checks rely on was dropped or renamed
        print(f"FAIL: database error while verifying: {(exc.pgerror or str(exc)).strip()}")
        sys.exit(1)
