#!/usr/bin/env python3
"""Verifier for shop_admin/portline_price_update.

Reads the trial's store.db (``MCPFLEET_SITES_DATA``). Pinned to the seed: Portline's out-of-stock products are 72
(CAC-1513, Computer Accessories) and 422 (DOR-3963, Desk Organization): both disabled, price and stock unchanged.
The enabled, in-stock Portline products of Desk Organization are 418 ($82.99, 5 units), 424 ($58.99, 52) and 425
($31.95, 3, on sale at $22.99): +10% rounded up to .99 gives $91.99, $64.99 and $35.99, and 418 and 425 are
restocked to 25. The disabled lamp 410 and Portline's other categories keep their prices. One new product,
DOR-3931-W, copies the black lamp's category and new price. Every other row is the seeded one (fingerprints), and
the audit log holds only mgarcia's product changes, each touching only the columns the rules allow.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
from pathlib import Path

DISABLED = {72: ("CAC-1513", 2795, 0), 422: ("DOR-3963", 3299, 0)}  # id: (sku, price, stock)
REPRICED = {418: ("DOR-3931", 9199, 25), 424: ("DOR-3979", 6499, 52), 425: ("DOR-3987", 3599, 25)}
SEED_MAX_PRODUCT = 455
NEW = {
    "sku": "DOR-3931-W",
    "slug": "portline-adjustable-led-desk-lamp-white",
    "name": "Portline Adjustable LED Desk Lamp, White",
    "category_id": 30,  # Office & Stationery > Desk Organization, as DOR-3931
    "brand": "Portline",
    "description": "Adjustable LED desk lamp with a weighted base and three colour temperatures. Now in white.",
    "price_cents": 9199,
    "sale_price_cents": None,
    "stock": 25,
    "status": "active",
    "color": "White",
}
FINGERPRINTS = {
    "SELECT * FROM products WHERE id NOT IN (72, 418, 422, 424, 425) AND id <= 455 ORDER BY id": (
        450,
        "620fca8f49cf5df48773fb1dca1555fa",
    ),
    "SELECT id, sku, slug, name, category_id, brand, description, sale_price_cents, color, weight_grams, created_at"
    " FROM products WHERE id IN (72, 418, 422, 424, 425) ORDER BY id": (5, "7430cf9396d88d5e8574fd6b496c9622"),
    "SELECT * FROM orders ORDER BY id": (860, "35ec4bce06fa4d5fa655386254b6cc13"),
    "SELECT * FROM order_items ORDER BY id": (1649, "2bab2e094a9a3351e4c7619dc0dd550d"),
    "SELECT * FROM order_history ORDER BY id": (3205, "c8a7e82423b2fe315441c56de7ccada8"),
    "SELECT * FROM customers ORDER BY id": (320, "fb387be58dfcabcb6f6f67a358bb7bb3"),
    "SELECT * FROM addresses ORDER BY id": (433, "d7b0249ad6003e3ec2334f92dbf33113"),
    "SELECT * FROM store_settings ORDER BY key": (6, "34bf0a5ffa1e155a8385b3c37b5d9fe6"),
    "SELECT * FROM reviews ORDER BY id": (1946, "df053699b00384ec2c915a00d5738428"),
    "SELECT * FROM coupons ORDER BY code": (7, "97fe7fc6e15a88103a25cab9e74a2a0d"),
    "SELECT * FROM categories ORDER BY id": (33, "ddfa4e7a2184416ba56b5bd28d836888"),
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


def check_products(conn: sqlite3.Connection) -> int | None:
    for pid, (sku, price, stock) in DISABLED.items():
        p = conn.execute("SELECT * FROM products WHERE id = ?", (pid,)).fetchone()
        check(p["status"] == "disabled", f"{sku} (out of stock) disabled ({p['status']})")
        check((p["price_cents"], p["stock"]) == (price, stock), f"{sku} keeps price {price} and stock {stock}")
    for pid, (sku, price, stock) in REPRICED.items():
        p = conn.execute("SELECT * FROM products WHERE id = ?", (pid,)).fetchone()
        check(p["status"] == "active", f"{sku} still enabled")
        check(p["price_cents"] == price, f"{sku}: new price {price} (got {p['price_cents']})")
        check(p["stock"] == stock, f"{sku}: stock {stock} (got {p['stock']})")
    new = conn.execute("SELECT * FROM products WHERE id > ? ORDER BY id", (SEED_MAX_PRODUCT,)).fetchall()
    if not check(len(new) == 1, f"exactly one new product ({len(new)})"):
        return None
    row = new[0]
    for column, want in NEW.items():
        got = row[column].replace("\r\n", "\n").strip() if column == "description" else row[column]
        check(got == want, f"new product {column} = {want!r} (got {got!r})")
    check(str(row["created_at"]).startswith("2025-06-14T"), "new product stamped by the store's clock")
    return int(row["id"])


def check_audit(conn: sqlite3.Connection, new_id: int | None) -> None:
    writes = conn.execute("SELECT * FROM audit_log WHERE action NOT LIKE 'auth.%' ORDER BY id").fetchall()
    check(all(r["site"] == "admin" and r["actor"] == "mgarcia" for r in writes), "every change made by mgarcia")
    allowed = {"product.bulk_status", "product.update", "product.create"}
    check({r["action"] for r in writes} <= allowed, f"only product changes ({sorted({r['action'] for r in writes})})")
    creates = [r for r in writes if r["action"] == "product.create"]
    check(len(creates) == 1, f"one product created ({len(creates)})")
    for r in writes:
        d = json.loads(r["details"])
        if r["action"] == "product.bulk_status":
            skus = set(d.get("skus", []))
            ok = d.get("status") == "disabled" and skus <= {s for s, _, _ in DISABLED.values()}
            check(ok, f"bulk action only disables the out-of-stock products ({d.get('status')}, {sorted(skus)})")
        elif r["action"] == "product.update":
            target = int(r["target_id"])
            changed = set(d.get("changed", {}))
            if target in DISABLED:
                check(changed <= {"status"}, f"{DISABLED[target][0]}: only its status changed ({sorted(changed)})")
            elif target in REPRICED:
                ok = changed <= {"price_cents", "stock"}
                check(ok, f"{REPRICED[target][0]}: only price and stock changed ({sorted(changed)})")
            else:
                check(target == new_id, f"no update of another product (product {target}: {sorted(changed)})")


def main() -> int:
    data = os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "")
    path = Path(data) / "store.db"
    if not path.is_file():
        print(f"FAIL: no store.db in {data!r}")
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    new_id = check_products(conn)
    for sql, want in FINGERPRINTS.items():
        check(digest(conn, sql) == want, f"unchanged: {sql[:80]}")
    check_audit(conn, new_id)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
