#!/usr/bin/env python3
"""Verifier for events_agency/relocate_closed_venue_events.

Expected end state, derived from the untouched initial state: each event held at Castlefield Rooms on a
date within the closure moves to the smallest same-city venue with enough capacity that has no
`Unavailable:` range covering the date, with a venue-change note; a caterer that does not serve the new
venue is swapped for the first (alphabetically) that does; every registered delegate gets a notice per
moved event; Castlefield Rooms gets its closure note. Nothing else may change; order is free.
"""

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "events_agency" / "memory.jsonl"
CLOSED = "Castlefield Rooms"
FIRST, LAST = "2026-10-01", "2027-03-31"
TODAY = "2026-09-05"
UNAVAILABLE = re.compile(r"^Unavailable: (\d{4}-\d{2}-\d{2}) to (\d{4}-\d{2}-\d{2})\b")
# event -> new venue (re-derived from the initial state as a self-check)
EXPECTED_MOVES = {
    "Fintech Forum Autumn Meetup 2026": "Victoria Warehouse Hall",
    "Civic Data winter roundtable 2026": "Mill Yard Loft",
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


def value(obs, prefix):
    for o in obs:
        if o.startswith(prefix):
            return o[len(prefix) :].strip()
    return None


def available(obs, date):
    for o in obs:
        m = UNAVAILABLE.match(o)
        if m and m.group(1) <= date <= m.group(2):
            return False
    return True


def moves(ents, rels):
    """event -> new venue, by the task's rules."""
    city = value(ents[CLOSED][1], "City: ")
    out = {}
    for event, t, venue in sorted(rels):
        if t != "held_at" or venue != CLOSED:
            continue
        date = value(ents[event][1], "Date: ")
        if not (FIRST <= date <= LAST):
            continue
        need = int(value(ents[event][1], "Expected attendance: "))
        options = [
            (int(value(obs, "Capacity: ")), name)
            for name, (etype, obs) in ents.items()
            if etype == "venue"
            and name != CLOSED
            and value(obs, "City: ") == city
            and int(value(obs, "Capacity: ")) >= need
            and available(obs, date)
        ]
        out[event] = min(options)[1] if options else None
    return out


def expected(init):
    ents = {n: [t, list(o)] for n, (t, o) in init[0].items()}
    rels = set(init[1])
    caterers = {n for n, (t, obs) in ents.items() if t == "supplier" and "Service: catering" in obs}
    for event, venue in moves(init[0], rels).items():
        rels.discard((event, "held_at", CLOSED))
        rels.add((event, "held_at", venue))
        ents[event][1].append(f"Venue changed {TODAY}: {CLOSED} closed for refurbishment, moved to {venue}")
        for e, t, sup in sorted(rels):
            if e == event and t == "uses_supplier" and sup in caterers and (sup, "serves", venue) not in rels:
                rels.discard((e, t, sup))
                rels.add((e, t, min(c for c in caterers if (c, "serves", venue) in rels)))
        for person, t, e in init[1]:
            if t == "registered_for" and e == event:
                ents[person][1].append(f"Venue change notice pending: {event}")
    ents[CLOSED][1].append(f"Closed for refurbishment: {FIRST} to {LAST}")
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
    planned = moves(init[0], set(init[1]))
    check(planned == EXPECTED_MOVES, "sanity: the moves match the initial graph")
    want = expected(init)
    ge, gr = got

    # 1. Targeted checks, for readable feedback.
    for event, venue in planned.items():
        venues = sorted(v for e, t, v in gr if e == event and t == "held_at")
        check(venues == [venue], f"{event}: held_at {venue} only (found {venues})")
        note = f"Venue changed {TODAY}: {CLOSED} closed for refurbishment, moved to {venue}"
        check(event in ge and note in ge[event][1], f"{event}: has the note '{note}'")
        sups = sorted(s for e, t, s in gr if e == event and t == "uses_supplier")
        wsups = sorted(s for e, t, s in want[1] if e == event and t == "uses_supplier")
        check(sups == wsups, f"{event}: suppliers are {wsups} (found {sups})")
        for person, t, e in init[1]:
            if t == "registered_for" and e == event:
                notice = f"Venue change notice pending: {event}"
                check(person in ge and notice in ge[person][1], f"{person}: has '{notice}'")
    for event, t, venue in init[1]:
        if t == "held_at" and venue == CLOSED and event not in planned:
            check(gr[(event, "held_at", CLOSED)] == 1, f"{event} (outside the closure): still held at {CLOSED}")
    closure = f"Closed for refurbishment: {FIRST} to {LAST}"
    check(CLOSED in ge and closure in ge[CLOSED][1], f"{CLOSED}: has '{closure}'")

    # 2. The whole graph.
    compare(want, got)

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
