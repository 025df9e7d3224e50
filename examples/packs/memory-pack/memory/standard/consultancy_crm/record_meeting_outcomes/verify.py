#!/usr/bin/env python3
"""Verifier for consultancy_crm/record_meeting_outcomes.

Expected end state: the untouched initial state plus the 2026-09-15 Norcross steering committee (its
observations, `concerns` both Norcross projects, `attended` by exactly the six people present, the finance
director resolved from the graph to the entity without a phone-import line), Hannah Ibsen with her
employer, Mark Delaney's new role, the two projects' status / scope / next-committee observations, and the
scheduled 2026-12-08 meeting that `follows_up` it. Nothing else may change; order is free.
"""

import json
import os
import sys
from collections import Counter
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "consultancy_crm" / "memory.jsonl"
CLIENT = "Norcross Logistics"
MEETING = "Meeting 2026-09-15 Norcross steering committee"
NEXT = "Meeting 2026-12-08 Norcross steering committee"
PHASE2 = "Norcross Phase 2 network redesign"
SLOTTING = "Norcross warehouse slotting review"
HANNAH = "Hannah Ibsen"
IMPORT_PREFIX = "Source: phone import"

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


def finance_director(ents, rels):
    """The Norcross person whose role is Finance Director, ignoring phone-import duplicates."""
    found = [
        p
        for p, t, c in rels
        if t == "works_at"
        and c == CLIENT
        and "Role: Finance Director" in ents[p][1]
        and not any(o.startswith(IMPORT_PREFIX) for o in ents[p][1])
    ]
    return found[0] if len(found) == 1 else None


def expected(init):
    ents = {n: [t, list(o)] for n, (t, o) in init[0].items()}
    rels = set(init[1])
    fd = finance_director(ents, rels)
    ents[MEETING] = [
        "meeting",
        [
            "Date: 2026-09-15",
            "Format: on-site at Avonmouth",
            "Decision: Phase 2 network redesign paused until 2027-01-11",
            "Decision: Slotting review extended to include the Avonmouth cold store",
            "Action: Lena Novak to send the revised slotting plan by 2026-09-25",
            f"Action: {fd} to confirm the 2027 budget by 2026-10-30",
        ],
    ]
    ents[NEXT] = ["meeting", ["Date: 2026-12-08", "Format: on-site at Avonmouth", "Status: scheduled"]]
    ents[HANNAH] = ["person", ["Role: Head of Warehousing", "Email: hannah.ibsen@norcrosslogistics.co.uk"]]
    mark = ents["Mark Delaney"][1]
    mark[:] = [o for o in mark if not o.startswith("Role: ")] + ["Role: Chief Operating Officer"]
    p2 = ents[PHASE2][1]
    p2[:] = [o for o in p2 if o != "Status: active"] + ["Status: on hold (until 2027-01-11)"]
    ents[SLOTTING][1].append("Scope extended 2026-09-15: Avonmouth cold store included")
    for project in (PHASE2, SLOTTING):
        obs = ents[project][1]
        obs[:] = [o for o in obs if not o.startswith("Next steering committee: ")]
        obs.append("Next steering committee: 2026-12-08")
    for person in ("Victor Hale", "Mark Delaney", fd, HANNAH, "Tom Whitfield", "Lena Novak"):
        rels.add((person, "attended", MEETING))
    for m in (MEETING, NEXT):
        rels |= {(m, "concerns", PHASE2), (m, "concerns", SLOTTING)}
    rels |= {(NEXT, "follows_up", MEETING), (HANNAH, "works_at", CLIENT)}
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
    fd = finance_director(init[0], set(init[1]))
    check(
        fd == "Samuel Osei" and {(CLIENT, "commissioned", PHASE2), (CLIENT, "commissioned", SLOTTING)} <= set(init[1]),
        "sanity: the finance director and the two projects are found in the initial graph",
    )
    want = expected(init)
    ge, gr = got

    # 1. Targeted checks, for readable feedback.
    for name in (MEETING, NEXT, HANNAH):
        if check(name in ge, f"{name!r} exists"):
            check(ge[name][0] == want[0][name][0], f"{name!r} has type {want[0][name][0]!r} (found {ge[name][0]!r})")
            lost = Counter(want[0][name][1]) - Counter(ge[name][1])
            added = Counter(ge[name][1]) - Counter(want[0][name][1])
            check(
                not lost and not added, f"{name!r}: exact observations (missing {sorted(lost)}, extra {sorted(added)})"
            )
    attendees = sorted(p for p, t, m in gr if t == "attended" and m == MEETING)
    wanted = sorted(p for p, t, m in want[1] if t == "attended" and m == MEETING)
    check(attendees == wanted, f"attended by exactly {wanted} (found {attendees})")
    check(
        gr[(NEXT, "follows_up", MEETING)] == 1, "the 2026-12-08 meeting follows_up the 2026-09-15 one (that direction)"
    )
    check(gr[(HANNAH, "works_at", CLIENT)] == 1, f"{HANNAH} works_at {CLIENT}")
    for project in (PHASE2, SLOTTING):
        if project in ge:
            nxt = sorted(o for o in ge[project][1] if o.startswith(("Next steering committee: ", "Status: ")))
            wnxt = sorted(o for o in want[0][project][1] if o.startswith(("Next steering committee: ", "Status: ")))
            check(nxt == wnxt, f"{project}: status and next committee are {wnxt} (found {nxt})")
    if "Mark Delaney" in ge:
        roles = [o for o in ge["Mark Delaney"][1] if o.startswith("Role: ")]
        check(
            roles == ["Role: Chief Operating Officer"],
            f"Mark Delaney: one role, Chief Operating Officer (found {roles})",
        )

    # 2. The whole graph.
    compare(want, got)

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
