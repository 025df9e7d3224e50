"""The PostgreSQL service: one private cluster per run, a cloned database and a login role per trial.

Isolation. Each state is restored once per run into a template database, as a non-superuser template role,
and ANALYZEd. A trial gets ``CREATE DATABASE ... TEMPLATE ... STRATEGY FILE_COPY`` owned by a login role of
its own (not superuser, no CREATEROLE/CREATEDB), the objects reassigned to it, and CONNECT revoked from
PUBLIC on every database, so its SQL can reach its own database only; both are dropped after the trial.
Roles are cluster-wide, so a task that creates or drops roles (``"mcpfleet": {"isolation": "cluster"}`` in
meta.json, and by default any task with MCPMark's ``prepare_environment.py``, which manages roles) gets a
cluster of its own, copied from the run's blank data directory, and the superuser, as in MCPMark. Renaming
roles per trial instead would change the SQL the task and its verifier expect.

Snapshots are cluster-wide too: while any transaction with an XID is open on a cluster, an index build in
every database of it also indexes the row versions deleted or updated away after that transaction took its
XID, and evaluates its expressions on them. So on the shared cluster another trial's long transaction (its
UPDATE, its index build) can fail a trial whose agent fixes rows and then indexes an expression the old values
make raise (``daterange(from, to)`` over periods it just un-inverted), which a serial run never does. Such a
task declares ``"isolation": "cluster-owner"``: a cluster of its own, logged in as its database's owner as on
the shared one.

States: ``<states>/<category>.py`` (a generator run as ``python <category>.py OUT.sql``), ``<category>.sql``
(psql) or ``<category>.backup`` (pg_restore), in the pack's ``postgres/states/`` or ``tasks.statesPath``
(as ``postgres/<category>.*`` or MCPMark's flat ``postgres_state/<category>.*``). A category with no state
gets an empty database, then its ``prepare_environment.py`` runs, as in MCPMark.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mcpfleet.runner.environment.server import Prefork, ServerCommand, servers_root
from mcpfleet.runner.environment.verifier import CLIP_MARK, run_program, run_verifier, verifier_env
from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.base import EnvironmentLost, PodContext, Service, Spare, TrialEnv, stdio_server_sidecar
from mcpfleet.runner.services.pgcluster import SETTINGS, SUPERUSER, TEMPLATE_ROLE, ClusterHandle
from mcpfleet.runner.services.prefork import console_script, route, run_zygote

if TYPE_CHECKING:
    from mcpfleet.runner.spec.task import Task

SERVER_ENV = "MCPFLEET_POSTGRES_MCP"  # path to a postgres-mcp executable, instead of servers/postgres-mcp/.venv
PREPARE = "prepare_environment.py"
PREPARE_TIMEOUT_S = 300.0  # MCPMark's
RESTORE_TIMEOUT_S = 900.0
STATE_KINDS = (("py", "generator"), ("sql", "sql"), ("backup", "backup"))


@dataclass(frozen=True)
class StateSource:
    kind: str  # generator | sql | backup
    path: Path

    @property
    def template(self) -> str:
        """Template database name: the category plus a content hash (two packs may share a category name)."""
        h = hashlib.sha256(self.kind.encode() + self.path.read_bytes()).hexdigest()[:10]
        return f"tmpl_{_ident(self.path.stem, 40)}_{h}"


@dataclass(frozen=True)
class Login:
    """One trial's connection: what its server, its prepare step and its verifier are given."""

    host: str
    port: int
    database: str
    user: str
    password: str = field(repr=False)

    def dsn(self, with_password: bool = True) -> str:
        auth = f"{quote(self.user, safe='')}" + (f":{quote(self.password, safe='')}" if with_password else "")
        return f"postgresql://{auth}@{self.host}:{self.port}/{quote(self.database, safe='')}"

    def env(self) -> dict[str, str]:
        """MCPMark's variables (DATABASE_URL without the password, as there) plus PGPASSWORD for libpq."""
        return {
            "POSTGRES_HOST": self.host,
            "POSTGRES_PORT": str(self.port),
            "POSTGRES_USERNAME": self.user,
            "POSTGRES_PASSWORD": self.password,
            "POSTGRES_DATABASE": self.database,
            "DATABASE_URL": self.dsn(with_password=False),
            "PGPASSWORD": self.password,
        }


def _ident(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9_]", "_", text.lower())[:limit]


ISOLATIONS = ("database", "cluster-owner", "cluster")


