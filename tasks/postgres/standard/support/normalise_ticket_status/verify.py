#!/usr/bin/env python3
"""Verifier for support/normalise_ticket_status.

The legacy columns must reproduce the generator's original values exactly (fingerprint from the
fixed seed); the expected codes are then recomputed in Python from those values, resolved_at and
the SLA policy, and compared ticket by ticket. Also checks the lookup tables, NOT NULL and foreign
keys (by trying bad writes inside a rolled-back transaction), and that nothing else changed.
"""

from __future__ import annotations

import os
import sys

import psycopg2

STATUS_MAP = {
    "new": "new",
    "open": "open",
    "in_progress": "open",
    "assigned": "open",
    "pending": "pending",
    "waiting_on_customer": "pending",
    "awaiting_reply": "pending",
    "on_hold": "on_hold",
    "hold": "on_hold",
    "waiting_on_third_party": "on_hold",
    "solved": "solved",
    "resolved": "solved",
    "fixed": "solved",
    "closed": "closed",
}
PRIORITY_MAP = {
    "urgent": "urgent",
    "critical": "urgent",
    "p1": "urgent",
    "high": "high",
    "p2": "high",
    "normal": "normal",
    "medium": "normal",
    "med": "normal",
    "p3": "normal",
    "low": "low",
    "p4": "low",
}
STATUSES = {"new": False, "open": False, "pending": False, "on_hold": False, "solved": True, "closed": True}
PRIORITIES = {"urgent": 1, "high": 2, "normal": 3, "low": 4}
LEGACY_MD5 = "72940e65d125fe1461cdeffa5e9cd0e4"  # ticket_id|status|priority before the migration
OTHER_COLS_MD5 = "c8aaae431a9a838ebc05958832937832"  # every other original tickets column
N_TICKETS = 14090
TABLES = {
    "tenants",
    "agents",
    "contacts",
    "sla_policies",
    "tags",
    "tickets",
    "ticket_status_events",
    "ticket_comments",
    "ticket_tags",
    "csat_responses",
    "ticket_statuses",
    "ticket_priorities",
}
# The original indexes, as pg_indexes prints them: kept by name and definition (a rebuilt copy, such as a partial
# tickets_tenant_status_idx for the open queue, is not the index the app relies on).
INDEXES = {
    name: f"CREATE {'UNIQUE ' if unique else ''}INDEX {name} ON public.{table} USING btree ({keys}){pred}"
    for name, unique, table, keys, pred in (
        ("agents_email_key", True, "agents", "email", ""),
        ("agents_pkey", True, "agents", "agent_id", ""),
        ("agents_tenant_idx", False, "agents", "tenant_id", ""),
        ("contacts_pkey", True, "contacts", "contact_id", ""),
        ("contacts_tenant_email_idx", False, "contacts", "tenant_id, email", ""),
        ("csat_responses_pkey", True, "csat_responses", "csat_id", ""),
        ("csat_responses_ticket_id_key", True, "csat_responses", "ticket_id", ""),
        ("sla_policies_active_uniq", True, "sla_policies", "tenant_id, priority", " WHERE is_active"),
        ("sla_policies_pkey", True, "sla_policies", "policy_id", ""),
        ("tags_pkey", True, "tags", "tag_id", ""),
        ("tags_tenant_id_name_key", True, "tags", "tenant_id, name", ""),
        ("tenants_pkey", True, "tenants", "tenant_id", ""),
        ("tenants_slug_key", True, "tenants", "slug", ""),
        ("ticket_comments_contact_idx", False, "ticket_comments", "author_contact_id", ""),
        ("ticket_comments_pkey", True, "ticket_comments", "comment_id", ""),
        ("ticket_comments_ticket_idx", False, "ticket_comments", "ticket_id", ""),
        ("ticket_status_events_pkey", True, "ticket_status_events", "event_id", ""),
        ("ticket_status_events_ticket_idx", False, "ticket_status_events", "ticket_id, changed_at", ""),
        ("ticket_tags_pkey", True, "ticket_tags", "ticket_id, tag_id", ""),
        ("ticket_tags_tag_idx", False, "ticket_tags", "tag_id", ""),
        ("tickets_contact_idx", False, "tickets", "contact_id", ""),
        ("tickets_pkey", True, "tickets", "ticket_id", ""),
        ("tickets_tenant_created_idx", False, "tickets", "tenant_id, created_at", ""),
        ("tickets_tenant_status_idx", False, "tickets", "tenant_id, status", ""),
    )
}
COUNTS = {"ticket_status_events": 60647, "ticket_comments": 34548, "contacts": 5780, "csat_responses": 3276}
SLA_MD5 = "b08b0a0ef01d735031cca5af8d432a40"  # sla_policies, every column

