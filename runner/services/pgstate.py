"""A PostgreSQL task's initial state, restored once per cluster into a template database each trial clones.

States: ``<states>/<category>.py`` (a generator run as ``python <category>.py OUT.sql``), ``<category>.sql``
(psql) or ``<category>.backup`` (pg_restore), in the pack's ``postgres/states/`` or ``tasks.statesPath``
(as ``postgres/<category>.*`` or MCPMark's flat ``postgres_state/<category>.*``). A category with no state
gets an empty database, then its ``prepare_environment.py`` runs, as in MCPMark.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mcpfleet.runner.environment.verifier import CLIP_MARK, python_command, run_program, run_verifier, verifier_env
from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.pgcluster import SUPERUSER, TEMPLATE_ROLE, ClusterHandle
from mcpfleet.runner.services.pgtrial import Login

if TYPE_CHECKING:
    from mcpfleet.runner.spec.task import Task

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


def _ident(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9_]", "_", text.lower())[:limit]


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
            gen = python_command(src.path, [str(path)])
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
