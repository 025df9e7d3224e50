"""The admin site assembled: every page module registered on the site's routes (site.py holds what the pages share)."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.sites.admin import auth, catalog, customers, orders, reports  # noqa: F401  (each registers its routes)
from mcpfleet.sites.admin.site import _layout, load_staff, routes
from mcpfleet.sites.common.web import Site


def make_site() -> Site:
    return Site(
        name="admin",
        title="Larkspur Goods Admin",
        db_file="store.db",
        templates=Path(__file__).resolve().parent / "templates",
        routes=routes,
        load_user=load_staff,
        actor_name=lambda user: str(user["username"]),
        accent="#7c3aed",
        layout=_layout,
    )
