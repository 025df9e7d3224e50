"""The shop as a :class:`~mcpfleet.sites.common.web.Site`: its routes, user loading and layout context."""

from __future__ import annotations

import sqlite3
from typing import Any

from mcpfleet.sites.common.web import Page, RouteTable
from mcpfleet.sites.store import logic

routes = RouteTable()


def load_customer(conn: sqlite3.Connection, user_id: int) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM customers WHERE id = ? AND is_active = 1", (user_id,)).fetchone()


def _layout(page: Page) -> dict[str, Any]:
    cart_count = 0
    if page.user is not None:
        row = page.db.execute(
            "SELECT COALESCE(SUM(quantity), 0) FROM cart_items WHERE customer_id = ?", (page.user["id"],)
        ).fetchone()
        cart_count = int(row[0])
    categories = page.db.execute(
        "SELECT slug, name FROM categories WHERE parent_id IS NULL ORDER BY position"
    ).fetchall()
    store = logic.settings(page.db)
    return {
        "cart_count": cart_count,
        "top_categories": categories,
        "store": store,
        "site_title": store["store_name"],
        "free_shipping_from": int(store["free_shipping_threshold_cents"]),
    }