# Managing cluster-wide roles, in SQL or words, in a description or a verifier (MCPMark's lego/basic_security_setup asks
# for CREATE ROLE; lego/database_security_policies' verifier runs SET ROLE): neither has a prepare_environment.py.
ROLE_SQL = re.compile(
    r"\b(create|drop|alter|set)\s+(?:(?:a|an|the|new|database|login)\s+)*(role|user)s?\b", re.IGNORECASE
)


def isolation(task: Task) -> str:
    """meta.json's ``mcpfleet.isolation`` if given, else ``cluster`` for tasks that manage cluster-wide roles
    (MCPMark's: a prepare_environment.py, or role SQL in the description or the verifier), else ``database``.
    ``database``: a database and login role of its own on the run's cluster; ``cluster-owner``: a cluster of
    its own, logged in as its database's owner (no other trial's transaction holds back what its index builds
    may skip, see above); ``cluster``: a cluster of its own and the superuser, as MCPMark connects."""
    declared = (task.meta.get("mcpfleet") or {}).get("isolation")
    if declared in ISOLATIONS:
        return str(declared)
    return "cluster" if (task.path / PREPARE).is_file() or _manages_roles(task) else "database"


def _manages_roles(task: Task) -> bool:
    for path in (task.path / "description.md", task.verifier):
        try:
            if ROLE_SQL.search(path.read_text(encoding="utf-8", errors="replace")):
                return True
        except OSError:
            continue
    return False


def state_source(task: Task) -> StateSource | None:
    """The category's dump (or generator script), in the first states folder that holds one (``state_folders``)."""
    from mcpfleet.runner.spec.task import state_folders

    # The folder the category was found in (a task built by hand names its own) first; never above statesPath.
    for folder in dict.fromkeys(
        [
            task.states_folder,
            *state_folders(task.pack_root, task.states_path, task.service, PostgresService.mcpmark_states),
        ]
    ):
        for ext, kind in STATE_KINDS:
            path = folder / f"{task.category}.{ext}"
            if path.is_file():
                return StateSource(kind, path)
    return None


def server_executable() -> Path:
    if os.environ.get(SERVER_ENV):
        return Path(os.environ[SERVER_ENV])
    return servers_root() / "postgres-mcp" / ".venv" / "bin" / "postgres-mcp"


SERVER_ENVIRONMENT = {"TZ": "UTC"}  # besides the trial's DATABASE_URI


@functools.cache
def _prefork(exe: Path) -> Prefork | None:
    return console_script(exe, SERVER_ENVIRONMENT)


# --- templates ---------------------------------------------------------------------------------------------


def client_path(bin_dir: Path, name: str) -> str | None:
    """A PostgreSQL client program: the cluster's own version's when installed there, else the one on PATH."""
    local = bin_dir / name
    return str(local) if local.exists() else shutil.which(name)


def _client(h: ClusterHandle, name: str) -> str:
    return client_path(Path(h.bin_dir), name) or name


def _client_env(h: ClusterHandle) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PGPASSWORD": h.tmpl_password}


def _run(cmd: list[str], what: str, timeout: float, env: dict[str, str], cwd: str) -> None:
    """A state's program (its generator, or psql / pg_restore reading it) is the pack's code, run as a verifier
    is: the environment given (never the runner's keys), its output bounded, nothing it starts left running."""
    code, out = run_program(cmd, env, cwd, timeout)
    if code is None:
        raise RuntimeError(f"{what} took longer than {timeout:g} s")
    if code != 0:
        raise RuntimeError(f"{what} failed ({code}): {out.strip()[-2000:]}")


