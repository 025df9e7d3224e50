#!/usr/bin/env python3
"""Verifier for support/merge_duplicate_contacts.

The expected end state (merge map, surviving contacts with normalised email and filled phone,
re-pointed tickets/comments/CSAT) was computed independently in Python from the generator's fixed
seed; here it is compared through fingerprints plus per-tenant counts for diagnosis. The recurrence
guard is proven by writes inside a rolled-back transaction.
"""

from __future__ import annotations

import os
import sys

import psycopg2

TS = "quote_nullable(extract(epoch FROM {})::bigint)"
EXPECTED = {
    "merge map": (706, "1e4296485dacae01f03842d3108715c4"),
    "contacts": (5074, "ca4b3c55f5ec4e9665b5c7183230bc05"),
    "tickets": (14090, "e158848ff909d27c6ebe00c67fd409e8"),
    "ticket_comments": (34548, "789844f27b5d0178d7175ebdaa565986"),
    "csat_responses": (3276, "654848d72729100bcdf7ba8e4e69a7b0"),
}
FINGERPRINT_SQL = {
    "merge map": "SELECT count(*), md5(string_agg(concat_ws('|', old_contact_id, kept_contact_id, tenant_id), ',' "
    "ORDER BY old_contact_id)) FROM contact_merges",
    "contacts": "SELECT count(*), md5(string_agg(concat_ws('|', quote_nullable(contact_id), quote_nullable(tenant_id), "
    "quote_nullable(full_name), quote_nullable(email), quote_nullable(phone), quote_nullable(company), "
    f"{TS.format('created_at')}), ',' ORDER BY contact_id)) FROM contacts",
    "tickets": "SELECT count(*), md5(string_agg(concat_ws('|', quote_nullable(ticket_id), quote_nullable(tenant_id), "
    "quote_nullable(contact_id), quote_nullable(assignee_id), quote_nullable(sla_policy_id), "
    "quote_nullable(subject), quote_nullable(channel), quote_nullable(status), quote_nullable(priority), "
    f"{TS.format('created_at')}, {TS.format('first_response_at')}, {TS.format('resolved_at')}, "
    f"{TS.format('updated_at')}), ',' ORDER BY ticket_id)) FROM tickets",
    "ticket_comments": "SELECT count(*), md5(string_agg(concat_ws('|', quote_nullable(comment_id), "
    "quote_nullable(ticket_id), quote_nullable(author_agent_id), quote_nullable(author_contact_id), "
    f"quote_nullable(is_public), quote_nullable(body), {TS.format('created_at')}), ',' "
    "ORDER BY comment_id)) FROM ticket_comments",
    "csat_responses": "SELECT count(*), md5(string_agg(concat_ws('|', quote_nullable(csat_id), "
    "quote_nullable(ticket_id), quote_nullable(contact_id), quote_nullable(rating), quote_nullable(comment), "
    f"{TS.format('responded_at')}), ',' ORDER BY csat_id)) FROM csat_responses",
}
PER_TENANT = {
    1: 1350,
    2: 667,
    3: 543,
    4: 466,
    5: 203,
    6: 382,
    7: 290,
    8: 130,
    9: 232,
    10: 127,
    11: 66,
    12: 334,
    13: 244,
    14: 40,
}
COUNTS = {
    "tenants": 14,
    "agents": 106,
    "sla_policies": 48,
    "tags": 148,
    "ticket_status_events": 60647,
    "ticket_tags": 10585,
}
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
    "contact_merges",
}
FKS = [
    ("tickets", "contact_id"),
    ("ticket_comments", "author_contact_id"),
    ("csat_responses", "contact_id"),
    ("contact_merges", "kept_contact_id"),
]
# The existing indexes on contacts and its references, as pg_indexes prints them: kept by name and definition.
INDEXES = {
    "contacts_pkey": "CREATE UNIQUE INDEX contacts_pkey ON public.contacts USING btree (contact_id)",
    "contacts_tenant_email_idx": (
        "CREATE INDEX contacts_tenant_email_idx ON public.contacts USING btree (tenant_id, email)"
    ),
    "tickets_contact_idx": "CREATE INDEX tickets_contact_idx ON public.tickets USING btree (contact_id)",
    "ticket_comments_contact_idx": (
        "CREATE INDEX ticket_comments_contact_idx ON public.ticket_comments USING btree (author_contact_id)"
    ),
}

failures: list[str] = []


