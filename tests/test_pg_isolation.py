"""A trial with a cluster of its own is that cluster's superuser, so ``COPY ... PROGRAM`` gives its agent a shell
as the server's OS user. As root, each such cluster runs as a throwaway uid/gid of its own: the reviewer's attack
(a trust line appended to the run cluster's pg_hba.conf, a concurrent trial's table read from its data folder)
must fail, directly and through the real launcher, and whatever the agent leaves running must go with the trial."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import yaml
from pgpack import CONNECT, make_pg_pack, mcpfleet_run_in, run_cluster_in, scratch_runs_root, sql, write_task

from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.postgres import PostgresService, isolation
from mcpfleet.runner.tasks.discovery import find_task

MCPFLEET = Path(sys.executable).with_name("mcpfleet")
PG = PostgresService()


@pytest.fixture(scope="module")
def pg_dir() -> Iterator[Path]:
    with scratch_runs_root("mcpfleet-pg-iso-") as d:
        yield d


@pytest.fixture(scope="module")
def cluster(pg_dir: Path) -> Iterator[pgcluster.ClusterHandle]:
    with run_cluster_in(pg_dir, ["postgres"]) as handle:
        yield handle


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_pg_pack(tmp_path_factory.mktemp("pgiso") / "pack")
    write_task(root, "shop", "escape", "Try to leave your cluster.\n", ESCAPE_VERIFY, ESCAPE_ORACLE, **CLUSTER)
    return root


CLUSTER: dict[str, Any] = {"mcpfleet": {"isolation": "cluster"}}

# What the reviewer ran, from the trial's own data directory (the server's working directory): the run's
# folder is three levels up. Each line of output: the probe's name and its shell exit status.
ESCAPES = {
    "hba": "echo 'host all all 127.0.0.1/32 trust' >> ../../../main/pg_hba.conf",
    "main": "cat ../../../main/PG_VERSION",
    "blank": "cat ../../../blank/pg_hba.conf",
    "base": "ls -a ../../..",
    "trials": "ls -a ../..",
}
PROBE = "; ".join(f"({cmd}) >/dev/null 2>&1; echo {name} $?" for name, cmd in ESCAPES.items()) + "; echo uid $(id -u)"
ESCAPE_ORACLE = {
    "steps": [sql(f"CREATE TABLE probe (line text); COPY probe FROM PROGRAM $p${PROBE}$p$; SELECT line FROM probe")]
}
ESCAPE_VERIFY = (
    CONNECT
    + """
import pwd
cur.execute("SELECT line FROM probe")
got = dict(line.split(" ", 1) for (line,) in cur.fetchall())
print(got)
if set(got) != {"hba", "main", "blank", "base", "trials", "uid"}:
    fail("the probe did not run")
escaped = [name for name, status in got.items() if name != "uid" and status == "0"]
if escaped:
    fail(f"escaped: {escaped}")
uid = int(got["uid"])
if uid in (0, pwd.getpwnam("postgres").pw_uid) or uid in {p.pw_uid for p in pwd.getpwall()}:
    fail(f"the server ran as uid {uid}, a named user")
