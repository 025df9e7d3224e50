#!/usr/bin/env python3
"""Verifier for consultancy_crm/merge_duplicate_contacts.

Expected end state, derived from the untouched initial state: every person carrying the phone-import
source line whose email (case-insensitive) matches a person without it is merged into that person (role,
email and import line dropped, phone replacing the canonical's, other observations added unless present,
relations re-pointed with their direction kept, a `Merged duplicate: <name> (2026-09-01)` line added) and
deleted. Everything else in the graph is unchanged. Order of entities, relations and observations is free.
"""

import json
import os
import sys
from collections import Counter
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "consultancy_crm" / "memory.jsonl"
IMPORT = "Source: phone import 2026-08-20"
DATE = "2026-09-01"
# duplicate -> canonical (re-derived from the initial state as a self-check)
EXPECTED_MERGES = {
    "Sam Osei": "Samuel Osei",
    "Bea Lindqvist": "Beatrice Lindqvist",
    "Dr Ellen Baptiste": "Ellen Baptiste",
}
NOT_DUPLICATES = ["James Carter (Kestrel)", "Liv Grant"]

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


def email(obs):
    for o in obs:
        if o.startswith("Email: "):
            return o[len("Email: ") :].strip().lower()
    return None


def merges(entities):
    """duplicate -> canonical, by the task's rule."""
    existing = {}
    for name, (etype, obs) in entities.items():
        if etype == "person" and IMPORT not in obs and email(obs):
            existing[email(obs)] = name
    out = {}
    for name, (etype, obs) in entities.items():
        if etype == "person" and IMPORT in obs and email(obs) in existing:
            out[name] = existing[email(obs)]
    return out


def expected(init):
    ents = {n: [t, list(o)] for n, (t, o) in init[0].items()}
    rels = set(init[1])
    m = merges(ents)
    for dup, canon in sorted(m.items()):
        cobs = ents[canon][1]
        for o in ents[dup][1]:
            if o == IMPORT or o.startswith(("Role: ", "Email: ")):
                continue
            if o.startswith("Phone: "):
                cobs[:] = [x for x in cobs if not x.startswith("Phone: ")]
                cobs.append(o)
            elif o not in cobs:
                cobs.append(o)
        cobs.append(f"Merged duplicate: {dup} ({DATE})")
    for dup, canon in m.items():
        for f, t, to in list(rels):
            if dup in (f, to):
                rels.add((canon if f == dup else f, t, canon if to == dup else to))
    for dup in m:
        del ents[dup]
    return ents, Counter(r for r in rels if r[0] in ents and r[2] in ents)


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
    check(merges(init[0]) == EXPECTED_MERGES, "sanity: the duplicate table matches the initial graph")
    want = expected(init)
    ge, gr = got

    # 1. Targeted checks, for readable feedback.
    for dup, canon in EXPECTED_MERGES.items():
        check(dup not in ge, f"duplicate {dup!r} deleted")
        if check(canon in ge, f"canonical {canon!r} kept"):
            obs = ge[canon][1]
            check(
                f"Merged duplicate: {dup} ({DATE})" in obs,
                f"{canon}: has 'Merged duplicate: {dup} ({DATE})'",
            )
            phones = [o for o in obs if o.startswith("Phone: ")]
            wphones = [o for o in want[0][canon][1] if o.startswith("Phone: ")]
            check(phones == wphones, f"{canon}: phone is {wphones} (found {phones})")
            check(IMPORT not in obs, f"{canon}: no import source line copied")
            roles = [o for o in obs if o.startswith(("Role: ", "Email: "))]
            wroles = [o for o in want[0][canon][1] if o.startswith(("Role: ", "Email: "))]
            check(sorted(roles) == sorted(wroles), f"{canon}: keeps its own role and email {wroles}")
    for name in NOT_DUPLICATES:
        check(
            name in ge and ge[name] == init[0][name],
            f"{name!r} (imported, no matching email) left exactly as it was",
        )
    for dup, canon in EXPECTED_MERGES.items():
        for f, t, to in init[1]:
            if dup in (f, to):
                r = (canon if f == dup else f, t, canon if to == dup else to)
                check(gr[r] >= 1, f"relation of {dup} re-pointed with its direction: {r}")

    # 2. The whole graph.
    compare(want, got)

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
