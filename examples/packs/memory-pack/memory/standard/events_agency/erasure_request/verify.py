#!/usr/bin/env python3
"""Verifier for events_agency/erasure_request.

Expected end state, derived from the untouched initial state: every person whose email is the requester's
(case-insensitive) deleted with its relations; every observation elsewhere containing one of those
entities' names or the email (case-insensitive) deleted whole; look-alikes (same first name or surname)
and the employer untouched; `Data protection request DPR-2026-007` created with the counts, handled by the
data protection lead, free of her name and email. Nothing else may change; order is free.
"""

import json
import os
import sys
from collections import Counter
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "events_agency" / "memory.jsonl"
EMAIL = "joanna.whitlock@frostline.co.uk"
FIRM = "Lanternfield Events"
LOG = "Data protection request DPR-2026-007"
EXPECTED_ERASED = ["Jo Whitlock", "Joanna Whitlock"]
EXPECTED_OBS_DELETED = 6
LOOKALIKES = ["Joanna Price", "Peter Whitlock", "Whitlock Catering Ltd", "Frostline Refrigeration"]

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


def erased(ents):
    """The person entities that are the requester."""
    return sorted(
        n for n, (t, obs) in ents.items() if t == "person" and any(o.lower() == f"email: {EMAIL}" for o in obs)
    )


def mentions(obs, forms):
    low = obs.lower()
    return any(f in low for f in forms)


def dp_lead(ents, rels):
    leads = [
        p
        for p, t, c in rels
        if t == "works_at" and c == FIRM and any("data protection lead" in o.lower() for o in ents[p][1])
    ]
    return leads[0] if len(leads) == 1 else None


def expected(init):
    ents = {n: [t, list(o)] for n, (t, o) in init[0].items()}
    gone = erased(ents)
    forms = [EMAIL] + [n.lower() for n in gone]
    for name in gone:
        del ents[name]
    removed = 0
    for _name, (_t, obs) in ents.items():
        keep = [o for o in obs if not mentions(o, forms)]
        removed += len(obs) - len(keep)
        obs[:] = keep
    ents[LOG] = [
        "data_protection_request",
        [
            "Type: erasure (UK GDPR Article 17)",
            "Received: 2026-09-02",
            "Completed: 2026-09-04",
            f"Entities deleted: {len(gone)}",
            f"Observations deleted: {removed}",
        ],
    ]
    rels = {r for r in init[1] if r[0] in ents and r[2] in ents}
    rels.add((dp_lead(init[0], set(init[1])), "handled", LOG))
    return ents, Counter(rels), gone, removed, forms


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
    we, wr, gone, removed, forms = expected(init)
    lead = dp_lead(init[0], set(init[1]))
    check(
        gone == EXPECTED_ERASED and removed == EXPECTED_OBS_DELETED and lead == "Hannah Cole",
        "sanity: the requester's entities, the mentions and the data protection lead match the initial graph",
    )
    ge, gr = got

    # 1. Targeted checks, for readable feedback.
    for name in gone:
        check(name not in ge, f"{name!r} (her email) deleted")
    left = sorted(n for n, (_t, obs) in ge.items() for o in obs if mentions(o, forms))
    check(not left, f"no observation anywhere still mentions her (found on {left})")
    stray = sorted(r for r in gr if set(gone) & {r[0], r[2]})
    check(not stray, f"no relation still names her entities ({stray[:4]})")
    for name in LOOKALIKES:
        check(name in ge, f"look-alike {name!r} kept")
    if check(LOG in ge, f"{LOG!r} exists"):
        check(
            ge[LOG][0] == "data_protection_request", f"{LOG} has type 'data_protection_request' (found {ge[LOG][0]!r})"
        )
        for o in we[LOG][1]:
            key = o.split(": ", 1)[0] + ": "
            found = [x for x in ge[LOG][1] if x.startswith(key)]
            check(found == [o], f"{LOG}: {o!r} (found {found})")
        check(len(ge[LOG][1]) == len(we[LOG][1]), f"{LOG}: exactly {len(we[LOG][1])} observations")
        check(not any("whitlock" in o.lower() or "joanna" in o.lower() for o in ge[LOG][1]), f"{LOG}: holds no name")
    handlers = sorted(p for p, t, x in gr if t == "handled" and x == LOG)
    check(handlers == [lead], f"{LOG} handled by {lead} only (found {handlers})")
    for name in ("Cold Chain Summit 2026", "Mailing list: Cold Chain newsletter"):
        figures = sorted(
            o for o in ge.get(name, ["", []])[1] if o.startswith(("Registered delegates: ", "Subscribers: "))
        )
        wfig = sorted(o for o in we[name][1] if o.startswith(("Registered delegates: ", "Subscribers: ")))
        check(figures == wfig, f"{name}: aggregate figures unchanged {wfig} (found {figures})")

    # 2. The whole graph.
    compare((we, wr), got)

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
