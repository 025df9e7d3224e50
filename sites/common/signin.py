"""Password sign-in and sign-out, shared by the sites whose accounts live in one table (shop, admin).

The shop signs customers in by email, the admin staff by username; the flow, its validation, what a failed or
disabled sign-in writes to the audit log and the session handling are the same, so they live here once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from starlette.responses import Response

from mcpfleet.sites.common.security import check_password
from mcpfleet.sites.common.web import Page


@dataclass(frozen=True)
class Accounts:
    """Where a site's accounts are and what it tells the user."""

    table: str  # e.g. customers
    login_field: str  # the column (and form field) the user signs in with, e.g. email
    login_label: str  # for "... is required."
    target_type: str  # the audit log's target_type for these accounts
    home: str  # where a signed-in user goes by default
    signed_out_to: str
    bad_credentials: str
    disabled: str
    welcome: Callable[[sqlite3.Row], str]


async def login(page: Page, accounts: Accounts) -> Response:
    if page.request.method == "GET":
        if page.user is not None:
            return page.redirect(page.next_url(accounts.home))
        page.form.values["next"] = page.next_url("")
        return page.render("login.html")
    form = page.form
    field = accounts.login_field
    login_value = form.get(field).lower()
    password = form.values.get("password", "")
    if not login_value:
        form.error(field, f"{accounts.login_label} is required.")
    if not password:
        form.error("password", "Password is required.")
    if not form.ok:
        return page.render("login.html", status_code=422)
    # table and field come from the site's own Accounts constant, never from the request
    row = page.db.execute(f"SELECT * FROM {accounts.table} WHERE {field} = ?", (login_value,)).fetchone()
    if row is None or not check_password(password, row["password_hash"]):
        page.audit("auth.login_failed", accounts.target_type, None, **{field: login_value})
        form.error("password", accounts.bad_credentials)
        return page.render("login.html", status_code=422)
    if not row["is_active"]:
        page.audit("auth.login_failed", accounts.target_type, row["id"], **{field: login_value}, reason="disabled")
        form.error(field, accounts.disabled)
        return page.render("login.html", status_code=422)
    page.sign_in(int(row["id"]))
    page.audit("auth.login", accounts.target_type, row["id"])
    return page.redirect(page.next_url(accounts.home), accounts.welcome(row))


async def logout(page: Page, accounts: Accounts) -> Response:
    if page.user is not None:
        page.audit("auth.logout", accounts.target_type, page.user["id"])
    page.sign_out()
    return page.redirect(accounts.signed_out_to, "You have been signed out.")
