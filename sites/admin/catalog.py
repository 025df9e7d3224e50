"""Catalog administration: products (list, filters, bulk enable/disable, create, edit), reviews, coupons."""

from __future__ import annotations

import re
import sqlite3
from datetime import date
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response

from mcpfleet.sites.admin.site import routes, staff
from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.seeding import slugify
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.store import logic

PER_PAGE = 25
PRODUCT_SORTS = {
    "name": ("Name: A to Z", "p.name, p.id"),
    "price_asc": ("Price: low to high", "p.price_cents, p.id"),
    "price_desc": ("Price: high to low", "p.price_cents DESC, p.id"),
    "stock_asc": ("Stock: low to high", "p.stock, p.id"),
    "stock_desc": ("Stock: high to low", "p.stock DESC, p.id"),
    "newest": ("Newest first", "p.created_at DESC, p.id DESC"),
}
STOCK_FILTERS = {"in": "In stock", "low": "Low stock", "out": "Out of stock"}
SKU = re.compile(r"^[A-Z0-9][A-Z0-9-]{2,19}$")


def _leaf_options(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT c.id, p.name AS parent, c.name FROM categories c JOIN categories p ON p.id = c.parent_id"
        " ORDER BY c.position"
    ).fetchall()
    return [(str(r["id"]), f"{r['parent']} › {r['name']}") for r in rows]


@routes.get("/products")
async def products(page: Page) -> Response:
    staff(page)
    filters = Form({k: page.arg(k) for k in ("q", "category", "status", "stock", "sort")})
    where: list[str] = []
    params: list[Any] = []
    if filters.get("q"):
        where.append("(p.name LIKE ? OR p.sku LIKE ? OR p.brand LIKE ?)")
        params += [f"%{filters.get('q')}%"] * 3
    if filters.get("category"):
        where.append("(p.category_id = ? OR c.parent_id = ?)")
        params += [filters.get("category")] * 2
    if filters.get("status") in ("active", "disabled"):
        where.append("p.status = ?")
        params.append(filters.get("status"))
    low = int(logic.settings(page.db)["low_stock_threshold"])
    stock = filters.get("stock")
    if stock == "in":
        where.append("p.stock > 0")
    elif stock == "low":
        where.append("p.stock > 0 AND p.stock <= ?")
        params.append(low)
    elif stock == "out":
        where.append("p.stock = 0")
    sort = filters.get("sort") if filters.get("sort") in PRODUCT_SORTS else "name"
    filters.values["sort"] = sort
    clause = (" WHERE " + " AND ".join(where)) if where else ""
    base = "FROM products p JOIN categories c ON c.id = p.category_id"
    total = page.db.execute(f"SELECT COUNT(*) {base}{clause}", params).fetchone()[0]
    pager = page.paginate(total, PER_PAGE)
    rows = page.db.execute(
        f"SELECT p.*, c.name AS category_name {base}{clause} ORDER BY {PRODUCT_SORTS[sort][1]} LIMIT ? OFFSET ?",
        [*params, PER_PAGE, pager.offset],
    ).fetchall()
    tops = page.db.execute("SELECT id, name FROM categories WHERE parent_id IS NULL ORDER BY position").fetchall()
    category_options = [(str(t["id"]), t["name"]) for t in tops] + _leaf_options(page.db)
    return page.render(
        "products.html",
        products=rows,
        pager=pager,
        filters=filters,
        sorts=[(k, v[0]) for k, v in PRODUCT_SORTS.items()],
        category_options=category_options,
        stock_options=list(STOCK_FILTERS.items()),
        low_stock=low,
    )


