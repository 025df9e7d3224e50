"""Grading a PostgreSQL trial in a session the agent cannot have influenced (issue 48).

A verifier used to log in as the agent's own role, so whatever the agent made that role's sessions start with
(``ALTER ROLE CURRENT_USER SET search_path = shadow, public``, or the same per database) reached it: a shadow table
passed the verifier while the real one was untouched. Before a verifier runs now (``Grading.prepare``, as the
server's superuser, in a session of its own whose settings are given at connection and so override any the agent
made):

1. The agent's sessions end and it cannot start new ones: a role of its own is made NOLOGIN, then every backend
   of it is terminated. A superuser agent (``isolation: cluster``, whose server is its own) first loses its
   password (it changes), the server's configuration files go back to the bytes they had before the agent's first
   call (ALTER SYSTEM's postgresql.auto.conf, postgresql.conf, pg_hba.conf, pg_ident.conf: statement logging, a
   search path or a trust line it added) and are reloaded, every other client session and every process it
   started (``COPY ... PROGRAM``'s shells, daemons that left their session: ``strays``) is stopped.
2. Every per-role and per-database setting that could reach a session of the trial (``pg_db_role_setting``: all
   of a cluster of the trial's own, else those of its database and its role) is removed, and trial.log says
   which.
3. A grader role is made, which did not exist while the agent ran (so nothing of the agent's names it): a member
   of the agent's role (its privileges, and its ownership, as MCPMark's verifier had logging in as the agent), or
   a superuser where the agent was one. The verifier (and a failing verifier's recheck) log in as it.

What a superuser agent leaves in the data it is graded on (functions, triggers, event triggers, rules, a
relation in a schema the verifier searches) is its end state, as for any agent: the verifier reads it as it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.base import EnvironmentLost, GradingRefused
from mcpfleet.runner.services.pgcluster import SUPERUSER
from mcpfleet.runner.services.pgtrial import Login, connect

GRADER_PREFIX = "mcpfleet_grader_"
# Backends of the server's own (none is the agent's); every other backend (a client's, a background worker an agent
# registered) is ended.
SERVER_BACKENDS = (
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "autovacuum worker",
    "logical replication launcher",
    "archiver",
    "startup",
)
END_WAIT_S = 10.0
CONF_RELOAD_WAIT_S = 10.0


def _scalar(cur: Any, query: str, args: tuple[Any, ...] = ()) -> Any:
    cur.execute(query, args)
    row = cur.fetchone()
    return row[0] if row else None


CONFIG_FILES = (
    "SELECT pg_catalog.current_setting('config_file'), pg_catalog.current_setting('hba_file'), "
    "pg_catalog.current_setting('ident_file'), pg_catalog.current_setting('data_directory') || '/postgresql.auto.conf'"
)


def baseline(admin: Login) -> dict[str, bytes]:
    """The server's configuration files as they are (before the agent's first call): path -> bytes."""
    with contextlib.closing(connect(admin, "postgres")) as conn, conn.cursor() as cur:
        cur.execute(CONFIG_FILES)
        paths = cur.fetchone() or ()
        return {str(p): bytes(_scalar(cur, "SELECT pg_catalog.pg_read_binary_file(%s)", (p,))) for p in paths}


def _restore_config(cur: Any, files: dict[str, bytes], notes: list[str]) -> Any:
    """Each configuration file back to its bytes (written by the server's OS user, which owns them: through a large
    object, the only way SQL writes arbitrary bytes), then a reload. Returns when it was asked for."""
    changed = []
    for path, content in files.items():
        try:
            now = bytes(_scalar(cur, "SELECT pg_catalog.pg_read_binary_file(%s)", (path,)))
        except Exception:  # noqa: BLE001 - removed or unreadable: written back all the same
            now = None
        if now == content:
            continue
        changed.append(os.path.basename(path))
        oid = _scalar(cur, "SELECT pg_catalog.lo_from_bytea(0, %s)", (content,))
        try:
            cur.execute("SELECT pg_catalog.lo_export(%s, %s)", (oid, path))
        finally:
            cur.execute("SELECT pg_catalog.lo_unlink(%s)", (oid,))
    start = _scalar(cur, "SELECT pg_catalog.clock_timestamp()")
    cur.execute("SELECT pg_catalog.pg_reload_conf()")
    if changed:
        notes.append(f"grading: the server's configuration the agent changed was put back: {', '.join(changed)}")
    return start


@dataclass
class Grading:
    """How one trial is graded (``prepare``, once, after the agent and before its verifier): ``admin`` is the
    server's superuser (on the run's shared cluster, the run's own), ``agent`` the trial's login. ``superuser``:
    the agent was the superuser (then ``admin`` is the same login until ``prepare`` changes its password);
    ``whole_cluster``: the cluster is the trial's alone; ``config``: ``baseline`` before the agent (a superuser
    agent's); ``strays``: stops the processes a superuser agent started (the admin session's cursor given),
    returning how many."""

    admin: Login
    agent: Login
    superuser: bool
    whole_cluster: bool
    config: dict[str, bytes] | None = field(default=None, repr=False)
    strays: Callable[[Any], int] | None = None
    notes: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)  # the graders made: for the caller to drop (after the database)
    login: Login | None = None  # the grader's, once prepared

    def prepare(self) -> Login:
        """The grader's login (its variables replace the agent's in the verifier's environment)."""
        try:
            with contextlib.closing(connect(self.admin, "postgres")) as conn, conn.cursor() as cur:
                self._prepare(cur)
        except GradingRefused:
            raise
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}".strip()
            if not self.superuser:  # the run's cluster and its superuser are out of the agent's reach: ours to fail
                raise EnvironmentLost(f"the trial's PostgreSQL server could not be made ready to grade: {why}") from exc
            # A superuser agent could have made this so (its server's roles, files and processes are its own).
            raise GradingRefused(f"its PostgreSQL server could not be made ready to grade: {why}") from exc
        assert self.login is not None
        return self.login

    def _prepare(self, cur: Any) -> None:
        from psycopg2 import sql

        agent = sql.Identifier(self.agent.user)
        if self.superuser:  # its password first: nothing of the agent's logs in again (but through a trust line)
            password = secrets.token_urlsafe(24)
            cur.execute(sql.SQL("ALTER ROLE {} PASSWORD %s").format(sql.Identifier(SUPERUSER)), (password,))
            self.admin = dataclasses.replace(self.admin, password=password)
            sessions, stopped = _end_sessions(cur, None), self._stop_strays(cur)
            if self.config is not None:  # then no trust line either: what is left cannot log in again
                _await_reload(self.admin, _restore_config(cur, self.config, self.notes))
            sessions, stopped = sessions + _end_sessions(cur, None), stopped + self._stop_strays(cur)
            if stopped:
                self.notes.append(f"grading: stopped {stopped} process(es) the agent started")
        else:
            cur.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(agent))
            sessions = _end_sessions(cur, self.agent.user)
        if sessions:
            self.notes.append(f"grading: ended {sessions} session(s) of the agent's")
        self._clear_settings(cur)
        self.login = self._make_grader(cur)

    def _stop_strays(self, cur: Any) -> int:
        return self.strays(cur) if self.strays is not None else 0

    def _clear_settings(self, cur: Any) -> None:
        args: tuple[str, ...] = ()
        if self.whole_cluster:
            where = "true"
        else:
            where = (
                "setdatabase = (SELECT oid FROM pg_catalog.pg_database WHERE datname = %s) "
                "OR setrole = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = %s)"
            )
            args = (self.agent.database, self.agent.user)
        cur.execute(
            f"WITH gone AS (DELETE FROM pg_catalog.pg_db_role_setting WHERE {where} RETURNING *) "
            "SELECT (SELECT datname FROM pg_catalog.pg_database WHERE oid = setdatabase), "
            "(SELECT rolname FROM pg_catalog.pg_roles WHERE oid = setrole), setconfig FROM gone ORDER BY 1, 2",
            args,
        )
        ours = {f"{k}={v}" for k, v in pgcluster.ROLE_LIMITS.items()}  # the limits every trial login is given
        for database, role, config in cur.fetchall():
            if theirs := [c for c in config or [] if c not in ours]:
                scope = f"role {role}" if role else "every role"
                scope += f" in database {database}" if database else ""
                self.notes.append(f"grading: removed the settings made for {scope}: {'; '.join(theirs)}")

    def _make_grader(self, cur: Any) -> Login:
        from psycopg2 import sql

        name, password = GRADER_PREFIX + secrets.token_hex(4), secrets.token_urlsafe(18)
        grader = sql.Identifier(name)
        power = "SUPERUSER" if self.superuser else "NOSUPERUSER INHERIT"
        cur.execute(
            sql.SQL(f"CREATE ROLE {{}} LOGIN {power} NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD %s").format(grader),
            (password,),
        )
        self.roles.append(name)
        if not self.superuser:
            cur.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(self.agent.user), grader))
        pgcluster.limit_role(cur, name)
        return Login(self.agent.host, self.agent.port, self.agent.database, name, password)


