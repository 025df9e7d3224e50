"""The customer's account: overview, orders (cancel, buy again), address book, profile, password, wishlist."""

from __future__ import annotations

import sqlite3

from starlette.exceptions import HTTPException
from starlette.responses import Response

from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.names import US_STATES
from mcpfleet.sites.common.security import check_password, new_password_hash
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.shop.cart import validate_address
from mcpfleet.sites.shop.site import routes
from mcpfleet.sites.store import logic, queries

CANCEL_REASONS = {
    "mistake": "Ordered by mistake",
    "price": "Found a better price elsewhere",
    "slow": "Delivery takes too long",
    "changed_mind": "Changed my mind",
    "other": "Other",
}


@routes.get("/account")
async def account(page: Page) -> Response:
    user = page.require_user()
    orders = page.db.execute(
        "SELECT * FROM orders WHERE customer_id = ? ORDER BY created_at DESC, id DESC LIMIT 5", (user["id"],)
    ).fetchall()
    addresses = queries.addresses(page.db, user["id"])
    return page.render("account.html", orders=orders, address=addresses[0] if addresses else None)


@routes.get("/account/orders")
async def orders(page: Page) -> Response:
    user = page.require_user()
    status = page.arg("status")
    where, params = "customer_id = ?", [user["id"]]
    if status in logic.STATUSES:
        where += " AND status = ?"
        params.append(status)
    total = page.db.execute(f"SELECT COUNT(*) FROM orders WHERE {where}", params).fetchone()[0]
    pager = page.paginate(total, 10)
    rows = page.db.execute(
        f"SELECT o.*, (SELECT SUM(quantity) FROM order_items WHERE order_id = o.id) AS item_count FROM orders o"
        f" WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
        [*params, 10, pager.offset],
    ).fetchall()
    filters = Form({"status": status if status in logic.STATUSES else ""})
    return page.render(
        "orders.html", orders=rows, pager=pager, filters=filters, statuses=logic.STATUSES, badges=logic.STATUS_BADGE
    )


def _own_order(page: Page) -> sqlite3.Row:
    user = page.require_user()
    order = queries.order_by_number(page.db, page.path_param("number"))
    if order is None or order["customer_id"] != user["id"]:
        raise HTTPException(404, "We couldn't find that order in your account.")
    return order


@routes.get("/account/orders/{number}")
async def order(page: Page, form: Form | None = None) -> Response:
    row = _own_order(page)
    return page.render(
        "order.html",
        status_code=422 if form is not None else 200,
        form=form or page.form,
        statuses=logic.STATUSES,
        badges=logic.STATUS_BADGE,
        methods=logic.SHIPPING_METHODS,
        payments=logic.PAYMENT_METHODS,
        cancellable=row["status"] in logic.CUSTOMER_CANCELLABLE,
        reasons=CANCEL_REASONS,
        **queries.order_detail(page.db, row),
    )


@routes.post("/account/orders/{number}/cancel")
async def cancel_order(page: Page) -> Response:
    row = _own_order(page)
    if row["status"] not in logic.CUSTOMER_CANCELLABLE:
        return page.redirect(
            f"/account/orders/{row['number']}",
            f"Order #{row['number']} is {logic.STATUSES[row['status']].lower()} and can no longer be cancelled.",
            "error",
        )
    reason = page.form.get("reason")
    if reason not in CANCEL_REASONS:
        page.form.error("reason", "Tell us why you are cancelling this order.")
        return await order(page, page.form)
    now = page.now()
    page.db.execute("UPDATE orders SET status = 'cancelled', updated_at = ? WHERE id = ?", (now, row["id"]))
    queries.restock(page.db, row["id"])
    comment = f"Cancelled by the customer: {CANCEL_REASONS[reason]}."
    queries.add_history(page.db, row["id"], "cancelled", comment, "customer", now)
    page.audit("order.cancel", "order", row["number"], reason=reason, previous_status=row["status"])
    return page.redirect(f"/account/orders/{row['number']}", f"Order #{row['number']} has been cancelled.")


@routes.post("/account/orders/{number}/reorder")
async def reorder(page: Page) -> Response:
    row = _own_order(page)
    user = page.require_user()
    added, skipped = [], []
    now = page.now()
    for item in queries.order_detail(page.db, row)["items"]:
        product = page.db.execute("SELECT * FROM products WHERE id = ?", (item["product_id"],)).fetchone()
        have = page.db.execute(
            "SELECT COALESCE(SUM(quantity), 0) FROM cart_items WHERE customer_id = ? AND product_id = ?",
            (user["id"], item["product_id"]),
        ).fetchone()[0]
        if product is None or product["status"] != "active" or product["stock"] < have + item["quantity"]:
            skipped.append(item["name"])
            continue
        page.db.execute(
            "INSERT INTO cart_items (customer_id, product_id, quantity, added_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(customer_id, product_id) DO UPDATE SET quantity = quantity + excluded.quantity",
            (user["id"], item["product_id"], item["quantity"], now),
        )
        added.append(item["sku"])
    page.audit("cart.reorder", "order", row["number"], added=added, skipped=skipped)
    if not added:
        return page.redirect(
            f"/account/orders/{row['number']}", "None of these items are available right now.", "error"
        )
    message = f"Added {len(added)} item(s) from order #{row['number']} to your cart."
    if skipped:
        message += " Not available: " + ", ".join(skipped) + "."
    return page.redirect("/cart", message, "warning" if skipped else "success")


# -- address book -------------------------------------------------------------------------------------------
@routes.get("/account/addresses")
async def addresses(page: Page) -> Response:
    user = page.require_user()
    return page.render("addresses.html", addresses=queries.addresses(page.db, user["id"]))