@routes.post("/products/bulk")
async def products_bulk(page: Page) -> Response:
    staff(page, "products.edit")
    ids = sorted({int(v) for v in page.form_list("ids") if v.isdigit()})
    action = page.form.get("action")
    back = page.next_url("/products")
    if action not in ("enable", "disable"):
        return page.redirect(back, "Choose an action to apply.", "error")
    if not ids:
        return page.redirect(back, "Select at least one product.", "error")
    status = "active" if action == "enable" else "disabled"
    marks = ",".join("?" for _ in ids)
    changed = [
        r["sku"]
        for r in page.db.execute(
            f"SELECT sku FROM products WHERE id IN ({marks}) AND status != ? ORDER BY id", (*ids, status)
        )
    ]
    now = page.now()
    page.db.execute(f"UPDATE products SET status = ?, updated_at = ? WHERE id IN ({marks})", (status, now, *ids))
    page.audit("product.bulk_status", "product", None, status=status, skus=changed, selected=len(ids))
    return page.redirect(back, f"{len(ids)} product(s) {'enabled' if status == 'active' else 'disabled'}.")


def _product_values(page: Page, form: Form, current: sqlite3.Row | None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "name": form.required("name", "Product name", 150),
        "sku": form.required("sku", "SKU", 20).upper(),
        "brand": form.required("brand", "Brand", 60),
        "description": form.required("description", "Description", 4000),
        "price_cents": form.money("price", "Price"),
        "sale_price_cents": form.money("sale_price", "Sale price", required=False),
        "stock": form.integer("stock", "Stock quantity", 0, 100000),
        "status": form.choice("status", "Status", ("active", "disabled")),
        "color": form.optional("color", "Color", 40) or None,
    }
    category = form.get("category_id")
    if category not in dict(_leaf_options(page.db)):
        form.error("category_id", "Choose a category.")
    values["category_id"] = int(category) if category.isdigit() else None
    sku = values["sku"]
    if sku and "sku" not in form.errors:
        if not SKU.match(sku):
            form.error("sku", "SKU must be 3-20 characters: capital letters, digits and hyphens.")
        else:
            clash = page.db.execute("SELECT id FROM products WHERE sku = ?", (sku,)).fetchone()
            if clash and (current is None or clash["id"] != current["id"]):
                form.error("sku", f"SKU {sku} is already used by another product.")
    price, sale = values["price_cents"], values["sale_price_cents"]
    if price and sale and sale >= price:
        form.error("sale_price", "Sale price must be lower than the regular price.")
    return values


def _unique_slug(conn: sqlite3.Connection, name: str) -> str:
    base = slugify(name) or "product"
    slug, n = base, 2
    while conn.execute("SELECT 1 FROM products WHERE slug = ?", (slug,)).fetchone():
        slug, n = f"{base}-{n}", n + 1
    return slug


@routes.form("/products/new")
async def product_new(page: Page) -> Response:
    staff(page, "products.edit")
    options = _leaf_options(page.db)
    if page.request.method == "GET":
        page.form = Form({"status": "active", "stock": "0"})
        return page.render("product_form.html", product=None, category_options=options)
    values = _product_values(page, page.form, None)
    if not page.form.ok:
        return page.render("product_form.html", status_code=422, product=None, category_options=options)
    now = page.now()
    values.update(slug=_unique_slug(page.db, values["name"]), created_at=now, updated_at=now)
    cols = ", ".join(values)
    cur = page.db.execute(
        f"INSERT INTO products ({cols}) VALUES ({', '.join('?' for _ in values)})", tuple(values.values())
    )
    page.audit(
        "product.create",
        "product",
        cur.lastrowid,
        sku=values["sku"],
        name=values["name"],
        price_cents=values["price_cents"],
        stock=values["stock"],
    )
    return page.redirect(f"/products/{cur.lastrowid}/edit", f"Product {values['sku']} created.")


def _money_text(cents: int | None) -> str:
    return "" if cents is None else f"{cents / 100:.2f}"


