#!/usr/bin/env python3
"""Verifier for retail/merge_duplicate_customers.

The expected end state was derived from the generator's data with the task's rules in plain Python (not SQL):
the merge map (old -> survivor) is listed below, and the final customers, orders, addresses and reviews are
pinned by md5 digests of their rows. The verifier compares all of them, inspects the audit table and the
unique index, proves the index rejects a case/space variant of an existing email (in a rolled-back
transaction), and checks that constraints, other indexes and other tables are intact: exactly the original
tables (in any schema) plus the audit table, each with its original columns.
"""

from __future__ import annotations

import hashlib
import os
import sys

import psycopg2
import psycopg2.errors

MERGED_AT = 1743498000  # 2025-04-01 09:00:00 UTC
MAP_TEXT = """
12:5619 235:5836 246:5879 359:5819 376:5623 722:5782 742:5674 746:5662 851:5839 1269:5803 1283:5741 1351:5717
1423:5644 1685:5650 1810:5629 1930:5781 2019:5773 2220:5847 2241:5755 2603:5651 2746:5718 2786:5802 2876:5787 3504:5844
3726:5689 4056:5645 4135:5807 4215:5691 4281:5748 4356:5703 4368:5754 4378:5840 4581:5659 4695:5812 4705:5635 4723:5867
4742:5818 4793:5667 5009:5621 5027:5668 5203:5772 5617:2773 5618:576 5620:1388 5622:5621 5624:762 5625:1650 5626:3441
5627:4220 5628:4220 5630:4438 5631:3081 5632:3081 5633:5136 5634:346 5636:5341 5637:2490 5638:2490 5639:4836 5640:4836
5641:150 5642:4509 5643:5644 5646:3746 5647:959 5648:1709 5649:4747 5652:5530 5653:2042 5654:2042 5655:1555 5656:3732
5657:473 5658:4283 5660:168 5661:5662 5663:4982 5664:3690 5665:2976 5666:2710 5669:1150 5670:3469 5671:4382 5672:1505
5673:3323 5675:2845 5676:5048 5677:1903 5678:3708 5679:1221 5680:5523 5681:5104 5682:4654 5683:2081 5684:4744 5685:3728
5686:5410 5687:4510 5688:4510 5690:3176 5692:92 5693:1354 5694:4651 5695:4651 5696:4136 5697:78 5698:78 5699:3790
5700:5171 5701:4711 5702:5447 5704:4914 5705:4154 5706:879 5707:879 5708:1135 5709:3730 5710:504 5711:789 5712:4162
5713:3885 5714:4528 5715:2849 5716:2489 5719:5718 5720:1471 5721:1471 5722:885 5723:5378 5724:1186 5725:733 5726:2727
5727:5607 5728:1863 5729:4864 5730:1869 5731:597 5732:4872 5733:4872 5734:1821 5735:4526 5736:2413 5737:2153 5738:4223
5739:4223 5740:4650 5742:4652 5743:4652 5744:692 5745:5100 5746:3247 5747:1806 5749:2041 5750:2041 5751:4811 5752:5502
5753:4303 5756:1069 5757:1038 5758:4570 5759:2000 5760:3586 5761:3934 5762:4439 5763:1143 5764:2046 5765:2046 5766:4330
5767:890 5768:2541 5769:806 5770:2798 5771:1270 5774:1914 5775:760 5776:4486 5777:2922 5778:2091 5779:374 5780:5781
5783:5230 5784:3172 5785:5246 5786:5113 5788:1330 5789:1829 5790:1232 5791:273 5792:2447 5793:1279 5794:5265 5795:1933
5796:5079 5797:1698 5798:1698 5799:3012 5800:3825 5801:306 5804:3652 5805:1382 5806:3740 5808:5807 5809:3899 5810:4226
5811:5525 5813:948 5814:5200 5815:564 5816:564 5817:3406 5820:3894 5821:908 5822:2183 5823:2183 5824:5236 5825:4090
5826:4090 5827:3047 5828:95 5829:3617 5830:2478 5831:2990 5832:5164 5833:134 5834:1459 5835:4977 5837:169 5838:169
5841:5840 5842:2324 5843:5844 5845:3268 5846:2695 5848:4287 5849:2732 5850:165 5851:4626 5852:3293 5853:1782 5854:1689
5855:1689 5856:1010 5857:950 5858:4342 5859:4342 5860:4844 5861:4779 5862:1675 5863:2421 5864:4984 5865:1870 5866:1962
5868:5526 5869:2747 5870:1199 5871:2134 5872:515 5873:515 5874:5501 5875:2941 5876:1155 5877:2523 5878:3378 5880:1661
5881:1961 5882:1213 5883:2442 5884:188 5885:3098 5886:4468 5887:2259 5888:4467 5889:4467 5890:3043 5891:3043 5892:4032
5893:1287 5894:4343 5895:3137 5896:5292 5897:1664 5898:5307 5899:4538
"""
EXPECTED_MAP = {int(a): int(b) for a, b in (p.split(":") for p in MAP_TEXT.split())}
DIGESTS = {
    "customers": "4a06fe781ff9d36b13faa3daa9ab5ac6",
    "orders": "fe370f0272ca45a9dcf2195d39ad4b28",
    "addresses": "d609ccfa6148af7bfaa38a8edec1afa7",
    "product_reviews": "f268239150f31f1a99b93d0daa88f9bb",
}
COUNTS = {"customers": 5616, "orders": 17996, "addresses": 6999, "product_reviews": 1753, "guest_orders": 2133}
ORIGINAL_CONSTRAINTS = "4788b57910d8936f467bef1724134ee4"  # md5 of all original constraints (table, name, definition)
ORIGINAL_INDEXES = "24c54d72de803a35f873c29703c65d42"  # md5 of all original index definitions
EP = "extract(epoch FROM {})::bigint"
FINAL = {
    "customers": "SELECT customer_id, email, first_name, last_name, phone, "
    f"{EP.format('created_at')}, marketing_opt_in FROM customers ORDER BY 1",
    "orders": "SELECT order_id, customer_id, guest_email FROM orders ORDER BY 1",
    "addresses": "SELECT address_id, customer_id, kind, recipient_name, line1, line2, city, postcode, "
    f"country_code, is_default, {EP.format('created_at')} FROM addresses ORDER BY 1",
    "product_reviews": f"SELECT review_id, product_id, customer_id, rating, {EP.format('created_at')} "
    "FROM product_reviews ORDER BY 1",
}
INDEX_NAME = "customers_email_normalized_key"
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


