#!/usr/bin/env python3
"""Verifier for support/tenant_isolation_rls.

Logs in as the two new roles and proves isolation by behaviour (visible row counts per tenant,
refused cross-tenant writes, among them re-pointing each kind of child row to another tenant's ticket,
allowed own writes), then checks the role attributes, the exact
privilege matrix, FORCE row-level security and that no data changed. Expected counts come from
the verifier's own superuser session; fingerprints come from the generator's fixed seed.
"""

from __future__ import annotations

import os
import sys

import psycopg2
from psycopg2 import sql

DIRECT = ["tenants", "agents", "contacts", "sla_policies", "tags", "tickets"]
CHILD = ["ticket_comments", "ticket_status_events", "ticket_tags", "csat_responses"]
TABLES = DIRECT + CHILD
APP_RW = {"tickets", "ticket_comments", "ticket_status_events", "ticket_tags", "contacts", "csat_responses"}
APP_SEQS = {
    "tickets_ticket_id_seq",
    "ticket_comments_comment_id_seq",
    "ticket_status_events_event_id_seq",
    "contacts_contact_id_seq",
    "csat_responses_csat_id_seq",
}
PRIVS = ["SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"]
APP, AUDITOR = ("support_app", "Sup-App-2026"), ("support_auditor", "Sup-Audit-2026")
OWN, OTHER = 4, 6  # tenants used for the write probes
FINGERPRINTS = {  # rows and md5 of every original column, from the generator's fixed seed
    "tenants": (14, "9b2f39336e24cde2493abe09154d65da", "tenant_id slug name plan region created_at:ts billing_email"),
    "agents": (
        106,
        "0d608dd8ac2e8a31b334fb86236464af",
        "agent_id tenant_id full_name email role is_active created_at:ts",
    ),
    "contacts": (
        5780,
        "fb6947c2f72c5ef5a3781affeeb67048",
        "contact_id tenant_id full_name email phone company created_at:ts",
    ),
    "sla_policies": (
        48,
        "b08b0a0ef01d735031cca5af8d432a40",
        "policy_id tenant_id priority name first_response_minutes resolution_minutes is_active effective_from:ts",
    ),
    "tags": (148, "fd8a44ef578d8c0305e4fc49d416bdf8", "tag_id tenant_id name"),
    "tickets": (
        14090,
        "00c1f2eae47b30d881d0bfe9b35e5480",
        "ticket_id tenant_id contact_id assignee_id sla_policy_id subject channel status priority created_at:ts "
        "first_response_at:ts resolved_at:ts updated_at:ts",
    ),
    "ticket_status_events": (
        60647,
        "3c9ba7025a764cb888662e317a0221cb",
        "event_id ticket_id status changed_at:ts changed_by_agent_id",
    ),
    "ticket_comments": (
        34548,
        "4375fd5abf3024266df028a7d965d721",
        "comment_id ticket_id author_agent_id author_contact_id is_public body created_at:ts",
    ),
    "ticket_tags": (10585, "2d27d888d88798b08f13ddca7b01a71b", "ticket_id tag_id"),
    "csat_responses": (
        3276,
        "1b79ce87abb2f190802398b844a25acd",
        "csat_id ticket_id contact_id rating comment responded_at:ts",
    ),
}

failures: list[str] = []


def check(cond: bool, msg: str) -> bool:
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def connect(user: str, password: str):
    db = os.environ.get("POSTGRES_DATABASE") or sys.argv[1]
    return psycopg2.connect(
        host=os.environ.get("POSTGRES_HOST", "localhost"),
        port=os.environ.get("POSTGRES_PORT", "5432"),
        user=user,
        password=password,
        dbname=db,
        # JIT compiled the views for tens of ms a query; 4 MB of work_mem sent the digests' sorts to disk. Neither
        # changes a result.
        options="-c jit=off -c work_mem=32MB",
        connect_timeout=10,
    )


def one(cur, stmt: str, args: tuple = ()) -> object:
    cur.execute(stmt, args)
    return cur.fetchone()[0]


def tenant_count(cur, table: str, tenant: int) -> int:
    if table in CHILD:
        return one(
            cur,
            f"SELECT count(*) FROM {table} x JOIN tickets t ON t.ticket_id = x.ticket_id WHERE t.tenant_id = %s",
            (tenant,),
        )
    return one(cur, f"SELECT count(*) FROM {table} WHERE tenant_id = %s", (tenant,))


