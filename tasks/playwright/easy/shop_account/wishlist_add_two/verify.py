"""Verify: Noah Kim's wishlist holds exactly the two named products, added by him through the shop, and
nothing else in the store changed (audit_log shows only his sign-in and the two wishlist additions)."""

import os
import sqlite3
import sys
from pathlib import Path

EMAIL = "noah.kim@example.net"
WANTED = {"Trailhead 3-Season Headlamp", "Deskwise Wireless-Charging LED Desk Lamp"}
ALLOWED = {"auth.login", "auth.logout", "wishlist.add"}
SEEDED_WISHLIST_ROWS = 182  # every customer's wishlist items in the seeded store


def fail(why: str) -> None:
    print(f"FAIL: {why}")
    sys.exit(1)


def main() -> None:
    data = os.environ.get("MCPFLEET_SITES_DATA")
    if not data or not (Path(data) / "store.db").is_file():
        fail("MCPFLEET_SITES_DATA does not point at a folder with store.db")
    db = sqlite3.connect(f"file:{Path(data) / 'store.db'}?mode=ro", uri=True)
    row = db.execute("SELECT id FROM customers WHERE email = ?", (EMAIL,)).fetchone()
    if row is None:
        fail(f"customer {EMAIL} is missing")
    customer = row[0]
    ids = {name: pid for pid, name in db.execute("SELECT id, name FROM products WHERE name IN (?, ?)", tuple(WANTED))}
    if set(ids) != WANTED:
        fail(f"products not found: {sorted(WANTED - set(ids))}")
    wishlist = {
        name
        for (name,) in db.execute(
            "SELECT p.name FROM wishlist_items w JOIN products p ON p.id = w.product_id WHERE w.customer_id = ?",
            (customer,),
        )
    }
    if wishlist != WANTED:
        fail(f"wishlist is {sorted(wishlist)}, expected {sorted(WANTED)}")
    total = db.execute("SELECT COUNT(*) FROM wishlist_items").fetchone()[0]
    if total != SEEDED_WISHLIST_ROWS + 2:
        fail(f"{total} wishlist rows in the store, expected {SEEDED_WISHLIST_ROWS + 2}: other wishlists changed")
    cart = db.execute("SELECT COUNT(*) FROM cart_items WHERE customer_id = ?", (customer,)).fetchone()[0]
    if cart:
        fail(f"Noah's cart has {cart} item(s); it must stay empty")
    log = db.execute(  # a mistyped password changes nothing: its failed sign-in is no change to the store
        "SELECT site, actor, action, target_type, target_id FROM audit_log"
        " WHERE action != 'auth.login_failed' ORDER BY id"
    ).fetchall()
    others = [r for r in log if r[2] not in ALLOWED or r[1] != EMAIL or r[0] != "shop"]
    if others:
        fail(f"other changes were made: {others[:5]}")
    if not any(r[2] == "auth.login" and r[1] == EMAIL for r in log):
        fail("no sign-in as Noah through the shop")
    added = sorted(r[4] for r in log if r[2] == "wishlist.add")
    if added != sorted(str(ids[n]) for n in WANTED) or any(r[3] != "product" for r in log if r[2] == "wishlist.add"):
        fail(f"audit_log shows wishlist additions of products {added}, expected exactly {sorted(ids.values())}")
    print("PASS: both products are on Noah's wishlist and nothing else changed")


if __name__ == "__main__":
    main()
