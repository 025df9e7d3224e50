#!/usr/bin/env python3
"""Verifier for course_records/reconcile_roster.

Recomputes the roster/profile reconciliation from the untouched initial state
(tasks/filesystem/states/course_records) and checks the discrepancy report,
the corrected roster (both line for line; only the newline after the last row
is optional), the archived preliminary roster, and that nothing else changed.
"""

import csv
import os
import re
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "course_records"
ROSTER = "roster/roster_fall2024.csv"
PRELIM = "roster/roster_preliminary_2024-08-20.csv"
ARCHIVED = "roster/archive/roster_preliminary_2024-08-20.csv"
OUT_DISC = "roster/discrepancies.csv"
OUT_CORR = "roster/roster_corrected.csv"
DISC_HEADER = "student_id,issue,roster_value,profile_value"
FIELDS = ["name", "email", "cohort", "major", "status"]
# Sanity anchor: the discrepancies the state was built with.
KNOWN = {
    ("20220539", "cohort"),
    ("20230102", "name"),
    ("20230166", "status"),
    ("20230190", "major"),
    ("20230212", "no_folder"),
    ("20230258", "email"),
    ("20240117", "not_in_roster"),
}

failures = []


def check(cond, msg):
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def folders(base):
    return {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_dir()}


def all_files(root):
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def parse_kv(text):
    out = {}
    for line in text.splitlines():
        if line.strip().startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        out.setdefault(k.strip().lower(), v.strip())
    return out


def load_profiles():
    profs = {}
    for folder in sorted((STATE / "students").iterdir()):
        if folder.is_dir() and re.match(r"^\d{8}", folder.name):
            kv = parse_kv((folder / "profile.txt").read_text(encoding="utf-8"))
            profs[kv["student id"]] = {f: kv[f] for f in FIELDS}
    return profs


def load_roster():
    with open(STATE / ROSTER, encoding="utf-8", newline="") as fh:
        return {row["student_id"].strip(): {f: row[f].strip() for f in FIELDS} for row in csv.DictReader(fh)}


def expected():
    profs, roster = load_profiles(), load_roster()
    rows = []
    for sid in sorted(set(profs) | set(roster)):
        if sid not in roster:
            rows.append((sid, "not_in_roster", "", profs[sid]["name"]))
        elif sid not in profs:
            rows.append((sid, "no_folder", roster[sid]["name"], ""))
        else:
            for f in FIELDS:
                a, b = roster[sid][f], profs[sid][f]
                same = a.lower() == b.lower() if f == "email" else a == b
                if not same:
                    rows.append((sid, f, a, b))
    rows.sort(key=lambda r: (r[0], r[1]))
    disc = [DISC_HEADER] + [",".join(r) for r in rows]
    corr = ["student_id," + ",".join(FIELDS)] + [
        ",".join([sid] + [profs[sid][f] for f in FIELDS]) for sid in sorted(profs)
    ]
    return rows, disc, corr


def read_lines(path):
    """The file's lines as written (a final newline does not add an empty line)."""
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def exact_text(path, lines):
    """The file holds exactly these lines, each ended by \\n (only the newline after the last one may be missing)."""
    body = "\n".join(lines)
    return path.read_bytes() in (body.encode("utf-8"), (body + "\n").encode("utf-8"))


def main():
    root = os.environ.get("FILESYSTEM_TEST_DIR")
    if not root or not Path(root).is_dir():
        print("FAIL: FILESYSTEM_TEST_DIR not set or not a directory")
        return 1
    root = Path(root)

    rows, exp_disc, exp_corr = expected()
    check({(r[0], r[1]) for r in rows} == KNOWN, "sanity: expected discrepancy set derived from state")

    # ---- discrepancies.csv
    p = root / OUT_DISC
    if check(p.is_file(), f"{OUT_DISC} exists"):
        got = read_lines(p)
        check(got[:1] == [DISC_HEADER], f"discrepancies header is exactly '{DISC_HEADER}'")
        check(len(got) == len(exp_disc), f"{len(exp_disc) - 1} discrepancy rows (got {len(got) - 1})")
        for want in exp_disc[1:]:
            check(want in got, f"discrepancy row present: '{want}'")
        noise = [ln for ln in got[1:] if ln not in exp_disc]
        check(
            not noise, f"no false-positive discrepancy rows (e.g. case-only email or whitespace) (extra: {noise[:3]})"
        )
        check(
            exact_text(p, exp_disc),
            "discrepancies.csv sorted by student_id, issue, exactly as expected (no quoting, padding or blank lines)",
        )

    # ---- roster_corrected.csv
    p = root / OUT_CORR
    if check(p.is_file(), f"{OUT_CORR} exists"):
        got = read_lines(p)
        check(got[:1] == exp_corr[:1], "corrected roster header matches the registrar roster header")
        got_ids = [ln.split(",")[0] for ln in got[1:]]
        exp_ids = [ln.split(",")[0] for ln in exp_corr[1:]]
        check(
            sorted(got_ids) == sorted(exp_ids),
            "corrected roster has one row per student folder (late add in, no-folder student out, withdrawn kept)",
        )
        check(got_ids == exp_ids, "corrected roster sorted by student_id")
        bad = [ln for ln in got[1:] if ln not in exp_corr]
        check(not bad, f"corrected roster values come from profiles, trimmed (wrong rows: {bad[:3]})")
        check(exact_text(p, exp_corr), "roster_corrected.csv matches exactly (no quoting, padding or blank lines)")

    # ---- archive move
    check(not (root / PRELIM).exists(), f"{PRELIM} no longer in roster/")
    a = root / ARCHIVED
    if check(a.is_file(), f"{ARCHIVED} exists"):
        check(a.read_bytes() == (STATE / PRELIM).read_bytes(), "archived preliminary roster is unchanged")

    # ---- nothing else changed
    init = all_files(STATE) - {PRELIM}
    now = all_files(root)
    missing = sorted(init - now)
    extra = sorted(now - init - {OUT_DISC, OUT_CORR, ARCHIVED})
    check(not missing, f"all other original files still present (missing: {missing[:5]})")
    check(not extra, f"no stray files created (extra: {extra[:5]})")
    want_dirs = folders(STATE) | {"roster/archive"}
    got_dirs = folders(root)
    check(
        got_dirs == want_dirs,
        f"no folder created or removed, not even an empty one (added: {sorted(got_dirs - want_dirs)[:5]}, "
        f"removed: {sorted(want_dirs - got_dirs)[:5]})",
    )
    changed = [rel for rel in sorted(init & now) if (root / rel).read_bytes() != (STATE / rel).read_bytes()]
    check(not changed, f"original files unchanged, incl. {ROSTER} (changed: {changed[:5]})")
    dirs = sorted(p.relative_to(root).as_posix() for p in (root / "roster").rglob("*") if p.is_dir())
    check(dirs == ["roster/archive"], f"only roster/archive/ created under roster/ (dirs: {dirs})")

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
