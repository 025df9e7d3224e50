#!/usr/bin/env python3
"""Verifier for office_desktop/quarantine_duplicate_files.

Expected end state: for every set of byte-identical non-empty files, the copy
with the earliest mtime (ties: ASCII-first relative path) stays in place and
every other copy is moved to duplicates/<original relative path> unchanged;
duplicates/manifest.csv lists them (duplicate,kept) sorted by duplicate, byte
for byte (quotes only around a field containing a comma; only the newline
after the last row is optional). Everything else must be untouched, and no
other folder (not even an empty one) may be created.
"""

import csv
import datetime
import hashlib
import io
import json
import os
import sys
from pathlib import Path

CATEGORY = "office_desktop"
STATES = Path(__file__).resolve().parents[3] / "states"
STATE_DIR = STATES / CATEGORY
TIMES_FILE = STATES / f"{CATEGORY}.times.json"
DEFAULT_TIME = "2025-01-01T00:00:00Z"  # what the runner gives unlisted files
MANIFEST = "duplicates/manifest.csv"

# duplicate -> kept (the verifier re-derives this from the state as a self-check)
EXPECTED = {
    "Documents/Invoices/2023/INV-1042_Northwind_2023-11-15.txt": "Downloads/invoice_INV-1042_northwind.txt",
    "Documents/Templates/meeting_agenda_template.md": "Desktop/agenda template (copy).md",
    "Downloads/Invoice INV-1042 Northwind (1).txt": "Downloads/invoice_INV-1042_northwind.txt",
    "Downloads/receipt_staples_2024-01-09.txt": "Documents/Receipts/2024/staples 01-09-2024.txt",
    "Downloads/statement_Mar2024.csv": "Documents/Finance/Statements/2024-03_statement.csv",
    "Mail/Archive/Re_ Q1 pricing (copy).txt": "Mail/Inbox/2024-01-08 Re_ Q1 pricing.txt",
}
# Look-alikes that must stay where they are.
LOOKALIKES = [
    "Documents/Invoices/2024/INV-1077_Acme (2).txt",  # differs only by trailing newline
    "Documents/Invoices/2024/INV-1077_Acme.txt",
    "Documents/Quotes/Acme_Quote_Q-5581_rev1.txt",  # differs by one line
    "Downloads/Acme_Quote_Q-5581.txt",
    "Desktop/notes.txt",
    "Downloads/notes.txt",  # same name, different content
    "Desktop/New Text Document.txt",
    "Documents/untitled.txt",  # empty files
]

failures = []


def check(cond, msg):
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def parse_utc(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)


def derive_expected(initial):
    times = json.loads(TIMES_FILE.read_text())
    groups = {}
    for rel, data in initial.items():
        if data:
            groups.setdefault(hashlib.sha256(data).hexdigest(), []).append(rel)
    result = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        keep = min(members, key=lambda r: (parse_utc(times.get(r, DEFAULT_TIME)), r.encode()))
        for m in members:
            if m != keep:
                result[m] = keep
    return result


