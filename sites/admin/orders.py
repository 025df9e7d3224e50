"""Orders: search, filter, sort, CSV export, detail, status changes with history, comments, address edits."""

from __future__ import annotations

import csv
import io
import re
import sqlite3
from datetime import date
from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.responses import Response

from mcpfleet.sites.admin.site import routes, staff
from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.names import US_STATES
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.store import logic, queries

PER_PAGE = 25
SORTS = {
    "newest": ("Newest first", "o.created_at DESC, o.id DESC"),
    "oldest": ("Oldest first", "o.created_at, o.id"),
    "total_desc": ("Total: high to low", "o.total_cents DESC, o.id DESC"),
    "total_asc": ("Total: low to high", "o.total_cents, o.id"),
}
FROM = "FROM orders o LEFT JOIN customers c ON c.id = o.customer_id"


def _date_arg(page: Page, filters: Form, name: str, label: str) -> str | None:
    value = page.arg(name)
    if not value:
        return None
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        filters.error(name, f"{label} must be a date like 2025-06-01.")
        return None


def order_filters(page: Page) -> tuple[str, list[Any], Form, str]:
    """WHERE clause, parameters, the filter form (with errors) and the ORDER BY for the orders list."""
    filters = Form({k: page.arg(k) for k in ("q", "status", "from", "to", "sort")})
    where: list[str] = []
    params: list[Any] = []
    q = filters.get("q")
    if q:
        where.append(
            "(o.number LIKE ? OR o.email LIKE ? OR o.ship_name LIKE ? OR (c.first_name || ' ' || c.last_name) LIKE ?)"
        )
        params += [f"%{q.lstrip('#')}%"] * 4
    status = filters.get("status")
    if status in logic.STATUSES:
        where.append("o.status = ?")
        params.append(status)
    elif status:
        filters.error("status", "Choose a valid status.")
    start = _date_arg(page, filters, "from", "From date")
    end = _date_arg(page, filters, "to", "To date")
    if start and end and start > end:
        filters.error("to", "The end date must not be before the start date.")
    else:
        if start:
            where.append("substr(o.created_at, 1, 10) >= ?")
            params.append(start)
        if end:
            where.append("substr(o.created_at, 1, 10) <= ?")
            params.append(end)
    sort = filters.get("sort") if filters.get("sort") in SORTS else "newest"
    filters.values["sort"] = sort
    return (" WHERE " + " AND ".join(where)) if where else "", params, filters, SORTS[sort][1]


@routes.get("/orders")
async def orders(page: Page) -> Response:
    staff(page)
    where, params, filters, order = order_filters(page)
    total = page.db.execute(f"SELECT COUNT(*) {FROM}{where}", params).fetchone()[0]
    pager = page.paginate(total, PER_PAGE)
    rows = page.db.execute(
        f"SELECT o.*, c.first_name, c.last_name, (SELECT SUM(quantity) FROM order_items WHERE order_id = o.id)"
        f" AS item_count {FROM}{where} ORDER BY {order} LIMIT ? OFFSET ?",
        [*params, PER_PAGE, pager.offset],
    ).fetchall()
    query = urlencode([(k, v) for k, v in page.params.multi_items() if k != "page"])
    return page.render(
        "orders.html",
        status_code=422 if filters.errors else 200,
        orders=rows,
        pager=pager,
        filters=filters,
        sorts=[(k, v[0]) for k, v in SORTS.items()],
        export_url="/orders/export.csv" + (f"?{query}" if query else ""),
    )


def _money(cents: int) -> str:
    return f"{cents / 100:.2f}"


@routes.get("/orders/export.csv")
async def export(page: Page) -> Response:
    staff(page)
    where, params, filters, order = order_filters(page)
    if filters.errors:
        raise HTTPException(400, " ".join(filters.errors.values()))
    rows = page.db.execute(
        f"SELECT o.*, c.first_name, c.last_name, (SELECT SUM(quantity) FROM order_items WHERE order_id = o.id)"
        f" AS item_count {FROM}{where} ORDER BY {order}",
        params,
    ).fetchall()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "order_number",
            "created_at",
            "status",
            "customer_email",
            "customer_name",
            "items",
            "subtotal",
            "discount",
            "shipping",
            "tax",
            "total",
            "coupon_code",
            "shipping_method",
            "payment_method",
            "ship_city",
            "ship_state",
        ]
    )
    for r in rows:
        name = f"{r['first_name']} {r['last_name']}" if r["first_name"] else f"{r['ship_name']} (guest)"
        writer.writerow(
            [
                r["number"],
                r["created_at"],
                r["status"],
                r["email"],
                name,
                r["item_count"],
                _money(r["subtotal_cents"]),
                _money(r["discount_cents"]),
                _money(r["shipping_cents"]),
                _money(r["tax_cents"]),
                _money(r["total_cents"]),
                r["coupon_code"] or "",
                r["shipping_method"],
                r["payment_method"],
                r["ship_city"],
                r["ship_region"],
            ]
        )
    page.audit(
        "orders.export", "report", "orders", rows=len(rows), filters={k: v for k, v in filters.values.items() if v}
    )
    filename = f"orders-{page.today}.csv"
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"},
    )


def _order(page: Page) -> sqlite3.Row:
    row = queries.order_by_number(page.db, page.path_param("number").lstrip("#"))
    if row is None:
        raise HTTPException(404, f"There is no order #{page.path_param('number')}.")
    return row


