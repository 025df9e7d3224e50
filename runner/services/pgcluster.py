"""Private PostgreSQL clusters: initdb under a run-owned temp folder, a free loopback port, fsync off, UTC.

A cluster runs as the current user, or as the ``postgres`` OS user when we are root (PostgreSQL refuses to
run as root). The postmaster is a direct child of the process that starts it, in its own session (a
terminal's Ctrl-C reaches the run, which then stops the cluster in order), with a parent-death signal: it
shuts down immediately when its starter dies, even by SIGKILL. Every run's folder carries an owner file, so
the next run removes folders (and stops any postmaster) whose owner is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import functools
import grp
import json
import logging
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from mcpfleet.runner.environment.sandbox import Plan
    from mcpfleet.runner.services.pgrelay import Relay

PG_BIN_ENV = "MCPFLEET_PG_BIN"
PG_DIR_ENV = "MCPFLEET_PG_DIR"
SUPERUSER = "postgres"
TEMPLATE_ROLE = "mcpfleet_tmpl"
HOST = "127.0.0.1"
OWNER_FILE = "owner.json"
START_TIMEOUT_S = 30.0
SETTINGS = {
    "listen_addresses": HOST,
    "fsync": "off",  # a trial's database is thrown away: durability buys nothing
    "full_page_writes": "off",
    "synchronous_commit": "off",
    "timezone": "UTC",
    "log_timezone": "UTC",
    "max_connections": "300",
    "shared_buffers": "64MB",
    "dynamic_shared_memory_type": "mmap",  # in the data directory: nothing left in /dev/shm if killed
}
# Set on every login a trial gets (ALTER ROLE ... SET): one runaway statement must not fill the RAM-backed cluster
# folder (a review's wrote 1.5 GB of temp files in 16 s) nor run unbounded. MCPMark's largest state is ~100 MB on
# disk, so 512 MB of temp files per session is several times any legitimate sort or hash of it; 300 s is the
# verifier's own limit (and 5x the slowest verifier query seen, 56 s before ANALYZE). temp_file_limit is
# superuser-only (a trial's role cannot raise it); the timeouts are user-settable: they stop accidents, not intent.
# Table data is not bounded by any of these.
ROLE_LIMITS = {
    "temp_file_limit": "512MB",
    "statement_timeout": "300s",
    "idle_in_transaction_session_timeout": "300s",
}
RELAYED_PORT = 5432  # a cluster in a network of its own: only its socket's file name (.s.PGSQL.5432) is made of it
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


class ClusterError(RuntimeError):
    """A cluster could not be created or started; the message carries the server's own words."""


def pg_bin() -> Path:
    """PostgreSQL's server binaries: $MCPFLEET_PG_BIN, Debian's newest /usr/lib/postgresql/N/bin, or PATH."""
    if os.environ.get(PG_BIN_ENV):
        return Path(os.environ[PG_BIN_ENV])
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0
    )
    if debian:
        return debian[-1].parent
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise ClusterError(
        f"PostgreSQL server binaries not found; run scripts/setup.sh (Debian: postgresql-15) or set {PG_BIN_ENV}"
    )


