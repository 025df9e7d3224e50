#!/usr/bin/env python3
"""Verifier for course_records/compute_final_grades.

Recomputes the expected grade report from the untouched initial state
(tasks/filesystem/states/course_records) and compares the agent's output
exactly, line for line (only the newline after the last row is optional).
Also checks that no existing file was changed and no stray file or folder
exists.
"""

import os
import re
import sys
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "course_records"
OUTPUTS = {"reports/final_grades.csv", "reports/grade_distribution.csv"}
WEIGHTS = {"hw": Fraction(40, 100), "mid": Fraction(25, 100), "final": Fraction(30, 100), "part": Fraction(5, 100)}
CUTS = [
    (93, "A"),
    (90, "A-"),
    (87, "B+"),
    (83, "B"),
    (80, "B-"),
    (77, "C+"),
    (73, "C"),
    (70, "C-"),
    (60, "D"),
    (0, "F"),
]
HEADER = "student_id,name,homework_avg,final_score,letter_grade"

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


def approved_exceptions():
    ex = {}
    text = (STATE / "ta_notes" / "late_exceptions.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("EXC-") and cells[5] == "APPROVED":
            ex[(cells[1], cells[2])] = int(cells[3])
    return ex


def r2(frac):
    d = Decimal(frac.numerator) / Decimal(frac.denominator)
    return d.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def letter(value):
    for cut, name in CUTS:
        if value >= cut:
            return name
    return "F"


def expected_rows():
    ex = approved_exceptions()
    rows = []
    for folder in sorted((STATE / "students").iterdir()):
        if not folder.is_dir() or not re.match(r"^\d{8}", folder.name):
            continue
        prof = parse_kv((folder / "profile.txt").read_text(encoding="utf-8"))
        if prof["status"] != "Enrolled":
            continue
        sid = prof["student id"]
        grades = parse_kv((folder / "grades.txt").read_text(encoding="utf-8"))
        adj = []
        for i in range(1, 5):
            raw = grades[f"hw{i}"]
            if raw == "missing":
                adj.append(0)
                continue
            m = re.match(r"^(\d+)(?:\s*\(late (\d+) days?\))?$", raw)
            score, late = int(m.group(1)), int(m.group(2) or 0)
            late = max(0, late - ex.get((sid, f"HW{i}"), 0))
            adj.append(max(0, score - 10 * late))
        hw_avg = Fraction(sum(sorted(adj)[1:]), 3)
        part = int(grades["participation"].split("/")[0])
        final = (
            WEIGHTS["hw"] * hw_avg
            + WEIGHTS["mid"] * int(grades["midterm"])
            + WEIGHTS["final"] * int(grades["final exam"])
            + WEIGHTS["part"] * part * 10
        )
        fr = r2(final)
        rows.append((sid, prof["name"], r2(hw_avg), fr, letter(fr)))
    rows.sort(key=lambda r: (-r[3], r[0]))
    return rows


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

    exp = expected_rows()
    check(len(exp) == 19, f"sanity: 19 enrolled students expected (got {len(exp)})")
    exp_lines = [HEADER] + [f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]}" for r in exp]

    # ---- final_grades.csv
    fg = root / "reports" / "final_grades.csv"
    if check(fg.is_file(), "reports/final_grades.csv exists"):
        got = read_lines(fg)
        check(got[:1] == [HEADER], f"final_grades.csv header is exactly '{HEADER}'")
        check(len(got) == len(exp_lines), f"final_grades.csv has {len(exp_lines) - 1} data rows (got {len(got) - 1})")
        got_ids = [ln.split(",")[0] for ln in got[1:]]
        exp_ids = [r[0] for r in exp]
        check(
            sorted(got_ids) == sorted(exp_ids),
            "final_grades.csv contains exactly the enrolled students (no withdrawn/template)",
        )
        check(got_ids == exp_ids, "rows sorted by final_score desc, ties by student_id asc")
        check(len(set(got_ids)) == len(got_ids), "no duplicate student rows")
        for want in exp_lines[1:]:
            sid = want.split(",")[0]
            have = [ln for ln in got[1:] if ln.split(",")[0] == sid]
            if have and have[0] != want:
                check(False, f"row for {sid}: expected '{want}', got '{have[0]}'")
        check(
            exact_text(fg, exp_lines),
            "final_grades.csv matches the expected report exactly (no quoting, padding or blank lines)",
        )

    # ---- grade_distribution.csv
    gd = root / "reports" / "grade_distribution.csv"
    counts = {name: 0 for _, name in CUTS}
    for r in exp:
        counts[r[4]] += 1
    exp_dist = ["letter_grade,count"] + [f"{name},{counts[name]}" for _, name in CUTS]
    if check(gd.is_file(), "reports/grade_distribution.csv exists"):
        got = read_lines(gd)
        check(got == exp_dist, "grade_distribution.csv has all 10 letters in policy order with correct counts")
        check(exact_text(gd, exp_dist), "grade_distribution.csv is exactly formatted (no spaces or blank lines)")
        if got != exp_dist:
            print("  expected:", exp_dist)
            print("  got     :", got)

    # ---- nothing else changed
    init = all_files(STATE)
    now = all_files(root)
    missing = sorted(init - now)
    extra = sorted(now - init - OUTPUTS)
    check(not missing, f"all original files still present (missing: {missing[:5]})")
    check(not extra, f"no stray files created (extra: {extra[:5]})")
    want_dirs = folders(STATE) | set()
    got_dirs = folders(root)
    check(
        got_dirs == want_dirs,
        f"no folder created or removed, not even an empty one (added: {sorted(got_dirs - want_dirs)[:5]}, "
        f"removed: {sorted(want_dirs - got_dirs)[:5]})",
    )
    changed = [rel for rel in sorted(init & now) if (root / rel).read_bytes() != (STATE / rel).read_bytes()]
    check(not changed, f"original files unchanged (changed: {changed[:5]})")

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
