"""Staff sign-in and sign-out."""

from __future__ import annotations

from starlette.responses import Response

from mcpfleet.sites.admin.site import routes
from mcpfleet.sites.common import signin
from mcpfleet.sites.common.web import Page

STAFF = signin.Accounts(
    table="admin_users",
    login_field="username",
    login_label="Username",
    target_type="admin_user",
    home="/",
    signed_out_to="/login",
    bad_credentials="Invalid username or password.",
    disabled="This staff account has been deactivated.",
    welcome=lambda row: f"Signed in as {row['full_name']}.",
)


@routes.form("/login")
async def login(page: Page) -> Response:
    return await signin.login(page, STAFF)


@routes.post("/logout")
async def logout(page: Page) -> Response:
    return await signin.logout(page, STAFF)
