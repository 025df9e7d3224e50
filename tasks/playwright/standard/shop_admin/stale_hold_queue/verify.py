#!/usr/bin/env python3
"""Verifier for shop_admin/stale_hold_queue.

Reads the trial's store.db (``MCPFLEET_SITES_DATA``). Pinned to the seed (store date 2025-06-14, so the cut-off is
2025-01-15): the on-hold orders placed earlier are 100060, 100081, 100224, 100320 and 100335.
- 100060 (address): the later delivered order 100132 went to another address -> cancelled, customer notified.
- 100081 (address): 100441, placed later and delivered to 6471 Washington Ave, San Diego -> processing.
- 100224 (address): the only delivery (100057) is earlier, the later order is refunded -> cancelled, notified.
- 100320 (payment, put on hold 2024-12-30 though placed 2024-12-29): stays on hold with the finance comment.
- 100335 (address, guest order) -> cancelled, notified.
Each gets exactly one new history row by Tom Bennett; cancelling put the items back in stock; nothing else changed
(fingerprints) and the audit log holds exactly tbennett's four status changes and one comment.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
from pathlib import Path

RELEASE = "Released: a later order was delivered to the same address."
CANCEL = "Cancelled after more than 150 days on hold."
FINANCE = "Finance review requested: on hold since 2024-12-30."
EXPECTED = {  # order number: (final status, new history row's status, comment, notify)
    "100060": ("cancelled", "cancelled", CANCEL, 1),
    "100081": ("processing", "processing", RELEASE, 0),
    "100224": ("cancelled", "cancelled", CANCEL, 1),
    "100320": ("on_hold", "on_hold", FINANCE, 0),
    "100335": ("cancelled", "cancelled", CANCEL, 1),
}
RESTOCKED = {198: 21, 64: 41, 260: 37}  # product id: stock after the three cancellations (seed 20, 40, 35)
SEED_HISTORY = 3205
FINGERPRINTS = {
    "SELECT * FROM orders WHERE id NOT IN (60, 81, 224, 335) ORDER BY id": (856, "636f7e60f53bf198c94f40b4c4aa8dd0"),
    "SELECT id, number, customer_id, email, created_at, subtotal_cents, discount_cents, shipping_cents, tax_cents,"
    " total_cents, coupon_code, shipping_method, payment_method, card_last4, ship_name, ship_line1, ship_line2,"
    " ship_city, ship_region, ship_postcode, ship_country, ship_phone, tracking_number, customer_note FROM orders"
    " WHERE id IN (60, 81, 224, 335) ORDER BY id": (4, "03c77de0cac75573363fa011394f0a61"),
    "SELECT * FROM order_history WHERE id <= 3205 ORDER BY id": (3205, "c8a7e82423b2fe315441c56de7ccada8"),
    "SELECT id, sku, slug, name, category_id, brand, description, price_cents, sale_price_cents, status, color,"
    " weight_grams, created_at, updated_at FROM products ORDER BY id": (455, "3f4816747e191c5b2d9a6f7ec6a348c7"),
    "SELECT id, stock FROM products WHERE id NOT IN (198, 64, 260) ORDER BY id": (
        452,
        "63c0576c10b04a1569120c2040119a98",
    ),
    "SELECT * FROM order_items ORDER BY id": (1649, "2bab2e094a9a3351e4c7619dc0dd550d"),
    "SELECT * FROM customers ORDER BY id": (320, "fb387be58dfcabcb6f6f67a358bb7bb3"),
    "SELECT * FROM addresses ORDER BY id": (433, "d7b0249ad6003e3ec2334f92dbf33113"),
    "SELECT * FROM store_settings ORDER BY key": (6, "34bf0a5ffa1e155a8385b3c37b5d9fe6"),
    "SELECT * FROM reviews ORDER BY id": (1946, "df053699b00384ec2c915a00d5738428"),
    "SELECT * FROM coupons ORDER BY code": (7, "97fe7fc6e15a88103a25cab9e74a2a0d"),
    "SELECT * FROM cart_items ORDER BY customer_id, product_id": (94, "06e81c9a746d19caf144438a380e8445"),
    "SELECT * FROM wishlist_items ORDER BY customer_id, product_id": (182, "be3f3f5931cb70627a140beb750d9f96"),
}

failures: list[str] = []


def check(cond: bool, msg: str) -> bool:
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def digest(conn: sqlite3.Connection, sql: str) -> tuple[int, str]:
    h = hashlib.md5()
    n = 0
    for row in conn.execute(sql):
        h.update(repr(tuple(row)).encode())
        h.update(b"\n")
        n += 1
    return n, h.hexdigest()


def check_orders(conn: sqlite3.Connection) -> None:
    new = conn.execute(
        "SELECT h.*, o.number FROM order_history h JOIN orders o ON o.id = h.order_id WHERE h.id > ? ORDER BY h.id",
        (SEED_HISTORY,),
    ).fetchall()
    touched = sorted({h["number"] for h in new})
    check(touched == sorted(EXPECTED), f"new history entries only on {sorted(EXPECTED)} (got {touched})")
    for number, (status, h_status, comment, notify) in EXPECTED.items():
        row = conn.execute("SELECT * FROM orders WHERE number = ?", (number,)).fetchone()
        check(row["status"] == status, f"#{number} is {status} (got {row['status']})")
        rows = [h for h in new if h["number"] == number]
        if not check(len(rows) == 1, f"#{number}: exactly one new history entry ({len(rows)})"):
            continue
        h = rows[0]
        got = h["comment"].replace("\r\n", "\n").strip()
        check(h["status"] == h_status, f"#{number}: the entry records status {h_status} (got {h['status']})")
        check(got == comment, f"#{number}: comment {comment!r} (got {got!r})")
        check(h["notify_customer"] == notify, f"#{number}: customer notified = {bool(notify)}")
        check(h["author"] == "Tom Bennett", f"#{number}: written by Tom Bennett (got {h['author']!r})")
        check(str(h["created_at"]).startswith("2025-06-14T"), f"#{number}: stamped by the store's clock")
    for pid, stock in RESTOCKED.items():
        got = conn.execute("SELECT stock FROM products WHERE id = ?", (pid,)).fetchone()[0]
        check(got == stock, f"product {pid} restocked to {stock} by the cancellation (got {got})")


def check_audit(conn: sqlite3.Connection) -> None:
    writes = conn.execute("SELECT * FROM audit_log WHERE action NOT LIKE 'auth.%' ORDER BY id").fetchall()
    check(all(r["site"] == "admin" and r["actor"] == "tbennett" for r in writes), "every change made by tbennett")
    got = sorted((r["action"], r["target_id"]) for r in writes)
    want = sorted(
        ("order.status" if status != "on_hold" else "order.comment", number)
        for number, (status, _, _, _) in EXPECTED.items()
    )
    check(got == want, f"audit log holds exactly the expected order actions (got {got})")
    for r in writes:
        d = json.loads(r["details"])
        if r["action"] == "order.status" and r["target_id"] in EXPECTED:
            status, _, _, notify = EXPECTED[r["target_id"]]
            ok = d.get("old") == "on_hold" and d.get("new") == status and d.get("notify") == bool(notify)
            check(ok, f"#{r['target_id']}: on_hold -> {status}, notify {bool(notify)} ({d})")


def main() -> int:
    data = os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "")
    path = Path(data) / "store.db"
    if not path.is_file():
        print(f"FAIL: no store.db in {data!r}")
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    check_orders(conn)
    for sql, want in FINGERPRINTS.items():
        check(digest(conn, sql) == want, f"unchanged: {sql[:80]}")
    check_audit(conn)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
