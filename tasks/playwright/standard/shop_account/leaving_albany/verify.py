#!/usr/bin/env python3
"""Verifier for shop_account/leaving_albany.

Emma Lopez (customer 1) has two cancellable orders: 100835 (processing, ships to Seattle) and 100854 (pending,
ships to Albany). Only 100854 must be cancelled, by her, with the reason "other"; its items go back on the
shelf. "Buy it again" on it puts the grinder x2, the floor pump and the sandals in the cart (the cat tree is
disabled and skipped); trimmed, her cart holds the U-lock and sticky notes she had, one grinder and the pump.
Her Seattle address (2) is edited in place (Apt 12, new phone) and is her default; Albany (1) is deleted; her
profile phone changes and the newsletter is off. Every other row keeps its seeded fingerprint, no order is
placed, and the audit log holds only Emma's actions of those kinds, with exactly one cancellation.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from pathlib import Path

EMMA = 1
EMAIL = "emma.lopez@example.com"
CANCELLED, KEPT = 854, 835  # order ids of #100854 (Albany) and #100835 (Seattle)
CART = {196: 1, 383: 1, 106: 1, 186: 1}  # U-lock, sticky notes (seeded) + grinder, pump (bought again)
STOCK = {106: 66, 186: 61, 238: 294, 447: 41}  # seeded stock plus the cancelled order's quantities
PHONE_DIGITS = "2065550143"
SEATTLE = {
    "full_name": "Emma Lopez",
    "line1": "4612 Garden Pl",
    "line2": "Apt 12",
    "city": "Seattle",
    "region": "WA",
    "postcode": "98106",
    "country": "United States",
}
ALLOWED = {
    "auth.login",
    "auth.logout",
    "order.cancel",
    "cart.reorder",
    "cart.add",
    "cart.update",
    "cart.remove",
    "address.update",
    "address.set_default",
    "address.delete",
    "account.update",
}
SEED = {  # (rows, md5) of what this task must leave as seeded
    "SELECT * FROM orders WHERE id != 854 ORDER BY id": (859, "2c9ad8658e241b33c656423746fe0cbc"),
    "SELECT id, number, customer_id, email, created_at, subtotal_cents, discount_cents, shipping_cents, tax_cents,"
    " total_cents, coupon_code, shipping_method, payment_method, card_last4, ship_name, ship_line1, ship_line2,"
    " ship_city, ship_region, ship_postcode, ship_country, ship_phone, tracking_number, customer_note"
    " FROM orders WHERE id = 854": (1, "7e6af0c6da8ea6174e0c133543fa4a4f"),
    "SELECT * FROM order_items ORDER BY id": (1649, "2bab2e094a9a3351e4c7619dc0dd550d"),
    "SELECT * FROM order_history WHERE id <= 3205 ORDER BY id": (3205, "c8a7e82423b2fe315441c56de7ccada8"),
    "SELECT * FROM customers WHERE id != 1 ORDER BY id": (319, "bccf7b0cac542b0a5f6c743e1e8e643f"),
    "SELECT id, email, password_hash, first_name, last_name, customer_group, is_active, created_at"
    " FROM customers WHERE id = 1": (1, "e143025c304919b09ee88f33f57a44e3"),
    "SELECT * FROM addresses WHERE id NOT IN (1, 2) ORDER BY id": (431, "2bbcdab999cfb067ae6e0bb533ca1516"),
    "SELECT * FROM products WHERE id NOT IN (106, 186, 238, 447) ORDER BY id": (
        451,
        "db683a90cb667b7a2e9362971fe2c729",
    ),
    "SELECT id, sku, slug, name, category_id, brand, description, price_cents, sale_price_cents, status, color,"
    " weight_grams, created_at, updated_at FROM products WHERE id IN (106, 186, 238, 447) ORDER BY id": (
        4,
        "726b35a8de121ffb6be50fb1e263ba31",
    ),
    "SELECT * FROM cart_items WHERE customer_id != 1 ORDER BY customer_id, product_id": (
        92,
        "ec5b91302b1b60ad678365b20b294a3b",
    ),
    "SELECT * FROM wishlist_items ORDER BY customer_id, product_id": (182, "be3f3f5931cb70627a140beb750d9f96"),
    "SELECT * FROM reviews ORDER BY id": (1946, "df053699b00384ec2c915a00d5738428"),
    "SELECT * FROM coupons ORDER BY code": (7, "97fe7fc6e15a88103a25cab9e74a2a0d"),
    "SELECT * FROM store_settings ORDER BY key": (6, "34bf0a5ffa1e155a8385b3c37b5d9fe6"),
    "SELECT * FROM admin_users ORDER BY id": (4, "94fae8dbac943f6ea8ce813b10731954"),
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


def norm(value: str) -> str:
    return " ".join(str(value).split()).casefold()


def check_orders(conn: sqlite3.Connection) -> None:
    status = dict(conn.execute("SELECT id, status FROM orders WHERE id IN (835, 854)").fetchall())
    check(status.get(CANCELLED) == "cancelled", f"#100854 (Albany, pending) cancelled (got {status.get(CANCELLED)})")
    check(status.get(KEPT) == "processing", f"#100835 (Seattle) left processing (got {status.get(KEPT)})")
    check(conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 860, "no order placed")
    history = conn.execute("SELECT * FROM order_history WHERE id > 3205 ORDER BY id").fetchall()
    got = [(h["order_id"], h["status"], h["author"], h["comment"]) for h in history]
    want = [(CANCELLED, "cancelled", "customer", "Cancelled by the customer: Other.")]
    check(got == want, f"one history row: #100854 cancelled by the customer, reason Other (got {got})")
    stock = dict(conn.execute("SELECT id, stock FROM products WHERE id IN (106, 186, 238, 447)").fetchall())
    check(stock == STOCK, f"the cancelled order's items are back in stock (got {stock}, want {STOCK})")


def check_account(conn: sqlite3.Connection) -> None:
    cart = dict(conn.execute("SELECT product_id, quantity FROM cart_items WHERE customer_id = ?", (EMMA,)).fetchall())
    check(cart == CART, f"cart: U-lock, sticky notes, one grinder, the pump (got {cart}, want {CART})")
    rows = conn.execute("SELECT * FROM addresses WHERE customer_id = ? ORDER BY id", (EMMA,)).fetchall()
    check([a["id"] for a in rows] == [2], f"only the Seattle address (2) is left (got {[a['id'] for a in rows]})")
    for a in rows:
        for key, want in SEATTLE.items():
            check(norm(a[key]) == norm(want), f"address {a['id']} {key} is {want!r} (got {a[key]!r})")
        check(re.sub(r"\D", "", a["phone"]) == PHONE_DIGITS, f"address {a['id']} phone (got {a['phone']!r})")
        check(a["is_default"] == 1, f"address {a['id']} is the default")
    me = conn.execute("SELECT * FROM customers WHERE id = ?", (EMMA,)).fetchone()
    check(re.sub(r"\D", "", me["phone"]) == PHONE_DIGITS, f"profile phone (got {me['phone']!r})")
    check(me["newsletter"] == 0, "unsubscribed from the newsletter")


def check_log(conn: sqlite3.Connection) -> None:
    # a mistyped password changes nothing: its failed sign-in is no change to the store
    rows = conn.execute("SELECT * FROM audit_log WHERE action != 'auth.login_failed' ORDER BY id").fetchall()
    ours = all(r["site"] == "shop" and r["actor"] == EMAIL for r in rows)
    check(ours, "every logged action is Emma's, in the shop")
    extra = sorted({r["action"] for r in rows} - ALLOWED)
    check(not extra, f"only order, cart, address and profile actions (unexpected: {extra})")
    cancels = [(r["target_id"], json.loads(r["details"]).get("reason")) for r in rows if r["action"] == "order.cancel"]
    check(cancels == [("100854", "other")], f"exactly one cancellation, #100854 for 'other' (got {cancels})")
    reorders = [r["target_id"] for r in rows if r["action"] == "cart.reorder"]
    check(set(reorders) == {"100854"}, f"bought again: #100854 only (got {reorders})")
    deleted = [r["target_id"] for r in rows if r["action"] == "address.delete"]
    check(set(deleted) == {"1"}, f"deleted the Albany address only (got {deleted})")


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    path = data / "store.db"
    if not check(path.is_file(), f"store.db present in {data}"):
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    check_orders(conn)
    check_account(conn)
    check_log(conn)
    for sql, want in SEED.items():
        check(digest(conn, sql) == want, f"unchanged since the seed: {sql[:80]}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