def main():
    test_dir = os.environ.get("FILESYSTEM_TEST_DIR")
    if not test_dir or not Path(test_dir).is_dir():
        print("FAIL: FILESYSTEM_TEST_DIR is not set or not a directory")
        return 1
    root = Path(test_dir)
    if not STATE_DIR.is_dir() or not TIMES_FILE.is_file():
        print(f"FAIL: initial state or times file not found next to {STATE_DIR}")
        return 1
    initial = snapshot(STATE_DIR)
    actual = snapshot(root)

    check(derive_expected(initial) == EXPECTED, "verifier's expectation table matches the initial state")

    # 1. Duplicates moved with their relative path preserved, content intact.
    for dup in sorted(EXPECTED):
        target = "duplicates/" + dup
        check(dup not in actual, f"{dup} is no longer at its original place")
        if check(target in actual, f"{dup} moved to {target}"):
            check(actual[target] == initial[dup], f"{target} content unchanged")

    # 2. Canonical copies kept in place, unchanged.
    for keep in sorted(set(EXPECTED.values())):
        check(actual.get(keep) == initial[keep], f"canonical copy {keep} kept in place, unchanged")

    # 3. Look-alikes and empty files untouched.
    for rel in LOOKALIKES:
        check(actual.get(rel) == initial[rel], f"look-alike {rel} left in place, unchanged")
        check("duplicates/" + rel not in actual, f"look-alike {rel} not copied into duplicates/")

    # 4. Whole tree: every other file unchanged, nothing extra.
    expected_files = {}
    for rel, data in initial.items():
        expected_files[("duplicates/" + rel) if rel in EXPECTED else rel] = data
    changed = sorted(rel for rel, data in expected_files.items() if actual.get(rel) != data)
    check(not changed, f"every file is where it should be with original content (problems: {changed[:6]})")
    extra = sorted(set(actual) - set(expected_files) - {MANIFEST})
    check(not extra, f"no unexpected files (found: {extra[:6]})")
    dup_dir = root / "duplicates"
    if dup_dir.is_dir():
        want_dirs = set()
        for dup in EXPECTED:
            parts = ("duplicates/" + dup).split("/")[:-1]
            for i in range(2, len(parts) + 1):
                want_dirs.add("/".join(parts[:i]))
        got_dirs = {p.relative_to(root).as_posix() for p in dup_dir.rglob("*") if p.is_dir()}
        check(
            got_dirs == want_dirs,
            f"duplicates/ contains only the needed folders (extra: {sorted(got_dirs - want_dirs)[:4]})",
        )
    init_dirs = {p.relative_to(STATE_DIR).as_posix() for p in STATE_DIR.rglob("*") if p.is_dir()}
    outside = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()}
    outside = {d for d in outside if d != "duplicates" and not d.startswith("duplicates/")}
    check(
        outside == init_dirs,
        f"no folder created or removed outside duplicates/, not even an empty one (added: "
        f"{sorted(outside - init_dirs)[:4]}, removed: {sorted(init_dirs - outside)[:4]})",
    )

    # 5. Manifest.
    if check(MANIFEST in actual, f"{MANIFEST} exists"):
        text = actual[MANIFEST].decode("utf-8", errors="replace").replace("\r\n", "\n").strip("\n")
        lines = text.split("\n")
        check(lines[0].strip() == "duplicate,kept", f"manifest header is 'duplicate,kept' (got {lines[0]!r})")
        check("" not in [ln.strip() for ln in lines], "no blank lines in manifest")
        rows = [r for r in csv.reader(io.StringIO(text)) if r][1:]
        check(all(len(r) == 2 for r in rows), "every manifest row has 2 fields")
        rows = [[c.strip() for c in r] for r in rows]
        check(not any(c.startswith(("./", "/")) for r in rows for c in r), "paths have no leading ./ or /")
        check(len(rows) == len(EXPECTED), f"manifest has {len(EXPECTED)} rows (got {len(rows)})")
        got = {r[0]: r[1] for r in rows if len(r) == 2}
        for dup, keep in sorted(EXPECTED.items()):
            check(got.get(dup) == keep, f"manifest: {dup} -> {keep} (got {got.get(dup)!r})")
        want_order = sorted(EXPECTED, key=lambda s: s.encode())
        check([r[0] for r in rows] == want_order, "manifest rows sorted by duplicate (ASCII)")
        want = ["duplicate,kept"] + [
            ",".join(f'"{c}"' if "," in c else c for c in (dup, EXPECTED[dup])) for dup in want_order
        ]
        body = "\n".join(want)
        check(
            actual[MANIFEST] in (body.encode("utf-8"), (body + "\n").encode("utf-8")),
            "manifest is exactly the expected lines: no needless quotes, padding or blank lines, \\n line ends",
        )

    print()
    if failures:
        print(f"RESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("RESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
