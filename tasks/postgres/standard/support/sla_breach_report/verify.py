#!/usr/bin/env python3
"""Verifier for support/sla_breach_report.

Recomputes every ticket's SLA deadlines and breaches from the untouched source tables (tickets,
sla_policies, ticket_status_events) with a query of the verifier's own and compares the view with it row
by row in the same statement (only differing rows are fetched), proves the view is computed live
(inserted probe rows and a changed policy show up inside a rolled-back transaction), checks the reported
top three tenants, and that no table (the sources or any other) was modified.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

import psycopg2

AS_OF = datetime(2026, 11, 1, tzinfo=UTC)
PAUSED = ("pending", "on_hold")
COLUMNS = [  # name, the type the description gives it
    ("ticket_id", ("integer",)),
    ("tenant_id", ("integer",)),
    ("policy_id", ("integer",)),
    ("first_response_due", ("timestamp with time zone",)),
    ("first_response_breached", ("boolean",)),
    ("paused_seconds", ("bigint",)),
    ("resolution_due", ("timestamp with time zone",)),
    ("resolution_breached", ("boolean",)),
    ("breached", ("boolean",)),
]
FINGERPRINTS = {  # (rows, md5) of every table (the four sources first), from the generator's fixed seed
    "tickets": (14090, "00c1f2eae47b30d881d0bfe9b35e5480"),
    "sla_policies": (48, "b08b0a0ef01d735031cca5af8d432a40"),
    "ticket_status_events": (60647, "3c9ba7025a764cb888662e317a0221cb"),
    "tenants": (14, "9b2f39336e24cde2493abe09154d65da"),
    "agents": (106, "0d608dd8ac2e8a31b334fb86236464af"),
    "contacts": (5780, "fb6947c2f72c5ef5a3781affeeb67048"),
    "tags": (148, "fd8a44ef578d8c0305e4fc49d416bdf8"),
    "ticket_comments": (34548, "4375fd5abf3024266df028a7d965d721"),
    "ticket_tags": (10585, "2d27d888d88798b08f13ddca7b01a71b"),
    "csat_responses": (3276, "1b79ce87abb2f190802398b844a25acd"),
}
SOURCES = ("tickets", "sla_policies", "ticket_status_events", "tenants")
FP_SQL = {
    "tickets": (
        "ticket_id",
        "ticket_id tenant_id contact_id assignee_id sla_policy_id subject channel status "
        "priority created_at:ts first_response_at:ts resolved_at:ts updated_at:ts",
    ),
    "sla_policies": (
        "policy_id",
        "policy_id tenant_id priority name first_response_minutes resolution_minutes is_active effective_from:ts",
    ),
    "ticket_status_events": ("event_id", "event_id ticket_id status changed_at:ts changed_by_agent_id"),
    "tenants": ("tenant_id", "tenant_id slug name plan region created_at:ts billing_email"),
    "agents": ("agent_id", "agent_id tenant_id full_name email role is_active created_at:ts"),
    "contacts": ("contact_id", "contact_id tenant_id full_name email phone company created_at:ts"),
    "tags": ("tag_id", "tag_id tenant_id name"),
    "ticket_comments": (
        "comment_id",
        "comment_id ticket_id author_agent_id author_contact_id is_public body created_at:ts",
    ),
    "ticket_tags": ("ticket_id, tag_id", "ticket_id tag_id"),
    "csat_responses": ("csat_id", "csat_id ticket_id contact_id rating comment responded_at:ts"),
}

# Every in-scope ticket's expected row, from the source tables: paused seconds are summed per pause, each
# pause (an event with status pending or on_hold before the as-of instant) lasting until the ticket's next
# event (by changed_at, then event_id) or the as-of instant, whichever is first, in whole seconds (truncated);
# a first response or resolution at or after the as-of instant counts as missing (the as-of instant itself).
# `{where}` narrows the tickets (the live test).
EXPECTED_CTE = """
WITH scope AS (
    SELECT t.ticket_id, t.tenant_id, p.policy_id, t.created_at, t.first_response_at, t.resolved_at,
           p.first_response_minutes, p.resolution_minutes
    FROM tickets t JOIN sla_policies p ON p.policy_id = t.sla_policy_id
    WHERE t.created_at < %(as_of)s {where}
), pauses AS (
    SELECT e.ticket_id, e.changed_at,
           (SELECT n.changed_at FROM ticket_status_events n
            WHERE n.ticket_id = e.ticket_id AND (n.changed_at, n.event_id) > (e.changed_at, e.event_id)
            ORDER BY n.changed_at, n.event_id LIMIT 1) AS next_at
    FROM ticket_status_events e
    WHERE e.status IN ('pending', 'on_hold') AND e.changed_at < %(as_of)s
      AND e.ticket_id IN (SELECT ticket_id FROM scope)
), paused AS (
    SELECT ticket_id,
           sum(floor(extract(epoch FROM least(coalesce(next_at, %(as_of)s), %(as_of)s) - changed_at)))::bigint AS secs
    FROM pauses GROUP BY ticket_id
), due AS (
    SELECT s.*, coalesce(p.secs, 0) AS paused_seconds,
           s.created_at + s.first_response_minutes * interval '1 minute' AS first_response_due,
           s.created_at + s.resolution_minutes * interval '1 minute' + coalesce(p.secs, 0) * interval '1 second'
               AS resolution_due,
           CASE WHEN s.first_response_at < %(as_of)s THEN s.first_response_at ELSE %(as_of)s END AS responded,
           CASE WHEN s.resolved_at < %(as_of)s THEN s.resolved_at ELSE %(as_of)s END AS resolved
    FROM scope s LEFT JOIN paused p ON p.ticket_id = s.ticket_id
), expected AS (
    SELECT ticket_id, tenant_id, policy_id, first_response_due,
           responded > first_response_due AS first_response_breached, paused_seconds, resolution_due,
           resolved > resolution_due AS resolution_breached,
           responded > first_response_due OR resolved > resolution_due AS breached
    FROM due
)"""
# The view's columns as the types the task asks for (anything else compares as NULL, i.e. wrong).
AS_TYPE = {
    "integer": "CASE WHEN pg_typeof({c}) IN ('integer'::regtype, 'bigint'::regtype, 'smallint'::regtype) "
    "THEN {c}::text::bigint END",
    "timestamp with time zone": "CASE WHEN pg_typeof({c}) = 'timestamptz'::regtype THEN {c}::text::timestamptz END",
    "boolean": "CASE WHEN pg_typeof({c}) = 'boolean'::regtype THEN {c}::text::boolean END",
}
# One statement: the view (narrowed by `{view_where}`) against the expected rows. Returned rows: ('summary',
# expected rows, view rows, distinct tickets in the view); ('tenant', tenant, breached, in scope) per tenant;
# ('diff', ticket, view's columns 1-8..., expected columns 1-8...) per ticket missing, extra or different.
COMPARE = (
    EXPECTED_CTE
    + """, raw AS MATERIALIZED (
    SELECT * FROM sla_breach_report {view_where}
), got AS (
    SELECT DISTINCT ON (ticket_id) true AS present, {got_columns} FROM raw ORDER BY ticket_id
), counts AS (
    SELECT (SELECT count(*) FROM expected) AS n_exp, (SELECT count(*) FROM raw) AS n_rows,
           (SELECT count(DISTINCT ticket_id) FROM raw) AS n_tickets
)
SELECT 'summary', n_exp, n_rows, n_tickets, {nulls16}
FROM counts
UNION ALL
SELECT 'tenant', tenant_id, count(*) FILTER (WHERE breached), count(*), {nulls16}
FROM expected GROUP BY tenant_id
UNION ALL
SELECT CASE WHEN g.present IS NULL THEN 'missing' WHEN e.ticket_id IS NULL THEN 'extra' ELSE 'diff' END,
       coalesce(e.ticket_id, g.ticket_id), NULL, NULL,
       g.tenant_id, g.policy_id, g.first_response_due, g.first_response_breached, g.paused_seconds,
       g.resolution_due, g.resolution_breached, g.breached,
       e.tenant_id, e.policy_id, e.first_response_due, e.first_response_breached, e.paused_seconds,
       e.resolution_due, e.resolution_breached, e.breached
