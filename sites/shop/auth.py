"""Sign in, sign out and registration for customers."""

from __future__ import annotations

from starlette.responses import Response

from mcpfleet.sites.common import signin
from mcpfleet.sites.common.security import new_password_hash
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.shop.site import routes

CUSTOMERS = signin.Accounts(
    table="customers",
    login_field="email",
    login_label="Email address",
    target_type="customer",
    home="/account",
    signed_out_to="/",
    bad_credentials="Incorrect email or password.",
    disabled="This account has been disabled. Please contact customer support.",
    welcome=lambda row: f"Welcome back, {row['first_name']}!",
)


@routes.form("/login")
async def login(page: Page) -> Response:
    return await signin.login(page, CUSTOMERS)


@routes.post("/logout")
async def logout(page: Page) -> Response:
    return await signin.logout(page, CUSTOMERS)


@routes.form("/register")
async def register(page: Page) -> Response:
    if page.request.method == "GET":
        return page.render("register.html")
    form = page.form
    first = form.required("first_name", "First name", 60)
    last = form.required("last_name", "Last name", 60)
    email = form.email("email")
    password = form.password("password", confirm="password_confirm")
    if email and "email" not in form.errors:
        if page.db.execute("SELECT 1 FROM customers WHERE email = ?", (email,)).fetchone():
            form.error("email", "An account with this email address already exists. Sign in instead.")
    if not form.ok:
        return page.render("register.html", status_code=422)
    cur = page.db.execute(
        "INSERT INTO customers (email, password_hash, first_name, last_name, customer_group, newsletter, created_at)"
        " VALUES (?, ?, ?, ?, 'general', ?, ?)",
        (email, new_password_hash(password), first, last, int(form.get("newsletter") == "1"), page.now()),
    )
    customer_id = int(cur.lastrowid or 0)
    page.sign_in(customer_id)
    page.audit("account.register", "customer", customer_id, email=email, newsletter=form.get("newsletter") == "1")
    return page.redirect("/account", f"Welcome, {first}! Your account has been created.")
