#!/usr/bin/env python3
"""Verifier for team_project/consolidate_april_meetings.

Expected end state: meetings/2024-04-meeting-notes.md with the seven April 2024 meetings in
chronological order (duplicate included once), each note's rest copied byte for byte (blank lines included;
only the newline at the very end of the document is optional), all eight April source files moved unchanged
to meetings/archive/2024-04/, and every other file untouched.
"""

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


OUT = "meetings/2024-04-meeting-notes.md"
SECTION = re.compile(r"^##\s*\d{4}[-/]\d{2}[-/]\d{2}")
ARCHIVE = "meetings/archive/2024-04"
TITLE = "# Meeting notes: April 2024"

# (ISO date, cited source file) in the required order.
MEETINGS = [
    ("2024-04-02", "2024-04-02-weekly-sync.md"),
    ("2024-04-09", "notes_apr9_planning.md"),
    ("2024-04-12", "incident-review-INC-2024-027.md"),
    ("2024-04-17", "standup-04-16.md"),
    ("2024-04-19", "Retro 2024-04-19.md"),
    ("2024-04-23", "2024-04-23 sprint planning.md"),
    ("2024-04-30", "weekly-sync-2024-04-30.md"),
]
DUPLICATE = "notes_apr9_planning (copy).md"
MOVED = [src for _, src in MEETINGS] + [DUPLICATE]
# Files that look similar but must stay in meetings/ untouched.
STAY = [
    "meetings/2023-04-18-kickoff.md",
    "meetings/2024-03-26-weekly-sync.md",
    "meetings/2024-05-07-weekly-sync.md",
    "meetings/2024-05-21-incident-review-INC-2024-031.md",
    "meetings/meeting-template.md",
    "meetings/drafts/2024-04-26-architecture-review-DRAFT.md",
    "meetings/1on1s/README.txt",
]


def section_lines(date, src, original):
    lines = original.split("\n")
    if not lines[0].startswith("# ") or not lines[1].startswith("Date:") or not lines[2].startswith("Attendees:"):
        fail(f"internal: unexpected layout of {src}")
    title = lines[0][2:].strip()
    return [f"## {date}: {title}", f"Source: {src}"] + lines[2:]


def expected_doc(init_files):
    if init_files[f"meetings/{DUPLICATE}"] != init_files["meetings/notes_apr9_planning.md"]:
        fail("internal: duplicate pair differs in the initial state")
    out = [TITLE]
    for date, src in MEETINGS:
        out += [""] + section_lines(date, src, norm_text(init_files[f"meetings/{src}"]))
    return out


def expected_bytes(init_files):
    """The document byte for byte: title, then per meeting a blank line, heading, Source line, verbatim rest."""
    out = TITLE + "\n"
    for date, src in MEETINGS:
        out += "\n" + "\n".join(section_lines(date, src, init_files[f"meetings/{src}"].decode("utf-8")))
    return out.encode("utf-8")


def nonblank(lines):
    return [ln.rstrip() for ln in lines if ln.strip()]


def check_doc(root, init_files):
    p = root / OUT
    if not p.is_file():
        fail(f"{OUT} is missing")
    got = norm_text(p.read_bytes()).lstrip("\ufeff").split("\n")
    want = expected_doc(init_files)
    g, w = nonblank(got), nonblank(want)
    if not g or g[0] != TITLE:
        fail(f"first line must be {TITLE!r}, found {g[0] if g else ''!r}")
    headings = [ln for ln in g if SECTION.match(ln)]
    want_headings = [ln for ln in w if SECTION.match(ln)]
    if len(headings) != len(want_headings):
        fail(f"expected {len(want_headings)} meeting sections, found {len(headings)}: {headings}")
    if sorted(headings) == sorted(want_headings) and headings != want_headings:
        fail(f"sections are not in chronological order: {headings}")
    for h, wh in zip(headings, want_headings, strict=False):
        if h != wh:
            fail(f"section heading: expected {wh!r}, found {h!r}")
    ok("title and all 7 section headings correct and in order")
    sources = [ln for ln in g if ln.startswith("Source:")]
    want_sources = [ln for ln in w if ln.startswith("Source:")]
    if sources != want_sources:
        fail(f"Source lines: expected {want_sources}, found {sources}")
    ok("Source lines correct (duplicate cited once, as the original)")
    if g != w:
        for i, (a, b) in enumerate(zip(w, g, strict=False)):
            if a != b:
                fail(f"document body differs at non-blank line {i + 1}: expected {a!r}, found {b!r}")
        fail(f"document has {len(g)} non-blank lines, expected {len(w)}")
    # Every section must be separated from the previous content by a blank line.
    for i, line in enumerate(got):
        if SECTION.match(line) and (i == 0 or got[i - 1].strip() != ""):
            fail(f"section heading {line!r} must be preceded by a blank line")
    want_bytes = expected_bytes(init_files)
    if p.read_bytes() not in (want_bytes, want_bytes[:-1]):
        for i, (a, b) in enumerate(zip(want_bytes.split(b"\n"), p.read_bytes().split(b"\n"), strict=False)):
            if a != b:
                fail(f"document differs from the verbatim copy at line {i + 1}: expected {a!r}, found {b!r}")
        fail("document differs from the verbatim copy in its number of lines (blank lines are copied too)")
    ok("section bodies copied verbatim, byte for byte")


def check_files(root, init_files, init_dirs):
    files, dirs = snapshot(root)
    expected = {}
    for rel, data in init_files.items():
        name = rel.split("/", 1)[1] if rel.startswith("meetings/") else None
        if rel.startswith("meetings/") and name in MOVED:
            expected[f"{ARCHIVE}/{name}"] = data
        else:
            expected[rel] = data
    for src in MOVED:
        if (root / "meetings" / src).exists():
            fail(f"meetings/{src} should have been moved to {ARCHIVE}/")
        if f"{ARCHIVE}/{src}" not in files:
            fail(f"{ARCHIVE}/{src} is missing")
        if files[f"{ARCHIVE}/{src}"] != init_files[f"meetings/{src}"]:
            fail(f"{ARCHIVE}/{src} must keep its original content")
    ok(f"all {len(MOVED)} April files archived unchanged")
    for rel in STAY:
        if rel not in files:
            fail(f"{rel} must stay where it is")
        if files[rel] != init_files[rel]:
            fail(f"{rel} must not be modified")
    ok("non-April notes, template, drafts untouched")
    extra = sorted(set(files) - set(expected) - {OUT})
    if extra:
        fail(f"unexpected files: {extra}")
    missing = sorted(set(expected) - set(files))
    if missing:
        fail(f"files missing: {missing}")
    changed = sorted(p for p in expected if files[p] != expected[p])
    if changed:
        fail(f"files must not be modified: {changed}")
    want_dirs = init_dirs | {"meetings/archive", ARCHIVE}
    if dirs != want_dirs:
        fail(f"unexpected folder structure: added {sorted(dirs - want_dirs)}, removed {sorted(want_dirs - dirs)}")
    ok("no stray files or folders; everything else unchanged")


def main():
    root = get_test_dir()
    init_files, init_dirs = snapshot(STATE)
    check_doc(root, init_files)
    check_files(root, init_files, init_dirs)
    print("PASS")
    sys.exit(0)


if __name__ == "__main__":
    main()