FROM got g FULL JOIN expected e ON e.ticket_id = g.ticket_id
WHERE g.present IS NULL OR e.ticket_id IS NULL
   OR (g.tenant_id, g.policy_id, g.first_response_due, g.first_response_breached, g.paused_seconds,
       g.resolution_due, g.resolution_breached, g.breached)
      IS DISTINCT FROM (e.tenant_id, e.policy_id, e.first_response_due, e.first_response_breached, e.paused_seconds,
                        e.resolution_due, e.resolution_breached, e.breached)
"""
)
KIND = {
    name: next(k for k in AS_TYPE if k in types or (k == "integer" and "bigint" in types)) for name, types in COLUMNS
}
NULLS16 = (
    ", ".join(
        ["NULL::bigint", "NULL::bigint", "NULL::timestamptz", "NULL::boolean", "NULL::bigint", "NULL::timestamptz"]
        + ["NULL::boolean", "NULL::boolean"]
    )
    + ", "
    + ", ".join(
        ["NULL::bigint", "NULL::bigint", "NULL::timestamptz", "NULL::boolean", "NULL::bigint", "NULL::timestamptz"]
        + ["NULL::boolean", "NULL::boolean"]
    )
)

failures: list[str] = []


def check(cond: bool, msg: str) -> bool:
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def compare(cur, what: str, ticket_where: str = "", view_where: str = "") -> dict[str, list]:
    """The view against the expected rows; returns the statement's rows by kind (see COMPARE)."""
    got_columns = ", ".join(f"{AS_TYPE[KIND[name]].format(c=name)} AS {name}" for name, _ in COLUMNS)
    cur.execute(
        COMPARE.format(where=ticket_where, view_where=view_where, got_columns=got_columns, nulls16=NULLS16),
        {"as_of": AS_OF},
    )
    rows: dict[str, list] = {"summary": [], "tenant": [], "missing": [], "extra": [], "diff": []}
    for r in cur.fetchall():
        rows[r[0]].append(r[1:])
    n_exp, n_rows, n_tickets = rows["summary"][0][:3]
    if not view_where:
        check(n_rows == n_tickets, f"one row per ticket ({n_rows} rows, {n_tickets} distinct tickets)")
    missing = sorted(r[0] for r in rows["missing"])
    extra = sorted(r[0] for r in rows["extra"])
    check(
        not missing and not extra,
        f"{what}: exactly the {n_exp} in-scope tickets (got {n_tickets}; missing {missing[:5]}, extra {extra[:5]})",
    )
    diffs = sorted(rows["diff"])
    for i, (name, _) in enumerate(COLUMNS[1:]):
        bad = [(r[0], r[3 + i], r[11 + i]) for r in diffs if r[3 + i] != r[11 + i]]
        check(not bad, f"{what}: column {name} correct for every ticket ({len(bad)} wrong, e.g. {bad[:2]})")
    return rows


