"""Deterministic generator for the `support` database: a multi-tenant helpdesk SaaS.

Run as `python support.py OUT.sql`; the script is restorable with `psql -v ON_ERROR_STOP=1`.
The data carries the mess a real ticketing product accumulates: free-text status and priority
values written by several API clients, duplicate contacts created by e-mail imports, tickets that
were never answered, paused (pending / on-hold) periods in the status log and policies that were
replaced mid-year. Everything derives from one fixed seed and fixed timestamps, never from now().
"""

from __future__ import annotations

import bisect
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

SEED = 20261123
EXPORT_AT = datetime(2026, 11, 15, tzinfo=UTC)
START_AT = datetime(2026, 4, 1, tzinfo=UTC)
POLICY_CHANGE_AT = datetime(2026, 8, 1, tzinfo=UTC)

# slug, name, plan, region, ticket volume, slowness (multiplies response/working times)
TENANTS: list[tuple[str, str, str, str, int, float]] = [
    ("northwind-logistics", "Northwind Logistics", "enterprise", "us-east", 3800, 0.85),
    ("brightpath-learning", "BrightPath Learning", "business", "eu-west", 1850, 1.05),
    ("helio-energy", "Helio Energy", "enterprise", "eu-central", 1500, 0.7),
    ("cobalt-games", "Cobalt Games", "business", "us-west", 1300, 1.35),
    ("fernhill-dental", "Fernhill Dental Group", "team", "eu-west", 560, 1.2),
    ("quayside-bank", "Quayside Bank", "enterprise", "eu-west", 1050, 0.6),
    ("lumen-analytics", "Lumen Analytics", "business", "us-east", 800, 1.3),
    ("oakridge-realty", "Oakridge Realty", "team", "us-central", 360, 1.6),
    ("pinecrest-hotels", "Pinecrest Hotels", "business", "ap-southeast", 640, 1.45),
    ("tidewater-foods", "Tidewater Foods", "team", "us-east", 340, 1.0),
    ("sparrow-studio", "Sparrow Studio", "free", "eu-north", 180, 1.4),
    ("vantage-telecom", "Vantage Telecom", "enterprise", "ap-south", 920, 1.15),
    ("marigold-health", "Marigold Health", "business", "us-west", 680, 0.95),
    ("kestrel-robotics", "Kestrel Robotics", "free", "eu-central", 110, 1.0),
]
PRIORITIES = ["urgent", "high", "normal", "low"]
PRIORITY_WEIGHTS = [6, 21, 53, 20]
BASE_POLICY = {"urgent": (60, 480), "high": (240, 1440), "normal": (480, 4320), "low": (1440, 10080)}
PLAN_PRIORITIES = {"enterprise": PRIORITIES, "business": PRIORITIES, "team": ["urgent", "high"], "free": []}

STATUS_VARIANTS = {
    "new": ["new"] * 14 + ["New", "NEW", "new "],
    "open": ["open"] * 12 + ["Open", "OPEN", "open ", " Open", "In Progress", "in-progress", "assigned"],
    "pending": ["pending"] * 12 + ["Pending", "Waiting on Customer", "awaiting reply", "PENDING "],
    "on_hold": ["on_hold"] * 8 + ["On Hold", "on-hold", "hold", "Waiting on third party", "on hold"],
    "solved": ["solved"] * 12 + ["Solved", "Resolved", "resolved ", "fixed"],
    "closed": ["closed"] * 12 + ["Closed", "CLOSED", "closed "],
}
STATUS_GARBAGE = ["escalated", "needs triage", "", None, "spam?", "tbd", "reopened"]
PRIORITY_VARIANTS = {
    "urgent": ["urgent"] * 10 + ["Urgent", "URGENT", "P1", "critical", "urgent "],
    "high": ["high"] * 10 + ["High", "HIGH", "P2", "high "],
    "normal": ["normal"] * 10 + ["Normal", "medium", "Medium", "med", "P3", "normal "],
    "low": ["low"] * 10 + ["Low", "LOW", "P4", " low"],
}
PRIORITY_GARBAGE = [None, "", "asap", "n/a", "?"]

