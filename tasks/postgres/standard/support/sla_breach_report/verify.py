#!/usr/bin/env python3
"""Verifier for support/sla_breach_report.

Recomputes every ticket's SLA deadlines and breaches in Python from the untouched source tables
(tickets, sla_policies, ticket_status_events), compares the view row by row, proves the view is
computed live (inserted probe rows and a changed policy show up inside a rolled-back transaction),
checks the reported top three tenants, and that the source tables were not modified.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import psycopg2

AS_OF = datetime(2026, 11, 1, tzinfo=UTC)
PAUSED = ("pending", "on_hold")
COLUMNS = [
    ("ticket_id", ("integer", "bigint")),
    ("tenant_id", ("integer", "bigint")),
    ("policy_id", ("integer", "bigint")),
    ("first_response_due", ("timestamp with time zone",)),
    ("first_response_breached", ("boolean",)),
    ("paused_seconds", ("bigint", "integer")),
    ("resolution_due", ("timestamp with time zone",)),
    ("resolution_breached", ("boolean",)),
    ("breached", ("boolean",)),
]
FINGERPRINTS = {  # (rows, md5) of the source tables, from the generator's fixed seed
    "tickets": (14090, "00c1f2eae47b30d881d0bfe9b35e5480"),
    "sla_policies": (48, "b08b0a0ef01d735031cca5af8d432a40"),
    "ticket_status_events": (60647, "3c9ba7025a764cb888662e317a0221cb"),
    "tenants": (14, "9b2f39336e24cde2493abe09154d65da"),
}
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
}

failures: list[str] = []


def check(cond: bool, msg: str) -> bool:
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def expected_rows(cur, ticket_filter: str = "") -> dict[int, tuple]:
    """ticket_id -> the expected view row, computed from the base tables."""
    cur.execute(
        "SELECT t.ticket_id, t.tenant_id, p.policy_id, t.created_at, t.first_response_at, t.resolved_at, "
        "p.first_response_minutes, p.resolution_minutes FROM tickets t "
        "JOIN sla_policies p ON p.policy_id = t.sla_policy_id WHERE t.created_at < %s" + ticket_filter,
        (AS_OF,),
    )
    tickets = cur.fetchall()
    cur.execute(
        "SELECT ticket_id, status, changed_at FROM ticket_status_events ORDER BY ticket_id, changed_at, event_id"
    )
    events: dict[int, list[tuple[str, datetime]]] = defaultdict(list)
    for tid, status, at in cur.fetchall():
        events[tid].append((status, at))
    out: dict[int, tuple] = {}
    for tid, tenant, policy, created, fr, res, fr_min, res_min in tickets:
        evs = events.get(tid, [])
        paused = 0
        for i, (status, at) in enumerate(evs):
            if status in PAUSED and at < AS_OF:
                end = min(evs[i + 1][1], AS_OF) if i + 1 < len(evs) else AS_OF
                paused += int((end - at).total_seconds())
        fr_due = created + timedelta(minutes=fr_min)
        res_due = created + timedelta(minutes=res_min, seconds=paused)
        fr_eff = fr if fr is not None and fr < AS_OF else AS_OF
        res_eff = res if res is not None and res < AS_OF else AS_OF
        b1, b2 = fr_eff > fr_due, res_eff > res_due
        out[tid] = (tid, tenant, policy, fr_due, b1, paused, res_due, b2, b1 or b2)
    return out


def compare(got: dict[int, tuple], want: dict[int, tuple], what: str) -> None:
    check(
        set(got) == set(want),
        f"{what}: exactly the {len(want)} in-scope tickets (got {len(got)}; "
        f"missing {sorted(set(want) - set(got))[:5]}, extra {sorted(set(got) - set(want))[:5]})",
    )
    for i, (name, _) in enumerate(COLUMNS[1:], start=1):
        bad = [t for t in want if t in got and got[t][i] != want[t][i]]
        check(
            not bad,
            f"{what}: column {name} correct for every ticket ({len(bad)} wrong, e.g. "
            f"{[(t, got[t][i], want[t][i]) for t in bad[:2]]})",
        )


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
        options="-c jit=off",  # JIT compiling a view costs tens of ms and changes no result
    )
    cur = conn.cursor()
    for t, (n, digest) in FINGERPRINTS.items():
        order, cols = FP_SQL[t]
        parts = [
            f"quote_nullable(extract(epoch FROM {c[:-3]})::bigint)" if c.endswith(":ts") else f"quote_nullable({c})"
            for c in cols.split()
        ]
        cur.execute(
            f"SELECT count(*), md5(coalesce(string_agg(concat_ws('|', {', '.join(parts)}), ',' "
            f"ORDER BY {order}), '')) FROM {t}"
        )
        check(cur.fetchone() == (n, digest), f"source table {t} unchanged")

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

    want = expected_rows(cur)
    cur.execute("SELECT " + ", ".join(c for c, _ in COLUMNS) + " FROM sla_breach_report")
    rows = cur.fetchall()
    got = {r[0]: r for r in rows}
    check(len(rows) == len(got), f"one row per ticket ({len(rows)} rows, {len(got)} distinct tickets)")
    compare(got, want, "view")

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
    want_live = expected_rows(cur, f" AND t.tenant_id = 2 AND p.policy_id = {int(policy)}")
    cur.execute(
        "SELECT " + ", ".join(c for c, _ in COLUMNS) + f" FROM sla_breach_report WHERE tenant_id = 2 "
        f"AND policy_id = {int(policy)}"
    )
    got_live = {r[0]: r for r in cur.fetchall()}
    check(probe in want_live and late not in want_live and want_live[probe][5] == 28800, "sanity: probe expectations")
    compare(got_live, want_live, "view after inserting probe tickets and changing a policy")
    conn.rollback()

    by_tenant: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for row in want.values():
        by_tenant[row[1]][0] += row[8]
        by_tenant[row[1]][1] += 1
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
