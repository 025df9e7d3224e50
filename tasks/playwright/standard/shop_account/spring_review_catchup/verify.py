#!/usr/bin/env python3
"""Verifier for shop_account/spring_review_catchup.

Nolan Bryant (customer 306) placed five orders from 2025-04-01 on: #100571 (delivered: cycling gloves 195, and
the travel cable 34 he reviewed in 2024), #100675 (delivered: orthopedic dog bed 432), #100788 (delivered:
face masks 273), #100832 (cancelled: cutting board 117, desk lamp) and #100845 (on hold: highlighters 403,
a game). So exactly three new reviews, by him, on 195 (4 stars), 432 (2) and 273 (5), with the notes' titles
and texts; none on the look-alikes (MIPS gloves 197, the other orthopedic bed 428, two other hydrating masks
283/288), the cancelled board or the held highlighters. The eligible set is recomputed from the orders and
pinned. His cart holds one pair of gloves plus the fewest $20.49 mask packs that reach free standard shipping
($75.00): 2 packs, $75.97 (1 pack is $55.48). Nothing else changes: every seeded review, the other carts, all
wishlists, orders, products, customers and settings keep their seeded fingerprints, and the audit log shows
only Nolan's sign-in, review and cart actions.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from pathlib import Path

NOLAN = 306
EMAIL = "nolan_bryant@example.com"
SINCE = "2025-04-01"
SEED_REVIEWS = 1946  # highest review id in the seed
REVIEWS = {  # product id: (stars, title, text)
    195: (
        4,
        "Warm and easy to see",
        "Kept my hands warm on cold morning rides and the reflective strips really stand out.",
    ),
    432: (2, "Went flat quickly", "The foam lost its shape within a month and my dog now prefers the floor."),
    273: (5, "My weekly treat", "Gentle on sensitive skin and my face feels fresh for the whole day."),
}
LOOKALIKES = {197: "MIPS gloves", 428: "Trailhead Pets bed", 283: "Dewline masks", 288: "Botanica masks"}
NOT_RECEIVED = {117: "cutting board (cancelled)", 403: "highlighters (on hold)", 34: "cable (reviewed in 2024)"}
GLOVES, MASKS = 195, 273
CART = {GLOVES: 1, MASKS: 2}
SUBTOTAL = 7597
ALLOWED = {"auth.login", "auth.logout", "review.create", "cart.add", "cart.update", "cart.remove"}
SEED = {  # (rows, md5) of what this task must leave as seeded
    "SELECT * FROM reviews WHERE id <= 1946 ORDER BY id": (1946, "df053699b00384ec2c915a00d5738428"),
    "SELECT * FROM cart_items WHERE customer_id != 306 ORDER BY customer_id, product_id": (
        94,
        "06e81c9a746d19caf144438a380e8445",
    ),
    "SELECT * FROM wishlist_items ORDER BY customer_id, product_id": (182, "be3f3f5931cb70627a140beb750d9f96"),
    "SELECT * FROM orders ORDER BY id": (860, "35ec4bce06fa4d5fa655386254b6cc13"),
    "SELECT * FROM order_items ORDER BY id": (1649, "2bab2e094a9a3351e4c7619dc0dd550d"),
    "SELECT * FROM order_history ORDER BY id": (3205, "c8a7e82423b2fe315441c56de7ccada8"),
    "SELECT * FROM customers ORDER BY id": (320, "fb387be58dfcabcb6f6f67a358bb7bb3"),
    "SELECT * FROM addresses ORDER BY id": (433, "d7b0249ad6003e3ec2334f92dbf33113"),
    "SELECT * FROM products ORDER BY id": (455, "20f2cb4ff6693f756e458e725c6c7c27"),
    "SELECT * FROM categories ORDER BY id": (33, "ddfa4e7a2184416ba56b5bd28d836888"),
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


def eligible(conn: sqlite3.Connection) -> set[int]:
    """Products from Nolan's delivered orders since April 1 that are on sale and he had not reviewed in the seed."""
    rows = conn.execute(
        "SELECT DISTINCT oi.product_id FROM orders o JOIN order_items oi ON oi.order_id = o.id"
        " JOIN products p ON p.id = oi.product_id WHERE o.customer_id = ? AND o.status = 'delivered'"
        " AND o.created_at >= ? AND p.status = 'active' AND NOT EXISTS (SELECT 1 FROM reviews r"
        " WHERE r.customer_id = o.customer_id AND r.product_id = oi.product_id AND r.id <= ?)",
        (NOLAN, SINCE, SEED_REVIEWS),
    )
    return {r[0] for r in rows}


