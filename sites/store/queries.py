"""Reads both store apps need: orders with their lines and history, addresses, product ratings."""

from __future__ import annotations

import sqlite3
from typing import Any

RATINGS_JOIN = (
    "LEFT JOIN (SELECT product_id, AVG(rating) AS avg_rating, COUNT(*) AS review_count FROM reviews"
    " WHERE status = 'approved' GROUP BY product_id) r ON r.product_id = p.id"
)


def order_by_number(conn: sqlite3.Connection, number: str) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM orders WHERE number = ?", (number,)).fetchone()


def order_detail(conn: sqlite3.Connection, order: sqlite3.Row) -> dict[str, Any]:
    items = conn.execute(
        "SELECT oi.*, p.slug AS product_slug, p.status AS product_status FROM order_items oi"
        " LEFT JOIN products p ON p.id = oi.product_id WHERE oi.order_id = ? ORDER BY oi.id",
        (order["id"],),
    ).fetchall()
    history = conn.execute(
        "SELECT * FROM order_history WHERE order_id = ? ORDER BY created_at, id", (order["id"],)
    ).fetchall()
    return {"order": order, "items": items, "history": history}


def add_history(
    conn: sqlite3.Connection, order_id: int, status: str, comment: str, author: str, now: str, notify: bool = False
) -> None:
    conn.execute(
        "INSERT INTO order_history (order_id, status, comment, author, notify_customer, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (order_id, status, comment, author, int(notify), now),
    )


def restock(conn: sqlite3.Connection, order_id: int) -> None:
    """Put a cancelled order's items back on the shelf."""
    conn.execute(
        "UPDATE products SET stock = stock + (SELECT COALESCE(SUM(quantity), 0) FROM order_items"
        " WHERE order_items.order_id = ? AND order_items.product_id = products.id)"
        " WHERE id IN (SELECT product_id FROM order_items WHERE order_id = ?)",
        (order_id, order_id),
    )


def addresses(conn: sqlite3.Connection, customer_id: int) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT * FROM addresses WHERE customer_id = ? ORDER BY is_default DESC, id", (customer_id,)
    ).fetchall()