failures: list[str] = []


def check(cond: bool, msg: str) -> bool:
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


# The expected codes, from each ticket's legacy values (each distinct value normalised once: lower-cased,
# trimmed, runs of whitespace, hyphens and underscores collapsed to one '_', then mapped; otherwise solved or
# open by resolved_at, and the SLA policy's priority or normal), compared with the stored codes in one
# statement: returns the number of tickets that belong in the open queue, then one row per ticket whose status
# or priority is not the expected code.
NORM = "regexp_replace(lower(btrim({}, E' \\t\\n\\r\\x0b\\x0c')), '[\\s_-]+', '_', 'g')"
EXPECTED_CODES = f"""
WITH smap (k, v) AS (SELECT * FROM unnest(%(sk)s::text[], %(sv)s::text[])),
pmap (k, v) AS (SELECT * FROM unnest(%(pk)s::text[], %(pv)s::text[])),
smapped AS (
    SELECT raw, (SELECT v FROM smap WHERE k = {NORM.format("raw")}) AS code
    FROM (SELECT DISTINCT status_legacy AS raw FROM tickets) d
), pmapped AS (
    SELECT raw, (SELECT v FROM pmap WHERE k = {NORM.format("raw")}) AS code
    FROM (SELECT DISTINCT priority_legacy AS raw FROM tickets) d
), codes AS (
    SELECT t.ticket_id, t.status_legacy, t.priority_legacy, t.status, t.priority,
           coalesce(sm.code, CASE WHEN t.resolved_at IS NOT NULL THEN 'solved' ELSE 'open' END) AS status_want,
           coalesce(pm.code, nullif(p.priority, ''), 'normal') AS priority_want
    FROM tickets t LEFT JOIN sla_policies p ON p.policy_id = t.sla_policy_id
    LEFT JOIN smapped sm ON sm.raw = t.status_legacy LEFT JOIN pmapped pm ON pm.raw = t.priority_legacy
)
SELECT 'open_queue', count(*) FILTER (WHERE status_want IN ('new', 'open')), NULL, NULL, NULL FROM codes
UNION ALL
SELECT 'status', ticket_id, status_legacy, status, status_want FROM codes WHERE status IS DISTINCT FROM status_want
UNION ALL
SELECT 'priority', ticket_id, priority_legacy, priority, priority_want FROM codes
WHERE priority IS DISTINCT FROM priority_want
ORDER BY 1, 2
"""


def fk_exists(cur, table: str, column: str, ref: str, ref_col: str) -> bool:
    cur.execute(
        "SELECT count(*) FROM pg_constraint c WHERE c.contype = 'f' AND c.conrelid = %s::regclass "
        "AND c.confrelid = %s::regclass AND c.conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE "
        "attrelid = c.conrelid AND attname = %s)]::int2[] AND c.confkey = ARRAY[(SELECT attnum FROM "
        "pg_attribute WHERE attrelid = c.confrelid AND attname = %s)]::int2[]",
        (f"public.{table}", f"public.{ref}", column, ref_col),
    )
    return cur.fetchone()[0] > 0


