#!/usr/bin/env python3
"""Verifier for course_records/organize_by_major.

Derives the expected layout from the untouched initial state
(tasks/filesystem/states/course_records): every enrolled student folder must
sit under students/<major_slug>/, withdrawn ones under students/withdrawn/,
with byte-identical contents; students/index.csv must match exactly, line for
line; the README must be its original bytes plus exactly one appended line
(only the newline after it is optional); nothing else may change.
"""

import os
import re
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "course_records"
HEADER = "group,student_id,name,path"
README_LINE = "Reorganized by major on 2024-12-20; see index.csv."

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


def expected_groups():
    """folder name -> (group, student_id, name)"""
    res = {}
    for folder in sorted((STATE / "students").iterdir()):
        if not folder.is_dir() or not re.match(r"^\d{8}", folder.name):
            continue
        prof = parse_kv((folder / "profile.txt").read_text(encoding="utf-8"))
        if prof["status"] == "Withdrawn":
            group = "withdrawn"
        else:
            group = prof["major"].strip().lower().replace(" ", "_")
        res[folder.name] = (group, prof["student id"], prof["name"])
    return res


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

    groups = expected_groups()
    check(len(groups) == 20, f"sanity: 20 student folders in initial state (got {len(groups)})")
    group_names = sorted({g for g, _, _ in groups.values()})
    check(
        group_names
        == ["computer_science", "data_science", "electrical_engineering", "mathematics", "physics", "withdrawn"],
        f"sanity: expected group set ({group_names})",
    )

    # ---- build expected mapping of every initial file to its new location
    mapping = {}
    for rel in sorted(all_files(STATE)):
        parts = rel.split("/")
        if parts[0] == "students" and len(parts) >= 3 and parts[1] in groups:
            mapping[rel] = "/".join(["students", groups[parts[1]][0]] + parts[1:])
        else:
            mapping[rel] = rel

    # ---- student folders moved with identical content
    for folder, (group, _sid, _) in sorted(groups.items()):
        old = root / "students" / folder
        new = root / "students" / group / folder
        check(not old.exists(), f"{folder} no longer directly under students/")
        check(new.is_dir(), f"{folder} now at students/{group}/{folder}")

    _moved_bad, missing, changed = [], [], []
    for src, dst in mapping.items():
        p = root / dst
        if not p.is_file():
            missing.append(dst)
        elif p.read_bytes() != (STATE / src).read_bytes() and src != "students/README.txt":
            changed.append(dst)
    check(not missing, f"every original file present at its expected location (missing: {missing[:5]})")
    check(not changed, f"moved and untouched files are byte-identical (changed: {changed[:5]})")

    # ---- no stray files / directories
    expected_files = set(mapping.values()) | {"students/index.csv"}
    extra = sorted(all_files(root) - expected_files)
    check(not extra, f"no stray files (extra: {extra[:5]})")
    expected_dirs = set()
    for f in expected_files:
        parts = f.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            expected_dirs.add("/".join(parts[:i]))
    extra_dirs = sorted(all_dirs(root) - expected_dirs)
    check(not extra_dirs, f"no extra directories (extra: {extra_dirs[:5]})")
    top = sorted(p.name for p in (root / "students").iterdir() if p.is_dir())
    check(
        top == sorted(group_names + ["_template"]),
        f"students/ contains only the group folders and _template (got {top})",
    )

    # ---- index.csv
    idx = root / "students" / "index.csv"
    exp_rows = sorted((g, sid, name, f"{g}/{folder}") for folder, (g, sid, name) in groups.items())
    exp_lines = [HEADER] + [",".join(r) for r in exp_rows]
    if check(idx.is_file(), "students/index.csv exists"):
        got = read_lines(idx)
        check(got[:1] == [HEADER], f"index.csv header is exactly '{HEADER}'")
        check(len(got) == len(exp_lines), f"index.csv has {len(exp_lines) - 1} data rows (got {len(got) - 1})")
        got_ids = [ln.split(",")[1] for ln in got[1:] if ln.count(",") >= 3]
        check(got_ids == [r[1] for r in exp_rows], "index.csv rows sorted by group, then student_id")
        for want in exp_lines[1:]:
            if want not in got:
                check(False, f"index.csv missing row '{want}'")
        check(exact_text(idx, exp_lines), "index.csv matches exactly (no quoting, padding or blank lines)")

    # ---- README appended
    readme = root / "students" / "README.txt"
    if check(readme.is_file(), "students/README.txt still in place"):
        orig = (STATE / "students" / "README.txt").read_bytes()
        got = readme.read_bytes()
        check(got.startswith(orig), "README original text kept byte-for-byte")
        check(
            got[len(orig) :] in (README_LINE.encode(), (README_LINE + "\n").encode()),
            f"README has exactly the line {README_LINE!r} appended right after the original text (got "
            f"{got[len(orig) :][:120]!r})",
        )

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
