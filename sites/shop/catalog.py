"""Browsing: home page, categories, search with filters and sorting, product pages, reviews."""

from __future__ import annotations

import sqlite3
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response

from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.shop.site import routes
from mcpfleet.sites.store import logic
from mcpfleet.sites.store.queries import RATINGS_JOIN

PER_PAGE = 24
SORTS = {
    "featured": ("Featured", "r.review_count IS NULL, p.stock = 0, COALESCE(r.review_count, 0) DESC, p.id"),
    "price_asc": ("Price: low to high", "COALESCE(p.sale_price_cents, p.price_cents), p.id"),
    "price_desc": ("Price: high to low", "COALESCE(p.sale_price_cents, p.price_cents) DESC, p.id"),
    "rating": ("Customer rating", "COALESCE(r.avg_rating, 0) DESC, COALESCE(r.review_count, 0) DESC, p.id"),
    "newest": ("Newest arrivals", "p.created_at DESC, p.id DESC"),
    "name": ("Name: A to Z", "p.name, p.id"),
}
SELECT = (
    "SELECT p.*, c.name AS category_name, c.slug AS category_slug, COALESCE(r.avg_rating, 0) AS rating,"
    " COALESCE(r.review_count, 0) AS review_count FROM products p JOIN categories c ON c.id = p.category_id "
    + RATINGS_JOIN
)


def _cents(value: str) -> int | None:
    try:
        amount = float(value.replace("$", "").replace(",", ""))
    except ValueError:
        return None
    return int(round(amount * 100)) if amount >= 0 else None


def listing(page: Page, where: list[str], params: list[Any], sort_default: str = "featured") -> dict[str, Any]:
    """Filter (brand, price range, in stock, on sale), sort and paginate active products under ``where``."""
    where = ["p.status = 'active'", *where]
    facets_where, facets_params = list(where), list(params)
    brand = page.arg("brand")
    if brand:
        where.append("p.brand = ?")
        params.append(brand)
    low, high = _cents(page.arg("min_price")), _cents(page.arg("max_price"))
    if low is not None:
        where.append("COALESCE(p.sale_price_cents, p.price_cents) >= ?")
        params.append(low)
    if high is not None:
        where.append("COALESCE(p.sale_price_cents, p.price_cents) <= ?")
        params.append(high)
    if page.arg("in_stock") == "1":
        where.append("p.stock > 0")
    if page.arg("on_sale") == "1":
        where.append("p.sale_price_cents IS NOT NULL")
    sort = page.arg("sort", sort_default)
    if sort not in SORTS:
        sort = sort_default
    clause = " WHERE " + " AND ".join(where)
    total = page.db.execute(
        f"SELECT COUNT(*) FROM products p JOIN categories c ON c.id = p.category_id {RATINGS_JOIN}{clause}", params
    ).fetchone()[0]
    pager = page.paginate(total, PER_PAGE)
    products = page.db.execute(
        f"{SELECT}{clause} ORDER BY {SORTS[sort][1]} LIMIT ? OFFSET ?", [*params, PER_PAGE, pager.offset]
    ).fetchall()
    brands = [
        r[0]
        for r in page.db.execute(
            "SELECT DISTINCT p.brand FROM products p JOIN categories c ON c.id = p.category_id WHERE "
            + " AND ".join(facets_where)
            + " ORDER BY p.brand",
            facets_params,
        )
    ]
    filters = Form(
        {
            "brand": brand,
            "min_price": page.arg("min_price"),
            "max_price": page.arg("max_price"),
            "in_stock": page.arg("in_stock"),
            "on_sale": page.arg("on_sale"),
            "sort": sort,
            "q": page.arg("q"),
            "category": page.arg("category"),
        }
    )
    return {
        "products": products,
        "pager": pager,
        "brand_options": [(b, b) for b in brands],
        "filters": filters,
        "sorts": [(k, v[0]) for k, v in SORTS.items()],
    }


