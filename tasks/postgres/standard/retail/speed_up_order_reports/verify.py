#!/usr/bin/env python3
"""Verifier for retail/speed_up_order_reports.

Proves the indexes with the planner: after ANALYZE, EXPLAIN (FORMAT JSON) of each given query must show no
sequential scan of the big tables and an index on the filtered table whose leading keys match the filter.
Then checks the index set: the three planted duplicates are gone (the constraint-backed copy kept), every
other original index is intact, at most four plain B-tree indexes were added and none is redundant. Query
results, every table's rows (a digest of their values) and constraints must be unchanged, and the tables too:
exactly the original ones (in any schema), each with its original columns, types and NOT NULLs.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from datetime import datetime

import psycopg2

QUERIES = {
    "Q1": """SELECT o.order_id, o.order_number, o.placed_at, o.status, count(*) AS line_count,
       sum(ol.quantity * ol.unit_price) AS goods_value
FROM orders o JOIN order_lines ol ON ol.order_id = o.order_id
WHERE o.customer_id = 1298
GROUP BY o.order_id ORDER BY o.placed_at DESC LIMIT 20""",
    "Q2": """SELECT (o.placed_at AT TIME ZONE 'Europe/London')::date AS day, sum(ol.quantity) AS units,
       count(DISTINCT o.order_id) AS orders
FROM order_lines ol JOIN orders o ON o.order_id = ol.order_id
WHERE ol.product_id = 344 AND o.status IN ('paid', 'shipped', 'delivered')
  AND o.placed_at >= '2025-01-01 00:00:00+00' AND o.placed_at < '2025-02-01 00:00:00+00'
GROUP BY 1 ORDER BY 1""",
    "Q3": """SELECT created_at, movement_type, quantity, reference FROM stock_movements
WHERE warehouse_id = 2 AND product_id = 211 AND created_at >= '2024-10-01 00:00:00+00'
ORDER BY created_at""",
    "Q4": """SELECT customer_id, email, first_name, last_name, phone FROM customers
WHERE lower(email) = lower('Parker.Mairi@Gmail.com')""",
}
# query -> (filtered table, accepted sets of leading keys)
NEEDS = {
    "Q1": ("orders", [("customer_id",)]),
    "Q2": ("order_lines", [("product_id",)]),
    "Q3": ("stock_movements", [("warehouse_id", "product_id"), ("product_id", "warehouse_id")]),
    "Q4": ("customers", [("lower(email)",)]),
}
BIG = {"orders", "order_lines", "stock_movements", "customers"}
DROPPED = {"idx_orders_number", "payments_order_id_idx", "refunds_order_id_idx"}
# the original indexes other than DROPPED (fixed by the generator's seed), and fingerprints of the untouched state
ORIGINAL_NAMES = set(
    """