def fingerprints(cur) -> dict[str, tuple[int, str]]:
    """(rows, md5 of the rows in key order) of every table in FINGERPRINTS, in one statement; (-1, "missing") for
    a table that no longer exists."""
    cur.execute("SELECT t FROM unnest(%s::text[]) t WHERE to_regclass(t) IS NOT NULL", (list(FINGERPRINTS),))
    present = [r[0] for r in cur.fetchall()]
    out = dict.fromkeys(FINGERPRINTS, (-1, "missing"))
    queries = []
    for t in present:
        order, cols = FP_SQL[t]
        parts = [
            f"quote_nullable(extract(epoch FROM {c[:-3]})::bigint)" if c.endswith(":ts") else f"quote_nullable({c})"
            for c in cols.split()
        ]
        queries.append(
            f"SELECT '{t}', count(*), md5(coalesce(string_agg(concat_ws('|', {', '.join(parts)}), ',' "
            f"ORDER BY {order}), '')) FROM {t}"
        )
    if queries:
        cur.execute(" UNION ALL ".join(queries))
        out.update({r[0]: (r[1], r[2]) for r in cur.fetchall()})
    return out


def final_answer() -> str:
    path = os.environ.get("MCP_MESSAGES")
    if not path or not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as fh:
        items = json.load(fh)
    for item in reversed(items):
        if item.get("type") == "message" and item.get("role") == "assistant" and item.get("status") == "completed":
            parts = item.get("content") or []
            return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "output_text")
    return ""