print("ok")
"""
)


def shell(h: pgcluster.ClusterHandle, db: str, command: str) -> tuple[list[str], int]:
    """``command`` run by the server's OS user through ``COPY ... FROM PROGRAM``: its output and exit status."""
    with contextlib.closing(h.connect(db)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TEMP TABLE out (line text)")
        cur.execute(f"COPY out FROM PROGRAM $p$({command}) 2>&1; echo $?$p$")
        cur.execute("SELECT line FROM out")
        lines = [line for (line,) in cur.fetchall()]
    return lines[:-1], int(lines[-1])


def uids(pid: int) -> set[int]:
    """Real, effective, saved and filesystem uids of a process (none if it is gone or a zombie)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return set()
    fields = dict(line.split(":", 1) for line in status)
    return set() if fields["State"].split()[0] == "Z" else {int(u) for u in fields["Uid"].split()}


def data_dir_of(env: dict[str, str], base: Path) -> Path:
    """The data folder of the trial cluster a verifier's environment leads to (its superuser asks the server: a
    cluster in a network of its own listens on its socket only, behind a relay's port)."""
    with contextlib.closing(psycopg2.connect(CONNECT_ENV.format(**env))) as conn, conn.cursor() as cur:
        cur.execute("SHOW data_directory")
        row = cur.fetchone()
    assert row is not None
    found = row[0]
    assert Path(found).is_relative_to(base / "trials"), found
    return Path(found)


CONNECT_ENV = (
    "host={POSTGRES_HOST} port={POSTGRES_PORT} user={POSTGRES_USERNAME} password={POSTGRES_PASSWORD} dbname=postgres"
)


def handle(env: dict[str, str], run: pgcluster.ClusterHandle) -> pgcluster.ClusterHandle:
    return pgcluster.ClusterHandle(int(env["POSTGRES_PORT"]), run.base, run.bin_dir, env["POSTGRES_PASSWORD"], "")


async def test_a_trial_cluster_superuser_reaches_neither_the_run_cluster_nor_another_trial(
    cluster: pgcluster.ClusterHandle, pack: Path, tmp_path: Path
) -> None:
    t = find_task(pack, "postgres/standard/shop/audit_role")
    assert isolation(t) == "cluster"
    base = Path(cluster.base)
    hba = base / "main" / "pg_hba.conf"
    before = hashlib.sha256(hba.read_bytes()).hexdigest()
    postgres_uid = pwd.getpwnam("postgres").pw_uid
    leftover = 0
    try:
        async with (
            PG.environment(t, tmp_path / "a", cluster) as a,
            PG.environment(t, tmp_path / "b", cluster) as b,
        ):
            va, vb = a.verifier_env, b.verifier_env
            ha, hb = handle(va, cluster), handle(vb, cluster)
            da, db = data_dir_of(va, base), data_dir_of(vb, base)
            # b's secret, on disk in b's table file.
            with contextlib.closing(hb.connect(vb["POSTGRES_DATABASE"])) as conn, conn.cursor() as cur:
                cur.execute("INSERT INTO orders VALUES (999999, 'secret-of-b', 1, 1); CHECKPOINT")
                cur.execute("SELECT pg_relation_filepath('orders')")
                row = cur.fetchone()
                assert row is not None
                table_b = db / row[0]
            assert b"secret-of-b" in table_b.read_bytes()  # as root: the file holds it

            out, status = shell(ha, va["POSTGRES_DATABASE"], "id -u; id -g; pwd")
            assert status == 0 and out[2] == str(da)  # the shell works, in a's own data folder
            uid_a, gid_a = int(out[0]), int(out[1])
            out_b, _ = shell(hb, vb["POSTGRES_DATABASE"], "id -u")
            assert uid_a not in (0, postgres_uid, int(out_b[0])) and gid_a != pwd.getpwnam("postgres").pw_gid
            with pytest.raises(KeyError):
                pwd.getpwuid(uid_a)
            assert os.stat(da).st_uid == uid_a and os.stat(db).st_uid == int(out_b[0])

            # (a) the reviewer's trust line, appended to the run cluster's pg_hba.conf
            with pytest.raises(psycopg2.errors.ExternalRoutineException, match="failed"):
                one = contextlib.closing(ha.connect(va["POSTGRES_DATABASE"]))
                with one as conn, conn.cursor() as cur:
                    cur.execute(f"COPY (SELECT 'host all all 127.0.0.1/32 trust') TO PROGRAM 'cat >> {hba}'")
            assert hashlib.sha256(hba.read_bytes()).hexdigest() == before
            # (b) another trial's data folder: its table file, its listing
            for command in (f"grep -a -c secret-of-b {table_b}", f"ls {db}", f"ls {db.parent}"):
                out, status = shell(ha, va["POSTGRES_DATABASE"], command)
                assert status != 0 and "Permission denied" in " ".join(out), (command, out)
            # (c) the run's folder, its trials/ and the shared cluster's data and template folders
            for path in (base, base / "trials", base / "main", base / "blank"):
                out, status = shell(ha, va["POSTGRES_DATABASE"], f"ls -a {path}")
                assert status != 0 and "Permission denied" in " ".join(out), (path, out)
            for path in (base / "main", base / "blank"):  # still the shared cluster's own, 0700
                st = os.stat(path)
                assert (st.st_uid, st.st_mode & 0o777) == (postgres_uid, 0o700)
            for name in ("main.log", "owner.json"):  # reachable by name: nothing from other trials in them
                out, status = shell(ha, va["POSTGRES_DATABASE"], f"cat {base / name} >/dev/null")
                assert (status != 0) == (name == "main.log"), (name, out)

            # (d) issue 48 §2: a network of its own (the machine's loopback is out of reach: a listener there, the
            # run cluster's port, the other trial's relay) and a /proc that shows no other user's process.
            with socket.socket() as decoy:
                decoy.bind(("127.0.0.1", 0))
                decoy.listen()
                decoy.settimeout(0.5)
                for port in (decoy.getsockname()[1], cluster.port, int(vb["POSTGRES_PORT"])):
                    dial = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3)'"
                    out, status = shell(ha, va["POSTGRES_DATABASE"], dial)
                    assert status != 0 and "Network is unreachable" in " ".join(out), (port, out)
                with pytest.raises(TimeoutError):
                    decoy.accept()
            out, status = shell(ha, va["POSTGRES_DATABASE"], f"cat /proc/{os.getpid()}/cmdline")
            assert status != 0, out  # this test's process, root's: not there
            out, status = shell(
                ha, va["POSTGRES_DATABASE"], "for p in /proc/[0-9]*; do stat -c %u $p 2>/dev/null; done | sort -u"
            )
            assert status == 0 and out == [str(uid_a)], out  # its own server's processes only

            # Whatever the agent leaves running goes with its trial.
            out, status = shell(ha, va["POSTGRES_DATABASE"], "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
            leftover = int(out[0])
            assert status == 0 and uids(leftover) == {uid_a}
        assert not da.parent.exists() and not db.parent.exists()
        assert not uids(leftover), "the agent's background process outlived its trial"
    finally:
        if leftover and uids(leftover):
            os.kill(leftover, signal.SIGKILL)


async def test_the_runs_cleanup_kills_what_a_dead_workers_trial_left_running(
    pg_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed mid-trial never runs its trial's cleanup: the run's (``kill_postmasters``, also what the
    next run's sweep calls) must stop the agent's daemons too, found by their folder's throwaway uid."""
    monkeypatch.setenv(pgcluster.PG_DIR_ENV, str(pg_dir))
    leftover = 0
    try:
        with pgcluster.run_cluster() as run:
            trial = pgcluster.private_cluster(run, "deadworker")
            h = await trial.__aenter__()  # never left: its worker "died"
            out, status = shell(h, "postgres", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
            leftover = int(out[0])
            assert status == 0 and len(uids(leftover)) == 1 and min(uids(leftover)) in pgcluster.TRIAL_IDS
            # The worker's death signal takes its server (SIGQUIT), not what the agent started in a session of
            # its own. (Reaped here: its parent is this test, not a dead worker.)
            pid = int((Path(h.base) / "data/postmaster.pid").read_text().split("\n", 1)[0])
            os.kill(pid, signal.SIGQUIT)
            os.waitpid(pid, 0)
            assert uids(leftover)
        assert not uids(leftover) and not Path(run.base).exists()
    finally:
        if leftover and uids(leftover):
            os.kill(leftover, signal.SIGKILL)


def test_throwaway_ids_skip_those_in_use_and_need_root(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = pgcluster.TRIAL_IDS
    busy = subprocess.Popen(["sleep", "60"], user=ids[5], group=ids[5], extra_groups=[])
    try:
        with monkeypatch.context() as m:
            picks = iter([5, 6])
            m.setattr(pgcluster.secrets, "randbelow", lambda n: next(picks))
            assert pgcluster.trial_user((101, 101)) == (ids[6], ids[6])  # ids[5] runs a process
        with monkeypatch.context() as m:  # not root: nothing can switch uid, the run's user it is
            m.setattr(pgcluster.os, "geteuid", lambda: 1000)
            assert pgcluster.trial_user((101, 101)) is None
        assert pgcluster.trial_user(None) is None
        assert pgcluster.kill_uid(ids[5]) == 1 and busy.wait(5) == -signal.SIGKILL
    finally:
        if busy.poll() is None:
            busy.kill()
            busy.wait()


def test_the_launcher_contains_a_trial_that_tries_to_escape(pack: Path, tmp_path: Path) -> None:
    """The attack as an agent makes it: SQL through postgres-mcp in `mcpfleet run`, two such trials at once."""
    run_dir = Path(tempfile.mkdtemp(prefix="mcpfleet-pg-iso-run-", dir=pgcluster._scratch()))
    run_dir.chmod(0o711)
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "iso"},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}],
            "tasks": {"path": str(pack), "services": ["postgres"], "include": ["*/escape"]},
            "attempts": 2,
            "concurrency": {"total": 2},
            "output": {"uri": str(tmp_path / "runs")},
        },
    }
    spec = tmp_path / "run.yaml"
    spec.write_text(yaml.safe_dump(doc))
    try:
        p = mcpfleet_run_in(spec, run_dir, timeout=600)
        rows = [json.loads(f.read_text()) for f in sorted((tmp_path / "runs/iso/trials").glob("*/result.json"))]
        assert len(rows) == 2, p.stderr
        for r in rows:
            assert r["passed"], (r["error"], r["verifier"])
        assert p.returncode == 0, p.stderr
        assert not list(run_dir.iterdir())  # the run's cluster and the trials' are gone
    finally:
        pgcluster.kill_postmasters(run_dir)
        subprocess.run(["rm", "-rf", str(run_dir)], check=False)


def test_a_superuser_task_is_refused_where_its_shell_cannot_be_confined(
    pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48 §2: where the machine cannot give a superuser trial's shell a world of its own (not root, no
    namespaces, an old kernel), its tasks are refused before any trial, naming them and the fix; not run unconfined
    as before (a warning at most). Tasks without a superuser are not."""
    from mcpfleet.runner.environment import sandbox

    superuser = find_task(pack, "postgres/standard/shop/audit_role")
    plain = find_task(pack, "postgres/standard/shop/add_total")
    assert isolation(superuser) == "cluster" and isolation(plain) != "cluster"
    assert PG.task_problems([superuser, plain]) == []  # root, namespaces, a recent kernel: confined
    monkeypatch.setattr(sandbox, "own_network_available", lambda: False)
    [problem] = PG.task_problems([superuser, plain])
    assert "1 selected task(s) (e.g. postgres/standard/shop/audit_role)" in problem
    assert "older than 5.8" in problem and "spec.tasks.exclude" in problem
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    [problem] = PG.task_problems([superuser])
    assert "a user other than root" in problem
    assert PG.task_problems([plain]) == []
