#!/usr/bin/env python3
"""Verifier for team_project/incident_cross_reference.

Expected end state: a new file answer.txt in the working directory with exactly five
"key: value" lines (fixed keys, fixed order, one space after the colon; compared byte for byte, only the
newline after the last line is optional); every other file and folder unchanged.
"""

import os
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


EXPECTED = [
    ("on_call_primary", "Priya Nair"),
    ("fix_version", "2.8.3"),
    ("q2_cloud_approved_usd", "25107.50"),
    ("message_queue_adr", "ADR-009"),
    ("open_todos_for_on_call", "4"),
]

# Plausible wrong values, reported with a hint so failures are easy to read.
KNOWN_WRONG = {
    "on_call_primary": {
        "Marco Ferri": "rotation table only; the handoff-log swap was ignored",
        "Tomasz Wilk": "used the DRAFT rotation",
        "Lena Hoffmann": "secondary instead of primary",
    },
    "fix_version": {
        "2.8.2": "that release only shipped the stop-gap HBR-411",
        "v2.8.3": "must be the bare version number",
        "[2.8.3]": "must be the bare version number",
    },
    "q2_cloud_approved_usd": {
        "25107.5": "two decimals required",
        "26957.50": "pending/refunded rows were included",
        "25747.50": "the pending row was included",
        "26317.50": "the refunded row was included",
        "16608.04": "only rows spelled exactly 'Cloud' were summed",
        "16858.04": "only rows spelled exactly 'Cloud' or 'cloud' were summed",
        "24978.10": "the 'Cloud ' row with a trailing space was missed",
    },
    "message_queue_adr": {
        "ADR-003": "ADR-003 is superseded",
        "ADR-011": "ADR-011 is only proposed",
    },
    "open_todos_for_on_call": {
        "5": "counted an item merely mentioning the handle or another handle",
        "6": "counted ticked items",
    },
}


def check_answer(root):
    p = root / "answer.txt"
    if not p.is_file():
        fail("answer.txt is missing in the working directory")
    text = norm_text(p.read_bytes())
    lines = [ln.strip() for ln in text.split("\n")]
    if any(ln == "" for ln in lines):
        fail(f"answer.txt must not contain blank lines: {lines!r}")
    if len(lines) != len(EXPECTED):
        fail(f"answer.txt must have exactly {len(EXPECTED)} lines, found {len(lines)}")
    for i, (line, (key, value)) in enumerate(zip(lines, EXPECTED, strict=False), start=1):
        if ":" not in line:
            fail(f"line {i} is not 'key: value': {line!r}")
        k, v = line.split(":", 1)
        k, v = k.strip(), v.strip()
        if k != key:
            fail(f"line {i}: expected key {key!r}, found {k!r}")
        if v != value:
            hint = KNOWN_WRONG.get(key, {}).get(v, "")
            fail(f"line {i} ({key}): expected {value!r}, found {v!r}" + (f" ({hint})" if hint else ""))
        if not line.startswith(f"{key}: "):
            fail(f"line {i}: format must be '{key}: <value>' (one space after the colon): {line!r}")
        ok(f"{key} = {v}")
    body = "\n".join(f"{k}: {v}" for k, v in EXPECTED)
    if p.read_bytes() not in (body.encode("utf-8"), (body + "\n").encode("utf-8")):
        fail(
            "answer.txt must be exactly the five 'key: value' lines: one space after each colon, no other spaces, "
            "no blank lines, \\n line ends (the last one optional)"
        )
    ok("answer.txt is exactly formatted")


def check_rest(root):
    init_files, init_dirs = snapshot(STATE)
    files, dirs = snapshot(root)
    extra = sorted(set(files) - set(init_files) - {"answer.txt"})
    if extra:
        fail(f"unexpected new files: {extra}")
    missing = sorted(set(init_files) - set(files))
    if missing:
        fail(f"files missing or moved: {missing}")
    changed = sorted(p for p in init_files if files[p] != init_files[p])
    if changed:
        fail(f"files must not be modified: {changed}")
    if dirs != init_dirs:
        fail(f"folder structure changed: added {sorted(dirs - init_dirs)}, removed {sorted(init_dirs - dirs)}")
    ok(f"all {len(init_files)} original files unchanged, no stray files or folders")


def main():
    root = get_test_dir()
    check_answer(root)
    check_rest(root)
    print("PASS")
    sys.exit(0)


if __name__ == "__main__":
    main()
