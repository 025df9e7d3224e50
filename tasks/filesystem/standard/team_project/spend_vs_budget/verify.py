#!/usr/bin/env python3
"""Verifier for team_project/spend_vs_budget.

Expected end state: finance/spend_vs_budget_2024.csv (approved spend per budget category for Q1-Q3,
exact header, two-decimal values, sorted by budget_used_pct desc; compared byte for byte, only the newline
after the last row is optional), the stale Q2 export moved to finance/archive/, one line appended to
finance/README.md (its original bytes, then that line); everything else unchanged.
"""

import csv
import io
import os
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "team_project"


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def ok(msg):
    print(f"ok: {msg}")


def get_test_dir():
    d = os.environ.get("FILESYSTEM_TEST_DIR")
    if not d:
        fail("FILESYSTEM_TEST_DIR is not set")
    p = Path(d)
    if not p.is_dir():
        fail(f"{d} is not a directory")
    return p


def snapshot(root):
    """Map relative POSIX path -> bytes for every file; plus the set of directories."""
    files, dirs = {}, set()
    for dirpath, _dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        if rel_dir != ".":
            dirs.add(rel_dir)
        for name in filenames:
            p = Path(dirpath) / name
            files[p.relative_to(root).as_posix()] = p.read_bytes()
    return files, dirs


def norm_text(b):
    """Decode and normalise only trivial whitespace: CRLF, trailing spaces, trailing newlines."""
    t = b.decode("utf-8").replace("\r\n", "\n")
    return "\n".join(line.rstrip() for line in t.split("\n")).rstrip("\n")


OUT = "finance/spend_vs_budget_2024.csv"
STALE = "finance/expenses_2024_Q2 (old export).csv"
STALE_DEST = "finance/archive/expenses_2024_Q2 (old export).csv"
README = "finance/README.md"
README_LINE = "- spend_vs_budget_2024.csv: approved spend per category for Q1-Q3 2024 vs annual budget"
HEADER = "category,q1_usd,q2_usd,q3_usd,ytd_usd,annual_budget_usd,budget_used_pct"

EXPECTED_ROWS = [
    "Cloud,23146.53,25107.50,16891.70,65145.73,96000.00,67.86",
    "Hardware,2399.00,0.00,2899.00,5298.00,12000.00,44.15",
    "SaaS,2655.22,2742.85,2040.00,7438.07,24000.00,30.99",
    "Training,499.00,1329.99,0.00,1828.99,8000.00,22.86",
    "Travel,312.60,248.30,0.00,560.90,10000.00,5.61",
]


