"""The PostgreSQL service: a private cluster per run, a cloned database and login role per trial, isolation
between trials (also through the real postgres-mcp server), cleanup on exit, SIGTERM and a dead owner, and
MCPMark's PostgreSQL task format."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import yaml
from mcp.types import TextContent
from pgpack import big_orders, make_mcpmark_pack, make_pg_pack, mcpfleet_run_in, run_cluster_in, scratch_runs_root

from mcpfleet.runner.environment.mcp_client import connect_stdio
from mcpfleet.runner.launch.taskcheck import validate
from mcpfleet.runner.services import get_service, pgcluster, run_resources
from mcpfleet.runner.services.postgres import PostgresService, isolation, state_source
from mcpfleet.runner.tasks.checks import check_task
from mcpfleet.runner.tasks.digest import task_digest
from mcpfleet.runner.tasks.discovery import discover, find_task

REPO = Path(__file__).resolve().parents[1]
MCPFLEET = Path(sys.executable).with_name("mcpfleet")
PG = PostgresService()


@pytest.fixture(scope="module")
def pg_dir() -> Iterator[Path]:
    with scratch_runs_root("mcpfleet-pg-test-") as d:
        yield d


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A runs root for one `mcpfleet run` (empty again once the run is over)."""
    with scratch_runs_root("mcpfleet-pg-run-") as d:
        yield d


@pytest.fixture(autouse=True)
def _pg_dir_env(pg_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pgcluster.PG_DIR_ENV, str(pg_dir))


@pytest.fixture(scope="module")
def cluster(pg_dir: Path) -> Iterator[pgcluster.ClusterHandle]:
    with run_cluster_in(pg_dir, ["postgres", "filesystem"]) as handle:
        yield handle


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pg_pack(tmp_path_factory.mktemp("pg") / "pack")


def task(pack: Path, name: str) -> Any:
    return find_task(pack, f"postgres/standard/shop/{name}")


def one(h: pgcluster.ClusterHandle, sql: str, db: str = "postgres", **login: Any) -> Any:
    with contextlib.closing(h.connect(db, **login)) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall() if cur.description else None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def postmaster_pid(data: Path) -> int:
    return int((data / "postmaster.pid").read_text().split("\n", 1)[0])


def test_cluster_settings_and_removal(pg_dir: Path) -> None:
    with run_resources(["postgres"]) as res:
        h = res["postgres"]
        base = Path(h.base)
        pid = postmaster_pid(base / "main")
        assert h.host == "127.0.0.1" and alive(pid)
        settings = dict(
            one(h, "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'TimeZone', 'listen_addresses')")
        )
        assert settings == {"fsync": "off", "TimeZone": "UTC", "listen_addresses": "127.0.0.1"}
        # PostgreSQL refuses root: as root the server runs as the postgres OS user, else as ourselves.
        uid = int(
            next(
                line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:")
            ).split()[1]
        )
        assert uid == (pgcluster.os_user() or (os.geteuid(), 0))[0] and uid != 0
        assert json.loads((base / "owner.json").read_text())["pid"] == os.getpid()
        with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
            h.connect(password="wrong")
        # Only `mcpfleet run` forks its servers from a zygote; `mcpfleet trial` and `tasks validate` start them.
        assert h.zygote is None and not list(base.glob("zygote*"))
    assert not alive(pid) and not base.exists()


def test_cluster_as_an_unprivileged_user(tmp_path: Path) -> None:
    """The other half of the root/non-root pair: whichever we are, a plain user starts its own cluster too
    (as root we run the module as the postgres OS user; it needs only the standard library for this)."""
    script = f"""
import importlib.util, os, shutil, sys, tempfile
spec = importlib.util.spec_from_file_location("pgcluster", {str(REPO / "runner/services/pgcluster.py")!r})
pc = sys.modules["pgcluster"] = importlib.util.module_from_spec(spec); spec.loader.exec_module(pc)
assert pc.os_user() is None, "a non-root user runs the server as itself"
root = os.environ[pc.PG_DIR_ENV] = tempfile.mkdtemp(prefix="mcpfleet-pg-user-")
print(root, flush=True)
try:
    base = pc.new_run_folder(None)
    pc.initdb(base / "data", "pw", None, pc.pg_bin())
    pm = pc.start(base / "data", base, None, pc.pg_bin())
    print(pm.port, pm.ready(), os.geteuid())
    pm.stop()
    print(pm.proc.returncode)
finally:
    shutil.rmtree(root, ignore_errors=True)
"""
    cmd = ["/usr/bin/python3", "-c", script]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/")
    root = Path(out.stdout.split()[0]) if out.stdout else None
    try:
        assert out.returncode == 0, out.stderr
        port, ready, uid = out.stdout.split()[1:4]
        assert ready == "True" and int(port) > 0 and int(uid) != 0
        assert root is not None and not root.exists()  # its cluster (~40 MB) is not left in the temp folder
    finally:
        if root is not None and root.name.startswith("mcpfleet-pg-user-"):
            shutil.rmtree(root, ignore_errors=True)  # a failed or killed script's, as root can


