"""The trial servers an agent can make read files (a trial cluster's superuser: ``COPY ... FROM PROGRAM``,
``pg_read_file``; the browser: ``view-source:file://``) run in a sandbox (runner/environment/sandbox.py): the task packs
(the verifiers, the oracles), the run's output (other trials' transcripts), the packs cache and other trials' folders
are not there. The attacks succeed with the sandbox off (``MCPFLEET_SANDBOX=off``: what runs when we are not
root and the kernel allows no user namespace), fail with it on, as root and not; the services' oracle trials
still pass inside it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pgpack import make_pg_pack, scratch_runs_root
from sandbox_attacks import TRANSCRIPT, VERIFY, browser_attacks

from mcpfleet.runner.environment import sandbox
from mcpfleet.runner.launch.taskcheck import validate
from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.postgres import isolation
from mcpfleet.runner.tasks.discovery import discover, find_task

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"
SECRET = "sk-FAKE-sandbox-test-key"
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root sandboxes trial servers")


@pytest.fixture(params=["on", "off"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(sandbox.OFF_ENV, request.param)
    sandbox.reset()
    yield request.param
    sandbox.reset()


@pytest.fixture
def output(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A run's output folder outside the temp folder (as ``./runs`` is), named in ``$MCPFLEET_SANDBOX_HIDE``
    (what the launcher gives), with another trial's world-readable transcript."""
    root = Path(tempfile.mkdtemp(prefix="mcpfleet-sandbox-out-", dir="/var/tmp"))
    root.chmod(0o755)
    messages = root / "trials" / "other" / "messages.json"
    messages.parent.mkdir(parents=True)
    messages.write_text(json.dumps({"text": TRANSCRIPT}))
    messages.chmod(0o644)
    monkeypatch.setenv(sandbox.HIDE_ENV, str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _query(h: pgcluster.ClusterHandle, statement: str) -> str:
    """The rows as text, or the error's first line."""
    try:
        with contextlib.closing(h.connect()) as conn, conn.cursor() as cur:
            cur.execute(statement)
            return "\n".join(str(c) for row in cur.fetchall() for c in row) if cur.description else ""
    except Exception as exc:  # noqa: BLE001 - the error is the answer
        return f"ERROR {str(exc).strip().splitlines()[0]}"


async def test_a_trial_cluster_superuser_reads_no_verifier_transcript_or_other_trial(mode: str, output: Path) -> None:
    """The concrete attacks of a ``cluster`` trial's agent (superuser of its own cluster, as a throwaway uid)."""
    transcript = output / "trials" / "other" / "messages.json"
    with scratch_runs_root("mcpfleet-pg-sbx-") as d:
        os.environ[pgcluster.PG_DIR_ENV] = str(d)
        try:
            with pgcluster.run_cluster() as run:
                async with pgcluster.private_cluster(run, "a") as h, pgcluster.private_cluster(run, "b") as other:
                    shell = "CREATE TEMP TABLE o (l text); COPY o FROM PROGRAM $p$({}) 2>&1; true$p$; SELECT l FROM o"
                    got = {
                        "copy": _query(h, shell.format(f"cat {VERIFY} 2>&1")),
                        "read": _query(h, f"SELECT pg_read_file('{VERIFY}')"),
                        "ls": _query(h, f"SELECT pg_ls_dir('{VERIFY.parent}')"),
                        "transcript": _query(h, f"SELECT pg_read_file('{transcript}')"),
                        "via_proc": _query(h, shell.format(f"cat /proc/{os.getpid()}/root{VERIFY} 2>&1")),
                        "others": _query(h, shell.format(f"ls {other.base} 2>&1")),
                        "own": _query(h, "SELECT pg_ls_dir('.')"),  # its data directory: the server's cwd
                        "shell": _query(h, shell.format("f=$(mktemp) && echo $((6 * 7)) > $f && cat $f && rm $f")),
                    }
        finally:
            os.environ.pop(pgcluster.PG_DIR_ENV, None)
    answer_key = "Verifier for hr/vp_org_payroll"
    assert "PG_VERSION" in got["own"] and got["shell"] == "42", got  # the server and its shell work
    # not root: no other process's root folder; sandboxed, not even the process (its own /proc: issue 48 §2)
    assert ("Permission denied" if mode == "off" else "No such file or directory") in got["via_proc"], got
    assert "Permission denied" in got["others"], got  # another trial's folder in the run's: its throwaway uid's
    if mode == "off":  # today's hatch: whatever is world-readable
        assert answer_key in got["copy"] and answer_key in got["read"] and "verify.py" in got["ls"], got
        assert TRANSCRIPT in got["transcript"], got
    else:
        assert answer_key not in got["copy"] and "No such file" in got["copy"], got
        for what in ("read", "ls", "transcript"):
            assert got[what].startswith("ERROR") and "No such file or directory" in got[what], (what, got)


def test_the_browser_reads_no_verifier_transcript_or_secret(
    mode: str, output: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server as it is spawned (no harness filter in front: ``refused_call`` stops ``view-source:`` before it
    gets there, this is the layer under it), an API key in the run's environment."""
    marker = tempfile.mkdtemp(prefix="pwsbx-")  # short: Chromium's socket is under it
    monkeypatch.setenv("TMPDIR", marker)
    monkeypatch.setattr(tempfile, "tempdir", marker)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    try:
        seen = browser_attacks(Path(marker), output)
    finally:
        shutil.rmtree(marker, ignore_errors=True)
    assert_browser_sandboxed(seen, mode)


def assert_browser_sandboxed(seen: dict[str, Any], mode: str) -> None:
    answer_key = "Verifier for hr/vp_org_payroll"
    assert "Larkspur Goods" in seen["shop"]  # the browser works
    assert 'Access to "file:" protocol is blocked' in seen["plain"]  # playwright-mcp's own rule, either way
    # Its own environment: no key either way (and Chromium shows /proc files, size 0, as empty pages).
    assert "file:///proc/self/environ" in seen["environ"] and SECRET not in seen["environ"]
    assert seen["environs"] and not any(SECRET in e for e in seen["environs"])
    if mode == "off":  # today's hatch: the verifier, the pack, other trials' transcripts
        assert answer_key in seen["verify"] and answer_key in seen["via_proc"], seen["verify"][-500:]
        assert TRANSCRIPT in seen["transcript"] and TRANSCRIPT in seen["neighbour"] and "probe" in seen["pack"]
    else:
        for what in ("verify", "via_proc", "pack", "transcript", "neighbour"):
            assert "ERR_FILE_NOT_FOUND" in seen[what], (what, seen[what][-500:])
            assert answer_key not in seen[what] and TRANSCRIPT not in seen[what], what
    assert seen["wrapped"] == (mode == "on")  # the server's command: the sandbox's launcher, or playwright-mcp


def as_nobody(argv: list[str]) -> list[str]:
    """``argv`` as uid 65534, where this interpreter is reachable as it is for any user's own: when it lives in a
    folder others cannot enter (pyenv under /root here), a mount namespace of its own covers that folder with an
    enterable one holding only the interpreter's tree."""
    real = Path(os.path.realpath(sys.executable))
    blocked = next((d for d in reversed(real.parents) if not os.stat(d).st_mode & 0o001), None)
    if blocked is None:
        return [*AS_NOBODY, *argv]
    child = blocked / real.relative_to(blocked).parts[0]
    script = (
        'set -e; hold=$(mktemp -d); mount --bind "$1" "$hold"; mount -t tmpfs -o mode=755 mcpfleet-test "$2"; '
        'mkdir "$1"; mount --bind "$hold" "$1"; umount "$hold"; rmdir "$hold"; shift 2; exec "$@"'
    )
    wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(child), str(blocked)]
    return [*wrap, *AS_NOBODY, *argv]


def test_not_root_the_browser_is_sandboxed_too(mode: str, output: Path) -> None:
    """A run that is not root (the attacks as uid 65534, through ``setpriv``): its browser's server gets the same
    sandbox, in a user namespace of its own (before: none, and a warning)."""
    marker = tempfile.mkdtemp(prefix="pwsbx-")
    os.chown(marker, NOBODY, NOBODY)
    env = {**os.environ, sandbox.OFF_ENV: mode, "OPENAI_API_KEY": SECRET, "HOME": marker, "TMPDIR": marker}
    cmd = as_nobody([sys.executable, str(REPO / "tests" / "sandbox_attacks.py"), marker, str(output)])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=marker)
    finally:
        shutil.rmtree(marker, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_browser_sandboxed(json.loads(out.stdout.strip().splitlines()[-1]), mode)
    assert "trial servers are not sandboxed" not in out.stderr, out.stderr[-2000:]


def test_oracle_trials_pass_in_the_sandbox(tmp_path: Path) -> None:
    """A ``cluster`` PostgreSQL task and the bundled browser task, oracle and no-op, through the real services."""
    sandbox.reset()
    assert sandbox.available()
    pack = make_pg_pack(tmp_path / "pack")
    pg_task = find_task(pack, "postgres/standard/shop/audit_role")
    assert isolation(pg_task) == "cluster"
    with scratch_runs_root("mcpfleet-pg-sbx-") as d:
        os.environ[pgcluster.PG_DIR_ENV] = str(d)
        try:
            (pg,) = asyncio.run(validate([pg_task], pack))
        finally:
            os.environ.pop(pgcluster.PG_DIR_ENV, None)
    assert pg.problems == [] and pg.oracle_passed and pg.noop_failed, pg
    browser = [t for t in discover(TASKS) if t.id == "playwright/easy/shop_account/wishlist_add_two"]
    (pw,) = asyncio.run(validate(browser, TASKS))
    assert pw.problems == [] and pw.oracle_passed and pw.noop_failed, pw


def test_a_worker_hides_its_runs_output_and_packs_from_every_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `mcpfleet run`'s workers register before each trial (worker.run_item): the run's local output folder,
    its task packs and its states folder, hidden in every sandbox made after, once each."""
    from mcpfleet.runner.launch import worker

    monkeypatch.setattr(sandbox, "_roots", [])
    monkeypatch.setattr(worker, "_hidden", set())
    out, pack, states = tmp_path / "runs" / "r", tmp_path / "pack", tmp_path / "states"
    worker._hide_from_servers(out, str(pack), str(states))
    worker._hide_from_servers(out, str(pack), None)  # the next trial of the same run
    hidden = sandbox.default_hidden()
    assert all(hidden.count(p) == 1 for p in (out, pack, states)), hidden


def test_the_viewers_cache_is_hidden_as_run_folders_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mcpfleet view`` keeps runs' indexes and their transcripts' text in its cache: no agent's server sees it."""
    monkeypatch.setenv("MCPFLEET_VIEWER_CACHE_DIR", str(tmp_path / "viewer"))
    assert tmp_path / "viewer" in sandbox.default_hidden()
