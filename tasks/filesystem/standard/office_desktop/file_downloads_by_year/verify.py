#!/usr/bin/env python3
"""Verifier for office_desktop/file_downloads_by_year.

Checks that every loose file in Downloads/ (except lock files and partial
downloads) was moved to Filed/<YEAR>/<category>/<name> using the UTC year of
its modification time, that Filed/filing_log.csv lists them exactly (byte for
byte; only the newline after the last row is optional), and that nothing else
in the working directory changed, no other folder (not even an empty one)
was created.
"""

import csv
import io
import os
import sys
from pathlib import Path

CATEGORY = "office_desktop"
STATE_DIR = Path(__file__).resolve().parents[3] / "states" / CATEGORY

# original name -> (year, category); years are the UTC years of the mtimes in
# office_desktop.times.json (several differ from the year in the file name,
# sync_errors.log is 2024 in UTC but 2023 in US time zones).
EXPECTED = {
    "Acme_Quote_Q-5581.txt": ("2024", "documents"),
    "bank_export_20240402.csv": ("2024", "data"),
    "Fwd_ Lease renewal.eml": ("2023", "mail"),
    "Invoice INV-1042 Northwind (1).txt": ("2024", "documents"),
    "invoice_INV-1042_northwind.txt": ("2023", "documents"),
    "notes.txt": ("2023", "documents"),
    "order_export_2024-02.json": ("2024", "data"),
    "pto_calendar_2023.csv": ("2024", "data"),
    "receipt_staples_2024-01-09.txt": ("2024", "documents"),
    "statement_Mar2024.csv": ("2024", "data"),
    "sync_errors.log": ("2024", "logs"),
    "timesheet_export.CSV": ("2023", "data"),
}
SKIPPED = ["Downloads/~$Q1 budget.md", "Downloads/price_list_2024.csv.crdownload"]
LOG_PATH = "Filed/filing_log.csv"

failures = []


def check(cond, msg):
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def snapshot(root):
    out = {}
    for p in root.rglob("*"):
        if p.is_file():
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def dirs_under(root, sub):
    base = root / sub
    if not base.is_dir():
        return set()
    return {p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_dir()}


def norm_text(b):
    text = b.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))


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

    # Sanity: the expectation table matches the initial state.
    loose = sorted(k[len("Downloads/") :] for k in initial if k.startswith("Downloads/") and k.count("/") == 1)
    check(
        sorted(list(EXPECTED) + [s.split("/", 1)[1] for s in SKIPPED]) == loose,
        "verifier table covers exactly the loose Downloads files of the initial state",
    )

    # Build the expected end state.
    expected = {}
    for rel, data in initial.items():
        name = rel.split("/", 1)[1] if rel.startswith("Downloads/") else None
        if name in EXPECTED and rel.count("/") == 1:
            year, cat = EXPECTED[name]
            expected[f"Filed/{year}/{cat}/{name}"] = data
        else:
            expected[rel] = data

    # 1. Every moved file is at its target with unchanged content.
    for name, (year, cat) in sorted(EXPECTED.items()):
        target = f"Filed/{year}/{cat}/{name}"
        if check(target in actual, f"{name} filed at {target}"):
            check(actual[target] == initial["Downloads/" + name], f"{target} content is byte-identical to the original")
        check("Downloads/" + name not in actual, f"Downloads/{name} no longer in Downloads/")

    # 2. Skipped files and the subfolder are untouched.
    for rel in SKIPPED:
        check(actual.get(rel) == initial[rel], f"{rel} left in place, unchanged")
    for rel in sorted(k for k in initial if k.startswith("Downloads/old_installers/")):
        check(actual.get(rel) == initial[rel], f"{rel} left in place, unchanged")

    # 3. Every file outside Downloads/ is unchanged.
    untouched_bad = [rel for rel in initial if not rel.startswith("Downloads/") and actual.get(rel) != initial[rel]]
    check(not untouched_bad, f"all files outside Downloads/ unchanged (problems: {untouched_bad[:5]})")

    # 4. No stray files anywhere (only the expected files + the log).
    extra = sorted(set(actual) - set(expected) - {LOG_PATH})
    missing = sorted(set(expected) - set(actual))
    check(not extra, f"no unexpected files (found: {extra[:6]})")
    check(not missing, f"no missing files (missing: {missing[:6]})")

    # 5. Filed/ contains exactly the needed folders.
    want_dirs = set()
    for year, cat in EXPECTED.values():
        want_dirs.add(f"Filed/{year}")
        want_dirs.add(f"Filed/{year}/{cat}")
    got_dirs = dirs_under(root, "Filed")
    check(got_dirs == want_dirs, f"Filed/ has exactly the folders {sorted(want_dirs)} (got {sorted(got_dirs)})")
    all_dirs = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()}
    init_dirs = {p.relative_to(STATE_DIR).as_posix() for p in STATE_DIR.rglob("*") if p.is_dir()}
    stray = sorted(all_dirs - init_dirs - want_dirs - {"Filed"})
    check(not stray, f"no other folders created, not even empty ones (found: {stray[:6]})")

    # 6. The filing log.
    if check(LOG_PATH in actual, f"{LOG_PATH} exists"):
        text = norm_text(actual[LOG_PATH])
        lines = text.split("\n")
        check(lines[0] == "file,year,category", f"log header is exactly 'file,year,category' (got {lines[0]!r})")
        rows = list(csv.reader(io.StringIO(text)))[1:]
        rows = [r for r in rows if any(c.strip() for c in r)]
        want_rows = [[n, y, c] for n, (y, c) in sorted(EXPECTED.items(), key=lambda kv: kv[0].encode())]
        check(all(len(r) == 3 for r in rows), "every log row has exactly 3 fields")
        check(len(rows) == len(want_rows), f"log has {len(want_rows)} data rows (got {len(rows)})")
        check(
            [r[0] for r in rows] == [w[0] for w in want_rows],
            "log rows are the moved files in ASCII order of file name",
        )
        for w in want_rows:
            match = [r for r in rows if r and r[0] == w[0]]
            check(bool(match) and match[0] == w, f"log row for {w[0]} is {','.join(w)}")
        check(rows == want_rows, "log rows match exactly")
        want_lines = ["file,year,category"] + [",".join(f'"{c}"' if "," in c else c for c in w) for w in want_rows]
        body = "\n".join(want_lines)
        check(
            actual[LOG_PATH] in (body.encode("utf-8"), (body + "\n").encode("utf-8")),
            "log is exactly the expected lines: no needless quotes, padding or blank lines, \\n line ends",
        )

    print()
    if failures:
        print(f"RESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("RESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