async def test_two_trials_of_one_task_are_isolated(
    cluster: pgcluster.ClusterHandle, pack: Path, tmp_path: Path
) -> None:
    t = task(pack, "add_total")
    async with (
        PG.environment(t, tmp_path / "a", cluster) as a,
        PG.environment(t, tmp_path / "b", cluster) as b,
    ):
        la, lb = a.verifier_env, b.verifier_env
        assert la["POSTGRES_DATABASE"] != lb["POSTGRES_DATABASE"] and la["POSTGRES_USERNAME"] != lb["POSTGRES_USERNAME"]
        assert a.verifier_args == [la["POSTGRES_DATABASE"]]
        login_a = {"user": la["POSTGRES_USERNAME"], "password": la["POSTGRES_PASSWORD"]}
        login_b = {"user": lb["POSTGRES_USERNAME"], "password": lb["POSTGRES_PASSWORD"]}
        one(cluster, "UPDATE orders SET qty = 0 WHERE id <= 10", la["POSTGRES_DATABASE"], **login_a)
        assert one(cluster, "SELECT count(*) FROM orders WHERE qty = 0", la["POSTGRES_DATABASE"], **login_a) == [(10,)]
        assert one(cluster, "SELECT count(*) FROM orders WHERE qty = 0", lb["POSTGRES_DATABASE"], **login_b) == [(0,)]
        # Each role owns its clone's objects (reassigned from the template role) and nothing else.
        owner = one(
            cluster, "SELECT tableowner FROM pg_tables WHERE tablename = 'orders'", lb["POSTGRES_DATABASE"], **login_b
        )
        assert owner == [(lb["POSTGRES_USERNAME"],)]
        for db in (lb["POSTGRES_DATABASE"], "postgres", "template1"):
            with pytest.raises(psycopg2.OperationalError, match="permission denied for database"):
                cluster.connect(db, **login_a)
        source = state_source(t)
        assert source is not None
        template = source.template
        with pytest.raises(psycopg2.OperationalError, match="not currently accepting connections"):
            cluster.connect(template, **login_a)
        # Cloning leaves the template role's grants on databases alone (another worker may be restoring one).
        grant = f"SELECT has_database_privilege('{pgcluster.TEMPLATE_ROLE}', '{template}', 'CONNECT')"
        assert one(cluster, grant) == [(True,)]
        roles = (la["POSTGRES_USERNAME"], lb["POSTGRES_USERNAME"])
        flags = one(cluster, f"SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname IN {roles}")
        assert flags == [(False, False, False)] * 2
    names = (la["POSTGRES_DATABASE"], lb["POSTGRES_DATABASE"])
    assert one(cluster, f"SELECT count(*) FROM pg_database WHERE datname IN {names}") == [(0,)]
    assert one(cluster, f"SELECT count(*) FROM pg_roles WHERE rolname IN {roles}") == [(0,)]


async def test_agent_sql_through_postgres_mcp_cannot_reach_another_trial(
    cluster: pgcluster.ClusterHandle, pack: Path, tmp_path: Path
) -> None:
    t = task(pack, "add_total")
    async with (
        PG.environment(t, tmp_path / "a", cluster) as a,
        PG.environment(t, tmp_path / "b", cluster) as b,
    ):
        other_db, other_role = b.verifier_env["POSTGRES_DATABASE"], b.verifier_env["POSTGRES_USERNAME"]
        assert "DATABASE_URI" in a.server.env and a.verifier_env["POSTGRES_PASSWORD"] not in " ".join(a.server.argv())
        with open(tmp_path / "server.log", "w+b") as log:
            async with connect_stdio(a.server, log, cwd=a.state_dir) as session:
                tools = {tool.name: tool.input_schema for tool in (await session.list_tools()).tools}

                async def sql(text: str) -> str:
                    result = await session.call_tool("execute_sql", {"sql": text})
                    return "".join(getattr(c, "text", "") for c in result.content)

                assert "2000" in await sql("SELECT count(*) FROM orders")
                attempts = {
                    f"SELECT count(*) FROM {other_db}.public.orders": "cross-database references are not implemented",
                    "CREATE EXTENSION dblink": "permission denied",
                    f'SET ROLE "{other_role}"': "permission denied",
                    f"ALTER ROLE \"{other_role}\" PASSWORD 'x'": "permission denied",
                    "COPY (SELECT 1) TO PROGRAM 'true'": "must be superuser",
                    "CREATE ROLE intruder": "permission denied",
                    f'ALTER DATABASE "{other_db}" OWNER TO CURRENT_USER': "must be owner of database",
                }
                for statement, refusal in attempts.items():
                    text = await sql(statement)
                    assert text.startswith("Error:") and refusal in text, (statement, text)
                    assert PG.result_is_error(text)  # postgres-mcp does not flag these results as errors
    # The tools and parameters task oracles (and PG-TASKS.md) rely on, as the pinned server lists them.
    assert {"list_schemas", "list_objects", "get_object_details", "explain_query", "execute_sql"} <= set(tools)
    assert tools["list_objects"]["required"] == ["schema_name"]
    assert set(tools["get_object_details"]["properties"]) == {"schema_name", "object_name", "object_type"}
    assert set(tools["explain_query"]["properties"]) == {"sql", "analyze", "hypothetical_indexes"}
    assert set(tools["execute_sql"]["properties"]) == {"sql"}


def test_tasks_whose_description_or_verifier_manage_roles_get_a_cluster_without_declaring_it(tmp_path: Path) -> None:
    """MCPMark's lego/basic_security_setup asks for CREATE ROLE in its description, lego/database_security_policies'
    verifier runs SET ROLE, and neither has a prepare_environment.py: on the shared cluster their login may not
    create roles (0% for every model). Role SQL in either file gives a cluster of its own and the superuser, as in
    MCPMark; a declaration still wins, and no bundled task is swept along."""
    root = tmp_path / "tasks"
    texts = {
        "asks_create_role": ("Create a new database role called `theme_analyst` with read access.", "print('ok')"),
        "verifier_sets_role": ("Add row-level security to the themes table.", "cur.execute('SET ROLE analyst')"),
        "plain": ("Count the users per role column value and make the user_roles table faster.", "print('ok')"),
        "declared": ("CREATE ROLE reporting; but the task declares its isolation.", "print('ok')"),
    }
    for name, (description, verifier) in texts.items():
        folder = root / "postgres" / "standard" / "lego" / name
        folder.mkdir(parents=True)
        (folder / "description.md").write_text(description)
        (folder / "verify.py").write_text(verifier)
        meta: dict[str, Any] = {"task_id": name, "category_id": "lego"}
        if name == "declared":
            meta["mcpfleet"] = {"isolation": "database"}
        (folder / "meta.json").write_text(json.dumps(meta))
    got = {t.path.name: isolation(t) for t in discover(root)}
    assert got == {
        "asks_create_role": "cluster",
        "verifier_sets_role": "cluster",
        "plain": "database",
        "declared": "database",
    }
    bundled = [t for t in discover(REPO / "tasks") if t.service == "postgres"]
    swept = [t.id for t in bundled if isolation(t) != ((t.meta.get("mcpfleet") or {}).get("isolation") or "database")]
    assert len(bundled) == 16 and not swept, swept


