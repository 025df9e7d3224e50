"""One trial's database on a cluster: its login role and clone, a bound on what it writes, its server's checks."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.base import EnvironmentLost
from mcpfleet.runner.services.pgcluster import SUPERUSER, TEMPLATE_ROLE, ClusterHandle


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


# The session grading is prepared in: set at connection, so no per-role or per-database setting of the agent's
# applies (a search path resolving names in its schemas, libraries preloaded into the session, logging that would
# put a password in the server log), and nothing it left hangs it.
ADMIN_OPTIONS = " ".join(
    f"-c {k}={v}"
    for k, v in {
        "search_path": "pg_catalog,pg_temp",
        "session_preload_libraries": "",
        "local_preload_libraries": "",
        "log_statement": "none",
        "log_min_duration_statement": "-1",
        "log_min_error_statement": "panic",
        "log_duration": "off",
        "statement_timeout": "60s",
        "lock_timeout": "30s",
        "default_transaction_read_only": "off",
        "idle_in_transaction_session_timeout": "0",
    }.items()
)


def connect(login: Login, database: str | None = None) -> Any:
    """An autocommit session of ``login`` (to ``database``, else its own) with ``ADMIN_OPTIONS``."""
    import psycopg2

    conn = psycopg2.connect(
        host=login.host,
        port=login.port,
        dbname=database or login.database,
        user=login.user,
        password=login.password,
        connect_timeout=10,
        application_name="mcpfleet",
        options=ADMIN_OPTIONS,
    )
    conn.autocommit = True
    return conn


def server_started(login: Login) -> str:
    """When the trial's PostgreSQL server started, and last re-initialised after a crash (asked as ``login``, its
    superuser: a role of the agent's could not answer once grading began)."""
    conn = connect(login)
    try:
        with conn.cursor() as cur:
            # A crashed backend makes the server reset every session and re-initialise, which keeps its start
            # time but discards its statistics: the shared ones' reset time moves then (measured on PG 15). As
            # epochs: the text of a timestamp follows the session's TimeZone, which the agent may have set for
            # its role (the same server then read as restarted: an infrastructure error, run again).
            cur.execute(
                "SELECT extract(epoch FROM pg_catalog.pg_postmaster_start_time())::text || ' / ' || "
                "coalesce(extract(epoch FROM stats_reset)::text, '') FROM pg_catalog.pg_stat_bgwriter"
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
            after = "its server was stopped: neither its later calls nor the verifier could connect"
            if not (self.whole_cluster or self.login.user == SUPERUSER):
                after = "its later calls could not connect"
            self.notes.append(
                f"the agent was cut off: {what} reached {size >> 20} MB, over the {self.limit >> 20} MB a trial may "
                f"write ({DATA_LIMIT_ENV}); {after}"
            )
            with contextlib.suppress(Exception):
                await asyncio.to_thread(cut_off, self.h, self.login, self.whole_cluster)
            return


# A connection that timed out is asked again before the server is called gone: on a machine at 16 runnable
# processes a core (tasks stress at concurrency 8 beside other work), one of 640 stress trials' checks waited out
# its 10 s connect_timeout with the server up, and the trial ended as an infrastructure error. A refused or reset
# connection is a dead server at once.
CONNECT_TRIES = 3


def _timed_out(exc: BaseException) -> bool:
    return "timeout expired" in str(exc)


async def same_server(login: Login, started: str, watch: DataWatch | None = None) -> None:
    """The trial's quiesce, before its verifier, and its recheck after a failing one: EnvironmentLost if its
    server died or restarted under the agent or the verifier (killed, or a crashed backend resetting every
    session of a shared cluster): the model then read "server closed the connection" errors the task never set
    it, or the verifier read a database that was not there. Not the model's failure: an infrastructure error,
    run again."""
    if watch is not None and watch.tripped:
        return  # the agent was cut off on purpose (DataWatch): the server did not fail
    for attempt in range(1, CONNECT_TRIES + 1):
        try:
            now = await asyncio.to_thread(server_started, login)
            break
        except Exception as exc:  # noqa: BLE001 - any failure to reach it is the server's
            if attempt < CONNECT_TRIES and _timed_out(exc):
                continue
            lost = f"the trial's PostgreSQL server is gone: {type(exc).__name__}: {exc}".strip()
            raise EnvironmentLost(lost) from None
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


def drop_trial(h: ClusterHandle, database: str, role: str | None, graders: list[str] | tuple[str, ...] = ()) -> None:
    """The trial's database, then its role and its graders (which may own what a verifier made in it)."""
    from psycopg2 import sql

    with contextlib.closing(h.connect()) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        for name in [role, *graders]:
            if name and name != SUPERUSER:
                cur.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
