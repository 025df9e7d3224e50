#!/usr/bin/env python3
"""Verifier for lab_share/file_instrument_exports.

Expected end state: every instrument export in incoming/ (not the README, not the partial
download) is moved, byte for byte, into fieldwork/<run>/raw/ under the name
<SITE>_<YYYYMMDD>T<HHMM>Z_<serial>.<ext> when its header's site code and UTC start date name an
existing run folder, else into incoming/unmatched/ under its own name; incoming/filing_log.csv
lists the moves sorted by original name in ASCII order. Nothing else may change, and the only new
folders are the raw/ folders that receive a file and incoming/unmatched/.
"""

import os
import re
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "lab_share"
LOG = "incoming/filing_log.csv"
MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}

# original name -> where it must end up (re-derived from the headers below as a self-check)
EXPECTED = {
    "EXO2_export_001.csv": "fieldwork/2024-03-05_harbor_north/raw/HN_20240305T1258Z_19J100842.csv",
    "EXO2_export_002.csv": "fieldwork/2024-03-19_estuary_mouth/raw/EM_20240319T1257Z_19J100842.csv",
    "EXO2_export_009.csv": "incoming/unmatched/EXO2_export_009.csv",
    "EXO2_export_014.csv": "fieldwork/2024-05-14_harbor_north/raw/HN_20240514T1254Z_19J100842.csv",
    "EXO2_export_015.csv": "fieldwork/2024-05-16_harbor_north/raw/HN_20240516T1258Z_19J100842.csv",
    "HN_0409_sonde.csv": "fieldwork/2024-04-09_reef_pilot/raw/RP_20240409T1259Z_19J100842.csv",
    "SBE19_cast_0319.cnv": "fieldwork/2024-03-19_estuary_mouth/raw/EM_20240319T1314Z_01907334.cnv",
    "SBE19_cast_0416.cnv": "fieldwork/2024-04-16_marsh_creek/raw/MC_20240416T1320Z_01907334.cnv",
    "SBE19_cast_0528.cnv": "fieldwork/2024-05-28_marsh_creek/raw/MC_20240528T1309Z_01907334.cnv",
    "SBE19_cast_test.cnv": "incoming/unmatched/SBE19_cast_test.cnv",
    "exo_0430.CSV": "fieldwork/2024-04-30_estuary_mouth/raw/EM_20240430T1256Z_21A104417.csv",
    "export (1).csv": "fieldwork/2024-04-02_harbor_north/raw/HN_20240402T1255Z_19J100842.csv",
    "export (2).csv": "incoming/unmatched/export (2).csv",
}
STAY = ["incoming/README.txt", "incoming/EXO2_export_016.csv.part"]

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


