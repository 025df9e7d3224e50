"""Dashboard, sales reports with CSV downloads, and store settings."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response

from mcpfleet.sites.admin.site import routes, staff
from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.store import logic

COUNTED = "o.status NOT IN ('cancelled', 'refunded')"


@routes.get("/")
async def dashboard(page: Page) -> Response:
    staff(page)
    conn = page.db
    today = page.today
    since = (date.fromisoformat(today) - timedelta(days=29)).isoformat()
    low = int(logic.settings(conn)["low_stock_threshold"])
    stats = {
        "orders_today": conn.execute(
            "SELECT COUNT(*) FROM orders WHERE substr(created_at, 1, 10) = ?", (today,)
        ).fetchone()[0],
        "revenue_30d": conn.execute(
            f"SELECT COALESCE(SUM(total_cents), 0) FROM orders o WHERE {COUNTED} AND substr(created_at, 1, 10) >= ?",
            (since,),
        ).fetchone()[0],
        "open_orders": conn.execute(
            "SELECT COUNT(*) FROM orders WHERE status IN ('pending', 'processing', 'on_hold')"
        ).fetchone()[0],
        "low_stock": conn.execute(
            "SELECT COUNT(*) FROM products WHERE status = 'active' AND stock <= ?", (low,)
        ).fetchone()[0],
        "pending_reviews": conn.execute("SELECT COUNT(*) FROM reviews WHERE status = 'pending'").fetchone()[0],
    }
    recent = conn.execute(
        "SELECT o.*, c.first_name, c.last_name FROM orders o LEFT JOIN customers c ON c.id = o.customer_id"
        " ORDER BY o.created_at DESC, o.id DESC LIMIT 10"
    ).fetchall()
    low_stock = conn.execute(
        "SELECT * FROM products WHERE status = 'active' AND stock <= ? ORDER BY stock, name LIMIT 10", (low,)
    ).fetchall()
    return page.render("dashboard.html", stats=stats, recent=recent, low_stock=low_stock, since=since, low=low)


def _range(page: Page) -> tuple[str, str, Form]:
    today = date.fromisoformat(page.today)
    default_start = date(today.year - 1, today.month, 1) + timedelta(days=31)
    default_start = date(default_start.year, default_start.month, 1)
    form = Form({"from": page.arg("from") or default_start.isoformat(), "to": page.arg("to") or today.isoformat()})
    parsed: dict[str, str] = {}
    for name, label in (("from", "Start date"), ("to", "End date")):
        try:
            parsed[name] = date.fromisoformat(form.get(name)).isoformat()
        except ValueError:
            form.error(name, f"{label} must be a date like 2025-01-31.")
            parsed[name] = default_start.isoformat() if name == "from" else today.isoformat()
    if form.ok and parsed["from"] > parsed["to"]:
        form.error("to", "The end date must not be before the start date.")
    return parsed["from"], parsed["to"], form


def _by_month(page: Page, start: str, end: str) -> list[dict[str, Any]]:
    rows = page.db.execute(
        "SELECT substr(o.created_at, 1, 7) AS month, COUNT(*) AS orders, SUM(o.subtotal_cents) AS subtotal,"
        " SUM(o.discount_cents) AS discounts, SUM(o.total_cents) AS revenue,"
        " (SELECT SUM(oi.quantity) FROM order_items oi JOIN orders o2 ON o2.id = oi.order_id"
        "  WHERE substr(o2.created_at, 1, 7) = substr(o.created_at, 1, 7)"
        "  AND o2.status NOT IN ('cancelled', 'refunded')"
        "  AND substr(o2.created_at, 1, 10) BETWEEN ? AND ?) AS items"
        f" FROM orders o WHERE {COUNTED} AND substr(o.created_at, 1, 10) BETWEEN ? AND ?"
        " GROUP BY month ORDER BY month",
        (start, end, start, end),
    ).fetchall()
    return [{**dict(r), "average": round(r["revenue"] / r["orders"]) if r["orders"] else 0} for r in rows]


def _top_products(page: Page, start: str, end: str, limit: int | None = 10) -> list[Any]:
    return page.db.execute(
        "SELECT oi.sku, oi.name, SUM(oi.quantity) AS units, SUM(oi.line_total_cents) AS revenue,"
        " COUNT(DISTINCT o.id) AS orders FROM order_items oi JOIN orders o ON o.id = oi.order_id"
        f" WHERE {COUNTED} AND substr(o.created_at, 1, 10) BETWEEN ? AND ?"
        " GROUP BY oi.sku, oi.name ORDER BY revenue DESC, oi.sku" + (f" LIMIT {int(limit)}" if limit else ""),
        (start, end),
    ).fetchall()


def _by_category(page: Page, start: str, end: str) -> list[Any]:
    return page.db.execute(
        "SELECT top.name AS category, SUM(oi.quantity) AS units, SUM(oi.line_total_cents) AS revenue"
        " FROM order_items oi JOIN orders o ON o.id = oi.order_id JOIN products p ON p.id = oi.product_id"
        " JOIN categories leaf ON leaf.id = p.category_id JOIN categories top ON top.id = leaf.parent_id"
        f" WHERE {COUNTED} AND substr(o.created_at, 1, 10) BETWEEN ? AND ?"
        " GROUP BY top.id ORDER BY revenue DESC",
        (start, end),
    ).fetchall()


@routes.get("/reports")
async def reports(page: Page) -> Response:
    staff(page)
    start, end, form = _range(page)
    months = _by_month(page, start, end)
    totals = {
        "orders": sum(m["orders"] for m in months),
        "revenue": sum(m["revenue"] for m in months),
        "discounts": sum(m["discounts"] for m in months),
        "items": sum(m["items"] or 0 for m in months),
    }
    query = f"from={start}&to={end}"
    return page.render(
        "reports.html",
        status_code=422 if form.errors else 200,
        filters=form,
        start=start,
        end=end,
        months=months,
        totals=totals,
        top=_top_products(page, start, end),
        categories=_by_category(page, start, end),
        query=query,
    )


def _csv(page: Page, name: str, header: list[str], rows: list[list[Any]], start: str, end: str) -> Response:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    page.audit(f"report.export_{name}", "report", name, rows=len(rows), start=start, end=end)
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{name}-{start}-to-{end}.csv"',
            "Cache-Control": "no-store",
        },
    )


def _dollars(cents: int | None) -> str:
    return f"{(cents or 0) / 100:.2f}"


@routes.get("/reports/sales.csv")
async def sales_csv(page: Page) -> Response:
    staff(page)
    start, end, form = _range(page)
    if form.errors:
        raise HTTPException(400, " ".join(form.errors.values()))
    rows = [
        [
            m["month"],
            m["orders"],
            m["items"] or 0,
            _dollars(m["subtotal"]),
            _dollars(m["discounts"]),
            _dollars(m["revenue"]),
            _dollars(m["average"]),
        ]
        for m in _by_month(page, start, end)
    ]
    header = ["month", "orders", "items_sold", "subtotal", "discounts", "revenue", "average_order_value"]
    return _csv(page, "sales-by-month", header, rows, start, end)


@routes.get("/reports/products.csv")
async def products_csv(page: Page) -> Response:
    staff(page)
    start, end, form = _range(page)
    if form.errors:
        raise HTTPException(400, " ".join(form.errors.values()))
    rows = [
        [r["sku"], r["name"], r["units"], r["orders"], _dollars(r["revenue"])]
        for r in _top_products(page, start, end, limit=None)
    ]
    return _csv(page, "product-sales", ["sku", "name", "units_sold", "orders", "revenue"], rows, start, end)


# -- settings -----------------------------------------------------------------------------------------------
@routes.form("/settings")
async def settings(page: Page) -> Response:
    staff(page, "settings.edit")
    current = logic.settings(page.db)
    if page.request.method == "GET":
        page.form = Form(
            {
                "store_name": current["store_name"],
                "support_email": current["support_email"],
                "free_shipping_threshold": f"{int(current['free_shipping_threshold_cents']) / 100:.2f}",
                "tax_rate_percent": current["tax_rate_percent"],
                "low_stock_threshold": current["low_stock_threshold"],
                "reviews_require_approval": current["reviews_require_approval"],
            }
        )
        return page.render("settings.html")
    form = page.form
    values = {
        "store_name": form.required("store_name", "Store name", 80),
        "support_email": form.email("support_email", "Support email"),
        "free_shipping_threshold_cents": str(form.money("free_shipping_threshold", "Free shipping threshold") or ""),
        "low_stock_threshold": str(form.integer("low_stock_threshold", "Low stock threshold", 0, 1000)),
        "reviews_require_approval": "1" if form.get("reviews_require_approval") == "1" else "0",
    }
    rate = form.get("tax_rate_percent")
    try:
        if not rate or not 0 <= float(rate) <= 20 or len(rate.partition(".")[2]) > 3:
            raise ValueError
        values["tax_rate_percent"] = rate
    except ValueError:
        form.error("tax_rate_percent", "Tax rate must be a number from 0 to 20 with at most 3 decimals, like 7.25.")
    if not form.ok:
        return page.render("settings.html", status_code=422)
    changed = {k: [current[k], v] for k, v in values.items() if current[k] != v}
    if not changed:
        return page.redirect("/settings", "No changes to save.", "info")
    page.db.executemany(
        "INSERT INTO store_settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [(k, v[1]) for k, v in changed.items()],
    )
    page.audit("settings.update", "settings", None, changed=changed)
    return page.redirect("/settings", "Settings saved.")
