#!/usr/bin/env python3
"""Verifier for team_project/pgbouncer_config_rollout.

Expected end state: primary-DB connections in config/staging/* and config/prod/* point at
pgbouncer.<env>.harbor.internal:6432, config_revision bumped by one in exactly the changed files,
comments/replicas/other environments untouched, CHANGELOG.md and TODO.md updated by one line each.
Edited files are compared byte for byte with the expected edit (final newline included); every other file
must be byte-identical to the initial state.
"""

import json
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


def gw(env, old_rev):
    return [
        (f"config_revision: {old_rev}\n", f"config_revision: {old_rev + 1}\n"),
        (
            f"  host: db-primary.{env}.harbor.internal\n  port: 5432\n",
            f"  host: pgbouncer.{env}.harbor.internal\n  port: 6432\n",
        ),
    ]


def bw(env, old_rev):
    return [
        (f"config_revision = {old_rev}\n", f"config_revision = {old_rev + 1}\n"),
        (
            f"dsn = postgresql://billing@db-primary.{env}.harbor.internal:5432/harbor_billing?sslmode=require\n",
            f"dsn = postgresql://billing@pgbouncer.{env}.harbor.internal:6432/harbor_billing?sslmode=require\n",
        ),
    ]


# file -> list of (old, new) substitutions; each `old` occurs exactly once in the initial file.
EDITS = {
    "config/staging/api-gateway.yaml": gw("staging", 14),
    "config/staging/billing-worker.ini": bw("staging", 9),
    "config/staging/notifier.json": [
        ('  "config_revision": 7,\n', '  "config_revision": 8,\n'),
        (
            '    "host": "db-primary.staging.harbor.internal",\n    "port": 5432,\n',
            '    "host": "pgbouncer.staging.harbor.internal",\n    "port": 6432,\n',
        ),
    ],
    "config/prod/api-gateway.yaml": gw("prod", 27),
    "config/prod/billing-worker.ini": bw("prod", 16),
    "config/prod/cron-jobs.yaml": [
        ("config_revision: 22\n", "config_revision: 23\n"),
        (
            '  - name: nightly-settlement\n    schedule: "0 2 * * *"\n'
            "    db_url: postgres://billing@db-primary.prod.harbor.internal:5432/harbor_billing\n",
            '  - name: nightly-settlement\n    schedule: "0 2 * * *"\n'
            "    db_url: postgres://billing@pgbouncer.prod.harbor.internal:6432/harbor_billing\n",
        ),
        (
            '  - name: tenant-usage-rollup\n    schedule: "15 * * * *"\n'
            "    db_url: postgres://billing@db-primary.prod.harbor.internal:5432/harbor_billing\n",
            '  - name: tenant-usage-rollup\n    schedule: "15 * * * *"\n'
            "    db_url: postgres://billing@pgbouncer.prod.harbor.internal:6432/harbor_billing\n",
        ),
    ],
    "CHANGELOG.md": [
        (
            "- billing-worker: switch invoice PDF rendering to the new template engine (HBR-418)\n\n## [2.8.3]",
            "- billing-worker: switch invoice PDF rendering to the new template engine (HBR-418)\n"
            "- config: route staging and prod primary database connections through PgBouncer (HBR-420)\n\n## [2.8.3]",
        ),
    ],
    "TODO.md": [
        (
            "- [ ] Roll PgBouncer out to staging and prod (see ADR-010) — owner: @pnair\n",
            "- [x] Roll PgBouncer out to staging and prod (see ADR-010) — owner: @pnair\n",
        ),
    ],
}

# In scope but must stay untouched (no primary-DB connection): a revision bump here is wrong.
MUST_STAY = ["config/prod/notifier.json"]
# Out of scope files that contain the primary host and are tempting to edit.
OUT_OF_SCOPE = [
    "config/dev/api-gateway.yaml",
    "config/dev/billing-worker.ini",
    "config/dev/notifier.json",
    "config/prod-eu/api-gateway.yaml",
    "config/prod-eu/billing-worker.ini",
    "config/staging.old/api-gateway.yaml",
    "config/templates/api-gateway.yaml.example",
]


def expected_text(path, original):
    text = original
    for old, new in EDITS[path]:
        if original.count(old) != 1:
            fail(f"internal: {path}: pattern occurs {original.count(old)} times in the initial state")
        text = text.replace(old, new)
    return text


def diff_hint(path, want, got):
    w, g = want.split("\n"), got.split("\n")
    for i, (a, b) in enumerate(zip(w, g, strict=False), start=1):
        if a != b:
            return f"{path} line {i}: expected {a!r}, found {b!r}"
    return f"{path}: expected {len(w)} lines (final newline included), found {len(g)}"


def check_edited(root, init_files):
    for path in EDITS:
        p = root / path
        if not p.is_file():
            fail(f"{path} is missing")
        original = init_files[path].decode("utf-8")
        want = expected_text(path, original)
        raw = p.read_bytes()
        got = raw.decode("utf-8", errors="replace")
        if raw != want.encode("utf-8"):
            fail("content mismatch (compared byte for byte): " + diff_hint(path, want, got))
        if path.startswith("config/"):
            body = [ln for ln in got.split("\n") if not ln.lstrip().startswith(("#", ";"))]
            if any("db-primary" in ln for ln in body):
                fail(f"{path}: a primary-database connection still uses db-primary")
            if path.endswith(".json"):
                try:
                    json.loads(got)
                except ValueError as e:
                    fail(f"{path} is no longer valid JSON: {e}")
        ok(f"{path} updated exactly as expected")


def check_rest(root, init_files, init_dirs):
    files, dirs = snapshot(root)
    extra = sorted(set(files) - set(init_files))
    if extra:
        fail(f"unexpected new files: {extra}")
    missing = sorted(set(init_files) - set(files))
    if missing:
        fail(f"files missing or moved: {missing}")
    if dirs != init_dirs:
        fail(f"folder structure changed: added {sorted(dirs - init_dirs)}, removed {sorted(init_dirs - dirs)}")
    for path in MUST_STAY:
        if files[path] != init_files[path]:
            fail(f"{path} has no primary-database connection and must not be modified (not even config_revision)")
    for path in OUT_OF_SCOPE:
        if files[path] != init_files[path]:
            fail(f"{path} is out of scope and must not be modified")
    changed = sorted(p for p in init_files if p not in EDITS and files[p] != init_files[p])
    if changed:
        fail(f"files must not be modified: {changed}")
    ok(f"{len(init_files) - len(EDITS)} other files unchanged, no stray files or folders")


def main():
    root = get_test_dir()
    init_files, init_dirs = snapshot(STATE)
    check_edited(root, init_files)
    check_rest(root, init_files, init_dirs)
    print("PASS")
    sys.exit(0)


if __name__ == "__main__":
    main()
