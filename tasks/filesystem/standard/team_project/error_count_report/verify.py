#!/usr/bin/env python3
"""Verifier for team_project/error_count_report.

Expected end state: reports/error_counts.csv with ERROR-level entry counts per (UTC date, service) for the
UTC dates 13-17 May 2024 (entries that fall on the 12th or the 18th in UTC are out of scope), compared byte
for byte (only the newline after the last row is optional); all original files untouched; no other new
files/folders.
"""

import datetime as dt
import json
import os
import re
import sys
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


SERVICES = ["api-gateway", "billing-worker", "notifier"]
HEADER = "date,service,error_count"

# Hand-checked expected report (also recomputed from the initial state below as a guard).
EXPECTED_ROWS = [
    "2024-05-13,api-gateway,3",
    "2024-05-13,notifier,3",
    "2024-05-14,api-gateway,3",
    "2024-05-14,billing-worker,1",
    "2024-05-14,notifier,1",
    "2024-05-15,api-gateway,6",
    "2024-05-15,billing-worker,7",
    "2024-05-15,notifier,3",
    "2024-05-16,billing-worker,2",
    "2024-05-16,notifier,2",
    "2024-05-17,api-gateway,3",
    "2024-05-17,billing-worker,1",
    "2024-05-17,notifier,1",
]
WEEK = ("2024-05-13", "2024-05-17")  # the report covers these UTC dates only

TEXT_ENTRY = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})\S*\s+([A-Z]+)\s")


def count_from_state(state_files, mode="correct"):
    """Recompute counts from the initial logs.

    mode: correct | file_date (group by file name date) | no_utc (notifier local date)
          | substring (any line containing 'error' case-insensitively) | with_critical
          | whole_files (also the entries whose UTC date falls outside the week)
    """
    counts = {}
    for rel, data in state_files.items():
        parts = rel.split("/")
        if len(parts) != 3 or parts[0] != "logs" or parts[1] not in SERVICES or not rel.endswith(".log"):
            continue
        svc = parts[1]
        file_date = re.search(r"(\d{4}-\d{2}-\d{2})", parts[2]).group(1)
        for line in data.decode("utf-8").splitlines():
            if not line.strip():
                continue
            if mode == "substring":
                if "error" in line.lower():
                    key = (file_date, svc)
                    counts[key] = counts.get(key, 0) + 1
                continue
            if svc == "notifier":
                rec = json.loads(line)
                level = rec["level"].upper()
                ts = dt.datetime.fromisoformat(rec["ts"])
                day = ts.date() if mode == "no_utc" else ts.astimezone(dt.UTC).date()
                day = day.isoformat()
            else:
                m = TEXT_ENTRY.match(line)
                if not m:
                    continue  # traceback / continuation line
                day, level = m.group(1), m.group(3)
            is_err = level == "ERROR" or (mode == "with_critical" and level == "CRITICAL")
            if not is_err:
                continue
            if mode == "file_date":
                day = file_date
            if mode != "whole_files" and not WEEK[0] <= day <= WEEK[1]:
                continue
            key = (day, svc)
            counts[key] = counts.get(key, 0) + 1
    return [f"{d},{s},{n}" for (d, s), n in sorted(counts.items())]


def check_report(root, state_files):
    recomputed = count_from_state(state_files)
    if recomputed != EXPECTED_ROWS:
        fail(f"internal: initial state does not match the expected report: {recomputed}")
    p = root / "reports" / "error_counts.csv"
    if not p.is_file():
        fail("reports/error_counts.csv is missing")
    raw = p.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        fail("CSV must not start with a byte-order mark")
    want = "\n".join([HEADER] + EXPECTED_ROWS)
    text = raw.decode("utf-8")
    if text in (want, want + "\n"):
        ok(f"header and all {len(EXPECTED_ROWS)} rows correct, in order, exactly formatted")
        return
    if "\r" in text:
        fail("lines must end with \\n, not \\r\\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline after the last row
    if lines[0] != HEADER:
        fail(f"header must be exactly {HEADER!r}, found {lines[0]!r}")
    ok("header")
    rows = lines[1:]
    if any(r.strip() == "" for r in rows):
        fail("CSV contains blank lines")
    if any(r != r.strip() or ", " in r or " ," in r for r in rows):
        fail("no spaces around values")
    if any('"' in r for r in rows):
        fail("CSV must not use quoting")
    for r in rows:
        if len(r.split(",")) != 3:
            fail(f"row does not have exactly 3 columns: {r!r}")
    # Diagnose the most likely mistakes.
    diagnoses = {
        "file_date": "grouped by the date in the file name instead of the entry timestamp",
        "no_utc": "notifier timestamps were not converted to UTC",
        "substring": "counted every line containing 'error'",
        "with_critical": "CRITICAL entries were counted",
        "whole_files": "entries whose UTC date falls outside 13-17 May were reported",
    }
    for mode, why in diagnoses.items():
        if rows == count_from_state(state_files, mode):
            fail(f"report is wrong: {why}")
    if sorted(rows) == sorted(EXPECTED_ROWS):
        fail("rows are correct but not sorted by date, then service")
    if any(r.endswith(",0") for r in rows):
        fail("rows with a zero count must be omitted")
    if len(rows) != len(set(rows)):
        fail("duplicate rows")
    missing = [r for r in EXPECTED_ROWS if r not in rows]
    extra = [r for r in rows if r not in EXPECTED_ROWS]
    fail(f"report rows differ: missing/wrong {missing}, unexpected {extra}")


def check_rest(root, init_files, init_dirs):
    files, dirs = snapshot(root)
    allowed_new = {"reports/error_counts.csv"}
    extra = sorted(set(files) - set(init_files) - allowed_new)
    if extra:
        fail(f"unexpected new files: {extra}")
    missing = sorted(set(init_files) - set(files))
    if missing:
        fail(f"files missing or moved: {missing}")
    changed = sorted(p for p in init_files if files[p] != init_files[p])
    if changed:
        fail(f"files must not be modified: {changed}")
    if dirs != init_dirs | {"reports"}:
        fail(
            f"unexpected folder structure: added {sorted(dirs - init_dirs - {'reports'})}, "
            f"removed {sorted(init_dirs - dirs)}"
        )
    ok(f"all {len(init_files)} original files unchanged, no stray files or folders")


def main():
    root = get_test_dir()
    init_files, init_dirs = snapshot(STATE)
    check_report(root, init_files)
    check_rest(root, init_files, init_dirs)
    print("PASS")
    sys.exit(0)


if __name__ == "__main__":
    main()
