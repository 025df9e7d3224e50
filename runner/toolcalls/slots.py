"""Slot values for generated requests: each kind draws a realistic value and says how a user would write it.

A scenario names its slots by kind (``file_path``, ``date``, ``int:1:20``, ``choice:metric=Celsius|imperial``,
``date_after:start:1:14``); the generator draws them with a seeded ``random.Random``, writes them into the
request as text and into the correct call as values. An off-intent call draws the same kind again for a
different value: still schema-valid, but not what the user asked for.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import string
import uuid
from collections.abc import Callable
from typing import Any

FIRST = ("alice", "bob", "carmen", "deepak", "elena", "farid", "grace", "hiro", "ines", "jonas", "kofi", "lena")
LAST = ("nguyen", "smith", "garcia", "okafor", "muller", "tanaka", "rossi", "silva", "kowalski", "haddad")
DOMAINS = ("example.com", "acme.io", "northwind.org", "contoso.net", "initech.dev")
WORDS = (
    "budget",
    "roadmap",
    "invoice",
    "release",
    "meeting",
    "report",
    "draft",
    "backup",
    "summary",
    "notes",
    "design",
    "metrics",
    "contract",
    "schedule",
    "feedback",
)
PROJECTS = ("atlas", "borealis", "cobalt", "delta", "ember", "fjord", "granite", "helix")
DIRS = ("docs", "src", "reports", "data", "notes", "archive", "assets", "config", "logs", "drafts")
EXTS = ("txt", "md", "csv", "json", "log", "yaml", "py")
IMAGE_EXTS = ("png", "jpg", "gif", "webp")
CITIES = (
    ("Lisbon", "PT", 38.72, -9.14),
    ("Nairobi", "KE", -1.29, 36.82),
    ("Osaka", "JP", 34.69, 135.50),
    ("Toronto", "CA", 43.65, -79.38),
    ("Santiago", "CL", -33.45, -70.67),
    ("Berlin", "DE", 52.52, 13.40),
    ("Mumbai", "IN", 19.08, 72.88),
    ("Melbourne", "AU", -37.81, 144.96),
    ("Reykjavik", "IS", 64.15, -21.94),
    ("Denver", "US", 39.74, -104.99),
)
AIRPORTS = (
    ("LIS", "Lisbon"),
    ("NBO", "Nairobi"),
    ("KIX", "Osaka"),
    ("YYZ", "Toronto"),
    ("SCL", "Santiago"),
    ("BER", "Berlin"),
    ("BOM", "Mumbai"),
    ("MEL", "Melbourne"),
    ("KEF", "Reykjavik"),
    ("DEN", "Denver"),
)
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "INR")
TABLES = ("orders", "customers", "invoices", "shipments", "products", "employees", "tickets", "sessions")
COLUMNS = ("status", "region", "created_at", "total", "country", "owner_id", "priority")
STATUSES = ("pending", "shipped", "overdue", "active", "cancelled", "open")
TOPICS = (
    "solar panel efficiency",
    "rust async runtimes",
    "sourdough hydration",
    "kubernetes autoscaling",
    "marathon training plans",
    "EU AI act summary",
    "python packaging",
    "coral reef bleaching",
)
TITLES = (
    "Quarterly planning",
    "Design review",
    "Customer onboarding call",
    "Incident retro",
    "Team lunch",
    "Security audit kickoff",
    "Sprint demo",
    "Budget sync",
)
ISSUES = (
    "Login page crashes on Safari",
    "Add dark mode to settings",
    "Memory leak in export worker",
    "Docs: fix broken install link",
    "Timeout when uploading large files",
    "Support CSV import",
)
LABELS = ("bug", "enhancement", "documentation", "performance", "security", "good first issue")
SENTENCES = (
    "Thanks for the update, I will review it tomorrow.",
    "Please find the revised numbers attached.",
    "The deployment finished without errors.",
    "Can we move the review to next week?",
    "All tests pass on the main branch now.",
    "Remember to rotate the API keys before Friday.",
)
HOSTS = ("api.example.com", "db01.internal.acme.io", "cdn.northwind.org", "mail.contoso.net", "ci.initech.dev")
SERVICES = ("nginx", "postgres", "redis", "payments-api", "auth-service", "worker")
NAMESPACES = ("prod", "staging", "payments", "data-platform", "web")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_BASE_DAY = dt.date(2026, 1, 1)


class Slot:
    """A drawn value and the text a user would write for it."""

    __slots__ = ("value", "text")

    def __init__(self, value: Any, text: str | None = None) -> None:
        self.value = value
        self.text = str(value) if text is None else text


def _person(rng: random.Random) -> tuple[str, str]:
    return rng.choice(FIRST), rng.choice(LAST)


def _email(rng: random.Random) -> str:
    first, last = _person(rng)
    return f"{first}.{last}@{rng.choice(DOMAINS)}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _date_text(day: dt.date, rng: random.Random) -> str:
    return day.isoformat() if rng.random() < 0.5 else f"{MONTHS[day.month - 1]} {day.day}, {day.year}"


def _file_path(rng: random.Random, exts: tuple[str, ...] = EXTS) -> str:
    depth = rng.randint(0, 2)
    parts = [f"/home/{rng.choice(FIRST)}/{rng.choice(PROJECTS)}", *rng.sample(DIRS, depth)]
    return "/".join(parts) + f"/{rng.choice(WORDS)}_{rng.randint(1, 12)}.{rng.choice(exts)}"


def _dir_path(rng: random.Random) -> str:
    return f"/home/{rng.choice(FIRST)}/{rng.choice(PROJECTS)}/" + "/".join(rng.sample(DIRS, rng.randint(1, 2)))


def _day(rng: random.Random) -> dt.date:
    return _BASE_DAY + dt.timedelta(days=rng.randint(0, 700))


def _datetime(rng: random.Random) -> Slot:
    day, hour, minute = _day(rng), rng.randint(7, 19), rng.choice((0, 15, 30, 45))
    value = f"{day.isoformat()}T{hour:02d}:{minute:02d}:00Z"
    return Slot(value, f"{_date_text(day, rng)} at {hour:02d}:{minute:02d} UTC")


def _datetime_after(base: str, rng: random.Random, lo: int, hi: int) -> Slot:
    start = dt.datetime.fromisoformat(base.replace("Z", "+00:00"))
    end = start + dt.timedelta(minutes=15 * rng.randint(lo // 15, hi // 15))
    return Slot(end.strftime("%Y-%m-%dT%H:%M:00Z"), f"{end:%H:%M} UTC")


def _place(rng: random.Random) -> Slot:
    city, country, lat, lon = rng.choice(CITIES)
    return Slot({"city": city, "country": country, "lat": lat, "lon": lon}, city)


def _airport(rng: random.Random) -> Slot:
    code, city = rng.choice(AIRPORTS)
    return Slot(code, f"{city} ({code})")


def _repo(rng: random.Random) -> Slot:
    owner, name = rng.choice(("acme", "northwind", "initech", "contoso")), rng.choice(PROJECTS)
    return Slot({"owner": owner, "repo": name}, f"{owner}/{name}")


def _query(rng: random.Random) -> Slot:
    table, column, status = rng.choice(TABLES), rng.choice(COLUMNS), rng.choice(STATUSES)
    sql = f"SELECT * FROM {table} WHERE {column} = '{status}'"
    return Slot({"table": table, "sql": sql}, sql)


def _money(rng: random.Random) -> Slot:
    value = round(rng.uniform(5, 2000), 2)
    return Slot(value, f"{value:.2f}")


def _edit(rng: random.Random) -> Slot:
    old, new = rng.sample(WORDS, 2)
    return Slot({"old": old, "new": new}, f"'{old}' with '{new}'")


def _files(rng: random.Random) -> Slot:
    paths = [_file_path(rng) for _ in range(rng.randint(2, 3))]
    return Slot(paths, _and(paths))


def _emails(rng: random.Random) -> Slot:
    addrs = sorted({_email(rng) for _ in range(rng.randint(1, 3))})
    return Slot(addrs, _and(addrs))


def _labels(rng: random.Random) -> Slot:
    chosen = rng.sample(LABELS, rng.randint(1, 2))
    return Slot(chosen, _and([f"'{c}'" for c in chosen]))


def _sku(rng: random.Random) -> str:
    return "SKU-" + "".join(rng.choice(string.ascii_uppercase) for _ in range(3)) + f"-{rng.randint(100, 999)}"


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _pay_id(rng: random.Random) -> str:
    return "pay_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(10))


def _msg_id(rng: random.Random) -> str:
    return "msg_" + "".join(rng.choice("0123456789abcdef") for _ in range(12))


SIMPLE: dict[str, Callable[[random.Random], Slot]] = {
    "file_path": lambda r: Slot(_file_path(r)),
    "image_path": lambda r: Slot(_file_path(r, IMAGE_EXTS)),
    "dir_path": lambda r: Slot(_dir_path(r)),
    "file_paths": _files,
    "glob": lambda r: Slot(f"*.{r.choice(EXTS)}"),
    "word": lambda r: Slot(r.choice(WORDS)),
    "edit": _edit,
    "content": lambda r: (lambda s: Slot(s, f'"{s}"'))(r.choice(SENTENCES)),
    "sentence": lambda r: Slot(r.choice(SENTENCES)),
    "person": lambda r: Slot(" ".join(p.title() for p in _person(r))),
    "email": lambda r: Slot(_email(r)),
    "emails": _emails,
    "date": lambda r: (lambda d: Slot(d.isoformat(), _date_text(d, r)))(_day(r)),
    "datetime": _datetime,
    "place": _place,
    "city": lambda r: Slot(r.choice(CITIES)[0]),
    "airport": _airport,
    "currency": lambda r: Slot(r.choice(CURRENCIES)),
    "money": _money,
    "title": lambda r: Slot(r.choice(TITLES)),
    "issue": lambda r: Slot(r.choice(ISSUES)),
    "labels": _labels,
    "repo": _repo,
    "branch": lambda r: Slot(r.choice(("main", "develop", "release/2.4", "feature/search", "hotfix/login"))),
    "username": lambda r: Slot(r.choice(FIRST) + r.choice(("", "-dev", "42", "_ops"))),
    "topic": lambda r: Slot(r.choice(TOPICS)),
    "sql": _query,
    "table": lambda r: Slot(r.choice(TABLES)),
    "url": lambda r: Slot(f"https://{r.choice(HOSTS)}/{r.choice(WORDS)}/{r.randint(1, 99)}"),
    "host": lambda r: Slot(r.choice(HOSTS)),
    "ipv4": lambda r: Slot(f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"),
    "service": lambda r: Slot(r.choice(SERVICES)),
    "namespace": lambda r: Slot(r.choice(NAMESPACES)),
    "uuid": lambda r: Slot(_uuid(r)),
    "payment_id": lambda r: Slot(_pay_id(r)),
    "message_id": lambda r: Slot(_msg_id(r)),
    "sku": lambda r: Slot(_sku(r)),
    "hm": lambda r: Slot(f"{r.randint(7, 18):02d}:{r.choice(('00', '30'))}"),
}


def draw(kind: str, rng: random.Random, drawn: dict[str, Slot]) -> Slot:
    """One value of ``kind``; parameterised kinds: ``int:LO:HI``, ``num:LO:HI``, ``choice:v[=text]|...``,
    ``date_after:SLOT:MIN:MAX`` (a date MIN..MAX days after an earlier date slot), ``datetime_after:SLOT:MIN:MAX``
    (minutes after an earlier datetime slot, in quarter hours)."""
    head, _, rest = kind.partition(":")
    if head == "int":
        lo, hi = (int(x) for x in rest.split(":"))
        return Slot(rng.randint(lo, hi))
    if head == "num":
        lo_f, hi_f = (float(x) for x in rest.split(":"))
        return Slot(round(rng.uniform(lo_f, hi_f), 2))
    if head == "choice":
        raw, _, text = rng.choice(rest.split("|")).partition("=")
        try:
            value: Any = json.loads(raw)  # numbers and booleans stay typed: "choice:0.5|1|1.5"
        except json.JSONDecodeError:
            value = raw
        return Slot(value, text or raw)
    if head == "date_after":
        base, lo_s, hi_s = rest.split(":")
        day = dt.date.fromisoformat(drawn[base].value) + dt.timedelta(days=rng.randint(int(lo_s), int(hi_s)))
        return Slot(day.isoformat(), _date_text(day, rng))
    if head == "datetime_after":
        base, lo_s, hi_s = rest.split(":")
        return _datetime_after(drawn[base].value, rng, int(lo_s), int(hi_s))
    try:
        return SIMPLE[kind](rng)
    except KeyError:
        raise ValueError(f"unknown slot kind '{kind}'") from None


def check_kind(kind: str) -> None:
    """Raise ValueError for a kind ``draw`` would not know (the catalog is checked when loaded)."""
    head = kind.partition(":")[0]
    if head not in ("int", "num", "choice", "date_after", "datetime_after") and kind not in SIMPLE:
        raise ValueError(f"unknown slot kind '{kind}'")
