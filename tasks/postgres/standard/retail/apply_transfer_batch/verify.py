#!/usr/bin/env python3
"""Verifier for retail/apply_transfer_batch.

Replays the pending batch in Python from inputs the task must not change (the original ledger rows, which sum
to the original on_hand, reserved stock, SKUs, warehouse flags and the requests themselves; fingerprints below
prove they are untouched) and compares the whole end state: request outcomes, stock levels, the new ledger
rows, the invariants, and that nothing else was changed or left behind.
"""

from __future__ import annotations

import hashlib
import os
import sys

import psycopg2

CUTOFF = 1743444000  # 2025-03-31 18:00:00 UTC, as epoch seconds
ORIG_MAX_MOVEMENT = 11370
BATCH = list(range(53, 60)) + list(range(61, 93))  # pending request ids (60 is a cancelled one)
EXPECTED_APPLIED = 26
FINGERPRINTS = {  # of the untouched state, from the generator's fixed seed
    "ledger": "4b15ce65bb131207bfd4a137114038c9",
    "requests_static": "27626e90fc4704d5e13bae70a155cd4d",
    "requests_other": "c7eddce27caa7675f7a17c8689ce4c9b",
    "levels_static": "2f9ee7c6280a721684780b566b57fb9b",
    "products": "aa432e9caa458f7530547c2cde28bac9",
    "warehouses": "cd321389c1197471ef7d36b0606d3f1e",
    "constraints": "4788b57910d8936f467bef1724134ee4",
    "levels_untouched": "e2d718f85eff2822d5d43b758a6182d0",
}
OTHER_COUNTS = {
    "addresses": 6999,
    "categories": 39,
    "customers": 5899,
    "order_lines": 40150,
    "orders": 17996,
    "payments": 18512,
    "product_reviews": 1753,
    "products": 419,
    "refunds": 2140,
    "shipments": 18119,
    "suppliers": 25,
    "warehouses": 5,
}
TABLES = {
    "addresses",
    "categories",
    "customers",
    "order_lines",
    "orders",
    "payments",
    "product_reviews",
    "products",
    "refunds",
    "shipments",
    "stock_levels",
    "stock_movements",
    "suppliers",
    "transfer_requests",
    "warehouses",
}
EP = "extract(epoch FROM {})::bigint"

