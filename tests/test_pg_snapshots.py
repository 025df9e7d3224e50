"""salary_period_constraints and open snapshots (issue 51's flake): an index build also indexes the row versions a
fix updated away while some snapshot may still see them (or while the fixing transaction is its own), and evaluates
its expression on them, unless they were HOT-updated. The task's exclusion constraint on daterange(effective_from,
effective_to, '[]') raised "range lower bound must be less than or equal to range upper bound" on the inverted
periods' old versions whenever such a snapshot was open: a repeatable-read transaction in the trial's database, an
XID open anywhere on its cluster (another trial's ALTER TABLE or verifier on the shared cluster), or the fix and the
ALTER TABLE in one transaction. The hr state keeps free space on salaries' pages (fillfactor 80), so an in-place fix
is a HOT update and none of these can fail it. Each holder is opened here on purpose, against the state as bundled
and against the state as it was (no fillfactor), which fails every time."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from pgpack import run_cluster_in, scratch_runs_root

from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.postgres import PostgresService
from mcpfleet.runner.tasks.discovery import find_task

REPO = Path(__file__).resolve().parents[1]
SALARY_TASK = "postgres/standard/hr/salary_period_constraints"
RANGE_ERROR = "range lower bound must be less than or equal to range upper bound"
FILLFACTOR = ") WITH (fillfactor = 80);"


@pytest.fixture(scope="module")
def pg_dir() -> Iterator[Path]:
    with scratch_runs_root("mcpfleet-pg-snap-") as d:
        yield d


@pytest.fixture(autouse=True)
def _pg_dir_env(pg_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pgcluster.PG_DIR_ENV, str(pg_dir))


@pytest.fixture(scope="module")
def cluster(pg_dir: Path) -> Iterator[pgcluster.ClusterHandle]:
    with run_cluster_in(pg_dir, ["postgres"]) as handle:
        yield handle


def salary_pack(root: Path, before_fix: bool) -> Path:
    """A copy of the task on the run's shared cluster (isolation ``database``: where another trial's transaction,
    and the holders below, can reach it), with the hr state as bundled or as it was before the fix."""
    shutil.copytree(REPO / "tasks/postgres/states", root / "postgres/states")
    shutil.copytree(REPO / "tasks" / SALARY_TASK, root / SALARY_TASK)
    meta = json.loads((root / SALARY_TASK / "meta.json").read_text())
    meta["mcpfleet"] = {"isolation": "database"}
    (root / SALARY_TASK / "meta.json").write_text(json.dumps(meta))
    if before_fix:
        generator = root / "postgres/states/hr.py"
        text = generator.read_text()
        assert text.count(FILLFACTOR) == 1
        generator.write_text(text.replace(FILLFACTOR, ");"))
    return root


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    return {before: salary_pack(tmp_path_factory.mktemp(f"salary-{before}"), before) for before in (False, True)}


def oracle_sql() -> tuple[list[str], str]:
    """The oracle's fix (its DELETE and UPDATEs) and its ALTER TABLE, as oracle.json has them."""
    steps = [s.arguments["sql"] for s in find_task(REPO / "tasks", SALARY_TASK).oracle if s.tool == "execute_sql"]
    fix = [s for s in steps if s.startswith("DELETE") or "UPDATE salaries" in s]
    alter = [s for s in steps if "ADD CONSTRAINT salaries_no_overlap EXCLUDE" in s]
    assert len(fix) == 3 and len(alter) == 1, steps
    return fix, alter[0]


Holder = Callable[[pgcluster.ClusterHandle, dict[str, str]], Any]


def _login(env: dict[str, str], autocommit: bool = True) -> Any:
    conn = psycopg2.connect(
        host=env["POSTGRES_HOST"],
        port=env["POSTGRES_PORT"],
        dbname=env["POSTGRES_DATABASE"],
        user=env["POSTGRES_USERNAME"],
        password=env["POSTGRES_PASSWORD"],
    )
    conn.autocommit = autocommit
    return conn


def repeatable_read_in_the_database(h: pgcluster.ClusterHandle, env: dict[str, str]) -> Any:
    """A session of the trial's own database holding a snapshot (what an idle pooled connection would be)."""
    conn = _login(env, autocommit=False)
    conn.set_session(isolation_level="REPEATABLE READ")
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
    return conn


def xid_in_another_database(h: pgcluster.ClusterHandle, env: dict[str, str]) -> Any:
    """A transaction with an XID in another database (another trial's ALTER TABLE, UPDATE or verifier): it makes
    every snapshot of the cluster, the ALTER TABLE's own included, older than the fix."""
    conn = h.connect()
    conn.autocommit = False
    with conn.cursor() as cur:
        cur.execute("SELECT txid_current()")
    return conn


