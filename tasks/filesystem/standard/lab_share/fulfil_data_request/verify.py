#!/usr/bin/env python3
"""Verifier for lab_share/fulfil_data_request.

Re-derives the REQ-2024-05 delivery from the untouched initial state under data_policy.md: field
samples only, no rejected rows, do_suspect DO values blanked, nothing from aborted runs, the
embargoed reef_pilot site withheld, runs of April and May 2024 at the requested sites, depth
1 m and deeper, values copied as recorded. Checks outbox/REQ-2024-05/data.csv and README.txt
line for line, the one appended sharing_log.csv row and the request's Status line, byte for byte
(only the newline after a file's last line is optional), and that nothing else changed.
"""

import csv
import io
import os
import re
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "lab_share"
OUTBOX = "data_requests/outbox/REQ-2024-05"
DATA = f"{OUTBOX}/data.csv"
README = f"{OUTBOX}/README.txt"
LOG = "data_requests/sharing_log.csv"
REQUEST = "data_requests/REQ-2024-05_haugen.md"
HEADER = "sample_id,site,date,time_utc,depth_m,temp_c,do_mg_l"
REQUESTED_SITES = {"estuary_mouth", "marsh_creek", "reef_pilot"}
EMBARGOED = {"reef_pilot": "2025-01-01"}
MONTHS = {"2024-04", "2024-05"}

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


def delivery():
    """(data lines, contributing run folders, withheld sites)."""
    rows, runs, withheld = [], [], set()
    for folder in sorted((STATE / "fieldwork").iterdir()):
        m = re.fullmatch(r"(\d{4}-\d{2})-\d{2}_([a-z_]+)", folder.name)
        if not folder.is_dir() or not m or m.group(1) not in MONTHS or m.group(2) not in REQUESTED_SITES:
            continue
        site, date = m.group(2), folder.name[:10]
        if site in EMBARGOED:
            withheld.add(site)
            continue
        status = re.search(r"^Status:\s*(\S+)", (folder / "field_notes.md").read_text(encoding="utf-8"), re.M)
        if status and status.group(1).lower().startswith("aborted"):
            continue
        n = 0
        for r in csv.DictReader(io.StringIO((folder / "samples.csv").read_text(encoding="utf-8"))):
            if r["sample_type"] != "field" or r["qc_flag"] == "reject" or float(r["depth_m"]) < 1.0:
                continue
            do = "" if r["qc_flag"] == "do_suspect" else r["do_mg_l"]
            rows.append((date, r["time_utc"], r["sample_id"], site, r["depth_m"], r["temp_c"], do))
            n += 1
        if n:
            runs.append(folder.name)
    rows.sort()
    lines = [HEADER] + [",".join([sid, site, date, t, dep, temp, do]) for date, t, sid, site, dep, temp, do in rows]
    return lines, runs, sorted(withheld)


def read_lines(data):
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def exact(data, lines):
    body = "\n".join(lines)
    return data in (body.encode("utf-8"), (body + "\n").encode("utf-8"))