def _end_sessions(cur: Any, role: str | None) -> int:
    """Terminate ``role``'s backends (None: every client backend and worker but the server's own and this one),
    until none is left. Returns how many there were."""
    if role is None:
        which = "backend_type <> ALL(%s)"
        args: tuple[Any, ...] = (list(SERVER_BACKENDS),)
    else:
        which, args = "usename = %s", (role,)
    deadline = time.monotonic() + END_WAIT_S
    query = f"SELECT pid FROM pg_catalog.pg_stat_activity WHERE pid <> pg_catalog.pg_backend_pid() AND {which}"
    ended: set[int] = set()
    while True:
        cur.execute(query, args)
        pids = [pid for (pid,) in cur.fetchall()]
        if not pids:
            return len(ended)
        ended.update(pids)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pids)} session(s) of the agent would not end")
        cur.execute("SELECT pg_catalog.pg_terminate_backend(pid, 2000) FROM unnest(%s::int[]) pid", (pids,))


def _await_reload(admin: Login, since: Any) -> None:
    """Until a new session runs with the reloaded configuration (the postmaster rereads it on a signal, a moment
    after pg_reload_conf returns: a session forked before would start with the old settings)."""
    deadline = time.monotonic() + CONF_RELOAD_WAIT_S
    while True:
        with contextlib.closing(connect(admin, "postgres")) as conn, conn.cursor() as cur:
            if _scalar(cur, "SELECT pg_catalog.pg_conf_load_time() >= %s", (since,)):
                return
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not reload its configuration")
        time.sleep(0.02)


