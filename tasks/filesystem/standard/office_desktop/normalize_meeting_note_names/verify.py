#!/usr/bin/env python3
"""Verifier for office_desktop/normalize_meeting_note_names.

Expected end state: every meeting-notes file directly in Documents/Meetings/
(.txt/.md, first line 'Meeting:') renamed to YYYY-MM-DD_<slug>.<ext> using the
date on its Date: line and the slug of its title, contents unchanged; the
non-notes files untouched; Documents/Meetings/INDEX.md lists all notes sorted
by date then file name, in exactly the described layout (byte for byte; only
the newline after the last row is optional); nothing else in the working
directory changed.
"""

import os
import re
import sys
from pathlib import Path

CATEGORY = "office_desktop"
STATE_DIR = Path(__file__).resolve().parents[3] / "states" / CATEGORY
MEET = "Documents/Meetings/"
INDEX = MEET + "INDEX.md"

# old name -> (new name, date, title)
EXPECTED = {
    "meeting notes 3-7-24.txt": ("2024-03-07_vendor-review-q2-pricing.txt", "2024-03-07", "Vendor Review - Q2 Pricing"),
    "2024.02.14 standup.txt": ("2024-02-14_ops-standup.txt", "2024-02-14", "Ops Standup"),
    "Team_Sync_14Feb2024.txt": (
        "2024-02-14_team-sync-warehouse-office.txt",
        "2024-02-14",
        "Team Sync (Warehouse + Office)",
    ),
    "notes-march 21 2024.md": ("2024-03-21_safety-walkthrough.md", "2024-03-21", "Safety Walkthrough"),
    # file name says 20240105 but the Date: line says January 4, 2024
    "mtg_20240105_vendor.txt": ("2024-01-04_northwind-quarterly-call.txt", "2024-01-04", "Northwind Quarterly Call"),
    "vendor call.txt": ("2024-04-09_acme-contract-renewal.txt", "2024-04-09", "Acme Contract Renewal"),
    # already correct -> stays
    "2024-01-22_ops-weekly.md": ("2024-01-22_ops-weekly.md", "2024-01-22", "Ops Weekly"),
    "Q1 planning (draft).txt": ("2024-01-30_q1-planning.txt", "2024-01-30", "Q1 Planning"),
    # upper-case extension must become lower-case
    "BoardPrep.TXT": ("2024-03-28_board-prep-budget-review.txt", "2024-03-28", "Board Prep & Budget Review"),
    # looks normalised but the slug is incomplete
    "2024-02-02_hiring-sync.md": (
        "2024-02-02_hiring-sync-seasonal-staff.md",
        "2024-02-02",
        "Hiring Sync \u2014 Seasonal Staff",
    ),
}
# Files in Documents/Meetings that are not meeting notes (must stay as they are).
NOT_NOTES = ["agenda_template.md", "standup 2024-02-21.txt.bak", "attachments/floorplan_notes.txt"]

failures = []


def check(cond, msg):
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def folders(base):
    return {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_dir()}


def snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def slug(title):
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def cells(line):
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [c.strip() for c in line.split("|")]


