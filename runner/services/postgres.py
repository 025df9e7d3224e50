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
XID (unless HOT-updated), and evaluates its expressions on them. So on the shared cluster another trial's long
transaction (its UPDATE, its index build, its verifier) can fail a trial whose agent fixes rows and then indexes
an expression the old values make raise (``daterange(from, to)`` over periods it just un-inverted), which a
serial run never does. Such a task declares ``"isolation": "cluster-owner"``: a cluster of its own, logged in as
its database's owner as on the shared one (its state can also keep the fixes HOT: hr's salaries has a
fillfactor, see docs/postgres.md).

Grading. The verifier never logs in as the agent: before it runs, the agent's sessions (and a superuser agent's
processes and server configuration) are dealt with, every per-role and per-database setting it made is removed,
and a grader role made then is the verifier's login (pggrade.py).

A task's state and its template database are pgstate.py (state_source, which finds the state, is here: it
reads PostgresService.mcpmark_states), a trial's database and login pgtrial.py, its grading pggrade.py, a trial
pod's containers pgpod.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import re
import secrets
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.environment.server import Prefork, ServerCommand, servers_root
from mcpfleet.runner.environment.verifier import python_command, verifier_env
from mcpfleet.runner.services import pgcluster, pggrade
from mcpfleet.runner.services.base import PodContext, Service, Spare, TrialEnv
from mcpfleet.runner.services.pgcluster import SUPERUSER, ClusterHandle
from mcpfleet.runner.services.pgpod import (
    PG_ADMIN_VOLUME,
    PGDATA_VOLUME,
    pod_admin,
    pod_containers,
    pod_login,
    pod_runner,
)
from mcpfleet.runner.services.pgstate import (
    PREPARE,
    RESTORE_TIMEOUT_S,
    STATE_KINDS,
    StateSource,
    _run,
    backup_problem,
    ensure_template,
    run_prepare,
)
from mcpfleet.runner.services.pgtrial import (
    DataWatch,
    Login,
    create_database,
    create_role,
    drop_database,
    drop_trial,
    same_server,
    server_started,
)
from mcpfleet.runner.services.prefork import console_script, route, run_zygote

if TYPE_CHECKING:
    from mcpfleet.runner.spec.task import Task

SERVER_ENV = "MCPFLEET_POSTGRES_MCP"  # path to a postgres-mcp executable, instead of servers/postgres-mcp/.venv


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


def _cluster(resource: Any) -> ClusterHandle:
    if not isinstance(resource, ClusterHandle):
        raise RuntimeError(
            "the postgres service needs its run's cluster: run trials through `mcpfleet run`, "
            "`mcpfleet tasks validate` or `mcpfleet trial`, or pass services.run_resources() to the trial"
        )
    return resource


async def _grading(
    login: Login, admin: Login, whole_cluster: bool, strays: Callable[[Any], int], graders: list[str]
) -> pggrade.Grading:
    """How the trial will be graded (pggrade.py): as the trial begins, a superuser agent's server configuration is
    taken as it is (what grading puts back)."""
    superuser = login.user == SUPERUSER
    config = await asyncio.to_thread(pggrade.baseline, admin) if superuser else None
    return pggrade.Grading(admin, login, superuser, whole_cluster, config, strays if superuser else None, roles=graders)


async def _trial_env(
    state_dir: Path, server: ServerCommand, grading: pggrade.Grading, watch: DataWatch | None = None
) -> TrialEnv:
    """The trial's environment: its server and the agent's login; before the verifier, a check that the server
    is still the one the agent had (``same_server``, asked as its superuser: an agent's role cannot lock it out),
    then grading prepared (``pggrade.Grading``), whose grader the verifier logs in as."""
    login = grading.agent
    started = await asyncio.to_thread(server_started, grading.admin)

    async def quiesce() -> None:
        await same_server(grading.admin, started, watch)

    async def grade() -> dict[str, str]:
        if watch is not None:
            cut_off = watch.tripped and (grading.whole_cluster or grading.superuser)
            await watch.stop()  # nothing of the agent's writes any more
            if cut_off:  # its server was stopped on purpose (DataWatch): nothing to grade, nor anyone to grade it
                return {}
        return (await asyncio.to_thread(grading.prepare)).env()

    async def recheck() -> None:  # the same question after a failing verifier (grading may have a new password)
        await same_server(grading.admin, started, watch)

    return TrialEnv(
        state_dir,
        server,
        login.env(),
        [login.database],
        quiesce=quiesce,
        grading=grade,
        recheck=recheck,
        notes=grading.notes,
    )


def _stop_strays(data: Path, uid: int | None, _cur: Any) -> int:
    return pggrade.stop_strays(data, uid)