def os_user() -> tuple[int, int] | None:
    """(uid, gid) to run the server as: ``postgres`` when we are root, else None (ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise ClusterError(
            "running as root, PostgreSQL needs the 'postgres' OS user: apt-get install postgresql-15"
        ) from None
    return pw.pw_uid, pw.pw_gid


def _as_user(user: tuple[int, int] | None) -> dict[str, Any]:
    return {} if user is None else {"user": user[0], "group": user[1], "extra_groups": []}


def _chown(path: Path, user: tuple[int, int] | None) -> None:
    if user is not None:
        os.chown(path, *user)


@dataclass(frozen=True)
class ClusterHandle:
    """How to reach a running cluster: passed by value to worker processes (picklable, no live objects)."""

    port: int
    base: str  # the run's folder: data directories, the socket, logs
    bin_dir: str
    password: str = field(repr=False)  # the superuser's, random per run
    tmpl_password: str = field(repr=False)  # the template role's: restores run as it, never as superuser
    uid: int | None = None
    gid: int | None = None
    host: str = HOST
    zygote: str | None = None  # the socket of the run's postgres-mcp zygote (`mcpfleet run`; see prefork.py)

    @property
    def user(self) -> tuple[int, int] | None:
        return None if self.uid is None or self.gid is None else (self.uid, self.gid)

    def connect(self, db: str = "postgres", user: str = SUPERUSER, password: str | None = None) -> Any:
        import psycopg2

        conn = psycopg2.connect(
            host=self.host,
            port=self.port,
            dbname=db,
            user=user,
            password=self.password if password is None else password,
            connect_timeout=10,
            application_name="mcpfleet",
        )
        conn.autocommit = True
        return conn


# --- run folders and their owners -----------------------------------------------------------------------


SHM = Path("/dev/shm")
SHM_MIN_FREE = 2 << 30


def _scratch() -> Path:
    """Memory-backed /dev/shm when it has room (a container's default 64 MB has not): the data is thrown away
    anyway, and disk I/O was the slowest part of initdb and clones on a busy machine. Else the temp folder."""
    try:
        st = os.statvfs(SHM)
        if os.access(SHM, os.W_OK) and st.f_bavail * st.f_frsize >= SHM_MIN_FREE:
            return SHM
    except OSError:
        pass
    return Path(tempfile.gettempdir())


def runs_root(create: bool = True) -> Path:
    """Where this user's runs keep their clusters (one folder per run): $MCPFLEET_PG_DIR, or a scratch folder."""
    root = Path(os.environ.get(PG_DIR_ENV) or _scratch() / f"mcpfleet-pg-{os.geteuid()}")
    if not create:
        return root
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o711)  # the server's OS user must reach its own folder inside
    return root


def _proc_start(pid: int) -> str | None:
    """A process's start time in clock ticks since boot: tells a live owner from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def new_run_folder(user: tuple[int, int] | None) -> Path:
    base = runs_root() / f"{os.getpid()}-{secrets.token_hex(3)}"
    base.mkdir(mode=0o700)
    owner = {"pid": os.getpid(), "start": _proc_start(os.getpid()), "uid": os.geteuid()}
    (base / OWNER_FILE).write_text(json.dumps(owner))
    _chown(base, user)
    return base


def _owner_alive(base: Path) -> bool:
    try:
        owner = json.loads((base / OWNER_FILE).read_text())
        pid = int(owner["pid"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError, OverflowError):
        # No usable owner file yet: a run that is creating its folder right now, or a broken one; only old ones go.
        return time.time() - base.stat().st_mtime < 60
    return owner.get("uid") == os.geteuid() and _proc_start(pid) == owner.get("start") is not None


RUN_FOLDER = re.compile(r"^[0-9]+-[0-9a-f]{6}$")  # new_run_folder's names: <pid>-<6 hex digits>


def _own_root(root: Path) -> bool:
    """Whether ``root`` is a real folder of this user: a runs root that is a link (the default one sits in
    world-writable /dev/shm) or someone else's folder is never swept."""
    try:
        info = os.lstat(root)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def sweep_stale(root: Path | None = None) -> list[Path]:
    """Stop the clusters and remove the folders of runs whose owner process is gone. Returns what was swept."""
    root = root or runs_root()
    swept: list[Path] = []
    if not _own_root(root):  # no run of this user ever made a cluster here (or it is no folder of this user's)
        return swept
    # Only run folders, never through a link: $MCPFLEET_PG_DIR may be a folder holding other things too.
    for base in sorted(p for p in root.iterdir() if RUN_FOLDER.match(p.name) and not p.is_symlink() and p.is_dir()):
        try:
            if _owner_alive(base):
                continue
        except OSError:
            continue
        kill_postmasters(base)
        shutil.rmtree(base, ignore_errors=True)
        swept.append(base)
    return swept


def kill_postmasters(base: Path, wait_s: float = 10.0) -> int:
    """Immediate shutdown of every postmaster whose data directory is under ``base``. Returns how many."""
    pids = []
    for pidfile in base.glob("**/postmaster.pid"):
        try:
            pid = int(pidfile.read_text().split("\n", 1)[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if cmdline and cmdline[0].endswith(b"postgres") and str(pidfile.parent).encode() in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT)
                pids.append(pid)
    deadline = time.monotonic() + wait_s
    for pid in pids:
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        if Path(f"/proc/{pid}").exists():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    kill_trial_uids(base)
    return len(pids)


# --- data directories and server processes ------------------------------------------------------------


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "TZ": "UTC"}


