"""Staff sign-in and sign-out."""

from __future__ import annotations

from starlette.responses import Response

from ..common.security import check_password
from ..common.web import Page
from .site import routes


@routes.form("/login")
async def login(page: Page) -> Response:
    if page.request.method == "GET":
        if page.user is not None:
            return page.redirect(page.next_url("/"))
        page.form.values["next"] = page.next_url("")
        return page.render("login.html")
    form = page.form
    username = form.get("username").lower()
    password = form.values.get("password", "")
    if not username:
        form.error("username", "Username is required.")
    if not password:
        form.error("password", "Password is required.")
    if not form.ok:
        return page.render("login.html", status_code=422)
    row = page.db.execute("SELECT * FROM admin_users WHERE username = ?", (username,)).fetchone()
    if row is None or not check_password(password, row["password_hash"]):
        page.audit("auth.login_failed", "admin_user", None, username=username)
        form.error("password", "Invalid username or password.")
        return page.render("login.html", status_code=422)
    if not row["is_active"]:
        page.audit("auth.login_failed", "admin_user", row["id"], username=username, reason="disabled")
        form.error("username", "This staff account has been deactivated.")
        return page.render("login.html", status_code=422)
    page.sign_in(int(row["id"]))
    page.audit("auth.login", "admin_user", row["id"])
    return page.redirect(page.next_url("/"), f"Signed in as {row['full_name']}.")


@routes.post("/logout")
async def logout(page: Page) -> Response:
    if page.user is not None:
        page.audit("auth.logout", "admin_user", page.user["id"])
    page.sign_out()
    return page.redirect("/login", "You have been signed out.")