FIRST = (
    "James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara Richard Susan Joseph "
    "Jessica Thomas Sarah Charles Karen Daniel Lisa Matthew Nancy Anthony Betty Mark Sandra Donald Ashley Steven "
    "Emily Paul Kimberly Andrew Donna Joshua Michelle Kenji Aiko Mateo Sofia Lucas Chiara Jonas Ingrid Omar Leila "
    "Priya Arjun Wei Mei Tobenna Adaeze Siobhan Ciaran Anika Rahul Beatriz Joao Piotr Agnieszka Hugo Camille Lars "
    "Freya Dmitri Olga Yusuf Amira Diego Valentina Noah Zara Felix Greta Malik Nia Elena Marco"
).split()
LAST = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Wilson Anderson "
    "Thomas Taylor Moore Jackson Martin Lee Thompson White Harris Clark Lewis Robinson Walker Young Allen King "
    "Nakamura Tanaka Rossi Bianchi Fischer Schmidt Lindqvist Berg Haddad Nasser Patel Sharma Chen Wang Okafor "
    "Adeyemi OBrien Murphy Kowalski Nowak Santos Silva Dubois Moreau Jensen Larsen Ivanova Petrov Yilmaz Demir "
    "Alvarez Castro Novak Horvat Costa Ferreira Kim Park Nguyen Tran Haas Weber Keller Vogel"
).split()
FREE_MAIL = ["gmail.com", "outlook.com", "yahoo.com", "icloud.com", "proton.me", "hotmail.co.uk", "gmx.de"]
COMPANY_WORDS = (
    "acme globex initech umbrella stark wayne hooli vandelay soylent wonka tyrell cyberdyne aperture "
    "massive gringotts monarch oceanic wallace pied dunder"
).split()
TAG_NAMES = (
    "billing refund login password-reset bug feature-request outage shipping invoice api integration "
    "onboarding cancellation upgrade downgrade security gdpr mobile-app performance data-export sso "
    "training hardware warranty"
).split()
SUBJECTS = [
    "Cannot log in since this morning",
    "Invoice {n} shows the wrong amount",
    "Refund for order {n} not received",
    "API returns 502 on /v2/orders",
    "How do I export my data?",
    "Password reset email never arrives",
    "Feature request: dark mode",
    "Shipment {n} stuck in transit",
    "SSO login loops back to the start page",
    "Charged twice this month",
    "App crashes when uploading a photo",
    "Need to add three more seats",
    "Cancel my subscription",
    "Webhook deliveries failing",
    "Report {n} is empty",
    "Question about the new pricing",
    "Two-factor code not accepted",
    "Slow dashboard since the update",
    "Wrong VAT number on invoice {n}",
    "Integration with our CRM stopped syncing",
]
AGENT_LINES = [
    "Thanks for reaching out, I'm looking into this now.",
    "Could you send us a screenshot of the error?",
    "I've escalated this to our engineering team.",
    "We have applied a fix, can you confirm it works on your side?",
    "I've issued the refund; it should appear within 5 business days.",
    "Closing this for now, reply to reopen.",
    "Could you confirm the account email so I can check the logs?",
    "This is a known issue and a fix ships this week.",
]
CUSTOMER_LINES = [
    "Still happening for me, any update?",
    "Here is the screenshot you asked for.",
    "Thanks, that worked!",
    "We really need this fixed today please.",
    "Same problem for two of my colleagues.",
    "I tried clearing the cache, no change.",
    "Any news on this?",
]
CSAT_COMMENTS = [
    None,
    None,
    None,
    "Quick and helpful",
    "Took far too long",
    "Great support",
    "Issue not solved",
    "Friendly agent",
    "Had to repeat myself",
]


@dataclass
class Contact:
    """A customer record; `person` links the records a human considers the same person."""

    contact_id: int
    tenant_id: int
    full_name: str
    email: str | None
    phone: str | None
    company: str | None
    created_at: datetime
    person: int
    inserted_at: datetime  # when the row was really written: decides the serial id


@dataclass
class Ticket:
    ticket_id: int
    tenant_id: int
    contact_id: int | None
    assignee_id: int | None
    sla_policy_id: int | None
    subject: str
    channel: str
    priority: str
    created_at: datetime
    events: list[tuple[str, datetime]] = field(default_factory=list)
    first_response_at: datetime | None = None
    resolved_at: datetime | None = None


def cell(v: object) -> str:
    """One COPY text-format field."""
    kind = type(v)
    if kind is int:
        return str(v)
    if kind is str:
        s = str(v)
        if "\\" in s or "\t" in s or "\n" in s:
            return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
        return s
    if v is None:
        return "\\N"
    if kind is bool:
        return "t" if v else "f"
    if kind is datetime:
        return v.isoformat(" ")  # type: ignore[attr-defined]
    return str(v)