def site_folders():
    """Site code -> folder name, from the site table of the top-level README."""
    table = {}
    for line in (STATE / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(r"[A-Z]{2}", cells[0]):
            table[cells[0]] = cells[1]
    return table


def parse_header(text):
    """(site code upper-cased, YYYY-MM-DD, HHMM, serial) from a sonde or CTD export."""
    if text.startswith("* Sea-Bird"):
        serial = re.search(r"SERIAL NO\. (\S+)", text).group(1)
        site = re.search(r"^\* Station: (\S+)", text, re.M).group(1)
        mon, day, year, hh, mm = re.search(
            r"^\* System UTC = (\w{3}) (\d{2}) (\d{4}) (\d{2}):(\d{2}):\d{2}", text, re.M
        ).groups()
        return site.upper(), f"{year}-{MONTHS[mon]:02d}-{day}", hh + mm, serial
    serial = re.search(r"^# Serial: (\S+)", text, re.M).group(1)
    site = re.search(r"^# Site: (\S+)", text, re.M).group(1)
    start = re.search(r"^# Start \(UTC\): (\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2})", text, re.M)
    return site.upper(), start.group(1), start.group(2) + start.group(3), serial


def derive():
    sites = site_folders()
    runs = {p.name for p in (STATE / "fieldwork").iterdir() if p.is_dir()}
    out = {}
    for p in sorted((STATE / "incoming").iterdir()):
        if p.name == "README.txt" or p.name.endswith(".part"):
            continue
        site, date, hhmm, serial = parse_header(p.read_text(encoding="utf-8"))
        run = f"{date}_{sites.get(site, '?')}"
        if run in runs:
            name = f"{site}_{date.replace('-', '')}T{hhmm}Z_{serial}{p.suffix.lower()}"
            out[p.name] = f"fieldwork/{run}/raw/{name}"
        else:
            out[p.name] = f"incoming/unmatched/{p.name}"
    return out


def expected_dirs(init_dirs):
    new = {"incoming/unmatched"} | {dest.rsplit("/", 1)[0] for dest in EXPECTED.values()}
    return init_dirs | new


def check_log(data):
    want = ["original_name,filed_as"] + [f"{n},{EXPECTED[n]}" for n in sorted(EXPECTED, key=lambda s: s.encode())]
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    check(lines[:1] == [want[0]], f"filing_log.csv header is 'original_name,filed_as' (got {lines[:1]})")
    got = {}
    for ln in lines[1:]:
        name, _, dest = ln.partition(",")
        got[name] = dest
    check(sorted(got) == sorted(EXPECTED), f"filing_log.csv has one row per moved export (got {sorted(got)})")
    for name, dest in sorted(EXPECTED.items()):
        if name in got and got[name] != dest:
            check(False, f"filing_log.csv: {name} -> {dest} (got {got[name]!r})")
    check(
        [ln.partition(",")[0] for ln in lines[1:]] == [w.partition(",")[0] for w in want[1:]],
        "filing_log.csv rows sorted by original_name in plain ASCII order",
    )
    body = "\n".join(want)
    check(
        data in (body.encode(), (body + "\n").encode()),
        "filing_log.csv matches byte for byte (no quotes, ./ prefixes, spaces, CRLF or blank lines)",
    )


def main():
    root = os.environ.get("FILESYSTEM_TEST_DIR")
    if not root or not Path(root).is_dir():
        print("FAIL: FILESYSTEM_TEST_DIR not set or not a directory")
        return 1
    root = Path(root)
    if not STATE.is_dir():
        print(f"FAIL: initial state not found at {STATE}")
        return 1
    check(derive() == EXPECTED, "sanity: the expectation table matches the exports' headers in the initial state")

    init_files, init_dirs = snapshot(STATE)
    files, dirs = snapshot(root)

    # 1. Every export moved (not copied) to its place, unchanged.
    for name, dest in sorted(EXPECTED.items()):
        src = f"incoming/{name}"
        check(src not in files, f"{src} is no longer in incoming/")
        if check(dest in files, f"{name} filed as {dest}"):
            check(files[dest] == init_files[src], f"{dest} is byte-for-byte the original export")

    # 2. README and the partial download stay; nothing else filed.
    for rel in STAY:
        check(files.get(rel) == init_files[rel], f"{rel} left in place, unchanged")
    raw_new = sorted(rel for rel in files if "/raw/" in rel and rel not in init_files and rel not in EXPECTED.values())
    check(not raw_new, f"no other file in any raw/ folder (found: {raw_new[:4]})")

    # 3. The log.
    if check(LOG in files, f"{LOG} exists"):
        check_log(files[LOG])

    # 4. Whole tree: everything else untouched, no stray file or folder.
    want_files = {rel: data for rel, data in init_files.items() if rel.removeprefix("incoming/") not in EXPECTED}
    for name, dest in EXPECTED.items():
        want_files[dest] = init_files[f"incoming/{name}"]
    changed = sorted(rel for rel, data in want_files.items() if files.get(rel) != data)
    check(not changed, f"every other file present and unchanged (problems: {changed[:5]})")
    extra = sorted(set(files) - set(want_files) - {LOG})
    check(not extra, f"no unexpected files (found: {extra[:5]})")
    want_dirs = expected_dirs(init_dirs)
    check(
        dirs == want_dirs,
        f"folders are the original ones plus the needed raw/ folders and incoming/unmatched/ (added: "
        f"{sorted(dirs - want_dirs)[:4]}, missing: {sorted(want_dirs - dirs)[:4]})",
    )

    if failures:
        print(f"\nRESULT: FAIL ({len(failures)} check(s) failed)")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
