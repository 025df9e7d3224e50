#!/usr/bin/env python3
"""Verifier for retail/category_revenue_view.

Recomputes the report from the base tables with a query of the verifier's own (category roll-up by a
recursive walk, per-line rounding half away from zero, London months from `AT TIME ZONE`, refund rules)
and compares every row of the view with it in the same statement, fetching only the rows that differ. Then,
in a transaction it rolls back, adds an order in a BST month-end minute, refunds (approved, pending,
order-level, one in a month with no sales) and cancels an existing order, and requires the view to match
the recomputation again, so a hard-coded or materialized result fails. Base tables must be unchanged
(pinned md5 digests of their rows' text, computed server-side).
"""

from __future__ import annotations

import os
import sys

import psycopg2

VIEW = "monthly_category_revenue"
COLUMNS = ["month", "category", "orders", "units", "gross_revenue", "refunds", "net_revenue"]
EXPECTED_ROWS = 120  # rows of the report on the untouched data (sanity against a drifted generator)
EP = "extract(epoch FROM {})::bigint"
BASE = {  # the inputs the report reads: (columns, key order, md5 of the rows' text on the untouched data)
    "orders": (f"order_id, status, {EP.format('placed_at')}", "order_id", "d7faa1567d54af3925932a16227d9f1b"),
    "order_lines": (
        "order_line_id, order_id, product_id, quantity, unit_price, discount_pct",
        "order_line_id",
        "80d7c6c9aa483654b1a5a9adcac5baf4",
    ),
    "refunds": (
        f"refund_id, order_id, order_line_id, amount, status, {EP.format('refunded_at')}",
        "refund_id",
        "1e369dc7dda903334050b95eab4da3ea",
    ),
    "products": ("product_id, category_id", "product_id", "f7343877d20ca3ce4a724d2740a6daf9"),
    "categories": ("category_id, name, parent_id", "category_id", "016472a87be8af5a39d30306510b2fb1"),
}
DIGEST_SETTINGS = (  # the text form of values must not depend on the session
    "SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; SET LOCAL IntervalStyle = 'postgres'; "
    "SET LOCAL extra_float_digits = 1"
)
# The report from the base tables: each product rolled up to its top-level category; sales lines of counted
# orders (paid, shipped, delivered, refunded) in the London month of placed_at, each line's amount rounded to
# cents before summing (orders counted once per category: lines are summed per order first); approved line
# refunds of counted orders in the London month of refunded_at, in the category of the refunded line's
# product. One row per (month, category) with a sale or a refund.
EXPECTED_CTE = """
WITH RECURSIVE roots (category_id, category) AS (
    SELECT category_id, name FROM categories WHERE parent_id IS NULL
    UNION ALL
    SELECT c.category_id, r.category FROM categories c JOIN roots r ON c.parent_id = r.category_id
), product_root AS (
    SELECT p.product_id, r.category FROM products p LEFT JOIN roots r ON r.category_id = p.category_id
), counted AS (
    SELECT order_id, date_trunc('month', placed_at AT TIME ZONE 'Europe/London')::date AS month FROM orders
    WHERE status IN ('paid', 'shipped', 'delivered', 'refunded')
), per_order AS (
    SELECT o.month, pr.category, ol.order_id, sum(ol.quantity) AS units,
           sum(round(ol.quantity * ol.unit_price * (1 - ol.discount_pct / 100), 2)) AS gross
    FROM order_lines ol JOIN counted o ON o.order_id = ol.order_id JOIN product_root pr ON pr.product_id = ol.product_id
    GROUP BY o.month, pr.category, ol.order_id
), sales AS (
    SELECT month, category, count(*) AS orders, sum(units) AS units, sum(gross) AS gross
    FROM per_order GROUP BY month, category
), refunded AS (
    SELECT date_trunc('month', f.refunded_at AT TIME ZONE 'Europe/London')::date AS month, pr.category,
           sum(f.amount) AS refunds
    FROM refunds f JOIN order_lines ol ON ol.order_line_id = f.order_line_id
    JOIN counted o ON o.order_id = ol.order_id JOIN product_root pr ON pr.product_id = ol.product_id
    WHERE f.status = 'approved' AND f.refunded_at IS NOT NULL
    GROUP BY 1, 2
), expected AS (
    SELECT coalesce(s.month, f.month) AS month, coalesce(s.category, f.category) AS category,
           coalesce(s.orders, 0) AS orders, coalesce(s.units, 0) AS units,
           coalesce(s.gross, 0.00) AS gross, coalesce(f.refunds, 0.00) AS refunds,
           coalesce(s.gross, 0.00) - coalesce(f.refunds, 0.00) AS net
    FROM sales s FULL JOIN refunded f ON f.month = s.month AND f.category = s.category
)"""
# One statement: the view's rows against the expected ones. Returned: a summary row (key 'summary') with the
# view's row count, its distinct (month, category) count, rows whose month is not a date (NULL, or not a date or
# timestamp type), the expected row count and products that roll up to no top-level category; then one row per
# (month, category) that is missing, unexpected, or wrong (values, or money columns that are not numeric with
# exactly two decimals). A key matches only as a date and a text, and values only as numbers, as in Python.
NUMBERS = {
    "orders": "orders",
    "units": "units",
    "gross": "gross_revenue",
    "refunds": "refunds",
    "net": "net_revenue",
}
NUMBER = "pg_typeof({c}) IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'numeric'::regtype, " + (
    "'real'::regtype, 'double precision'::regtype)"
)
COMPARE = (
    EXPECTED_CTE
    + """, got AS (
    SELECT true AS present, month::text AS month_text, category::text AS category_text,
           CASE WHEN pg_typeof(month) = 'date'::regtype THEN month::text::date END AS month,
           CASE WHEN pg_typeof(month) IN ('date'::regtype, 'timestamp'::regtype, 'timestamptz'::regtype)
                THEN month IS NOT NULL ELSE false END AS month_is_date,
           CASE WHEN pg_typeof(category) IN ('text'::regtype, 'character varying'::regtype, 'name'::regtype)
                THEN category::text END AS category,
           CASE WHEN {number_orders} THEN orders::text::numeric END AS orders,
           CASE WHEN {number_units} THEN units::text::numeric END AS units,
           CASE WHEN {number_gross} THEN gross_revenue::text::numeric END AS gross,
           CASE WHEN {number_refunds} THEN refunds::text::numeric END AS refunds,
           CASE WHEN {number_net} THEN net_revenue::text::numeric END AS net,
           coalesce(pg_typeof(gross_revenue) = 'numeric'::regtype AND scale(gross_revenue::text::numeric) = 2
                    AND pg_typeof(refunds) = 'numeric'::regtype AND scale(refunds::text::numeric) = 2
                    AND pg_typeof(net_revenue) = 'numeric'::regtype AND scale(net_revenue::text::numeric) = 2,
                    false) AS two_decimals
    FROM {view}
)
SELECT 'summary', NULL::text, NULL, (SELECT count(*) FROM got),
       (SELECT count(*) FROM (SELECT DISTINCT month_text, category_text FROM got) d),
       (SELECT count(*) FROM got WHERE NOT month_is_date), (SELECT count(*) FROM expected),
       (SELECT count(*) FROM product_root WHERE category IS NULL), NULL, NULL, NULL, NULL, NULL, NULL
UNION ALL
SELECT CASE WHEN g.present IS NULL THEN 'missing' WHEN e.month IS NULL THEN 'unexpected'
            ELSE 'wrong' END,
       coalesce(e.month::text, g.month_text), coalesce(e.category, g.category_text),
       g.orders, g.units, g.gross, g.refunds, g.net, e.orders, e.units, e.gross, e.refunds, e.net, NULL
FROM got g FULL JOIN expected e ON e.month = g.month AND e.category = g.category
WHERE e.month IS NULL OR g.present IS NULL OR NOT g.two_decimals
   OR (g.orders, g.units, g.gross, g.refunds, g.net) IS DISTINCT FROM (e.orders, e.units, e.gross, e.refunds, e.net)
ORDER BY 1, 2, 3"""
)

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
        # JIT compiled the views for tens of ms a query; 4 MB of work_mem sent the digests' sorts to disk. Neither
        # changes a result.
        options="-c jit=off -c work_mem=32MB",
    )