def attempt(conn, stmt: str, args: tuple | dict = ()) -> tuple[bool, int]:
    """Run one statement inside a savepoint; (succeeded, rowcount). Never leaves the transaction aborted."""
    with conn.cursor() as cur:
        cur.execute("SAVEPOINT probe")
        try:
            cur.execute(stmt, args)
            ok, n = True, cur.rowcount
        except psycopg2.Error:
            ok, n = False, -1
        cur.execute("ROLLBACK TO SAVEPOINT probe")
    return ok, n


def visibility(conn, setting: str | None, expect: dict[str, int], who: str) -> None:
    with conn.cursor() as cur:
        if setting is not None:
            cur.execute("SELECT set_config('app.tenant_id', %s, false)", (setting,))
        got: dict[str, object] = {}
        for t in TABLES:
            try:
                got[t] = one(cur, f"SELECT count(*) FROM {t}")
            except psycopg2.Error as exc:
                got[t] = f"error {exc.pgcode}"
                conn.rollback()
        bad = {t: (got[t], expect[t]) for t in TABLES if got[t] != expect[t]}
        check(not bad, f"{who} with app.tenant_id={setting!r} sees the right rows (got, expected): {bad}")


INSERTS = {  # run once with the app's own tenant (must work) and once with another tenant (must be refused)
    "insert a ticket": "INSERT INTO tickets (tenant_id, subject, channel, status, priority, created_at, updated_at) "
    "VALUES (%(tenant)s, 'probe', 'web', 'new', 'normal', %(ts)s, %(ts)s)",
    "comment on a ticket": "INSERT INTO ticket_comments (ticket_id, body, created_at) VALUES (%(ticket)s, 'p', %(ts)s)",
    "log a status event": "INSERT INTO ticket_status_events (ticket_id, status, changed_at) "
    "VALUES (%(ticket)s, 'open', %(ts)s)",
    "tag a ticket": "INSERT INTO ticket_tags VALUES (%(ticket)s, %(tag)s)",
    "record CSAT": "INSERT INTO csat_responses (ticket_id, rating, responded_at) VALUES (%(ticket)s, 5, %(ts)s)",
    "create a contact": "INSERT INTO contacts (tenant_id, full_name, created_at) VALUES (%(tenant)s, 'P', %(ts)s)",
}
REFUSED = {
    "move its own ticket to another tenant": "UPDATE tickets SET tenant_id = %(other)s WHERE ticket_id = %(ticket)s",
    "re-point its comment to another tenant's ticket": "UPDATE ticket_comments SET ticket_id = %(other_ticket)s "
    "WHERE comment_id = %(comment)s",
    "re-point its status event to another tenant's ticket": "UPDATE ticket_status_events "
    "SET ticket_id = %(other_ticket)s WHERE event_id = %(event)s",
    "re-point its tag link to another tenant's ticket": "UPDATE ticket_tags SET ticket_id = %(other_ticket)s "
    "WHERE ticket_id = %(link_ticket)s AND tag_id = %(link_tag)s",
    "re-point its CSAT response to another tenant's ticket": "UPDATE csat_responses SET ticket_id = %(other_ticket)s "
    "WHERE csat_id = %(csat)s",
    # an UPDATE that reads no column needs no SELECT right, so only the UPDATE policies' WITH CHECK judge its new
    # rows (with a WHERE clause the SELECT policy does too): moving every event of the tenant must be refused
    "move all its status events to another tenant's ticket (no WHERE)": "UPDATE ticket_status_events "
    "SET ticket_id = %(other_ticket)s",
    "delete its own ticket": "DELETE FROM tickets WHERE ticket_id = %(ticket)s",
    "truncate ticket_tags": "TRUNCATE ticket_tags",
    "update tenants": "UPDATE tenants SET name = name WHERE tenant_id = %(tenant)s",
}
NO_ROWS = {
    "update another tenant's ticket": "UPDATE tickets SET subject = 'x' WHERE ticket_id = %(other_ticket)s",
    "update another tenant's contacts": "UPDATE contacts SET full_name = 'x' WHERE tenant_id = %(other)s",
}


