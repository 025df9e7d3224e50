#!/usr/bin/env python3
"""Verifier for hr/salary_audit_trail.

Checks the salary_audit table's shape and that the existing stamp trigger is kept (its definition, and that an
UPDATE still gets updated_at = now()), then drives the agent's triggers: inserts, updates (real, no-op, multi-row,
NULL to value) and a delete inside transactions that are rolled back, comparing every audit row with the row images
the verifier read itself. Also proves the log is append-only and that a session that never set hr.change_ticket can
still change salaries. Salaries and the other tables must end exactly as generated (fingerprints below were taken
from the initial state built by tasks/postgres/states/hr.py).
"""

from __future__ import annotations

import os
import sys

import psycopg2
from psycopg2.extensions import connection, cursor

TABLES = {
    "salaries": (
        "salary_id",
        "salary_id, employee_id, amount, currency, effective_from, effective_to, change_reason, "
        "approved_by, extract(epoch FROM created_at)::bigint, extract(epoch FROM updated_at)::bigint",
    ),
    "employees": (
        "employee_id",
        "employee_id, employee_number, first_name, last_name, preferred_name, email, "
        "hire_date, original_hire_date, department_id, job_title_id, manager_id, employment_type, status, "
        "country_code, extract(epoch FROM created_at)::bigint, extract(epoch FROM updated_at)::bigint",
    ),
    "bonuses": (
        "bonus_id",
        "bonus_id, employee_id, fiscal_year, q1_amount, q2_amount, q3_amount, q4_amount, "
        "spot_amount, currency, approved_by, extract(epoch FROM created_at)::bigint",
    ),
}
EXPECTED_FP = {
    "salaries": (59450, "dc64f7ca64f18f3bd4f9ea9c5f4dba54"),
    "employees": (8261, "c52beff273d587dbd405d5479d3670e7"),
    "bonuses": (22827, "a5090e17bf1aa8537d23449081c99558"),
}
COLUMNS = {
    "audit_id": "bigint",
    "operation": "text",
    "salary_id": "bigint",
    "employee_id": "integer",
    "changed_columns": "text[]",
    "old_values": "jsonb",
    "new_values": "jsonb",
    "changed_by": "text",
    "changed_at": "timestamp with time zone",
    "ticket": "text",
}
KEPT_TRIGGER = (
    "CREATE TRIGGER salaries_touch_updated_at BEFORE UPDATE ON public.salaries FOR EACH ROW "
    "EXECUTE FUNCTION touch_updated_at()"
)
NOT_NULL = {"audit_id", "operation", "salary_id", "employee_id", "changed_by", "changed_at"}
RELATIONS = set(
    "bonuses departments employees exchange_rates job_titles leave_requests performance_reviews salaries terminations "
    "v_active_headcount v_annual_bonus_totals salary_audit".split()
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


def check_static(cur: cursor, fps: dict[str, tuple[int, str]]) -> bool:
    cur.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull FROM pg_attribute a "
        "WHERE a.attrelid = to_regclass('public.salary_audit') AND a.attnum > 0 AND NOT a.attisdropped"
    )
    cols = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
    if not check(bool(cols), "table salary_audit does not exist"):
        return False
    extra = sorted(set(cols) - set(COLUMNS))
    check(not extra, f"salary_audit must have exactly the specified columns (extra: {extra})")
    for name, typ in COLUMNS.items():
        if check(name in cols, f"salary_audit.{name} is missing"):
            check(cols[name][0] == typ, f"salary_audit.{name} is {cols[name][0]}, expected {typ}")
            if name in NOT_NULL:
                check(cols[name][1], f"salary_audit.{name} must be NOT NULL")
    cur.execute(
        "SELECT array_agg(a.attname::text) FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid"
        " AND a.attnum = ANY(c.conkey) WHERE c.conrelid = 'salary_audit'::regclass AND c.contype = 'p'"
    )
    check(cur.fetchone()[0] == ["audit_id"], "salary_audit's primary key must be audit_id")
    cur.execute("SELECT count(*) FROM salary_audit")
    check(cur.fetchone()[0] == 0, "salary_audit must be empty when the task ends (no backfill, no test rows)")
    cur.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'p', 'f')"
    )
    rels = {r[0] for r in cur.fetchall()}
    check(
        rels == RELATIONS,
        f"unexpected tables/views: extra {sorted(rels - RELATIONS)}, missing {sorted(RELATIONS - rels)}",
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
    for table in TABLES:
        check(fps[table] == EXPECTED_FP[table], f"table {table} differs from its initial state")
    return True


def image(cur: cursor, salary_id: int) -> dict | None:
    cur.execute("SELECT to_jsonb(s) FROM salaries s WHERE salary_id = %s", (salary_id,))
    row = cur.fetchone()
    return row[0] if row else None


def pick(cur: cursor, where: str, n: int) -> list[tuple[int, int]]:
    cur.execute(
        f"SELECT salary_id, employee_id FROM salaries WHERE employee_id BETWEEN 1010 AND 1300 AND {where} "
        f"ORDER BY salary_id LIMIT {n}"
    )
    return cur.fetchall()


def expect(cur: cursor, seen: int, what: str, want: list[tuple]) -> int:
    """Compare the audit rows written since `seen` with `want` [(operation, salary_id, employee_id, changed_columns,
    old_values, new_values, ticket)], matched by salary_id; returns the new high-water mark."""
    cur.execute(
        "SELECT audit_id, operation, salary_id, employee_id, changed_columns, old_values, new_values, ticket, "
        "changed_by = current_user, changed_at = now() FROM salary_audit WHERE audit_id > %s "
        "ORDER BY salary_id, audit_id",
        (seen,),
    )
    rows = cur.fetchall()
    mark = max([seen] + [r[0] for r in rows])
    if not check(len(rows) == len(want), f"{what}: {len(rows)} audit row(s) written, expected {len(want)}"):
        return mark
    for r, w in zip(rows, sorted(want, key=lambda w: w[1]), strict=True):
        for label, g, e in zip(
            ("operation", "salary_id", "employee_id", "changed_columns", "old_values", "new_values", "ticket"),
            r[1:8],
            w,
            strict=True,
        ):
            check(g == e, f"{what} (salary_id {w[1]}): {label} is {g!r}, expected {e!r}")
        check(r[8] is True, f"{what}: changed_by is not current_user")
        check(r[9] is True, f"{what}: changed_at is not now() (the transaction timestamp)")
    return mark


def live_test(conn: connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT coalesce(max(audit_id), 0), count(*) FROM salary_audit")
    seen, before_count = cur.fetchone()
    cur.execute("SET LOCAL hr.change_ticket = 'HR-4821'")
    cur.execute(
        "INSERT INTO salaries (employee_id, amount, currency, effective_from, change_reason) "
        "VALUES (1009, 91000, 'USD', '2027-01-01', 'merit') RETURNING salary_id"
    )
    sid = cur.fetchone()[0]
    seen = expect(cur, seen, "INSERT", [("INSERT", sid, 1009, None, None, image(cur, sid), "HR-4821")])

    [(upd, emp)] = pick(cur, "effective_to IS NOT NULL", 1)
    before = image(cur, upd)
    cur.execute("UPDATE salaries SET amount = amount + 1000 WHERE salary_id = %s", (upd,))
    cur.execute("SELECT updated_at = now() FROM salaries WHERE salary_id = %s", (upd,))
    check(cur.fetchone()[0] is True, "UPDATE of amount: salaries_touch_updated_at no longer stamps updated_at")
    seen = expect(cur, seen, "UPDATE of amount", [("UPDATE", upd, emp, ["amount"], before, image(cur, upd), "HR-4821")])
    cur.execute("UPDATE salaries SET amount = amount, change_reason = change_reason WHERE employee_id = %s", (emp,))
    seen = expect(cur, seen, "UPDATE that changes nothing but updated_at", [])

    [(nul, emp)] = pick(cur, "approved_by IS NULL", 1)
    before = image(cur, nul)
    cur.execute("UPDATE salaries SET approved_by = 1000 WHERE salary_id = %s", (nul,))
    seen = expect(
        cur,
        seen,
        "UPDATE of approved_by from NULL",
        [("UPDATE", nul, emp, ["approved_by"], before, image(cur, nul), "HR-4821")],
    )

    targets = pick(cur, "effective_to IS NULL", 2) + pick(cur, f"effective_to IS NOT NULL AND salary_id <> {upd}", 2)
    befores = {s: image(cur, s) for s, _ in targets}
    cur.execute("SET LOCAL hr.change_ticket = ''")
    cur.execute(
        "UPDATE salaries SET effective_to = NULL, change_reason = 'correction' WHERE salary_id = ANY(%s)",
        ([s for s, _ in targets],),
    )
    want = [
        (
            "UPDATE",
            s,
            e,
            ["change_reason"] if befores[s]["effective_to"] is None else ["change_reason", "effective_to"],
            befores[s],
            image(cur, s),
            None,
        )
        for s, e in targets
    ]
    seen = expect(cur, seen, "multi-row UPDATE (ticket set to '')", want)

    [(dele, emp)] = pick(cur, "effective_from < '2015-01-01'", 1)
    old = image(cur, dele)
    cur.execute("DELETE FROM salaries WHERE salary_id = %s", (dele,))
    seen = expect(cur, seen, "DELETE", [("DELETE", dele, emp, None, old, None, None)])
    for stmt in ("UPDATE salary_audit SET ticket = 'tampered'", "DELETE FROM salary_audit"):
        cur.execute("SAVEPOINT t")
        try:
            cur.execute(stmt)
            ok = False
        except psycopg2.Error:
            ok = True
        cur.execute("ROLLBACK TO SAVEPOINT t")
        check(ok, f"salary_audit is not append-only: '{stmt}' succeeded")
    conn.rollback()
    cur.execute("SELECT count(*) FROM salary_audit")
    check(cur.fetchone()[0] == before_count, "audit rows survived a rolled-back transaction")
    conn.rollback()


def fresh_session_test() -> None:
    """A brand-new session never set hr.change_ticket: the change must work and record ticket NULL."""
    conn = connect()
    cur = conn.cursor()
    try:
        cur.execute(
            "UPDATE salaries SET amount = amount + 1 WHERE salary_id = "
            "(SELECT min(salary_id) FROM salaries WHERE employee_id BETWEEN 1010 AND 1300) RETURNING salary_id"
        )
        sid = cur.fetchone()[0]
        cur.execute("SELECT ticket, changed_columns FROM salary_audit WHERE salary_id = %s", (sid,))
        check(
            cur.fetchall() == [(None, ["amount"])],
            "session without hr.change_ticket: expected one audit row with ticket NULL and changed_columns {amount}",
        )
    except psycopg2.Error as exc:
        check(False, f"an UPDATE in a session that never set hr.change_ticket failed: {exc.pgerror or exc}")
    conn.rollback()
    conn.close()


def main() -> int:
    conn = connect()
    with conn.cursor() as cur:
        fps = fingerprints(cur, list(TABLES))
        ok = check_static(cur, fps)
        salaries_before = fps["salaries"]
    conn.rollback()
    if ok:
        fresh_session_test()
        try:
            live_test(conn)
        except psycopg2.Error as exc:
            check(False, f"changing salaries failed with the audit triggers in place: {exc.pgerror or exc}")
            conn.rollback()
    with conn.cursor() as cur:
        check(
            fingerprints(cur, ["salaries"])["salaries"] == salaries_before,
            "salaries changed by the rolled-back live test",
        )
    conn.close()
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("PASS: salary_audit records every salary change as specified")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except psycopg2.Error as exc:  # e.g. a column the checks rely on was dropped or renamed
        print(f"FAIL: database error while verifying: {(exc.pgerror or str(exc)).strip()}")
        sys.exit(1)
