#!/usr/bin/env python3
"""Verifier for lab_share/merge_duplicate_references.

Expected end state, derived from the untouched initial state: in papers/estuary_hypoxia/
references.bib every entry whose normalised DOI (lower case, doi.org / dx.doi.org / doi: prefix
removed) repeats an earlier entry's is deleted with the blank line after it, the rest byte for
byte; in manuscript.md, supplement.md and figure_captions.md every citation of a removed key
names the kept key (whole, case-sensitive keys only), and a bracketed group naming a key twice
keeps the first; bib_dedup_log.csv lists the removals. Everything else, the frozen submitted copy
and the reading list included, must be unchanged, with no new file or folder.
"""

import os
import re
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "lab_share"
PAPER = "papers/estuary_hypoxia"
BIB = f"{PAPER}/references.bib"
DOCS = [f"{PAPER}/manuscript.md", f"{PAPER}/supplement.md", f"{PAPER}/figure_captions.md"]
LOG = f"{PAPER}/bib_dedup_log.csv"
PREFIXES = ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", "doi:")
CITE = re.compile(r"(?<![\w@])@([A-Za-z0-9_]+)(?![A-Za-z0-9_])")
GROUP = re.compile(r"\[([^\[\]]*@[^\[\]]*)\]")

# removed key -> kept key (re-derived from the bibliography as a self-check)
EXPECTED_REMOVED = {
    "Diaz2008Spreading": "diaz2008",
    "Kemp_etal_2009": "kemp2009",
    "testa2014": "TestaEtAl2014",
    "Scully2016": "scully2016",
    "scully_2016_grl": "scully2016",
}
# keys that must survive although they look like duplicates or share a prefix with a removed key
MUST_STAY = ["testa2014b", "Zhang2010natural", "ysi2021manual", "murphy2011corr", "zhang2010", "ysi2019manual"]

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


def normalise(doi):
    d = doi.strip().lower()
    for prefix in PREFIXES:
        if d.startswith(prefix):
            d = d[len(prefix) :]
    return d


def parse_bib(text):
    """[(key or None, raw doi or None, block)] for the blank-line separated blocks of the file."""
    out = []
    for block in text.rstrip("\n").split("\n\n"):
        m = re.match(r"@(\w+)\{([^,\n]+),", block)
        if not m or m.group(1).lower() == "comment":
            out.append((None, None, block))
            continue
        doi = re.search(r"^\s*doi\s*=\s*\{([^}]*)\}", block, re.M)
        out.append((m.group(2).strip(), doi.group(1) if doi else None, block))
    return out


def dedup(entries):
    """removed key -> (kept key, normalised doi); the first entry of each DOI group is kept."""
    first, removed = {}, {}
    for key, doi, _block in entries:
        if key is None or doi is None:
            continue
        nd = normalise(doi)
        if nd in first:
            removed[key] = (first[nd], nd)
        else:
            first[nd] = key
    return removed


def rewrite(text, removed):
    text = CITE.sub(lambda m: "@" + removed[m.group(1)][0] if m.group(1) in removed else m.group(0), text)

    def collapse(m):
        seen, parts = set(), []
        for part in m.group(1).split("; "):
            keys = CITE.findall(part)
            if keys and keys[0] in seen:
                continue
            seen.update(keys[:1])
            parts.append(part)
        return "[" + "; ".join(parts) + "]"

    return GROUP.sub(collapse, text)


def expected(init_files):
    text = init_files[BIB].decode("utf-8")
    entries = parse_bib(text)
    removed = dedup(entries)
    bib = "\n\n".join(block for key, _doi, block in entries if key not in removed) + "\n"
    docs = {rel: rewrite(init_files[rel].decode("utf-8"), removed) for rel in DOCS}
    log = ["removed_key,kept_key,doi"] + [
        f"{k},{removed[k][0]},{removed[k][1]}" for k in sorted(removed, key=lambda s: s.encode())
    ]
    return removed, bib, docs, log


def first_difference(want, got):
    for i, (a, b) in enumerate(zip(want.split("\n"), got.split("\n"), strict=False), start=1):
        if a != b:
            return f"line {i}: expected {a!r}, found {b!r}"
    return f"expected {want.count(chr(10))} newlines, found {got.count(chr(10))}"


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
    removed, want_bib, want_docs, want_log = expected(init_files)
    check(
        {k: v[0] for k, v in removed.items()} == EXPECTED_REMOVED,
        "sanity: the expected duplicate table matches the initial bibliography",
    )
    check(
        all(init_files[rel] != want_docs[rel].encode() for rel in DOCS),
        "sanity: every in-scope document cites a removed key",
    )

    # 1. The bibliography.
    if check(BIB in files, f"{BIB} exists"):
        got = files[BIB].decode("utf-8", errors="replace")
        keys = [k for k, _d, _b in parse_bib(got) if k]
        for k in EXPECTED_REMOVED:
            check(k not in keys, f"references.bib: duplicate entry {k} removed")
        for k in MUST_STAY:
            check(k in keys, f"references.bib: {k} kept (not a duplicate)")
        check(len(keys) == len(set(keys)), "references.bib: no key twice")
        check(
            files[BIB] == want_bib.encode("utf-8"),
            "references.bib is exactly the original minus the removed entries and their blank lines "
            + ("" if files[BIB] == want_bib.encode() else f"({first_difference(want_bib, got)})"),
        )

    # 2. The citations.
    for rel in DOCS:
        if not check(rel in files, f"{rel} exists"):
            continue
        got = files[rel].decode("utf-8", errors="replace")
        cited = set(CITE.findall(got))
        check(
            not cited & set(EXPECTED_REMOVED),
            f"{rel}: no citation of a removed key left ({cited & set(EXPECTED_REMOVED)})",
        )
        check(
            files[rel] == want_docs[rel].encode("utf-8"),
            f"{rel}: citations rewritten exactly, nothing else changed "
            + ("" if files[rel] == want_docs[rel].encode() else f"({first_difference(want_docs[rel], got)})"),
        )

    # 3. The log.
    if check(LOG in files, f"{LOG} exists"):
        lines = files[LOG].decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        check(lines[:1] == [want_log[0]], f"log header is '{want_log[0]}' (got {lines[:1]})")
        check(sorted(lines[1:]) == sorted(want_log[1:]), f"log rows: expected {want_log[1:]}, got {lines[1:]}")
        check(lines == want_log, "log rows sorted by removed_key in plain ASCII order")
        body = "\n".join(want_log)
        check(
            files[LOG] in (body.encode(), (body + "\n").encode()),
            "log matches byte for byte (no quoting, spaces, CRLF or blank lines)",
        )

    # 4. Nothing else changed.
    edited = {BIB, *DOCS}
    missing = sorted(set(init_files) - set(files))
    extra = sorted(set(files) - set(init_files) - {LOG})
    changed = sorted(p for p in init_files if p in files and p not in edited and files[p] != init_files[p])
    check(not missing, f"no file deleted or moved (missing: {missing[:5]})")
    check(not extra, f"no other file created (extra: {extra[:5]})")
    check(not changed, f"every other file unchanged, submitted_2024-02/ and reading_list.md included ({changed[:5]})")
    check(dirs == init_dirs, f"no folder created or removed (added: {sorted(dirs - init_dirs)[:4]})")

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