def restore(h: ClusterHandle, db: str, src: StateSource) -> None:
    """Load a state into ``db`` as the template role (so the objects are its own, reassigned per trial)."""
    conn = ["-h", h.host, "-p", str(h.port), "-U", TEMPLATE_ROLE, "-d", db]
    with tempfile.TemporaryDirectory(prefix="state-", dir=h.base) as tmp:
        path = src.path
        if src.kind == "generator":
            path = Path(tmp) / f"{src.path.stem}.sql"
            gen = [sys.executable, str(src.path), str(path)]
            _run(gen, f"state generator {src.path}", RESTORE_TIMEOUT_S, env=verifier_env({}), cwd=tmp)
        if src.kind == "backup":
            # No owners or grants: the dump's roles do not exist here; every object goes to the template role.
            cmd = [_client(h, "pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error", *conn, str(path)]
        else:
            cmd = [_client(h, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", *conn, "-f", str(path)]
        _run(cmd, f"restoring {src.path}", RESTORE_TIMEOUT_S, env=_client_env(h), cwd=tmp)


BACKUP_CHECK_TIMEOUT_S = 120.0


def _pg_restore() -> str | None:
    """This machine's pg_restore (the one trials restore with), or None where PostgreSQL is not installed."""
    try:
        return client_path(pgcluster.pg_bin(), "pg_restore")
    except pgcluster.ClusterError:
        return shutil.which("pg_restore")


def backup_problem(path: Path) -> str | None:
    """Why ``path`` cannot be restored (None when it can, or when there is no pg_restore here to tell): found by
    preflight and ``tasks validate`` instead of by every trial of the state, each failing after its set-up."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"state {path} cannot be read ({exc.strerror or exc})"
    return _backup_problem(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _backup_problem(path: str, size: int, mtime_ns: int) -> str | None:
    """Reads the whole archive without a server (its SQL script to /dev/null), once per file version: ``--list``
    reads only the table of contents, so it passed a dump cut short after it (measured: 0.1 s for 6.6 MB)."""
    exe = _pg_restore()
    if exe is None:
        return None
    try:
        p = subprocess.run(
            [exe, "-f", os.devnull, path],
            capture_output=True,
            text=True,
            timeout=BACKUP_CHECK_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"state {path}: pg_restore could not read it through in {BACKUP_CHECK_TIMEOUT_S:g} s"
    if p.returncode == 0:
        return None
    why = (p.stderr or p.stdout).strip().replace("\n", "; ")[-400:] or f"exit status {p.returncode}"
    sql_name = Path(path).with_suffix(".sql").name
    if "unsupported version" in why:  # e.g. MCPMark's dumps, written by PostgreSQL 17's pg_dump
        fix = (
            f"it was written by a newer pg_dump: convert it with that version's client (pg_restore --no-owner "
            f"-f {sql_name} {Path(path).name}) and put {sql_name} in its place"
        )
    else:
        fix = f"replace it with a complete pg_dump -Fc archive, or put the state as {sql_name} in its place"
    return f"state {path} is not a readable pg_dump archive ({why}); {fix}"


def ensure_template(h: ClusterHandle, src: StateSource) -> str:
    """The state's template database, built once per cluster (workers race for it: an advisory lock decides).

    A template is ready once it no longer allows connections (which also keeps stray sessions from blocking
    clones); one found half-built (its builder died) is rebuilt."""
    from psycopg2 import sql

    name = src.template
    ident = sql.Identifier(name)
    with contextlib.closing(h.connect()) as conn, conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(hashtext(%s))", (name,))
        try:
            cur.execute("SELECT datallowconn FROM pg_database WHERE datname = %s", (name,))
            row = cur.fetchone()
            if row is not None and row[0] is False:
                return name
            if row is not None:
                cur.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(ident))
            cur.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(ident, sql.Identifier(SUPERUSER)))
            cur.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(ident))
            cur.execute(
                sql.SQL("GRANT CONNECT, CREATE, TEMPORARY ON DATABASE {} TO {}").format(
                    ident, sql.Identifier(TEMPLATE_ROLE)
                )
            )
            with contextlib.closing(h.connect(name)) as tconn, tconn.cursor() as tcur:
                tcur.execute(
                    sql.SQL("GRANT CREATE, USAGE ON SCHEMA public TO {}").format(sql.Identifier(TEMPLATE_ROLE))
                )
            restore(h, name, src)
            with contextlib.closing(h.connect(name)) as tconn, tconn.cursor() as tcur:
                tcur.execute("ANALYZE")  # one of MCPMark's verifier queries took 56 s without statistics
            cur.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(ident))
            return name
        finally:
            cur.execute("SELECT pg_advisory_unlock(hashtext(%s))", (name,))


# --- trials ------------------------------------------------------------------------------------------------


def server_started(login: Login) -> str:
    """When the trial's PostgreSQL server started, and last re-initialised after a crash (as the trial's role)."""
    import psycopg2

    conn = psycopg2.connect(
        host=login.host,
        port=login.port,
        dbname=login.database,
        user=login.user,
        password=login.password,
        connect_timeout=10,
        application_name="mcpfleet",
    )
    try:
        with conn.cursor() as cur:
            # A crashed backend makes the server reset every session and re-initialise, which keeps its start
            # time but discards its statistics: the shared ones' reset time moves then (measured on PG 15).
            cur.execute(
                "SELECT pg_postmaster_start_time()::text || ' / ' || coalesce(stats_reset::text, '')"
                " FROM pg_stat_bgwriter"
            )
            row = cur.fetchone()
            return str(row[0] if row else "")
    finally:
        conn.close()


# What one trial may write: its cluster lives in RAM (/dev/shm), and one agent's INSERT loop wrote 886 MB in 8 s.
DATA_LIMIT_ENV = "MCPFLEET_PG_DATA_LIMIT_MB"
DATA_LIMIT_MB = 2048  # ~100x MCPMark's largest state
DATA_WATCH_PERIOD_S = 1.0


def data_limit_bytes() -> int:
    raw = os.environ.get(DATA_LIMIT_ENV, "").strip()
    return (int(raw) if raw.isdigit() and int(raw) > 0 else DATA_LIMIT_MB) << 20


def data_size(conn: Any, database: str, whole_cluster: bool) -> int:
    """Bytes on disk of the trial's database, or of every database of a trial's own cluster (its superuser agent
    may create more)."""
    with conn.cursor() as cur:
        if whole_cluster:
            cur.execute("SELECT coalesce(sum(pg_database_size(oid)), 0) FROM pg_database")
        else:
            cur.execute("SELECT pg_database_size(%s)", (database,))
        row = cur.fetchone()
        return int(row[0]) if row else 0


def cut_off(h: ClusterHandle, login: Login, whole_cluster: bool) -> None:
    """Stop the agent's writing for good: a role gets no more connections and its sessions end (its statement in
    flight is rolled back); a superuser agent, whom no limit binds, loses its own cluster's server."""
    from psycopg2 import sql

    with contextlib.closing(h.connect()) as conn:
        conn.autocommit = True
        with conn.cursor() as cur:
            if whole_cluster or login.user == SUPERUSER:
                cur.execute("SELECT pg_read_file('postmaster.pid')")
                row = cur.fetchone()
                pid = int(str(row[0]).split()[0]) if row else 0
                if pid > 0:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGQUIT)  # immediate shutdown: its backends exit at once
                return
            cur.execute(sql.SQL("ALTER ROLE {} CONNECTION LIMIT 0").format(sql.Identifier(login.user)))
            cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (login.user,))


