#!/usr/bin/env python3
"""Verifier for shop_account/outdoor_kit_shortlist.

Recomputes, from the trial's store.db, the best-rated active product per Outdoors subcategory that is in stock,
costs at most $50.00 as paid (sale price first) and has at least 5 approved reviews (average rating, ties by
more reviews, as the shop's rating sort orders them), and checks them against the seed's answer: Camping
CAM-2085 (3.4, 9 reviews; the 4.0 sleeping pad has 2 and the tent costs $200), Hiking HIK-2210 (4.2, 5; the
4.3 socks have 3), Cycling CYC-2298 (4.5, 15). Noah's wishlist must be exactly these three, his cart exactly
2 x the lantern ($41.98), and the final assistant message (MCP_MESSAGES) must give the four report lines.
Nothing else may change: other wishlists and carts, and every other table, keep their seeded fingerprints.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from pathlib import Path

NOAH = 4
EMAIL = "noah.kim@example.net"
EXPECTED = {  # subcategory: (product id, SKU, name, price in cents, reviews)
    "Camping": (155, "CAM-2085", "Basecamp 3-Season Lantern", 2099, 9),
    "Hiking": (173, "HIK-2210", "Summit Supply Lightweight Trekking Poles, White", 4995, 5),
    "Cycling": (186, "CYC-2298", "Kestrel Heavy-Duty Floor Pump", 3849, 15),
}
CART = {155: 2}
SUBTOTAL = 4198
LINE = re.compile(
    r"^\W*(Camping|Hiking|Cycling)[*_\s]*:[*_\s]*([A-Z]{3}-\d{4})\s*\|\s*(.+?)\s*\|\s*\$\s*([\d,]+\.\d{2})\s*\|"
    r"\s*(\d(?:\.\d+)?)\s*(?:stars?\s*)?\(\s*(\d+)\s+reviews?\s*\)\W*$",
    re.I,
)
TOTAL = re.compile(r"^\W*Cart subtotal[*_\s]*:[*_\s]*\$\s*([\d,]+\.\d{2})\W*$", re.I)
ALLOWED = {"auth.login", "auth.logout", "wishlist.add", "wishlist.remove", "cart.add", "cart.update", "cart.remove"}
SEED = {  # (rows, md5) of what this task must leave as seeded
    "SELECT * FROM wishlist_items WHERE customer_id != 4 ORDER BY customer_id, product_id": (
        182,
        "be3f3f5931cb70627a140beb750d9f96",
    ),
    "SELECT * FROM cart_items WHERE customer_id != 4 ORDER BY customer_id, product_id": (
        94,
        "06e81c9a746d19caf144438a380e8445",
    ),
    "SELECT * FROM products ORDER BY id": (455, "20f2cb4ff6693f756e458e725c6c7c27"),
    "SELECT * FROM orders ORDER BY id": (860, "35ec4bce06fa4d5fa655386254b6cc13"),
    "SELECT * FROM order_items ORDER BY id": (1649, "2bab2e094a9a3351e4c7619dc0dd550d"),
    "SELECT * FROM order_history ORDER BY id": (3205, "c8a7e82423b2fe315441c56de7ccada8"),
    "SELECT * FROM customers ORDER BY id": (320, "fb387be58dfcabcb6f6f67a358bb7bb3"),
    "SELECT * FROM addresses ORDER BY id": (433, "d7b0249ad6003e3ec2334f92dbf33113"),
    "SELECT * FROM reviews ORDER BY id": (1946, "df053699b00384ec2c915a00d5738428"),
    "SELECT * FROM coupons ORDER BY code": (7, "97fe7fc6e15a88103a25cab9e74a2a0d"),
    "SELECT * FROM store_settings ORDER BY key": (6, "34bf0a5ffa1e155a8385b3c37b5d9fe6"),
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


def final_answer() -> str:
    path = os.environ.get("MCP_MESSAGES")
    if not path or not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as fh:
        items = json.load(fh)
    for item in reversed(items):
        if item.get("type") == "message" and item.get("role") == "assistant" and item.get("status") == "completed":
            parts = item.get("content") or []
            return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "output_text")
    return ""


def winners(conn: sqlite3.Connection) -> dict[str, tuple[int, float, int]]:
    """Per Outdoors subcategory: (product id, average rating, reviews) of the best qualifying product."""
    rows = conn.execute(
        "SELECT c.name AS cat, p.id, r.avg_rating, r.review_count FROM products p"
        " JOIN categories c ON c.id = p.category_id"
        " JOIN (SELECT product_id, AVG(rating) AS avg_rating, COUNT(*) AS review_count FROM reviews"
        " WHERE status = 'approved' GROUP BY product_id) r ON r.product_id = p.id"
        " WHERE c.parent_id = (SELECT id FROM categories WHERE slug = 'outdoors') AND p.status = 'active'"
        " AND p.stock > 0 AND COALESCE(p.sale_price_cents, p.price_cents) <= 5000 AND r.review_count >= 5"
        " ORDER BY r.avg_rating DESC, r.review_count DESC, p.id"
    ).fetchall()
    best: dict[str, tuple[int, float, int]] = {}
    for r in rows:
        best.setdefault(r["cat"], (r["id"], r["avg_rating"], r["review_count"]))
    return best


def check_answer(best: dict[str, tuple[int, float, int]]) -> None:
    lines = [ln.strip().strip("`").strip() for ln in final_answer().splitlines() if ln.strip().strip("`").strip()]
    found = [m for m in (LINE.match(ln) for ln in lines) if m]
    got_cats = [m.group(1).capitalize() for m in found]
    check(got_cats == list(EXPECTED), f"one report line per subcategory, in order (got {got_cats})")
    for m in found:
        cat = m.group(1).capitalize()
        _, sku, name, price, reviews = EXPECTED[cat]
        avg = best.get(cat, (0, 0.0, 0))[1]
        check(m.group(2).upper() == sku, f"{cat}: SKU {sku} (got {m.group(2)})")
        check(" ".join(m.group(3).split()).casefold() == name.casefold(), f"{cat}: name {name!r} (got {m.group(3)!r})")
        check(round(float(m.group(4).replace(",", "")) * 100) == price, f"{cat}: price ${price / 100:.2f}")
        check(abs(float(m.group(5)) - avg) <= 0.051, f"{cat}: average rating {avg:.1f} (got {m.group(5)})")
        check(int(m.group(6)) == reviews, f"{cat}: {reviews} reviews (got {m.group(6)})")
    totals = [t for t in (TOTAL.match(ln) for ln in lines) if t]
    ok = len(totals) == 1 and round(float(totals[0].group(1).replace(",", "")) * 100) == SUBTOTAL
    check(ok, f"cart subtotal ${SUBTOTAL / 100:.2f} reported once (got {[t.group(1) for t in totals]})")


def main() -> int:
    data = Path(os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "."))
    path = data / "store.db"
    if not check(path.is_file(), f"store.db present in {data}"):
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    best = winners(conn)
    want_ids = {cat: v[0] for cat, v in EXPECTED.items()}
    check({cat: v[0] for cat, v in best.items()} == want_ids, f"recomputed winners match the seed's {want_ids}")
    wishlist = {r[0] for r in conn.execute("SELECT product_id FROM wishlist_items WHERE customer_id = ?", (NOAH,))}
    check(wishlist == set(want_ids.values()), f"Noah's wishlist is exactly the three (got {sorted(wishlist)})")
    cart = dict(conn.execute("SELECT product_id, quantity FROM cart_items WHERE customer_id = ?", (NOAH,)).fetchall())
    check(cart == CART, f"Noah's cart is 2 x the lantern, the cheapest (got {cart})")
    # a mistyped password changes nothing: its failed sign-in is no change to the store
    rows = conn.execute("SELECT * FROM audit_log WHERE action != 'auth.login_failed' ORDER BY id").fetchall()
    check(all(r["site"] == "shop" and r["actor"] == EMAIL for r in rows), "every logged action is Noah's")
    extra = sorted({r["action"] for r in rows} - ALLOWED)
    check(not extra, f"only wishlist and cart actions (unexpected: {extra})")
    for sql, want in SEED.items():
        check(digest(conn, sql) == want, f"unchanged since the seed: {sql[:80]}")
    check_answer(best)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
