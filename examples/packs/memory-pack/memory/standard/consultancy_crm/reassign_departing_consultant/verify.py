#!/usr/bin/env python3
"""Verifier for consultancy_crm/reassign_departing_consultant.

Expected end state, derived from the untouched initial state by the task's rules (open projects handed to the
most senior team member or Tom's manager, reports, accounts and opportunities moved, employment turned into
formerly_worked_at, role and email replaced). Everything else is unchanged; order is free.
"""

import json
import os
import sys
from collections import Counter
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "consultancy_crm" / "memory.jsonl"
TOM = "Tom Whitfield"
FIRM = "Harbourline Advisory"
DATE = "2026-09-30"
NOTE = f"Lead handed over from {TOM} on {DATE}"
SENIORITY = ["Managing Partner", "Partner", "Senior Consultant", "Consultant", "Analyst"]
# project -> new lead, and company -> new account owner (re-derived from the initial state as a self-check)
EXPECTED_LEADS = {
    "Norcross warehouse slotting review": "Lena Novak",
    "Norcross Phase 2 network redesign": "Daniel Price",
    "Norcross yard management pilot": "Grace Liu",
    "Pennant shrinkage diagnostic": "Rhys Evans",
}
EXPECTED_ACCOUNTS = {
    "Norcross Logistics": "Daniel Price",
    "Pennant Retail Group": "Rhys Evans",
    "Fenwick & Vale Solicitors": "Daniel Price",
}

failures = []


def check(cond, msg):
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def load(path):
    """The graph as the server reads it: ({name: [entityType, [observations]]}, Counter of (from, type, to))."""
    entities, relations = {}, Counter()
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        item = json.loads(line)
        if not isinstance(item, dict):
            raise ValueError(f"line {n}: not a JSON object")
        if item.get("type") == "entity":
            name, etype, obs = item.get("name"), item.get("entityType"), item.get("observations")
            if not (isinstance(name, str) and isinstance(etype, str) and isinstance(obs, list)):
                raise ValueError(f"line {n}: malformed entity")
            if not all(isinstance(o, str) for o in obs):
                raise ValueError(f"line {n}: an observation of {name!r} is not a string")
            if name in entities:
                raise ValueError(f"line {n}: entity {name!r} appears twice")
            entities[name] = [etype, list(obs)]
        elif item.get("type") == "relation":
            relations[(item.get("from"), item.get("relationType"), item.get("to"))] += 1
        else:
            raise ValueError(f"line {n}: neither an entity nor a relation")
    return entities, relations


def compare(want, got):
    """Whole-graph comparison: entities, their types and observation multisets, relation multisets."""
    (we, wr), (ge, gr) = want, got
    missing, extra = sorted(set(we) - set(ge)), sorted(set(ge) - set(we))
    check(not missing, f"no entity missing or renamed (missing: {missing})")
    check(not extra, f"no unexpected entity (extra: {extra})")
    differing = 0
    for name in sorted(set(we) & set(ge)):
        (wt, wo), (gt, go) = we[name], ge[name]
        if wt != gt:
            differing += 1
            check(False, f"{name}: entityType is {gt!r}, expected {wt!r}")
        lost, added = Counter(wo) - Counter(go), Counter(go) - Counter(wo)
        if lost or added:
            differing += 1
            check(False, f"{name}: observations differ (missing {sorted(lost)}, unexpected {sorted(added)})")
    check(
        differing == 0, f"all {len(set(we) & set(ge))} shared entities have exactly the expected type and observations"
    )
    lost, added = wr - gr, gr - wr
    check(not lost, f"no relation missing (missing: {sorted(lost)[:12]})")
    check(not added, f"no unexpected or repeated relation (extra: {sorted(added)[:12]})")
    dangling = sorted(r for r in gr if r[0] not in ge or r[2] not in ge)
    check(not dangling, f"no relation names an entity that does not exist ({dangling[:6]})")


def obs_value(obs, prefix):
    for o in obs:
        if o.startswith(prefix):
            return o[len(prefix) :].strip()
    return None


def money(text):
    return int(text.replace("£", "").replace(",", "").split(".")[0])


