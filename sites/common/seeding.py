"""Deterministic generation helpers: every generator draws from one ``random.Random(seed)`` and nothing else.

No wall clock, no dict-order surprises, no global random state: the same seed gives byte-identical data on
every machine. Text is assembled from hand-written fragments so it reads like real content.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from mcpfleet.sites.common.db import COMMON_SCHEMA
from mcpfleet.sites.common.names import CITIES, EMAIL_DOMAINS, FIRST_NAMES, LAST_NAMES, STREET_TYPES, STREETS

T = TypeVar("T")


def weighted(rng: random.Random, options: Sequence[tuple[T, float]]) -> T:
    values = [v for v, _ in options]
    weights = [w for _, w in options]
    return rng.choices(values, weights=weights, k=1)[0]


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def person(rng: random.Random) -> tuple[str, str]:
    return rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)


def email_for(first: str, last: str, rng: random.Random, taken: set[str]) -> str:
    clean = [re.sub(r"[^a-z]", "", s.lower()) for s in (first, last)]
    patterns = (
        f"{clean[0]}.{clean[1]}",
        f"{clean[0][0]}{clean[1]}",
        f"{clean[0]}{clean[1][0]}",
        f"{clean[0]}_{clean[1]}",
    )
    local = rng.choice(patterns)
    domain = rng.choice(EMAIL_DOMAINS)
    email = f"{local}@{domain}"
    n = 2
    while email in taken:
        email = f"{local}{n}@{domain}"
        n += 1
    taken.add(email)
    return email


def address(rng: random.Random) -> dict[str, str]:
    city, state, zip_prefix = rng.choice(CITIES)
    line2 = rng.choice(["", "", "", f"Apt {rng.randint(1, 40)}{rng.choice('ABCD')}", f"Unit {rng.randint(100, 999)}"])
    return {
        "line1": f"{rng.randint(10, 9899)} {rng.choice(STREETS)} {rng.choice(STREET_TYPES)}",
        "line2": line2,
        "city": city,
        "region": state,
        "postcode": f"{zip_prefix}{rng.randint(0, 99):02d}",
        "country": "United States",
    }


def phone(rng: random.Random) -> str:
    return f"({rng.randint(201, 989)}) 555-{rng.randint(100, 199):04d}"


def moment(rng: random.Random, start: datetime, end: datetime) -> datetime:
    """A time between ``start`` and ``end``, to the minute, weighted to office-ish hours."""
    days = (end.date() - start.date()).days
    day = start.date() + timedelta(days=rng.randint(0, max(days, 0)))
    hour = weighted(rng, [(h, 3.0 if 9 <= h <= 21 else 0.6) for h in range(24)])
    value = datetime(day.year, day.month, day.day, hour, rng.randint(0, 59))
    return min(max(value, start), end)


def iso(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


def create_database(path: Path, schema: str) -> sqlite3.Connection:
    """A new database at ``path`` (replacing any file) with the common tables plus ``schema``."""
    if path.exists():
        path.unlink()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.executescript(COMMON_SCHEMA + schema)
    return conn


def write_meta(conn: sqlite3.Connection, values: dict[str, str]) -> None:
    conn.executemany("INSERT INTO site_meta (key, value) VALUES (?, ?)", sorted(values.items()))