def initdb(data: Path, password: str, user: tuple[int, int] | None, bin_dir: Path) -> None:
    """A new, stopped data directory with a password-protected superuser (scram) and UTF-8, C.UTF-8 locale."""
    pwfile = data.parent / f".pw-{secrets.token_hex(4)}"
    pwfile.write_text(password + "\n")
    pwfile.chmod(0o600)
    _chown(pwfile, user)
    try:
        cmd = [str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "-A", "scram-sha-256"]
        cmd += [f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd="/", **_as_user(user))
    finally:
        pwfile.unlink(missing_ok=True)
    if p.returncode != 0:
        raise ClusterError(f"initdb failed: {(p.stderr or p.stdout).strip()[-2000:]}")


def copy_data(src: Path, dest: Path) -> None:
    """Copy a stopped data directory, keeping owners and modes (the server insists on 0700)."""
    p = subprocess.run(["cp", "-a", str(src), str(dest)], capture_output=True, text=True)
    if p.returncode != 0:
        raise ClusterError(f"could not copy {src} to {dest}: {p.stderr.strip()}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _die_with_parent(parent: int) -> None:
    # Runs in the child after the switch to the server's user (a credential change would clear it).
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT)
    if os.getppid() != parent:
        os._exit(1)


@dataclass
class Postmaster:
    """A running server: our child process, its data directory and its port."""

    proc: subprocess.Popen[bytes]
    data: Path
    port: int
    log: Path

    def ready(self) -> bool:
        """postmaster.pid's status line says 'ready' once the server accepts connections. Its own file: one a
        killed postmaster left behind says 'ready' too, until a restart on the data directory replaces it."""
        try:
            lines = (self.data / "postmaster.pid").read_text().split("\n")
        except OSError:
            return False
        return len(lines) > 7 and lines[0].strip() == str(self.proc.pid) and lines[7].strip() == "ready"

    def failure(self) -> str | None:
        if self.proc.poll() is None:
            return None
        try:
            tail = self.log.read_text(errors="replace")[-2000:]
        except OSError:
            tail = ""
        return f"PostgreSQL exited with {self.proc.returncode}: {tail.strip()}"

    def stop(self, wait_s: float = 10.0) -> None:
        """Immediate shutdown (the data is thrown away), then SIGKILL to its process group if it lingers."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def spawn(
    data: Path,
    socket_dir: Path,
    user: tuple[int, int] | None,
    bin_dir: Path,
    port: int,
    hidden: Plan | None = None,
    own_network: bool = False,
) -> Postmaster:
    """Start the server without waiting. Must run in a thread that outlives it (the death signal follows the
    thread that forked): the main thread, or a worker's event-loop thread. With ``hidden``, in a mount namespace
    of its own where that plan's folders are covered (the switch to ``user`` then follows the mounts); with
    ``own_network``, no network but its Unix socket (named for ``port``), a /proc of its own (``sandbox.preexec``)."""
    log = data.parent / f"{data.name}.log"
    cmd = [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(socket_dir)]
    settings = {**SETTINGS, "listen_addresses": ""} if own_network else SETTINGS
    for k, v in settings.items():
        cmd += ["-c", f"{k}={v}"]
    die = functools.partial(_die_with_parent, os.getpid())
    as_user, preexec = _as_user(user), cast(Callable[[], object], die)
    if hidden is not None:
        as_user, enter = {}, hidden.preexec(user, own_network=own_network)
        preexec = lambda: (enter(), die())  # noqa: E731
    with open(log, "ab") as out:
        os.fchmod(out.fileno(), 0o600)  # other trials' failed SQL: a trial cluster's OS user can reach the run's
        _chown(log, user)
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**_env(), "PGDATA": str(data)},  # what every process it starts inherits (pggrade.stray_pids)
            cwd="/",
            start_new_session=True,
            preexec_fn=preexec,  # noqa: PLW1509 - prctl, and the sandbox's mounts and user switch
            **as_user,
        )
    return Postmaster(proc, data, port, log)


def wait_ready(pm: Postmaster, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not pm.ready():
        if (why := pm.failure()) is not None:
            raise ClusterError(why)
        if time.monotonic() > deadline:
            pm.stop()
            raise ClusterError(f"PostgreSQL did not become ready in {timeout_s:g} s (log: {pm.log})")
        time.sleep(0.01)


async def wait_ready_async(pm: Postmaster, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not pm.ready():
        if (why := pm.failure()) is not None:
            raise ClusterError(why)
        if time.monotonic() > deadline:
            await asyncio.to_thread(pm.stop)
            raise ClusterError(f"PostgreSQL did not become ready in {timeout_s:g} s (log: {pm.log})")
        await asyncio.sleep(0.01)


def _port_taken(exc: ClusterError) -> bool:
    return "could not bind" in str(exc) or "already in use" in str(exc)


def start(data: Path, socket_dir: Path, user: tuple[int, int] | None, bin_dir: Path, tries: int = 5) -> Postmaster:
    """Start on a free loopback port and wait until it accepts connections (a port taken meanwhile: retry)."""
    for attempt in range(tries):
        pm = spawn(data, socket_dir, user, bin_dir, free_port())
        try:
            wait_ready(pm)
            return pm
        except ClusterError as exc:
            if not _port_taken(exc) or attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


async def start_async(
    data: Path,
    socket_dir: Path,
    user: tuple[int, int] | None,
    bin_dir: Path,
    tries: int = 5,
    hidden: Plan | None = None,
    own_port: int | None = None,
) -> Postmaster:
    """``start`` for an event loop: spawns in the loop's thread (see ``spawn``), waits without blocking it.
    ``own_port``: in a network of its own (``spawn``'s ``own_network``), its socket named for it."""
    for attempt in range(tries):
        port = free_port() if own_port is None else own_port
        pm = spawn(data, socket_dir, user, bin_dir, port, hidden, own_network=own_port is not None)
        try:
            await wait_ready_async(pm)
            return pm
        except ClusterError as exc:
            if not _port_taken(exc) or attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def limit_role(cur: Any, role: str) -> None:
    """``ROLE_LIMITS`` as the role's defaults (its next sessions): for the logins trials get, never the template
    role (a pack's large restore may need more)."""
    from psycopg2 import sql

    for name, value in ROLE_LIMITS.items():
        cur.execute(sql.SQL("ALTER ROLE {} SET {} = %s").format(sql.Identifier(role), sql.Identifier(name)), (value,))


def bootstrap(handle: ClusterHandle, shared: bool = True) -> None:
    """The template role (restores run as it); on a shared cluster, no database open to PUBLIC (each trial opens
    its own). A trial's private cluster keeps PostgreSQL's defaults, except ``ROLE_LIMITS`` on its superuser
    (a ``cluster`` trial's login)."""
    from psycopg2 import sql

    with contextlib.closing(handle.connect()) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (TEMPLATE_ROLE,))
        verb = "ALTER" if cur.fetchone() else "CREATE"
        cur.execute(
            sql.SQL(verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %s").format(
                sql.Identifier(TEMPLATE_ROLE)
            ),
            (handle.tmpl_password,),
        )
        for db in ("postgres", "template1") if shared else ():
            cur.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(sql.Identifier(db)))
        if not shared:
            limit_role(cur, SUPERUSER)


