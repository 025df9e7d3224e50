#!/usr/bin/env python3
"""Verifier for consultancy_crm/quarterly_account_review.

Expected end state, recomputed from the untouched initial state: one `Account review 2026-Q3: <company>`
per company Sofia Brandt owns that commissioned a project, with the six figures derived from the graph
(active projects and their value, distinct in-quarter meetings about the company's projects or
opportunities and the latest date, open opportunities and their value), `covers` its company and prepared
by Sofia; each such company's `Last account review:` replaced. Nothing else may change; order is free.
"""

import json
import os
import sys
from collections import Counter
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "consultancy_crm" / "memory.jsonl"
OWNER = "Sofia Brandt"
QUARTER, START, END = "2026-Q3", "2026-07-01", "2026-09-30"
EXPECTED_COMPANIES = ["Brightwell Housing Association", "Meridian Credit Union", "Severn Valley Water"]

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


def money(text):
    return int(text.replace("£", "").replace(",", ""))


def review_name(company):
    return f"Account review {QUARTER}: {company}"


def reviews(init):
    """company -> the six observations its review must have."""
    ents, rels = init[0], set(init[1])
    out = {}
    for owner, t, company in sorted(rels):
        if owner != OWNER or t != "owns_account":
            continue
        projects = sorted(p for c, t2, p in rels if c == company and t2 == "commissioned")
        if not projects:
            continue
        opps = sorted(o for o, t2, c in rels if t2 == "for_client" and c == company)
        active = [p for p in projects if "Status: active" in ents[p][1]]
        total = sum(money(value(ents[p][1], "Contract value: ")) for p in active)
        topics = set(projects) | set(opps)
        dates = {
            m: value(ents[m][1], "Date: ")
            for m, t2, x in rels
            if t2 == "concerns" and x in topics and ents[m][0] == "meeting"
        }
        in_q = sorted(d for d in dates.values() if d and START <= d <= END)
        open_opps = [o for o in opps if value(ents[o][1], "Stage: ") not in ("won", "lost")]
        pipeline = sum(money(value(ents[o][1], "Estimated value: ")) for o in open_opps)
        out[company] = [
            f"Quarter: {QUARTER}",
            "Active projects: " + ("; ".join(active) if active else "none"),
            f"Active contract value: £{total:,}",
            f"Meetings in quarter: {len(in_q)}",
            "Last meeting: " + (in_q[-1] if in_q else "none"),
            f"Open opportunities: {len(open_opps)} (£{pipeline:,})",
        ]
    return out


def expected(init):
    ents = {n: [t, list(o)] for n, (t, o) in init[0].items()}
    rels = set(init[1])
    for company, obs in reviews(init).items():
        ents[review_name(company)] = ["account_review", obs]
        rels |= {(review_name(company), "covers", company), (OWNER, "prepared", review_name(company))}
        cobs = ents[company][1]
        cobs[:] = [o for o in cobs if not o.startswith("Last account review: ")] + [f"Last account review: {QUARTER}"]
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
    want_reviews = reviews(init)
    check(sorted(want_reviews) == EXPECTED_COMPANIES, "sanity: the reviewed companies match the initial graph")
    want = expected(init)
    ge, gr = got

    # 1. Targeted checks, for readable feedback.
    made = sorted(n for n, (t, _o) in ge.items() if n.startswith(f"Account review {QUARTER}") or t == "account_review")
    wmade = sorted(n for n, (t, _o) in want[0].items() if t == "account_review")
    check(made == wmade, f"account reviews are exactly {wmade} (found {made})")
    for company, obs in want_reviews.items():
        name = review_name(company)
        if not check(name in ge, f"{name!r} exists"):
            continue
        check(ge[name][0] == "account_review", f"{name!r} has type 'account_review' (found {ge[name][0]!r})")
        got_obs = ge[name][1]
        for o in obs:
            key = o.split(": ", 1)[0] + ": "
            found = [x for x in got_obs if x.startswith(key)]
            check(found == [o], f"{name}: {o!r} (found {found})")
        check(len(got_obs) == len(obs), f"{name}: exactly {len(obs)} observations (found {len(got_obs)})")
        check(gr[(name, "covers", company)] == 1, f"{name} covers {company}")
        check(gr[(OWNER, "prepared", name)] == 1, f"{OWNER} prepared {name}")
        if company in ge:
            last = [o for o in ge[company][1] if o.startswith("Last account review: ")]
            check(
                last == [f"Last account review: {QUARTER}"],
                f"{company}: last account review is {QUARTER} only (found {last})",
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