def main():
    root = os.environ.get("FILESYSTEM_TEST_DIR")
    if not root or not Path(root).is_dir():
        print("FAIL: FILESYSTEM_TEST_DIR not set or not a directory")
        return 1
    root = Path(root)
    if not STATE.is_dir():
        print(f"FAIL: initial state not found at {STATE}")
        return 1
    init_files, init_dirs = snapshot(STATE)
    files, dirs = snapshot(root)

    data_lines, runs, withheld = delivery()
    n = len(data_lines) - 1
    check(n == 13 and len(runs) == 3 and withheld == ["reef_pilot"], f"sanity: 13 rows from 3 runs (got {n}, {runs})")
    readme_lines = [
        "Request: REQ-2024-05",
        "Recipient: Ingrid Haugen, University of Bergen",
        "Prepared by: Tidewater Coastal Ecology Lab",
        "Runs: " + ", ".join(runs),
        f"Rows: {n}",
        "Withheld: " + (", ".join(f"{s} (embargoed until {EMBARGOED[s]})" for s in withheld) or "none"),
        "Licence: CC BY 4.0; cite as Tidewater Coastal Ecology Lab (2024)",
    ]

    # 1. data.csv
    if check(DATA in files, f"{DATA} exists"):
        got = read_lines(files[DATA])
        check(got[:1] == [HEADER], f"data.csv header is exactly '{HEADER}' (got {got[:1]})")
        ids = [ln.split(",")[0] for ln in got[1:]]
        check(not [i for i in ids if i.startswith("RP-")], "no sample from the embargoed reef_pilot site")
        check(not [i for i in ids if not re.fullmatch(r"[A-Z]{2}-\d{6}-\d{2}", i)], "no field blank or duplicate")
        want_ids = [ln.split(",")[0] for ln in data_lines[1:]]
        check(sorted(ids) == sorted(want_ids), f"exactly the {n} shareable samples (got {len(ids)}: {ids})")
        check(ids == want_ids or sorted(ids) != sorted(want_ids), "rows sorted by date, time_utc, sample_id")
        have = {ln.split(",")[0]: ln for ln in got[1:]}
        for want in data_lines[1:]:
            sid = want.split(",")[0]
            if sid in have and have[sid] != want:
                check(False, f"data.csv row {sid}: expected '{want}', got '{have[sid]}'")
        check(exact(files[DATA], data_lines), "data.csv matches byte for byte (values as recorded, no quoting)")

    # 2. README.txt
    if check(README in files, f"{README} exists"):
        got = read_lines(files[README])
        for i, want in enumerate(readme_lines):
            have = got[i] if i < len(got) else None
            if have != want:
                check(False, f"README.txt line {i + 1}: expected {want!r}, got {have!r}")
        check(exact(files[README], readme_lines), "README.txt is exactly the seven required lines")
    outbox_files = sorted(rel for rel in files if rel.startswith(OUTBOX + "/"))
    check(outbox_files == [README, DATA], f"the outbox folder holds exactly data.csv and README.txt ({outbox_files})")

    # 3. sharing_log.csv: the old rows untouched, one row appended
    log_lines = read_lines(init_files[LOG]) + [
        f"REQ-2024-05,Ingrid Haugen,University of Bergen,data.csv;README.txt,{n},aokafor"
    ]
    if check(LOG in files, f"{LOG} exists"):
        got = read_lines(files[LOG])
        check(got[:-1] == log_lines[:-1], "sharing_log.csv: the existing rows unchanged")
        check(got[-1:] == log_lines[-1:], f"sharing_log.csv: appended row is {log_lines[-1]!r} (got {got[-1:]})")
        check(exact(files[LOG], log_lines), "sharing_log.csv matches byte for byte (\\n line ends, no blank lines)")

    # 4. The request's status, and only that line
    want_req = init_files[REQUEST].decode("utf-8").replace("Status: open\n", "Status: fulfilled\n", 1)
    check(files.get(REQUEST) == want_req.encode("utf-8"), f"{REQUEST}: only the Status line changed, to fulfilled")

    # 5. Nothing else
    edited = {LOG, REQUEST}
    missing = sorted(set(init_files) - set(files))
    extra = sorted(set(files) - set(init_files) - {DATA, README})
    changed = sorted(p for p in init_files if p in files and p not in edited and files[p] != init_files[p])
    check(not missing, f"no file deleted or moved (missing: {missing[:5]})")
    check(not extra, f"no other file created (extra: {extra[:5]})")
    check(not changed, f"every other file unchanged, the other requests included (changed: {changed[:5]})")
    want_dirs = init_dirs | {OUTBOX}
    check(dirs == want_dirs, f"the only new folder is {OUTBOX} (added: {sorted(dirs - want_dirs)[:4]})")

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
