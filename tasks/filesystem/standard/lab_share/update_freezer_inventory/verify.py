#!/usr/bin/env python3
"""Verifier for lab_share/update_freezer_inventory.

Replays lab/freezer_log.md on the untouched initial inventory: entries dated after the
reconciliation date, struck-through ones skipped, in order of date then entry number; a box move
takes only the rows stored in that box at that moment; relocations, disposals and shipments
change one row; every changed row's `updated` is the entry's date. The edited inventory must
equal the replay byte for byte (row order, untouched fields and quoted notes kept), the log may
differ only in the reconciliation date, and nothing else may change or appear.
"""

import os
import re
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "lab_share"
INVENTORY = "lab/freezer_inventory.csv"
LOG = "lab/freezer_log.md"
BACKUP = "lab/freezer_inventory_2024-05-31_backup.csv"
RECONCILED = re.compile(r"Inventory last reconciled: (\d{4}-\d{2}-\d{2})")
COLS = ["sample_id", "freezer", "rack", "box", "position", "status", "updated", "notes"]

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


def log_entries(text):
    """(date, number, action) of the live entries after the reconciliation date, in replay order."""
    since = RECONCILED.search(text).group(1)
    entries = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].isdigit():
            continue
        number, date, _by, action, _note = cells
        if action.startswith("~~") or date <= since:
            continue
        entries.append((date, int(number), action))
    entries.sort(key=lambda e: (e[0], e[1]))
    return entries


def replay(inventory, entries):
    """Rows as lists of raw fields (the notes field kept as written, quotes and all)."""
    lines = inventory.rstrip("\n").split("\n")
    rows = [ln.split(",", len(COLS) - 1) for ln in lines[1:]]
    by_id = {r[0]: r for r in rows}
    for date, _number, action in entries:
        if m := re.fullmatch(r"move box (\S+) to (\w+)/(\w+)", action):
            for r in rows:
                if r[3] == m.group(1) and r[5] == "stored":
                    r[1], r[2], r[6] = m.group(2), m.group(3), date
        elif m := re.fullmatch(r"relocate (\S+) to (\w+)/(\w+)/([\w-]+)/(\w+)", action):
            r = by_id[m.group(1)]
            r[1:5] = [m.group(2), m.group(3), m.group(4), m.group(5)]
            r[6] = date
        elif m := re.fullmatch(r"(dispose|ship) (\S+)(?: to .+)?", action):
            r = by_id[m.group(2)]
            r[5] = "disposed" if m.group(1) == "dispose" else "shipped"
            r[6] = date
        else:
            raise ValueError(f"unknown log action: {action}")
    return lines[0], rows


def fields(line):
    return dict(zip(COLS, line.split(",", len(COLS) - 1), strict=False)) if line else {}


def diagnose(got_by_id):
    """Name the traps of this log explicitly (the exact comparison already fails them)."""
    rp = fields(got_by_id.get("RP-240409-03-N"))
    check(
        rp.get("status") == "disposed" and (rp.get("freezer"), rp.get("rack")) == ("F1", "R2"),
        "RP-240409-03-N was disposed on 06-04 (logged late as #47), before its box moved on 06-05: it stays in F1/R2",
    )
    gone = fields(got_by_id.get("HN-240516-09-N"))
    check(
        (gone.get("freezer"), gone.get("rack"), gone.get("updated")) == ("F1", "R3", "2024-05-25"),
        "HN-240516-09-N (disposed in May) did not move with box B-2024-05",
    )
    struck = fields(got_by_id.get("HN-240402-03-C"))
    check(
        struck.get("status") == "stored", "the struck-through entry #43 was not applied (HN-240402-03-C still stored)"
    )
    relocated = fields(got_by_id.get("MC-240528-03-C"))
    check(
        (relocated.get("freezer"), relocated.get("rack"), relocated.get("box")) == ("F1", "R4", "B-2024-06"),
        "MC-240528-03-C, relocated to B-2024-06 on 06-12, did not move with its old box on 06-14",
    )
    split = got_by_id.get("HN-240402-08-N", "")
    check(split.endswith(',"split, 2 tubes"'), "a moved row's quoted note keeps its quotes (HN-240402-08-N)")


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

    log_text = init_files[LOG].decode("utf-8")
    entries = log_entries(log_text)
    header, rows = replay(init_files[INVENTORY].decode("utf-8"), entries)
    want_lines = [header] + [",".join(r) for r in rows]
    orig_lines = init_files[INVENTORY].decode("utf-8").rstrip("\n").split("\n")
    latest = max(e[0] for e in entries)
    check(len(entries) == 7 and latest == "2024-06-14", f"sanity: 7 entries to replay, latest 2024-06-14 ({entries})")
    changed_ids = [w.split(",")[0] for w, o in zip(want_lines, orig_lines, strict=True) if w != o]
    check(len(changed_ids) == 15, f"sanity: 15 rows change (got {len(changed_ids)})")

    # 1. The inventory.
    if check(INVENTORY in files, f"{INVENTORY} exists"):
        data = files[INVENTORY]
        got = data.decode("utf-8", errors="replace").split("\n")
        if got and got[-1] == "":
            got.pop()
        check(got[:1] == [header], "inventory header unchanged")
        check(len(got) == len(want_lines), f"no row added or removed ({len(want_lines) - 1} rows, got {len(got) - 1})")
        check(
            [ln.split(",")[0] for ln in got[1:]] == [ln.split(",")[0] for ln in want_lines[1:]],
            "rows keep their original order",
        )
        got_by_id = {ln.split(",")[0]: ln for ln in got[1:]}
        for want in want_lines[1:]:
            sid = want.split(",")[0]
            have = got_by_id.get(sid)
            if have is not None and have != want:
                what = "updated" if sid in changed_ids else "must stay unchanged"
                check(False, f"row {sid} ({what}): expected '{want}', got '{have}'")
        diagnose(got_by_id)
        body = "\n".join(want_lines)
        check(
            data == (body + "\n").encode("utf-8"),
            "inventory matches the replayed log byte for byte (quoted notes kept, final newline kept, no CRLF)",
        )

    # 2. The log: only the reconciliation date changes.
    want_log = RECONCILED.sub(f"Inventory last reconciled: {latest}", log_text, count=1)
    if check(LOG in files, f"{LOG} exists"):
        got_log = files[LOG].decode("utf-8", errors="replace")
        m = RECONCILED.search(got_log)
        check(m is not None and m.group(1) == latest, f"reconciliation date set to {latest} (got {m and m.group(1)})")
        check(files[LOG] == want_log.encode("utf-8"), "freezer_log.md otherwise unchanged, byte for byte")

    # 3. Nothing else.
    edited = {INVENTORY, LOG}
    check(files.get(BACKUP) == init_files[BACKUP], f"{BACKUP} untouched")
    missing = sorted(set(init_files) - set(files))
    extra = sorted(set(files) - set(init_files))
    changed = sorted(p for p in init_files if p in files and p not in edited and files[p] != init_files[p])
    check(not missing, f"no file deleted or moved, the old lock file included (missing: {missing[:5]})")
    check(not extra, f"no file created, no editor backup or lock file left (extra: {extra[:5]})")
    check(not changed, f"every other file unchanged (changed: {changed[:5]})")
    check(dirs == init_dirs, f"no folder created or removed (added: {sorted(dirs - init_dirs)[:4]})")

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