HOLDERS: dict[str, Holder | None] = {
    "repeatable read in the trial's database": repeatable_read_in_the_database,
    "an XID in another database": xid_in_another_database,
    "the fix and the ALTER TABLE in one transaction": None,
}


def _run(conn: Any, sql: str) -> str | None:
    """None, or the first line of the statement's error (the transaction it ran in rolled back)."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
    except psycopg2.Error as exc:
        return str(exc).splitlines()[0]
    return None


@pytest.mark.parametrize("holder", list(HOLDERS))
@pytest.mark.parametrize("before_fix", [False, True], ids=["bundled state", "state before the fix"])
async def test_no_open_snapshot_can_fail_the_oracles_fix(
    cluster: pgcluster.ClusterHandle, packs: dict[bool, Path], tmp_path: Path, holder: str, before_fix: bool
) -> None:
    fix, alter = oracle_sql()
    task = find_task(packs[before_fix], SALARY_TASK)
    async with PostgresService().environment(task, tmp_path / "state", cluster) as env:
        hold = HOLDERS[holder]
        held = hold(cluster, env.verifier_env) if hold else None
        with contextlib.closing(_login(env.verifier_env)) as conn:
            try:
                if hold is None:
                    error = _run(conn, "BEGIN; " + " ".join(fix) + " " + alter + " COMMIT;")
                else:
                    assert [_run(conn, s) for s in fix] == [None, None, None]
                    error = _run(conn, alter)
            finally:
                if held is not None:
                    held.rollback()
                    held.close()
            if before_fix:
                assert error == RANGE_ERROR  # the hazard is real, and deterministic with the holder open
            else:
                assert error is None
                assert _run(conn, "SELECT 1 FROM pg_constraint WHERE conname = 'salaries_no_overlap'") is None


async def _oracle_trial(root: Path, task_id: str, out: Path, cluster: pgcluster.ClusterHandle) -> tuple[Any, list[str]]:
    """The task's oracle.json replayed through the real postgres-mcp server; its result and the text of every tool
    result that is an error."""
    from mcpfleet.runner.results.store import LocalStore
    from mcpfleet.runner.spec.evalrun import AgentKind, Limits, ModelSpec
    from mcpfleet.runner.spec.trial import TrialContext, TrialSpec
    from mcpfleet.runner.trial.engine import run_trial

    spec = TrialSpec(
        run="horizon",
        trial_id=f"oracle.{task_id.replace('/', '.')}",
        spec_hash="horizon",
        model=ModelSpec(name="oracle", model="oracle"),
        task_id=task_id,
        tasks_root=str(root),
        attempt=1,
        agent=AgentKind.oracle,
        limits=Limits(),
    )
    store = LocalStore(out)
    result = await run_trial(spec, store, TrialContext(resources={"postgres": cluster}))
    messages = json.loads((store.trial_dir(spec.trial_id) / "messages.json").read_text())
    errors = [m["output"] for m in messages if m.get("type") == "function_call_output" and "Error:" in str(m["output"])]
    return result, errors


async def test_an_open_transaction_of_another_trial_cannot_fail_salary_period_constraints(
    cluster: pgcluster.ClusterHandle, packs: dict[bool, Path], tmp_path: Path
) -> None:
    """The whole trial, through postgres-mcp, on the run's shared cluster, while another session holds an XID open
    for all of it (as another trial's write transaction does): with the state as it was the oracle fails at its
    ALTER TABLE, with the state as bundled it passes. The bundled task also runs on a cluster of its own
    (``"isolation": "cluster-owner"``), where no other trial's transaction exists (test_postgres.py)."""
    holder = cluster.connect()
    holder.autocommit = False
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT txid_current()")
            held = cur.fetchone()
        result, errors = await _oracle_trial(packs[True], SALARY_TASK, tmp_path / "runs-before", cluster)
        assert not result.passed and len(errors) == 1 and RANGE_ERROR in errors[0], (result.error, errors)

        result, errors = await _oracle_trial(packs[False], SALARY_TASK, tmp_path / "runs", cluster)
        assert result.passed and not errors, (result.error, errors, result.verifier.stdout)
        with holder.cursor() as cur:  # still open, with the same XID: it was there through both trials
            cur.execute("SELECT txid_current_if_assigned()")
            assert cur.fetchone() == held
    finally:
        holder.rollback()
        holder.close()