@contextlib.contextmanager
def run_cluster(on_lost: Callable[[str], None] | None = None) -> Iterator[ClusterHandle]:
    """The run's cluster: started once, stopped and removed at exit (exceptions, Ctrl-C and SIGTERM included).
    Restarted when its server dies under the run (``Keeper``); ``on_lost`` is told why when that fails (by
    default the run stops, as on Ctrl-C).

    ``blank/`` (a stopped, freshly initialised data directory) stays beside it for trials that need a cluster
    of their own: copying it is much faster than another initdb."""
    sweep_stale()
    bin_dir, user = pg_bin(), os_user()
    base = new_run_folder(user)
    pm: Postmaster | None = None
    keeper: Keeper | None = None
    try:
        password, tmpl_password = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        initdb(base / "blank", password, user, bin_dir)
        copy_data(base / "blank", base / "main")
        pm = start(base / "main", base, user, bin_dir)
        handle = ClusterHandle(pm.port, str(base), str(bin_dir), password, tmpl_password, *(user or (None, None)))
        bootstrap(handle)
        keeper = Keeper(pm, base, user, bin_dir, on_lost or _stop_run)
        yield handle
    finally:
        # Not cut short by more Ctrl-C: a third one, inside rmtree, left the folder (60-76 MB of RAM in /dev/shm).
        # (Imported here: this module also loads on its own, standard library only, as the postgres OS user.)
        from mcpfleet.runner._util.lifeline import interrupts_held

        with interrupts_held():
            try:
                if keeper is not None:
                    keeper.stop()
                elif pm is not None:
                    pm.stop()
                kill_postmasters(base)  # trial clusters a killed worker left behind
            finally:
                shutil.rmtree(base, ignore_errors=True)