async def test_role_managing_tasks_get_a_cluster_of_their_own(
    cluster: pgcluster.ClusterHandle, pack: Path, tmp_path: Path
) -> None:
    t = task(pack, "audit_role")
    assert isolation(t) == "cluster" and isolation(task(pack, "add_total")) == "database"
    assert not PG.spare_fits(t)
    async with (
        PG.environment(t, tmp_path / "a", cluster) as a,
        PG.environment(t, tmp_path / "b", cluster) as b,
    ):
        ports = {a.verifier_env["POSTGRES_PORT"], b.verifier_env["POSTGRES_PORT"], str(cluster.port)}
        assert len(ports) == 3 and a.verifier_env["POSTGRES_USERNAME"] == "postgres"
        assert a.verifier_env["POSTGRES_PASSWORD"] not in (cluster.password, b.verifier_env["POSTGRES_PASSWORD"])
        for env in (a, b):  # the same role name in both trials: no collision
            v = env.verifier_env
            login = {"user": v["POSTGRES_USERNAME"], "password": v["POSTGRES_PASSWORD"]}
            h = pgcluster.ClusterHandle(
                int(v["POSTGRES_PORT"]), cluster.base, cluster.bin_dir, v["POSTGRES_PASSWORD"], ""
            )
            one(
                h,
                "CREATE ROLE auditor LOGIN PASSWORD 'pw'; GRANT SELECT ON orders TO auditor",
                v["POSTGRES_DATABASE"],
                **login,
            )
            # As on MCPMark's server, a role the task creates can log in (an RLS verifier does).
            assert one(h, "SELECT count(*) FROM orders", v["POSTGRES_DATABASE"], user="auditor", password="pw") == [
                (2000,)
            ]
        trials = list((Path(cluster.base) / "trials").iterdir())
        assert len(trials) == 2
    assert one(cluster, "SELECT count(*) FROM pg_roles WHERE rolname = 'auditor'") == [(0,)]
    assert not any(p.exists() for p in trials)


async def test_mcpmark_format_pack_loads_unchanged_and_runs(cluster: pgcluster.ClusterHandle, tmp_path: Path) -> None:
    root, states = make_mcpmark_pack(tmp_path / "pack", tmp_path / "postgres_state")
    # A pg_dump custom-format .backup in the same flat folder, made from a database holding the .sql state.
    one(cluster, "CREATE DATABASE dumpsrc")
    one(
        cluster,
        "CREATE TABLE items (sku text PRIMARY KEY, stock int); INSERT INTO items VALUES ('x', 1), ('y', 5)",
        "dumpsrc",
    )
    env = {"PGPASSWORD": cluster.password, "PATH": os.environ["PATH"]}
    subprocess.run(
        ["pg_dump", "-Fc", "-h", cluster.host, "-p", str(cluster.port), "-U", "postgres", "-d", "dumpsrc"]
        + ["-f", str(states / "warehouse.backup")],
        check=True,
        env=env,
    )
    one(cluster, "DROP DATABASE dumpsrc")
    make_backup_task(root)
    tasks = discover(root, states)
    assert [check_task(t) for t in tasks] == [[], [], []]
    assert [s.kind if (s := state_source(t)) else None for t in tasks] == ["sql", None, "backup"]
    assert [isolation(t) for t in tasks] == ["database", "cluster", "database"]
    reports = await validate(tasks, root, states)
    for r in reports:
        assert r.ok, r.problems
    assert [(r.oracle_passed, r.noop_failed) for r in reports] == [(True, True), (True, True), (True, True)]


def make_backup_task(root: Path) -> None:
    from pgpack import CONNECT, sql, write_task

    verify = (
        CONNECT
        + """
cur.execute("SELECT sku FROM items WHERE stock = 0")
if [r[0] for r in cur.fetchall()] != ["x"]:
    fail("only x must be out of stock")
print("ok")
"""
    )
    write_task(
        root,
        "warehouse",
        "sell_out",
        "Item x sold out: set its stock to 0.\n",
        verify,
        {"steps": [sql("UPDATE items SET stock = 0 WHERE sku = 'x'")]},
    )


def test_states_digests_and_checks(pack: Path, tmp_path: Path) -> None:
    t = task(pack, "add_total")
    assert PG.state_files(t) == [pack / "postgres/states/shop.py"]
    before = task_digest(t)
    assert PG.materialise(t, tmp_path / "dump") == 1 and (tmp_path / "dump/shop.sql").read_text().count("\n") > 2000
    (pack / "postgres/states/shop.py").write_text((pack / "postgres/states/shop.py").read_text() + "\n# changed\n")
    try:
        assert task_digest(task(pack, "add_total")) != before  # a changed generator is a changed trial
    finally:
        make_pg_pack(pack)
    stateless = find_task(pack, "postgres/standard/shop/add_total", tmp_path / "nowhere")
    assert check_task(stateless) == [
        f"{stateless.id}: no initial state (shop.py/shop.sql/shop.backup in {tmp_path / 'nowhere/postgres'}) "
        "and no prepare_environment.py"
    ]
    assert get_service("postgres") is not None and get_service("postgres").spare_servers


