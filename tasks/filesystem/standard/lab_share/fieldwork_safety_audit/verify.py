#!/usr/bin/env python3
"""Verifier for lab_share/fieldwork_safety_audit.

Re-derives the audit of the 2024 field runs from the untouched initial state: everyone aboard
needs a boat_safety certificate valid on the run date (completed on or before it, expiring on or
after it), the skipper also boat_skipper, and each run needs a confirmed booking of its boat on
its date. Crew lists mix handles and full names with parenthesised remarks (which may contain
commas); problems are reported by handle. admin/fieldwork_audit_2024.csv must match byte for byte
(only the newline after the last row is optional) and nothing else may change.
"""

import csv
import io
import os
import re
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "lab_share"
OUT = "admin/fieldwork_audit_2024.csv"
HEADER = "run_date,site,issue,detail"
COURSES = ("boat_safety", "boat_skipper")

failures = []


def check(cond, msg):
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def snapshot(root):
    files, dirs = {}, set()
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if p.is_dir():
            dirs.add(rel)
        elif p.is_file():
            files[rel] = p.read_bytes()
    return files, dirs


def table(rel):
    return list(csv.DictReader(io.StringIO((STATE / rel).read_text(encoding="utf-8"))))


def people(field, names):
    """Handles named in a Skipper:/Crew: value: split at commas outside parentheses, drop remarks."""
    out = []
    for part in re.split(r",(?![^()]*\))", field):
        person = re.sub(r"\([^()]*\)", "", part).strip()
        out.append(person[1:] if person.startswith("@") else names[person])
    return out


def certificate(records, handle, course, day):
    """None if valid on day, else 'missing' or 'expired'."""
    started = [r for r in records if r["handle"] == handle and r["course"] == course and r["completed"] <= day]
    if not started:
        return "missing"
    if any(r["expires"] >= day for r in started):
        return None
    return "expired"


def expected_rows():
    names = {m["name"]: m["handle"] for m in table("people/members.csv")}
    records = table("people/training_records.csv")
    bookings = table("admin/boat_bookings.csv")
    rows = []
    for folder in sorted((STATE / "fieldwork").iterdir()):
        m = re.fullmatch(r"(2024-\d{2}-\d{2})_([a-z_]+)", folder.name)
        if not folder.is_dir() or not m:
            continue
        day, site = m.groups()
        notes = (folder / "field_notes.md").read_text(encoding="utf-8")
        head = dict(re.findall(r"^(Skipper|Crew|Boat):[ \t]*(.*)$", notes, re.M))
        [skipper] = people(head["Skipper"], names)
        aboard = [skipper] + people(head["Crew"], names)
        for handle in aboard:
            problem = certificate(records, handle, "boat_safety", day)
            if problem:
                rows.append((day, site, f"boat_safety_{problem}", handle))
        problem = certificate(records, skipper, "boat_skipper", day)
        if problem:
            rows.append((day, site, f"boat_skipper_{problem}", skipper))
        boat = head["Boat"].strip()
        if not [b for b in bookings if b["date"] == day and b["boat"] == boat and b["status"] == "confirmed"]:
            rows.append((day, site, "no_booking", boat))
    rows.sort(key=lambda r: (r[0], r[2].encode(), r[3].encode()))
    return [HEADER] + [",".join(r) for r in rows]


def read_lines(data):
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def well_formed(lines):
    """Name malformed rows: wrong field count, unknown issue, a site that is not the run's, a name for a handle."""
    runs = {}
    for folder in (STATE / "fieldwork").iterdir():
        m = re.fullmatch(r"(2024-\d{2}-\d{2})_([a-z_]+)", folder.name)
        if folder.is_dir() and m:
            runs[m.group(1)] = m.group(2)
    issues = {f"{c}_{p}" for c in COURSES for p in ("missing", "expired")} | {"no_booking"}
    handles = {m["handle"] for m in table("people/members.csv")}
    bad = []
    for line in lines:
        cells = line.split(",")
        if len(cells) != 4:
            bad.append(f"{line} (expected 4 fields)")
        elif cells[0] not in runs or runs[cells[0]] != cells[1]:
            bad.append(f"{line} (no 2024 run {cells[0]}_{cells[1]})")
        elif cells[2] not in issues:
            bad.append(f"{line} (unknown issue {cells[2]!r})")
        elif cells[2] != "no_booking" and cells[3] not in handles:
            bad.append(f"{line} (detail must be a handle from members.csv, without @)")
    check(not bad, f"every row is well formed ({bad[:3]})")


def main():
    root = os.environ.get("FILESYSTEM_TEST_DIR")
    if not root or not Path(root).is_dir():
        print("FAIL: FILESYSTEM_TEST_DIR not set or not a directory")
        return 1
    root = Path(root)
    if not STATE.is_dir():
        print(f"FAIL: initial state not found at {STATE}")
        return 1

    want = expected_rows()
    check(len(want) == 13, f"sanity: 12 problems in the initial state (got {len(want) - 1})")
    for probe in (
        "2024-04-16,marsh_creek,boat_safety_missing,nhaddad",  # course completed after the run
        "2024-05-14,harbor_north,boat_safety_expired,jellis",  # aborted run, lapsed certificate
        "2024-05-28,marsh_creek,no_booking,Skiff 2",  # the only booking was cancelled
        "2024-06-11,estuary_mouth,boat_safety_expired,aokafor",  # the online refresher does not count
    ):
        check(probe in want, f"sanity: expectation holds {probe}")

    init_files, init_dirs = snapshot(STATE)
    files, dirs = snapshot(root)

    if check(OUT in files, f"{OUT} exists"):
        data = files[OUT]
        got = read_lines(data)
        check(got[:1] == [HEADER], f"header is exactly '{HEADER}' (got {got[:1]})")
        got_set, want_set = set(got[1:]), set(want[1:])
        for line in sorted(want_set - got_set):
            check(False, f"missing problem row: {line}")
        for line in sorted(got_set - want_set):
            check(False, f"row that is not a problem (or is wrongly written): {line}")
        check(len(got) == len(set(got)), "no duplicate rows")
        check(got_set != want_set or got == want, "rows sorted by run_date, then issue, then detail (ASCII)")
        body = "\n".join(want)
        check(
            data in (body.encode(), (body + "\n").encode()),
            "the audit matches byte for byte (no quoting, padding, CRLF or blank lines)",
        )
        well_formed(got[1:])

    missing = sorted(set(init_files) - set(files))
    extra = sorted(set(files) - set(init_files) - {OUT})
    changed = sorted(p for p in init_files if p in files and files[p] != init_files[p])
    check(not missing, f"no file deleted or moved (missing: {missing[:5]})")
    check(not extra, f"no other file created (extra: {extra[:5]})")
    check(not changed, f"every existing file unchanged (changed: {changed[:5]})")
    check(
        dirs == init_dirs,
        f"no folder created or removed (added: {sorted(dirs - init_dirs)[:4]}, "
        f"removed: {sorted(init_dirs - dirs)[:4]})",
    )

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
