#!/usr/bin/env python3
"""Verifier for office_desktop/q1_vendor_spend_summary.

Expected: Documents/Finance/q1_2024_vendor_spend.csv with the per-vendor Q1
2024 invoice counts/totals (INV-1077 counted once although saved twice,
INV-1079 void, INV-1042/INV-0998 are 2023, INV-S-3301 is April), sorted by
total descending plus a TOTAL row, byte for byte (only the newline after the
last row is optional); Desktop/Q1 budget tracker.md with the two TBD cells
filled in (spacing inside those two rows is free) and every other line and
the final newline byte-for-byte unchanged; nothing else touched.
"""

import csv
import io
import os
import re
import sys
from decimal import Decimal
from pathlib import Path

CATEGORY = "office_desktop"
STATE_DIR = Path(__file__).resolve().parents[3] / "states" / CATEGORY
OUTPUT = "Documents/Finance/q1_2024_vendor_spend.csv"
TRACKER = "Desktop/Q1 budget tracker.md"

# vendor -> list of (invoice no, amount) that belong to Q1 2024
Q1_INVOICES = {
    "Acme Industrial Supply": [("INV-1077", "4210.75")],
    "Northwind Traders": [("INV-1101", "2105.00"), ("INV-1120", "1990.40")],
    "Jimenez Cleaning Services": [("JC-2024-01", "680.00"), ("JC-2024-02", "680.00"), ("JC-2024-03", "720.00")],
    "Lumen Coffee Roasters": [("LC-101", "96.00"), ("LC-114", "96.00"), ("LC-127", "112.50")],
}
BUDGET = Decimal("13900.00")

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


def expected_rows():
    rows = []
    for vendor, invs in Q1_INVOICES.items():
        total = sum(Decimal(a) for _, a in invs)
        rows.append([vendor, str(len(invs)), f"{total:.2f}"])
    rows.sort(key=lambda r: -Decimal(r[2]))
    n = sum(len(v) for v in Q1_INVOICES.values())
    grand = sum(Decimal(a) for v in Q1_INVOICES.values() for _, a in v)
    rows.append(["TOTAL", str(n), f"{grand:.2f}"])
    return rows, grand


def table_cells(line):
    s = line.strip()
    if not (s.startswith("|") and s.endswith("|")):
        return None
    return [c.strip() for c in s[1:-1].split("|")]


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
    want_rows, grand = expected_rows()
    variance = BUDGET - grand

    # 1. Nothing else touched.
    changed = sorted(rel for rel, data in initial.items() if rel != TRACKER and actual.get(rel) != data)
    check(not changed, f"all other original files present and unchanged (problems: {changed[:6]})")
    extra = sorted(set(actual) - set(initial) - {OUTPUT})
    check(not extra, f"no files created besides {OUTPUT} (found: {extra[:6]})")
    want_dirs = folders(STATE_DIR) | set()
    got_dirs = folders(root)
    check(
        got_dirs == want_dirs,
        f"no folder created or removed, not even an empty one (added: {sorted(got_dirs - want_dirs)[:5]}, "
        f"removed: {sorted(want_dirs - got_dirs)[:5]})",
    )
    check(TRACKER in actual, f"{TRACKER} still exists (edited in place, not moved)")

    # 2. Summary CSV.
    if check(OUTPUT in actual, f"{OUTPUT} exists"):
        text = actual[OUTPUT].decode("utf-8-sig", errors="replace").replace("\r\n", "\n").strip("\n")
        lines = text.split("\n")
        check(lines[0].strip() == "vendor,invoices,total", f"header is 'vendor,invoices,total' (got {lines[0]!r})")
        check("" not in [ln.strip() for ln in lines], "no blank lines")
        rows = [[c.strip() for c in r] for r in csv.reader(io.StringIO(text)) if r][1:]
        check(all(len(r) == 3 for r in rows), "every row has 3 fields")
        check(
            all(re.fullmatch(r"\d+\.\d{2}", r[2]) for r in rows if len(r) == 3),
            "totals use plain two-decimal format (no $ or thousands separator)",
        )
        got = {r[0]: r for r in rows if len(r) == 3}
        for w in want_rows:
            g = got.get(w[0])
            check(g == w, f"row {','.join(w)} (got {','.join(g) if g else None})")
        for bad in ["Okafor Print & Sign", "Summit Office Furniture", "ACME INDUSTRIAL SUPPLY", "NORTHWIND TRADERS"]:
            check(bad not in got, f"no row for {bad!r}")
        check(len(rows) == len(want_rows), f"{len(want_rows)} data rows including TOTAL (got {len(rows)})")
        check(bool(rows) and rows[-1][:1] == ["TOTAL"], "TOTAL row is last")
        check([r[0] for r in rows] == [w[0] for w in want_rows], "vendor rows sorted by total, largest first")
        check(rows == want_rows, "summary CSV matches exactly")
        body = "\n".join(["vendor,invoices,total"] + [",".join(w) for w in want_rows])
        check(
            actual[OUTPUT] in (body.encode("utf-8"), (body + "\n").encode("utf-8")),
            "summary CSV is exactly the expected lines: no quoting, padding or blank lines, \\n line ends",
        )

    # 3. Budget tracker edit.
    if TRACKER in actual:
        # Split on \n only: the final newline and every other line must stay byte-for-byte as they were.
        before = initial[TRACKER].decode("utf-8").split("\n")
        after = actual[TRACKER].decode("utf-8", errors="replace").split("\n")
        check(
            len(after) == len(before),
            f"tracker has the same lines and final newline ({len(before)} pieces, got {len(after)})",
        )
        targets = {"Q1 invoiced (actual)": f"{grand:.2f}", "Variance": f"{variance:.2f}"}
        seen = {}
        for i, line in enumerate(before):
            cells = table_cells(line)
            if cells and cells[0] in targets:
                got_line = after[i] if i < len(after) else ""
                got_cells = table_cells(got_line)
                seen[cells[0]] = got_cells
                check(
                    got_cells is not None and len(got_cells) == 2 and got_cells[0] == cells[0],
                    f"tracker line {i + 1} is still the '{cells[0]}' table row",
                )
            else:
                check(
                    i < len(after) and after[i] == line,
                    f"tracker line {i + 1} byte-for-byte unchanged: {line.strip()[:50]!r}",
                )
        for label, value in targets.items():
            g = seen.get(label)
            check(
                bool(g) and len(g) == 2 and g[1] == value,
                f"tracker '{label}' = {value} (got {g[1] if g and len(g) == 2 else g})",
            )
        check("TBD" not in "\n".join(after), "no TBD left in the tracker")

    print()
    if failures:
        print(f"RESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("RESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
