"""A PostgreSQL trial pod's database (servers/postgres/bin/mcpfleet-pg-init): a data directory prebuilt for the
pod's exact state and login is copied in and given fresh passwords, else the dump is restored; either way the
same database, login files and password-only access. The real scripts run as the pod's containers do (the
containers' commands, arguments and environment from runner/services/pgpod.py's pod_containers, as the test
kubelet runs them: as root, dropping to the postgres user) against the machine's PostgreSQL 15."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from pgpack import GENERATOR, ROWS
from proctree import processes_naming

from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.base import PodContext
from mcpfleet.runner.services.pgcluster import SUPERUSER
from mcpfleet.runner.services.pgpod import PG_ADMIN_MOUNT, POD_ROLE, pod_containers

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "servers" / "postgres" / "bin"
STATE_MOUNT = "/state"
# A second table beside the generator's orders, so the comparison covers more than one relation and a view.
EXTRA_SQL = """
CREATE TABLE customers (name text PRIMARY KEY, since date NOT NULL);
INSERT INTO customers SELECT 'c' || g, date '2026-01-01' + g FROM generate_series(1, 300) g;
CREATE VIEW big_orders AS SELECT * FROM orders WHERE qty >= 8;
"""


def pg_bin() -> str:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    assert found, "PostgreSQL is not installed under /usr/lib/postgresql"
    return str(found[-1])


PATH = os.pathsep.join([str(BIN), pg_bin(), os.environ.get("PATH", "/usr/bin:/bin")])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """The module's folders (PostgreSQL runs as the postgres user: no 0700 pytest folder above them). Nothing
    started here may outlive the module."""
    d = Path(tempfile.mkdtemp(prefix="mcpfleet-pg-pod-", dir=pgcluster._scratch()))
    d.chmod(0o711)
    yield d
    left = processes_naming(str(d))
    pgcluster.kill_postmasters(d)
    subprocess.run(["rm", "-rf", str(d)], check=False)
    assert not left, f"processes outlived the tests: {left}"


def make_dump(path: Path, extra: str = "") -> Path:
    """The pack's state as `mcpfleet materialise` leaves it: the generator's output, readable by the server."""
    script = path.with_suffix(".py")
    script.write_text(GENERATOR)
    subprocess.run([sys.executable, str(script), str(path)], check=True, cwd=path.parent)
    with path.open("a") as f:
        f.write(extra)
    path.chmod(0o644)
    return path


@pytest.fixture(scope="module")
def dump(scratch: Path) -> Path:
    return make_dump(scratch / "shop.sql", EXTRA_SQL)


def run(cmd: list[str], env: dict[str, str]) -> str:
    """One container's command to its end (its own process group, killed on a timeout); its stdout."""
    p = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    assert p.returncode == 0, f"{cmd[0]} exited {p.returncode}: {err}"
    return out


def prebuild(dump: Path, root: Path, user: str, args: list[str]) -> Path:
    """What the database image's build does for each bundled state: the same script, --prebuild."""
    env = {"PATH": PATH, "LANG": "C.UTF-8", "TZ": "UTC", "DB_NAME": "trial", "DB_USER": user}
    out = run([str(BIN / "mcpfleet-pg-init"), "--prebuild", str(dump), str(root), *args], env)
    [line] = out.splitlines()
    built = Path(line.removeprefix("mcpfleet-pg-init: prebuilt "))
    assert built.parent == root and (built / "PG_VERSION").is_file(), out
    return built


def containers(user: str, dump_name: str) -> dict[str, dict[str, Any]]:
    """The pod's pg-init and postgres containers, by name, as the operator renders them."""
    pod = PodContext("runner", "mcp", 8000, STATE_MOUNT, images={"postgres-db": "db", "postgres": "mcp"})
    params = {"dump": dump_name, "isolation": "cluster" if user == SUPERUSER else "database"}
    return {c["name"]: c for c in pod_containers(params, pod)}


@dataclass
class Pod:
    """One pod's volumes on this host, its containers' settings and what pg-init printed."""

    base: Path
    env: dict[str, str]
    serve_args: list[str]
    log: str

    @property
    def data(self) -> Path:
        return Path(self.env["PGDATA"])

    def login(self) -> dict[str, Any]:
        return dict(json.loads((self.base / "state" / ".postgres" / "login.json").read_text()))

    def connect(self, **kw: Any) -> Any:
        login = {**self.login(), **kw}
        return psycopg2.connect(
            host=login["host"],
            port=login["port"],
            user=login["user"],
            password=login["password"],
            dbname=login["database"],
            connect_timeout=10,
        )