class DataWatch:
    """Bounds what one trial writes (``data_limit_bytes``, polled every second): past it the agent is cut off
    (``cut_off``), its trial goes on to the verifier and is scored as the model's; trial.log says why. The
    server's own checks (``same_server``) then know the server did not fail: the agent was stopped."""

    def __init__(self, h: ClusterHandle, login: Login, whole_cluster: bool, notes: list[str]) -> None:
        self.h, self.login, self.whole_cluster, self.notes = h, login, whole_cluster, notes
        self.limit = data_limit_bytes()
        self.tripped = False
        self._task: asyncio.Task[None] | None = None
        self._conn: Any = None  # one session for the trial's polls, not a connection a second

    def _size(self) -> int:
        try:
            if self._conn is None:
                self._conn = self.h.connect()
                self._conn.autocommit = True
            return data_size(self._conn, self.login.database, self.whole_cluster)
        except Exception:
            self._close()
            raise

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await asyncio.to_thread(self._close)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(DATA_WATCH_PERIOD_S)
            try:
                size = await asyncio.to_thread(self._size)
            except Exception:  # noqa: BLE001 - a server that is gone is for same_server to report
                continue
            if size <= self.limit:
                continue
            self.tripped = True
            await asyncio.to_thread(self._close)
            what = "its cluster's databases" if self.whole_cluster else "its database"
            self.notes.append(
                f"the agent was cut off: {what} reached {size >> 20} MB, over the {self.limit >> 20} MB a trial may "
                f"write ({DATA_LIMIT_ENV}); its later calls and the verifier could not connect"
            )
            with contextlib.suppress(Exception):
                await asyncio.to_thread(cut_off, self.h, self.login, self.whole_cluster)
            return


async def same_server(login: Login, started: str, watch: DataWatch | None = None) -> None:
    """The trial's quiesce, before its verifier, and its recheck after a failing one: EnvironmentLost if its
    server died or restarted under the agent or the verifier (killed, or a crashed backend resetting every
    session of a shared cluster): the model then read "server closed the connection" errors the task never set
    it, or the verifier read a database that was not there. Not the model's failure: an infrastructure error,
    run again."""
    if watch is not None and watch.tripped:
        return  # the agent was cut off on purpose (DataWatch): the server did not fail
    try:
        now = await asyncio.to_thread(server_started, login)
    except Exception as exc:  # noqa: BLE001 - any failure to reach it is the server's
        raise EnvironmentLost(f"the trial's PostgreSQL server is gone: {type(exc).__name__}: {exc}".strip()) from None
    if now != started:
        raise EnvironmentLost(
            f"the trial's PostgreSQL server restarted under the agent (up since {started}, now {now})"
        )