def confinement_problem() -> str | None:
    """Why this machine cannot confine a trial cluster's superuser (its ``COPY ... PROGRAM`` shell) to a world of
    its own, a throwaway uid in its own mounts, network and /proc (see ``pgcluster.private_cluster``); None when it can.
    ``MCPFLEET_SANDBOX=off`` is the user's own choice, not the machine's limit: not a problem here."""
    from mcpfleet.runner.environment import sandbox

    if os.geteuid() != 0:
        return "mcpfleet runs as a user other than root, so a trial cluster cannot run as a throwaway uid"
    if not (pgcluster.ids_mapped()):
        return f"uids {pgcluster.TRIAL_IDS[0]}-{pgcluster.TRIAL_IDS[-1]} are not mapped in this user namespace"
    if os.environ.get(sandbox.OFF_ENV, "").lower() in ("off", "0", "no", "false"):
        return None
    if not sandbox.available():
        return "this machine cannot make namespaces (unshare fails: an unprivileged container?)"
    if not sandbox.own_network_available():
        return f"this kernel ({os.uname().release}) is older than 5.8 (a /proc of its own would change the machine's)"
    return None


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
            grading = await _grading(login, pod_admin(), True, pggrade.stop_pod_strays, [])
            yield await _trial_env(state_dir, self.server_command(login, check=False), grading)
            return
        resource = _cluster(resource)
        tag = secrets.token_hex(4)
        database = f"trial_{tag}"
        state_dir.mkdir(parents=True, exist_ok=True)
        graders: list[str] = []  # dropped after the database, which what a verifier made as one is in
        async with AsyncExitStack() as stack:
            mode = isolation(task)
            shared = mode == "database"
            if shared:
                h = resource
                stack.push_async_callback(asyncio.to_thread, drop_trial, h, database, f"agent_{tag}", graders)
            else:  # removed with everything in it
                h = await stack.enter_async_context(pgcluster.private_cluster(resource, tag))
            if mode == "cluster":
                login = Login(h.host, h.port, database, SUPERUSER, h.password)
            else:
                login = Login(h.host, h.port, database, f"agent_{tag}", secrets.token_urlsafe(18))
                await asyncio.to_thread(create_role, h, login)
            filled = self._filled(task, h, login, state_dir, shared, resource.zygote, graders)
            yield await stack.enter_async_context(filled)

    @asynccontextmanager
    async def _filled(
        self,
        task: Task,
        h: ClusterHandle,
        login: Login,
        state_dir: Path,
        shared: bool = True,
        zygote: str | None = None,
        graders: list[str] | None = None,
    ) -> AsyncIterator[TrialEnv]:
        """Create the trial's database from its state (or empty, then prepare_environment.py); its server is
        forked by the run's ``zygote`` if there is one (a trial's own cluster included). What the agent writes
        is bounded (``DataWatch``) while the block runs. The graders made for it are added to ``graders``."""
        src = state_source(task)
        template = await asyncio.to_thread(ensure_template, h, src) if src else None
        await asyncio.to_thread(create_database, h, template, login, shared)
        if src is None and (task.path / PREPARE).is_file():
            await run_prepare(task, login)
        admin = Login(h.host, h.port, "postgres", SUPERUSER, h.password)
        strays = functools.partial(_stop_strays, Path(h.base) / "data", h.uid)
        grading = await _grading(login, admin, not shared, strays, graders if graders is not None else [])
        watch = DataWatch(h, login, not shared, grading.notes)
        watch.start()
        try:
            yield await _trial_env(state_dir, self.server_command(login, zygote=zygote), grading, watch)
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

    def task_problems(self, tasks: list[Task]) -> list[str]:
        """Tasks whose agent is its cluster's superuser (``isolation: cluster``), hence has a shell (``COPY ...
        PROGRAM``), run only where that shell can be confined to its own cluster (issue 48): elsewhere refused,
        never run unconfined."""
        superuser = [t.id for t in tasks if isolation(t) == "cluster"]
        why = confinement_problem() if superuser else None
        if why is None:
            return []
        return [
            f"{len(superuser)} selected task(s) (e.g. {superuser[0]}) make the agent its cluster's superuser "
            f'(meta.json "isolation": "cluster"), whose shell must run in a world of its own, and {why}: run as '
            "root on a machine that allows namespaces, or on Kubernetes, or leave those tasks out "
            "(spec.tasks.exclude)"
        ]

    def spare_fits(self, task: Task) -> bool:
        return isolation(task) == "database"

    def trial_params(self, task: Task) -> dict[str, Any]:
        src = state_source(task)
        dump = None
        if src is not None:  # the name `materialise` gives it in the state volume
            dump = f"{task.category}.sql" if src.kind == "generator" else src.path.name
        return {"dump": dump, "isolation": isolation(task)}

    def pod_volumes(self, params: dict[str, Any], pod: PodContext) -> list[dict[str, Any]]:
        return [pod.empty_dir(PGDATA_VOLUME), pod.empty_dir(PG_ADMIN_VOLUME, medium="Memory")]

    def pod_runner(self, params: dict[str, Any], pod: PodContext) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return pod_runner()

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
                python_command(src.path, [str(dest / f"{task.category}.sql")]),
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
        graders: list[str] = []
        try:
            filled = self.service._filled(
                task, self.h, self.login, self.state_dir, zygote=self.h.zygote, graders=graders
            )
            async with filled as env:
                yield env
        finally:
            await asyncio.to_thread(drop_trial, self.h, self.login.database, self.login.user, graders)