def copy_block(out: list[str], table: str, cols: list[str], rows: list[tuple]) -> None:
    """A COPY ... FROM stdin block, as pg_dump writes it."""
    out.append(f"COPY {table} ({', '.join(cols)}) FROM stdin;")
    out.extend("\t".join(map(cell, r)) for r in rows)
    out.append("\\.\n")


def rand_time(rng: random.Random, lo: datetime, hi: datetime) -> datetime:
    """Business-hours-weighted instant in [lo, hi), whole seconds."""
    span = int((hi - lo).total_seconds())
    for _ in range(4):
        d = lo + timedelta(seconds=rng.randrange(span))
        if d.weekday() < 5 and 7 <= d.hour < 19:
            return d
    return d


def phone_for(rng: random.Random) -> str | None:
    """A phone number in one of the formats the import sources used, or NULL."""
    if rng.random() < 0.3:
        return None
    a, b, c = rng.randint(201, 989), rng.randint(200, 999), rng.randint(0, 9999)
    return rng.choice([f"+1 {a}-{b}-{c:04d}", f"({a}) {b}-{c:04d}", f"{a}{b}{c:04d}", f"{a}.{b}.{c:04d}"])


def email_variant(rng: random.Random, email: str) -> str:
    """The same address as another client typed it: other casing and/or stray spaces."""
    local, dom = email.split("@")
    kind = rng.randrange(5)
    if kind == 0:
        return email.upper()
    if kind == 1:
        return f"{local.title()}@{dom.capitalize()}"
    if kind == 2:
        return f" {email}"
    if kind == 3:
        return f"{email} "
    return f"{local.capitalize()}@{dom} "


def make_contacts(rng: random.Random) -> tuple[list[Contact], dict[int, list[tuple[datetime, int]]]]:
    """Contacts per tenant with planted duplicates; also each tenant's (created_at, contact_id) list, sorted."""
    contacts: list[Contact] = []
    by_tenant: dict[int, list[tuple[datetime, int]]] = {}
    person = 0
    next_id = 1
    shared: list[tuple[str, str, str | None]] = []  # people who are customers of several tenants
    for t_idx, (_, _, _, _, volume, _) in enumerate(TENANTS, start=1):
        n_people = max(40, int(volume * 0.36))
        used: set[str] = set()
        people: list[tuple[str, str | None, str | None, datetime]] = []
        for _ in range(n_people):
            if shared and rng.random() < 0.03:
                name, email, company = rng.choice(shared)
                if email in used:
                    continue
            else:
                first, last = rng.choice(FIRST), rng.choice(LAST)
                name = f"{first} {last}"
                company = rng.choice(COMPANY_WORDS).title() + rng.choice([" Ltd", " Inc", " GmbH", " LLC", ""])
                if rng.random() < 0.55:
                    dom = rng.choice(FREE_MAIL)
                    company = None if rng.random() < 0.7 else company
                else:
                    dom = company.split()[0].lower() + rng.choice([".com", ".io", ".co.uk", ".de"])
                local = rng.choice([f"{first}.{last}", f"{first[0]}{last}", f"{first}{rng.randint(1, 99)}"]).lower()
                email = f"{local}@{dom}"
                if email in used:
                    email = f"{local}{rng.randint(100, 999)}@{dom}"
                if email in used:
                    continue
                if rng.random() < 0.08:
                    shared.append((name, email, company))
            used.add(email)
            people.append((name, email, company, rand_time(rng, START_AT - timedelta(days=400), EXPORT_AT)))
        for name, email, company, created in people:
            person += 1
            r = rng.random()
            stored: str | None = email
            if r < 0.04:
                stored = None
            elif r < 0.05:
                stored = ""
            elif r < 0.07:  # near miss: a different address, not a duplicate
                stored = email.replace("@", "1@") if rng.random() < 0.5 else email[:-1]
            elif r < 0.12:
                stored = email_variant(rng, email)
            phone = phone_for(rng)
            records = [(name, stored, phone, created, created)]
            if stored and rng.random() < 0.085:
                for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
                    dname = rng.choice([name, name.lower(), ", ".join(reversed(name.split(" "))), name.split()[0]])
                    when = created + timedelta(seconds=rng.randrange(int((EXPORT_AT - created).total_seconds())))
                    records.append((dname, email_variant(rng, email), phone_for(rng), when, when))
                k = rng.random()
                if k < 0.15:  # backdated CSV import: written last, but claims to be the oldest record
                    n2, e2, p2, _, ins = records[-1]
                    records[-1] = (n2, e2, p2, created - timedelta(days=rng.randint(1, 90)), ins)
                elif k < 0.22:  # bulk import stamped every row with the same created_at
                    n2, e2, p2, _, ins = records[-1]
                    records[-1] = (n2, e2, p2, created, ins)
            elif stored is None and rng.random() < 0.25:
                # no e-mail: a second record with the same name and phone (not a duplicate by the e-mail rule)
                when = created + timedelta(days=rng.randint(1, 60))
                if when < EXPORT_AT:
                    records.append((name, None, phone, when, when))
            for dname, demail, dphone, dcreated, inserted in records:
                contacts.append(Contact(0, t_idx, dname, demail, dphone, company, dcreated, person, inserted))
    contacts.sort(key=lambda c: (c.inserted_at, c.tenant_id))
    for c in contacts:
        c.contact_id = next_id
        next_id += 1
        by_tenant.setdefault(c.tenant_id, []).append((c.created_at, c.contact_id))
    for pool in by_tenant.values():
        pool.sort()
    return contacts, by_tenant