def rows(cur, sql: str, args: tuple = ()) -> list[tuple]:
    cur.execute(sql, args)
    return cur.fetchall()


def md5(data: list) -> str:
    return hashlib.md5(repr(data).encode()).hexdigest()


def schema_fingerprints(cur) -> tuple[str, str]:
    cons = rows(
        cur,
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE connamespace = 'public'::regnamespace AND conrelid::regclass::text <> 'customer_merge_map' "
        "ORDER BY 1, 2",
    )
    idx = rows(
        cur,
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
        "AND tablename <> 'customer_merge_map' AND indexname <> %s ORDER BY 1",
        (INDEX_NAME,),
    )
    return md5(cons), md5(idx)


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


def check_map_table(cur) -> None:
    cols = rows(
        cur,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = 'customer_merge_map' ORDER BY ordinal_position",
    )
    want = [
        ("old_customer_id", "integer", "NO"),
        ("survivor_customer_id", "integer", "NO"),
        ("merged_at", "timestamp with time zone", "NO"),
    ]
    if not check(cols == want, f"customer_merge_map has columns {want} (got {cols})"):
        return
    cons = rows(
        cur,
        "SELECT contype, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'customer_merge_map'::regclass",
    )
    check(("p", "PRIMARY KEY (old_customer_id)") in cons, "old_customer_id is the primary key")
    check(
        any(
            t == "f" and d.startswith("FOREIGN KEY (survivor_customer_id) REFERENCES customers(customer_id)")
            for t, d in cons
        ),
        "survivor_customer_id references customers",
    )
    got = rows(cur, f"SELECT old_customer_id, survivor_customer_id, {EP.format('merged_at')} FROM customer_merge_map")
    got_map = {o: s for o, s, _ in got}
    check(
        len(got) == len(EXPECTED_MAP) and got_map == EXPECTED_MAP,
        f"customer_merge_map holds exactly the {len(EXPECTED_MAP)} expected old -> survivor pairs (got {len(got)})",
    )
    wrong = sorted((o, got_map.get(o), s) for o, s in EXPECTED_MAP.items() if got_map.get(o) != s)
    for o, have, want_s in wrong[:6]:
        print(f"  customer {o}: expected survivor {want_s}, got {have}")
    extra = sorted(set(got_map) - set(EXPECTED_MAP))
    if extra:
        print(f"  unexpected merged ids: {extra[:6]}")
    check(all(m == MERGED_AT for _, _, m in got), "merged_at is 2025-04-01 09:00:00 UTC on every row")


