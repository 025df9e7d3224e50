"""Bundled web sites for browser tasks: a shop, its admin panel and a discussion forum.

Each site is a server-rendered Starlette app over one SQLite file in a data folder. The shop and the admin
panel share one file (``store.db``): two sites to the agent, one store. :data:`SITES` names them; :func:`seed`
writes a fresh, deterministic copy of a site's data into a folder (built once per seed into a cache, then
copied, so a trial pays milliseconds). Kept import-light: the generators load only when a seed is built.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
CACHE_ENV = "MCPFLEET_SITES_CACHE"


@dataclass(frozen=True)
class SiteInfo:
    name: str
    data: str  # the data kind: sites with the same kind share one database file
    db_file: str
    generator: str  # module with build(path, seed) and DEFAULT_SEED
    sources: tuple[str, ...]  # files whose content defines the generated data (the cache key)


_STORE_SOURCES = ("store/seed.py", "store/content.py", "store/schema.sql", "store/logic.py")
_COMMON_SOURCES = ("common/seeding.py", "common/names.py", "common/db.py", "common/security.py")

SITES: dict[str, SiteInfo] = {
    "shop": SiteInfo("shop", "store", "store.db", "mcpfleet.sites.store.seed", _STORE_SOURCES + _COMMON_SOURCES),
    "admin": SiteInfo("admin", "store", "store.db", "mcpfleet.sites.store.seed", _STORE_SOURCES + _COMMON_SOURCES),
    "forum": SiteInfo(
        "forum",
        "forum",
        "forum.db",
        "mcpfleet.sites.forum.seed",
        ("forum/seed.py", "forum/content.py", "forum/schema.sql") + _COMMON_SOURCES,
    ),
}


def site_info(name: str) -> SiteInfo:
    try:
        return SITES[name]
    except KeyError:
        raise ValueError(f"unknown site '{name}' (known: {', '.join(SITES)})") from None


def default_seed(name: str) -> int:
    return int(importlib.import_module(site_info(name).generator).DEFAULT_SEED)


def fingerprint(name: str) -> str:
    """Hash of the generator's sources: a cached seed database is reused only while they are unchanged."""
    digest = hashlib.sha256()
    for rel in site_info(name).sources:
        digest.update(rel.encode() + b"\0" + (ROOT / rel).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build(name: str, path: Path, seed: int | None = None) -> Path:
    """Generate the site's database at ``path`` from scratch (seconds, not milliseconds: prefer :func:`seed`)."""
    info = site_info(name)
    module = importlib.import_module(info.generator)
    module.build(path, module.DEFAULT_SEED if seed is None else seed)
    return path


def cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mcpfleet", "sites"
    )
    return Path(base)


def seed(name: str, data_dir: Path, seed: int | None = None, cache: Path | None = None) -> Path:
    """Write a fresh copy of the site's seeded database into ``data_dir``; returns the database path.

    The template is built once per (data kind, seed, generator fingerprint) under ``cache`` (default
    ``$MCPFLEET_SITES_CACHE`` or ``~/.cache/mcpfleet/sites``), atomically, so concurrent trials can share it.
    """
    info = site_info(name)
    number = default_seed(name) if seed is None else seed
    folder = cache or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    template = folder / f"{info.data}-{number}-{fingerprint(name)}.db"
    if not template.is_file():
        partial = folder / f".{template.name}.{os.getpid()}.tmp"
        build(name, partial, number)
        os.replace(partial, template)
    data_dir.mkdir(parents=True, exist_ok=True)
    target = data_dir / info.db_file
    for suffix in ("-journal", "-wal", "-shm"):
        Path(str(target) + suffix).unlink(missing_ok=True)
    shutil.copyfile(template, target)
    return target