def make_policies() -> tuple[list[tuple], dict[tuple[int, str, bool], int]]:
    """SLA policy rows and a lookup (tenant, priority, created before the policy change) -> policy_id."""
    rows: list[tuple] = []
    lookup: dict[tuple[int, str, bool], int] = {}
    pid = 0
    for t_idx, (_, _, plan, _, _, _) in enumerate(TENANTS, start=1):
        scale = {"enterprise": 0.75, "business": 1.0, "team": 1.5, "free": 1.0}[plan]
        for prio in PLAN_PRIORITIES[plan]:
            fr, res = BASE_POLICY[prio]
            fr, res = int(fr * scale), int(res * scale)
            changed = t_idx in (1, 3, 12) and prio in ("urgent", "high")
            if changed:
                pid += 1
                rows.append(
                    (
                        pid,
                        t_idx,
                        prio,
                        f"{prio.title()} (2025 terms)",
                        fr * 2,
                        res * 2,
                        False,
                        datetime(2025, 1, 6, 9, tzinfo=UTC),
                    )
                )
                lookup[(t_idx, prio, True)] = pid
            pid += 1
            since = POLICY_CHANGE_AT if changed else datetime(2025, 1, 6, 9, tzinfo=UTC)
            rows.append((pid, t_idx, prio, f"{prio.title()} priority", fr, res, True, since))
            lookup[(t_idx, prio, False)] = pid
            if not changed:
                lookup[(t_idx, prio, True)] = pid
    return rows, lookup


def lifecycle(rng: random.Random, t: Ticket, fr_min: int, res_min: int, slow: float, boundary: str) -> None:
    """Fill events, first_response_at and resolved_at; nothing after EXPORT_AT is kept."""
    ev: list[tuple[str, datetime]] = [("new", t.created_at)]
    age_days = (EXPORT_AT - t.created_at).total_seconds() / 86400
    if boundary == "fr":
        fr_delay = float(fr_min)
    else:
        fr_delay = fr_min * slow * rng.lognormvariate(-0.9, 0.7)
    never = rng.random() < (0.025 if age_days > 20 else 0.12)
    if never:
        t.events = ev
        return
    fr = t.created_at + timedelta(seconds=round(fr_delay * 60))
    ev.append(("open", fr))
    now = fr
    worked = 0.0
    cycles = rng.choices([0, 1, 2, 3], [60, 27, 10, 3])[0]
    for _ in range(cycles):
        w = res_min * slow * rng.uniform(0.02, 0.2)
        now += timedelta(seconds=round(w * 60))
        worked += w
        ev.append((rng.choice(["pending", "pending", "on_hold"]), now))
        if rng.random() < 0.05:
            ev.append((ev[-1][0], now + timedelta(seconds=rng.randint(1, 4))))
        now += timedelta(seconds=round(res_min * rng.uniform(0.1, 1.6) * 60))
        ev.append(("open", now))
    unresolved = rng.random() < (0.06 if age_days > 30 else 0.35)
    if not unresolved:
        if boundary == "res" and cycles == 0:
            now = t.created_at + timedelta(minutes=res_min)
        else:
            now += timedelta(seconds=round(res_min * slow * rng.lognormvariate(-1.6, 0.8) * 60))
        ev.append(("solved", now))
        if rng.random() < 0.45:
            ev.append(("closed", now + timedelta(days=rng.randint(3, 7), seconds=rng.randint(0, 3600))))
    t.events = [e for e in ev if e[1] < EXPORT_AT]
    stamps = [e[1] for e in t.events]
    t.first_response_at = fr if fr < EXPORT_AT else None
    solved = [e[1] for e in t.events if e[0] == "solved"]
    t.resolved_at = solved[-1] if solved else None
    assert stamps == sorted(stamps)


