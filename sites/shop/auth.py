"""Sign in, sign out and registration for customers."""

from __future__ import annotations

from starlette.responses import Response

from ..common.security import check_password, new_password_hash
from ..common.web import Page
from .site import routes


@routes.form("/login")
async def login(page: Page) -> Response:
    if page.request.method == "GET":
        if page.user is not None:
            return page.redirect(page.next_url("/account"))
        page.form.values["next"] = page.next_url("")
        return page.render("login.html")
    form = page.form
    email = form.get("email").lower()
    password = form.values.get("password", "")
    if not email:
        form.error("email", "Email address is required.")
    if not password:
        form.error("password", "Password is required.")
    if not form.ok:
        return page.render("login.html", status_code=422)
    row = page.db.execute("SELECT * FROM customers WHERE email = ?", (email,)).fetchone()
    if row is None or not check_password(password, row["password_hash"]):
        page.audit("auth.login_failed", "customer", None, email=email)
        form.error("password", "Incorrect email or password.")
        return page.render("login.html", status_code=422)
    if not row["is_active"]:
        page.audit("auth.login_failed", "customer", row["id"], email=email, reason="disabled")
        form.error("email", "This account has been disabled. Please contact customer support.")
        return page.render("login.html", status_code=422)
    page.sign_in(int(row["id"]))
    page.audit("auth.login", "customer", row["id"])
    return page.redirect(page.next_url("/account"), f"Welcome back, {row['first_name']}!")


@routes.post("/logout")
async def logout(page: Page) -> Response:
    if page.user is not None:
        page.audit("auth.logout", "customer", page.user["id"])
    page.sign_out()
    return page.redirect("/", "You have been signed out.")


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
