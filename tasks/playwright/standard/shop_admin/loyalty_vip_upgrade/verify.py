#!/usr/bin/env python3
"""Verifier for shop_admin/loyalty_vip_upgrade.

Reads the trial's store.db (``MCPFLEET_SITES_DATA``) and the final assistant message (``MCP_MESSAGES``). Pinned to
the seed: the active General customers with the highest lifetime value are Evan Olson (262, $6,992.14), Priya
Williams (212, $4,644.15) and Savannah Jones (205, $2,685.38); Liam Walker ($4,733.12) is wholesale and does not
count. All three move to VIP and nothing else changes on any customer. The coupon LOYALOLSON takes $139.00 off
(2% of $6,992.14 is $139.84, rounded down), from $154.00 (May 2025's average order, $154.39, rounded down), runs
2025-06-14 to 2025-09-30 and is usable once. Evan's orders export (42 rows, a search and no other filter) is in
the audit log; nothing else was changed, and the answer lists the three customers and the coupon exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from pathlib import Path

PROMOTED = {262: "Evan Olson", 212: "Priya Williams", 205: "Savannah Jones"}
EXPECTED = [
    "1. Evan Olson | evan.olson@example.org | $6,992.14",
    "2. Priya Williams | priya_williams@example.net | $4,644.15",
    "3. Savannah Jones | savannahj@example.com | $2,685.38",
    "Coupon LOYALOLSON: $139.00 off, minimum $154.00",
]
COUPON = {
    "code": "LOYALOLSON",
    "description": "Loyalty reward for Evan Olson",
    "kind": "fixed",
    "amount": 13900,
    "min_subtotal_cents": 15400,
    "starts_on": "2025-06-14",
    "expires_on": "2025-09-30",
    "is_active": 1,
    "usage_limit": 1,
    "times_used": 0,
}
TOP_ORDERS = 42  # orders of customer 262, all placed with evan.olson@example.org
RANKED = re.compile(r"^(\d)\.\s*(.+?)\s*\|\s*(\S+@\S+)\s*\|\s*(\$[\d,]+\.\d\d)$")
COUPON_LINE = re.compile(r"^Coupon\s+([A-Z0-9]+)\s*:\s*(\$[\d,]+\.\d\d)\s+off,\s*minimum\s+(\$[\d,]+\.\d\d)\.?$")
FINGERPRINTS = {
    "SELECT * FROM customers WHERE id NOT IN (262, 212, 205) ORDER BY id": (317, "076e98ebf1b94015063b4917089c24e7"),
    "SELECT id, email, password_hash, first_name, last_name, phone, is_active, newsletter, created_at FROM customers"
    " WHERE id IN (262, 212, 205) ORDER BY id": (3, "1e16077ed6dd7b8c7c63967706fea130"),
    "SELECT * FROM coupons WHERE code != 'LOYALOLSON' ORDER BY code": (7, "97fe7fc6e15a88103a25cab9e74a2a0d"),
    "SELECT * FROM orders ORDER BY id": (860, "35ec4bce06fa4d5fa655386254b6cc13"),
    "SELECT * FROM order_items ORDER BY id": (1649, "2bab2e094a9a3351e4c7619dc0dd550d"),
    "SELECT * FROM order_history ORDER BY id": (3205, "c8a7e82423b2fe315441c56de7ccada8"),
    "SELECT * FROM products ORDER BY id": (455, "20f2cb4ff6693f756e458e725c6c7c27"),
    "SELECT * FROM addresses ORDER BY id": (433, "d7b0249ad6003e3ec2334f92dbf33113"),
    "SELECT * FROM store_settings ORDER BY key": (6, "34bf0a5ffa1e155a8385b3c37b5d9fe6"),
    "SELECT * FROM reviews ORDER BY id": (1946, "df053699b00384ec2c915a00d5738428"),
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


def normalise(line: str) -> str | None:
    line = line.strip().strip("`").replace("**", "").strip()
    if m := RANKED.match(line):
        return f"{m[1]}. {m[2]} | {m[3]} | {m[4]}"
    if m := COUPON_LINE.match(line):
        return f"Coupon {m[1]}: {m[2]} off, minimum {m[3]}"
    return None


def check_store(conn: sqlite3.Connection) -> None:
    groups = {r["id"]: r["customer_group"] for r in conn.execute("SELECT id, customer_group FROM customers")}
    for cid, name in PROMOTED.items():
        check(groups[cid] == "vip", f"{name} moved to VIP (got {groups[cid]})")
    coupon = conn.execute("SELECT * FROM coupons WHERE code = ?", (COUPON["code"],)).fetchone()
    if check(coupon is not None, f"coupon {COUPON['code']} exists"):
        for column, want in COUPON.items():
            check(coupon[column] == want, f"coupon {column} = {want!r} (got {coupon[column]!r})")
    for sql, want in FINGERPRINTS.items():
        check(digest(conn, sql) == want, f"unchanged: {sql[:80]}")

    writes = conn.execute("SELECT * FROM audit_log WHERE action NOT LIKE 'auth.%' ORDER BY id").fetchall()
    check(all(r["site"] == "admin" and r["actor"] == "admin" for r in writes), "every change made by admin")
    updates = [r for r in writes if r["action"] == "customer.update"]
    check(sorted(int(r["target_id"]) for r in updates) == sorted(PROMOTED), "one update per promoted customer")
    for r in updates:
        changed = json.loads(r["details"]).get("changed", {})
        check(changed == {"customer_group": ["general", "vip"]}, f"customer {r['target_id']}: only general -> VIP")
    creates = [r["target_id"] for r in writes if r["action"] == "coupon.create"]
    check(creates == [COUPON["code"]], f"exactly one coupon created ({creates})")
    exports = [json.loads(r["details"]) for r in writes if r["action"] == "orders.export"]
    ok = [
        d
        for d in exports
        if d.get("rows") == TOP_ORDERS
        and d.get("filters", {}).get("q")
        and not {"status", "from", "to"} & set(d.get("filters", {}))
    ]
    check(bool(ok), f"orders export of exactly Evan Olson's {TOP_ORDERS} orders downloaded ({exports})")
    allowed = {"customer.update", "coupon.create", "orders.export", "report.export_sales-by-month"}
    other = sorted({r["action"] for r in writes} - allowed - {"report.export_product-sales"})
    check(not other, f"no other changes ({other})")


def main() -> int:
    data = os.environ.get("MCPFLEET_SITES_DATA") or (sys.argv[1] if len(sys.argv) > 1 else "")
    path = Path(data) / "store.db"
    if not check(path.is_file(), f"store.db present in {data!r}"):
        return 1
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    check_store(conn)
    answer = final_answer()
    check(bool(answer.strip()), "there is a final answer")
    got = [n for n in (normalise(ln) for ln in answer.splitlines()) if n is not None]
    check(len(got) == len(EXPECTED), f"the answer has exactly {len(EXPECTED)} formatted lines ({len(got)})")
    for i, want in enumerate(EXPECTED):
        have = got[i] if i < len(got) else "(missing)"
        check(have == want, f"answer line {i + 1}: {have!r} == {want!r}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