def _cards(conn: sqlite3.Connection, where: str, order: str, limit: int = 8) -> list[sqlite3.Row]:
    return conn.execute(f"{SELECT} WHERE p.status = 'active' AND {where} ORDER BY {order} LIMIT ?", (limit,)).fetchall()


@routes.get("/")
async def home(page: Page) -> Response:
    conn = page.db
    tops = conn.execute("SELECT * FROM categories WHERE parent_id IS NULL ORDER BY position").fetchall()
    leaves = conn.execute("SELECT * FROM categories WHERE parent_id IS NOT NULL ORDER BY position").fetchall()
    return page.render(
        "home.html",
        tops=tops,
        leaves=leaves,
        on_sale=_cards(
            conn, "p.sale_price_cents IS NOT NULL AND p.stock > 0", "p.price_cents - p.sale_price_cents DESC, p.id"
        ),
        top_rated=_cards(conn, "r.review_count >= 5 AND p.stock > 0", "r.avg_rating DESC, r.review_count DESC, p.id"),
        new_arrivals=_cards(conn, "p.stock > 0", "p.created_at DESC, p.id DESC"),
    )


@routes.get("/category/{slug}")
async def category(page: Page) -> Response:
    cat = page.db.execute("SELECT * FROM categories WHERE slug = ?", (page.path_param("slug"),)).fetchone()
    if cat is None:
        raise page.not_found("category")
    parent = None
    if cat["parent_id"] is None:
        children = page.db.execute(
            "SELECT * FROM categories WHERE parent_id = ? ORDER BY position", (cat["id"],)
        ).fetchall()
        ids = [c["id"] for c in children]
    else:
        parent = page.db.execute("SELECT * FROM categories WHERE id = ?", (cat["parent_id"],)).fetchone()
        children = []
        ids = [cat["id"]]
    marks = ",".join("?" for _ in ids)
    data = listing(page, [f"p.category_id IN ({marks})"], list(ids))
    return page.render("listing.html", category=cat, parent=parent, children=children, heading=cat["name"], **data)


@routes.get("/search")
async def search(page: Page) -> Response:
    q = page.arg("q")
    where: list[str] = []
    params: list[Any] = []
    for word in q.split()[:8]:
        where.append("(p.name LIKE ? OR p.brand LIKE ? OR p.description LIKE ? OR p.sku LIKE ?)")
        params += [f"%{word}%"] * 4
    cat_slug = page.arg("category")
    if cat_slug:
        where.append("(c.slug = ? OR c.parent_id = (SELECT id FROM categories WHERE slug = ?))")
        params += [cat_slug, cat_slug]
    data = listing(page, where, params, sort_default="featured")
    options = [
        (r["slug"], r["name"])
        for r in page.db.execute("SELECT slug, name FROM categories WHERE parent_id IS NULL ORDER BY position")
    ]
    heading = f"Search results for “{q}”" if q else "All products"
    return page.render(
        "listing.html", category=None, parent=None, children=[], heading=heading, category_options=options, **data
    )


def _product(page: Page) -> sqlite3.Row:
    row = page.db.execute(f"{SELECT} WHERE p.slug = ? AND p.status = 'active'", (page.path_param("slug"),)).fetchone()
    if row is None:
        raise HTTPException(404, "We couldn't find that product. It may have been discontinued.")
    return row


REVIEW_SORTS = {
    "newest": ("Newest first", "created_at DESC, id DESC"),
    "highest": ("Highest rated", "rating DESC, created_at DESC, id DESC"),
    "lowest": ("Lowest rated", "rating, created_at DESC, id DESC"),
}


