"""The store's business rules, used by the shop, the admin panel and the seed generator alike, so seeded orders
obey the same arithmetic as orders placed during a trial (a verifier can recompute any total)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

RowLike = sqlite3.Row | Mapping[str, Any]

SHIPPING_METHODS: dict[str, tuple[str, int]] = {
    "standard": ("Standard (5–7 business days)", 599),
    "expedited": ("Expedited (2–3 business days)", 1499),
    "overnight": ("Overnight (next business day)", 2999),
}
PAYMENT_METHODS: dict[str, str] = {"card": "Credit card", "bank_transfer": "Bank transfer"}
STATUSES: dict[str, str] = {
    "pending": "Pending",
    "processing": "Processing",
    "on_hold": "On hold",
    "shipped": "Shipped",
    "delivered": "Delivered",
    "cancelled": "Cancelled",
    "refunded": "Refunded",
}
# Which status an order may move to from each status (admin panel); cancelled and refunded are final.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "pending": ("processing", "on_hold", "cancelled"),
    "processing": ("shipped", "on_hold", "cancelled"),
    "on_hold": ("processing", "cancelled"),
    "shipped": ("delivered",),
    "delivered": ("refunded",),
    "cancelled": (),
    "refunded": (),
}
CUSTOMER_CANCELLABLE = ("pending", "processing")
STATUS_BADGE = {
    "pending": "amber",
    "processing": "blue",
    "on_hold": "amber",
    "shipped": "blue",
    "delivered": "green",
    "cancelled": "red",
    "refunded": "",
}
DEFAULT_SETTINGS: dict[str, str] = {
    "store_name": "Larkspur Goods",
    "support_email": "support@larkspur.example",
    "free_shipping_threshold_cents": "7500",
    "tax_rate_percent": "7.25",
    "low_stock_threshold": "5",
    "reviews_require_approval": "1",
}


def settings(conn: sqlite3.Connection) -> dict[str, str]:
    values = dict(DEFAULT_SETTINGS)
    values.update({r["key"]: r["value"] for r in conn.execute("SELECT key, value FROM store_settings")})
    return values


def unit_price(product: RowLike) -> int:
    """What a customer pays per item: the sale price when there is one."""
    sale = product["sale_price_cents"]
    return int(sale if sale else product["price_cents"])


@dataclass(frozen=True)
class Totals:
    subtotal: int
    discount: int
    shipping: int
    tax: int

    @property
    def total(self) -> int:
        return self.subtotal - self.discount + self.shipping + self.tax


def coupon_problem(coupon: RowLike | None, subtotal: int, today: str) -> str | None:
    """Why ``coupon`` cannot be used on this subtotal today, or None when it can."""
    if coupon is None:
        return "That coupon code is not valid."
    if not coupon["is_active"]:
        return "That coupon code is no longer active."
    if str(coupon["starts_on"]) > today:
        return "That coupon code is not valid yet."
    if coupon["expires_on"] and str(coupon["expires_on"]) < today:
        return f"That coupon code expired on {coupon['expires_on']}."
    limit = coupon["usage_limit"]
    if limit is not None and int(coupon["times_used"]) >= int(limit):
        return "That coupon code has reached its usage limit."
    minimum = int(coupon["min_subtotal_cents"])
    if subtotal < minimum:
        return f"That coupon code needs a subtotal of at least ${minimum / 100:,.2f}."
    return None


def _percent(amount: int, percent: Decimal) -> int:
    return int((Decimal(amount) * percent / 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def compute_totals(subtotal: int, shipping_method: str, coupon: RowLike | None, store: dict[str, str]) -> Totals:
    """Discount from the coupon, shipping (standard is free from the threshold on), tax on the discounted goods."""
    discount = 0
    free_shipping = False
    if coupon is not None:
        kind, amount = str(coupon["kind"]), int(coupon["amount"])
        if kind == "percent":
            discount = _percent(subtotal, Decimal(amount))
        elif kind == "fixed":
            discount = min(amount, subtotal)
        else:
            free_shipping = True
    goods = subtotal - discount
    shipping = SHIPPING_METHODS[shipping_method][1]
    if shipping_method == "standard" and (free_shipping or goods >= int(store["free_shipping_threshold_cents"])):
        shipping = 0
    tax = _percent(goods, Decimal(store["tax_rate_percent"]))
    return Totals(subtotal=subtotal, discount=discount, shipping=shipping, tax=tax)
