"""The shop site assembled: every page module registered on the site's routes (site.py holds what the pages share)."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.sites.common.web import Site
from mcpfleet.sites.shop import account, auth, cart, catalog  # noqa: F401  (each registers its routes)
from mcpfleet.sites.shop.site import _layout, load_customer, routes


def make_site() -> Site:
    return Site(
        name="shop",
        title="Larkspur Goods",
        db_file="store.db",
        templates=Path(__file__).resolve().parent / "templates",
        routes=routes,
        load_user=load_customer,
        actor_name=lambda user: str(user["email"]),
        accent="#0f766e",
        layout=_layout,
    )