def plan(init):
    """(new lead per open project Tom leads, new owner per account Tom owns, Tom's manager)."""
    ents, rels = init[0], set(init[1])
    staff = {f for f, t, to in rels if t == "works_at" and to == FIRM and f != TOM}
    manager = next(f for f, t, to in rels if t == "manages" and to == TOM)

    def is_open(project):
        return obs_value(ents[project][1], "Status: ") in ("active", "on hold")

    def rank(person):
        obs = ents[person][1]
        return (SENIORITY.index(obs_value(obs, "Role: ")), obs_value(obs, "Joined Harbourline: "))

    leads = {}
    for f, t, project in rels:
        if f == TOM and t == "leads" and is_open(project):
            team = sorted((p for p, t2, to in rels if t2 == "works_on" and to == project and p in staff), key=rank)
            leads[project] = team[0] if team else manager
    accounts = {}
    for f, t, company in rels:
        if f == TOM and t == "owns_account":
            led = [p for p in leads if (company, "commissioned", p) in rels]
            led.sort(key=lambda p: -money(obs_value(ents[p][1], "Contract value: ")))
            accounts[company] = leads[led[0]] if led else manager
    return leads, accounts, manager


def expected(init):
    ents = {n: [t, list(o)] for n, (t, o) in init[0].items()}
    rels = set(init[1])
    leads, accounts, manager = plan(init)
    for project, new in leads.items():
        rels -= {(TOM, "leads", project), (new, "works_on", project)}
        rels.add((new, "leads", project))
        ents[project][1].append(NOTE)
    for f, t, to in list(rels):
        if f == TOM and t == "works_on" and obs_value(ents[to][1], "Status: ") in ("active", "on hold"):
            rels.discard((f, t, to))
        elif f == TOM and t == "manages":
            rels.discard((f, t, to))
            rels.add((manager, "manages", to))
        elif f == TOM and t == "owns_account":
            rels.discard((f, t, to))
            rels.add((accounts[to], "owns_account", to))
        elif f == TOM and t == "owns":
            client = next(c for o, t2, c in init[1] if o == to and t2 == "for_client")
            rels.discard((f, t, to))
            rels.add((accounts[client], "owns", to))
        elif f == TOM and t in ("works_at", "member_of", "based_in"):
            rels.discard((f, t, to))
    rels.discard((manager, "manages", TOM))
    rels.add((TOM, "formerly_worked_at", FIRM))
    ents[TOM][1] = [o for o in ents[TOM][1] if not o.startswith(("Role: ", "Email: "))]
    ents[TOM][1].append(f"Role: Former consultant (left {DATE})")
    return ents, Counter(rels)


def main():
    path = os.environ.get("MEMORY_FILE")
    if not path or not Path(path).is_file():
        print("FAIL: MEMORY_FILE not set or not a file")
        return 1
    try:
        init = load(STATE)
    except (OSError, ValueError) as e:
        print(f"FAIL: initial state unreadable at {STATE}: {e}")
        return 1
    try:
        got = load(path)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        print(f"FAIL: the memory file cannot be read as the server reads it: {e}")
        return 1
    leads, accounts, manager = plan(init)
    check(
        leads == EXPECTED_LEADS and accounts == EXPECTED_ACCOUNTS,
        "sanity: the hand-over table matches the initial graph",
    )
    want = expected(init)
    ge, gr = got

    # 1. Targeted checks, for readable feedback.
    if not check(TOM in ge, f"{TOM} kept as an entity"):
        ge = {**ge, TOM: ["person", []]}
    for project, new in leads.items():
        leaders = sorted(f for f, t, to in gr if t == "leads" and to == project)
        check(leaders == [new], f"{project}: led by {new} only (found {leaders})")
        check(gr[(new, "works_on", project)] == 0, f"{project}: {new}'s works_on relation removed")
        check(project in ge and NOTE in ge[project][1], f"{project}: has '{NOTE}'")
    for f, t, project in init[1]:
        if f == TOM and t == "leads" and project not in leads:
            check(gr[(TOM, "leads", project)] == 1, f"{project} (not open): still led by {TOM}")
    for company, owner in accounts.items():
        owners = sorted(f for f, t, to in gr if t == "owns_account" and to == company)
        check(owners == [owner], f"{company}: account owned by {owner} only (found {owners})")
    check(
        not [r for r in gr if TOM in (r[0], r[2]) and r[1] in ("manages", "owns", "owns_account")],
        f"{TOM}: no manages/owns/owns_account relation left",
    )
    check(gr[(TOM, "formerly_worked_at", FIRM)] == 1, f"{TOM} formerly_worked_at {FIRM} (in that direction)")
    check(f"Role: Former consultant (left {DATE})" in ge[TOM][1], f"{TOM}: has the former-consultant role line")
    kept = [r for r in init[1] if r[0] == TOM and r[1] == "attended"]
    check(all(gr[r] == 1 for r in kept), f"{TOM}: all {len(kept)} attended relations kept")

    # 2. The whole graph.
    compare(want, got)

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