def q2(x):
    return str(Decimal(x).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def compute(init_files, statuses=("approved",), q2_file="finance/expenses_2024_Q2.csv", sort="pct", strict_case=False):
    """Recompute the report from the initial state (also used to name common mistakes)."""
    budget_rows = list(csv.DictReader(io.StringIO(init_files["finance/budget_2024.csv"].decode())))
    budget = {r["category"]: Decimal(r["annual_budget_usd"]) for r in budget_rows}
    canon = {k.lower(): k for k in budget}
    totals = {k: [Decimal(0)] * 3 for k in budget}
    ledgers = ["finance/expenses_2024_Q1.csv", q2_file, "finance/expenses_2024_Q3.csv"]
    for i, path in enumerate(ledgers):
        for r in csv.DictReader(io.StringIO(init_files[path].decode())):
            if r["status"] not in statuses:
                continue
            cat = r["category"] if strict_case else canon.get(r["category"].strip().lower())
            if cat not in totals:
                continue
            totals[cat][i] += Decimal(r["amount_usd"])
    rows = []
    for cat, qs in totals.items():
        ytd = sum(qs)
        pct = ytd / budget[cat] * 100
        rows.append((cat, qs, ytd, budget[cat], pct))
    if sort == "pct":
        rows.sort(key=lambda r: (-r[4], r[0]))
    elif sort == "ytd":
        rows.sort(key=lambda r: (-r[2], r[0]))
    return [",".join([cat] + [q2(q) for q in qs] + [q2(ytd), q2(b), q2(pct)]) for cat, qs, ytd, b, pct in rows]


def check_report(root, init_files):
    if compute(init_files) != EXPECTED_ROWS:
        fail("internal: initial state does not match the expected report")
    p = root / OUT
    if not p.is_file():
        fail(f"{OUT} is missing")
    raw = p.read_bytes()
    body = "\n".join([HEADER] + EXPECTED_ROWS).encode("utf-8")
    if raw in (body, body + b"\n"):
        ok("header and all 5 category rows correct, sorted by budget_used_pct desc, exactly formatted")
        return
    lines = norm_text(raw).lstrip("\ufeff").split("\n")
    if lines[0].strip() != HEADER:
        fail(f"header must be exactly {HEADER!r}, found {lines[0]!r}")
    ok("header")
    rows = [ln.strip() for ln in lines[1:]]
    if any(not r for r in rows):
        fail("CSV contains blank lines")
    if any('"' in r or "%" in r or "$" in r for r in rows):
        fail("no quoting, % or currency signs allowed")
    if rows == EXPECTED_ROWS:
        fail("rows are correct but the file is not formatted exactly (spaces, blank lines, BOM or line endings)")
    mistakes = {
        "pending rows were counted": dict(statuses=("approved", "pending")),
        "refunded rows were counted": dict(statuses=("approved", "refunded")),
        "the stale old Q2 export was used": dict(q2_file=STALE),
        "categories were matched case-sensitively": dict(strict_case=True),
        "rows sorted by ytd_usd instead of budget_used_pct": dict(sort="ytd"),
        "rows left in budget file order": dict(sort=None),
    }
    for why, kw in mistakes.items():
        if rows == compute(init_files, **kw):
            fail(f"report is wrong: {why}")
    if sorted(rows) == sorted(EXPECTED_ROWS):
        fail("rows are correct but in the wrong order")
    missing = [r for r in EXPECTED_ROWS if r not in rows]
    extra = [r for r in rows if r not in EXPECTED_ROWS]
    fail(f"report rows differ: expected but missing {missing}, unexpected {extra}")


def check_rest(root, init_files, init_dirs):
    files, dirs = snapshot(root)
    if (root / STALE).exists():
        fail(f"{STALE} must be moved to finance/archive/")
    if STALE_DEST not in files:
        fail(f"{STALE_DEST} is missing")
    if files[STALE_DEST] != init_files[STALE]:
        fail(f"{STALE_DEST} must keep its original content")
    ok("stale Q2 export archived unchanged")
    want_readme = init_files[README] + README_LINE.encode("utf-8")
    if files.get(README, b"") not in (want_readme, want_readme + b"\n"):
        fail(
            f"{README} must be its original bytes plus exactly one new last line {README_LINE!r} "
            "(no blank line before or after it)"
        )
    ok("README line appended")
    expected = {k: v for k, v in init_files.items() if k not in (STALE, README)}
    expected[STALE_DEST] = init_files[STALE]
    extra = sorted(set(files) - set(expected) - {OUT, README})
    if extra:
        fail(f"unexpected files: {extra}")
    missing = sorted(set(expected) - set(files))
    if missing:
        fail(f"files missing or moved: {missing}")
    changed = sorted(p for p in expected if files[p] != expected[p])
    if changed:
        fail(f"files must not be modified: {changed}")
    if dirs != init_dirs | {"finance/archive"}:
        fail(
            f"unexpected folder structure: added {sorted(dirs - init_dirs - {'finance/archive'})}, "
            f"removed {sorted(init_dirs - dirs)}"
        )
    ok("all other files unchanged, no stray files or folders")


def main():
    root = get_test_dir()
    init_files, init_dirs = snapshot(STATE)
    check_report(root, init_files)
    check_rest(root, init_files, init_dirs)
    print("PASS")
    sys.exit(0)


if __name__ == "__main__":
    main()
