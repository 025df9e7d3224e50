"""Sign in, sign out, registration and account settings for forum users."""

from __future__ import annotations

import re

from starlette.responses import Response

from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.security import check_password, new_password_hash
from mcpfleet.sites.common.web import Page
from mcpfleet.sites.forum.site import routes

USERNAME = re.compile(r"^[A-Za-z0-9_]{3,20}$")


@routes.form("/login")
async def login(page: Page) -> Response:
    if page.request.method == "GET":
        if page.user is not None:
            return page.redirect(page.next_url("/"))
        page.form.values["next"] = page.next_url("")
        return page.render("login.html")
    form = page.form
    username = form.get("username")
    password = form.values.get("password", "")
    if not username:
        form.error("username", "Username is required.")
    if not password:
        form.error("password", "Password is required.")
    if not form.ok:
        return page.render("login.html", status_code=422)
    row = page.db.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
    if row is None or not check_password(password, row["password_hash"]):
        page.audit("auth.login_failed", "user", None, username=username)
        form.error("password", "The username or password is incorrect.")
        return page.render("login.html", status_code=422)
    if row["is_banned"]:
        page.audit("auth.login_failed", "user", row["id"], username=row["username"], reason="banned")
        form.error("username", "This account has been banned from Commonplace.")
        return page.render("login.html", status_code=422)
    page.sign_in(int(row["id"]))
    page.audit("auth.login", "user", row["id"])
    return page.redirect(page.next_url("/"), f"Signed in as {row['username']}.")


@routes.post("/logout")
async def logout(page: Page) -> Response:
    if page.user is not None:
        page.audit("auth.logout", "user", page.user["id"])
    page.sign_out()
    return page.redirect("/", "You have been signed out.")


@routes.form("/register")
async def register(page: Page) -> Response:
    if page.request.method == "GET":
        return page.render("register.html")
    form = page.form
    username = form.required("username", "Username", 20)
    if username and "username" not in form.errors:
        if not USERNAME.match(username):
            form.error("username", "Usernames are 3-20 letters, digits or underscores.")
        elif page.db.execute("SELECT 1 FROM users WHERE username = ?", (username,)).fetchone():
            form.error("username", f"The username {username} is already taken.")
    email = form.email("email")
    password = form.password("password", confirm="password_confirm")
    if not form.ok:
        return page.render("register.html", status_code=422)
    cur = page.db.execute(
        "INSERT INTO users (username, email, password_hash, role, created_at) VALUES (?, ?, ?, 'member', ?)",
        (username, email, new_password_hash(password), page.now()),
    )
    page.sign_in(int(cur.lastrowid or 0))
    page.audit("account.register", "user", cur.lastrowid, username=username)
    return page.redirect("/", f"Welcome to Commonplace, {username}!")


@routes.form("/settings")
async def settings(page: Page) -> Response:
    user = page.require_user()
    if page.request.method == "GET":
        page.form = Form({"email": user["email"], "bio": user["bio"]})
        return page.render("settings.html")
    form = page.form
    email = form.email("email")
    bio = form.optional("bio", "Bio", 500)
    if not form.ok:
        return page.render("settings.html", status_code=422)
    changed = sorted(k for k, v in (("email", email), ("bio", bio)) if user[k] != v)
    page.db.execute("UPDATE users SET email = ?, bio = ? WHERE id = ?", (email, bio, user["id"]))
    page.audit("account.update", "user", user["id"], changed=changed)
    return page.redirect("/settings", "Your settings have been saved.")


@routes.form("/settings/password")
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
    page.db.execute("UPDATE users SET password_hash = ? WHERE id = ?", (new_password_hash(new), user["id"]))
    page.audit("account.password_change", "user", user["id"])
    return page.redirect("/settings", "Your password has been changed.")
