"""Customers: search, filter, sort, detail with orders and addresses, edit (group, status, contact details)."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response

from mcpfleet.sites.admin.site import routes, staff
from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.store import queries

PER_PAGE = 25
GROUPS = {"general": "General", "wholesale": "Wholesale", "vip": "VIP"}
SORTS = {
    "newest": ("Newest first", "c.created_at DESC, c.id DESC"),
    "name": ("Name: A to Z", "c.last_name, c.first_name, c.id"),
    "orders": ("Most orders", "order_count DESC, c.id"),
    "spent": ("Highest lifetime value", "spent DESC, c.id"),
}
STATS = (
    "(SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS order_count,"
    " (SELECT COALESCE(SUM(total_cents), 0) FROM orders o WHERE o.customer_id = c.id"
    " AND o.status NOT IN ('cancelled', 'refunded')) AS spent"
)


@routes.get("/customers")
async def customers(page: Page) -> Response:
    staff(page)
    filters = Form({k: page.arg(k) for k in ("q", "group", "status", "sort")})
    where: list[str] = []
    params: list[Any] = []
    if filters.get("q"):
        where.append("(c.email LIKE ? OR (c.first_name || ' ' || c.last_name) LIKE ? OR c.phone LIKE ?)")
        params += [f"%{filters.get('q')}%"] * 3
    if filters.get("group") in GROUPS:
        where.append("c.customer_group = ?")
        params.append(filters.get("group"))
    if filters.get("status") in ("active", "disabled"):
        where.append("c.is_active = ?")
        params.append(1 if filters.get("status") == "active" else 0)
    sort = filters.get("sort") if filters.get("sort") in SORTS else "newest"
    filters.values["sort"] = sort
    clause = (" WHERE " + " AND ".join(where)) if where else ""
    total = page.db.execute(f"SELECT COUNT(*) FROM customers c{clause}", params).fetchone()[0]
    pager = page.paginate(total, PER_PAGE)
    rows = page.db.execute(
        f"SELECT c.*, {STATS} FROM customers c{clause} ORDER BY {SORTS[sort][1]} LIMIT ? OFFSET ?",
        [*params, PER_PAGE, pager.offset],
    ).fetchall()
    return page.render(
        "customers.html",
        customers=rows,
        pager=pager,
        filters=filters,
        groups=GROUPS,
        group_options=list(GROUPS.items()),
        sorts=[(k, v[0]) for k, v in SORTS.items()],
    )


@routes.form("/customers/{id}")
async def customer(page: Page) -> Response:
    staff(page, None if page.request.method == "GET" else "customers.edit")
    row = page.db.execute(
        f"SELECT c.*, {STATS} FROM customers c WHERE c.id = ?", (page.int_path_param("id"),)
    ).fetchone()
    if row is None:
        raise HTTPException(404, "There is no such customer.")
    orders = page.db.execute(
        "SELECT * FROM orders WHERE customer_id = ? ORDER BY created_at DESC, id DESC", (row["id"],)
    ).fetchall()
    context = {
        "customer": row,
        "orders": orders,
        "addresses": queries.addresses(page.db, row["id"]),
        "groups": GROUPS,
        "group_options": list(GROUPS.items()),
    }
    if page.request.method == "GET":
        page.form = Form(
            {
                "first_name": row["first_name"],
                "last_name": row["last_name"],
                "email": row["email"],
                "phone": row["phone"],
                "customer_group": row["customer_group"],
                "is_active": "1" if row["is_active"] else "",
            }
        )
        return page.render("customer.html", **context)
    form = page.form
    values: dict[str, Any] = {
        "first_name": form.required("first_name", "First name", 60),
        "last_name": form.required("last_name", "Last name", 60),
        "email": form.email("email"),
        "phone": form.optional("phone", "Phone", 30),
        "customer_group": form.choice("customer_group", "Customer group", GROUPS),
        "is_active": int(form.get("is_active") == "1"),
    }
    if values["email"] and "email" not in form.errors:
        clash = page.db.execute("SELECT id FROM customers WHERE email = ?", (values["email"],)).fetchone()
        if clash and clash["id"] != row["id"]:
            form.error("email", "Another customer already uses this email address.")
    if not form.ok:
        return page.render("customer.html", status_code=422, **context)
    changed = {k: [row[k], v] for k, v in values.items() if row[k] != v}
    if not changed:
        return page.redirect(f"/customers/{row['id']}", "No changes to save.", "info")
    page.db.execute(
        "UPDATE customers SET " + ", ".join(f"{k} = ?" for k in changed) + " WHERE id = ?",
        (*(v[1] for v in changed.values()), row["id"]),
    )
    if "is_active" in changed and not values["is_active"]:
        page.db.execute("DELETE FROM sessions WHERE site = 'shop' AND user_id = ?", (row["id"],))  # sign them out
    page.audit("customer.update", "customer", row["id"], changed=changed)
    return page.redirect(f"/customers/{row['id']}", f"Customer {values['first_name']} {values['last_name']} saved.")