def main():
    test_dir = os.environ.get("FILESYSTEM_TEST_DIR")
    if not test_dir or not Path(test_dir).is_dir():
        print("FAIL: FILESYSTEM_TEST_DIR is not set or not a directory")
        return 1
    root = Path(test_dir)
    if not STATE_DIR.is_dir():
        print(f"FAIL: initial state not found at {STATE_DIR}")
        return 1
    initial = snapshot(STATE_DIR)
    actual = snapshot(root)

    # Self-check of the table against the state (titles, slugs, extensions).
    table_ok = True
    for old, (new, date, title) in EXPECTED.items():
        first = initial[MEET + old].decode("utf-8").split("\n", 1)[0]
        ext = old.rsplit(".", 1)[1].lower()
        table_ok &= first == "Meeting: " + title and new == f"{date}_{slug(title)}.{ext}"
    check(table_ok, "verifier table consistent with the initial state")

    # 1. Each notes file under its new name with unchanged content; old name gone.
    for old, (new, _, _) in sorted(EXPECTED.items()):
        if check(MEET + new in actual, f"'{old}' is now '{new}'"):
            check(actual[MEET + new] == initial[MEET + old], f"'{new}' content unchanged")
        if old != new:
            check(MEET + old not in actual, f"old name '{old}' no longer exists")

    # 2. Non-notes files untouched.
    for rel in NOT_NOTES:
        check(actual.get(MEET + rel) == initial[MEET + rel], f"non-notes file '{rel}' unchanged in place")

    # 3. Whole tree.
    expected_files = {}
    for rel, data in initial.items():
        if rel.startswith(MEET) and rel[len(MEET) :] in EXPECTED:
            expected_files[MEET + EXPECTED[rel[len(MEET) :]][0]] = data
        else:
            expected_files[rel] = data
    wrong = sorted(rel for rel, data in expected_files.items() if actual.get(rel) != data)
    check(not wrong, f"all other files present and unchanged (problems: {wrong[:6]})")
    extra = sorted(set(actual) - set(expected_files) - {INDEX})
    check(not extra, f"no unexpected files (found: {extra[:6]})")
    want_dirs = folders(STATE_DIR) | set()
    got_dirs = folders(root)
    check(
        got_dirs == want_dirs,
        f"no folder created or removed, not even an empty one (added: {sorted(got_dirs - want_dirs)[:5]}, "
        f"removed: {sorted(want_dirs - got_dirs)[:5]})",
    )
    meet_dirs = (
        sorted(p.relative_to(root).as_posix() for p in (root / MEET).rglob("*") if p.is_dir())
        if (root / MEET).is_dir()
        else []
    )
    check(meet_dirs == [MEET + "attachments"], f"no new folders in Documents/Meetings (got {meet_dirs})")

    # 4. INDEX.md
    if check(INDEX in actual, f"{INDEX} exists"):
        text = actual[INDEX].decode("utf-8", errors="replace").replace("\r\n", "\n")
        lines = [ln.rstrip() for ln in text.strip("\n").split("\n")]
        nonblank = [ln for ln in lines if ln.strip()]
        check(bool(nonblank) and nonblank[0].strip() == "# Meeting index", "first line is '# Meeting index'")
        table = [ln for ln in nonblank[1:]]
        check(all(ln.strip().startswith("|") for ln in table), "all lines after the heading are table rows")
        check(
            len(table) >= 2 and cells(table[0]) == ["Date", "Meeting", "File"],
            "table header is | Date | Meeting | File |",
        )
        check(
            len(table) >= 2
            and len(cells(table[1])) == 3
            and all(re.fullmatch(r":?-{3,}:?", c) for c in cells(table[1])),
            "second table line is the separator row",
        )
        rows = [cells(ln) for ln in table[2:]]
        want = sorted(((d, t, n) for n, d, t in EXPECTED.values()), key=lambda r: (r[0], r[2].encode()))
        want = [list(r) for r in want]
        check(len(rows) == len(want), f"index has {len(want)} data rows (got {len(rows)})")
        check(not any(r[2:3] == ["2024-01-01_example-title.txt"] for r in rows), "illustration row not copied")
        got_by_file = {r[2]: r for r in rows if len(r) == 3}
        for r in want:
            g = got_by_file.get(r[2])
            check(g == r, f"index row for {r[2]}: {r[0]} | {r[1]} (got {g})")
        check([r[2] for r in rows if len(r) == 3] == [r[2] for r in want], "index rows sorted by date, then file name")
        check(rows == want, "index rows match exactly")
        lines = ["# Meeting index", "", "| Date | Meeting | File |", "|------|---------|------|"]
        body = "\n".join(lines + [f"| {d} | {t} | {n} |" for d, t, n in want])
        check(
            actual[INDEX] in (body.encode("utf-8"), (body + "\n").encode("utf-8")),
            "INDEX.md is exactly the layout: heading, one blank line, table, no other lines, no padding, \\n line ends",
        )

    print()
    if failures:
        print(f"RESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("RESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