@routes.form("/products/{id}/edit")
async def product_edit(page: Page) -> Response:
    staff(page, None if page.request.method == "GET" else "products.edit")
    row = page.db.execute("SELECT * FROM products WHERE id = ?", (page.int_path_param("id"),)).fetchone()
    if row is None:
        raise HTTPException(404, "There is no such product.")
    options = _leaf_options(page.db)
    sold = page.db.execute(
        "SELECT COALESCE(SUM(oi.quantity), 0) FROM order_items oi JOIN orders o ON o.id = oi.order_id"
        " WHERE oi.product_id = ? AND o.status NOT IN ('cancelled', 'refunded')",
        (row["id"],),
    ).fetchone()[0]
    context = {"product": row, "category_options": options, "sold": sold}
    if page.request.method == "GET":
        page.form = Form(
            {
                "name": row["name"],
                "sku": row["sku"],
                "brand": row["brand"],
                "description": row["description"],
                "price": _money_text(row["price_cents"]),
                "sale_price": _money_text(row["sale_price_cents"]),
                "stock": str(row["stock"]),
                "status": row["status"],
                "color": row["color"] or "",
                "category_id": str(row["category_id"]),
            }
        )
        return page.render("product_form.html", **context)
    values = _product_values(page, page.form, row)
    if not page.form.ok:
        return page.render("product_form.html", status_code=422, **context)
    changed = {k: [row[k], v] for k, v in values.items() if row[k] != v}
    if not changed:
        return page.redirect(f"/products/{row['id']}/edit", "No changes to save.", "info")
    now = page.now()
    page.db.execute(
        "UPDATE products SET " + ", ".join(f"{k} = ?" for k in changed) + ", updated_at = ? WHERE id = ?",
        (*(v[1] for v in changed.values()), now, row["id"]),
    )
    page.audit("product.update", "product", row["id"], sku=values["sku"], changed=changed)
    return page.redirect(f"/products/{row['id']}/edit", f"Product {values['sku']} saved.")


# -- reviews ------------------------------------------------------------------------------------------------
REVIEW_STATUSES = {"pending": "Pending", "approved": "Approved", "rejected": "Rejected"}


@routes.get("/reviews")
async def reviews(page: Page) -> Response:
    staff(page)
    filters = Form({"status": page.arg("status", "pending"), "rating": page.arg("rating"), "q": page.arg("q")})
    where: list[str] = []
    params: list[Any] = []
    if filters.get("status") in REVIEW_STATUSES:
        where.append("r.status = ?")
        params.append(filters.get("status"))
    elif filters.get("status") != "all":
        filters.values["status"] = "all"
    if filters.get("rating") in ("1", "2", "3", "4", "5"):
        where.append("r.rating = ?")
        params.append(int(filters.get("rating")))
    if filters.get("q"):
        where.append("(p.name LIKE ? OR r.title LIKE ? OR r.body LIKE ? OR r.author_name LIKE ?)")
        params += [f"%{filters.get('q')}%"] * 4
    clause = (" WHERE " + " AND ".join(where)) if where else ""
    base = "FROM reviews r JOIN products p ON p.id = r.product_id"
    total = page.db.execute(f"SELECT COUNT(*) {base}{clause}", params).fetchone()[0]
    pager = page.paginate(total, PER_PAGE)
    rows = page.db.execute(
        f"SELECT r.*, p.name AS product_name, p.id AS pid {base}{clause} ORDER BY r.created_at DESC, r.id DESC"
        " LIMIT ? OFFSET ?",
        [*params, PER_PAGE, pager.offset],
    ).fetchall()
    return page.render(
        "reviews.html",
        reviews=rows,
        pager=pager,
        filters=filters,
        status_options=[("all", "All statuses"), *REVIEW_STATUSES.items()],
        rating_options=[(str(n), f"{n} star{'s' if n > 1 else ''}") for n in range(5, 0, -1)],
        review_statuses=REVIEW_STATUSES,
    )


@routes.post("/reviews/{id}/moderate")
async def moderate_review(page: Page) -> Response:
    staff(page, "reviews.moderate")
    row = page.db.execute("SELECT * FROM reviews WHERE id = ?", (page.int_path_param("id"),)).fetchone()
    if row is None:
        raise HTTPException(404, "There is no such review.")
    decision = page.form.get("decision")
    back = page.next_url("/reviews")
    if decision not in ("approved", "rejected", "pending"):
        return page.redirect(back, "Choose approve or reject.", "error")
    if decision == row["status"]:
        return page.redirect(back, f"Review #{row['id']} is already {decision}.", "info")
    page.db.execute("UPDATE reviews SET status = ? WHERE id = ?", (decision, row["id"]))
    page.audit("review.moderate", "review", row["id"], old=row["status"], new=decision, product_id=row["product_id"])
    return page.redirect(back, f"Review #{row['id']} “{row['title']}” {decision}.")