addresses_customer_id_idx addresses_one_default_per_kind addresses_pkey categories_name_key
categories_pkey categories_slug_key customers_email_key customers_pkey
idx_orders_status idx_payments_order idx_refunds_order order_lines_order_id_line_no_key
order_lines_pkey orders_order_number_key orders_pkey orders_placed_at_idx
payments_pkey product_reviews_customer_id_idx product_reviews_pkey product_reviews_product_id_idx
products_category_id_idx products_pkey products_sku_key refunds_order_line_id_idx
refunds_pkey shipments_order_id_idx shipments_pkey shipments_tracking_number_key
shipments_undelivered_idx stock_levels_pkey stock_levels_product_id_idx stock_movements_created_at_idx
stock_movements_pkey stock_movements_reference_idx suppliers_pkey transfer_requests_pkey
transfer_requests_status_idx warehouses_code_key warehouses_pkey
""".split()
)
ORIGINAL_DIGEST = "f10da4c42bf0acbce63be30167c1c424"
RESULTS = {
    "Q1": "89a3f5d5e9a040c4bf649e7a4390f5cf",
    "Q2": "f6404dd928641aa1f499005572abfa7e",
    "Q3": "c97f0a82c093a4d9e31c7c135d45babc",
    "Q4": "e3a27422d4abc63807acde08aa70535e",
}
# Every table's rows in the untouched state: (key order, rows, md5 of the rows' text in that order), computed by
# the server under DIGEST_SETTINGS. A change to any value of any row shows, not just a changed count.
DIGESTS = {
    "addresses": ("address_id", 6999, "a9c86e414c583ff2193e01179cd417c8"),
    "categories": ("category_id", 39, "1cc5d8db702e8f425d61add8b46d7fe8"),
    "customers": ("customer_id", 5899, "fff201d07ecfb4f4771af63cd150c962"),
    "order_lines": ("order_line_id", 40150, "b63717c6f5a43057cfea1a04efa8922b"),
    "orders": ("order_id", 17996, "5c32179fd9dec3449a0040fd76ec2727"),
    "payments": ("payment_id", 18512, "59265aab16cf8d4c3799f6861a80ed04"),
    "product_reviews": ("review_id", 1753, "5ef7086c206af4b559a33caed9003b2a"),
    "products": ("product_id", 419, "46d8bc3df2ed185bdcee4166f562aa62"),
    "refunds": ("refund_id", 2140, "eb57b9c5b550a49b28aad0602f09c49a"),
    "shipments": ("shipment_id", 18119, "88efbefcb008f0b0c6a77303acbce110"),
    "stock_levels": ("warehouse_id, product_id", 1206, "e0b2af4fb052cc52578627c22c92ba54"),
    "stock_movements": ("movement_id", 11370, "c30c47b63570926532f62b2670241d87"),
    "suppliers": ("supplier_id", 25, "acb169874038d21386cd6cef7bff295f"),
    "transfer_requests": ("request_id", 92, "b0e479b5cce45f5ada032f8b2cc5e6c7"),
    "warehouses": ("warehouse_id", 5, "55a94c018e5ad445327eb9278c43d0e9"),
}
DIGEST_SETTINGS = (  # the text form of dates and times must not depend on the session
    "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres'; SET extra_float_digits = 1"
)
CONSTRAINTS = "4788b57910d8936f467bef1724134ee4"
# Every original table's columns, in order: name, type (format_type; timestamptz for timestamp with time zone) and
# "!" when NOT NULL. Tables anywhere outside the system schemas are listed, so a helper left in another schema shows.
TABLE_COLUMNS = {
    "warehouses": "warehouse_id integer!, code text!, name text!, city text!, is_active boolean!",
    "categories": "category_id integer!, name text!, parent_id integer, slug text!",
    "suppliers": "supplier_id integer!, name text!, country_code character(2)!, contact_email text",
    "products": "product_id integer!, sku text!, name text!, category_id integer!, supplier_id integer, "
    "unit_price numeric(10,2)!, unit_cost numeric(10,2), is_active boolean!, created_at timestamptz!",
    "customers": "customer_id integer!, email text!, first_name text!, last_name text!, phone text, "
    "created_at timestamptz!, marketing_opt_in boolean!",
    "addresses": "address_id integer!, customer_id integer!, kind text!, recipient_name text!, line1 text!, "
    "line2 text, city text!, postcode text!, country_code character(2)!, is_default boolean!, created_at timestamptz!",
    "orders": "order_id integer!, order_number text!, customer_id integer, guest_email text, status text!, "
    "placed_at timestamptz!, warehouse_id integer!, shipping_address_id integer, shipping_fee numeric(10,2)!, "
    "total_amount numeric(12,2)!",
    "order_lines": "order_line_id integer!, order_id integer!, line_no smallint!, product_id integer!, "
    "quantity integer!, unit_price numeric(10,2)!, discount_pct numeric(5,2)!",
    "payments": "payment_id integer!, order_id integer!, method text!, amount numeric(12,2)!, status text!, "
    "created_at timestamptz!",
    "refunds": "refund_id integer!, order_id integer!, order_line_id integer, amount numeric(10,2)!, reason text, "
    "status text!, requested_at timestamptz!, refunded_at timestamptz",
    "shipments": "shipment_id integer!, order_id integer!, warehouse_id integer!, carrier text!, "
    "tracking_number text!, shipped_at timestamptz!, delivered_at timestamptz",
    "product_reviews": "review_id integer!, product_id integer!, customer_id integer!, rating smallint!, title text, "
    "body text, created_at timestamptz!",
    "stock_levels": "warehouse_id integer!, product_id integer!, on_hand integer!, reserved integer!, "
    "reorder_point integer!, updated_at timestamptz!",
    "stock_movements": "movement_id bigint!, warehouse_id integer!, product_id integer!, movement_type text!, "
    "quantity integer!, reference text, created_at timestamptz!",
    "transfer_requests": "request_id integer!, requested_at timestamptz!, requested_by text!, "
    "from_warehouse_id integer!, to_warehouse_id integer!, sku text!, quantity integer!, status text!, "
    "reject_reason text, processed_at timestamptz, note text",
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
        # JIT compiled the views for tens of ms a query; 4 MB of work_mem sent the digests' sorts to disk. Neither
        # changes a result.
        options="-c jit=off -c work_mem=32MB",
    )


def digest(rows: list) -> str:
    norm = [tuple(v.timestamp() if isinstance(v, datetime) else v for v in r) for r in rows]
    return hashlib.md5(repr(norm).encode()).hexdigest()


def indexes(cur) -> dict[str, dict]:
    """Every index in public: table, key list (columns or expressions), predicate, uniqueness, method, definition."""
    cur.execute("""
        SELECT i.relname, t.relname, x.indisunique, am.amname, pg_get_expr(x.indpred, x.indrelid),
               pg_get_indexdef(x.indexrelid), x.indisvalid,
               ARRAY(SELECT pg_get_indexdef(x.indexrelid, k, true) FROM generate_series(1, x.indnkeyatts) k)
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
        JOIN pg_am am ON am.oid = i.relam
        WHERE t.relnamespace = 'public'::regnamespace""")
    return {
        r[0]: {
            "table": r[1],
            "unique": r[2],
            "am": r[3],
            "pred": r[4],
            "def": r[5],
            "valid": r[6],
            "keys": tuple(k.strip('"') for k in r[7]),
        }
        for r in cur.fetchall()
    }


def relations(cur) -> dict[str, str]:
    """Every table, view, materialized view or foreign table outside the system schemas (schema-qualified unless
    in public) -> its columns, written as in TABLE_COLUMNS."""
    cur.execute("""
        SELECT CASE WHEN n.nspname = 'public' THEN '' ELSE n.nspname || '.' END || c.relname,
               coalesce(string_agg(a.attname || ' ' || replace(format_type(a.atttypid, a.atttypmod),
                        'timestamp with time zone', 'timestamptz') || CASE WHEN a.attnotnull THEN '!' ELSE '' END,
                        ', ' ORDER BY a.attnum), '')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname <> 'information_schema'
          AND n.nspname NOT LIKE 'pg\\_%'
        GROUP BY 1""")
    return dict(cur.fetchall())


def check_tables(cur, added: set[str]) -> None:
    """The original tables, with their original columns, and nothing else but `added`, in any schema."""
    rels = relations(cur)
    extra = sorted(set(rels) - set(TABLE_COLUMNS) - added)
    dropped = sorted(set(TABLE_COLUMNS) - set(rels))
    check(
        not extra and not dropped,
        f"tables and views: the {len(TABLE_COLUMNS)} original tables"
        + (f" plus {', '.join(sorted(added))}" if added else "")
        + f", in any schema (added: {extra or 'none'}; dropped: {dropped or 'none'})",
    )
    changed = sorted(t for t in TABLE_COLUMNS if t in rels and rels[t] != TABLE_COLUMNS[t])
    for t in changed[:3]:
        print(f"  {t}: columns {rels[t]}\n  {' ' * len(t)}  expected {TABLE_COLUMNS[t]}")
    check(not changed, f"original tables keep their columns, types and NOT NULLs (changed: {changed or 'none'})")


def table_digests(cur) -> dict[str, tuple[int, str]]:
    """(rows, md5) of every original table, in one statement; a table that is gone or unreadable reads as an
    error row instead of stopping the verifier (the tables check names it)."""
    query = " UNION ALL ".join(
        f"SELECT '{t}', count(*), md5(coalesce(string_agg(r::text, E'\\n' ORDER BY {key}), '')) FROM {t} r"
        for t, (key, _, _) in DIGESTS.items()
    )
    try:
        cur.execute(DIGEST_SETTINGS)
        cur.execute(query)
        return {r[0]: (r[1], r[2]) for r in cur.fetchall()}
    except psycopg2.Error as exc:
        print(f"   digest query failed: {str(exc).strip()[:200]}")
        return {t: (-1, "error") for t in DIGESTS}


def plan_nodes(node: dict) -> list[dict]:
    out = [node]
    for child in node.get("Plans", []):
        out += plan_nodes(child)
    return out


def fingerprint(cur) -> dict:
    idx = indexes(cur)
    kept = sorted((n, i["def"]) for n, i in idx.items() if n in ORIGINAL_NAMES)
    results = {}
    for q, sql in QUERIES.items():
        cur.execute(sql)
        results[q] = digest(cur.fetchall())
    rows = table_digests(cur)
    cur.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2"
    )
    return {"kept": digest(kept), "results": results, "rows": rows, "constraints": digest(cur.fetchall())}


def main() -> int:
    conn = connect()
    conn.autocommit = True
    cur = conn.cursor()
    # The four queries read only these tables, so their plans depend on no other statistics (ANALYZE of the
    # whole database took twice as long).
    cur.execute("ANALYZE " + ", ".join(sorted(BIG)))
    idx = indexes(cur)

    # 1. plans
    for q, sql in QUERIES.items():
        cur.execute("EXPLAIN (FORMAT JSON) " + sql)
        raw = cur.fetchone()[0]
        nodes = plan_nodes((json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"])
        seq = sorted({n.get("Relation Name") for n in nodes if n["Node Type"] == "Seq Scan"} & BIG)
        check(not seq, f"{q}: no sequential scan of {', '.join(sorted(BIG))} (found on {seq})")
        table, leads = NEEDS[q]
        used = [
            n["Index Name"] for n in nodes if "Index Name" in n and idx.get(n["Index Name"], {}).get("table") == table
        ]
        good = [u for u in used if any(idx[u]["keys"][: len(lead)] == lead for lead in leads)]
        check(
            bool(good),
            f"{q}: reads {table} through an index leading with {' + '.join(leads[0])} "
            f"(indexes used on {table}: {used or 'none'})",
        )

    # 2. duplicates dropped, originals intact
    present = set(idx)
    check(not (DROPPED & present), f"duplicate copies dropped (still there: {sorted(DROPPED & present)})")
    missing = sorted(ORIGINAL_NAMES - present)
    check(not missing, f"every other original index still exists (missing: {missing})")
    fp = fingerprint(cur)
    check(not missing and fp["kept"] == ORIGINAL_DIGEST, "original indexes kept with unchanged definitions")

    # 3. new indexes: few, plain B-tree, valid, none redundant
    new = sorted(present - ORIGINAL_NAMES)
    check(1 <= len(new) <= 4, f"between 1 and 4 new indexes (got {len(new)}: {new})")
    check(all(idx[n]["am"] == "btree" and idx[n]["valid"] for n in new), "new indexes are valid B-tree indexes")
    redundant = []
    for a, ia in idx.items():
        for b, ib in idx.items():
            if a == b or ia["table"] != ib["table"] or ia["pred"] != ib["pred"] or ia["unique"]:
                continue
            if ib["keys"][: len(ia["keys"])] == ia["keys"]:
                redundant.append(f"{a} {ia['keys']} vs {b} {ib['keys']}")
    check(not redundant, f"no redundant non-unique index ({redundant[:4]})")

    # 4. nothing else changed
    for q in QUERIES:
        check(fp["results"][q] == RESULTS[q], f"{q} returns the same rows as before")
    rows = fp["rows"]
    changed = [t for t, (_, n, md5) in DIGESTS.items() if rows.get(t) != (n, md5)]
    for t in changed[:4]:
        print(f"   {t}: {rows.get(t, ('?', ''))[0]} rows (was {DIGESTS[t][1]}), contents differ")
    check(not changed, f"every table's rows unchanged, value for value (changed: {changed or 'none'})")
    check(fp["constraints"] == CONSTRAINTS, "constraints unchanged")
    check_tables(cur, set())
    conn.close()
    print(f"\nRESULT: {'FAIL' if failures else 'PASS'} ({len(failures)} check(s) failed)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