@routes.get("/product/{slug}")
async def product(page: Page, form: Form | None = None) -> Response:
    item = _product(page)
    conn = page.db
    cat = conn.execute("SELECT * FROM categories WHERE id = ?", (item["category_id"],)).fetchone()
    parent = conn.execute("SELECT * FROM categories WHERE id = ?", (cat["parent_id"],)).fetchone()
    sort = page.arg("review_sort", "newest")
    if sort not in REVIEW_SORTS:
        sort = "newest"
    total = conn.execute(
        "SELECT COUNT(*) FROM reviews WHERE product_id = ? AND status = 'approved'", (item["id"],)
    ).fetchone()[0]
    pager = page.paginate(total, 10)
    reviews = conn.execute(
        f"SELECT * FROM reviews WHERE product_id = ? AND status = 'approved' ORDER BY {REVIEW_SORTS[sort][1]}"
        " LIMIT ? OFFSET ?",
        (item["id"], 10, pager.offset),
    ).fetchall()
    histogram = {n: 0 for n in range(5, 0, -1)}
    for rating, count in conn.execute(
        "SELECT rating, COUNT(*) FROM reviews WHERE product_id = ? AND status = 'approved' GROUP BY rating",
        (item["id"],),
    ):
        histogram[rating] = count
    mine = None
    wished = False
    in_cart = 0
    if page.user is not None:
        mine = conn.execute(
            "SELECT * FROM reviews WHERE product_id = ? AND customer_id = ?", (item["id"], page.user["id"])
        ).fetchone()
        wished = bool(
            conn.execute(
                "SELECT 1 FROM wishlist_items WHERE product_id = ? AND customer_id = ?", (item["id"], page.user["id"])
            ).fetchone()
        )
        row = conn.execute(
            "SELECT quantity FROM cart_items WHERE product_id = ? AND customer_id = ?", (item["id"], page.user["id"])
        ).fetchone()
        in_cart = int(row[0]) if row else 0
    related = conn.execute(
        f"{SELECT} WHERE p.status = 'active' AND p.category_id = ? AND p.id != ? AND p.stock > 0"
        " ORDER BY COALESCE(r.review_count, 0) DESC, p.id LIMIT 4",
        (item["category_id"], item["id"]),
    ).fetchall()
    return page.render(
        "product.html",
        status_code=422 if form is not None else 200,
        product=item,
        category=cat,
        parent=parent,
        reviews=reviews,
        pager=pager,
        histogram=histogram,
        review_sorts=[(k, v[0]) for k, v in REVIEW_SORTS.items()],
        sort_form=Form({"review_sort": sort}),
        mine=mine,
        wished=wished,
        in_cart=in_cart,
        related=related,
        review_form=form or Form({}),
        unit_price=logic.unit_price(item),
    )


@routes.post("/product/{slug}/reviews")
async def write_review(page: Page) -> Response:
    user = page.require_user()
    item = _product(page)
    form = page.form
    rating = form.integer("rating", "Rating", 1, 5)
    if "rating" in form.errors:
        form.errors["rating"] = "Choose a rating from 1 to 5 stars."
    title = form.required("title", "Review title", 120)
    body = form.required("body", "Review", 2000)
    if body and len(body) < 20:
        form.error("body", "Your review must be at least 20 characters long.")
    if page.db.execute(
        "SELECT 1 FROM reviews WHERE product_id = ? AND customer_id = ?", (item["id"], user["id"])
    ).fetchone():
        form.error("title", "You have already reviewed this product.")
    if not form.ok:
        return await product(page, form)
    status = "pending" if logic.settings(page.db)["reviews_require_approval"] == "1" else "approved"
    cur = page.db.execute(
        "INSERT INTO reviews (product_id, customer_id, author_name, rating, title, body, status, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            item["id"],
            user["id"],
            f"{user['first_name']} {user['last_name'][0]}.",
            rating,
            title,
            body,
            status,
            page.now(),
        ),
    )
    page.audit("review.create", "review", cur.lastrowid, product_id=item["id"], rating=rating, status=status)
    message = (
        "Thanks for your review! It will appear once our team has approved it."
        if status == "pending"
        else "Thanks for your review!"
    )
    return page.redirect(f"/product/{item['slug']}#reviews", message)


@routes.get("/categories")
async def categories(page: Page) -> Response:
    rows = page.db.execute(
        "SELECT c.*, (SELECT COUNT(*) FROM products p WHERE p.category_id = c.id AND p.status = 'active') AS n"
        " FROM categories c ORDER BY position"
    ).fetchall()
    return page.render("categories.html", categories=rows)