def check_reviews(conn: sqlite3.Connection) -> None:
    check(eligible(conn) == set(REVIEWS), f"the seed's eligible products are {sorted(REVIEWS)}")
    new = conn.execute("SELECT * FROM reviews WHERE id > ? ORDER BY id", (SEED_REVIEWS,)).fetchall()
    check(all(r["customer_id"] == NOLAN for r in new), "every new review is Nolan's")
    got = sorted(r["product_id"] for r in new)
    check(got == sorted(REVIEWS), f"new reviews on exactly the gloves, dog bed and face masks (got {got})")
    for pid, name in {**LOOKALIKES, **NOT_RECEIVED}.items():
        check(pid not in got, f"no review on product {pid}, the {name}")
    for r in new:
        want = REVIEWS.get(r["product_id"])
        if want is None:
            continue
        stars, title, body = want
        pid = r["product_id"]
        check(r["rating"] == stars, f"product {pid}: {stars} stars (got {r['rating']})")
        check(norm(r["title"]) == norm(title), f"product {pid}: title {title!r} (got {r['title']!r})")
        check(norm(r["body"]) == norm(body), f"product {pid}: review text as noted (got {r['body']!r})")
        check(r["author_name"] == "Nolan B.", f"product {pid}: signed Nolan B. (got {r['author_name']!r})")
        check(r["status"] == "pending", f"product {pid}: awaiting approval as the shop files it (got {r['status']})")


def check_cart(conn: sqlite3.Connection) -> None:
    rows = conn.execute(
        "SELECT ci.product_id, ci.quantity, COALESCE(p.sale_price_cents, p.price_cents) AS price FROM cart_items ci"
        " JOIN products p ON p.id = ci.product_id WHERE ci.customer_id = ?",
        (NOLAN,),
    ).fetchall()
    cart = {r["product_id"]: r["quantity"] for r in rows}
    check(cart == CART, f"cart: 1 pair of gloves and 2 packs of face masks (got {cart}, want {CART})")
    # the fewest mask packs that lift one pair of gloves to the free-shipping threshold, recomputed, then pinned
    prices = dict(
        conn.execute(
            "SELECT id, COALESCE(sale_price_cents, price_cents) FROM products WHERE id IN (?, ?)", (GLOVES, MASKS)
        ).fetchall()
    )
    threshold = int(
        conn.execute("SELECT value FROM store_settings WHERE key = 'free_shipping_threshold_cents'").fetchone()[0]
    )
    packs = 1
    while prices[GLOVES] + packs * prices[MASKS] < threshold:
        packs += 1
    check(packs == CART[MASKS], f"recomputed: {packs} mask packs reach ${threshold / 100:.2f}")
    subtotal = sum(r["quantity"] * r["price"] for r in rows)
    ok = subtotal == SUBTOTAL and subtotal >= threshold
    check(ok, f"cart subtotal ${subtotal / 100:.2f} is ${SUBTOTAL / 100:.2f}, which ships free")


def check_log(conn: sqlite3.Connection) -> None:
    # a mistyped password changes nothing: its failed sign-in is no change to the store
    rows = conn.execute("SELECT * FROM audit_log WHERE action != 'auth.login_failed' ORDER BY id").fetchall()
    check(all(r["site"] == "shop" and r["actor"] == EMAIL for r in rows), "every logged action is Nolan's, in the shop")
    extra = sorted({r["action"] for r in rows} - ALLOWED)
    check(not extra, f"only sign-in, review and cart actions (unexpected: {extra})")
    posted = sum(r["action"] == "review.create" for r in rows)
    check(posted == len(REVIEWS), f"exactly {len(REVIEWS)} reviews posted (got {posted})")
    check(any(r["action"] == "auth.login" for r in rows), "signed in through the shop")


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    path = data / "store.db"
    if not check(path.is_file(), f"store.db present in {data}"):
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    check_reviews(conn)
    check_cart(conn)
    check_log(conn)
    for sql, want in SEED.items():
        check(digest(conn, sql) == want, f"unchanged since the seed: {sql[:80]}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
