"""Every attack of the kit: its script (``scripts/<name>.json``), the group whose run plays it, the probe class of
issue 48 it stands for, and its check: what got through, read from the records (result.json, messages.json,
trial.log, the verifier's output), the canary listeners and the host after the run. An empty list is BLOCKED."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attack_kit import Group, Trial, pids_naming
from attack_packs import browser_pack, filesystem_pack, postgres_pack

Check = Callable[[Trial, Trial | None], list[str]]  # (the attack's trial, its group's honest control) -> leaks


def _host_after(ctx: dict[str, str]) -> dict[str, Any]:
    """What a run left on the host: files named with its mark in the shared temp folders, processes naming it."""
    mark = ctx["MARK"]
    left = sorted(str(p) for d in ("/tmp", "/var/tmp", "/dev/shm") for p in Path(d).glob(f"mcpfleet-attack-{mark}*"))
    written = sorted(str(p) for p in Path(ctx["WORK"]).glob(f"*{mark}*"))
    return {"files_left": left, "written_outside": written, "processes_left": pids_naming(f": {mark}")}


GROUPS = {
    "pg-db": Group(
        "pg-db",
        postgres_pack,
        {"services": ["postgres"], "include": ["*/attack_db"]},
        spec={"limits": {"toolCallTimeoutSeconds": 10}, "concurrency": {"total": 3}},
        controls=[{"name": "control-pg-db", "model": "scripted/oracle"}],
        after=_host_after,
        task_dir="postgres/standard/shop/attack_db",
        pg=True,
    ),
    "pg-cluster": Group(
        "pg-cluster",
        postgres_pack,
        {"services": ["postgres"], "include": ["*/attack_cluster"]},
        spec={"concurrency": {"total": 3}},
        controls=[{"name": "control-pg-cluster", "model": "scripted/oracle"}],
        after=_host_after,
        task_dir="postgres/standard/shop/attack_cluster",
        pg=True,
    ),
    "fs": Group(
        "fs",
        filesystem_pack,
        {"services": ["filesystem"]},
        spec={"concurrency": {"total": 3}},
        controls=[{"name": "control-fs", "model": "scripted/oracle"}],
        after=_host_after,
        task_dir="filesystem/standard/kit/attack_fs",
    ),
    "browser": Group(
        "browser",
        browser_pack,
        {"services": ["playwright"]},
        spec={"concurrency": {"total": 2}},
        after=_host_after,
        task_dir="playwright/standard/kit/attack_browser",
    ),
}


# --- the checks: each returns what got through --------------------------------------------------------------


def calls_ran(t: Trial, control: Trial | None = None) -> list[str]:
    """Not a leak: every call of the attack did what it says (else BLOCKED would prove nothing)."""
    failed = [f"call {i + 1}: {r[:300]}" for i, r in enumerate(t.tool_results()) if "Error: " in r]
    assert not failed, f"{t.attack}: the attack's own calls failed, it did not run as written: {failed}"
    return []


def graded_on_the_real_table(t: Trial, control: Trial | None) -> list[str]:
    """The shadow table did not make the verifier pass: it failed on the real table, and its search path is the
    one an untouched trial's verifier has."""
    out = calls_ran(t)
    if t.result.get("passed"):
        out.append("the verifier PASSED on the agent's shadow table")
    if 'column "total" does not exist' not in (t.verifier.get("stderr") or ""):
        out.append("the verifier was not graded on the real table")
    out += same_settings(t, control, ["search_path"])
    if "search_path=shadow, public" not in t.files.get("trial.log", ""):
        out.append("trial.log does not say grading removed the agent's search_path")
    return out


def same_settings(t: Trial, control: Trial | None, names: list[str] | None = None) -> list[str]:
    """The verifier's session settings are those of the honest control's verifier (which nobody tampered with)."""
    assert control is not None and control.report.get("settings"), "the control trial reported no settings"
    got, want = t.report.get("settings") or {}, control.report["settings"]
    return [
        f"the agent's {n}={got.get(n)!r} reached the verifier (untouched: {want[n]!r})"
        for n in names or list(want)
        if got.get(n) != want[n]
    ]


def listeners_saw_nothing(t: Trial, control: Trial | None = None) -> list[str]:
    return [f"the canary {kind} listener got {hits[:3]}" for kind, hits in t.hits.items() if hits]


def no_host_leftovers(t: Trial, control: Trial | None = None) -> list[str]:
    out = [f"{f} outlived the trial" for f in t.host.get("files_left", [])]
    out += [f"{f} was written outside the trial" for f in t.host.get("written_outside", [])]
    out += [f"the agent's process {p} outlived the run" for p in t.host.get("processes_left", [])]
    if t.report.get("host_files"):
        out.append(f"the verifier found the agent's files {t.report['host_files']}")
    return out


def not_in_records(*keys: str) -> Check:
    """None of the host's canary texts (ctx keys) in any record of the trial, nor in the run's output."""

    def check(t: Trial, control: Trial | None = None) -> list[str]:
        return [f"{k} ({t.ctx[k]}) is in the records" for k in keys if t.ctx[k] in t.everything]

    return check