def main() -> int:
    conn = psycopg2.connect(
        host=os.environ.get("POSTGRES_HOST", "localhost"),
        port=os.environ.get("POSTGRES_PORT", "5432"),
        user=os.environ.get("POSTGRES_USERNAME", "postgres"),
        password=os.environ.get("POSTGRES_PASSWORD", ""),
        dbname=os.environ.get("POSTGRES_DATABASE") or sys.argv[1],
        # JIT compiled the views for tens of ms a query; 4 MB of work_mem sent the digests' sorts to disk. Neither
        # changes a result.
        options="-c jit=off -c work_mem=32MB",
    )
    cur = conn.cursor()
    fps = fingerprints(cur)
    for t, (n, digest) in FINGERPRINTS.items():
        what = "source table" if t in SOURCES else "table"
        check(fps[t] == (n, digest), f"{what} {t} unchanged (rows {fps[t][0]}, expected {n})")

    cur.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass('public.sla_breach_report')")
    kind = cur.fetchone()
    if not check(kind == ("v",), f"public.sla_breach_report exists and is a plain view (relkind {kind})"):
        return finish()
    cur.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'public' "
        "AND table_name = 'sla_breach_report' ORDER BY ordinal_position"
    )
    cols = cur.fetchall()
    check([c for c, _ in cols] == [c for c, _ in COLUMNS], f"view columns in order {[c for c, _ in COLUMNS]}: {cols}")
    check(all(t in dict(COLUMNS).get(c, ()) for c, t in cols), f"view column types as specified: {cols}")
    if [c for c, _ in cols] != [c for c, _ in COLUMNS]:
        return finish()

    full = compare(cur, "view")

    # Live, not a snapshot: probe rows and a policy change inside a transaction that is rolled back.
    cur.execute("SELECT policy_id FROM sla_policies WHERE tenant_id = 2 AND priority = 'normal' AND is_active")
    policy = cur.fetchone()[0]
    cur.execute(
        "INSERT INTO tickets (tenant_id, sla_policy_id, subject, channel, status, priority, created_at, "
        "first_response_at, updated_at) VALUES (2, %s, 'probe', 'web', 'open', 'normal', "
        "'2026-10-30 10:00:00+00', '2026-10-30 17:59:59+00', now()), (2, %s, 'probe late', 'web', 'new', "
        "'normal', '2026-11-01 00:00:00+00', NULL, now()) RETURNING ticket_id",
        (policy, policy),
    )
    probe, late = (r[0] for r in cur.fetchall())
    cur.execute(
        "INSERT INTO ticket_status_events (ticket_id, status, changed_at) VALUES "
        "(%s, 'new', '2026-10-30 10:00:00+00'), (%s, 'pending', '2026-10-30 11:00:00+00'), "
        "(%s, 'open', '2026-10-30 15:00:00+00'), (%s, 'on_hold', '2026-10-31 20:00:00+00'), "
        "(%s, 'open', '2026-11-02 09:00:00+00'), (%s, 'pending', '2026-11-03 09:00:00+00')",
        (probe,) * 6,
    )
    cur.execute("UPDATE sla_policies SET resolution_minutes = resolution_minutes + 7 WHERE policy_id = %s", (policy,))
    cur.execute(
        EXPECTED_CTE.format(where="AND t.ticket_id IN (%(probe)s, %(late)s)")
        + " SELECT ticket_id, paused_seconds FROM expected",
        {"as_of": AS_OF, "probe": probe, "late": late},
    )
    probes = dict(cur.fetchall())
    check(probe in probes and late not in probes and probes[probe] == 28800, "sanity: probe expectations")
    compare(
        cur,
        "view after inserting probe tickets and changing a policy",
        f"AND t.tenant_id = 2 AND p.policy_id = {int(policy)}",
        f"WHERE tenant_id = 2 AND policy_id = {int(policy)}",
    )
    conn.rollback()

    by_tenant = {t: (b, n) for t, b, n, *_ in full["tenant"]}
    cur.execute("SELECT tenant_id, slug FROM tenants")
    slugs = dict(cur.fetchall())
    ranked = sorted(
        ((Decimal(100 * b) / Decimal(n)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP), slugs[t], b, n)
        for t, (b, n) in by_tenant.items()
    )
    ranked.sort(key=lambda r: (-r[0], r[1]))
    top = [(s, str(b), str(n), str(rate)) for rate, s, b, n in ranked[:3]]
    check(ranked[2][0] != ranked[3][0], "sanity: no tie at third place")
    text = re.sub(r"[`*]", "", final_answer())
    pattern = r"(?<![\w-])([a-z0-9][a-z0-9-]*)\s*:\s*(\d+)\s*/\s*(\d+)\s*=\s*(\d+(?:\.\d+)?)\s*%"
    found = [f for f in re.findall(pattern, text) if f[0] in slugs.values()]  # ignore e.g. an "overall:" line
    check(
        found == top,
        f"answer lists the top three tenants as 'slug: breached/in_scope = rate%': expected {top}, found {found}",
    )
    conn.close()
    return finish()


def finish() -> int:
    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