def write_probes(admin, app) -> None:
    side: dict[int, dict[str, object]] = {}
    for tenant in (OWN, OTHER):
        ticket = one(
            admin,
            "SELECT min(ticket_id) FROM tickets WHERE tenant_id = %s AND ticket_id NOT IN "
            "(SELECT ticket_id FROM csat_responses)",
            (tenant,),
        )
        tag = one(
            admin,
            "SELECT min(tag_id) FROM tags WHERE tenant_id = %s AND tag_id NOT IN "
            "(SELECT tag_id FROM ticket_tags WHERE ticket_id = %s)",
            (tenant, ticket),
        )
        side[tenant] = {"tenant": tenant, "ticket": ticket, "tag": tag, "ts": "2026-11-14 10:00:00+00"}
    # rows of the app's own tenant that the re-point probes move (each visible to it, so success means moved)
    own_rows = "{} x JOIN tickets t ON t.ticket_id = x.ticket_id WHERE t.tenant_id = %s"
    admin.execute(
        "SELECT x.ticket_id, x.tag_id FROM " + own_rows.format("ticket_tags") + " AND NOT EXISTS (SELECT 1 FROM "
        "ticket_tags y WHERE y.ticket_id = %s AND y.tag_id = x.tag_id) ORDER BY 1, 2 LIMIT 1",
        (OWN, side[OTHER]["ticket"]),
    )
    link_ticket, link_tag = admin.fetchone()
    extra = {
        "other": OTHER,
        "other_ticket": side[OTHER]["ticket"],
        "comment": one(
            admin, "SELECT min(comment_id) FROM ticket_comments WHERE ticket_id = %s", (side[OWN]["ticket"],)
        ),
        "event": one(admin, "SELECT min(x.event_id) FROM " + own_rows.format("ticket_status_events"), (OWN,)),
        "csat": one(admin, "SELECT min(x.csat_id) FROM " + own_rows.format("csat_responses"), (OWN,)),
        "link_ticket": link_ticket,
        "link_tag": link_tag,
    }
    app.autocommit = False
    with app.cursor() as cur:
        cur.execute("SELECT set_config('app.tenant_id', %s, false)", (str(OWN),))
    for label, stmt in INSERTS.items():
        check(attempt(app, stmt, side[OWN])[0], f"support_app can {label} for its own tenant (default ids)")
        check(not attempt(app, stmt, side[OTHER])[0], f"support_app cannot {label} for another tenant")
    for label, stmt in REFUSED.items():
        check(not attempt(app, stmt, {**side[OWN], **extra})[0], f"support_app cannot {label}")
    for label, stmt in NO_ROWS.items():
        n = attempt(app, stmt, extra)[1]
        check(n <= 0, f"support_app cannot {label} (rows changed: {n})")
    app.rollback()


