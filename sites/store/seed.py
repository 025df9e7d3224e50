"""Deterministic generator of the store database (shop + admin): catalog, customers, orders, reviews, carts.

``build(path, seed)`` writes a complete database; the same seed gives identical content. The named accounts in
:data:`CUSTOMERS` and :data:`ADMINS` are the documented credentials (``credentials.json`` beside the shop and
admin packages); every other customer's password is :data:`DEFAULT_PASSWORD`.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from mcpfleet.sites.common import seeding
from mcpfleet.sites.common.security import hash_password
from mcpfleet.sites.store import content, logic

DEFAULT_SEED = 20250614
TODAY = date(2025, 6, 14)
CLOCK_START = datetime(2025, 6, 14, 9, 0)
SCHEMA = (Path(__file__).resolve().parent / "schema.sql").read_text(encoding="utf-8")
DEFAULT_PASSWORD = "shopper2025"
N_CUSTOMERS = 320
N_ORDERS = 860


@dataclass(frozen=True)
class NamedCustomer:
    email: str
    password: str
    first: str
    last: str
    group: str
    active: bool
    note: str


CUSTOMERS = (
    NamedCustomer(
        "emma.lopez@example.com",
        "Garden2025",
        "Emma",
        "Lopez",
        "general",
        True,
        "Regular customer: orders in every status (one pending and one processing, both cancellable), "
        "two saved addresses, 2 items in her cart, 3 on her wishlist.",
    ),
    NamedCustomer(
        "olivia.chen@example.org",
        "Sunflower9",
        "Olivia",
        "Chen",
        "vip",
        True,
        "VIP group; several delivered orders, one shipped; has written reviews.",
    ),
    NamedCustomer(
        "liam.walker@example.com",
        "Trailmix77",
        "Liam",
        "Walker",
        "wholesale",
        True,
        "Wholesale group; large orders, one on hold.",
    ),
    NamedCustomer(
        "noah.kim@example.net",
        "Bluebird42",
        "Noah",
        "Kim",
        "general",
        True,
        "New customer: no orders, no saved address, empty cart.",
    ),
    NamedCustomer(
        "mason.reed@example.com",
        "Hammer2024",
        "Mason",
        "Reed",
        "general",
        False,
        "Disabled account: sign-in is refused.",
    ),
)


@dataclass(frozen=True)
class NamedAdmin:
    username: str
    password: str
    full_name: str
    email: str
    role: str
    active: bool
    note: str


ADMINS = (
    NamedAdmin(
        "admin",
        "AdminPass2025",
        "Dana Whitfield",
        "dana@larkspur.example",
        "administrator",
        True,
        "Everything, including store settings.",
    ),
    NamedAdmin(
        "mgarcia",
        "Manager2025",
        "Maria Garcia",
        "maria@larkspur.example",
        "manager",
        True,
        "Orders, products, customers, reviews, coupons, reports; not settings.",
    ),
    NamedAdmin(
        "tbennett",
        "Support2025",
        "Tom Bennett",
        "tom@larkspur.example",
        "support",
        True,
        "Views everything; changes order status, adds order comments, moderates reviews; cannot edit products, "
        "customers, coupons or settings.",
    ),
    NamedAdmin(
        "jdoe",
        "Former2024",
        "Jordan Doe",
        "jordan@larkspur.example",
        "support",
        False,
        "Disabled staff account: sign-in is refused.",
    ),
)

COUPONS: tuple[dict[str, Any], ...] = (
    {
        "code": "SUMMER15",
        "description": "15% off orders of $50 or more",
        "kind": "percent",
        "amount": 15,
        "min_subtotal_cents": 5000,
        "starts_on": "2025-06-01",
        "expires_on": "2025-08-31",
        "is_active": 1,
        "usage_limit": None,
    },
    {
        "code": "WELCOME10",
        "description": "10% off for new customers",
        "kind": "percent",
        "amount": 10,
        "min_subtotal_cents": 0,
        "starts_on": "2024-01-01",
        "expires_on": None,
        "is_active": 1,
        "usage_limit": None,
    },
    {
        "code": "SAVE20",
        "description": "$20 off orders of $150 or more",
        "kind": "fixed",
        "amount": 2000,
        "min_subtotal_cents": 15000,
        "starts_on": "2024-01-01",
        "expires_on": "2025-12-31",
        "is_active": 1,
        "usage_limit": None,
    },
    {
        "code": "FREESHIP",
        "description": "Free standard shipping on any order",
        "kind": "free_shipping",
        "amount": 0,
        "min_subtotal_cents": 0,
        "starts_on": "2024-01-01",
        "expires_on": None,
        "is_active": 1,
        "usage_limit": None,
    },
    {
        "code": "SPRING25",
        "description": "25% off spring sale",
        "kind": "percent",
        "amount": 25,
        "min_subtotal_cents": 0,
        "starts_on": "2025-03-20",
        "expires_on": "2025-05-31",
        "is_active": 1,
        "usage_limit": None,
    },
    {
        "code": "VIP30",
        "description": "30% off for VIP customers (paused)",
        "kind": "percent",
        "amount": 30,
        "min_subtotal_cents": 0,
        "starts_on": "2024-06-01",
        "expires_on": None,
        "is_active": 0,
        "usage_limit": None,
    },
    {
        "code": "FLASH50",
        "description": "$50 off, first 25 orders only",
        "kind": "fixed",
        "amount": 5000,
        "min_subtotal_cents": 20000,
        "starts_on": "2025-01-10",
        "expires_on": "2025-12-31",
        "is_active": 1,
        "usage_limit": 25,
    },
)

CARRIERS = ("UPS", "USPS", "FedEx")


def _tracking(rng: random.Random, carrier: str) -> str:
    if carrier == "UPS":
        return "1Z" + "".join(rng.choice("0123456789ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(16))
    if carrier == "USPS":
        return "9400" + "".join(rng.choice("0123456789") for _ in range(18))
    return "".join(rng.choice("0123456789") for _ in range(12))


def _price(rng: random.Random, low: int, high: int) -> int:
    dollars = rng.randint(low, high)
    return dollars * 100 - rng.choice((1, 1, 1, 51, 5, 0)) if dollars > 1 else 99


@dataclass
class _Order:
    created: datetime
    customer_id: int | None
    email: str
    ship: dict[str, str]
    items: list[tuple[dict[str, Any], int]]
    status: str = "pending"
    coupon: dict[str, Any] | None = None
    shipping_method: str = "standard"
    payment_method: str = "card"
    card_last4: str | None = None
    note: str = ""
    history: list[tuple[str, str, str, datetime]] = field(default_factory=list)
    tracking: str | None = None


class _Builder:
    def __init__(self, conn: sqlite3.Connection, seed: int) -> None:
        self.conn = conn
        self.rng = random.Random(seed)
        self.products: list[dict[str, Any]] = []
        self.customers: list[dict[str, Any]] = []
        self.addresses: dict[int, list[dict[str, str]]] = {}

    def insert(self, table: str, row: dict[str, Any]) -> int:
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        cur = self.conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(row.values()))
        return int(cur.lastrowid or 0)

    # -- catalog -------------------------------------------------------------------------------------------
    def catalog(self) -> None:
        rng = self.rng
        names: set[str] = set()
        position = 0
        for top_name, top_slug, top_desc, leaves in content.CATALOG:
            position += 1
            top_id = self.insert(
                "categories",
                {"parent_id": None, "slug": top_slug, "name": top_name, "description": top_desc, "position": position},
            )
            for leaf in leaves:
                position += 1
                leaf_id = self.insert(
                    "categories",
                    {
                        "parent_id": top_id,
                        "slug": leaf.slug,
                        "name": leaf.name,
                        "description": leaf.description,
                        "position": position,
                    },
                )
                words = leaf.slug.split("-")
                code = ("".join(w[0] for w in words[:-1]) + words[-1])[:3].upper()
                for n in range(rng.randint(15, 22)):
                    self.product(leaf, leaf_id, code, n, names)

    def product(self, leaf: content.Leaf, category_id: int, code: str, n: int, names: set[str]) -> None:
        rng = self.rng
        noun, low, high = rng.choice(leaf.types)
        brand = rng.choice(leaf.brands)
        name = f"{brand} {rng.choice(leaf.adjectives)} {noun}"
        variant = rng.choice(leaf.variants) if leaf.variants and rng.random() < 0.7 else ""
        if variant:
            name = f"{name}, {variant}"
        while name in names:
            name = f"{name} ({rng.choice(['2nd Gen', 'Gen 3', 'V2', '2025 Edition', 'Plus'])})"
        names.add(name)
        features = rng.sample(leaf.features, k=min(len(leaf.features), rng.randint(2, 4)))
        intro = rng.choice(
            (
                f"The {name} is built for everyday use.",
                f"Meet the {noun.lower()} our customers keep coming back for.",
                f"{brand}'s {noun.lower()} combines thoughtful design with honest materials.",
                f"Dependable {noun.lower()} from {brand}, made to be used every day.",
            )
        )
        outro = rng.choice(
            (
                "Backed by a 1-year limited warranty.",
                "Free returns within 30 days.",
                "Ships in recyclable packaging.",
                "",
            )
        )
        price = _price(rng, low, high)
        sale = None
        if rng.random() < 0.14:
            sale = int(price * rng.choice((0.7, 0.75, 0.8, 0.85, 0.9))) // 100 * 100 - 1
            sale = sale if 0 < sale < price else None
        stock = seeding.weighted(
            rng, [(0, 0.09), (rng.randint(1, 5), 0.1), (rng.randint(6, 60), 0.5), (rng.randint(61, 400), 0.31)]
        )
        created = seeding.moment(rng, datetime(2023, 3, 1), datetime(2025, 6, 1))
        updated = seeding.moment(rng, created, datetime(2025, 6, 10)) if rng.random() < 0.4 else created
        row = {
            "sku": f"{code}-{1000 + len(self.products) * 7 % 9000 + n}",
            "slug": seeding.slugify(name),
            "name": name,
            "category_id": category_id,
            "brand": brand,
            "description": " ".join(s for s in (intro, *features, outro) if s),
            "price_cents": price,
            "sale_price_cents": sale,
            "stock": stock,
            "status": "disabled" if rng.random() < 0.05 else "active",
            "color": variant if variant in content.COLORS else None,
            "weight_grams": rng.randint(2, 120) * 25,
            "created_at": seeding.iso(created),
            "updated_at": seeding.iso(updated),
        }
        row["id"] = self.insert("products", row)
        row["noun"] = noun
        self.products.append(row)

    # -- people --------------------------------------------------------------------------------------------
    def people(self) -> None:
        rng = self.rng
        taken = {c.email for c in CUSTOMERS}
        for named in CUSTOMERS:
            self.customer(named.first, named.last, named.email, named.password, named.group, named.active)
        while len(self.customers) < N_CUSTOMERS:
            first, last = seeding.person(rng)
            email = seeding.email_for(first, last, rng, taken)
            group = seeding.weighted(rng, [("general", 0.86), ("vip", 0.08), ("wholesale", 0.06)])
            self.customer(first, last, email, DEFAULT_PASSWORD, group, rng.random() > 0.03)
        for admin in ADMINS:
            self.insert(
                "admin_users",
                {
                    "username": admin.username,
                    "email": admin.email,
                    "password_hash": hash_password(admin.password, f"{rng.getrandbits(64):016x}"),
                    "full_name": admin.full_name,
                    "role": admin.role,
                    "is_active": int(admin.active),
                    "created_at": "2023-02-01T09:00:00",
                },
            )

    def customer(self, first: str, last: str, email: str, password: str, group: str, active: bool) -> None:
        rng = self.rng
        created = seeding.moment(rng, datetime(2022, 6, 1), datetime(2025, 6, 12))
        row = {
            "email": email,
            "password_hash": hash_password(password, f"{rng.getrandbits(64):016x}"),
            "first_name": first,
            "last_name": last,
            "phone": seeding.phone(rng) if rng.random() < 0.7 else "",
            "customer_group": group,
            "is_active": int(active),
            "newsletter": int(rng.random() < 0.4),
            "created_at": seeding.iso(created),
        }
        cid = self.insert("customers", row)
        row["id"] = cid
        self.customers.append(row)
        n_addresses = (
            0
            if email == "noah.kim@example.net"
            else (2 if email == "emma.lopez@example.com" else seeding.weighted(rng, [(1, 0.7), (2, 0.22), (3, 0.08)]))
        )
        self.addresses[cid] = []
        for i in range(n_addresses):
            addr = seeding.address(rng)
            full_name = f"{first} {last}" if i == 0 or rng.random() < 0.6 else " ".join(seeding.person(rng))
            self.insert(
                "addresses",
                {"customer_id": cid, "full_name": full_name, **addr, "phone": row["phone"], "is_default": int(i == 0)},
            )
            self.addresses[cid].append({"full_name": full_name, **addr, "phone": str(row["phone"])})

    # -- orders --------------------------------------------------------------------------------------------
    def orders(self, store: dict[str, str]) -> None:
        rng = self.rng
        start, end = datetime(2024, 1, 1), datetime(2025, 6, 14, 8, 30)
        buyers = [
            c
            for c in self.customers
            if c["is_active"] and self.addresses[c["id"]] and c["email"] != "noah.kim@example.net"
        ]
        weights = [rng.paretovariate(1.6) for _ in buyers]
        orders: list[_Order] = []
        for _ in range(N_ORDERS):
            # more recent months are busier, and the last two weeks hold the open orders staff work on
            since = seeding.weighted(rng, [(start, 0.5), (datetime(2025, 1, 1), 0.38), (datetime(2025, 5, 31), 0.12)])
            created = seeding.moment(rng, since, end)
            if rng.random() < 0.09:
                first, last = seeding.person(rng)
                email = f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com".replace("'", "")
                ship = {"full_name": f"{first} {last}", **seeding.address(rng), "phone": seeding.phone(rng)}
                orders.append(self.new_order(created, None, email, ship))
            else:
                buyer = rng.choices(buyers, weights=weights, k=1)[0]
                ship = rng.choice(self.addresses[buyer["id"]])
                orders.append(self.new_order(created, buyer["id"], buyer["email"], ship))
        orders.sort(key=lambda o: o.created)
        for order in orders:
            self.lifecycle(order)
        self.assign_named(orders)
        for number, order in enumerate(orders, start=100001):
            self.write_order(number, order, store)

    def new_order(self, created: datetime, customer_id: int | None, email: str, ship: dict[str, str]) -> _Order:
        rng = self.rng
        sellable = [p for p in self.products if p["created_at"] <= seeding.iso(created)]
        n_items = seeding.weighted(rng, [(1, 0.45), (2, 0.3), (3, 0.15), (4, 0.07), (5, 0.03)])
        picked = rng.sample(sellable, k=min(n_items, len(sellable)))
        items = [(p, seeding.weighted(rng, [(1, 0.78), (2, 0.16), (3, 0.06)])) for p in picked]
        day = created.date().isoformat()
        usable = [
            c
            for c in COUPONS
            if c["starts_on"] <= day and (c["expires_on"] is None or c["expires_on"] >= day) and c["is_active"]
        ]
        coupon = rng.choice(usable) if usable and rng.random() < 0.12 else None
        if coupon is not None and sum(logic.unit_price(p) * q for p, q in items) < coupon["min_subtotal_cents"]:
            coupon = None
        payment = "bank_transfer" if rng.random() < 0.12 else "card"
        return _Order(
            created=created,
            customer_id=customer_id,
            email=email,
            ship=ship,
            items=items,
            coupon=coupon,
            shipping_method=seeding.weighted(rng, [("standard", 0.72), ("expedited", 0.22), ("overnight", 0.06)]),
            payment_method=payment,
            card_last4=f"{rng.randint(0, 9999):04d}" if payment == "card" else None,
            note=rng.choice(content.CUSTOMER_NOTES),
        )

    def lifecycle(self, order: _Order) -> None:
        """Pick the order's status by its age and write the history that leads there."""
        rng = self.rng
        age = (TODAY - order.created.date()).days
        if age <= 2:
            options = [("pending", 0.3), ("processing", 0.5), ("on_hold", 0.1), ("cancelled", 0.1)]
        elif age <= 7:
            options = [
                ("processing", 0.25),
                ("shipped", 0.5),
                ("on_hold", 0.1),
                ("cancelled", 0.1),
                ("delivered", 0.05),
            ]
        elif age <= 14:
            options = [("shipped", 0.25), ("delivered", 0.6), ("cancelled", 0.1), ("on_hold", 0.05)]
        else:
            # a few old orders were forgotten on hold or in processing: the kind of mess staff clean up
            options = [
                ("delivered", 0.84),
                ("cancelled", 0.08),
                ("refunded", 0.06),
                ("on_hold", 0.012),
                ("processing", 0.008),
            ]
        final = seeding.weighted(rng, options)
        if order.payment_method == "bank_transfer" and final == "processing" and age <= 2:
            final = "pending"
        paths = {
            "pending": ["pending"],
            "processing": ["pending", "processing"],
            "on_hold": ["pending", "on_hold"],
            "shipped": ["pending", "processing", "shipped"],
            "delivered": ["pending", "processing", "shipped", "delivered"],
            "cancelled": ["pending", "cancelled"] if rng.random() < 0.6 else ["pending", "processing", "cancelled"],
            "refunded": ["pending", "processing", "shipped", "delivered", "refunded"],
        }
        when = order.created
        limit = datetime(2025, 6, 14, 8, 59)
        carrier = rng.choice(CARRIERS)
        for i, status in enumerate(paths[final]):
            if i == 0:
                order.history.append((status, "Order placed.", "system", when))
                continue
            when = min(when + timedelta(hours=rng.randint(2, 60), minutes=rng.randint(0, 59)), limit)
            comment = rng.choice(content.ORDER_COMMENTS[status]).format(carrier=carrier)
            author = rng.choice(("Maria Garcia", "Tom Bennett", "system")) if status != "delivered" else "system"
            order.history.append((status, comment, author, when))
            if status == "shipped":
                order.tracking = f"{carrier} {_tracking(rng, carrier)}"
        order.status = final

    def assign_named(self, orders: list[_Order]) -> None:
        """Give the named customers the orders their credentials note promises."""
        wanted = {
            "emma.lopez@example.com": [
                "pending",
                "processing",
                "shipped",
                "delivered",
                "delivered",
                "delivered",
                "delivered",
                "cancelled",
                "refunded",
                "delivered",
                "delivered",
                "on_hold",
            ],
            "olivia.chen@example.org": ["shipped", "delivered", "delivered", "delivered", "delivered", "delivered"],
            "liam.walker@example.com": ["on_hold", "delivered", "delivered", "processing", "delivered"],
        }
        by_email = {c["email"]: c for c in self.customers}
        used: set[int] = set()
        for email, statuses in wanted.items():
            customer = by_email[email]
            for status in statuses:
                candidates = [i for i, o in enumerate(orders) if i not in used and o.status == status and o.customer_id]
                if candidates:
                    index = self.rng.choice(candidates)
                    order = orders[index]
                    used.add(index)
                    order.customer_id = int(customer["id"])
                    order.email = email
                    order.ship = self.rng.choice(self.addresses[customer["id"]])
                    if email == "liam.walker@example.com":
                        order.items = [(p, q * 4) for p, q in order.items]
        for index, order in enumerate(orders):  # nobody else buys as a named customer
            if index not in used and order.customer_id is not None and order.email in wanted:
                other = [
                    c
                    for c in self.customers
                    if c["email"] not in wanted
                    and self.addresses[c["id"]]
                    and c["is_active"]
                    and c["email"] != "noah.kim@example.net"
                ]
                buyer = other[index % len(other)]
                order.customer_id, order.email = int(buyer["id"]), str(buyer["email"])
                order.ship = self.addresses[buyer["id"]][0]

    def write_order(self, number: int, order: _Order, store: dict[str, str]) -> None:
        subtotal = sum(logic.unit_price(p) * q for p, q in order.items)
        totals = logic.compute_totals(subtotal, order.shipping_method, order.coupon, store)
        ship = order.ship
        order_id = self.insert(
            "orders",
            {
                "number": str(number),
                "customer_id": order.customer_id,
                "email": order.email,
                "status": order.status,
                "created_at": seeding.iso(order.created),
                "updated_at": seeding.iso(order.history[-1][3]),
                "subtotal_cents": totals.subtotal,
                "discount_cents": totals.discount,
                "shipping_cents": totals.shipping,
                "tax_cents": totals.tax,
                "total_cents": totals.total,
                "coupon_code": order.coupon["code"] if order.coupon else None,
                "shipping_method": order.shipping_method,
                "payment_method": order.payment_method,
                "card_last4": order.card_last4,
                "ship_name": ship["full_name"],
                "ship_line1": ship["line1"],
                "ship_line2": ship["line2"],
                "ship_city": ship["city"],
                "ship_region": ship["region"],
                "ship_postcode": ship["postcode"],
                "ship_country": ship["country"],
                "ship_phone": ship["phone"],
                "tracking_number": order.tracking,
                "customer_note": order.note,
            },
        )
        for product, quantity in order.items:
            price = logic.unit_price(product)
            self.insert(
                "order_items",
                {
                    "order_id": order_id,
                    "product_id": product["id"],
                    "sku": product["sku"],
                    "name": product["name"],
                    "unit_price_cents": price,
                    "quantity": quantity,
                    "line_total_cents": price * quantity,
                },
            )
        for status, comment, author, when in order.history:
            self.insert(
                "order_history",
                {
                    "order_id": order_id,
                    "status": status,
                    "comment": comment,
                    "author": author,
                    "notify_customer": int(author != "system" and status in ("shipped", "cancelled")),
                    "created_at": seeding.iso(when),
                },
            )
        if order.coupon is not None:
            self.conn.execute("UPDATE coupons SET times_used = times_used + 1 WHERE code = ?", (order.coupon["code"],))

    # -- reviews, carts, wishlists -------------------------------------------------------------------------
    def reviews(self) -> None:
        rng = self.rng
        active = [c for c in self.customers if c["is_active"]]
        for product in self.products:
            count = seeding.weighted(
                rng, [(0, 0.2), (rng.randint(1, 4), 0.45), (rng.randint(5, 9), 0.25), (rng.randint(10, 16), 0.1)]
            )
            quality = rng.uniform(2.6, 4.9)
            for _ in range(count):
                rating = max(1, min(5, round(rng.gauss(quality, 1.0))))
                author = rng.choice(active)
                if rng.random() < 0.01:
                    author = self.customers[1]  # olivia.chen writes reviews
                bucket = "good" if rating >= 4 else ("mixed" if rating == 3 else "bad")
                body = " ".join(
                    (
                        rng.choice(content.REVIEW_OPENERS[rating]).format(noun=product["noun"].lower()),
                        *rng.sample(content.REVIEW_DETAILS[bucket], k=rng.randint(1, 2)),
                    )
                )
                created = seeding.moment(rng, datetime.fromisoformat(product["created_at"]), datetime(2025, 6, 13, 22))
                self.insert(
                    "reviews",
                    {
                        "product_id": product["id"],
                        "customer_id": author["id"],
                        "author_name": f"{author['first_name']} {author['last_name'][0]}.",
                        "rating": rating,
                        "title": rng.choice(content.REVIEW_TITLES[rating]),
                        "body": body,
                        "status": seeding.weighted(rng, [("approved", 0.9), ("pending", 0.07), ("rejected", 0.03)]),
                        "created_at": seeding.iso(created),
                    },
                )

    def carts(self) -> None:
        rng = self.rng
        in_stock = [p for p in self.products if p["status"] == "active" and p["stock"] > 5]
        shoppers = [
            c
            for c in self.customers
            if c["is_active"] and c["email"] not in ("noah.kim@example.net", "emma.lopez@example.com")
        ]
        for customer in rng.sample(shoppers, k=45):
            for product in rng.sample(in_stock, k=rng.randint(1, 3)):
                self.cart_item(customer, product, rng.randint(1, 2))
        emma = self.customers[0]
        for product in rng.sample(in_stock, k=2):
            self.cart_item(emma, product, 1)
        for customer in [emma, *rng.sample(shoppers, k=60)]:
            k = 3 if customer is emma else rng.randint(1, 5)
            for product in rng.sample(self.products, k=k):
                added = seeding.moment(rng, datetime(2025, 1, 1), datetime(2025, 6, 13))
                self.insert(
                    "wishlist_items",
                    {"customer_id": customer["id"], "product_id": product["id"], "added_at": seeding.iso(added)},
                )

    def cart_item(self, customer: dict[str, Any], product: dict[str, Any], quantity: int) -> None:
        added = seeding.moment(self.rng, datetime(2025, 5, 1), datetime(2025, 6, 13))
        self.insert(
            "cart_items",
            {
                "customer_id": customer["id"],
                "product_id": product["id"],
                "quantity": quantity,
                "added_at": seeding.iso(added),
            },
        )


def build(path: Path, seed: int = DEFAULT_SEED) -> None:
    """Write a fresh store database to ``path`` (replaced if present)."""
    conn = seeding.create_database(path, SCHEMA)
    try:
        conn.execute("BEGIN")
        builder = _Builder(conn, seed)
        seeding.write_meta(
            conn,
            {"kind": "store", "seed": str(seed), "today": TODAY.isoformat(), "clock": seeding.iso(CLOCK_START)},
        )
        store = dict(logic.DEFAULT_SETTINGS)
        conn.executemany("INSERT INTO store_settings (key, value) VALUES (?, ?)", sorted(store.items()))
        for coupon in COUPONS:
            builder.insert("coupons", {**coupon, "times_used": 0})
        builder.catalog()
        builder.people()
        builder.orders(store)
        builder.reviews()
        builder.carts()
        conn.execute("COMMIT")
        conn.execute("VACUUM")
    finally:
        conn.close()
