"""The trial servers an agent can make read files (a trial cluster's superuser: ``COPY ... FROM PROGRAM``,
``pg_read_file``; the browser: ``view-source:file://``) run in a sandbox (runner/sandbox.py): the task packs (the
verifiers, the oracles), the run's output (other trials' transcripts), the packs cache and other trials' folders
are not there. The attacks succeed with the sandbox off (``MCPFLEET_SANDBOX=off``: what runs when we are not
root), fail with it on; the services' oracle trials still pass inside it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pgpack import make_pg_pack, scratch_runs_root

from mcpfleet.runner import sandbox
from mcpfleet.runner.mcp_client import connect_stdio, result_text
from mcpfleet.runner.services import get_service, pgcluster
from mcpfleet.runner.services.postgres import isolation
from mcpfleet.runner.taskcheck import validate
from mcpfleet.runner.tasks import Task, discover, find_task

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"
VERIFY = TASKS / "postgres" / "standard" / "hr" / "vp_org_payroll" / "verify.py"
SECRET = "sk-FAKE-sandbox-test-key"
TRANSCRIPT = "transcript-of-another-trial"

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
    assert "Permission denied" in got["via_proc"], got  # not root: no other process's root folder
    assert "Permission denied" in got["others"], got  # another trial's folder in the run's: its throwaway uid's
    if mode == "off":  # today's hatch: whatever is world-readable
        assert answer_key in got["copy"] and answer_key in got["read"] and "verify.py" in got["ls"], got
        assert TRANSCRIPT in got["transcript"], got
    else:
        assert answer_key not in got["copy"] and "No such file" in got["copy"], got
        for what in ("read", "ls", "transcript"):
            assert got[what].startswith("ERROR") and "No such file or directory" in got[what], (what, got)


def _site_task(root: Path) -> Task:
    path = root / "pack" / "playwright" / "standard" / "probe" / "probe"
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"task_id": "probe", "mcpfleet": {"sites": ["shop"]}}))
    return Task("playwright", "standard", "probe", "probe", path, path.parent.parent / "states" / "probe")


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


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
    task = _site_task(Path(marker))
    state = Path(marker) / "mcpfleet-trial-1-x" / "state"
    neighbour = Path(marker) / "mcpfleet-trial-2-y" / "messages.json"  # a concurrent trial's folder
    neighbour.parent.mkdir()
    neighbour.write_text(TRANSCRIPT)

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        with open(Path(marker) / "server.log", "w+b") as log:
            async with get_service("playwright").environment(task, state, None) as env:
                seen["wrapped"] = Path(env.server.command).name == "server"
                async with connect_stdio(env.server, log, cwd=state) as session:

                    async def page(url: str) -> str:
                        nav = await session.call_tool("browser_navigate", {"url": url})
                        snap = await session.call_tool("browser_snapshot", {})
                        return result_text(nav) + "\n" + result_text(snap)

                    for name, url in {
                        "verify": f"view-source:file://{VERIFY}",
                        "pack": f"view-source:file://{task.path / 'meta.json'}",
                        "transcript": f"view-source:file://{output / 'trials' / 'other' / 'messages.json'}",
                        "neighbour": f"view-source:file://{neighbour}",
                        "via_proc": f"view-source:file:///proc/{os.getpid()}/root{VERIFY}",
                        "environ": "view-source:file:///proc/self/environ",
                        "plain": f"file://{VERIFY}",
                        "shop": "http://shop.test/",
                    }.items():
                        seen[name] = await page(url)
                    seen["environs"] = [_environ(p) for p in _pids_under(marker)]
        return seen

    try:
        seen = asyncio.run(scenario())
    finally:
        shutil.rmtree(marker, ignore_errors=True)
    answer_key = "Verifier for hr/vp_org_payroll"
    assert "Larkspur Goods" in seen["shop"]  # the browser works
    assert 'Access to "file:" protocol is blocked' in seen["plain"]  # playwright-mcp's own rule, either way
    # Its own environment: no key either way (and Chromium shows /proc files, size 0, as empty pages).
    assert "file:///proc/self/environ" in seen["environ"] and SECRET not in seen["environ"]
    assert seen["environs"] and not any(SECRET.encode() in e for e in seen["environs"])
    if mode == "off":  # today's hatch: the verifier, the pack, other trials' transcripts
        assert answer_key in seen["verify"] and answer_key in seen["via_proc"], seen["verify"][-500:]
        assert TRANSCRIPT in seen["transcript"] and TRANSCRIPT in seen["neighbour"] and "probe" in seen["pack"]
    else:
        for what in ("verify", "via_proc", "pack", "transcript", "neighbour"):
            assert "ERR_FILE_NOT_FOUND" in seen[what], (what, seen[what][-500:])
            assert answer_key not in seen[what] and TRANSCRIPT not in seen[what], what
    assert seen["wrapped"] == (mode == "on")  # the server's command: the sandbox's launcher, or playwright-mcp


def _pids_under(marker: str) -> list[int]:
    """The server's and browser's processes: their environment or command line names the test's folder."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmd = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd + _environ(int(entry.name)):
                out.append(int(entry.name))
    return out


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
    browser = [t for t in discover(TASKS) if t.id == "playwright/standard/shop_account/wishlist_add_two"]
    (pw,) = asyncio.run(validate(browser, TASKS))
    assert pw.problems == [] and pw.oracle_passed and pw.noop_failed, pw


def test_a_worker_hides_its_runs_output_and_packs_from_every_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `mcpfleet run`'s workers register before each trial (worker.run_item): the run's local output folder,
    its task packs and its states folder, hidden in every sandbox made after, once each."""
    from mcpfleet.runner import worker

    monkeypatch.setattr(sandbox, "_roots", [])
    monkeypatch.setattr(worker, "_hidden", set())
    out, pack, states = tmp_path / "runs" / "r", tmp_path / "pack", tmp_path / "states"
    worker._hide_from_servers(out, str(pack), str(states))
    worker._hide_from_servers(out, str(pack), None)  # the next trial of the same run
    hidden = sandbox.default_hidden()
    assert all(hidden.count(p) == 1 for p in (out, pack, states)), hidden