# --- processes a superuser agent started -------------------------------------------------------------------


def _procs() -> Iterator[tuple[int, int, set[int]]]:
    """(pid, ppid, uids) of every live process."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry.name}/status") as f:
                uid_line = next(line for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration, IndexError):
            continue
        if fields[0] != "Z":
            yield int(entry.name), int(fields[1]), {int(u) for u in uid_line.split()[1:]}


def _environ_names(pid: int, data: Path) -> bool:
    try:
        return f"PGDATA={data}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def stray_pids(data: Path, uid: int | None) -> list[int]:
    """The processes a trial cluster's superuser started through its server (``COPY ... PROGRAM`` shells and what
    they left, daemons included), all but the postmaster (``data``'s) and its children (its backends, this
    grading's among them): with a throwaway ``uid`` (pgcluster.trial_user) every process of that uid; else those
    still under a backend, and those whose environment names the server's data folder, as the postmaster's does
    and whatever it starts inherits (its backends make sessions of their own: the session tells nothing). A
    process that cleared its environment and left its parent is not found then."""
    postmaster = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    procs = {pid: (ppid, uids) for pid, ppid, uids in _procs()}
    backends = {pid for pid, (ppid, _) in procs.items() if ppid == postmaster}
    out = []
    for pid, (ppid, uids) in procs.items():
        if pid in (postmaster, os.getpid()) or pid in backends:
            continue
        if uid is not None:
            if uid in uids:
                out.append(pid)
            continue
        parent, seen = ppid, 0
        while parent not in (0, 1, postmaster) and parent not in backends and seen < 64:
            parent, seen = procs.get(parent, (0, set()))[0], seen + 1
        if parent in backends or _environ_names(pid, data):
            out.append(pid)
    return out


def stop_strays(data: Path, uid: int | None) -> int:
    """Stop (SIGSTOP, so none forks away meanwhile) then kill ``stray_pids`` until none is left. Returns how many."""
    if uid is not None and uid not in pgcluster.TRIAL_IDS:
        uid = None  # the run's own server user, whose other processes are the run's
    stopped: set[int] = set()
    deadline = time.monotonic() + END_WAIT_S
    while (pids := stray_pids(data, uid)) and time.monotonic() < deadline:
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        stopped.update(pids)
        time.sleep(0.01)
    return len(stopped)


POD_STRAYS = "mcpfleet-pg-serve --stop-strays"  # in the database container, as its server's OS user


def stop_pod_strays(cur: Any) -> int:
    """``stop_strays`` for a trial pod's database container, run there by its server (the runner is another
    container): servers/postgres/bin/mcpfleet-pg-serve --stop-strays, which prints ``stopped N``."""
    cur.execute("CREATE TEMP TABLE IF NOT EXISTS mcpfleet_strays (line text)")
    cur.execute(f"COPY mcpfleet_strays FROM PROGRAM '{POD_STRAYS}'")
    cur.execute("SELECT line FROM mcpfleet_strays")
    words = " ".join(line for (line,) in cur.fetchall()).split()
    cur.execute("DROP TABLE mcpfleet_strays")
    return int(words[-1]) if words and words[-1].isdigit() else 0