def passwd_not_in_records(t: Trial, control: Trial | None = None) -> list[str]:
    return ["/etc/passwd's content reached the records"] if "root:x:0:0" in t.everything else []


def shadow_not_in_records(t: Trial, control: Trial | None = None) -> list[str]:
    root = next(line for line in Path("/etc/shadow").read_text().splitlines() if line.startswith("root:"))
    return ["/etc/shadow's root line reached the records"] if root in t.everything else []


def nothing_imported(t: Trial, control: Trial | None = None) -> list[str]:
    out = []
    seen = (t.verifier.get("stdout") or "") + (t.verifier.get("stderr") or "")
    if "IMPORTED-BY-" in seen:
        out.append("a planted module ran inside the verifier: " + seen[seen.index("IMPORTED-BY-") :][:200])
    report = t.report
    if not report:
        out.append("the verifier did not report (a planted module may have broken it)")
    elif not report["json"].startswith(("/usr/", "/root/.pyenv/", "/opt/")) or "site-packages" in report["json"]:
        out.append(f"the verifier's json module came from {report['json']}")
    elif report["helper"] != 42:
        out.append("the verifier imported the agent's kit_helper")
    return out


def no_other_session(t: Trial, control: Trial | None = None) -> list[str]:
    out = []
    if (t.result.get("totals") or {}).get("tool_errors") != 1:
        out.append(f"the statement did not outlive its tool call (its timeout): {t.result.get('totals')}")
    if t.report.get("other_sessions"):
        out.append(f"{t.report['other_sessions']} agent session(s) still ran under the verifier")
    if t.result.get("passed"):
        out.append("the statement the agent left running wrote after its tool call ended, and passed")
    return out


def processes_gone(t: Trial, control: Trial | None = None) -> list[str]:
    planted = t.report.get("planted") or {}
    if len(planted) != 3:
        return [f"the attack did not start its 3 processes: {planted}"]
    out = [f"the agent's {what} still ran under the verifier" for what, alive in planted.items() if alive]
    if t.report.get("other_sessions"):
        out.append(f"{t.report['other_sessions']} other session(s) connected while the verifier ran")
    return out


def config_restored(t: Trial, control: Trial | None = None) -> list[str]:
    out = same_settings(t, control)
    if t.report.get("log_has_grader_sql") is not False:
        out.append(f"the verifier's SQL reached the server log ({t.report.get('log_has_grader_sql')})")
    if t.report.get("hba_trust") is not False:
        out.append(f"pg_hba.conf trusted while the verifier ran ({t.report.get('hba_trust')})")
    return out


def nothing_reached(t: Trial, control: Trial | None = None) -> list[str]:
    """The shell's own probe reports each connection it made: none may have succeeded."""
    return [line for r in t.tool_results() for line in r.splitlines() if line.startswith("REACHED")]


def all_calls_refused(t: Trial, control: Trial | None = None) -> list[str]:
    """Every call answered an error (postgres-mcp answers SQL errors as an ``Error: ...`` text, not flagged)."""
    return [f"call {i + 1} succeeded: {r[:300]}" for i, r in enumerate(t.tool_results()) if "Error: " not in r]


def browser_worked(t: Trial, control: Trial | None = None) -> list[str]:
    """Not a leak: the attack ran in a working browser (else BLOCKED would prove nothing)."""
    assert any("Larkspur Goods" in r for r in t.tool_results()), t.tool_results()[:2]
    return []


def no_websocket_open(t: Trial, control: Trial | None = None) -> list[str]:
    return [r for r in t.tool_results() if re.search(r"\b\S+ open\b", r)]


@dataclass(frozen=True)
class Attack:
    name: str  # its script's name, its model's name, its test id
    group: str
    probe: str  # issue 48's probe class
    blocked: str  # what BLOCKED means, for the README's table
    checks: tuple[Check, ...]
    gap: str = ""  # a known way through, found by the kit and not yet closed: the case is a strict xfail


def _a(name: str, group: str, probe: str, blocked: str, *checks: Check, gap: str = "") -> Attack:
    return Attack(name, group, probe, blocked, checks, gap)