def generate() -> tuple[list[str], dict[str, int]]:
    """The whole SQL script as lines, plus row counts per table."""
    rng = random.Random(SEED)
    out: list[str] = [
        "-- support: multi-tenant helpdesk (generated by tasks/postgres/states/support.py)",
        "SET client_encoding = 'UTF8';",
        "SET standard_conforming_strings = on;",
        "",
    ]
    out.append(SCHEMA)
    tenants = [
        (i, s, n, p, r, datetime(2024, 1, 8, tzinfo=UTC) + timedelta(days=37 * i), f"billing@{s}.example")
        for i, (s, n, p, r, _, _) in enumerate(TENANTS, start=1)
    ]
    copy_block(out, "tenants", ["tenant_id", "slug", "name", "plan", "region", "created_at", "billing_email"], tenants)

    agents: list[tuple] = []
    agents_by_tenant: dict[int, list[int]] = {}
    for t_idx, (slug, _, _, _, volume, _) in enumerate(TENANTS, start=1):
        for k in range(max(2, volume // 130)):
            aid = len(agents) + 1
            first, last = rng.choice(FIRST), rng.choice(LAST)
            role = "admin" if k == 0 else ("lead" if k % 7 == 1 else "agent")
            active = rng.random() > 0.08
            agents.append(
                (
                    aid,
                    t_idx,
                    f"{first} {last}",
                    f"{first.lower()}.{last.lower()}{aid}@{slug}.example",
                    role,
                    active,
                    rand_time(rng, datetime(2024, 2, 1, tzinfo=UTC), START_AT),
                )
            )
            if active:
                agents_by_tenant.setdefault(t_idx, []).append(aid)
    copy_block(
        out, "agents", ["agent_id", "tenant_id", "full_name", "email", "role", "is_active", "created_at"], agents
    )

    contacts, contacts_by_tenant = make_contacts(rng)
    copy_block(
        out,
        "contacts",
        ["contact_id", "tenant_id", "full_name", "email", "phone", "company", "created_at"],
        [(c.contact_id, c.tenant_id, c.full_name, c.email, c.phone, c.company, c.created_at) for c in contacts],
    )

    policies, policy_of = make_policies()
    copy_block(
        out,
        "sla_policies",
        [
            "policy_id",
            "tenant_id",
            "priority",
            "name",
            "first_response_minutes",
            "resolution_minutes",
            "is_active",
            "effective_from",
        ],
        policies,
    )
    policy_minutes = {p[0]: (p[4], p[5]) for p in policies}

    tags: list[tuple] = []
    tags_by_tenant: dict[int, list[int]] = {}
    for t_idx in range(1, len(TENANTS) + 1):
        for name in rng.sample(TAG_NAMES, rng.randint(7, 14)):
            tags.append((len(tags) + 1, t_idx, name))
            tags_by_tenant.setdefault(t_idx, []).append(len(tags))
    copy_block(out, "tags", ["tag_id", "tenant_id", "name"], tags)

    tickets: list[Ticket] = []
    for t_idx, (_, _, _, _, volume, slow) in enumerate(TENANTS, start=1):
        for _ in range(volume):
            created = rand_time(rng, START_AT, EXPORT_AT)
            prio = rng.choices(PRIORITIES, PRIORITY_WEIGHTS)[0]
            pol = policy_of.get((t_idx, prio, created < POLICY_CHANGE_AT))
            pool = contacts_by_tenant[t_idx]
            known = bisect.bisect_left(pool, (created, 0))  # only customers that existed when the ticket came in
            contact = None
            if known and rng.random() >= 0.012:
                pick = min(known - 1, int(rng.paretovariate(1.2)) - 1) if rng.random() < 0.3 else rng.randrange(known)
                contact = pool[pick][1]
            t = Ticket(
                0,
                t_idx,
                contact,
                None,
                pol,
                rng.choice(SUBJECTS).format(n=rng.randint(10000, 99999)),
                rng.choices(["email", "web", "chat", "phone", "api"], [45, 25, 15, 8, 7])[0],
                prio,
                created,
            )
            fr_min, res_min = policy_minutes[pol] if pol else BASE_POLICY[prio]
            b = rng.random()
            boundary = "fr" if b < 0.008 and pol else ("res" if b < 0.016 and pol else "")
            lifecycle(rng, t, fr_min, res_min, slow, boundary)
            if len(t.events) > 1 or rng.random() < 0.5:
                t.assignee_id = rng.choice(agents_by_tenant[t_idx])
            tickets.append(t)
    tickets.sort(key=lambda x: (x.created_at, x.tenant_id))
    for i, t in enumerate(tickets, start=1):
        t.ticket_id = i

    ticket_rows: list[tuple] = []
    for t in tickets:
        current = t.events[-1][0]
        status = rng.choice(STATUS_VARIANTS[current]) if rng.random() > 0.015 else rng.choice(STATUS_GARBAGE)
        prio = rng.choice(PRIORITY_VARIANTS[t.priority]) if rng.random() > 0.015 else rng.choice(PRIORITY_GARBAGE)
        ticket_rows.append(
            (
                t.ticket_id,
                t.tenant_id,
                t.contact_id,
                t.assignee_id,
                t.sla_policy_id,
                t.subject,
                t.channel,
                status,
                prio,
                t.created_at,
                t.first_response_at,
                t.resolved_at,
                t.events[-1][1],
            )
        )
    copy_block(
        out,
        "tickets",
        [
            "ticket_id",
            "tenant_id",
            "contact_id",
            "assignee_id",
            "sla_policy_id",
            "subject",
            "channel",
            "status",
            "priority",
            "created_at",
            "first_response_at",
            "resolved_at",
            "updated_at",
        ],
        ticket_rows,
    )

    events: list[tuple] = []
    for t in tickets:
        for status, at in t.events:
            events.append((len(events) + 1, t.ticket_id, status, at, t.assignee_id if status != "new" else None))
    copy_block(
        out, "ticket_status_events", ["event_id", "ticket_id", "status", "changed_at", "changed_by_agent_id"], events
    )

    comments: list[tuple] = []
    csat: list[tuple] = []
    ticket_tags: list[tuple] = []
    for t in tickets:
        when = t.created_at
        comments.append(
            (
                len(comments) + 1,
                t.ticket_id,
                None,
                t.contact_id,
                True,
                f"{t.subject}. {rng.choice(CUSTOMER_LINES)}",
                when,
            )
        )
        if t.first_response_at:
            comments.append(
                (
                    len(comments) + 1,
                    t.ticket_id,
                    t.assignee_id,
                    None,
                    True,
                    rng.choice(AGENT_LINES),
                    t.first_response_at,
                )
            )
            for _ in range(rng.choices([0, 1, 2], [60, 30, 10])[0]):
                when = t.first_response_at + timedelta(minutes=rng.randint(5, 3000))
                if when < EXPORT_AT:
                    agent_side = rng.random() < 0.5
                    comments.append(
                        (
                            len(comments) + 1,
                            t.ticket_id,
                            t.assignee_id if agent_side else None,
                            None if agent_side else t.contact_id,
                            not (agent_side and rng.random() < 0.3),
                            rng.choice(AGENT_LINES if agent_side else CUSTOMER_LINES),
                            when,
                        )
                    )
        if t.resolved_at and t.contact_id and rng.random() < 0.28:
            at = t.resolved_at + timedelta(hours=rng.randint(1, 96))
            if at < EXPORT_AT:
                csat.append(
                    (
                        len(csat) + 1,
                        t.ticket_id,
                        t.contact_id,
                        rng.choices([1, 2, 3, 4, 5], [8, 7, 12, 30, 43])[0],
                        rng.choice(CSAT_COMMENTS),
                        at,
                    )
                )
        for tag in rng.sample(tags_by_tenant[t.tenant_id], rng.choices([0, 1, 2], [40, 45, 15])[0]):
            ticket_tags.append((t.ticket_id, tag))
    copy_block(
        out,
        "ticket_comments",
        ["comment_id", "ticket_id", "author_agent_id", "author_contact_id", "is_public", "body", "created_at"],
        comments,
    )
    copy_block(out, "ticket_tags", ["ticket_id", "tag_id"], ticket_tags)
    copy_block(out, "csat_responses", ["csat_id", "ticket_id", "contact_id", "rating", "comment", "responded_at"], csat)
    out.append(POST_DATA)
    counts = {
        "tenants": len(tenants),
        "agents": len(agents),
        "contacts": len(contacts),
        "sla_policies": len(policies),
        "tags": len(tags),
        "tickets": len(tickets),
        "ticket_status_events": len(events),
        "ticket_comments": len(comments),
        "ticket_tags": len(ticket_tags),
        "csat_responses": len(csat),
    }
    return out, counts


SCHEMA = """
CREATE TABLE tenants (
    tenant_id serial PRIMARY KEY,
    slug text NOT NULL UNIQUE,
    name text NOT NULL,
    plan text NOT NULL CHECK (plan IN ('free', 'team', 'business', 'enterprise')),
    region text NOT NULL,
    created_at timestamptz NOT NULL,
    billing_email text
);
CREATE TABLE agents (
    agent_id serial PRIMARY KEY,
    tenant_id integer NOT NULL,
    full_name text NOT NULL,
    email text NOT NULL UNIQUE,
    role text NOT NULL DEFAULT 'agent',
    is_active boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL
);
CREATE TABLE contacts (
    contact_id serial PRIMARY KEY,
    tenant_id integer NOT NULL,
    full_name text NOT NULL,
    email text,
    phone text,
    company text,
    created_at timestamptz NOT NULL
);
CREATE TABLE sla_policies (
    policy_id serial PRIMARY KEY,
    tenant_id integer NOT NULL,
    priority text NOT NULL,
    name text NOT NULL,
    first_response_minutes integer NOT NULL CHECK (first_response_minutes > 0),
    resolution_minutes integer NOT NULL CHECK (resolution_minutes > 0),
    is_active boolean NOT NULL DEFAULT true,
    effective_from timestamptz NOT NULL
);
CREATE TABLE tags (
    tag_id serial PRIMARY KEY,
    tenant_id integer NOT NULL,
    name text NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE TABLE tickets (
    ticket_id serial PRIMARY KEY,
    tenant_id integer NOT NULL,
    contact_id integer,
    assignee_id integer,
    sla_policy_id integer,
    subject text NOT NULL,
    channel text NOT NULL,
    status text,
    priority text,
    created_at timestamptz NOT NULL,
    first_response_at timestamptz,
    resolved_at timestamptz,
    updated_at timestamptz NOT NULL
);
CREATE TABLE ticket_status_events (
    event_id serial PRIMARY KEY,
    ticket_id integer NOT NULL,
    status text NOT NULL,
    changed_at timestamptz NOT NULL,
    changed_by_agent_id integer
);
CREATE TABLE ticket_comments (
    comment_id serial PRIMARY KEY,
    ticket_id integer NOT NULL,
    author_agent_id integer,
    author_contact_id integer,
    is_public boolean NOT NULL DEFAULT true,
    body text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE TABLE ticket_tags (
    ticket_id integer NOT NULL,
    tag_id integer NOT NULL,
    PRIMARY KEY (ticket_id, tag_id)
);
CREATE TABLE csat_responses (
    csat_id serial PRIMARY KEY,
    ticket_id integer NOT NULL UNIQUE,
    contact_id integer,
    rating smallint NOT NULL CHECK (rating BETWEEN 1 AND 5),
    comment text,
    responded_at timestamptz NOT NULL
);
COMMENT ON TABLE ticket_status_events IS
    'Workflow log written by the ticket engine; status is one of new, open, pending, on_hold, solved, closed.';
COMMENT ON COLUMN tickets.status IS 'Free text, written by the web app, the mobile app and the public API.';
COMMENT ON COLUMN tickets.sla_policy_id IS 'Policy stamped on the ticket when it was created; NULL = no SLA.';
"""

POST_DATA = """
SELECT setval('tenants_tenant_id_seq', (SELECT max(tenant_id) FROM tenants));
SELECT setval('agents_agent_id_seq', (SELECT max(agent_id) FROM agents));
SELECT setval('contacts_contact_id_seq', (SELECT max(contact_id) FROM contacts));
SELECT setval('sla_policies_policy_id_seq', (SELECT max(policy_id) FROM sla_policies));
SELECT setval('tags_tag_id_seq', (SELECT max(tag_id) FROM tags));
SELECT setval('tickets_ticket_id_seq', (SELECT max(ticket_id) FROM tickets));
SELECT setval('ticket_status_events_event_id_seq', (SELECT max(event_id) FROM ticket_status_events));
SELECT setval('ticket_comments_comment_id_seq', (SELECT max(comment_id) FROM ticket_comments));
SELECT setval('csat_responses_csat_id_seq', (SELECT max(csat_id) FROM csat_responses));

ALTER TABLE agents ADD CONSTRAINT agents_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(tenant_id);
ALTER TABLE contacts ADD CONSTRAINT contacts_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(tenant_id);
ALTER TABLE sla_policies ADD CONSTRAINT sla_policies_tenant_id_fkey
    FOREIGN KEY (tenant_id) REFERENCES tenants(tenant_id);
ALTER TABLE tags ADD CONSTRAINT tags_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(tenant_id);
ALTER TABLE tickets ADD CONSTRAINT tickets_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(tenant_id);
ALTER TABLE tickets ADD CONSTRAINT tickets_contact_id_fkey FOREIGN KEY (contact_id) REFERENCES contacts(contact_id);
ALTER TABLE tickets ADD CONSTRAINT tickets_assignee_id_fkey FOREIGN KEY (assignee_id) REFERENCES agents(agent_id)
    ON DELETE SET NULL;
ALTER TABLE tickets ADD CONSTRAINT tickets_sla_policy_id_fkey
    FOREIGN KEY (sla_policy_id) REFERENCES sla_policies(policy_id);
ALTER TABLE ticket_status_events ADD CONSTRAINT ticket_status_events_ticket_id_fkey
    FOREIGN KEY (ticket_id) REFERENCES tickets(ticket_id) ON DELETE CASCADE;
ALTER TABLE ticket_status_events ADD CONSTRAINT ticket_status_events_changed_by_agent_id_fkey
    FOREIGN KEY (changed_by_agent_id) REFERENCES agents(agent_id) ON DELETE SET NULL;
ALTER TABLE ticket_comments ADD CONSTRAINT ticket_comments_ticket_id_fkey
    FOREIGN KEY (ticket_id) REFERENCES tickets(ticket_id) ON DELETE CASCADE;
ALTER TABLE ticket_comments ADD CONSTRAINT ticket_comments_author_agent_id_fkey
    FOREIGN KEY (author_agent_id) REFERENCES agents(agent_id) ON DELETE SET NULL;
ALTER TABLE ticket_comments ADD CONSTRAINT ticket_comments_author_contact_id_fkey
    FOREIGN KEY (author_contact_id) REFERENCES contacts(contact_id);
ALTER TABLE ticket_tags ADD CONSTRAINT ticket_tags_ticket_id_fkey
    FOREIGN KEY (ticket_id) REFERENCES tickets(ticket_id) ON DELETE CASCADE;
ALTER TABLE ticket_tags ADD CONSTRAINT ticket_tags_tag_id_fkey
    FOREIGN KEY (tag_id) REFERENCES tags(tag_id) ON DELETE CASCADE;
ALTER TABLE csat_responses ADD CONSTRAINT csat_responses_ticket_id_fkey
    FOREIGN KEY (ticket_id) REFERENCES tickets(ticket_id) ON DELETE CASCADE;
ALTER TABLE csat_responses ADD CONSTRAINT csat_responses_contact_id_fkey
    FOREIGN KEY (contact_id) REFERENCES contacts(contact_id);

CREATE UNIQUE INDEX sla_policies_active_uniq ON sla_policies (tenant_id, priority) WHERE is_active;
CREATE INDEX agents_tenant_idx ON agents (tenant_id);
CREATE INDEX contacts_tenant_email_idx ON contacts (tenant_id, email);
CREATE INDEX tickets_tenant_status_idx ON tickets (tenant_id, status);
CREATE INDEX tickets_tenant_created_idx ON tickets (tenant_id, created_at);
CREATE INDEX tickets_contact_idx ON tickets (contact_id);
CREATE INDEX ticket_status_events_ticket_idx ON ticket_status_events (ticket_id, changed_at);
CREATE INDEX ticket_comments_ticket_idx ON ticket_comments (ticket_id);
CREATE INDEX ticket_comments_contact_idx ON ticket_comments (author_contact_id);
CREATE INDEX ticket_tags_tag_idx ON ticket_tags (tag_id);

CREATE VIEW open_ticket_queue AS
SELECT t.ticket_id, t.tenant_id, t.subject, t.priority, t.status, t.assignee_id, t.created_at
FROM tickets t
WHERE lower(btrim(t.status)) IN ('new', 'open', 'in progress', 'assigned');
"""


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: support.py OUT.sql", file=sys.stderr)
        return 2
    lines, counts = generate()
    Path(sys.argv[1]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(" ".join(f"{k}={v}" for k, v in counts.items()), f"total={sum(counts.values())}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
