#!/usr/bin/env python3
"""Verifier for hr/vp_org_payroll.

Recomputes every VP's org (walking manager_id), headcount, unpaid headcount and USD payroll as of 2026-10-01
from the raw tables, by a query of the verifier's own (exact numerics), and compares with the agent's view.
Then edits reporting lines, salaries, a rate and a VP's status inside a transaction, checks the view follows
(so it cannot be a frozen copy), and rolls back. Every table (the four the report reads and the five it does
not) must still match fingerprints of the generated initial state (tasks/postgres/states/hr.py).
"""

from __future__ import annotations

import os
import sys
from datetime import date
from decimal import Decimal

import psycopg2
from psycopg2.extensions import connection, cursor

AS_OF = date(2026, 10, 1)
COLUMNS = ["vp_employee_id", "vp_name", "vp_title", "headcount", "payroll_usd", "unpaid_headcount"]
INT_TYPES = {"smallint", "integer", "bigint"}
TABLES = {
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
    "exchange_rates": ("currency_code, rate_date", "currency_code, rate_date, usd_per_unit"),
    "job_titles": (
        "job_title_id",
        "job_title_id, title, job_family, job_level, is_people_manager, min_salary_usd, max_salary_usd",
    ),
    # the tables the report does not read: the task must not modify them either
    "departments": (
        "department_id",
        "department_id, dept_code, name, parent_department_id, cost_center, location",
    ),
    "terminations": (
        "termination_id",
        "termination_id, employee_id, termination_date, reason, voluntary, rehire_eligible, notes",
    ),
    "bonuses": (
        "bonus_id",
        "bonus_id, employee_id, fiscal_year, q1_amount, q2_amount, q3_amount, q4_amount, "
        "spot_amount, currency, approved_by, extract(epoch FROM created_at)::bigint",
    ),
    "leave_requests": (
        "leave_id",
        "leave_id, employee_id, leave_type, start_date, end_date, days, status, approver_id, reason, "
        "extract(epoch FROM requested_at)::bigint",
    ),
    "performance_reviews": (
        "review_id",
        "review_id, employee_id, reviewer_id, review_cycle, rating, extract(epoch FROM submitted_at)::bigint, comments",
    ),
}
EXPECTED_FP = {
    "employees": (8261, "c52beff273d587dbd405d5479d3670e7"),
    "salaries": (59450, "dc64f7ca64f18f3bd4f9ea9c5f4dba54"),
    "exchange_rates": (450, "532ea1c83a09952f0aa851193deadb9e"),
    "job_titles": (99, "285d17530c04074cc8554e79abde3c1f"),
    "departments": (54, "0e66e9a7af1bc0cb8e5cacfba9c79529"),
    "terminations": (2553, "c3fdaca783ebadc54c109e0026675966"),
    "bonuses": (22827, "a5090e17bf1aa8537d23449081c99558"),
    "leave_requests": (23452, "3ff3aee44f3f3ac08436d6b8c301cfbc"),
    "performance_reviews": (25050, "fcab3d6f4b10b62c4446ba70c0b07a74"),
}
BASE_RELATIONS = set(
    "bonuses departments employees exchange_rates job_titles leave_requests performance_reviews salaries terminations "
    "v_active_headcount v_annual_bonus_totals".split()
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


def fingerprints(cur: cursor, tables: list[str]) -> dict[str, tuple[int, str]]:
    """(rows, md5 of the rows' text in key order) of each table, computed by the server in one statement;
    (-1, "missing") for a table that does not exist."""
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


# The report from the raw rows. VPs: job level 8, not terminated. Org: the VP and everyone reachable through
# manager_id (UNION: each member once per VP, cycles end), over employees that have a job title, as the report
# itself. Counted: active or on leave, hired by the date. Salary in effect: the latest effective_from, then the
# highest salary_id; its currency and the rates' codes trimmed and upper-cased; the latest rate on or before
# the date, USD at 1 when it has none. Summed exactly, rounded once to cents (half away from zero, as
# ROUND_HALF_UP). `no_rate` counts counted salaries whose currency has no rate (the report cannot be computed).
EXPECTED_SQL = """
WITH RECURSIVE staff AS (
    SELECT e.employee_id, e.first_name, e.last_name, e.manager_id, e.status, e.hire_date, j.job_level, j.title
    FROM employees e JOIN job_titles j ON j.job_title_id = e.job_title_id
), vps AS (
    SELECT employee_id AS vp, first_name || ' ' || last_name AS name, title FROM staff
    WHERE job_level = 8 AND status <> 'terminated'
), org (vp, member) AS (
    SELECT vp, vp FROM vps
    UNION
    SELECT o.vp, s.employee_id FROM org o JOIN staff s ON s.manager_id = o.member
), rate AS (
    SELECT DISTINCT ON (upper(btrim(currency_code, E' \\t\\n\\r\\f\\v')))
           upper(btrim(currency_code, E' \\t\\n\\r\\f\\v')) AS code, usd_per_unit
    FROM exchange_rates WHERE rate_date <= %(as_of)s
    ORDER BY upper(btrim(currency_code, E' \\t\\n\\r\\f\\v')), rate_date DESC
), pay AS (
    SELECT DISTINCT ON (employee_id) employee_id, amount, upper(btrim(currency, E' \\t\\n\\r\\f\\v')) AS code
    FROM salaries WHERE effective_from <= %(as_of)s AND (effective_to IS NULL OR effective_to >= %(as_of)s)
    ORDER BY employee_id, effective_from DESC, salary_id DESC
), counted AS (
    SELECT o.vp, o.member, p.employee_id IS NOT NULL AS paid,
           p.amount * coalesce(r.usd_per_unit, CASE WHEN p.code = 'USD' THEN 1 END) AS usd
    FROM org o JOIN staff s ON s.employee_id = o.member
    LEFT JOIN pay p ON p.employee_id = o.member LEFT JOIN rate r ON r.code = p.code
    WHERE s.status IN ('active', 'on_leave') AND s.hire_date <= %(as_of)s
)
SELECT v.vp, v.name, v.title, count(c.member), round(coalesce(sum(c.usd), 0), 2),
       count(c.member) FILTER (WHERE NOT c.paid), count(c.member) FILTER (WHERE c.paid AND c.usd IS NULL)
FROM vps v LEFT JOIN counted c ON c.vp = v.vp
GROUP BY v.vp, v.name, v.title
"""


def expected(cur: cursor) -> dict[int, tuple]:
    """The report computed from the raw rows (one query)."""
    cur.execute(EXPECTED_SQL, {"as_of": AS_OF})
    out = {}
    for vp, name, title, headcount, payroll, unpaid, no_rate in cur.fetchall():
        check(no_rate == 0, f"VP {vp}: {no_rate} counted salary(ies) in a currency without a rate on {AS_OF}")
        out[vp] = (name, title, headcount, payroll, unpaid)
    return out


def compare(cur: cursor, what: str) -> None:
    want = expected(cur)
    cur.execute(
        "SELECT vp_employee_id, vp_name, vp_title, headcount, payroll_usd, unpaid_headcount FROM vp_org_payroll"
    )
    rows = cur.fetchall()
    got = {r[0]: tuple(r[1:]) for r in rows}
    check(len(rows) == len(got), f"{what}: the view returns a VP more than once")
    check(set(got) == set(want), f"{what}: VPs listed {sorted(got)}, expected {sorted(want)}")
    bad = 0
    for vp in sorted(set(got) & set(want)):
        g, w = got[vp], want[vp]
        g = (g[0], g[1], g[2], Decimal(g[3]) if g[3] is not None else None, g[4])
        for label, gv, wv in zip(
            ("vp_name", "vp_title", "headcount", "payroll_usd", "unpaid_headcount"), g, w, strict=True
        ):
            if gv != wv:
                bad += 1
                if bad <= 10:
                    print(f"   {what}: VP {vp} {label} = {gv!r}, expected {wv!r}")
    check(bad == 0, f"{what}: {bad} value(s) differ from the recomputed report")


def live_test(conn: connection) -> None:
    """Edit the inputs in a transaction; a view that really computes must follow every edit."""
    cur = conn.cursor()
    cur.execute(
        "SELECT employee_id, job_title_id FROM employees WHERE manager_id IN (SELECT employee_id FROM employees"
        " WHERE manager_id = 2160) AND status = 'active' ORDER BY employee_id LIMIT 1"
    )
    boss, title = cur.fetchone()
    cur.execute(
        "INSERT INTO employees (employee_id, employee_number, first_name, last_name, hire_date, job_title_id, "
        "manager_id, employment_type, status, country_code, created_at) VALUES (99001, 'E99001', 'Test', "
        "'Hire', '2026-09-15', %s, %s, 'full_time', 'active', 'DE', '2026-09-01 00:00:00+00')",
        (title, boss),
    )
    cur.execute(
        "INSERT INTO employees (employee_id, employee_number, first_name, last_name, hire_date, job_title_id, "
        "manager_id, employment_type, status, country_code, created_at) VALUES (99002, 'E99002', 'Late', "
        "'Starter', '2026-10-02', %s, 99001, 'full_time', 'active', 'US', '2026-09-01 00:00:00+00')",
        (title,),
    )
    cur.execute(
        "INSERT INTO salaries (employee_id, amount, currency, effective_from, effective_to) VALUES "
        "(99001, 80000, 'eur', '2026-09-15', NULL), (99001, 90000.55, 'EUR', '2026-10-01', NULL), "
        "(99002, 50000, 'USD', '2026-10-02', NULL)"
    )
    cur.execute(
        "UPDATE exchange_rates SET usd_per_unit = usd_per_unit + 0.1 WHERE currency_code = 'GBP' AND "
        "rate_date = (SELECT max(rate_date) FROM exchange_rates WHERE currency_code = 'GBP' "
        "AND rate_date <= '2026-10-01')"
    )
    cur.execute(
        "UPDATE employees SET manager_id = 4837 WHERE employee_id = (SELECT min(employee_id) FROM employees "
        "WHERE manager_id = 4406 AND status = 'active')"
    )
    cur.execute(
        "UPDATE employees SET status = 'terminated' WHERE employee_id IN (3122, (SELECT min(employee_id) "
        "FROM employees WHERE manager_id = 6000))"
    )
    cur.execute("UPDATE salaries SET effective_to = '2026-09-30' WHERE employee_id = 1009 AND effective_to IS NULL")
    compare(cur, "after edits in a rolled-back transaction")
    conn.rollback()


def main() -> int:
    conn = connect()
    cur = conn.cursor()
    cur.execute(
        "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'p', 'f')"
    )
    rels = dict(cur.fetchall())
    if not check(rels.get("vp_org_payroll") == "v", "vp_org_payroll must exist as a (non-materialized) view"):
        return 1
    extra = sorted(n for n, k in rels.items() if n not in BASE_RELATIONS and k != "v")
    check(not extra, f"new tables or materialized views were created: {extra}")
    check(BASE_RELATIONS <= set(rels), f"tables or views were dropped: {sorted(BASE_RELATIONS - set(rels))}")
    fps = fingerprints(cur, list(TABLES))
    for table in TABLES:
        check(
            fps[table] == EXPECTED_FP[table],
            f"table {table} differs from its initial state (rows {fps[table][0]}, expected {EXPECTED_FP[table][0]})",
        )
    cur.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a WHERE a.attrelid = "
        "'vp_org_payroll'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
    )
    cols = dict(cur.fetchall())
    if not check(set(COLUMNS) <= set(cols), f"view columns {list(cols)} must include {COLUMNS}"):
        return 1
    check(cols["vp_employee_id"] in INT_TYPES, f"vp_employee_id is {cols['vp_employee_id']}, expected an integer")
    check(
        cols["headcount"] in INT_TYPES and cols["unpaid_headcount"] in INT_TYPES,
        "headcount and unpaid_headcount must be integer types",
    )
    check(cols["payroll_usd"].startswith("numeric"), f"payroll_usd is {cols['payroll_usd']}, expected numeric")
    try:
        compare(cur, "initial data")
        conn.rollback()
        live_test(conn)
    except psycopg2.Error as exc:
        check(False, f"querying vp_org_payroll failed: {exc.pgerror or exc}")
    conn.close()
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("PASS: vp_org_payroll matches the recomputed org report and follows edits to the data")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except psycopg2.Error as exc:  # e.g. a column the checks rely on was dropped or renamed
        print(f"FAIL: database error while verifying: {(exc.pgerror or str(exc)).strip()}")
        sys.exit(1)
