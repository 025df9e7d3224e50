"""The admin panel as a :class:`~mcpfleet.sites.common.web.Site`: staff accounts, roles and permissions."""

from __future__ import annotations

import sqlite3
from typing import Any

from starlette.exceptions import HTTPException

from mcpfleet.sites.common.web import Page, RouteTable
from mcpfleet.sites.store import logic

routes = RouteTable()

ROLES = {"administrator": "Administrator", "manager": "Manager", "support": "Support"}
_ALL = ("orders.edit", "products.edit", "customers.edit", "reviews.moderate", "coupons.edit", "settings.edit")
PERMISSIONS: dict[str, tuple[str, ...]] = {
    "administrator": _ALL,
    "manager": tuple(p for p in _ALL if p != "settings.edit"),
    "support": ("orders.edit", "reviews.moderate"),
}
WHAT = {
    "orders.edit": "change orders",
    "products.edit": "edit products",
    "customers.edit": "edit customers",
    "reviews.moderate": "moderate reviews",
    "coupons.edit": "manage coupons",
    "settings.edit": "change store settings",
}


def load_staff(conn: sqlite3.Connection, user_id: int) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM admin_users WHERE id = ? AND is_active = 1", (user_id,)).fetchone()


def staff(page: Page, permission: str | None = None) -> sqlite3.Row:
    """The signed-in staff member; with ``permission``, a 403 page unless their role grants it."""
    user = page.require_user()
    if permission is not None and not can(user, permission):
        raise HTTPException(
            403, f"Your role ({ROLES[user['role']]}) is not allowed to {WHAT[permission]}. Ask an administrator."
        )
    return user


def can(user: sqlite3.Row | None, permission: str) -> bool:
    return user is not None and permission in PERMISSIONS.get(user["role"], ())


def _layout(page: Page) -> dict[str, Any]:
    return {
        "can": lambda permission: can(page.user, permission),
        "roles": ROLES,
        "statuses": logic.STATUSES,
        "badges": logic.STATUS_BADGE,
    }
