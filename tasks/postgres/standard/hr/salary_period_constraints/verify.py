#!/usr/bin/env python3
"""Verifier for hr/salary_period_constraints.

The expected clean-up (which rows are deleted, which get a new effective_to or currency) and fingerprints of every
row that must stay untouched were derived from the generated initial state (tasks/postgres/states/hr.py, fixed seed)
by applying the description's rules independently of any solution. The constraints are then proven by inserts that
must fail or succeed, inside a transaction that is rolled back. No salaries row had an updated_at stamp before, so
every corrected row must carry one (the kept trigger stamped it), and the trigger must still stamp an UPDATE.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import psycopg2
from psycopg2.extensions import connection, cursor

DELETED = {
    100105,
    102219,
    112432,
    112498,
    119284,
    123421,
    123796,
    134022,
    152440,
    152827,
    153313,
    153638,
    155060,
    155177,
    155579,
    156485,
}
CHANGES_SPEC = """
100071:2010-03-31:EUR 100463:2012-03-26:EUR 100581:2012-03-31:USD 100677:2011-07-27:USD 100966:2012-03-31:USD
101112:2012-03-31:GBP 101874:2013-03-31:USD 101988:2013-03-31:USD 102019:2013-03-31:GBP 102808:2014-03-31:USD
103279:2014-03-31:USD 103559:2015-03-31:USD 104194:2014-12-25:CAD 104883:2015-03-31:USD 105985:2015-10-30:USD
107061:2016-03-31:EUR 107211:2016-03-31:USD 109319:2017-03-31:USD 109385:2017-03-31:CAD 109495:2017-03-31:USD
109946:2018-03-31:USD 109952:2018-03-31:USD 112434:2018-03-31:USD 115605:2019-03-31:EUR 115702:2019-03-31:GBP
115852:2019-03-31:USD 115965:2020-03-31:USD 116092:2019-03-31:USD 116126:2020-03-31:USD 119026:2020-03-31:USD
119197:2020-03-31:USD 119398:2020-03-31:EUR 123446:2020-12-10:USD 123844:2021-03-31:EUR 127791:2021-08-13:USD
128265:2022-03-31:EUR 128339:2022-03-31:USD 128342:2022-03-31:USD 128398:2022-03-31:USD 128510:2023-03-31:EUR
132394:2023-03-31:CAD 132427:2022-07-12:USD 132621:2022-06-29:EUR 133281:2023-03-31:GBP 133428:2023-03-31:CAD
133605:2022-11-07:CAD 133646:2023-03-31:USD 133961:2024-03-31:USD 134647:2024-01-19:USD 138725:2024-03-31:CAD
138786:2024-03-31:GBP 138867:2024-03-31:CAD 139064:2024-03-31:EUR 139180:2024-03-31:USD 139849:2025-03-31:EUR
142902:2025-03-31:EUR 143047:2026-01-28:CAD 143902:2025-12-26:GBP 144490:2024-08-08:USD 145038:2025-01-24:CAD
145573:2025-03-31:USD 145783:2025-03-31:USD 145837:2026-03-31:EUR 145991:2026-02-19:USD 146021:2025-09-14:GBP
146056:2025-08-05:USD 146522:2026-03-31:GBP 146526:2026-03-31:GBP 146877:2026-03-31:EUR 148042:2026-03-31:GBP
148367:-:USD 148470:2026-03-31:USD 149158:-:EUR 149778:2026-03-31:EUR 151047:2026-03-31:EUR 151223:2026-03-31:CAD
151486:2026-03-31:USD 151585:2026-03-31:USD 152071:2026-03-31:USD 152966:-:USD 157115:-:USD 158086:2026-09-30:USD
158204:-:EUR 158310:-:USD 158952:-:USD
"""
CHANGES = {int(k): (None if t == "-" else t, c) for k, t, c in (x.split(":") for x in CHANGES_SPEC.split())}
SAL_COLS = (
    "salary_id, employee_id, amount, currency, effective_from, effective_to, change_reason, approved_by, "
    "extract(epoch FROM created_at)::bigint, extract(epoch FROM updated_at)::bigint"
)
FIXED_COLS = (
    "salary_id, employee_id, amount, effective_from, change_reason, approved_by, extract(epoch FROM created_at)::bigint"
)
UNTOUCHED_FP = (59349, "5f66c43af444e1fd6575c06d51819978")
CHANGED_FIXED_FP = (85, "7d8a7bb14380538ba700ece96187c785")
TABLES = {
    "employees": (
        "employee_id",
        "employee_id, employee_number, first_name, last_name, preferred_name, email, "
        "hire_date, original_hire_date, department_id, job_title_id, manager_id, employment_type, status, "
        "country_code, extract(epoch FROM created_at)::bigint, extract(epoch FROM updated_at)::bigint",
    ),
    "exchange_rates": ("currency_code, rate_date", "currency_code, rate_date, usd_per_unit"),
    "bonuses": (
        "bonus_id",
        "bonus_id, employee_id, fiscal_year, q1_amount, q2_amount, q3_amount, q4_amount, "
        "spot_amount, currency, approved_by, extract(epoch FROM created_at)::bigint",
    ),
    "terminations": (
        "termination_id",
        "termination_id, employee_id, termination_date, reason, voluntary, rehire_eligible, notes",
    ),
}
EXPECTED_FP = {
    "employees": (8261, "c52beff273d587dbd405d5479d3670e7"),
    "exchange_rates": (450, "532ea1c83a09952f0aa851193deadb9e"),
    "bonuses": (22827, "a5090e17bf1aa8537d23449081c99558"),
    "terminations": (2553, "c3fdaca783ebadc54c109e0026675966"),
}
RELATIONS = set(
    "bonuses departments employees exchange_rates job_titles leave_requests performance_reviews salaries terminations "
    "v_active_headcount v_annual_bonus_totals".split()
)
CONSTRAINTS = {"salaries_period_check": "c", "salaries_no_overlap": "x", "salaries_currency_check": "c"}
# The existing keys, index and trigger of salaries, by name and definition (kept as they are).
KEPT_CONSTRAINTS = {
    "salaries_pkey": "PRIMARY KEY (salary_id)",
    "salaries_employee_id_fkey": "FOREIGN KEY (employee_id) REFERENCES employees(employee_id)",
    "salaries_approved_by_fkey": "FOREIGN KEY (approved_by) REFERENCES employees(employee_id)",
}
KEPT_INDEX = "CREATE INDEX salaries_employee_id_idx ON public.salaries USING btree (employee_id, effective_from)"
KEPT_TRIGGER = (
    "CREATE TRIGGER salaries_touch_updated_at BEFORE UPDATE ON public.salaries FOR EACH ROW "
    "EXECUTE FUNCTION touch_updated_at()"
)

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


def fingerprint(cur: cursor, table: str, where: str = "", params: tuple = ()) -> tuple[int, str]:
    return fingerprints(cur, [table], where, params)[table]


def fingerprints(cur: cursor, tables: list[str], where: str = "", params: tuple = ()) -> dict[str, tuple[int, str]]:
    """(rows, md5 of the rows' text in key order) of each table (salaries: SAL_COLS), computed by the server in
    one statement; (-1, "missing") for a table that does not exist."""
    cur.execute("SELECT t FROM unnest(%s::text[]) t WHERE to_regclass(t) IS NOT NULL", (tables,))
    present = [r[0] for r in cur.fetchall()]
    out = dict.fromkeys(tables, (-1, "missing"))
    parts = []
    for t in present:
        key, cols = TABLES[t] if t in TABLES else ("salary_id", SAL_COLS)
        parts.append(
            f"SELECT '{t}', count(*), md5(coalesce(string_agg(ROW({cols})::text, E'\\n' ORDER BY {key}), '')) "
            f"FROM {t} {where}"
        )
    if parts:
        cur.execute(" UNION ALL ".join(parts), params)
        out.update({r[0]: (r[1], r[2]) for r in cur.fetchall()})
    return out


def check_data(cur: cursor) -> None:
    cur.execute("SELECT salary_id FROM salaries WHERE salary_id = ANY(%s)", (sorted(DELETED),))
    left = sorted(r[0] for r in cur.fetchall())
    check(not left, f"duplicate rows that should have been deleted are still there: {left[:10]}")
    cur.execute(
        "SELECT salary_id, effective_to::text, currency::text FROM salaries WHERE salary_id = ANY(%s)",
        (sorted(CHANGES),),
    )
    got = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
    missing = sorted(set(CHANGES) - set(got))
    check(not missing, f"rows that should have been corrected were deleted: {missing[:10]}")
    wrong = [(k, got[k], v) for k, v in sorted(CHANGES.items()) if k in got and got[k] != v]
    for k, g, v in wrong[:8]:
        print(f"   salary_id {k}: got (effective_to, currency) = {g}, expected {v}")
    check(not wrong, f"{len(wrong)} of {len(CHANGES)} rows to correct have a wrong effective_to or currency")
    ids = sorted(DELETED | set(CHANGES))
    check(
        fingerprint(cur, "salaries", "WHERE salary_id NOT IN (SELECT unnest(%s::int[]))", (ids,)) == UNTOUCHED_FP,
        "rows that needed no fix were changed, deleted, re-stamped (updated_at) or added",
    )
    cur.execute(
        f"SELECT count(*), md5(coalesce(string_agg(ROW({FIXED_COLS})::text, E'\\n' ORDER BY salary_id), ''))"
        " FROM salaries WHERE salary_id = ANY(%s)",
        (sorted(CHANGES),),
    )
    check(
        tuple(cur.fetchone()) == CHANGED_FIXED_FP, "corrected rows changed in columns other than effective_to/currency"
    )
    # The trigger stamps every row an UPDATE hits, and no row had a stamp before: a corrected row without one was
    # fixed with the trigger disabled (or neutered), and Payroll could not find it.
    cur.execute("SELECT count(*) FROM salaries WHERE salary_id = ANY(%s) AND updated_at IS NULL", (sorted(CHANGES),))
    unstamped = cur.fetchone()[0]
    check(unstamped == 0, f"{unstamped} corrected rows carry no updated_at stamp (the trigger must stamp each fix)")
    cur.execute("SELECT count(*) FROM salaries")
    total = cur.fetchone()[0]
    check(
        total == UNTOUCHED_FP[0] + len(CHANGES), f"salaries has {total} rows, expected {UNTOUCHED_FP[0] + len(CHANGES)}"
    )


def check_schema(cur: cursor) -> None:
    cur.execute(
        "SELECT conname, contype, convalidated, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'salaries'::regclass"
    )
    cons = {r[0]: (r[1], r[2], r[3]) for r in cur.fetchall()}
    for name, kind in CONSTRAINTS.items():
        if check(name in cons, f"constraint {name} is missing on salaries"):
            check(cons[name][0] == kind, f"{name} has the wrong kind ({cons[name][0]!r}, expected {kind!r})")
            check(cons[name][1], f"{name} is NOT VALID; it must be validated")
    for name, definition in KEPT_CONSTRAINTS.items():
        if check(name in cons, f"existing constraint {name} was dropped"):
            check(
                cons[name][1:] == (True, definition),
                f"existing constraint {name} changed: {cons[name][2]}{'' if cons[name][1] else ' NOT VALID'}",
            )
    cur.execute(
        "SELECT tgenabled, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'salaries'::regclass "
        "AND tgname = 'salaries_touch_updated_at'"
    )
    row = cur.fetchone()
    check(row is not None and row[0] == "O", "trigger salaries_touch_updated_at is missing or disabled")
    check(
        row is None or row[1].replace("FUNCTION public.", "FUNCTION ") == KEPT_TRIGGER,
        f"trigger salaries_touch_updated_at changed: {row and row[1]}",
    )
    cur.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND indexname = 'salaries_employee_id_idx'"
    )
    row = cur.fetchone()
    if check(row is not None, "index salaries_employee_id_idx was dropped"):
        check(row[0] == KEPT_INDEX, f"index salaries_employee_id_idx changed: {row[0]}")
    cur.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'p', 'f')"
    )
    rels = {r[0] for r in cur.fetchall()}
    check(
        rels == RELATIONS,
        f"unexpected set of tables/views: extra {sorted(rels - RELATIONS)}, missing {sorted(RELATIONS - rels)}",
    )
    fps = fingerprints(cur, list(TABLES))
    for table in TABLES:
        check(fps[table] == EXPECTED_FP[table], f"table {table} was modified")


def attempt(cur: cursor, sql: str, params: tuple, expect: str | None, what: str) -> None:
    cur.execute("SAVEPOINT t")
    try:
        cur.execute(sql, params)
        state = None
    except psycopg2.Error as exc:
        state = exc.pgcode
    cur.execute("ROLLBACK TO SAVEPOINT t")
    check(state == expect, f"{what}: expected {expect or 'success'}, got {state or 'success'}")


def check_behaviour(conn: connection) -> None:
    ins = (
        "INSERT INTO salaries (employee_id, amount, currency, effective_from, effective_to) "
        "VALUES (%s, 1000, %s, %s, %s)"
    )
    with conn.cursor() as cur:
        cur.execute(
            "SELECT employee_id, max(effective_from) FROM salaries WHERE employee_id = 1009 "
            "AND effective_to IS NULL GROUP BY 1"
        )
        emp, last_from = cur.fetchone() or (1009, None)
        cur.execute(
            "SELECT s.employee_id, max(s.effective_to) FROM salaries s JOIN employees e USING (employee_id) "
            "WHERE e.status = 'terminated' GROUP BY 1 HAVING bool_and(s.effective_to IS NOT NULL) "
            "ORDER BY 1 LIMIT 1"
        )
        gone, last_to = cur.fetchone()
        cur.execute(
            "SELECT min(employee_id) FROM employees e WHERE employment_type = 'contractor' "
            "AND NOT EXISTS (SELECT 1 FROM salaries s WHERE s.employee_id = e.employee_id)"
        )
        fresh = cur.fetchone()[0]
        if check(last_from is not None, "employee 1009 has no open-ended salary row any more"):
            attempt(
                cur,
                ins,
                (emp, "USD", last_from + timedelta(days=10), None),
                "23P01",
                "a second open-ended row starting inside the current one",
            )
            attempt(cur, ins, (emp, "USD", "2030-01-01", None), "23P01", "a later row while the current one is open")
        attempt(cur, ins, (emp, "USD", "2001-01-01", "2000-12-31"), "23514", "a row ending before it starts")
        attempt(cur, ins, (emp, "usd", "1995-01-01", "1995-12-31"), "23514", "currency 'usd'")
        attempt(cur, ins, (emp, "Eur", "1995-01-01", "1995-12-31"), "23514", "currency 'Eur'")
        # exactly three letters A-Z: not merely "no lower case", nor the locale's upper-case letters ([[:upper:]])
        for bad in ("123", "US", "U$D", "U D", "ÉUR", "ÄÖÜ"):
            attempt(cur, ins, (emp, bad, "1995-01-01", "1995-12-31"), "23514", f"currency {bad!r}")
        attempt(cur, ins, (gone, "EUR", last_to, last_to), "23P01", "a row starting on another row's last day")
        attempt(cur, ins, (gone, "EUR", last_to, None), "23P01", "an open row starting on another row's last day")
        attempt(
            cur,
            ins,
            (gone, "EUR", last_to + timedelta(days=1), None),
            None,
            "a row starting the day after the last one",
        )
        attempt(cur, ins, (fresh, "GBP", "2026-01-01", None), None, "a first salary row for a new employee")
        attempt(cur, ins, (emp, "CAD", "1995-01-01", "1995-12-31"), None, "a valid historical row in a gap")
        # the kept trigger still stamps: an UPDATE inside this rolled-back transaction gets updated_at = now()
        cur.execute("UPDATE salaries SET amount = amount WHERE salary_id = (SELECT min(salary_id) FROM salaries)")
        cur.execute("SELECT updated_at = now() FROM salaries WHERE salary_id = (SELECT min(salary_id) FROM salaries)")
        check(cur.fetchone()[0] is True, "an UPDATE of salaries no longer gets its updated_at stamp (trigger kept?)")
    conn.rollback()


def main() -> int:
    conn = connect()
    with conn.cursor() as cur:
        check_schema(cur)
        check_data(cur)
    conn.commit()
    check_behaviour(conn)
    conn.close()
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("PASS: salaries cleaned by the stated rules and the three constraints enforce clean periods")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except psycopg2.Error as exc:  # e.g. a column the checks rely on was dropped or renamed
        print(f"FAIL: database error while verifying: {(exc.pgerror or str(exc)).strip()}")
        sys.exit(1)