def digests(cur, tables: list[str]) -> dict[str, str]:
    """md5 of each base table's rows' text in key order, computed by the server in one statement; the session
    settings it needs are undone afterwards (a savepoint)."""
    query = " UNION ALL ".join(
        f"SELECT '{t}', md5(coalesce(string_agg(ROW({BASE[t][0]})::text, E'\\n' ORDER BY {BASE[t][1]}), '')) FROM {t}"
        for t in tables
    )
    cur.execute("SAVEPOINT digest")
    try:
        cur.execute(DIGEST_SETTINGS)
        cur.execute(query)
        out = dict(cur.fetchall())
    except psycopg2.Error as exc:
        print(f"   digest query failed: {str(exc).strip()[:200]}")
        out = dict.fromkeys(tables, "error")
    cur.execute("ROLLBACK TO SAVEPOINT digest")
    return out


def compare(cur, label: str) -> int:
    """The view against the recomputed report; returns the number of expected rows."""
    cur.execute("SAVEPOINT compare")
    try:
        cur.execute(
            COMPARE.format(
                view=VIEW,
                **{f"number_{c}": NUMBER.format(c=col) for c, col in NUMBERS.items()},
            )
        )
        rows = cur.fetchall()
        cur.execute("RELEASE SAVEPOINT compare")
    except psycopg2.Error as exc:
        cur.execute("ROLLBACK TO SAVEPOINT compare")
        check(False, f"{label}: the view's rows can be compared with the recomputed report ({str(exc).strip()[:160]})")
        return -1
    summary = next(r for r in rows if r[0] == "summary")
    n_got, n_keys, null_months, n_exp, unrooted = summary[3:8]
    check(unrooted == 0, f"{label}: every product rolls up to a top-level category ({unrooted} do not)")
    check(n_got == n_keys, f"{label}: one row per (month, category) ({n_got - n_keys} dup)")
    check(null_months == 0, f"{label}: month is a date")
    missing = [(r[1], r[2]) for r in rows if r[0] == "missing"]
    unexpected = [(r[1], r[2]) for r in rows if r[0] == "unexpected"]
    check(
        not missing and not unexpected,
        f"{label}: exactly the expected (month, category) rows (expected {n_exp}, "
        f"got {n_got}; missing {missing[:3]}, unexpected {unexpected[:3]})",
    )
    bad = [r for r in rows if r[0] == "wrong"]
    check(not bad, f"{label}: orders, units, gross, refunds and net are exact with two decimals ({len(bad)} wrong)")
    for r in bad[:6]:
        print(f"  {r[1]} {r[2]}: expected {tuple(str(v) for v in r[8:13])}, got {tuple(str(v) for v in r[3:8])}")
    return n_exp


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
        and types.get("category") == "text"
        and types.get("orders") == "bigint"
        and types.get("units") == "bigint"
        and all(types.get(c) == "numeric" for c in COLUMNS[4:]),
        f"column types ({types})",
    )
    got = digests(cur, list(BASE))
    for name, (_, _, want) in BASE.items():
        check(got[name] == want, f"{name} unchanged")
    try:
        n_exp = compare(cur, "current data")
        check(n_exp == EXPECTED_ROWS, f"sanity: {EXPECTED_ROWS} expected rows on the untouched data")
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
