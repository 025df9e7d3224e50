#!/usr/bin/env python3
"""Verifier for course_records/apply_late_exceptions.

Derives the expected edits from the untouched initial state
(tasks/filesystem/states/course_records): which grades.txt lines get an
[EXC-xx] tag, the exceptions_applied.csv content and the register footer.
Edited files are compared byte for byte, the CSV line for line (only the
newline after its last row is optional). Every other file must be
byte-identical and no stray file may exist.
"""

import os
import re
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "course_records"
REGISTER = "ta_notes/late_exceptions.md"
OUT = "ta_notes/exceptions_applied.csv"
HEADER = "ref,student_id,assignment,late_days,waived_days,penalty_points"
OLD_FOOTER = "Last updated 2024-12-02 (PS)."
NEW_FOOTER = "Last updated 2024-12-20 (approved exceptions applied to gradebook)."
KNOWN_REFS = ["EXC-01", "EXC-02", "EXC-03", "EXC-07"]

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


def exact_text(raw, lines):
    """The file holds exactly these lines, each ended by \\n (only the newline after the last one may be missing)."""
    body = "\n".join(lines)
    return raw in (body.encode("utf-8"), (body + "\n").encode("utf-8"))


def show(raw):
    return raw.decode("utf-8", errors="replace").split("\n")


def folders_by_id():
    res = {}
    for folder in (STATE / "students").iterdir():
        if folder.is_dir() and re.match(r"^\d{8}", folder.name):
            res[folder.name[:8]] = folder
    return res


def expected():
    folders = folders_by_id()
    text = (STATE / REGISTER).read_text(encoding="utf-8")
    edits, rows = {}, []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not cells[0].startswith("EXC-") or cells[5] != "APPROVED":
            continue
        ref, sid, hw, days = cells[0], cells[1], cells[2], int(cells[3])
        folder = folders[sid]
        prof = parse_kv((folder / "profile.txt").read_text(encoding="utf-8"))
        if prof["status"] == "Withdrawn":
            continue
        rel = (folder / "grades.txt").relative_to(STATE).as_posix()
        glines = edits.get(rel) or (STATE / rel).read_text(encoding="utf-8").split("\n")
        idx = [i for i, ln in enumerate(glines) if ln.startswith(hw + ":")][0]
        m = re.search(r"\(late (\d+) days?\)", glines[idx])
        late = int(m.group(1)) if m else 0
        glines[idx] = glines[idx] + f" [{ref}]"
        edits[rel] = glines
        waived = min(days, late)
        rows.append((ref, sid, hw, late, waived, 10 * (late - waived)))
    rows.sort()
    edited = {rel: "\n".join(lines).encode("utf-8") for rel, lines in edits.items()}
    return edited, [HEADER] + [",".join(str(x) for x in r) for r in rows]


def main():
    root = os.environ.get("FILESYSTEM_TEST_DIR")
    if not root or not Path(root).is_dir():
        print("FAIL: FILESYSTEM_TEST_DIR not set or not a directory")
        return 1
    root = Path(root)

    edits, exp_csv = expected()
    check(
        [ln.split(",")[0] for ln in exp_csv[1:]] == KNOWN_REFS,
        "sanity: approved, non-withdrawn exceptions derived from state",
    )

    # ---- edited gradebooks: byte-for-byte the original plus " [EXC-xx]" at the end of one line
    for rel, want in sorted(edits.items()):
        p = root / rel
        if check(p.is_file(), f"{rel} still exists"):
            got = p.read_bytes()
            tagged = [ln for ln in show(want) if "[EXC-" in ln]
            check(all(t in show(got) for t in tagged), f"{rel}: tagged line(s) {tagged} present")
            check(got == want, f"{rel}: only ' [EXC-..]' appended to that line, every other byte identical")

    # ---- csv: exact lines; only the newline after the last row is optional
    p = root / OUT
    if check(p.is_file(), f"{OUT} exists"):
        raw = p.read_bytes()
        got = show(raw)
        check(got[:1] == [HEADER], f"header is exactly '{HEADER}'")
        for want in exp_csv[1:]:
            check(want in got, f"row present: '{want}'")
        check(
            exact_text(raw, exp_csv),
            "exceptions_applied.csv is exactly the header and the rows sorted by ref (no blank lines or spaces)",
        )

    # ---- register footer: the one line replaced, every other byte identical
    p = root / REGISTER
    if check(p.is_file(), f"{REGISTER} still exists"):
        orig = (STATE / REGISTER).read_text(encoding="utf-8")
        check(orig.count(OLD_FOOTER) == 1, "sanity: the old footer occurs once in the register")
        got = p.read_bytes()
        check(NEW_FOOTER in show(got) and OLD_FOOTER not in show(got), "register footer line replaced")
        check(
            got == orig.replace(OLD_FOOTER, NEW_FOOTER).encode("utf-8"),
            "register otherwise byte-for-byte unchanged (table rows and statuses intact)",
        )

    # ---- nothing else changed
    init = all_files(STATE)
    now = all_files(root)
    missing = sorted(init - now)
    extra = sorted(now - init - {OUT})
    check(not missing, f"all original files still present (missing: {missing[:5]})")
    check(not extra, f"no stray files (extra: {extra[:5]})")
    want_dirs = folders(STATE) | set()
    got_dirs = folders(root)
    check(
        got_dirs == want_dirs,
        f"no folder created or removed, not even an empty one (added: {sorted(got_dirs - want_dirs)[:5]}, "
        f"removed: {sorted(want_dirs - got_dirs)[:5]})",
    )
    touched = set(edits) | {REGISTER}
    changed = [rel for rel in sorted((init & now) - touched) if (root / rel).read_bytes() != (STATE / rel).read_bytes()]
    check(not changed, f"no other file modified, e.g. pending/denied/withdrawn students (changed: {changed[:5]})")

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