def refused(conn, stmt: str) -> bool:
    with conn.cursor() as cur:
        cur.execute("SAVEPOINT probe")
        try:
            cur.execute(stmt)
            ok = False
        except psycopg2.Error:
            ok = True
        cur.execute("ROLLBACK TO SAVEPOINT probe")
    return ok


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
    cur.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace "
        "AND c.relkind IN ('r', 'p', 'v', 'm')"
    )
    rels = {r[0] for r in cur.fetchall()}
    check(
        rels == TABLES | {"open_ticket_queue"},
        f"exactly the expected tables and views (extra "
        f"{sorted(rels - TABLES - {'open_ticket_queue'})}, missing {sorted(TABLES - rels)})",
    )
    if not TABLES <= rels:
        return finish()
    cur.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name IN ('tickets', 'ticket_statuses', 'ticket_priorities')"
    )
    cols = {(r[0], r[1]): (r[2], r[3]) for r in cur.fetchall()}
    for key, want in {
        ("tickets", "status"): ("text", "NO"),
        ("tickets", "priority"): ("text", "NO"),
        ("tickets", "status_legacy"): ("text", "YES"),
        ("tickets", "priority_legacy"): ("text", "YES"),
        ("ticket_statuses", "code"): ("text", "NO"),
        ("ticket_statuses", "label"): ("text", "NO"),
        ("ticket_statuses", "is_closed"): ("boolean", "NO"),
        ("ticket_priorities", "code"): ("text", "NO"),
        ("ticket_priorities", "rank"): ("smallint", "NO"),
    }.items():
        check(cols.get(key) == want, f"{key[0]}.{key[1]} is {want[0]}, nullable={want[1]} (got {cols.get(key)})")
    for table, want_cols in (
        ("ticket_statuses", ["code", "is_closed", "label"]),
        ("ticket_priorities", ["code", "rank"]),
    ):
        got_cols = sorted(c for t, c in cols if t == table)
        check(got_cols == want_cols, f"{table} has exactly the columns {want_cols} (got {got_cols})")
    if not all(k in cols for k in [("tickets", "status_legacy"), ("tickets", "priority_legacy")]):
        return finish()
    cur.execute("SELECT code, is_closed FROM ticket_statuses")
    check(dict(cur.fetchall()) == STATUSES, "ticket_statuses has exactly the six codes with the right is_closed")
    cur.execute("SELECT code, rank FROM ticket_priorities")
    check(dict(cur.fetchall()) == PRIORITIES, "ticket_priorities has exactly urgent 1, high 2, normal 3, low 4")
    for table in ("ticket_statuses", "ticket_priorities"):
        cur.execute(
            "SELECT count(*) FROM pg_constraint WHERE contype = 'p' AND conrelid = %s::regclass AND conkey = "
            "ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'code')]"
            "::int2[]",
            (f"public.{table}", f"public.{table}"),
        )
        check(cur.fetchone()[0] == 1, f"{table}.code is the primary key")
    cur.execute(  # rank smallint NOT NULL UNIQUE: a unique constraint, or a unique index on rank alone
        "SELECT count(*) FROM pg_index x WHERE x.indrelid = 'public.ticket_priorities'::regclass "
        "AND x.indisunique AND x.indisvalid AND x.indpred IS NULL AND x.indnkeyatts = 1 "
        "AND pg_get_indexdef(x.indexrelid, 1, true) = 'rank'"
    )
    check(cur.fetchone()[0] >= 1, "ticket_priorities.rank is UNIQUE")

    cur.execute(
        "SELECT md5(string_agg(concat_ws('|', quote_nullable(ticket_id), quote_nullable(status_legacy), "
        "quote_nullable(priority_legacy)), ',' ORDER BY ticket_id)), count(*) FROM tickets"
    )
    check(cur.fetchone() == (LEGACY_MD5, N_TICKETS), "status_legacy/priority_legacy hold the exact original values")
    ts = ", ".join(
        f"quote_nullable(extract(epoch FROM {c})::bigint)"
        for c in ("created_at", "first_response_at", "resolved_at", "updated_at")
    )
    cur.execute(
        "SELECT md5(string_agg(concat_ws('|', quote_nullable(ticket_id), quote_nullable(tenant_id), "
        "quote_nullable(contact_id), quote_nullable(assignee_id), quote_nullable(sla_policy_id), "
        f"quote_nullable(subject), quote_nullable(channel), {ts}), ',' ORDER BY ticket_id)) FROM tickets"
    )
    check(cur.fetchone()[0] == OTHER_COLS_MD5, "every ticket kept and all other ticket columns unchanged")

    cur.execute(
        EXPECTED_CODES,
        {
            "sk": list(STATUS_MAP),
            "sv": list(STATUS_MAP.values()),
            "pk": list(PRIORITY_MAP),
            "pv": list(PRIORITY_MAP.values()),
        },
    )
    wrong_s, wrong_p, open_queue = [], [], 0
    for kind, tid, old, new, want in cur.fetchall():
        if kind == "open_queue":
            open_queue = tid
        else:
            (wrong_s if kind == "status" else wrong_p).append((tid, old, new, want))
    check(not wrong_s, f"every status mapped by the rules ({len(wrong_s)} wrong, e.g. {wrong_s[:3]})")
    check(not wrong_p, f"every priority mapped by the rules ({len(wrong_p)} wrong, e.g. {wrong_p[:3]})")

    check(fk_exists(cur, "tickets", "status", "ticket_statuses", "code"), "FK tickets.status -> ticket_statuses")
    check(
        fk_exists(cur, "tickets", "priority", "ticket_priorities", "code"), "FK tickets.priority -> ticket_priorities"
    )
    check(
        fk_exists(cur, "sla_policies", "priority", "ticket_priorities", "code"),
        "FK sla_policies.priority -> ticket_priorities",
    )
    new = (
        "INSERT INTO tickets (tenant_id, subject, channel, status, priority, created_at, updated_at) "
        "VALUES (1, 'probe', 'web', {}, {}, '2026-11-14 09:00:00+00', '2026-11-14 09:00:00+00')"
    )
    check(not refused(conn, new.format("'open'", "'high'")), "a ticket with valid codes can still be inserted")
    for label, stmt in (
        ("status 'Open'", new.format("'Open'", "'high'")),
        ("status NULL", new.format("NULL", "'high'")),
        ("priority 'P1'", new.format("'open'", "'P1'")),
        ("priority NULL", new.format("'open'", "NULL")),
        ("update to status 'closed '", "UPDATE tickets SET status = 'closed ' WHERE ticket_id = 1"),
        ("SLA policy priority 'Urgent'", "UPDATE sla_policies SET priority = 'Urgent' WHERE policy_id = 1"),
    ):
        check(refused(conn, stmt), f"writing {label} is refused")
    conn.rollback()

    cur.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
    have = dict(cur.fetchall())
    check(set(INDEXES) <= set(have), f"original indexes kept (missing {sorted(set(INDEXES) - set(have))})")
    changed = sorted(f"{name}: {have[name]}" for name, d in INDEXES.items() if name in have and have[name] != d)
    check(not changed, f"original indexes keep their definitions (changed: {changed[:3]})")
    try:
        cur.execute("SELECT count(*), count(DISTINCT ticket_id) FROM open_ticket_queue")
        check(
            cur.fetchone() == (open_queue, open_queue),
            f"open_ticket_queue works and lists the {open_queue} new/open tickets",
        )
    except psycopg2.Error as exc:
        conn.rollback()
        check(False, f"open_ticket_queue works ({str(exc).strip()[:100]})")
    cur.execute(
        "SELECT md5(string_agg(concat_ws('|', quote_nullable(policy_id), quote_nullable(tenant_id), "
        "quote_nullable(priority), quote_nullable(name), quote_nullable(first_response_minutes), "
        "quote_nullable(resolution_minutes), quote_nullable(is_active), "
        "quote_nullable(extract(epoch FROM effective_from)::bigint)), ',' ORDER BY policy_id)) FROM sla_policies"
    )
    check(cur.fetchone()[0] == SLA_MD5, "sla_policies unchanged")
    for table, n in COUNTS.items():
        cur.execute(f"SELECT count(*) FROM {table}")
        check(cur.fetchone()[0] == n, f"{table} keeps its {n} rows")
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