def _own_address(page: Page) -> sqlite3.Row:
    user = page.require_user()
    row = page.db.execute(
        "SELECT * FROM addresses WHERE id = ? AND customer_id = ?", (page.int_path_param("id"), user["id"])
    ).fetchone()
    if row is None:
        raise HTTPException(404, "We couldn't find that address in your address book.")
    return row


@routes.form("/account/addresses/new")
async def address_new(page: Page) -> Response:
    user = page.require_user()
    if page.request.method == "GET":
        page.form.values["full_name"] = f"{user['first_name']} {user['last_name']}"
        return page.render("address_form.html", address=None, states=US_STATES)
    values = validate_address(page.form)
    if not page.form.ok:
        return page.render("address_form.html", status_code=422, address=None, states=US_STATES)
    first = not queries.addresses(page.db, user["id"])
    make_default = first or page.form.get("is_default") == "1"
    if make_default:
        page.db.execute("UPDATE addresses SET is_default = 0 WHERE customer_id = ?", (user["id"],))
    cur = page.db.execute(
        "INSERT INTO addresses (customer_id, full_name, line1, line2, city, region, postcode, country, phone,"
        " is_default) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (user["id"], *values.values(), int(make_default)),
    )
    page.audit("address.create", "address", cur.lastrowid, city=values["city"], default=make_default)
    return page.redirect("/account/addresses", "Address saved.")


@routes.form("/account/addresses/{id}/edit")
async def address_edit(page: Page) -> Response:
    row = _own_address(page)
    if page.request.method == "GET":
        page.form = Form({k: str(row[k]) for k in row.keys() if k not in ("id", "customer_id")})
        return page.render("address_form.html", address=row, states=US_STATES)
    values = validate_address(page.form)
    if not page.form.ok:
        return page.render("address_form.html", status_code=422, address=row, states=US_STATES)
    page.db.execute(
        "UPDATE addresses SET full_name = ?, line1 = ?, line2 = ?, city = ?, region = ?, postcode = ?, country = ?,"
        " phone = ? WHERE id = ?",
        (*values.values(), row["id"]),
    )
    changed = {k: v for k, v in values.items() if str(row[k]) != v}
    page.audit("address.update", "address", row["id"], changed=sorted(changed))
    return page.redirect("/account/addresses", "Address updated.")


@routes.post("/account/addresses/{id}/delete")
async def address_delete(page: Page) -> Response:
    row = _own_address(page)
    page.db.execute("DELETE FROM addresses WHERE id = ?", (row["id"],))
    if row["is_default"]:
        page.db.execute(
            "UPDATE addresses SET is_default = 1 WHERE id = (SELECT MIN(id) FROM addresses WHERE customer_id = ?)",
            (row["customer_id"],),
        )
    page.audit("address.delete", "address", row["id"], city=row["city"])
    return page.redirect("/account/addresses", "Address deleted.")


@routes.post("/account/addresses/{id}/default")
async def address_default(page: Page) -> Response:
    row = _own_address(page)
    page.db.execute("UPDATE addresses SET is_default = (id = ?) WHERE customer_id = ?", (row["id"], row["customer_id"]))
    page.audit("address.set_default", "address", row["id"])
    return page.redirect("/account/addresses", "Default address updated.")


# -- profile, password, wishlist ----------------------------------------------------------------------------
@routes.form("/account/profile")
async def profile(page: Page) -> Response:
    user = page.require_user()
    if page.request.method == "GET":
        page.form = Form(
            {
                "first_name": user["first_name"],
                "last_name": user["last_name"],
                "phone": user["phone"],
                "newsletter": "1" if user["newsletter"] else "",
            }
        )
        return page.render("profile.html")
    form = page.form
    first = form.required("first_name", "First name", 60)
    last = form.required("last_name", "Last name", 60)
    phone = form.optional("phone", "Phone", 30)
    newsletter = int(form.get("newsletter") == "1")
    if not form.ok:
        return page.render("profile.html", status_code=422)
    page.db.execute(
        "UPDATE customers SET first_name = ?, last_name = ?, phone = ?, newsletter = ? WHERE id = ?",
        (first, last, phone, newsletter, user["id"]),
    )
    new = {"first_name": first, "last_name": last, "phone": phone, "newsletter": newsletter}
    page.audit("account.update", "customer", user["id"], changed=sorted(k for k, v in new.items() if user[k] != v))
    return page.redirect("/account/profile", "Your details have been saved.")


@routes.form("/account/password")
async def password(page: Page) -> Response:
    user = page.require_user()
    if page.request.method == "GET":
        return page.render("password.html")
    form = page.form
    if not check_password(form.values.get("current_password", ""), user["password_hash"]):
        form.error("current_password", "Your current password is incorrect.")
    new = form.password("new_password", confirm="new_password_confirm", label="New password")
    if not form.ok:
        return page.render("password.html", status_code=422)
    page.db.execute("UPDATE customers SET password_hash = ? WHERE id = ?", (new_password_hash(new), user["id"]))
    page.audit("account.password_change", "customer", user["id"])
    return page.redirect("/account", "Your password has been changed.")


@routes.get("/account/wishlist")
async def wishlist(page: Page) -> Response:
    user = page.require_user()
    items = page.db.execute(
        "SELECT w.added_at, p.* FROM wishlist_items w JOIN products p ON p.id = w.product_id"
        " WHERE w.customer_id = ? ORDER BY w.added_at DESC, p.id",
        (user["id"],),
    ).fetchall()
    return page.render("wishlist.html", items=items)
