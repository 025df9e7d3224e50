"""The forum site assembled: every page module registered on the site's routes (site.py holds what the pages share)."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.sites.common.web import Site
from mcpfleet.sites.forum import actions, auth, browse, moderation  # noqa: F401  (each registers its routes)
from mcpfleet.sites.forum.site import _layout, load_user, routes


def make_site() -> Site:
    return Site(
        name="forum",
        title="Commonplace",
        db_file="forum.db",
        templates=Path(__file__).resolve().parent / "templates",
        routes=routes,
        load_user=load_user,
        actor_name=lambda user: str(user["username"]),
        accent="#c2410c",
        layout=_layout,
    )