def test_stale_cluster_of_a_dead_run_is_stopped_and_removed(pg_dir: Path) -> None:
    # 1. A run killed outright: its postmaster dies with it (parent-death signal), its folder is swept.
    script = """
import os, sys, time
from mcpfleet.runner.services import pgcluster
with pgcluster.run_cluster() as h:
    print(h.base, flush=True)
    time.sleep(600)
"""
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd="/")
    assert child.stdout is not None
    base = Path(child.stdout.readline().strip())
    pid = postmaster_pid(base / "main")
    assert alive(pid)
    child.kill()
    child.wait()
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid) and base.exists()
    # 2. A run that died while its server lives on (no death signal: e.g. started by another tool): stopped.
    bin_dir, user = pgcluster.pg_bin(), pgcluster.os_user()
    stale = pgcluster.new_run_folder(user)
    pgcluster.initdb(stale / "main", "pw", user, bin_dir)
    server = subprocess.Popen(
        [str(bin_dir / "postgres"), "-D", str(stale / "main"), "-p", str(pgcluster.free_port()), "-k", str(stale)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **pgcluster._as_user(user),
    )
    pm = pgcluster.Postmaster(server, stale / "main", 0, stale / "log")
    pgcluster.wait_ready(pm)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (stale / "owner.json").write_text(json.dumps({"pid": dead.pid, "start": "0", "uid": os.geteuid()}))
    live = pgcluster.new_run_folder(user)  # ours, alive: left alone
    swept = pgcluster.sweep_stale()
    assert set(swept) == {base, stale}
    assert server.wait(10) is not None and not stale.exists() and not base.exists() and live.exists()
    subprocess.run(["rm", "-rf", str(live)], check=True)


def evalrun(pack: Path, out: Path, latency: float, attempts: int, concurrency: int) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "pg"},
        "spec": {
            "models": [
                {"name": "oracle", "model": f"scripted/oracle?latency={latency:g}"},
                {"name": "noop", "model": "scripted/noop"},
            ],
            "tasks": {"path": str(pack), "services": ["postgres"], "include": ["*/count_big", "*/add_total"]},
            "attempts": attempts,
            "concurrency": {"total": concurrency},
            "output": {"uri": str(out)},
        },
    }


