"""Cart, wishlist and the two-step checkout (shipping, then payment and review) that places an order."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from starlette.responses import Response

from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.names import US_STATES
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.shop.site import routes
from mcpfleet.sites.store import logic, queries

STATE_CODES = {code for code, _ in US_STATES}


def cart_lines(conn: sqlite3.Connection, customer_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT ci.quantity, p.* FROM cart_items ci JOIN products p ON p.id = ci.product_id"
        " WHERE ci.customer_id = ? ORDER BY ci.added_at, p.id",
        (customer_id,),
    ).fetchall()
    lines = []
    for row in rows:
        price = logic.unit_price(row)
        problem = ""
        if row["status"] != "active":
            problem = "This item is no longer available."
        elif row["stock"] == 0:
            problem = "This item is out of stock."
        elif row["quantity"] > row["stock"]:
            problem = f"Only {row['stock']} left in stock."
        lines.append(
            {
                "product": row,
                "quantity": row["quantity"],
                "price": price,
                "total": price * row["quantity"],
                "problem": problem,
            }
        )
    return lines


def _find_product(page: Page) -> sqlite3.Row | None:
    try:
        product_id = int(page.form.get("product_id"))
    except ValueError:
        return None
    return page.db.execute("SELECT * FROM products WHERE id = ?", (product_id,)).fetchone()


@routes.post("/cart/add")
async def cart_add(page: Page) -> Response:
    user = page.require_user()
    product = _find_product(page)
    back = page.next_url("/cart")
    if product is None or product["status"] != "active":
        return page.redirect(back, "That product is not available.", "error")
    try:
        quantity = int(page.form.get("quantity", "1") or "1")
    except ValueError:
        quantity = 0
    if quantity < 1 or quantity > 99:
        return page.redirect(back, "Enter a quantity between 1 and 99.", "error")
    row = page.db.execute(
        "SELECT quantity FROM cart_items WHERE customer_id = ? AND product_id = ?", (user["id"], product["id"])
    ).fetchone()
    have = int(row[0]) if row else 0
    if product["stock"] == 0:
        return page.redirect(back, f"Sorry, {product['name']} is out of stock.", "error")
    if have + quantity > product["stock"]:
        return page.redirect(
            back,
            f"Sorry, only {product['stock']} of {product['name']} in stock (you have {have} in your cart).",
            "error",
        )
    now = page.now()
    page.db.execute(
        "INSERT INTO cart_items (customer_id, product_id, quantity, added_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(customer_id, product_id) DO UPDATE SET quantity = quantity + excluded.quantity",
        (user["id"], product["id"], quantity, now),
    )
    page.audit("cart.add", "product", product["id"], sku=product["sku"], quantity=quantity)
    return page.redirect(back, f"Added {quantity} × {product['name']} to your cart.")


@routes.get("/cart")
async def cart(page: Page) -> Response:
    user = page.require_user()
    lines = cart_lines(page.db, user["id"])
    return page.render("cart.html", lines=lines, subtotal=sum(line["total"] for line in lines))


@routes.post("/cart/update")
async def cart_update(page: Page) -> Response:
    user = page.require_user()
    lines = cart_lines(page.db, user["id"])
    remove = page.form.get("remove")
    if remove:
        for line in lines:
            if str(line["product"]["id"]) == remove:
                page.db.execute(
                    "DELETE FROM cart_items WHERE customer_id = ? AND product_id = ?",
                    (user["id"], line["product"]["id"]),
                )
                page.audit("cart.remove", "product", line["product"]["id"], sku=line["product"]["sku"])
                return page.redirect("/cart", f"Removed {line['product']['name']} from your cart.")
        return page.redirect("/cart", "That item is not in your cart.", "error")
    changes = []
    for line in lines:
        product = line["product"]
        raw = page.form.get(f"qty-{product['id']}")
        if raw == "":
            continue
        try:
            quantity = int(raw)
        except ValueError:
            return page.redirect("/cart", f"Enter a whole number for {product['name']}.", "error")
        if quantity < 0 or quantity > 99:
            return page.redirect("/cart", f"Enter a quantity between 0 and 99 for {product['name']}.", "error")
        if quantity > product["stock"]:
            return page.redirect("/cart", f"Only {product['stock']} of {product['name']} in stock.", "error")
        if quantity != line["quantity"]:
            changes.append((product, line["quantity"], quantity))
    for product, old, new in changes:
        if new == 0:
            page.db.execute(
                "DELETE FROM cart_items WHERE customer_id = ? AND product_id = ?", (user["id"], product["id"])
            )
        else:
            page.db.execute(
                "UPDATE cart_items SET quantity = ? WHERE customer_id = ? AND product_id = ?",
                (new, user["id"], product["id"]),
            )
        page.audit("cart.update", "product", product["id"], sku=product["sku"], old_quantity=old, quantity=new)
    return page.redirect("/cart", "Your cart has been updated." if changes else "No changes to your cart.")


# -- wishlist -----------------------------------------------------------------------------------------------
@routes.post("/wishlist/add")
async def wishlist_add(page: Page) -> Response:
    user = page.require_user()
    product = _find_product(page)
    back = page.next_url("/account/wishlist")
    if product is None or product["status"] != "active":
        return page.redirect(back, "That product is not available.", "error")
    cur = page.db.execute(
        "INSERT OR IGNORE INTO wishlist_items (customer_id, product_id, added_at) VALUES (?, ?, ?)",
        (user["id"], product["id"], page.now()),
    )
    if cur.rowcount:
        page.audit("wishlist.add", "product", product["id"], sku=product["sku"])
    return page.redirect(back, f"Saved {product['name']} to your wishlist.")


@routes.post("/wishlist/remove")
async def wishlist_remove(page: Page) -> Response:
    user = page.require_user()
    product = _find_product(page)
    back = page.next_url("/account/wishlist")
    if product is None:
        return page.redirect(back, "That product is not on your wishlist.", "error")
    cur = page.db.execute(
        "DELETE FROM wishlist_items WHERE customer_id = ? AND product_id = ?", (user["id"], product["id"])
    )
    if cur.rowcount:
        page.audit("wishlist.remove", "product", product["id"], sku=product["sku"])
    return page.redirect(back, f"Removed {product['name']} from your wishlist.")


# -- checkout -----------------------------------------------------------------------------------------------
def validate_address(form: Form) -> dict[str, str]:
    """The address fields every address form shares; errors land on ``form``."""
    values = {
        "full_name": form.required("full_name", "Full name", 100),
        "line1": form.required("line1", "Street address", 120),
        "line2": form.optional("line2", "Apartment, suite, etc.", 120),
        "city": form.required("city", "City", 80),
        "region": form.get("region"),
        "postcode": form.required("postcode", "ZIP code", 10),
        "country": "United States",
        "phone": form.optional("phone", "Phone", 30),
    }
    if values["region"] not in STATE_CODES:
        form.error("region", "Choose a state.")
    if values["postcode"] and not re.fullmatch(r"\d{5}(-\d{4})?", values["postcode"]):
        form.error("postcode", "Enter a 5-digit ZIP code, like 97205.")
    if values["phone"] and len(re.sub(r"\D", "", values["phone"])) < 10:
        form.error("phone", "Enter a 10-digit phone number, or leave it empty.")
    return values


def _checkout_state(page: Page) -> dict[str, Any]:
    return dict(page.ensure_session().data.get("checkout", {}))


def _save_checkout(page: Page, state: dict[str, Any]) -> None:
    session = page.ensure_session()
    session.data["checkout"] = state
    session.dirty = True


@routes.get("/checkout")
async def checkout(page: Page) -> Response:
    page.require_user()
    return page.redirect("/checkout/shipping")


@routes.form("/checkout/shipping")
async def checkout_shipping(page: Page) -> Response:
    user = page.require_user()
    lines = cart_lines(page.db, user["id"])
    if not lines:
        return page.redirect("/cart", "Your cart is empty.", "info")
    saved = queries.addresses(page.db, user["id"])
    state = _checkout_state(page)
    form = page.form
    if page.request.method == "GET":
        form.values.update(state.get("form", {}))
        form.values.setdefault("address_id", str(saved[0]["id"]) if saved else "new")
        form.values.setdefault("shipping_method", "standard")
        return page.render(
            "checkout_shipping.html", saved=saved, methods=logic.SHIPPING_METHODS, lines=lines, states=US_STATES
        )
    choice = form.get("address_id") or "new"
    address: dict[str, str] = {}
    if choice == "new":
        address = validate_address(form)
    else:
        match = [a for a in saved if str(a["id"]) == choice]
        if not match:
            form.error("address_id", "Choose one of your saved addresses or enter a new one.")
        else:
            a = match[0]
            address = {
                k: a[k] for k in ("full_name", "line1", "line2", "city", "region", "postcode", "country", "phone")
            }
    method = form.choice("shipping_method", "Shipping method", logic.SHIPPING_METHODS)
    if not form.ok:
        return page.render(
            "checkout_shipping.html",
            status_code=422,
            saved=saved,
            methods=logic.SHIPPING_METHODS,
            lines=lines,
            states=US_STATES,
        )
    if choice == "new" and form.get("save_address") == "1":
        cur = page.db.execute(
            "INSERT INTO addresses (customer_id, full_name, line1, line2, city, region, postcode, country, phone,"
            " is_default) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (user["id"], *address.values(), int(not saved)),
        )
        page.audit("address.create", "address", cur.lastrowid, source="checkout")
    state.update(
        {
            "address": address,
            "shipping_method": method,
            "form": {k: v for k, v in form.values.items() if k != "csrf_token"},
        }
    )
    _save_checkout(page, state)
    page.audit("checkout.shipping", "customer", user["id"], shipping_method=method, postcode=address["postcode"])
    return page.redirect("/checkout/payment")


def _luhn(number: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _coupon(page: Page, code: str | None) -> sqlite3.Row | None:
    if not code:
        return None
    return page.db.execute("SELECT * FROM coupons WHERE code = ?", (code.upper(),)).fetchone()


def _summary(page: Page, lines: list[dict[str, Any]], state: dict[str, Any]) -> dict[str, Any]:
    subtotal = sum(line["total"] for line in lines)
    coupon = _coupon(page, state.get("coupon"))
    if coupon is not None and logic.coupon_problem(coupon, subtotal, page.today):
        coupon = None
    totals = logic.compute_totals(subtotal, state["shipping_method"], coupon, logic.settings(page.db))
    return {
        "lines": lines,
        "totals": totals,
        "coupon": coupon,
        "state": state,
        "methods": logic.SHIPPING_METHODS,
        "payments": logic.PAYMENT_METHODS,
    }


@routes.post("/checkout/coupon")
async def checkout_coupon(page: Page) -> Response:
    user = page.require_user()
    state = _checkout_state(page)
    if "shipping_method" not in state:
        return page.redirect("/checkout/shipping")
    if page.form.get("action") == "remove":
        state.pop("coupon", None)
        _save_checkout(page, state)
        page.audit("checkout.coupon_remove", "customer", user["id"])
        return page.redirect("/checkout/payment", "Coupon removed.")
    code = page.form.get("coupon_code").upper()
    lines = cart_lines(page.db, user["id"])
    subtotal = sum(line["total"] for line in lines)
    if not code:
        page.form.error("coupon_code", "Enter a coupon code.")
    else:
        problem = logic.coupon_problem(_coupon(page, code), subtotal, page.today)
        if problem:
            page.form.error("coupon_code", problem)
    if not page.form.ok:
        page.audit("checkout.coupon_rejected", "coupon", code or None, reason=page.form.errors["coupon_code"])
        return page.render("checkout_payment.html", status_code=422, **_summary(page, lines, state))
    state["coupon"] = code
    _save_checkout(page, state)
    page.audit("checkout.coupon_apply", "coupon", code)
    return page.redirect("/checkout/payment", f"Coupon {code} applied.")


@routes.form("/checkout/payment")
async def checkout_payment(page: Page) -> Response:
    user = page.require_user()
    state = _checkout_state(page)
    if "shipping_method" not in state:
        return page.redirect("/checkout/shipping", "Please choose a shipping address first.", "info")
    lines = cart_lines(page.db, user["id"])
    if not lines:
        return page.redirect("/cart", "Your cart is empty.", "info")
    form = page.form
    if page.request.method == "GET":
        form.values.setdefault("payment_method", "card")
        return page.render("checkout_payment.html", **_summary(page, lines, state))
    method = form.choice("payment_method", "Payment method", logic.PAYMENT_METHODS)
    last4 = None
    if method == "card":
        form.required("card_name", "Name on card", 100)
        number = re.sub(r"[\s-]", "", form.get("card_number"))
        if not number:
            form.error("card_number", "Card number is required.")
        elif not number.isdigit() or not 13 <= len(number) <= 19 or not _luhn(number):
            form.error("card_number", "Enter a valid card number.")
        else:
            last4 = number[-4:]
        expiry = form.get("card_expiry")
        m = re.fullmatch(r"(\d{2})\s*/\s*(\d{2})", expiry)
        if not expiry:
            form.error("card_expiry", "Expiry date is required.")
        elif not m or not 1 <= int(m.group(1)) <= 12:
            form.error("card_expiry", "Enter the expiry date as MM/YY.")
        elif f"20{m.group(2)}-{m.group(1)}" < page.today[:7]:
            form.error("card_expiry", "This card has expired.")
        if not re.fullmatch(r"\d{3,4}", form.get("card_cvc")):
            form.error("card_cvc", "Enter the 3- or 4-digit security code.")
    note = form.optional("customer_note", "Order note", 500)
    problems = [line for line in lines if line["problem"]]
    if problems:
        form.error(
            "cart",
            "Some items in your cart are unavailable: "
            + "; ".join(f"{line['product']['name']}: {line['problem']}" for line in problems),
        )
    if not form.ok:
        return page.render("checkout_payment.html", status_code=422, **_summary(page, lines, state))
    summary = _summary(page, lines, state)
    totals: logic.Totals = summary["totals"]
    coupon = summary["coupon"]
    now = page.now()
    address = state["address"]
    status = "processing" if method == "card" else "pending"
    last = page.db.execute("SELECT MAX(CAST(number AS INTEGER)) FROM orders").fetchone()[0]
    number = str(int(last or 100000) + 1)
    cur = page.db.execute(
        "INSERT INTO orders (number, customer_id, email, status, created_at, updated_at, subtotal_cents,"
        " discount_cents, shipping_cents, tax_cents, total_cents, coupon_code, shipping_method, payment_method,"
        " card_last4, ship_name, ship_line1, ship_line2, ship_city, ship_region, ship_postcode, ship_country,"
        " ship_phone, customer_note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            number,
            user["id"],
            user["email"],
            status,
            now,
            now,
            totals.subtotal,
            totals.discount,
            totals.shipping,
            totals.tax,
            totals.total,
            coupon["code"] if coupon else None,
            state["shipping_method"],
            method,
            last4,
            address["full_name"],
            address["line1"],
            address["line2"],
            address["city"],
            address["region"],
            address["postcode"],
            address["country"],
            address["phone"],
            note,
        ),
    )
    order_id = int(cur.lastrowid or 0)
    for line in lines:
        p = line["product"]
        page.db.execute(
            "INSERT INTO order_items (order_id, product_id, sku, name, unit_price_cents, quantity, line_total_cents)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (order_id, p["id"], p["sku"], p["name"], line["price"], line["quantity"], line["total"]),
        )
        page.db.execute("UPDATE products SET stock = stock - ? WHERE id = ?", (line["quantity"], p["id"]))
    queries.add_history(page.db, order_id, "pending", "Order placed.", "system", now)
    if status == "processing":
        queries.add_history(page.db, order_id, "processing", "Payment captured.", "system", now)
    if coupon is not None:
        page.db.execute("UPDATE coupons SET times_used = times_used + 1 WHERE code = ?", (coupon["code"],))
    page.db.execute("DELETE FROM cart_items WHERE customer_id = ?", (user["id"],))
    session = page.ensure_session()
    session.data.pop("checkout", None)
    session.dirty = True
    page.audit(
        "order.place",
        "order",
        number,
        total_cents=totals.total,
        items=len(lines),
        payment_method=method,
        shipping_method=state["shipping_method"],
        coupon=coupon["code"] if coupon else None,
    )
    return page.redirect(f"/account/orders/{number}", f"Thank you! Your order #{number} has been placed.")