RESTARTS = 3  # per run: a server that dies more often has a cause a restart does not remove


def _stop_run(why: str) -> None:
    """Stop the run as Ctrl-C does (finished trials are kept; the same command resumes): every trial left would
    otherwise end as an infrastructure error, retried, on a server that is not there."""
    print(f"mcpfleet: {why}; stopping the run", file=sys.stderr, flush=True)
    # A real SIGINT to the main thread: it wakes a blocked event loop at once (_thread.interrupt_main's flag was
    # seen only when the next trial ended, 35 s later here).
    main = threading.main_thread().ident
    if main is not None:
        signal.pthread_kill(main, signal.SIGINT)


def log_tail(path: Path, lines: int = 3, limit: int = 4096) -> str:
    """The last lines of a server log, on one line (for a message that outlives the log's folder)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - limit))
            text = f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(unreadable: {exc.strerror or exc})"
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(empty)"


class Keeper:
    """Restarts the run's postmaster when it dies under the run (killed, the OOM killer), on the same data
    directory and port: the port is in the ClusterHandle every worker was given by value, so a new one would
    not reach them. Measured: the killed postmaster's backends are gone at once, and the restart (crash recovery
    of the same data, roles and templates kept) accepts connections ~0.3 s after the kill. The trials that were
    on it still end as EnvironmentLost (their fingerprint, the start time, moved) and run again. A thread of
    its own: it forks the new postmaster, whose parent-death signal follows that thread, which lives as long."""

    def __init__(
        self, pm: Postmaster, base: Path, user: tuple[int, int] | None, bin_dir: Path, on_lost: Callable[[str], None]
    ) -> None:
        self.pm, self.base, self.user, self.bin_dir, self.on_lost = pm, base, user, bin_dir, on_lost
        self.restarts = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._watch, name="mcpfleet-pg-keeper", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while True:
            code = self.pm.proc.wait()
            if self.stopping.is_set():
                return
            self.restarts += 1
            what = f"the run's PostgreSQL server exited ({code})"
            if self.restarts > RESTARTS:
                # The log's end, not its path: the run's teardown removes the cluster's folder with the log.
                self.on_lost(f"{what} for the {self.restarts}th time; its log ended: {log_tail(self.pm.log)}")
                return
            print(f"mcpfleet: {what}; restarting it on port {self.pm.port}", file=sys.stderr, flush=True)
            try:
                pm = self._restart()
            except ClusterError as exc:
                if not self.stopping.is_set():
                    self.on_lost(f"{what} and could not be restarted: {exc}")
                return
            with self.lock:
                if self.stopping.is_set():
                    pm.stop()
                    return
                self.pm = pm

    def _restart(self) -> Postmaster:
        """Until it accepts connections: the old postmaster's backends may hold its shared memory a moment."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            pm = spawn(self.pm.data, self.base, self.user, self.bin_dir, self.pm.port)
            try:
                wait_ready(pm, max(1.0, deadline - time.monotonic()))
                return pm
            except ClusterError:
                if self.stopping.is_set() or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        """The run is over: stop the current postmaster, and no restart after that."""
        with self.lock:
            self.stopping.set()
            pm = self.pm
        pm.stop()
        self.thread.join(START_TIMEOUT_S + 15)


