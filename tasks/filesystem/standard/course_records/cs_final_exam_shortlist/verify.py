#!/usr/bin/env python3
"""Verifier for course_records/cs_final_exam_shortlist.

Recomputes the ranking of enrolled Computer Science majors from the untouched
initial state (tasks/filesystem/states/course_records) and checks
honors/shortlist.csv and honors/runner_up.txt line for line (only the
newline after the last line is optional), the byte-identical profile copies,
plus that no original file was moved or modified.
"""

import os
import re
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "course_records"
HEADER = "rank,student_id,name,email,final_exam,midterm"
# Sanity anchor for the state: expected top 3 and runner-up.
KNOWN_TOP = ["20230102", "20220187", "20230015"]
KNOWN_RUNNER_UP = "20230291"

failures = []


def check(cond, msg):
    print(("PASS: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)
    return cond


def all_files(root):
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def all_dirs(root):
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()}


def parse_kv(text):
    out = {}
    for line in text.splitlines():
        if line.strip().startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        out.setdefault(k.strip().lower(), v.strip())
    return out


def ranking():
    cands = []
    for folder in sorted((STATE / "students").iterdir()):
        if not folder.is_dir() or not re.match(r"^\d{8}", folder.name):
            continue
        prof = parse_kv((folder / "profile.txt").read_text(encoding="utf-8"))
        if prof["status"] != "Enrolled" or prof["major"] != "Computer Science":
            continue
        g = parse_kv((folder / "grades.txt").read_text(encoding="utf-8"))
        cands.append(
            {
                "sid": prof["student id"],
                "name": prof["name"],
                "email": prof["email"],
                "final": int(g["final exam"]),
                "mid": int(g["midterm"]),
                "profile": folder / "profile.txt",
            }
        )
    cands.sort(key=lambda c: (-c["final"], -c["mid"], c["sid"]))
    return cands


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

    ranked = ranking()
    top, runner = ranked[:3], ranked[3]
    check(
        [c["sid"] for c in top] == KNOWN_TOP and runner["sid"] == KNOWN_RUNNER_UP,
        "sanity: ranking derived from state matches the designed answer",
    )

    # ---- shortlist.csv
    exp = [HEADER] + [f"{i},{c['sid']},{c['name']},{c['email']},{c['final']},{c['mid']}" for i, c in enumerate(top, 1)]
    p = root / "honors" / "shortlist.csv"
    if check(p.is_file(), "honors/shortlist.csv exists"):
        got = read_lines(p)
        check(got[:1] == [HEADER], f"shortlist header is exactly '{HEADER}'")
        check(len(got) == 4, f"shortlist has exactly 3 data rows (got {len(got) - 1})")
        got_ids = [ln.split(",")[1] for ln in got[1:] if "," in ln]
        check(
            set(got_ids) == {c["sid"] for c in top},
            f"shortlist contains exactly the top-3 students {[c['sid'] for c in top]} (got {got_ids})",
        )
        check(got_ids == [c["sid"] for c in top], "shortlist rows in rank order")
        for want in exp[1:]:
            check(want in got, f"shortlist row exact: '{want}'")
        check(exact_text(p, exp), "shortlist.csv matches exactly (no quoting, padding or blank lines)")

    # ---- runner_up.txt
    p = root / "honors" / "runner_up.txt"
    if check(p.is_file(), "honors/runner_up.txt exists"):
        got = read_lines(p)
        check(exact_text(p, [runner["sid"]]), f"runner_up.txt contains only the line {runner['sid']} (got {got})")

    # ---- profile copies
    exp_copies = {f"honors/profiles/{c['sid']}_profile.txt": c["profile"] for c in top}
    for rel, src in sorted(exp_copies.items()):
        p = root / rel
        if check(p.is_file(), f"{rel} exists"):
            check(
                p.read_bytes() == src.read_bytes(),
                f"{rel} is byte-for-byte identical to {src.relative_to(STATE).as_posix()}",
            )

    # ---- nothing else created / changed
    init = all_files(STATE)
    now = all_files(root)
    outputs = {"honors/shortlist.csv", "honors/runner_up.txt"} | set(exp_copies)
    missing = sorted(init - now)
    extra = sorted(now - init - outputs)
    check(not missing, f"all original files still in place (missing: {missing[:5]})")
    check(not extra, f"no stray files (extra: {extra[:5]})")
    changed = [rel for rel in sorted(init & now) if (root / rel).read_bytes() != (STATE / rel).read_bytes()]
    check(not changed, f"original files unchanged (changed: {changed[:5]})")
    new_dirs = sorted(all_dirs(root) - all_dirs(STATE))
    check(
        new_dirs == ["honors", "honors/profiles"], f"only honors/ and honors/profiles/ created (new dirs: {new_dirs})"
    )

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