QUERIES = {
    "ledger": "SELECT movement_id, warehouse_id, product_id, movement_type, quantity, reference, "
    f"{EP.format('created_at')}"
    f" FROM stock_movements WHERE movement_id <= {ORIG_MAX_MOVEMENT} ORDER BY movement_id",
    "requests_static": f"SELECT request_id, {EP.format('requested_at')}, requested_by, from_warehouse_id, "
    "to_warehouse_id, sku, quantity, note FROM transfer_requests ORDER BY request_id",
    "requests_other": f"SELECT request_id, status, reject_reason, {EP.format('processed_at')} FROM transfer_requests "
    "WHERE NOT (request_id = ANY(%(batch)s)) ORDER BY request_id",
    "levels_static": "SELECT s.warehouse_id, s.product_id, s.reserved, s.reorder_point FROM stock_levels s "
    f"WHERE EXISTS (SELECT 1 FROM stock_movements m WHERE m.movement_id <= {ORIG_MAX_MOVEMENT} "
    "AND m.warehouse_id = s.warehouse_id AND m.product_id = s.product_id) ORDER BY 1, 2",
    "products": "SELECT product_id, sku FROM products ORDER BY 1",
    "warehouses": "SELECT warehouse_id, code, is_active FROM warehouses ORDER BY 1",
    "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
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


def fetch(cur, sql: str) -> list[tuple]:
    cur.execute(sql, {"batch": BATCH})
    return cur.fetchall()


def digest(rows: list[tuple]) -> str:
    return hashlib.md5(repr(rows).encode()).hexdigest()


def simulate(cur) -> dict:
    """The expected outcome of the batch, replayed from the untouched inputs."""
    on_hand: dict[tuple[int, int], int] = {}
    for w, p, q in fetch(
        cur,
        "SELECT warehouse_id, product_id, sum(quantity) FROM stock_movements "
        f"WHERE movement_id <= {ORIG_MAX_MOVEMENT} GROUP BY 1, 2",
    ):
        on_hand[(w, p)] = int(q)
    reserved = {(w, p): r for w, p, r, _ in fetch(cur, QUERIES["levels_static"])}
    sku = {s.strip().upper(): p for p, s in fetch(cur, QUERIES["products"])}
    active = {w: a for w, _, a in fetch(cur, QUERIES["warehouses"])}
    reqs = fetch(
        cur,
        f"SELECT request_id, {EP.format('requested_at')}, from_warehouse_id, to_warehouse_id, sku, "
        "quantity FROM transfer_requests WHERE request_id = ANY(%(batch)s)",
    )
    initial = dict(on_hand)
    outcome: dict[int, tuple[str, str | None]] = {}
    ledger, touched = [], set()
    for rid, _, src, dst, raw_sku, qty in sorted(reqs, key=lambda r: (r[1], r[0])):
        pid = sku.get(raw_sku.strip(" ").upper())
        if qty <= 0:
            reason = "INVALID_QUANTITY"
        elif src == dst:
            reason = "SAME_WAREHOUSE"
        elif pid is None:
            reason = "UNKNOWN_SKU"
        elif not (active[src] and active[dst]):
            reason = "WAREHOUSE_INACTIVE"
        elif qty > on_hand.get((src, pid), 0) - reserved.get((src, pid), 0):
            reason = "INSUFFICIENT_STOCK"
        else:
            reason = None
        outcome[rid] = ("rejected", reason) if reason else ("applied", None)
        if reason:
            continue
        on_hand[(src, pid)] -= qty
        on_hand[(dst, pid)] = on_hand.get((dst, pid), 0) + qty
        touched |= {(src, pid), (dst, pid)}
        ledger += [
            (src, pid, "transfer_out", -qty, f"TR-{rid}", CUTOFF),
            (dst, pid, "transfer_in", qty, f"TR-{rid}", CUTOFF),
        ]
    return {"initial": initial, "on_hand": on_hand, "outcome": outcome, "ledger": sorted(ledger), "touched": touched}


def fingerprints(cur, exp: dict) -> dict[str, str]:
    fp = {name: digest(fetch(cur, sql)) for name, sql in QUERIES.items()}
    rows = fetch(
        cur,
        f"SELECT warehouse_id, product_id, on_hand, reserved, reorder_point, {EP.format('updated_at')} "
        "FROM stock_levels ORDER BY 1, 2",
    )
    fp["levels_untouched"] = digest([r for r in rows if (r[0], r[1]) not in exp["touched"]])
    return fp


def main() -> int:
    conn = connect()
    conn.autocommit = True
    cur = conn.cursor()
    exp = simulate(cur)
    applied = sum(1 for s, _ in exp["outcome"].values() if s == "applied")
    check(applied == EXPECTED_APPLIED, f"sanity: the replay applies {EXPECTED_APPLIED} requests (got {applied})")
    fp = fingerprints(cur, exp)
    for name, want in FINGERPRINTS.items():
        check(fp.get(name) == want, f"unchanged: {name}")

    # request outcomes
    got = {
        r[0]: r[1:]
        for r in fetch(
            cur,
            f"SELECT request_id, status, reject_reason, {EP.format('processed_at')} "
            "FROM transfer_requests WHERE request_id = ANY(%(batch)s)",
        )
    }
    wrong = [
        (rid, got.get(rid), want)
        for rid, want in sorted(exp["outcome"].items())
        if got.get(rid, (None, None, None))[:2] != want
    ]
    check(not wrong, f"every batch request has the right status and reject_reason ({len(wrong)} wrong)")
    for rid, have, want in wrong[:8]:
        print(f"  request {rid}: expected {want}, got {have[:2] if have else None}")
    check(all(v[2] == CUTOFF for v in got.values()), "processed_at is the cut-off on every batch request")

    # stock levels
    levels = {
        (r[0], r[1]): r[2:]
        for r in fetch(
            cur,
            "SELECT warehouse_id, product_id, on_hand, reserved, "
            f"reorder_point, {EP.format('updated_at')} FROM stock_levels",
        )
    }
    check(
        set(levels) == set(exp["on_hand"]),
        "stock_levels has exactly the original rows plus the destination rows "
        f"the batch creates (missing {len(set(exp['on_hand']) - set(levels))}, "
        f"unexpected {len(set(levels) - set(exp['on_hand']))})",
    )
    bad = [(k, levels[k][0], v) for k, v in sorted(exp["on_hand"].items()) if k in levels and levels[k][0] != v]
    check(not bad, f"on_hand is right for every warehouse/product ({len(bad)} wrong)")
    for k, have, want in bad[:8]:
        print(f"  warehouse {k[0]} product {k[1]}: expected on_hand {want}, got {have}")
    new = set(exp["on_hand"]) - set(exp["initial"])
    check(
        all(levels.get(k, (0, 0, 0, 0))[1:3] == (0, 0) for k in new), "new stock rows have reserved 0, reorder_point 0"
    )
    check(
        all(levels.get(k, (0, 0, 0, 0))[3] == CUTOFF for k in exp["touched"]),
        "updated_at is the cut-off on every row the batch changed",
    )

    # ledger
    new_moves = sorted(
        fetch(
            cur,
            "SELECT warehouse_id, product_id, movement_type, quantity, reference, "
            f"{EP.format('created_at')} FROM stock_movements "
            f"WHERE movement_id > {ORIG_MAX_MOVEMENT}",
        )
    )
    check(
        new_moves == exp["ledger"],
        f"exactly one transfer_out and one transfer_in ledger row per applied request "
        f"(expected {len(exp['ledger'])} rows, got {len(new_moves)})",
    )
    for row in [r for r in new_moves if r not in exp["ledger"]][:5]:
        print(f"  unexpected ledger row {row}")

    # invariants
    ledger_sum = dict(
        ((w, p), int(q))
        for w, p, q in fetch(cur, "SELECT warehouse_id, product_id, sum(quantity) FROM stock_movements GROUP BY 1, 2")
    )
    drift = [k for k, v in levels.items() if ledger_sum.get(k, 0) != v[0]]
    check(not drift and set(ledger_sum) <= set(levels), f"on_hand equals the ledger sum everywhere ({len(drift)} off)")
    check(all(v[0] >= 0 for v in levels.values()), "no negative on_hand")
    totals_before: dict[int, int] = {}
    totals_after: dict[int, int] = {}
    for (_, p), q in exp["initial"].items():
        totals_before[p] = totals_before.get(p, 0) + q
    for (_, p), v in levels.items():
        totals_after[p] = totals_after.get(p, 0) + v[0]
    check(totals_before == totals_after, "every product's total on_hand across warehouses is unchanged")

    # nothing else changed or left behind
    counts = {t: fetch(cur, f"SELECT count(*) FROM {t}")[0][0] for t in OTHER_COUNTS}
    check(counts == OTHER_COUNTS, "row counts of all other tables unchanged")
    rels = {
        r[0]
        for r in fetch(
            cur,
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "AND relkind IN ('r', 'v', 'm', 'p', 'f')",
        )
    }
    check(
        rels == TABLES,
        f"no tables or views added or dropped (extra {sorted(rels - TABLES)}, missing {sorted(TABLES - rels)})",
    )
    funcs = fetch(cur, "SELECT proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace")
    check(not funcs, f"no helper functions left ({[f[0] for f in funcs]})")
    trig = fetch(
        cur,
        "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal",
    )
    check(not trig, f"no triggers left ({[t[0] for t in trig]})")
    conn.close()
    print(f"\nRESULT: {'FAIL' if failures else 'PASS'} ({len(failures)} check(s) failed)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