@routes.get("/orders/{number}")
async def order(page: Page, status_form: Form | None = None, comment_form: Form | None = None) -> Response:
    staff(page)
    row = _order(page)
    customer = None
    if row["customer_id"] is not None:
        customer = page.db.execute("SELECT * FROM customers WHERE id = ?", (row["customer_id"],)).fetchone()
    status_form = status_form or Form({"tracking_number": row["tracking_number"] or ""})
    return page.render(
        "order.html",
        status_code=422 if (status_form.errors or (comment_form and comment_form.errors)) else 200,
        customer=customer,
        next_statuses=[(s, logic.STATUSES[s]) for s in logic.TRANSITIONS[row["status"]]],
        status_form=status_form,
        comment_form=comment_form or Form({}),
        methods=logic.SHIPPING_METHODS,
        payments=logic.PAYMENT_METHODS,
        **queries.order_detail(page.db, row),
    )


@routes.post("/orders/{number}/status")
async def change_status(page: Page) -> Response:
    user = staff(page, "orders.edit")
    row = _order(page)
    form = page.form
    new = form.get("status")
    if new not in logic.TRANSITIONS[row["status"]]:
        allowed = ", ".join(logic.STATUSES[s] for s in logic.TRANSITIONS[row["status"]]) or "none (final status)"
        form.error("status", f"An order that is {logic.STATUSES[row['status']].lower()} can move to: {allowed}.")
    tracking = form.optional("tracking_number", "Tracking number", 60)
    if new == "shipped" and not tracking:
        form.error("tracking_number", "A tracking number is required to mark an order as shipped.")
    comment = form.optional("comment", "Comment", 1000)
    if not form.ok:
        return await order(page, status_form=form)
    now = page.now()
    page.db.execute(
        "UPDATE orders SET status = ?, updated_at = ?, tracking_number = COALESCE(NULLIF(?, ''), tracking_number)"
        " WHERE id = ?",
        (new, now, tracking, row["id"]),
    )
    if new == "cancelled":
        queries.restock(page.db, row["id"])
    notify = form.get("notify") == "1"
    queries.add_history(page.db, row["id"], new, comment, user["full_name"], now, notify)
    page.audit(
        "order.status", "order", row["number"], old=row["status"], new=new, tracking=tracking or None, notify=notify
    )
    return page.redirect(f"/orders/{row['number']}", f"Order #{row['number']} is now {logic.STATUSES[new].lower()}.")


@routes.post("/orders/{number}/comment")
async def add_comment(page: Page) -> Response:
    user = staff(page, "orders.edit")
    row = _order(page)
    form = page.form
    comment = form.required("comment", "Comment", 1000)
    if not form.ok:
        return await order(page, comment_form=form)
    notify = form.get("notify") == "1"
    queries.add_history(page.db, row["id"], row["status"], comment, user["full_name"], page.now(), notify)
    page.audit("order.comment", "order", row["number"], notify=notify, length=len(comment))
    return page.redirect(f"/orders/{row['number']}", "Comment added to the order history.")


ADDRESS_FIELDS = ("ship_name", "ship_line1", "ship_line2", "ship_city", "ship_region", "ship_postcode", "ship_phone")


@routes.form("/orders/{number}/address")
async def edit_address(page: Page) -> Response:
    user = staff(page, "orders.edit")
    row = _order(page)
    editable = row["status"] in ("pending", "processing", "on_hold")
    if page.request.method == "GET":
        page.form = Form({k: str(row[k]) for k in ADDRESS_FIELDS})
        return page.render("order_address.html", order=row, states=US_STATES, editable=editable)
    if not editable:
        return page.redirect(
            f"/orders/{row['number']}",
            "The address of a shipped, delivered or closed order cannot be changed.",
            "error",
        )
    form = page.form
    values = {
        "ship_name": form.required("ship_name", "Full name", 100),
        "ship_line1": form.required("ship_line1", "Street address", 120),
        "ship_line2": form.optional("ship_line2", "Apartment, suite, etc.", 120),
        "ship_city": form.required("ship_city", "City", 80),
        "ship_region": form.get("ship_region"),
        "ship_postcode": form.required("ship_postcode", "ZIP code", 10),
        "ship_phone": form.optional("ship_phone", "Phone", 30),
    }
    if values["ship_region"] not in {code for code, _ in US_STATES}:
        form.error("ship_region", "Choose a state.")
    if values["ship_postcode"] and not re.fullmatch(r"\d{5}(-\d{4})?", values["ship_postcode"]):
        form.error("ship_postcode", "Enter a 5-digit ZIP code, like 97205.")
    if not form.ok:
        return page.render("order_address.html", status_code=422, order=row, states=US_STATES, editable=editable)
    changed = {k: [row[k], v] for k, v in values.items() if str(row[k]) != v}
    if not changed:
        return page.redirect(f"/orders/{row['number']}", "The shipping address was not changed.", "info")
    now = page.now()
    page.db.execute(
        "UPDATE orders SET " + ", ".join(f"{k} = ?" for k in values) + ", updated_at = ? WHERE id = ?",
        (*values.values(), now, row["id"]),
    )
    queries.add_history(page.db, row["id"], row["status"], "Shipping address updated.", user["full_name"], now)
    page.audit("order.address", "order", row["number"], changed=changed)
    return page.redirect(f"/orders/{row['number']}", "Shipping address updated.")