def create_role(h: ClusterHandle, login: Login) -> None:
    """The trial's login role: no superuser, no CREATEROLE/CREATEDB; it will own its database only. With
    ``ROLE_LIMITS`` (temp files, statement time): a runaway query of one trial must not fill the RAM-backed
    cluster every trial shares."""
    from psycopg2 import sql

    with contextlib.closing(h.connect()) as conn, conn.cursor() as cur:
        cur.execute(
            sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD %s").format(
                sql.Identifier(login.user)
            ),
            (login.password,),
        )
        pgcluster.limit_role(cur, login.user)


def create_database(h: ClusterHandle, template: str | None, login: Login, shared: bool = True) -> None:
    """The trial's database (a clone of ``template``, or empty) owned by ``login.user``, with every object in it
    reassigned to that user. On the run's shared cluster nobody else may connect; a cluster of the trial's own
    keeps PostgreSQL's defaults, as MCPMark's server has them (its tasks log in as roles they create)."""
    from psycopg2 import sql

    db, role = sql.Identifier(login.database), sql.Identifier(login.user)
    with contextlib.closing(h.connect()) as conn, conn.cursor() as cur:
        source = sql.SQL(" TEMPLATE {}").format(sql.Identifier(template)) if template else sql.SQL("")
        cur.execute(sql.SQL("CREATE DATABASE {} OWNER {}{} STRATEGY FILE_COPY").format(db, role, source))
        if shared:
            cur.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(db))
    if template:
        with contextlib.closing(h.connect(login.database)) as conn, conn.cursor() as cur:
            tmpl_role = sql.Identifier(TEMPLATE_ROLE)
            cur.execute(sql.SQL("REASSIGN OWNED BY {} TO {}").format(tmpl_role, role))
            # Its one grant in the template. Not DROP OWNED BY: that also revokes its grants on shared objects,
            # i.e. CONNECT on a template another worker is restoring right now.
            cur.execute(sql.SQL("REVOKE ALL ON SCHEMA public FROM {}").format(tmpl_role))


def drop_database(h: ClusterHandle, database: str) -> None:
    from psycopg2 import sql

    with contextlib.closing(h.connect()) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


def drop_trial(h: ClusterHandle, database: str, role: str | None) -> None:
    from psycopg2 import sql

    with contextlib.closing(h.connect()) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        if role and role != SUPERUSER:
            cur.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


async def run_prepare(task: Task, login: Login) -> None:
    """MCPMark's prepare_environment.py: no arguments, cwd = the task folder, POSTGRES_* set, 300 s. Run as the
    verifier is (the pack's code): a clean environment, bounded output, nothing it starts outlives it."""
    res = await run_verifier(task.path / PREPARE, login.env(), [], PREPARE_TIMEOUT_S, cwd=task.path)
    if res.timed_out:
        raise RuntimeError(f"{task.id}: {PREPARE} took longer than {PREPARE_TIMEOUT_S:g} s")
    if res.exit_code != 0:
        raise RuntimeError(prepare_failure(task.id, res.exit_code, res.stderr, res.stdout))


def prepare_failure(task_id: str, exit_code: int | None, stderr: str, stdout: str) -> str:
    """A failed prepare_environment.py, its cause first: the record keeps only an error's first line, cut where a
    traceback starts (faults.one_line), so the script's last line (``ModuleNotFoundError: No module named
    'numpy'``) leads, and its output follows for the trial's log."""
    text = (stderr.strip() or stdout.strip())[-1800:]
    own = [line.strip() for line in text.splitlines() if line.strip() and not CLIP_MARK.fullmatch(line.strip())]
    last = own[-1][:300] if own else "no output"
    return f"{task_id}: {PREPARE} failed ({exit_code}): {last}\n{text}"


def _cluster(resource: Any) -> ClusterHandle:
    if not isinstance(resource, ClusterHandle):
        raise RuntimeError(
            "the postgres service needs its run's cluster: run trials through `mcpfleet run`, "
            "`mcpfleet tasks validate` or `mcpfleet trial`, or pass services.run_resources() to the trial"
        )
    return resource


