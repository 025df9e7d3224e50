#!/usr/bin/env python3
"""Verifier for office_desktop/extract_contacts_csv.

Checks Documents/Contacts/contacts_clean.csv row by row against the expected
merged contact list (newest source wins per field, fallbacks for missing
fields, exclusions, phone normalisation, sort by last name), then byte for
byte (quotes only around fields containing a comma; only the newline after the
last row is optional), and checks that no other file in the working
directory was created, changed or moved.
"""

import csv
import io
import os
import re
import sys
from pathlib import Path

CATEGORY = "office_desktop"
STATE_DIR = Path(__file__).resolve().parents[3] / "states" / CATEGORY
OUTPUT = "Documents/Contacts/contacts_clean.csv"
HEADER = ["name", "email", "company", "phone"]

# name, email, company, phone -- in the required order (last name, first name).
EXPECTED = [
    # 2024-03-01 mail has no signature -> company/phone fall back to 2024-02-12 mail
    ["Marcus Bell", "marcus.bell@acme-industrial.com", "Acme Industrial Supply", "312-555-0117"],
    # note 2024-04-02 is newer than the 2023-11-20 mail ("Jimenez Cleaning Svc")
    ["Rosa Jimenez", "rosa@jimenezcleaning.com", "Jimenez Cleaning Services", "971-555-0134"],
    # mail 2024-02-28 (0175) is newer than scratch note 2024-02-20 (0102)
    ["Aisha Khan", "aisha@khanpatelcpa.com", "Khan & Patel CPAs", "425-555-0175"],
    # mail 2024-03-14 has no phone -> phone from 2023-10-02 note; company has a comma
    ["Grace Liu", "grace.liu@lumencoffee.com", "Lumen Coffee Roasters, LLC", "206-555-0111"],
    ["Kevin Nguyen", "kevin.nguyen@summitofficefurniture.com", "Summit Office Furniture", "720-555-0156"],
    # mail 2023-12-05 ("Okafor Print & Sign") is newer than note 2023-10-02 ("Okafor Printing")
    ["Tom Okafor", "tom@okaforprint.com", "Okafor Print & Sign", "503-555-0128"],
    ["Daniel Ortiz", "dortiz@harborview.gov", "City of Harborview Permits Office", "360-555-0190"],
    # mail 2024-01-08 (0199) is newer than note 2023-10-02 (0142)
    ["Priya Raman", "priya.raman@northwindtraders.com", "Northwind Traders", "617-555-0199"],
    ["Elena Sokolova", "elena@brightline-logistics.com", "Brightline Logistics", "415-555-0163"],
]

# People / addresses that must NOT appear (cc-only, staff, automated, ignored csv).
FORBIDDEN = [
    "ben.carter@northwindtraders.com",
    "dana@harborpine.com",
    "sam@harborpine.com",
    "luis@harborpine.com",
    "noreply@quickbooks-notify.com",
    "notifications@slack-mail.com",
    "jon@fairbanks-freight.com",
    "praman@northwind-old.com",
]

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

    # 1. Nothing else changed, nothing moved, no stray files.
    changed = sorted(rel for rel, data in initial.items() if actual.get(rel) != data)
    check(not changed, f"all original files still present and unchanged (problems: {changed[:6]})")
    extra = sorted(set(actual) - set(initial) - {OUTPUT})
    check(not extra, f"no files created besides {OUTPUT} (found: {extra[:6]})")
    want_dirs = folders(STATE_DIR) | set()
    got_dirs = folders(root)
    check(
        got_dirs == want_dirs,
        f"no folder created or removed, not even an empty one (added: {sorted(got_dirs - want_dirs)[:5]}, "
        f"removed: {sorted(want_dirs - got_dirs)[:5]})",
    )

    # 2. Output file exists and parses.
    if not check(OUTPUT in actual, f"{OUTPUT} exists"):
        print("\nRESULT: FAIL")
        return 1
    raw = actual[OUTPUT]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        check(False, "output is valid UTF-8")
        print("\nRESULT: FAIL")
        return 1
    text = text.replace("\r\n", "\n").strip("\n")
    lines = text.split("\n")
    check("" not in [ln.strip() for ln in lines], "no blank lines inside the CSV")
    check(lines[0].strip() == ",".join(HEADER), f"header is exactly '{','.join(HEADER)}' (got {lines[0]!r})")
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    data = rows[1:]
    bad_width = [r for r in data if len(r) != 4]
    check(not bad_width, f"every row has exactly 4 fields (bad: {bad_width[:3]})")
    padded = [r for r in data for c in r if c != c.strip()]
    check(not padded, "no leading/trailing spaces inside fields")
    data = [[c.strip() for c in r] for r in data]

    # 3. Exclusions.
    emails = [r[1] if len(r) > 1 else "" for r in data]
    for bad in FORBIDDEN:
        check(bad not in [e.lower() for e in emails], f"{bad} is not listed")
    check(all(e == e.lower() for e in emails), "all emails are lowercase")
    check(len(set(e.lower() for e in emails)) == len(emails), "each email appears only once")

    # 4. Row-by-row content.
    check(len(data) == len(EXPECTED), f"{len(EXPECTED)} contact rows (got {len(data)})")
    by_email = {r[1].lower(): r for r in data if len(r) == 4}
    for exp in EXPECTED:
        got = by_email.get(exp[1])
        if not check(got is not None, f"row for {exp[1]} present"):
            continue
        check(got[0] == exp[0], f"{exp[1]}: name {exp[0]!r} (got {got[0]!r})")
        check(got[2] == exp[2], f"{exp[1]}: company {exp[2]!r} (got {got[2]!r})")
        check(got[3] == exp[3], f"{exp[1]}: phone {exp[3]!r} (got {got[3]!r})")

    # 5. Field formats.
    phone_re = re.compile(r"^\d{3}-\d{3}-\d{4}$")
    bad_phones = [r[3] for r in data if len(r) == 4 and r[3] and not phone_re.match(r[3])]
    check(not bad_phones, f"all phones use the NNN-NNN-NNNN format (bad: {bad_phones[:4]})")
    email_re = re.compile(r"^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]+$")
    bad_emails = [r[1] for r in data if len(r) == 4 and not email_re.match(r[1])]
    check(not bad_emails, f"all emails are bare lowercase addresses (bad: {bad_emails[:4]})")
    titles = [r[2] for r in data if len(r) == 4 and re.search(r"(?i)manager|sales|technician|accounts|cpa,", r[2])]
    check(not titles, f"company fields contain no job titles (bad: {titles[:4]})")

    # 6. Order.
    check(
        [r[1].lower() for r in data if len(r) == 4] == [e[1] for e in EXPECTED],
        "rows sorted by last name, then first name",
    )
    names = [r[0].split() for r in data if len(r) == 4 and r[0].split()]
    keys = [(n[-1].lower(), n[0].lower()) for n in names]
    check(keys == sorted(keys), "row order is non-decreasing by (last name, first name)")
    check(data == EXPECTED, "CSV rows match the expected list exactly")

    # 7. The quoting rule: the comma-containing company must be quoted, nothing else; exact bytes.
    check('"Lumen Coffee Roasters, LLC"' in text, "company containing a comma is double-quoted")
    want = [",".join(HEADER)] + [",".join(f'"{c}"' if "," in c else c for c in r) for r in EXPECTED]
    body = "\n".join(want)
    check(
        raw in (body.encode("utf-8"), (body + "\n").encode("utf-8")),
        "file is exactly the expected lines: only fields containing a comma quoted, no blank lines, \\n line ends",
    )

    print()
    if failures:
        print(f"RESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("RESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