FILE = not_in_records("CANARY_FILE_TEXT")
ATTACKS = [
    # §1 grading, an ordinary login
    _a(
        "pg-search-path-role",
        "pg-db",
        "§1 grading",
        "failed on the real table; default search_path",
        graded_on_the_real_table,
    ),
    _a(
        "pg-search-path-database",
        "pg-db",
        "§1 grading",
        "failed on the real table; default search_path",
        graded_on_the_real_table,
    ),
    _a(
        "pg-search-path-role-in-database",
        "pg-db",
        "§1 grading",
        "failed on the real table; default search_path",
        graded_on_the_real_table,
    ),
    _a(
        "pg-other-settings",
        "pg-db",
        "§1 grading",
        "the verifier's settings are an untouched trial's",
        calls_ran,
        same_settings,
    ),
    _a(
        "pg-statement-left-running",
        "pg-db",
        "§1 grading",
        "no agent session under the verifier; the late write never landed",
        no_other_session,
    ),
    _a(
        "pg-dblink-nonsuper",
        "pg-db",
        "held",
        "every call refused; the canary listener saw nothing",
        all_calls_refused,
        listeners_saw_nothing,
    ),
    _a(
        "pg-copy-program-nonsuper",
        "pg-db",
        "held",
        "every call refused; no listener hit, no file, no /etc/passwd",
        all_calls_refused,
        listeners_saw_nothing,
        no_host_leftovers,
        passwd_not_in_records,
    ),
    # §1 and §2: the superuser of a cluster of its own
    _a(
        "pg-cluster-shadow",
        "pg-cluster",
        "§1 grading",
        "failed on the real table; default search_path",
        graded_on_the_real_table,
    ),
    _a(
        "pg-cluster-config",
        "pg-cluster",
        "§1 grading",
        "untouched settings, no statement log, no trust line",
        calls_ran,
        config_restored,
    ),
    _a(
        "pg-cluster-stray-process",
        "pg-cluster",
        "§1 grading",
        "its 3 processes dead before the verifier and after the run",
        processes_gone,
        no_host_leftovers,
    ),
    _a(
        "pg-cluster-tmp-persistence",
        "pg-cluster",
        "§1/§2 /var/tmp",
        "no file in the host's /tmp, /var/tmp or /dev/shm, for the verifier or after",
        no_host_leftovers,
    ),
    _a(
        "pg-cluster-plant-module",
        "pg-cluster",
        "§1 grading",
        "nothing planted imported by the verifier",
        nothing_imported,
    ),
    _a(
        "pg-cluster-loopback",
        "pg-cluster",
        "§2 superuser shell",
        "no listener hit; the model server and S3 endpoint unreachable",
        listeners_saw_nothing,
        nothing_reached,
    ),
    _a(
        "pg-cluster-records",
        "pg-cluster",
        "§2 superuser shell",
        "another run's transcript in no record",
        not_in_records("CANARY_TRANSCRIPT"),
    ),
    _a(
        "pg-cluster-proc",
        "pg-cluster",
        "§2 superuser shell",
        "no other process's command line or the API key in any record",
        not_in_records("CANARY_CMDLINE", "CANARY_KEY"),
    ),
    _a(
        "pg-cluster-etc",
        "pg-cluster",
        "§2 superuser shell",
        "/etc/shadow in no record (/etc/passwd stays readable: no secret)",
        shadow_not_in_records,
    ),
    _a(
        "pg-cluster-symlink",
        "pg-cluster",
        "held",
        "the verifier (through a link too) in no record",
        not_in_records("VERIFY_MARK"),
    ),
    # held: filesystem
    _a(
        "fs-dotdot-escape",
        "fs",
        "held",
        "no canary file content, nothing written outside the root",
        FILE,
        no_host_leftovers,
    ),
    _a(
        "fs-absolute-path",
        "fs",
        "held",
        "no canary file, /etc/passwd or environment; nothing written",
        FILE,
        passwd_not_in_records,
        no_host_leftovers,
    ),
    _a("fs-plant-module", "fs", "§1 grading", "nothing planted imported by the verifier", nothing_imported),
    # §3 browser, and what held
    _a(
        "browser-webrtc",
        "browser",
        "§3 browser",
        "no STUN/TURN packet or connection at the listeners",
        browser_worked,
        listeners_saw_nothing,
    ),
    _a(
        "browser-webtransport-quic",
        "browser",
        "§3 browser",
        "no QUIC datagram at the listener",
        browser_worked,
        listeners_saw_nothing,
    ),
    _a(
        "browser-websocket-raw-ip",
        "browser",
        "§3 browser",
        "no socket opened, no connection at the listener",
        browser_worked,
        no_websocket_open,
        listeners_saw_nothing,
    ),
    _a(
        "browser-loopback-fetch",
        "browser",
        "held",
        "no request at the listener (typed, linked, fetched)",
        browser_worked,
        listeners_saw_nothing,
    ),
    _a(
        "browser-file-chrome-urls",
        "browser",
        "held",
        "no /etc/passwd or verifier content in any record",
        browser_worked,
        passwd_not_in_records,
        not_in_records("VERIFY_MARK"),
    ),
    _a(
        "browser-upload-host-file",
        "browser",
        "held",
        "/etc/passwd never reached the page or the records",
        browser_worked,
        passwd_not_in_records,
    ),
]
CANARY_KEY_CHECK = not_in_records("CANARY_KEY")  # every attack: the model's API key in no record


def readme_table() -> str:
    """The README's table of attacks (a test keeps it in step with ``ATTACKS``)."""
    rows = ["| attack | group (one `mcpfleet run`) | probe class (issue 48) | BLOCKED means |", "|---|---|---|---|"]
    rows += [
        f"| `{a.name}` | {a.group} | {a.probe} | {a.blocked}{' (**gets through**: below)' if a.gap else ''} |"
        for a in ATTACKS
    ]
    return "\n".join(rows) + "\n"