# --- trials' own clusters ----------------------------------------------------------------------------------

# A trial's own cluster makes its agent superuser, and ``COPY ... PROGRAM`` a shell as the server's OS user. As
# root, each one runs as a throwaway uid/gid of its own, drawn from this range: above systemd's container range
# (524288-1879048191), below its foreign range (from 2147352576) and 2**31. No passwd or group entry is made.
TRIAL_IDS = range(1_900_000_000, 1_900_000_000 + (1 << 24))
_log = logging.getLogger(__name__)


def _proc_ids() -> Iterator[tuple[int, set[int], set[int]]]:
    """(pid, uids, gids) of every live process (real, effective, saved, filesystem); zombies left out."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except (OSError, ValueError):
            continue
        if fields.get("State", "").split()[:1] == ["Z"]:
            continue
        uids = {int(x) for x in fields.get("Uid", "").split()}
        gids = {int(x) for x in fields.get("Gid", "").split()}
        yield int(entry.name), uids, gids


def ids_mapped() -> bool:
    """Whether the throwaway ids (``TRIAL_IDS``) are mapped in our user namespace."""
    return _mapped(TRIAL_IDS[0]) and _mapped(TRIAL_IDS[-1])


def _mapped(ident: int) -> bool:
    """Whether our user namespace maps ``ident`` as a uid and a gid (in a container it may not: chown fails)."""
    for which in ("uid_map", "gid_map"):
        try:
            rows = [line.split() for line in Path(f"/proc/self/{which}").read_text().splitlines()]
        except OSError:
            return True  # no /proc: the initial namespace
        if not any(int(inside) <= ident < int(inside) + int(count) for inside, _, count in rows):
            return False
    return True


def _unnamed(ident: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(ident)
            return False
        except KeyError:
            pass
    return True


def trial_user(run_user: tuple[int, int] | None) -> tuple[int, int] | None:
    """A throwaway (uid, gid) for a trial's own cluster: random in ``TRIAL_IDS``, named in no passwd or group
    entry, used by no running process (so neither another trial nor another run has it). None when we are not
    root (nothing can switch uid: the cluster runs as ``run_user``, as the run's does) or the ids are not mapped."""
    if run_user is None or os.geteuid() != 0:
        return None
    if not ids_mapped():
        _log.warning(
            "uids %d-%d are not mapped in this user namespace: trials' own clusters run as the run cluster's "
            "OS user, whose files their superusers can then reach",
            TRIAL_IDS[0],
            TRIAL_IDS[-1],
        )
        return None
    busy: set[int] = set()
    for _, uids, gids in _proc_ids():
        busy |= uids | gids
    for _ in range(64):
        ident = TRIAL_IDS[secrets.randbelow(len(TRIAL_IDS))]
        if ident not in busy and _unnamed(ident):
            return ident, ident
    raise ClusterError(f"no unused uid in {TRIAL_IDS[0]}-{TRIAL_IDS[-1]} after 64 tries")


def kill_uid(uid: int, wait_s: float = 5.0) -> int:
    """SIGKILL every process of ``uid`` (a trial's throwaway one: all of them are its agent's and its server's,
    including daemons started through ``COPY ... PROGRAM``) until none is left. Returns how many were sent."""
    sent = 0
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        pids = [pid for pid, uids, _ in _proc_ids() if uid in uids]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                sent += 1
        time.sleep(0.01)
    return sent


def kill_trial_uids(base: Path) -> None:
    """``kill_uid`` for each trial folder under ``base`` (a run's folder or a runs root) owned by a throwaway
    uid: what the agents of a killed worker's trials left running, which no trial's own cleanup reached. Only
    root makes such uids (a plain user's own uid may fall in the range: never this)."""
    if os.geteuid() != 0:
        return
    for folder in [*base.glob("trials/*"), *base.glob("*/trials/*")]:
        with contextlib.suppress(OSError):
            if (uid := folder.stat().st_uid) in TRIAL_IDS:
                kill_uid(uid)


def _copy_as(src: Path, dest: Path, user: tuple[int, int] | None) -> None:
    """``copy_data``, then every file handed to ``user`` (blank/ is ~1000 files, ~40 MB: about 6 ms here)."""
    copy_data(src, dest)
    if user is None:
        return
    os.lchown(dest, *user)
    for parent, dirs, files in os.walk(dest):
        for n in dirs + files:
            os.lchown(os.path.join(parent, n), *user)


def _open_to_trials(base: Path) -> Path:
    """The run's folder and its trials/ traversable by trials' own OS users, listable by neither (their own
    folders inside stay 0700): root's trials/, the folder 0711. The shared cluster's main/ and blank/ stay its
    OS user's own, 0700."""
    trials = base / "trials"
    trials.mkdir(mode=0o711, exist_ok=True)
    trials.chmod(0o711)
    base.chmod(0o711)
    return trials


with contextlib.suppress(ImportError):  # not when this file is loaded on its own (standard library only)
    from mcpfleet.runner.environment import sandbox

    sandbox.register_root(lambda: runs_root(create=False))  # every run's clusters: hidden in every trial's sandbox


@contextlib.asynccontextmanager
async def private_cluster(run: ClusterHandle, name: str, hide: Sequence[Path] = ()) -> AsyncIterator[ClusterHandle]:
    """A cluster of one's own, copied from the run's blank data directory, with a fresh superuser password.
    Enter it from a long-lived event loop's thread (see ``spawn``).

    As root it runs as a throwaway uid/gid (``trial_user``), so its superuser's ``COPY ... PROGRAM`` reaches
    neither the run's cluster nor other trials'; whatever runs as that uid is killed when the trial ends. Its
    postmaster (and so that shell, and ``pg_read_file``) runs in a sandbox (``runner/environment/sandbox.py``) where
    the task packs, the run's output, the packs cache, other trials' folders and ``hide`` are empty: only its own folder
    and the system are there."""
    base = Path(run.base)
    throwaway = trial_user(run.user)
    user = throwaway or run.user
    folder = (_open_to_trials(base) if throwaway else base / "trials") / name
    folder.mkdir(parents=True, mode=0o700)
    pm: Postmaster | None = None
    relay: Relay | None = None
    try:
        if throwaway is None:
            _chown(folder.parent, run.user)
        _chown(folder, user)
        await asyncio.to_thread(_copy_as, base / "blank", folder / "data", throwaway)
        # The run's folder stays (its modes and the throwaway uids keep other trials' folders out, as without a
        # sandbox): the rest of the runs root, the temp folder, the packs and the run's output go.
        from mcpfleet.runner.environment import sandbox

        hidden = await asyncio.to_thread(sandbox.plan, [base, Path(run.bin_dir)], hide)
        if hidden is not None and throwaway is not None and sandbox.own_network_available():
            from mcpfleet.runner.services.pgrelay import Relay  # its own network: only the relay's port leads in

            relay = await Relay.start(HOST, folder / f".s.PGSQL.{RELAYED_PORT}")
            pm = await start_async(
                folder / "data", folder, user, Path(run.bin_dir), hidden=hidden, own_port=RELAYED_PORT
            )
            port = relay.port
        else:
            pm = await start_async(folder / "data", folder, user, Path(run.bin_dir), hidden=hidden)
            port = pm.port
        first = ClusterHandle(port, str(folder), run.bin_dir, run.password, run.tmpl_password, *(user or (None, None)))
        own = dataclasses.replace(first, password=secrets.token_urlsafe(24))
        await asyncio.to_thread(_set_superuser_password, first, own.password)
        await asyncio.to_thread(bootstrap, own, False)
        yield own
    finally:
        if relay is not None:
            await relay.close()
        if pm is not None:
            await asyncio.to_thread(pm.stop)
        if throwaway is not None:
            await asyncio.to_thread(kill_uid, throwaway[0])
        await asyncio.to_thread(shutil.rmtree, folder, True)


def _set_superuser_password(handle: ClusterHandle, password: str) -> None:
    from psycopg2 import sql

    with contextlib.closing(handle.connect()) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("ALTER ROLE {} PASSWORD %s").format(sql.Identifier(SUPERUSER)), (password,))