class PostgresService(Service):
    name = "postgres"
    meta_keys = {"isolation": ISOLATIONS}
    mcpmark_states = "postgres_state"
    spare_servers = True  # see DatabaseSpare
    pod_images = ("postgres-db",)  # the database sidecar (pod_sidecars)

    def sweep_leftovers(self) -> None:
        """Clusters of SIGKILLed runs (~200 MB of RAM in /dev/shm each) went only with the next PostgreSQL run."""
        pgcluster.sweep_stale(pgcluster.runs_root(create=False))

    @contextlib.contextmanager
    def run_resource(
        self, prefork: bool = False, on_lost: Callable[[str], None] | None = None
    ) -> Iterator[ClusterHandle]:
        """The run's cluster; with ``prefork``, also a zygote that forks postgres-mcp per trial (importing it
        costs ~2.3 s of CPU per start), its socket in the cluster's folder and handle."""
        with pgcluster.run_cluster(on_lost) as handle:
            if not prefork:
                yield handle
                return
            exe = server_executable()
            with run_zygote(_prefork(exe) if exe.exists() else None, Path(handle.base), exe.name) as z:
                yield dataclasses.replace(handle, zygote=z.socket if z else None)

    def server_command(self, login: Login, check: bool = True, zygote: str | None = None) -> ServerCommand:
        """postgres-mcp for ``login``: started directly, or forked by the run's ``zygote`` (its socket)."""
        exe = server_executable()
        if check and not exe.exists():
            raise FileNotFoundError(
                f"MCP server postgres-mcp not found at {exe}; run scripts/setup.sh or set {SERVER_ENV}"
            )
        # The DSN (with the trial's password) goes in the environment, where `ps` does not show it.
        env = {"DATABASE_URI": login.dsn(), **SERVER_ENVIRONMENT}
        cmd = ServerCommand(str(exe), ["--access-mode=unrestricted"], env, prefork=_prefork(exe) if zygote else None)
        return route(cmd, zygote)

    @asynccontextmanager
    async def environment(
        self, task: Task, state_dir: Path, resource: Any, *, materialised: bool = False
    ) -> AsyncIterator[TrialEnv]:
        if materialised:  # a pod: its pg-init container built the database; the server is a sidecar
            login = pod_login(state_dir)
            if state_source(task) is None and (task.path / PREPARE).is_file():
                await run_prepare(task, login)
            started = await asyncio.to_thread(server_started, login)
            quiesce = functools.partial(same_server, login, started)
            yield TrialEnv(
                state_dir,
                self.server_command(login, check=False),
                login.env(),
                [login.database],
                quiesce=quiesce,
                recheck=quiesce,
            )
            return
        resource = _cluster(resource)
        tag = secrets.token_hex(4)
        database = f"trial_{tag}"
        state_dir.mkdir(parents=True, exist_ok=True)
        async with AsyncExitStack() as stack:
            mode = isolation(task)
            shared = mode == "database"
            if shared:
                h = resource
                stack.push_async_callback(asyncio.to_thread, drop_trial, h, database, f"agent_{tag}")
            else:  # removed with everything in it
                h = await stack.enter_async_context(pgcluster.private_cluster(resource, tag))
            if mode == "cluster":
                login = Login(h.host, h.port, database, SUPERUSER, h.password)
            else:
                login = Login(h.host, h.port, database, f"agent_{tag}", secrets.token_urlsafe(18))
                await asyncio.to_thread(create_role, h, login)
            yield await stack.enter_async_context(self._filled(task, h, login, state_dir, shared, resource.zygote))

    @asynccontextmanager
    async def _filled(
        self,
        task: Task,
        h: ClusterHandle,
        login: Login,
        state_dir: Path,
        shared: bool = True,
        zygote: str | None = None,
    ) -> AsyncIterator[TrialEnv]:
        """Create the trial's database from its state (or empty, then prepare_environment.py); its server is
        forked by the run's ``zygote`` if there is one (a trial's own cluster included). What the agent writes
        is bounded (``DataWatch``) while the block runs."""
        src = state_source(task)
        template = await asyncio.to_thread(ensure_template, h, src) if src else None
        await asyncio.to_thread(create_database, h, template, login, shared)
        if src is None and (task.path / PREPARE).is_file():
            await run_prepare(task, login)
        started = await asyncio.to_thread(server_started, login)
        notes: list[str] = []
        watch = DataWatch(h, login, not shared, notes)
        quiesce = functools.partial(same_server, login, started, watch)
        watch.start()
        try:
            yield TrialEnv(
                state_dir,
                self.server_command(login, zygote=zygote),
                login.env(),
                [login.database],
                quiesce=quiesce,
                recheck=quiesce,  # the same question after the verifier: is it still the server the agent had?
                notes=notes,
            )
        finally:
            await watch.stop()

    @asynccontextmanager
    async def spare(self, state_dir: Path, resource: Any) -> AsyncIterator[Spare]:
        h = _cluster(resource)
        tag = secrets.token_hex(4)
        login = Login(h.host, h.port, f"trial_{tag}", f"agent_{tag}", secrets.token_urlsafe(18))
        try:
            await asyncio.to_thread(create_role, h, login)
            await asyncio.to_thread(create_database, h, None, login)  # a placeholder the server connects to
            yield DatabaseSpare(self, h, login, state_dir)
        finally:
            await asyncio.to_thread(drop_trial, h, login.database, login.user)

    def spare_fits(self, task: Task) -> bool:
        return isolation(task) == "database"

    def trial_params(self, task: Task) -> dict[str, Any]:
        src = state_source(task)
        dump = None
        if src is not None:  # the name `materialise` gives it in the state volume
            dump = f"{task.category}.sql" if src.kind == "generator" else src.path.name
        return {"dump": dump, "isolation": isolation(task)}

    def pod_volumes(self, params: dict[str, Any], pod: PodContext) -> list[dict[str, Any]]:
        return [pod.empty_dir(PGDATA_VOLUME)]

    def pod_sidecars(self, params: dict[str, Any], pod: PodContext) -> list[dict[str, Any]]:
        return pod_containers(params, pod)

    def materialise(self, task: Task, dest: Path) -> int:
        """The state as a restorable file in ``dest`` (generators run here): what a pod's database restores."""
        dest.mkdir(parents=True, exist_ok=True)
        src = state_source(task)
        if src is None:
            return 0
        if src.kind == "generator":
            _run(
                [sys.executable, str(src.path), str(dest / f"{task.category}.sql")],
                "state generator",
                RESTORE_TIMEOUT_S,
                env=verifier_env({}),
                cwd=str(dest),
            )
        else:
            from mcpfleet.runner.environment.states import contained

            shutil.copyfile(contained(src.path, task.state_bound), dest / src.path.name)
        return 1

    def state_files(self, task: Task) -> list[Path]:
        src = state_source(task)
        return [src.path] if src else []

    def result_is_error(self, text: str) -> bool:
        # postgres-mcp returns a failed statement as an ordinary result whose text starts like this.
        return text.startswith("Error: ")

    def state_names(self, category: str) -> list[str]:
        return [f"{category}.{ext}" for ext, _ in STATE_KINDS]

    def check_state(self, task: Task) -> list[str]:
        """A missing state, or a ``.backup`` pg_restore cannot read through (else every trial of it fails)."""
        src = state_source(task)
        if src is None and not (task.path / PREPARE).is_file():
            names = "/".join(f"{task.category}.{ext}" for ext, _ in STATE_KINDS)
            return [f"{task.id}: no initial state ({names} in {task.states_folder}) and no {PREPARE}"]
        if src is not None:
            from mcpfleet.runner.environment.states import contained
            from mcpfleet.runner.spec.task import TaskError

            try:
                contained(src.path, task.state_bound)
            except TaskError as exc:  # a states folder or state file that links out of the pack
                return [f"{task.id}: {exc}"]
        if src is not None and src.kind == "backup" and (why := backup_problem(src.path)):
            return [f"{task.id}: {why}"]
        return []