def pod_init(scratch: Path, name: str, dump: Path, user: str, prebuilt: Path) -> Pod:
    """A pod's state volume holding the dump, then its pg-init container, with the pod spec's command,
    arguments and environment; mount paths point at folders here (the kubelet's emptyDirs)."""
    base = scratch / name
    (base / "state").mkdir(parents=True)
    (base / "pgdata").mkdir()
    for d in (base, base / "state", base / "pgdata"):
        d.chmod(0o755)
    (base / "state" / dump.name).write_bytes(dump.read_bytes())
    (base / "state" / dump.name).chmod(0o644)
    spec = containers(user, dump.name)
    init = spec["pg-init"]

    def local(value: str) -> str:
        for mount, name in (("/pgdata", "pgdata"), (STATE_MOUNT, "state"), (PG_ADMIN_MOUNT, "pg-admin")):
            value = value.replace(mount, str(base / name))
        return value

    env = {"PATH": PATH, "MCPFLEET_PG_PREBUILT": str(prebuilt)}
    env |= {e["name"]: local(e["value"]) for e in init["env"]}
    env["PGPORT"] = str(free_port())
    log = run([*init["command"], *init["args"]], env)
    return Pod(base, env, list(spec["postgres"]["args"]), log)


@contextlib.contextmanager
def served(pod: Pod, container: bool = False) -> Iterator[Pod]:
    """The pod's database sidecar (mcpfleet-pg-serve) until pg_isready answers, stopped afterwards. ``container``:
    in a PID namespace of its own, as a container's process 1 (the network is the host's, as a pod's is shared)."""
    own = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"] if container else []
    proc = subprocess.Popen(
        [*own, "mcpfleet-pg-serve", *pod.serve_args],
        env=pod.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1"], env=pod.env).returncode != 0:
            assert proc.poll() is None, f"the database sidecar exited {proc.returncode}"
            assert time.monotonic() < deadline, "the database sidecar did not become ready"
            time.sleep(0.05)
        yield pod
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def snapshot(pod: Pod) -> dict[str, Any]:
    """Every relation of the trial's database with its owner, and each table's row count and checksum."""
    with contextlib.closing(pod.connect()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT c.relname, c.relkind, pg_get_userbyid(c.relowner) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1"
        )
        relations = cur.fetchall()
        tables = {}
        for name, kind, _ in relations:
            if kind == "r":
                cur.execute(f"SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM \"{name}\" t")
                tables[name] = cur.fetchone()
        cur.execute("SELECT count(*) FROM pg_stats WHERE schemaname = 'public'")
        analyzed = cur.fetchone()[0] > 0
    return {"relations": relations, "tables": tables, "analyzed": analyzed}


def key_of(dump: Path, user: str) -> str:
    return f"{hashlib.sha256(dump.read_bytes()).hexdigest()}-{user}-trial-pg{Path(pg_bin()).parent.name}"


@pytest.fixture(scope="module")
def prebuilt(scratch: Path, dump: Path) -> Path:
    """A prebuilt root with the dump's directory for the agent's login, built with the pod's own settings."""
    root = scratch / "prebuilt"
    built = prebuild(dump, root, POD_ROLE, containers(POD_ROLE, dump.name)["pg-init"]["args"])
    assert built.name == key_of(dump, POD_ROLE)
    return root


def test_a_prebuilt_directory_carries_no_password(scratch: Path, dump: Path, prebuilt: Path) -> None:
    """Nothing in a prebuilt directory can log in: no role has a password (a SCRAM verifier in pg_authid, as
    a pod's own data directory has once pg-init set its passwords), and only the socket is open, with trust."""
    built = prebuilt / key_of(dump, POD_ROLE)
    verifier = b"SCRAM-SHA-256$"
    assert not any(verifier in f.read_bytes() for f in (built / "global").iterdir() if f.is_file())
    hba = [ln.split() for ln in (built / "pg_hba.conf").read_text().splitlines() if ln and not ln.startswith("#")]
    assert {(ln[0], ln[-1]) for ln in hba} == {("local", "trust"), ("host", "reject")}
    pod = pod_init(scratch, "nopw", dump, POD_ROLE, prebuilt)
    assert any(verifier in f.read_bytes() for f in (pod.data / "global").iterdir() if f.is_file())


def test_a_matching_prebuilt_directory_gives_the_dumps_database_with_fresh_passwords(
    scratch: Path, dump: Path, prebuilt: Path
) -> None:
    key = key_of(dump, POD_ROLE)
    restored = pod_init(scratch, "restored", dump, POD_ROLE, scratch / "no-prebuilt")
    assert (
        restored.log.strip()
        == f"mcpfleet-pg-init: no prebuilt for {key} in {scratch / 'no-prebuilt'}: restoring the dump"
    )
    first = pod_init(scratch, "first", dump, POD_ROLE, prebuilt)
    second = pod_init(scratch, "second", dump, POD_ROLE, prebuilt)
    assert first.log.strip() == second.log.strip() == f"mcpfleet-pg-init: prebuilt {key}"
    # The same end state as the dump path: data directory 0700 and the server's own, login files 0600.
    for pod in (restored, first):
        st = pod.data.stat()
        assert (st.st_mode & 0o777, st.st_uid) == (0o700, pwd.getpwnam("postgres").pw_uid)
        login_dir = pod.base / "state" / ".postgres"
        assert sorted(p.name for p in login_dir.iterdir()) == ["login.json", "pgpass"]
        assert all(p.stat().st_mode & 0o777 == 0o600 for p in login_dir.iterdir())
        assert (pod.data / "pg_hba.conf").read_text() == (restored.data / "pg_hba.conf").read_text()
    assert {k: v for k, v in first.login().items() if k not in ("password", "port")} == {
        "host": "127.0.0.1",
        "database": "trial",
        "user": POD_ROLE,
    }
    # Passwords are the pod's own: two pods from one prebuilt directory share none.
    assert first.login()["password"] != second.login()["password"]
    with served(restored):
        want = snapshot(restored)
    with served(first):
        got = snapshot(first)
        with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
            first.connect(password=second.login()["password"])
        # The agent's login reaches its own database only.
        for other in ("postgres", "template1"):
            with pytest.raises(psycopg2.OperationalError, match="permission denied for database"):
                first.connect(database=other)
    assert got == want
    assert got["tables"]["orders"][0] == ROWS and got["tables"]["customers"][0] == 300 and got["analyzed"]
    assert {owner for _, _, owner in got["relations"]} == {POD_ROLE}


def test_a_prebuilt_directory_for_another_state_or_login_is_not_used(scratch: Path, dump: Path, prebuilt: Path) -> None:
    """The key is the dump's bytes, the login and the server's version: a state differing by one row, or the
    superuser's login on the same state, restores the dump."""
    (scratch / "other").mkdir()
    other = make_dump(
        scratch / "other" / "shop.sql", EXTRA_SQL + "INSERT INTO customers VALUES ('late', '2026-11-20');\n"
    )
    changed = pod_init(scratch, "changed", other, POD_ROLE, prebuilt)
    assert changed.log.strip().startswith(f"mcpfleet-pg-init: no prebuilt for {key_of(other, POD_ROLE)} in ")
    with served(changed):
        assert snapshot(changed)["tables"]["customers"][0] == 301
    superuser = pod_init(scratch, "superuser", dump, SUPERUSER, prebuilt)
    assert superuser.log.strip().startswith(f"mcpfleet-pg-init: no prebuilt for {key_of(dump, SUPERUSER)} in ")
    with served(superuser):
        snap = snapshot(superuser)
        assert superuser.login()["user"] == SUPERUSER
    assert snap["tables"]["orders"][0] == ROWS and {owner for _, _, owner in snap["relations"]} == {SUPERUSER}


def test_a_missing_dump_fails_naming_it(scratch: Path, prebuilt: Path) -> None:
    """The state init container's dump is gone: pg-init stops before anything starts, and says which file."""
    base = scratch / "missing"
    init = containers(POD_ROLE, "shop.sql")["pg-init"]
    env = {"PATH": PATH, "MCPFLEET_PG_PREBUILT": str(prebuilt)}
    env |= {e["name"]: e["value"].replace("/pgdata", str(base)).replace(STATE_MOUNT, str(base)) for e in init["env"]}
    p = subprocess.run([*init["command"], *init["args"]], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stderr == f"mcpfleet-pg-init: cannot read the state dump {base}/shop.sql\n"
    assert not any((base / "data").iterdir())  # created empty (as root, for the server's user), left empty


def test_the_bundled_states_dumps_are_the_same_bytes_in_the_image_and_in_a_pod(tmp_path: Path) -> None:
    """A pod can only use the image's prebuilt directory if its dump has the same sha256: the image's first
    stage (servers/postgres/state_dumps.py) and a pod's state init container (`mcpfleet materialise`) must
    write the same bytes, whatever the hash seed, the time zone or the working directory."""
    from mcpfleet.runner.services.postgres import PostgresService
    from mcpfleet.runner.tasks.discovery import discover

    image_dumps = tmp_path / "image"
    env = {**os.environ, "PYTHONHASHSEED": "1", "TZ": "Pacific/Kiritimati"}
    script = REPO / "servers" / "postgres" / "state_dumps.py"
    image = subprocess.Popen([sys.executable, str(script), str(REPO / "tasks"), str(image_dumps)], env=env, cwd="/")
    try:
        pod_dumps = {}
        for task in discover(REPO / "tasks"):
            if task.service == "postgres" and task.category not in pod_dumps:
                dest = tmp_path / "pod" / task.category
                assert PostgresService().materialise(task, dest) == 1
                [pod_dumps[task.category]] = dest.iterdir()
        assert image.wait(300) == 0
    finally:
        if image.poll() is None:
            image.kill()
            image.wait()
    assert sorted(pod_dumps) == sorted(p.stem for p in (REPO / "tasks" / "postgres" / "states").glob("*.py"))
    for category, dump in pod_dumps.items():
        made = image_dumps / dump.name
        assert hashlib.sha256(made.read_bytes()).digest() == hashlib.sha256(dump.read_bytes()).digest(), category
    plan = (image_dumps / "plan").read_text().splitlines()
    assert f"{dump.name} trial {POD_ROLE}" in plan


def test_a_superuser_pod_takes_its_own_prebuilt_directory(scratch: Path, dump: Path) -> None:
    """A task that gets the cluster (the image prebuilds `support` so) copies a directory prebuilt for the
    superuser's login: the same database as its dump path, the superuser's fresh password the login."""
    root = scratch / "prebuilt-superuser"
    prebuild(dump, root, SUPERUSER, containers(SUPERUSER, dump.name)["pg-init"]["args"])
    restored = pod_init(scratch, "su-restored", dump, SUPERUSER, scratch / "no-prebuilt")
    copied = pod_init(scratch, "su-copied", dump, SUPERUSER, root)
    assert copied.log.strip() == f"mcpfleet-pg-init: prebuilt {key_of(dump, SUPERUSER)}"
    with served(restored):
        want = snapshot(restored)
    with served(copied):
        got = snapshot(copied)
        assert copied.login()["user"] == SUPERUSER
        with contextlib.closing(copied.connect(database="postgres")) as conn, conn.cursor() as cur:
            cur.execute("SELECT rolname FROM pg_authid WHERE rolpassword IS NOT NULL")
            assert cur.fetchall() == [(SUPERUSER,)]
    assert got == want


def test_a_pods_login_gets_the_role_limits_a_local_trials_login_gets(scratch: Path, dump: Path, prebuilt: Path) -> None:
    """A local trial's login (the agent's role, or a cluster trial's superuser) has ``pgcluster.ROLE_LIMITS`` as its
    defaults: a runaway query ends with PostgreSQL's own error. A pod's login had none (pg-init never set them):
    the same query there ran unbounded. Now pg-init sets the same values, given by the pod spec from that one
    definition, on the login of either path (a copied prebuilt directory, a restored dump)."""
    want = {f"{name}={value}" for name, value in pgcluster.ROLE_LIMITS.items()}
    agent = pod_init(scratch, "limits", dump, POD_ROLE, prebuilt)
    superuser = pod_init(scratch, "su-limits", dump, SUPERUSER, scratch / "no-prebuilt")
    assert "prebuilt" in agent.log and "restoring the dump" in superuser.log
    for pod in (agent, superuser):
        with served(pod), contextlib.closing(pod.connect()) as conn, conn.cursor() as cur:
            cur.execute("SELECT setconfig FROM pg_db_role_setting WHERE setrole = current_user::regrole")
            assert {s for row in cur.fetchall() for s in row[0]} == want, pod.login()["user"]
            cur.execute(
                "SELECT name FROM pg_settings WHERE name = ANY(%s) AND source = 'user'",
                (list(pgcluster.ROLE_LIMITS),),
            )
            assert sorted(r[0] for r in cur.fetchall()) == sorted(pgcluster.ROLE_LIMITS)  # in force in its sessions
            if pod is agent:
                with pytest.raises(psycopg2.errors.InsufficientPrivilege, match="temp_file_limit"):
                    cur.execute("SET temp_file_limit = -1")  # the agent's role cannot lift it


def test_the_runners_superuser_login_is_on_its_own_volume(scratch: Path, dump: Path, prebuilt: Path) -> None:
    """pg-init writes the superuser's login, which the runner grades with (runner/services/pggrade.py), to the
    volume only it and the runner mount (ADMIN_DIR), 0600; nothing of it reaches the state volume, which the
    database and MCP sidecars mount."""
    pod = pod_init(scratch, "admin", dump, POD_ROLE, prebuilt)
    path = pod.base / "pg-admin" / "admin.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    admin = json.loads(path.read_text())
    assert (admin["user"], admin["database"]) == (SUPERUSER, "postgres")
    state = [p for p in (pod.base / "state").rglob("*") if p.is_file()]
    assert state and not any(admin["password"].encode() in p.read_bytes() for p in state)
    with served(pod), contextlib.closing(pod.connect(**admin)) as conn, conn.cursor() as cur:
        cur.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert cur.fetchone() == (True,)


def _sleeping(marker: str) -> list[int]:
    """Host pids of the ``sleep <marker>`` processes."""
    return [pid for pid, cmd in processes_naming(marker) if cmd.split()[:1] == ["sleep"]]


@pytest.mark.parametrize("container", [True, False], ids=["own-pid-namespace", "shared-pid-namespace"])
def test_what_a_superuser_agent_started_in_the_database_container_is_stopped_and_the_server_stays(
    scratch: Path, dump: Path, container: bool
) -> None:
    """Before its verifier, a superuser trial's grading runs ``mcpfleet-pg-serve --stop-strays`` through the server
    (the runner is another container): every process the agent started there with ``COPY ... PROGRAM`` goes, a
    daemon that left the server's session included, when the container is its own (the script its process 1).
    The server is not reset by it: the agent's orphans are the script's children, not the postmaster's, whose
    child dying by a signal would have been a crash to it (every session ended, the trial an infrastructure
    error). Where the PID namespace is shared (the test kubelet), only processes under the server's backends or
    with its PGDATA in their environment are: another process of the same user is left alone."""
    from mcpfleet.runner.services.pggrade import stop_pod_strays

    tag = str(7000 + (os.getpid() % 1000)) + ("1" if container else "2")
    pod = pod_init(scratch, f"strays-{tag}", dump, SUPERUSER, scratch / "no-prebuilt")
    bystander = subprocess.Popen(
        ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "sleep", f"{tag}3"],
        start_new_session=True,
    )
    try:
        with served(pod, container), contextlib.closing(pod.connect()) as conn, conn.cursor() as cur:
            conn.autocommit = True
            fingerprint = "SELECT pg_postmaster_start_time(), stats_reset FROM pg_stat_bgwriter"
            cur.execute(fingerprint)
            before = cur.fetchone()
            cur.execute("CREATE TEMP TABLE out (line text)")
            started = {"nohup": f"nohup sleep {tag}1", "orphan": f"sh -c 'sleep {tag}4 &'"}
            if container:
                started["daemon"] = f"setsid sleep {tag}2"
            for command in started.values():
                cur.execute(f"COPY out FROM PROGRAM $p${command} </dev/null >/dev/null 2>&1 & echo started$p$")
            deadline = time.monotonic() + 10
            while len(_sleeping(tag)) < len(started) + 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(_sleeping(tag)) == len(started) + 1  # theirs and the bystander
            assert stop_pod_strays(cur) >= len(started)
            deadline = time.monotonic() + 5
            while len(_sleeping(tag)) > 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _sleeping(tag) == [bystander.pid], processes_naming(tag)
            cur.execute(fingerprint)
            assert cur.fetchone() == before  # the same server, never reset
    finally:
        bystander.kill()
        bystander.wait()
        for pid in _sleeping(tag):
            os.kill(pid, signal.SIGKILL)
