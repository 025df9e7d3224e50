#!/usr/bin/env python3
"""Verifier for retail/category_revenue_view.

Recomputes the report in Python from the base tables (category roll-up, per-line half-up rounding with
Decimal, London months from SQL `AT TIME ZONE`, refund rules) and compares every row of the view. Then, in a
transaction it rolls back, adds an order in a BST month-end minute, refunds (approved, pending, order-level,
one in a month with no sales) and cancels an existing order, and requires the view to match the recomputation
again, so a hard-coded or materialized result fails. Base tables must be unchanged.
"""

from __future__ import annotations

import hashlib
import os
import sys
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

import psycopg2

VIEW = "monthly_category_revenue"
COLUMNS = ["month", "category", "orders", "units", "gross_revenue", "refunds", "net_revenue"]
COUNTED = {"paid", "shipped", "delivered", "refunded"}
CENT = Decimal("0.01")
EXPECTED_ROWS = 120  # rows of the report on the untouched data (sanity against a drifted generator)
EP = "extract(epoch FROM {})::bigint"
BASE = {  # the inputs the report reads, ordered by key; their md5 on the untouched data
    "orders": f"SELECT order_id, status, {EP.format('placed_at')} FROM orders ORDER BY 1",
    "order_lines": "SELECT order_line_id, order_id, product_id, quantity, unit_price, discount_pct FROM order_lines "
    "ORDER BY 1",
    "refunds": f"SELECT refund_id, order_id, order_line_id, amount, status, {EP.format('refunded_at')} FROM refunds "
    "ORDER BY 1",
    "products": "SELECT product_id, category_id FROM products ORDER BY 1",
    "categories": "SELECT category_id, name, parent_id FROM categories ORDER BY 1",
}
BASE_MD5 = {
    "orders": "496ba28f0532dfb8664de7299d97865d",
    "order_lines": "763c185c119a6e3ed7b89d9e5e9276be",
    "refunds": "7714f5d1b7b1c450c7968a5a9111bcf8",
    "products": "935a64f1d08387e1622bdce6549f4027",
    "categories": "c3a783b1bea677b69993a0e3d7ace7c1",
}

failures: list[str] = []


def check(cond: bool, msg: str) -> bool:
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def connect():
    db = os.environ.get("POSTGRES_DATABASE") or (sys.argv[1] if len(sys.argv) > 1 else None)
    if not db:
        print("FAIL: no database given (POSTGRES_DATABASE or argv[1])")
        sys.exit(1)
    return psycopg2.connect(
        host=os.environ.get("POSTGRES_HOST", "localhost"),
        port=int(os.environ.get("POSTGRES_PORT", "5432")),
        user=os.environ.get("POSTGRES_USERNAME"),
        password=os.environ.get("POSTGRES_PASSWORD"),
        dbname=db,
        options="-c jit=off",  # JIT compiling a view costs tens of ms and changes no result
    )


def base_md5(cur, sql: str) -> str:
    cur.execute(sql)
    return hashlib.md5(repr(cur.fetchall()).encode()).hexdigest()


def month(text: str | None) -> date | None:
    return date(int(text[:4]), int(text[5:7]), 1) if text else None


def expected(cur) -> dict[tuple[date, str], list]:
    """(month, category) -> [order ids, units, gross, refunds], from the base tables as they are now."""
    cur.execute("SELECT category_id, name, parent_id FROM categories")
    cats = {c: (n, p) for c, n, p in cur.fetchall()}

    def root(c: int) -> str:
        while cats[c][1] is not None:
            c = cats[c][1]
        return cats[c][0]

    cur.execute("SELECT product_id, category_id FROM products")
    prod_cat = {p: root(c) for p, c in cur.fetchall()}
    cur.execute(
        "SELECT ol.order_line_id, ol.order_id, ol.product_id, ol.quantity, ol.unit_price, ol.discount_pct, "
        "o.status, to_char(o.placed_at AT TIME ZONE 'Europe/London', 'YYYY-MM') "
        "FROM order_lines ol JOIN orders o ON o.order_id = ol.order_id"
    )
    out: dict[tuple[date, str], list] = {}
    lines = {}
    for lid, oid, pid, qty, price, disc, status, mon in cur.fetchall():
        lines[lid] = (pid, status)
        if status not in COUNTED:
            continue
        amount = (qty * price * (1 - disc / 100)).quantize(CENT, rounding=ROUND_HALF_UP)
        row = out.setdefault((month(mon), prod_cat[pid]), [set(), 0, Decimal("0.00"), Decimal("0.00")])
        row[0].add(oid)
        row[1] += qty
        row[2] += amount
    cur.execute(
        "SELECT order_line_id, amount, status, to_char(refunded_at AT TIME ZONE 'Europe/London', 'YYYY-MM') "
        "FROM refunds"
    )
    for lid, amount, status, mon in cur.fetchall():
        if status != "approved" or lid is None or mon is None or lines[lid][1] not in COUNTED:
            continue
        row = out.setdefault((month(mon), prod_cat[lines[lid][0]]), [set(), 0, Decimal("0.00"), Decimal("0.00")])
        row[3] += amount
    return out