def check(cond: bool, msg: str) -> bool:
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def accepted(conn, stmt: str, args: tuple = ()) -> bool:
    with conn.cursor() as cur:
        cur.execute("SAVEPOINT probe")
        try:
            cur.execute(stmt, args)
            ok = True
        except psycopg2.Error:
            ok = False
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
    cur.execute("SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')")
    rels = {r[0] for r in cur.fetchall()}
    check(
        rels == TABLES,
        f"tables: contact_merges added, nothing else (extra {sorted(rels - TABLES)}, missing {sorted(TABLES - rels)})",
    )
    if "contact_merges" not in rels:
        return finish()
    cur.execute(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = 'contact_merges' ORDER BY ordinal_position"
    )
    cols = cur.fetchall()
    check(
        cols
        == [("old_contact_id", "integer", "NO"), ("kept_contact_id", "integer", "NO"), ("tenant_id", "integer", "NO")],
        f"contact_merges columns as specified: {cols}",
    )
    cur.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'public.contact_merges'::regclass "
        "AND contype = 'p'"
    )
    check([r[0] for r in cur.fetchall()] == ["PRIMARY KEY (old_contact_id)"], "contact_merges.old_contact_id is the PK")

    for name, sql in FINGERPRINT_SQL.items():
        cur.execute(sql)
        got = cur.fetchone()
        content = "same content" if got[1] == EXPECTED[name][1] else "content differs"
        check(
            got == EXPECTED[name],
            f"{name} matches the expected end state ({EXPECTED[name][0]} rows expected, got {got[0]}, {content})",
        )
    cur.execute("SELECT tenant_id, count(*) FROM contacts GROUP BY 1")
    per_tenant = dict(cur.fetchall())
    check(per_tenant == PER_TENANT, f"contacts left per tenant {per_tenant} (expected {PER_TENANT})")
    cur.execute(
        "SELECT count(*) FROM contact_merges m JOIN contacts k ON k.contact_id = m.kept_contact_id "
        "WHERE k.tenant_id <> m.tenant_id"
    )
    check(cur.fetchone()[0] == 0, "no merge crosses tenants")
    cur.execute("SELECT count(*) FROM contacts WHERE email <> lower(btrim(email)) OR email = ''")
    check(cur.fetchone()[0] == 0, "remaining emails stored lower-cased, trimmed, blanks as NULL")

    for table, column in FKS:
        cur.execute(
            "SELECT pg_get_constraintdef(c.oid), c.convalidated FROM pg_constraint c WHERE c.contype = 'f' "
            "AND c.conrelid = %s::regclass AND c.confrelid = 'public.contacts'::regclass AND c.conkey = "
            "ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = c.conrelid AND attname = %s)]::int2[]",
            (f"public.{table}", column),
        )
        fks = cur.fetchall()
        if check(len(fks) == 1, f"foreign key {table}.{column} -> contacts present"):
            want = f"FOREIGN KEY ({column}) REFERENCES contacts(contact_id)"
            if table == "contact_merges":  # new: any ON DELETE/UPDATE rule is the agent's choice
                check(fks[0][0].startswith(want), f"{table}.{column} references contacts(contact_id) ({fks[0][0]})")
            else:  # existing: kept as it was (no action, validated)
                check(fks[0] == (want, True), f"existing foreign key {table}.{column} kept as it was (now {fks[0]})")
    cur.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
    have = dict(cur.fetchall())
    check(set(INDEXES) <= set(have), f"existing contact indexes kept (missing {sorted(set(INDEXES) - set(have))})")
    changed = sorted(name for name, d in INDEXES.items() if name in have and have[name] != d)
    check(not changed, f"existing contact indexes keep their definitions (changed: {changed})")
    for table, n in COUNTS.items():
        cur.execute(f"SELECT count(*) FROM {table}")
        check(cur.fetchone()[0] == n, f"{table} keeps its {n} rows")

    # Recurrence guard: probes inside one transaction that is rolled back.
    cur.execute(
        "SELECT contact_id, email FROM contacts WHERE tenant_id = 4 AND email IS NOT NULL "
        "AND lower(btrim(email)) NOT IN (SELECT lower(btrim(email)) FROM contacts WHERE tenant_id = 5 "
        "AND email IS NOT NULL) ORDER BY contact_id LIMIT 2"
    )
    (cid, email), (other_id, _) = cur.fetchall()
    ins = (
        "INSERT INTO contacts (tenant_id, full_name, email, created_at) VALUES (%s, 'Probe', %s, '2026-11-14 09:00+00')"
    )
    probes = [
        ("same tenant, same email in upper case with spaces", False, ins, (4, f"  {email.upper()} ")),
        ("same tenant, identical email", False, ins, (4, email)),
        (
            "update another contact of the tenant to the email in upper case",
            False,
            "UPDATE contacts SET email = %s WHERE contact_id = %s",
            (email.upper(), other_id),
        ),
        ("same email in another tenant", True, ins, (5, email)),
        ("contact without email", True, ins, (4, None)),
        ("a second contact without email", True, ins + "; " + ins, (4, None, 4, None)),
        ("a new unique email", True, ins, (4, f"probe.{cid}@example.org")),
    ]
    for label, want, stmt, args in probes:
        check(accepted(conn, stmt, args) == want, f"{'accepted' if want else 'rejected'}: {label}")
    conn.rollback()
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