# --- Kubernetes -------------------------------------------------------------------------------------------
# A trial pod of a PostgreSQL task: after the state init container (`mcpfleet materialise`: the dump, a
# generator run), "pg-init" (servers/postgres/bin/mcpfleet-pg-init in the database image) builds the data
# directory with the trial's database restored, as the agent's login, and writes that login to the state
# volume; the "postgres" native sidecar serves it on 127.0.0.1 (startup probe: pg_isready); "mcp-postgres"
# serves postgres-mcp over streamable HTTP through supergateway (its password from a libpq pgpass file, never
# the pod spec). The pod is the trial's own cluster, so the login is as locally: a role owning the database
# only, or the superuser for tasks that manage roles. pg-init copies a data directory prebuilt for the exact
# state and login when the database image carries one (the bundled states; 2-3.6x faster, bench/bench_pg_pod.py),
# else restores the dump (any pack).

POD_PG_PORT = 5432
PGDATA_VOLUME = "pgdata"
PGDATA_MOUNT = "/pgdata"
POD_DATABASE = "trial"
POD_ROLE = "agent"
POD_LOGIN_DIR = ".postgres"  # in the state volume: login.json (the runner's) and pgpass (the MCP server's)


def pod_login(state_dir: Path) -> Login:
    """The login pg-init wrote for this pod's trial (the runner reads it; the verifier gets it)."""
    path = state_dir / POD_LOGIN_DIR / "login.json"
    try:
        doc = json.loads(path.read_text())
        return Login(str(doc["host"]), int(doc["port"]), str(doc["database"]), str(doc["user"]), str(doc["password"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"the pod's database login is missing or unreadable ({path}): {exc}") from None


def pod_containers(params: dict[str, Any], pod: PodContext) -> list[dict[str, Any]]:
    """pg-init (one-shot), then the postgres and mcp-postgres native sidecars, in start order."""
    user = SUPERUSER if params.get("isolation") == "cluster" else POD_ROLE
    dump = params.get("dump")
    login_dir = f"{pod.state_mount}/{POD_LOGIN_DIR}"
    pg_env = [
        {"name": "PGDATA", "value": f"{PGDATA_MOUNT}/data"},
        {"name": "PGSOCKET", "value": f"{PGDATA_MOUNT}/run"},
        {"name": "PGPORT", "value": str(POD_PG_PORT)},
        {"name": "TZ", "value": "UTC"},
        {"name": "LANG", "value": "C.UTF-8"},
    ]
    pg_mounts = [{"name": PGDATA_VOLUME, "mountPath": PGDATA_MOUNT}, {"name": "state", "mountPath": pod.state_mount}]
    extra: dict[str, Any] = {}
    if pod.resources:
        extra["resources"] = pod.resources
    if pod.security:
        extra["securityContext"] = pod.security
    settings = [a for k, v in SETTINGS.items() if k != "listen_addresses" for a in ("-c", f"{k}={v}")]
    db_image = pod.image("postgres-db")
    probe = {"periodSeconds": 1, "failureThreshold": 120}
    return [
        {
            "name": "pg-init",
            "image": db_image,
            "command": ["mcpfleet-pg-init"],
            "args": settings,  # its temporary server's settings: the sidecar's own
            "env": [
                *pg_env,
                {"name": "STATE_DUMP", "value": f"{pod.state_mount}/{dump}" if dump else ""},
                {"name": "DB_NAME", "value": POD_DATABASE},
                {"name": "DB_USER", "value": user},
                {"name": "LOGIN_DIR", "value": login_dir},
                {"name": "DB_ROLE_LIMITS", "value": " ".join(f"{k}={v}" for k, v in pgcluster.ROLE_LIMITS.items())},
            ],
            "volumeMounts": pg_mounts,
            "terminationMessagePolicy": "FallbackToLogsOnError",
            **extra,
        },
        {
            "name": "postgres",
            "image": db_image,
            "restartPolicy": "Always",
            "command": ["mcpfleet-pg-serve"],
            "args": settings,
            "env": pg_env,
            "ports": [{"name": "postgres", "containerPort": POD_PG_PORT, "protocol": "TCP"}],
            "startupProbe": {
                "exec": {"command": ["pg_isready", "-h", "127.0.0.1", "-q"]},
                **probe,
            },
            "volumeMounts": pg_mounts,
            **extra,
        },
        stdio_server_sidecar(
            "postgres",
            pod,
            command="postgres-mcp --access-mode=unrestricted",
            env=[
                {"name": "PGPORT", "value": str(POD_PG_PORT)},
                {"name": "DATABASE_URI", "value": f"postgresql://{user}@127.0.0.1:$(PGPORT)/{POD_DATABASE}"},
                {"name": "PGPASSFILE", "value": f"{login_dir}/pgpass"},
            ],
            mounts=[
                {"name": "state", "mountPath": pod.state_mount, "readOnly": True},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
        ),
    ]


class DatabaseSpare(Spare):
    """A trial's login role and database name, with postgres-mcp already started and connected.

    postgres-mcp connects at start (to a database that must exist, or it waits 30 s) and again only when a
    query fails. So the spare starts it on an empty placeholder database; once it is up, the placeholder is
    dropped (which ends the server's pooled connection) and one harmless call, which fails, makes the server
    discard its pool. The claiming trial's database is then created under the same name from its template,
    and the agent's first call connects to it afresh. The agent never sees the placeholder.
    """

    needs_session = True

    def __init__(self, service: PostgresService, h: ClusterHandle, login: Login, state_dir: Path):
        self.service, self.h, self.login, self.state_dir = service, h, login, state_dir
        self.server = service.server_command(login, zygote=h.zygote)

    async def started(self, session: Any) -> None:
        await asyncio.to_thread(drop_database, self.h, self.login.database)
        with contextlib.suppress(Exception):
            await session.call_tool("execute_sql", {"sql": "SELECT 1"})

    @asynccontextmanager
    async def claim(self, task: Task) -> AsyncIterator[TrialEnv]:
        try:
            async with self.service._filled(task, self.h, self.login, self.state_dir, zygote=self.h.zygote) as env:
                yield env
        finally:
            await asyncio.to_thread(drop_trial, self.h, self.login.database, self.login.user)
