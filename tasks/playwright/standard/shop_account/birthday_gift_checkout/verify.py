#!/usr/bin/env python3
"""Verifier for shop_account/birthday_gift_checkout.

Olivia Chen (customer 2) must have placed exactly one new order: 2 x product 172 (water bottle, Black),
1 x 79 (saucepan, 5.5-quart), 1 x 251 (tote, Slate Gray), without the puzzle (347) her cart held. Its subtotal
is $183.46: VIP30 is paused, SPRING25 expired, FLASH50 needs $200 (reached only by keeping the puzzle), and
SUMMER15's 15% ($27.52) beats SAVE20's $20, so SUMMER15 it is. Expedited is the cheapest method within 3
business days. Totals are recomputed with the store's rules and pinned to the seed. The order ships to Mei's
address, which is also saved (not as default) to Olivia's address book; payment by card ending 4242, with the
note. Stock drops for the three products only, SUMMER15 counts one more use, every other table (and every
seeded row) keeps its seeded fingerprint, and the audit log shows only Olivia's cart, checkout and order actions.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

OLIVIA = 2
EMAIL = "olivia.chen@example.org"
LINES = {172: (2, 3999), 79: (1, 7999), 251: (1, 2349)}  # product id: (quantity, unit price)
SEED_STOCK = {172: 6, 79: 190, 251: 10, 347: 97}
SUBTOTAL, DISCOUNT, SHIPPING, TAX, TOTAL = 18346, 2752, 1499, 1131, 18224
SHIP = {
    "ship_name": "Mei Chen",
    "ship_line1": "218 Alder Street",
    "ship_line2": "Apt 4B",
    "ship_city": "Portland",
    "ship_region": "OR",
    "ship_postcode": "97205",
    "ship_country": "United States",
}
PHONE_DIGITS = "5035550148"
NOTE = "Happy birthday, Mei! Please leave the parcel with the building concierge."
ALLOWED = {
    "auth.login",
    "auth.logout",
    "cart.add",
    "cart.update",
    "cart.remove",
    "checkout.shipping",
    "checkout.coupon_apply",
    "checkout.coupon_rejected",
    "checkout.coupon_remove",
    "address.create",
    "order.place",
}
SEED = {  # (rows, md5) of what this task must leave as seeded
    "SELECT * FROM orders WHERE id <= 860 ORDER BY id": (860, "35ec4bce06fa4d5fa655386254b6cc13"),
    "SELECT * FROM order_items WHERE id <= 1649 ORDER BY id": (1649, "2bab2e094a9a3351e4c7619dc0dd550d"),
    "SELECT * FROM order_history WHERE id <= 3205 ORDER BY id": (3205, "c8a7e82423b2fe315441c56de7ccada8"),
    "SELECT * FROM customers ORDER BY id": (320, "fb387be58dfcabcb6f6f67a358bb7bb3"),
    "SELECT * FROM addresses WHERE id <= 433 ORDER BY id": (433, "d7b0249ad6003e3ec2334f92dbf33113"),
    "SELECT * FROM products WHERE id NOT IN (79, 172, 251) ORDER BY id": (452, "cc02be2ee7552927a5612d9fcdcf8aed"),
    "SELECT id, sku, slug, name, category_id, brand, description, price_cents, sale_price_cents, status, color,"
    " weight_grams, created_at, updated_at FROM products WHERE id IN (79, 172, 251) ORDER BY id": (
        3,
        "153ece372962af7920d9e43788975707",
    ),
    "SELECT * FROM coupons WHERE code != 'SUMMER15' ORDER BY code": (6, "c4b05cab0fa88f90dedc3ec1cad3e9ee"),
    "SELECT * FROM cart_items WHERE customer_id != 2 ORDER BY customer_id, product_id": (
        93,
        "3bef16685c806148d913c2ed3b57d0ad",
    ),
    "SELECT * FROM wishlist_items ORDER BY customer_id, product_id": (182, "be3f3f5931cb70627a140beb750d9f96"),
    "SELECT * FROM reviews ORDER BY id": (1946, "df053699b00384ec2c915a00d5738428"),
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


def percent(amount: int, rate: str) -> int:
    return int((Decimal(amount) * Decimal(rate) / 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def norm(value: str) -> str:
    return " ".join(str(value).split()).casefold()


def check_order(conn: sqlite3.Connection) -> None:
    new = conn.execute("SELECT * FROM orders WHERE id > 860 ORDER BY id").fetchall()
    if not check(len(new) == 1, f"exactly one new order in the store (got {len(new)})"):
        return
    o = new[0]
    check(o["customer_id"] == OLIVIA and o["email"] == EMAIL, "placed by Olivia Chen")
    items = conn.execute("SELECT * FROM order_items WHERE order_id = ? ORDER BY id", (o["id"],)).fetchall()
    got = {i["product_id"]: (i["quantity"], i["unit_price_cents"]) for i in items}
    check(got == LINES and len(items) == 3, f"lines are exactly the three gift items (got {got})")
    check(all(i["line_total_cents"] == i["quantity"] * i["unit_price_cents"] for i in items), "line totals")
    # the totals the store's rules give (logic.compute_totals), recomputed, then pinned to the seed
    subtotal = sum(q * p for q, p in LINES.values())
    discount = percent(subtotal, "15")
    tax = percent(subtotal - discount, "7.25")
    check((subtotal, discount, tax) == (SUBTOTAL, DISCOUNT, TAX), "recomputed totals match the pinned ones")
    check(o["coupon_code"] == "SUMMER15", f"coupon SUMMER15, the largest accepted discount (got {o['coupon_code']})")
    check(o["shipping_method"] == "expedited", f"expedited shipping (got {o['shipping_method']})")
    money = (o["subtotal_cents"], o["discount_cents"], o["shipping_cents"], o["tax_cents"], o["total_cents"])
    check(money == (SUBTOTAL, DISCOUNT, SHIPPING, TAX, TOTAL), f"order totals {money}")
    check(o["payment_method"] == "card" and o["card_last4"] == "4242", "paid by the card ending in 4242")
    check(o["status"] == "processing", f"status processing after card payment (got {o['status']})")
    for key, want in SHIP.items():
        check(norm(o[key]) == norm(want), f"{key} is {want!r} (got {o[key]!r})")
    check(re.sub(r"\D", "", o["ship_phone"]) == PHONE_DIGITS, f"ship phone (got {o['ship_phone']!r})")
    check(norm(o["customer_note"]) == norm(NOTE), f"order note (got {o['customer_note']!r})")
    rows = conn.execute("SELECT status FROM order_history WHERE order_id = ? ORDER BY id", (o["id"],))
    history = [r[0] for r in rows]
    check(history == ["pending", "processing"], f"order history pending, processing (got {history})")
    others = conn.execute("SELECT COUNT(*) FROM order_history WHERE id > 3205 AND order_id != ?", (o["id"],))
    check(others.fetchone()[0] == 0, "no history rows on other orders")


def check_account(conn: sqlite3.Connection) -> None:
    new = conn.execute("SELECT * FROM addresses WHERE id > 433 ORDER BY id").fetchall()
    check(len(new) == 1, f"exactly one new address in the store (got {len(new)})")
    for a in new:
        check(a["customer_id"] == OLIVIA, "the new address is in Olivia's address book")
        for key, want in SHIP.items():
            column = "full_name" if key == "ship_name" else key.removeprefix("ship_")
            check(norm(a[column]) == norm(want), f"saved address {column} is {want!r} (got {a[column]!r})")
        check(re.sub(r"\D", "", a["phone"]) == PHONE_DIGITS, "saved address phone")
        check(a["is_default"] == 0, "the new address is not the default")
    default = conn.execute("SELECT id FROM addresses WHERE customer_id = ? AND is_default = 1", (OLIVIA,)).fetchall()
    check([r[0] for r in default] == [3], "Olivia's Houston address (3) is still her only default")
    cart = conn.execute("SELECT product_id, quantity FROM cart_items WHERE customer_id = ?", (OLIVIA,)).fetchall()
    check(not cart, f"Olivia's cart is empty after the order (got {[tuple(r) for r in cart]})")
    stock = dict(conn.execute("SELECT id, stock FROM products WHERE id IN (172, 79, 251, 347)").fetchall())
    want = {pid: SEED_STOCK[pid] - LINES.get(pid, (0, 0))[0] for pid in SEED_STOCK}
    check(stock == want, f"stock went down by the ordered quantities only (got {stock}, want {want})")
    used = conn.execute("SELECT times_used FROM coupons WHERE code = 'SUMMER15'").fetchone()[0]
    check(used == 2, f"SUMMER15 used once more (times_used {used})")


def check_log(conn: sqlite3.Connection) -> None:
    # a mistyped password changes nothing: its failed sign-in is no change to the store
    rows = conn.execute("SELECT * FROM audit_log WHERE action != 'auth.login_failed' ORDER BY id").fetchall()
    ours = all(r["site"] == "shop" and r["actor"] == EMAIL for r in rows)
    check(ours, "every logged action is Olivia's, in the shop")
    extra = sorted({r["action"] for r in rows} - ALLOWED)
    check(not extra, f"only cart, checkout and order actions (unexpected: {extra})")
    check(sum(r["action"] == "order.place" for r in rows) == 1, "exactly one order placed")
    check(any(r["action"] == "auth.login" for r in rows), "signed in through the shop")


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    path = data / "store.db"
    if not check(path.is_file(), f"store.db present in {data}"):
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    check_order(conn)
    check_account(conn)
    check_log(conn)
    for sql, want in SEED.items():
        check(digest(conn, sql) == want, f"unchanged since the seed: {sql[:80]}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