def compare(cur, label: str) -> None:
    exp = expected(cur)
    cur.execute(f"SELECT {', '.join(COLUMNS)} FROM {VIEW}")
    got = cur.fetchall()
    keys = [(r[0], r[1]) for r in got]
    check(len(keys) == len(set(keys)), f"{label}: one row per (month, category) ({len(keys) - len(set(keys))} dup)")
    check(all(isinstance(r[0], date) for r in got), f"{label}: month is a date")
    check(
        set(keys) == set(exp),
        f"{label}: exactly the expected (month, category) rows (expected {len(exp)}, "
        f"got {len(got)}; missing {sorted(set(exp) - set(keys))[:3]}, unexpected {sorted(set(keys) - set(exp))[:3]})",
    )
    bad = []
    for r in got:
        e = exp.get((r[0], r[1]))
        if e is None:
            continue
        want = (len(e[0]), e[1], e[2], e[3], e[2] - e[3])
        have = tuple(r[2:])
        if have != want or any(not isinstance(v, Decimal) or v.as_tuple().exponent != -2 for v in have[2:]):
            bad.append((r[0], r[1], have, want))
    check(not bad, f"{label}: orders, units, gross, refunds and net are exact with two decimals ({len(bad)} wrong)")
    for m, c, have, want in bad[:6]:
        print(f"  {m} {c}: expected {tuple(str(v) for v in want)}, got {tuple(str(v) for v in have)}")


def live_changes(cur) -> None:
    """Rows that the view must pick up at once: a BST month-end order, refunds of every kind, a cancellation."""
    cur.execute(
        "SELECT p.product_id FROM products p JOIN categories c ON c.category_id = p.category_id "
        "WHERE c.name = 'Headphones' ORDER BY p.product_id LIMIT 1"
    )
    headphones = cur.fetchone()[0]
    cur.execute(
        "SELECT p.product_id FROM products p JOIN categories c ON c.category_id = p.category_id "
        "WHERE c.parent_id IS NULL ORDER BY p.product_id LIMIT 1"
    )
    top_level = cur.fetchone()[0]
    cur.execute(
        "INSERT INTO orders (order_number, customer_id, status, placed_at, warehouse_id, shipping_fee, "
        "total_amount) VALUES ('VERIFY-1', 1, 'delivered', '2025-06-30 23:30:00+00', 1, 4.99, 100) "
        "RETURNING order_id"
    )
    oid = cur.fetchone()[0]
    cur.execute(
        "INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price, discount_pct) "
        "VALUES (%s, 1, %s, 3, 19.99, 33.33), (%s, 2, %s, 1, 10.05, 10) RETURNING order_line_id",
        (oid, headphones, oid, top_level),
    )
    first_line = cur.fetchone()[0]
    cur.execute(
        "INSERT INTO refunds (order_id, order_line_id, amount, reason, status, requested_at, refunded_at) "
        "VALUES (%(o)s, %(l)s, 10.00, 'verify', 'approved', '2025-07-30 09:00:00+00', "
        "'2025-08-01 00:30:00+01'), (%(o)s, %(l)s, 5.00, 'verify', 'pending', '2025-07-30 09:00:00+00', NULL), "
        "(%(o)s, NULL, 4.99, 'verify', 'approved', '2025-07-30 09:00:00+00', '2025-07-31 10:00:00+00')",
        {"o": oid, "l": first_line},
    )
    cur.execute(
        "UPDATE orders SET status = 'cancelled' WHERE order_id = (SELECT min(o.order_id) FROM orders o "
        "WHERE o.status = 'delivered' AND o.placed_at >= '2025-02-01 00:00:00+00' AND EXISTS (SELECT 1 FROM refunds r "
        "WHERE r.order_id = o.order_id AND r.status = 'approved' AND r.order_line_id IS NOT NULL))"
    )
    check(cur.rowcount == 1, "live test: cancelled one refunded February order")


def main() -> int:
    conn = connect()
    cur = conn.cursor()
    cur.execute(
        "SELECT c.relkind FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relname = %s", (VIEW,)
    )
    kind = cur.fetchone()
    if not check(kind is not None and kind[0] == "v", f"{VIEW} exists as a plain view (relkind {kind})"):
        print("\nRESULT: FAIL")
        return 1
    cur.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'public' "
        "AND table_name = %s ORDER BY ordinal_position",
        (VIEW,),
    )
    cols = cur.fetchall()
    check([c[0] for c in cols] == COLUMNS, f"columns are {COLUMNS} in order (got {[c[0] for c in cols]})")
    types = dict(cols)
    check(
        types.get("month") == "date"
        and types.get("category") in ("text", "character varying")
        and types.get("orders") in ("bigint", "integer")
        and types.get("units") in ("bigint", "integer", "numeric")
        and all(types.get(c) == "numeric" for c in COLUMNS[4:]),
        f"column types ({types})",
    )
    for name, sql in BASE.items():
        check(base_md5(cur, sql) == BASE_MD5[name], f"{name} unchanged")
    check(len(expected(cur)) == EXPECTED_ROWS, f"sanity: {EXPECTED_ROWS} expected rows on the untouched data")
    try:
        compare(cur, "current data")
        live_changes(cur)
        compare(cur, "after live changes")
    except psycopg2.Error as exc:
        check(False, f"view query failed: {exc}".strip())
    finally:
        conn.rollback()
    conn.close()
    print(f"\nRESULT: {'FAIL' if failures else 'PASS'} ({len(failures)} check(s) failed)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
