#!/usr/bin/env python3
"""Verifier for lab_share/run_summary_report.

Recomputes the 2024 per-run and per-site water-quality summaries from the untouched initial state
(tasks/filesystem/states/lab_share) with exact arithmetic (fractions, round half up) and compares
the agent's two CSV files byte for byte (only the newline after the last row is optional). Every
other file must be unchanged and nothing else may be created, not even an empty folder.
"""

import csv
import io
import os
import re
import sys
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "lab_share"
RUN_OUT = "analysis/results/run_summary_2024.csv"
SITE_OUT = "analysis/results/site_summary_2024.csv"
RUN_HEADER = "run_date,site,n_samples,mean_temp_c,mean_salinity_psu,mean_do_mg_l,min_do_mg_l,hypoxic_samples"
SITE_HEADER = "site,runs,n_samples,mean_do_mg_l,hypoxic_samples"
HYPOXIA = Fraction(2)

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


def r2(value):
    d = Decimal(value.numerator) / Decimal(value.denominator)
    return str(d.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def status_of(notes):
    m = re.search(r"^Status:\s*(\S+)", notes, re.M)
    return m.group(1).lower() if m else ""


def runs():
    """(run_date, site, accepted sample rows) for every completed 2024 run, in date order."""
    out = []
    for folder in sorted((STATE / "fieldwork").iterdir()):
        m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})_([a-z_]+)", folder.name)
        if not folder.is_dir() or not m or not m.group(1).startswith("2024-"):
            continue
        if status_of((folder / "field_notes.md").read_text(encoding="utf-8")).startswith("aborted"):
            continue
        rows = list(csv.DictReader(io.StringIO((folder / "samples.csv").read_text(encoding="utf-8"))))
        used = [r for r in rows if r["sample_type"] == "field" and r["qc_flag"] != "reject"]
        out.append((m.group(1), m.group(2), used))
    out.sort(key=lambda r: (r[0], r[1]))
    return out


def do_values(rows):
    return [Fraction(r["do_mg_l"]) for r in rows if r["do_mg_l"].strip() and r["qc_flag"] != "do_suspect"]


def mean(values):
    return sum(values, Fraction(0)) / len(values)


def expected():
    run_lines, per_site = [RUN_HEADER], {}
    for date, site, rows in runs():
        do = do_values(rows)
        run_lines.append(
            ",".join(
                [
                    date,
                    site,
                    str(len(rows)),
                    r2(mean([Fraction(r["temp_c"]) for r in rows])),
                    r2(mean([Fraction(r["salinity_psu"]) for r in rows])),
                    r2(mean(do)),
                    r2(min(do)),
                    str(sum(1 for v in do if v < HYPOXIA)),
                ]
            )
        )
        s = per_site.setdefault(site, {"runs": 0, "n": 0, "do": []})
        s["runs"] += 1
        s["n"] += len(rows)
        s["do"].extend(do)
    site_lines = [SITE_HEADER] + [
        f"{site},{s['runs']},{s['n']},{r2(mean(s['do']))},{sum(1 for v in s['do'] if v < HYPOXIA)}"
        for site, s in sorted(per_site.items())
    ]
    return run_lines, site_lines


def read_lines(data):
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def exact(data, lines):
    body = "\n".join(lines)
    return data in (body.encode("utf-8"), (body + "\n").encode("utf-8"))


def compare(name, data, want, key_cols):
    """Field-by-field diagnostics, then the exact byte comparison."""
    got = read_lines(data)
    check(got[:1] == want[:1], f"{name}: header is exactly '{want[0]}' (got {got[:1]})")
    check(len(got) == len(want), f"{name}: {len(want) - 1} data rows (got {len(got) - 1})")
    keys = [",".join(ln.split(",")[:key_cols]) for ln in got[1:]]
    want_keys = [",".join(ln.split(",")[:key_cols]) for ln in want[1:]]
    check(sorted(keys) == sorted(want_keys), f"{name}: exactly the expected rows (got {keys}, want {want_keys})")
    check(keys == want_keys, f"{name}: rows in the required order")
    have = dict(zip(keys, got[1:], strict=False))
    for key, line in zip(want_keys, want[1:], strict=True):
        if key in have and have[key] != line:
            check(False, f"{name}: row {key}: expected '{line}', got '{have[key]}'")
    check(exact(data, want), f"{name}: file matches byte for byte (no quoting, padding, CRLF or blank lines)")


def diagnose_runs(got):
    """Name the usual mistakes explicitly (the exact comparison above already fails them)."""
    dates = [ln.split(",")[0] for ln in got[1:]]
    check(not [d for d in dates if not d.startswith("2024-")], "no run from before 2024 in the run summary")
    check("2024-05-14" not in dates, "the aborted 2024-05-14 run is not in the run summary")
    rows = {ln.split(",")[0]: ln.split(",") for ln in got[1:]}
    if "2024-05-28" in rows and len(rows["2024-05-28"]) == 8:
        check(rows["2024-05-28"][7] == "2", "2024-05-28: 2.00 mg/L is not hypoxic (strictly below 2.00)")
    if "2024-04-30" in rows and len(rows["2024-04-30"]) == 8:
        check(rows["2024-04-30"][6] != "0.35", "2024-04-30: the do_suspect value 0.35 is not the minimum DO")
        check(rows["2024-04-30"][5] == "7.93", "2024-04-30: mean DO 7.925 rounds half up to 7.93")
    if "2024-05-16" in rows and len(rows["2024-05-16"]) == 8:
        check(rows["2024-05-16"][2] == "8", "2024-05-16: 8 samples (duplicate, blank and the rejected row left out)")


def main():
    root = os.environ.get("FILESYSTEM_TEST_DIR")
    if not root or not Path(root).is_dir():
        print("FAIL: FILESYSTEM_TEST_DIR not set or not a directory")
        return 1
    root = Path(root)
    if not STATE.is_dir():
        print(f"FAIL: initial state not found at {STATE}")
        return 1

    run_lines, site_lines = expected()
    # Self-checks on the initial state: the traps this task is about are really there.
    check(len(run_lines) == 10, f"sanity: 9 completed 2024 runs (got {len(run_lines) - 1})")
    check(len(site_lines) == 5, f"sanity: 4 sites (got {len(site_lines) - 1})")
    check(
        "2024-04-30,estuary_mouth,9,10.52,24.13,7.93,7.32,0" in run_lines
        and "2024-05-16,harbor_north,8,12.33,32.21,7.16,6.10,0" in run_lines,
        "sanity: the exact half-up cases (7.925, 12.325) are in the expectation",
    )

    init_files, init_dirs = snapshot(STATE)
    files, dirs = snapshot(root)

    for rel, want, key_cols in ((RUN_OUT, run_lines, 2), (SITE_OUT, site_lines, 1)):
        if check(rel in files, f"{rel} exists"):
            compare(rel, files[rel], want, key_cols)
    if RUN_OUT in files:
        diagnose_runs(read_lines(files[RUN_OUT]))

    missing = sorted(set(init_files) - set(files))
    extra = sorted(set(files) - set(init_files) - {RUN_OUT, SITE_OUT})
    changed = sorted(p for p in init_files if p in files and files[p] != init_files[p])
    check(not missing, f"no original file deleted or moved (missing: {missing[:5]})")
    check(not extra, f"no other file created (extra: {extra[:5]})")
    check(not changed, f"original files unchanged (changed: {changed[:5]})")
    check(
        dirs == init_dirs,
        f"no folder created or removed (added: {sorted(dirs - init_dirs)[:5]}, "
        f"removed: {sorted(init_dirs - dirs)[:5]})",
    )

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