def test_mcpfleet_run_postgres_suite(pack: Path, tmp_path: Path, run_dir: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(yaml.safe_dump(evalrun(pack, tmp_path / "runs", 0.0, 2, 2)))
    env = {**os.environ, pgcluster.PG_DIR_ENV: str(run_dir)}
    p = subprocess.run(
        [str(MCPFLEET), "run", str(spec), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    rows = [json.loads(f.read_text()) for f in sorted((tmp_path / "runs/pg/trials").glob("*/result.json"))]
    assert len(rows) == 8
    for r in rows:
        assert r["passed"] == (r["model"] == "oracle"), (r["trial_id"], r["error"], r["verifier"])
        assert r["timings"]["teardown"] > 0
        # The verifier's command names the trial's database; its login's password is never recorded.
        command, env = r["verifier"]["command"], r["verifier"]["env"]
        assert command[:2] == ["python", "{task}/verify.py"] and command[2:] == [env["POSTGRES_DATABASE"]]
        assert (
            env["POSTGRES_PASSWORD"] == env["PGPASSWORD"] == "[secret]"
            and env["MCP_MESSAGES"] == "{trial}/messages.json"
        )
    answers = [
        json.loads(f.read_text())[-1] for f in (tmp_path / "runs/pg/trials").glob("oracle.*count_big*/messages.json")
    ]
    assert {a["content"][0]["text"] for a in answers} == {str(big_orders())}
    assert not list(run_dir.iterdir())  # the run's cluster is gone
    # Every server was forked by the run's zygote: a stub that had to start one directly says so in its log.
    logs = [f.read_text() for f in (tmp_path / "runs/pg/trials").glob("oracle.*/mcp_server.log")]
    assert len(logs) == 4 and not any("zygote" in log for log in logs) and "zygote" not in p.stderr


def start_run(doc: dict[str, Any], tmp_path: Path, run_dir: Path) -> subprocess.Popen[str]:
    """`mcpfleet run` of ``doc`` in the background, its clusters under ``run_dir``; stderr kept."""
    spec = tmp_path / "run.yaml"
    spec.write_text(yaml.safe_dump(doc))
    env = {**os.environ, pgcluster.PG_DIR_ENV: str(run_dir)}
    return subprocess.Popen(
        [str(MCPFLEET), "run", str(spec), "--no-progress"],
        env=env,
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_stops_the_run_and_removes_its_cluster(pack: Path, tmp_path: Path, run_dir: Path) -> None:
    proc = start_run(evalrun(pack, tmp_path / "runs", 30.0, 1, 2), tmp_path, run_dir)
    assert proc.stderr is not None
    deadline = time.monotonic() + 240
    pid = 0
    while time.monotonic() < deadline and proc.poll() is None:
        # Trials are running once a clone exists: more databases than the three built-ins and the template.
        mains = [b / "main" for b in run_dir.iterdir() if (b / "main/postmaster.pid").exists()]
        if mains and len(list((mains[0] / "base").iterdir())) >= 5:
            pid = postmaster_pid(mains[0])
            break
        time.sleep(0.2)
    assert pid and alive(pid), proc.stderr.read() if proc.poll() is not None else "no trial database seen"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 130
    assert not alive(pid) and not list(run_dir.iterdir())
    assert "interrupted" in proc.stderr.read()


async def test_spare_database_serves_the_claiming_trial(
    cluster: pgcluster.ClusterHandle, pack: Path, tmp_path: Path
) -> None:
    """A worker's spare: postgres-mcp started before its trial is known, then handed the trial's clone."""
    from mcpfleet.runner.trial.warm import WarmServer

    spare = WarmServer("postgres", None, cluster)
    try:
        session = await spare.session()
        t = task(pack, "add_total")
        assert spare.fits(t) and not spare.fits(task(pack, "audit_role"))
        async with spare.environment(t) as env:
            db = env.verifier_env["POSTGRES_DATABASE"]
            result = await session.call_tool("execute_sql", {"sql": "SELECT current_database(), count(*) FROM orders"})
            block = result.content[0]
            assert isinstance(block, TextContent), block
            text = block.text
            assert db in text and "2000" in text, text
        assert one(cluster, f"SELECT count(*) FROM pg_database WHERE datname = '{db}'") == [(0,)]
        assert b"spare server claimed by this trial" in (spare.workdir / "mcp_server.log").read_bytes()
    finally:
        await spare.close()


async def test_validate_reports_an_oracle_step_that_fails(cluster: pgcluster.ClusterHandle, tmp_path: Path) -> None:
    from pgpack import ADD_TOTAL_VERIFY, GENERATOR, sql, write_task

    from mcpfleet.runner.launch.taskcheck import check_one
    from mcpfleet.runner.results.store import LocalStore
    from mcpfleet.runner.spec.evalrun import Limits

    root = tmp_path / "pack"
    (root / "postgres/states").mkdir(parents=True)
    (root / "postgres/states/shop.py").write_text(GENERATOR)
    steps = [
        sql("SELECT no_such_column FROM orders"),
        sql("ALTER TABLE orders ADD total numeric; UPDATE orders SET total = qty * price"),
    ]
    write_task(root, "shop", "add_total", "Add a total column.\n", ADD_TOTAL_VERIFY, {"steps": steps})
    t = find_task(root, "postgres/standard/shop/add_total")
    report = await check_one(t, root, None, LocalStore(tmp_path / "out"), Limits(), resources={"postgres": cluster})
    assert report.oracle_passed and report.noop_failed
    [problem] = report.problems  # naming the step and what the server said of it
    assert problem.startswith(f"{t.id}: oracle step 'execute_sql' returned an error: ") and "no_such_column" in problem


def test_a_pods_login_is_read_from_the_state_volume_or_named_missing(tmp_path: Path) -> None:
    """In a pod the runner reads the login pg-init wrote; without one the trial fails naming the file."""
    from mcpfleet.runner.services.pgpod import POD_LOGIN_DIR, pod_login

    with pytest.raises(RuntimeError, match=r"login is missing or unreadable .*\.postgres/login\.json"):
        pod_login(tmp_path)
    (tmp_path / POD_LOGIN_DIR).mkdir()
    (tmp_path / POD_LOGIN_DIR / "login.json").write_text(
        '{"host": "127.0.0.1", "port": 40123, "database": "trial", "user": "agent", "password": "s3cr3t"}'
    )
    login = pod_login(tmp_path)
    env = login.env()
    assert (env["POSTGRES_PORT"], env["POSTGRES_DATABASE"], env["POSTGRES_USERNAME"]) == ("40123", "trial", "agent")
    assert "s3cr3t" not in env["DATABASE_URL"] and "s3cr3t" not in repr(login)


SALARY_TASK = "postgres/standard/hr/salary_period_constraints"


async def test_a_task_can_ask_for_a_cluster_of_its_own_with_its_owners_login(
    cluster: pgcluster.ClusterHandle, tmp_path: Path
) -> None:
    """``"isolation": "cluster-owner"``: a cluster of its own, as for tasks that manage roles, but the login is
    the database's owner without superuser, CREATEROLE or CREATEDB, as on the shared cluster (and in its pod)."""
    t = find_task(REPO / "tasks", SALARY_TASK)
    assert isolation(t) == "cluster-owner" and not PG.spare_fits(t)
    assert PG.trial_params(t)["isolation"] == "cluster-owner"
    async with PG.environment(t, tmp_path / "a", cluster) as a:
        v = a.verifier_env
        assert v["POSTGRES_PORT"] != str(cluster.port) and v["POSTGRES_USERNAME"].startswith("agent_")
        h = pgcluster.ClusterHandle(int(v["POSTGRES_PORT"]), cluster.base, cluster.bin_dir, v["POSTGRES_PASSWORD"], "")
        login = {"user": v["POSTGRES_USERNAME"], "password": v["POSTGRES_PASSWORD"]}
        flags = "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user"
        assert one(h, flags, v["POSTGRES_DATABASE"], **login) == [(False, False, False)]
        owner = "SELECT tableowner FROM pg_tables WHERE tablename = 'salaries'"
        assert one(h, owner, v["POSTGRES_DATABASE"], **login) == [(v["POSTGRES_USERNAME"],)]
        trials = list((Path(cluster.base) / "trials").iterdir())
        assert len(trials) == 1
    assert not trials[0].exists()
    assert one(cluster, f"SELECT count(*) FROM pg_roles WHERE rolname = '{v['POSTGRES_USERNAME']}'") == [(0,)]


def kill_once_an_agent_works(proc: subprocess.Popen[str], victim: Callable[[list[int]], int]) -> int:
    """SIGKILL ``victim(trial backends)`` once a trial's agent is under way (3 s after its backend shows up: a tool
    call every 2 s), as the OOM killer would; the pid killed, 0 if no agent came within 240 s."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()[1:]
        backends = [int(line.split(None, 1)[0]) for line in ps if "postgres: agent_" in line and "trial_" in line]
        if backends:
            time.sleep(3.0)
            pid = victim(backends)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                return pid
        time.sleep(0.2)
    return 0


def test_a_crashed_backend_resets_the_cluster_and_its_trials_run_again(
    pack: Path, tmp_path: Path, run_dir: Path
) -> None:
    """A backend killed mid-trial (the OOM killer) makes PostgreSQL reset every session of the cluster: the
    agents read "server closed the connection" errors their tasks never set them. Before, those trials were
    scored as the model's; now each is an infrastructure error, run again, and its retry passes."""
    doc = evalrun(pack, tmp_path / "runs", 2.0, 1, 1)
    doc["spec"]["models"] = doc["spec"]["models"][:1]  # the oracle
    doc["spec"]["tasks"]["include"] = ["*/add_total"]
    doc["spec"]["retries"] = {"limit": 2, "backoffSeconds": 0}
    proc = start_run(doc, tmp_path, run_dir)
    killed = kill_once_an_agent_works(proc, lambda backends: backends[0])
    _, err = proc.communicate(timeout=300)
    assert killed, err
    assert proc.returncode == 0, err
    [record] = [json.loads(f.read_text()) for f in (tmp_path / "runs/pg/trials").glob("*/result.json")]
    assert record["passed"] and record["infra_attempts"] == 2, (record["error"], record["verifier"])
    assert not list(run_dir.iterdir())


async def test_a_trials_runaway_temp_file_query_is_cut_off(
    cluster: pgcluster.ClusterHandle, pack: Path, tmp_path: Path
) -> None:
    """The shared cluster lives in RAM (/dev/shm): one trial's sort or hash over a huge set (a reviewer's wrote
    1.5 GB in 16 s) must end with PostgreSQL's own error, not grow until the machine's memory is gone. The query
    below writes ~1.3 GB of temp files unbounded (measured: 668 MB for half the rows); the trial's role stops it
    at 512 MB, may not lift that limit, and a cluster trial's superuser has the same defaults."""
    async with (
        PG.environment(task(pack, "add_total"), tmp_path / "a", cluster) as a,
        PG.environment(task(pack, "audit_role"), tmp_path / "b", cluster) as b,
    ):
        v = a.verifier_env
        conn = cluster.connect(v["POSTGRES_DATABASE"], v["POSTGRES_USERNAME"], v["POSTGRES_PASSWORD"])
        try:
            with conn.cursor() as cur:
                started = time.monotonic()
                with pytest.raises(psycopg2.errors.ConfigurationLimitExceeded, match="exceeds temp_file_limit"):
                    cur.execute("SELECT g FROM generate_series(1, 100000000) g ORDER BY g DESC LIMIT 1")
                assert time.monotonic() - started < 30
                with pytest.raises(psycopg2.errors.InsufficientPrivilege, match="temp_file_limit"):
                    cur.execute("SET temp_file_limit = -1")
                cur.execute("SHOW statement_timeout")
                assert cur.fetchone() == ("5min",)
        finally:
            conn.close()
        assert not list((Path(cluster.base) / "main/base/pgsql_tmp").glob("*"))  # its temp files are gone
        w = b.verifier_env
        assert w["POSTGRES_USERNAME"] == pgcluster.SUPERUSER
        h = pgcluster.ClusterHandle(int(w["POSTGRES_PORT"]), cluster.base, cluster.bin_dir, w["POSTGRES_PASSWORD"], "")
        assert one(h, "SELECT current_setting('temp_file_limit'), current_setting('statement_timeout')") == [
            ("512MB", "5min")
        ]


def test_a_broken_backup_state_refuses_the_run_up_front(
    cluster: pgcluster.ClusterHandle, tmp_path: Path, run_dir: Path
) -> None:
    """A corrupt ``.backup`` was found only by each trial of its state (restore failed, exit 5 after its set-up:
    an infra_error, retried). Now `tasks validate` (check_task) and the run's preflight name the file and the fix,
    before any cluster starts. A dump cut short in its data passes ``pg_restore --list`` (measured): the check
    reads it through."""
    root = tmp_path / "pack"
    states = tmp_path / "postgres_state"
    states.mkdir()
    one(cluster, "CREATE DATABASE dumpsrc2")
    one(
        cluster,
        "CREATE TABLE items (sku text, stock int);"
        " INSERT INTO items SELECT md5(g::text), g FROM generate_series(1, 50000) g",
        "dumpsrc2",
    )
    env = {"PGPASSWORD": cluster.password, "PATH": os.environ["PATH"]}
    good = tmp_path / "good.backup"
    subprocess.run(
        [str(Path(cluster.bin_dir) / "pg_dump"), "-Fc", "-h", cluster.host, "-p", str(cluster.port), "-U", "postgres"]
        + ["-d", "dumpsrc2", "-f", str(good)],
        check=True,
        env=env,
    )
    one(cluster, "DROP DATABASE dumpsrc2")
    make_backup_task(root)
    t = find_task(root, "postgres/standard/warehouse/sell_out", states)
    shutil.copyfile(good, states / "warehouse.backup")
    assert check_task(t) == []
    data = good.read_bytes()
    for broken, why in (
        (data[: len(data) // 2], "end of file"),
        (b"garbage" * 100, "not appear to be a valid archive"),
    ):
        (states / "warehouse.backup").write_bytes(broken)
        [problem] = check_task(t)
        assert problem.startswith(f"{t.id}: state {states / 'warehouse.backup'} is not a readable pg_dump archive (")
        assert why in problem and "put the state as warehouse.sql in its place" in problem, problem
    doc = evalrun(root, tmp_path / "runs", 0.0, 1, 1)
    doc["spec"]["tasks"].update({"statesPath": str(states), "include": ["*/sell_out"]})
    spec = tmp_path / "run.yaml"
    spec.write_text(yaml.safe_dump(doc))
    started = time.monotonic()
    p = mcpfleet_run_in(spec, run_dir, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "fix each state as named below" in p.stderr and "warehouse.backup is not a readable" in p.stderr
    assert time.monotonic() - started < 30 and not (tmp_path / "runs/pg").exists() and not list(run_dir.iterdir())


def test_a_killed_run_cluster_is_restarted_and_later_trials_pass(pack: Path, tmp_path: Path, run_dir: Path) -> None:
    """The run's postmaster SIGKILLed mid-trial: nothing restarted it, so every later trial ended as an
    infra_error on a server that was not there. Now it comes back on the same port (the workers' handles hold
    it) with the same data; the trial under which it died is an infrastructure error run again, as before."""
    doc = evalrun(pack, tmp_path / "runs", 2.0, 2, 1)
    doc["spec"]["models"] = doc["spec"]["models"][:1]  # the oracle
    doc["spec"]["retries"] = {"limit": 2, "backoffSeconds": 0}
    proc = start_run(doc, tmp_path, run_dir)

    def postmaster(_: list[int]) -> int:
        [main] = [b / "main" for b in run_dir.iterdir() if (b / "main/postmaster.pid").exists()]
        return postmaster_pid(main)

    killed = kill_once_an_agent_works(proc, postmaster)
    _, err = proc.communicate(timeout=400)
    assert killed, err
    assert proc.returncode == 0, err
    assert "PostgreSQL server exited (-9); restarting it on port" in err
    records = [json.loads(f.read_text()) for f in (tmp_path / "runs/pg/trials").glob("*/result.json")]
    assert len(records) == 4
    for r in records:
        assert r["passed"], (r["trial_id"], r["error"], r["verifier"])
    # The one the kill hit ran again (a third time when its retry claimed the worker's spare that was starting
    # as the server died: a spare that failed to start fails its trial, an infrastructure error too).
    assert max(r["infra_attempts"] for r in records) in (2, 3)
    assert not alive(killed) and not list(run_dir.iterdir())


def test_a_run_cluster_that_keeps_dying_stops_the_run_with_the_reason(pg_dir: Path) -> None:
    """Restarts are for a server killed now and then; one that dies again and again has a cause a restart does
    not remove, so after ``RESTARTS`` the run is told why (by default it stops, as on Ctrl-C) rather than burning
    every remaining trial. Each restart keeps the data and the port."""
    lost: list[str] = []
    with pgcluster.run_cluster(on_lost=lost.append) as h:
        one(h, "CREATE DATABASE kept")
        for n in range(pgcluster.RESTARTS + 1):
            pid = postmaster_pid(Path(h.base) / "main")
            os.kill(pid, signal.SIGKILL)
            back, deadline = False, time.monotonic() + 30
            while not back and time.monotonic() < deadline and not lost:
                with contextlib.suppress(psycopg2.OperationalError):
                    kept = one(h, "SELECT count(*) FROM pg_database WHERE datname = 'kept'")
                    back = kept == [(1,)] and postmaster_pid(Path(h.base) / "main") != pid
                time.sleep(0.05)
            assert (back, bool(lost)) == ((False, True) if n == pgcluster.RESTARTS else (True, False)), (n, lost)
        base = Path(h.base)
    [said] = lost
    head = f"the run's PostgreSQL server exited (-9) for the {pgcluster.RESTARTS + 1}th time; its log ended: "
    assert said.startswith(head), said
    # The log's own last lines, since the teardown removes its folder (a path to it named a file already gone).
    assert "ready to accept connections" in said and str(base) not in said, said
    assert not base.exists()


def test_a_run_whose_cluster_keeps_dying_stops_early_with_the_reason(pack: Path, tmp_path: Path, run_dir: Path) -> None:
    """`mcpfleet run` after the run's server died ``RESTARTS + 1`` times: stopped at once with its own exit code
    (6, not Ctrl-C's 130: nobody interrupted it; the trials so far recorded, its cluster removed) within seconds,
    saying why, instead of every remaining trial ending as an infra_error."""
    doc = evalrun(pack, tmp_path / "runs", 2.0, 3, 1)
    doc["spec"]["models"] = doc["spec"]["models"][:1]
    proc = start_run(doc, tmp_path, run_dir)
    kills: list[int] = []
    deadline = time.monotonic() + 240
    while len(kills) <= pgcluster.RESTARTS and time.monotonic() < deadline and proc.poll() is None:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        mains = [b / "main" for b in run_dir.iterdir() if (b / "main/postmaster.pid").exists()]
        if mains and (kills or "postgres: agent_" in ps):
            with contextlib.suppress(OSError, ValueError):
                pid = postmaster_pid(mains[0])
                if pid not in kills:
                    os.kill(pid, signal.SIGKILL)
                    kills.append(pid)
        time.sleep(0.2)
    last = time.monotonic()
    _, err = proc.communicate(timeout=120)
    assert len(kills) == pgcluster.RESTARTS + 1, err
    assert proc.returncode == 6 and time.monotonic() - last < 30, err
    assert f"exited (-9) for the {pgcluster.RESTARTS + 1}th time" in err and "the run stopped early" in err
    assert "interrupted" not in err and "Traceback" not in err and not list(run_dir.iterdir())
    summary = json.loads((tmp_path / "runs" / doc["metadata"]["name"] / "summary.json").read_text())
    assert summary["complete"] is False


def test_a_server_killed_under_the_verifier_is_an_infra_error_run_again(tmp_path: Path, run_dir: Path) -> None:
    """The run's postmaster SIGKILLed while the task's verifier runs (connected, before its queries): the verifier
    fails on a dead connection, which measured nothing of the model. Before, that failure was scored as the
    model's (``verifier_failed``); now the trial rechecks its server after a failing verifier, so it is an
    infrastructure error, run again on the restarted server, and its retry passes."""
    from pgpack import ADD_TOTAL_VERIFY, CONNECT

    root = make_pg_pack(tmp_path / "pack")
    marker = tmp_path / "verifying"
    # Connected to the trial's database: say so, then wait for the kill before the first query.
    wait = f"open({str(marker)!r}, 'a').write('connected\\n')\nimport time\ntime.sleep(3)\n"
    verify = root / "postgres/standard/shop/add_total/verify.py"
    verify.write_text(ADD_TOTAL_VERIFY.replace(CONNECT, CONNECT + wait, 1))
    doc = evalrun(root, tmp_path / "runs", 0.0, 1, 1)
    doc["spec"]["models"] = doc["spec"]["models"][:1]  # the oracle
    doc["spec"]["tasks"]["include"] = ["*/add_total"]
    doc["spec"]["retries"] = {"limit": 2, "backoffSeconds": 0}
    proc = start_run(doc, tmp_path, run_dir)
    killed, deadline = 0, time.monotonic() + 240
    while not killed and time.monotonic() < deadline and proc.poll() is None:
        if marker.exists():
            [main] = [b / "main" for b in run_dir.iterdir() if (b / "main/postmaster.pid").exists()]
            killed = postmaster_pid(main)
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.1)
    _, err = proc.communicate(timeout=300)
    assert killed, err
    assert proc.returncode == 0, err
    assert "PostgreSQL server exited (-9); restarting it on port" in err
    [record] = [json.loads(f.read_text()) for f in (tmp_path / "runs/pg/trials").glob("*/result.json")]
    assert (record["passed"], record["failure"], record["infra_attempts"]) == (True, None, 2), (
        record["failure"],
        record["error"],
        record["verifier"],
    )
    assert marker.read_text() == "connected\n" * 2  # the killed verifier's run, then the retry's
    assert not alive(killed) and not list(run_dir.iterdir())


@pytest.mark.parametrize("isolation", ["database", "cluster"])
def test_an_agent_writing_past_the_data_limit_is_cut_off_and_scored_as_its_failure(
    tmp_path: Path, run_dir: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's clusters live in RAM: an agent whose statement writes without end (3 GB here) is cut off once its
    database passes the trial's data limit (32 MB here): its statement is ended mid-way, its later calls cannot
    connect, and the trial goes on to the verifier and is scored as the model's failure (not an infrastructure
    error, which would run it again), saying why in trial.log. A role loses its connections (its verifier, which
    logs in as a grader, reads what it left); a superuser agent of a cluster of its own loses that cluster's
    server. Another trial of the run is not touched."""
    from pgpack import ADD_TOTAL_VERIFY, sql, write_task

    root = make_pg_pack(tmp_path / "pack")
    runaway = "CREATE TABLE junk AS SELECT g, repeat('x', 1500) AS pad FROM generate_series(1, 2000000) g"
    write_task(
        root,
        "shop",
        "runaway",
        "Add a column total numeric(10,2) to orders holding qty * price for every row (a second copy).\n",
        ADD_TOTAL_VERIFY,
        {"steps": [sql(runaway)]},
        **({"mcpfleet": {"isolation": "cluster"}} if isolation == "cluster" else {}),
    )
    monkeypatch.setenv("MCPFLEET_PG_DATA_LIMIT_MB", "32")
    doc = evalrun(root, tmp_path / "runs", 0.0, 1, 2)
    doc["spec"]["models"] = doc["spec"]["models"][:1]  # the oracle
    doc["spec"]["tasks"]["include"] = ["*/runaway", "*/add_total"]
    proc = start_run(doc, tmp_path, run_dir)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    trials = tmp_path / "runs/pg/trials"
    records = {
        r["task_id"].rsplit("/", 1)[-1]: r for r in map(json.loads, map(Path.read_text, trials.glob("*/result.json")))
    }
    assert records["add_total"]["passed"], records["add_total"]["verifier"]
    runaway_rec = records["runaway"]
    assert (runaway_rec["passed"], runaway_rec["failure"], runaway_rec["infra_attempts"]) == (
        False,
        "verifier_failed",
        1,
    ), runaway_rec["error"]
    [folder] = [d for d in trials.iterdir() if "runaway" in d.name]
    log = (folder / "trial.log").read_text()
    assert "the agent was cut off" in log and "over the 32 MB a trial may write" in log, log
    messages = json.loads((folder / "messages.json").read_text())
    outputs = [m.get("output", "") for m in messages if m.get("type") == "function_call_output"]
    assert len(outputs) == 1 and '\\"text\\": \\"Error: ' in str(outputs[0]), outputs  # ended mid-way
    if isolation == "database":  # graded (as a grader of its own) on what the agent left: no total column
        assert "orders.total numeric is missing" in runaway_rec["verifier"]["stdout"], runaway_rec["verifier"]
    else:  # its server was stopped: nothing to grade on (its relay's port closes the connection: pgrelay.py)
        stderr = runaway_rec["verifier"]["stderr"]
        assert "Connection refused" in stderr or "server closed the connection unexpectedly" in stderr, stderr
    assert not list(run_dir.iterdir())


@pytest.mark.parametrize("first_in_flight", [True, False])
def test_a_ctrl_c_during_the_clusters_clean_up_cannot_keep_its_folder(
    pg_dir: Path, monkeypatch: pytest.MonkeyPatch, first_in_flight: bool
) -> None:
    """Chaos audit: Ctrl-C pressed again and again; one landing in run_cluster's clean-up (there, as the trial
    clusters are stopped, just before rmtree) left the run's folder, 60-76 MB of RAM in /dev/shm, until some
    later run. Now the clean-up finishes; the press is the stop under way, or raised once after it."""
    real = pgcluster.kill_postmasters
    armed: list[Path] = []

    def interrupted(base: Path, *args: Any, **kwargs: Any) -> int:
        if base in armed:
            os.kill(os.getpid(), signal.SIGINT)  # another Ctrl-C, as the clean-up runs
            time.sleep(0.2)
        return real(base, *args, **kwargs)

    monkeypatch.setattr(pgcluster, "kill_postmasters", interrupted)
    with pytest.raises(KeyboardInterrupt) as raised, pgcluster.run_cluster() as h:
        base = Path(h.base)
        pid = postmaster_pid(base / "main")
        armed.append(base)
        if first_in_flight:
            raise KeyboardInterrupt("first")
    assert str(raised.value) == ("first" if first_in_flight else "")
    assert not base.exists() and not alive(pid)