# -- coupons ------------------------------------------------------------------------------------------------
COUPON_KINDS = {"percent": "Percentage off", "fixed": "Fixed amount off", "free_shipping": "Free standard shipping"}


@routes.get("/coupons")
async def coupons(page: Page) -> Response:
    staff(page)
    rows = page.db.execute("SELECT * FROM coupons ORDER BY is_active DESC, starts_on DESC, code").fetchall()
    return page.render("coupons.html", coupons=rows, kinds=COUPON_KINDS)


@routes.form("/coupons/new")
async def coupon_new(page: Page) -> Response:
    staff(page, "coupons.edit")
    if page.request.method == "GET":
        page.form = Form({"kind": "percent", "starts_on": page.today})
        return page.render("coupon_form.html", kinds=list(COUPON_KINDS.items()))
    form = page.form
    code = form.required("code", "Code", 20).upper()
    if code and "code" not in form.errors:
        if not re.fullmatch(r"[A-Z0-9]{4,20}", code):
            form.error("code", "Code must be 4-20 capital letters and digits, no spaces.")
        elif page.db.execute("SELECT 1 FROM coupons WHERE code = ?", (code,)).fetchone():
            form.error("code", f"A coupon with the code {code} already exists.")
    description = form.required("description", "Description", 200)
    kind = form.choice("kind", "Discount type", COUPON_KINDS)
    amount = 0
    if kind == "percent":
        amount = form.integer("amount", "Percentage", 1, 90) or 0
    elif kind == "fixed":
        amount = form.money("amount", "Amount") or 0
    minimum = form.money("min_subtotal", "Minimum subtotal", required=False) or 0
    dates: dict[str, str | None] = {}
    for name, label in (("starts_on", "Start date"), ("expires_on", "Expiry date")):
        raw = form.get(name)
        dates[name] = None
        if raw:
            try:
                dates[name] = date.fromisoformat(raw).isoformat()
            except ValueError:
                form.error(name, f"{label} must be a date like 2025-07-01.")
        elif name == "starts_on":
            form.error(name, "Start date is required.")
    if dates["starts_on"] and dates["expires_on"] and dates["expires_on"] < dates["starts_on"]:
        form.error("expires_on", "The expiry date must be on or after the start date.")
    limit = form.integer("usage_limit", "Usage limit", 1, 100000) if form.get("usage_limit") else None
    if not form.ok:
        return page.render("coupon_form.html", status_code=422, kinds=list(COUPON_KINDS.items()))
    page.db.execute(
        "INSERT INTO coupons (code, description, kind, amount, min_subtotal_cents, starts_on, expires_on, is_active,"
        " usage_limit) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)",
        (code, description, kind, amount, minimum, dates["starts_on"], dates["expires_on"], limit),
    )
    page.audit(
        "coupon.create",
        "coupon",
        code,
        kind=kind,
        amount=amount,
        min_subtotal_cents=minimum,
        starts_on=dates["starts_on"],
        expires_on=dates["expires_on"],
        usage_limit=limit,
    )
    return page.redirect("/coupons", f"Coupon {code} created.")


@routes.post("/coupons/{code}/toggle")
async def coupon_toggle(page: Page) -> Response:
    staff(page, "coupons.edit")
    row = page.db.execute("SELECT * FROM coupons WHERE code = ?", (page.path_param("code"),)).fetchone()
    if row is None:
        raise HTTPException(404, "There is no such coupon.")
    active = 0 if row["is_active"] else 1
    page.db.execute("UPDATE coupons SET is_active = ? WHERE code = ?", (active, row["code"]))
    page.audit("coupon.activate" if active else "coupon.deactivate", "coupon", row["code"])
    return page.redirect("/coupons", f"Coupon {row['code']} {'activated' if active else 'deactivated'}.")