def check_unique_index(cur) -> None:
    idx = rows(
        cur,
        "SELECT x.indisunique, x.indpred IS NULL, x.indnkeyatts, pg_get_indexdef(x.indexrelid, 1, true), "
        "x.indisvalid FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = 'customers'::regclass AND i.relname = %s",
        (INDEX_NAME,),
    )
    if not check(len(idx) == 1, f"index {INDEX_NAME} exists on customers"):
        return
    unique, full, nkeys, key, valid = idx[0]
    check(
        unique and full and nkeys == 1 and valid and key == "lower(btrim(email))",
        f"{INDEX_NAME} is a valid, unique, non-partial index on lower(btrim(email)) (got key {key})",
    )
    email = rows(cur, "SELECT email FROM customers ORDER BY customer_id LIMIT 1")[0][0]
    cur.execute("SAVEPOINT probe")
    try:
        cur.execute(
            "INSERT INTO customers (email, first_name, last_name, created_at) VALUES (%s, 'Probe', 'Probe', "
            "'2025-04-02 10:00:00+00')",
            ("  " + email.upper() + " ",),
        )
        check(False, "a case/space variant of an existing email is rejected")
    except psycopg2.errors.UniqueViolation:
        check(True, "a case/space variant of an existing email is rejected")
    cur.execute("ROLLBACK TO SAVEPOINT probe")
    cur.execute(
        "INSERT INTO customers (email, first_name, last_name, created_at) VALUES "
        "('brand.new.probe@example.org', 'Probe', 'Probe', '2025-04-02 10:00:00+00')"
    )
    check(cur.rowcount == 1, "a genuinely new email can still be inserted")
    cur.execute("ROLLBACK TO SAVEPOINT probe")


def main() -> int:
    conn = connect()
    cur = conn.cursor()
    check(len(EXPECTED_MAP) == 283, "sanity: 283 accounts to merge")
    tables = {
        r[0]
        for r in rows(
            cur,
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "AND relkind IN ('r', 'v', 'm', 'p')",
        )
    }
    if check("customer_merge_map" in tables, "customer_merge_map exists"):
        check_map_table(cur)
    check_tables(cur, {"customer_merge_map"})
    for name, sql in FINAL.items():
        data = rows(cur, sql)
        check(len(data) == COUNTS[name], f"{name} has {COUNTS[name]} rows (got {len(data)})")
        check(md5(data) == DIGESTS[name], f"{name} match the expected merged state exactly")
    left = rows(cur, "SELECT count(*) FROM customers WHERE customer_id = ANY(%s)", (list(EXPECTED_MAP),))[0][0]
    check(left == 0, f"merged-away accounts are deleted ({left} left)")
    dup = rows(cur, "SELECT count(*) FROM (SELECT lower(btrim(email)) FROM customers GROUP BY 1 HAVING count(*) > 1) s")
    check(dup[0][0] == 0, "no two customers share a normalised email")
    check(
        rows(cur, "SELECT count(*) FROM customers WHERE email <> lower(btrim(email))")[0][0] == 0,
        "every email is stored normalised",
    )
    check(
        rows(cur, "SELECT count(*) FROM orders WHERE customer_id IS NULL")[0][0] == COUNTS["guest_orders"],
        f"guest orders are still guest orders ({COUNTS['guest_orders']})",
    )
    orphans = rows(cur, "SELECT count(*) FROM orders WHERE customer_id = ANY(%s)", (list(EXPECTED_MAP),))[0][0]
    check(orphans == 0, "no order points at a merged-away account")
    cons, idx = schema_fingerprints(cur)
    check(cons == ORIGINAL_CONSTRAINTS, "original constraints (incl. ON DELETE rules and customers_email_key) intact")
    check(idx == ORIGINAL_INDEXES, "original indexes intact")
    check_unique_index(cur)
    conn.rollback()
    conn.close()
    print(f"\nRESULT: {'FAIL' if failures else 'PASS'} ({len(failures)} check(s) failed)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