def main() -> int:
    admin_conn = connect(os.environ.get("POSTGRES_USERNAME", "postgres"), os.environ.get("POSTGRES_PASSWORD", ""))
    admin_conn.autocommit = True
    admin = admin_conn.cursor()
    if not one(admin, "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"):
        print("FAIL: the verifier needs a superuser session (task declares cluster isolation)")
        return 1
    totals = {t: one(admin, f"SELECT count(*) FROM {t}") for t in TABLES}
    admin.execute(
        "SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles "
        "WHERE rolname IN (%s, %s)",
        (APP[0], AUDITOR[0]),
    )
    roles = {r[0]: r[1:] for r in admin.fetchall()}
    for name in (APP[0], AUDITOR[0]):
        attrs = roles.get(name)
        if check(attrs is not None, f"role {name} exists"):
            check(attrs[0] and not any(attrs[1:4]), f"{name} can log in and is not superuser/createrole/createdb")
    if roles.get(APP[0]):
        check(not roles[APP[0]][4], "support_app does not bypass row-level security")

    admin.execute(
        "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class "
        "WHERE relnamespace = 'public'::regnamespace AND relname = ANY(%s)",
        (TABLES,),
    )
    flags = {r[0]: r[1:] for r in admin.fetchall()}
    check(
        all(flags.get(t) == (True, True) for t in TABLES),
        f"row-level security enabled and forced on all ten tables: {flags}",
    )

    if len(roles) == 2:
        # every (role, privilege, table) in one query, in the order the checks list them
        admin.execute(
            "SELECT r, p, t, has_table_privilege(r, 'public.' || t, p) FROM unnest(%s::text[]) WITH ORDINALITY "
            "AS tt(t, i), unnest(%s::text[]) WITH ORDINALITY AS pp(p, j), unnest(%s::text[]) WITH ORDINALITY "
            "AS rr(r, k) ORDER BY i, j, k",
            (TABLES, PRIVS, [APP[0], AUDITOR[0]]),
        )
        wrong = []
        for role, p, t, have in admin.fetchall():
            want_app = p == "SELECT" or (t in APP_RW and p in ("INSERT", "UPDATE"))
            if have != (want_app if role == APP[0] else p == "SELECT"):
                wrong.append(f"{role} {p} on {t} should be {not have}")
        check(not wrong, f"exact table privilege matrix ({len(wrong)} wrong): {wrong[:6]}")
        admin.execute(
            "SELECT r, p, c.relname, has_sequence_privilege(r, 'public.' || c.relname, p) "
            "FROM pg_class c, unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) WITH ORDINALITY AS pp(p, j), "
            "unnest(%s::text[]) WITH ORDINALITY AS rr(r, k) "
            "WHERE c.relkind = 'S' AND c.relnamespace = 'public'::regnamespace ORDER BY c.relname, j, k",
            ([APP[0], AUDITOR[0]],),
        )
        wrong = []
        for role, p, seq, have in admin.fetchall():
            if have != (role == APP[0] and p == "USAGE" and seq in APP_SEQS):
                wrong.append(f"{role} {p} on {seq} should be {not have}")
        check(not wrong, f"sequence privileges: USAGE on exactly the five needed sequences ({wrong[:6]})")
    public_acl = (
        "SELECT count(*) FROM pg_class c, aclexplode(c.relacl) a "
        "WHERE a.grantee = 0 AND c.relnamespace = 'public'::regnamespace"
    )
    check(one(admin, public_acl) == 0, "nothing is granted to PUBLIC")
    column_acl = (  # column grants (GRANT UPDATE (col) ...) are privileges too, beyond the table matrix above
        "SELECT string_agg(c.relname || '.' || a.attname || ' ' || a.attacl::text, '; ') FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid WHERE c.relnamespace = 'public'::regnamespace AND a.attacl IS NOT NULL"
    )
    granted = one(admin, column_acl)
    check(granted is None, f"no column-level privileges granted (found: {granted})")

    admin.execute(
        "SELECT r.rolname, r.rolsuper OR r.rolbypassrls FROM pg_class c JOIN pg_roles r "
        "ON r.oid = c.relowner WHERE c.oid = 'public.tickets'::regclass"
    )
    owner, owner_exempt = admin.fetchone()
    if not owner_exempt:  # a superuser owner is never subject to RLS; relforcerowsecurity was checked above
        admin_conn.autocommit = False
        admin.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(owner)))
        check(one(admin, "SELECT count(*) FROM tickets") == 0, f"FORCE: table owner {owner} is subject to RLS")
        admin_conn.rollback()
        admin_conn.autocommit = True

    for role, pw in (APP, AUDITOR):
        try:
            conn = connect(role, pw)
        except psycopg2.Error as exc:
            check(False, f"{role} can log in with its password ({str(exc).strip()[:120]})")
            continue
        conn.autocommit = True
        if role == APP[0]:
            visibility(conn, None, dict.fromkeys(TABLES, 0), role)
            visibility(conn, "", dict.fromkeys(TABLES, 0), role)
            for tenant in (1, 11):
                visibility(conn, str(tenant), {t: tenant_count(admin, t, tenant) for t in TABLES}, role)
            write_probes(admin, conn)
        else:
            visibility(conn, None, totals, role)
            visibility(conn, str(OWN), totals, role)
            conn.autocommit = False
            for label, stmt in (
                ("insert a tag", "INSERT INTO tags (tenant_id, name) VALUES (4, 'probe')"),
                ("update a ticket", "UPDATE tickets SET subject = subject WHERE ticket_id = 1"),
                ("delete a CSAT response", "DELETE FROM csat_responses WHERE csat_id = 1"),
            ):
                check(not attempt(conn, stmt)[0], f"support_auditor cannot {label}")
            conn.rollback()
        conn.close()

    for t, (n, digest, cols) in FINGERPRINTS.items():
        names = [c.split(":")[0] for c in cols.split()]
        parts = [f"extract(epoch FROM {c[:-3]})::bigint" if c.endswith(":ts") else c for c in cols.split()]
        text = ", ".join(f"quote_nullable({x})" for x in parts)
        admin.execute(
            f"SELECT count(*), md5(string_agg(concat_ws('|', {text}), ',' ORDER BY {', '.join(names)})) FROM {t}"
        )
        check(admin.fetchone() == (n, digest), f"{t}: data unchanged ({n} rows)")
    admin_conn.close()
    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
