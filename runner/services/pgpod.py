"""The PostgreSQL containers of a trial pod, and the login their pg-init leaves for the runner in the state volume."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.base import LOOPBACK, PodContext, stdio_server_sidecar
from mcpfleet.runner.services.pgcluster import SETTINGS, SUPERUSER
from mcpfleet.runner.services.pgtrial import Login

# A trial pod of a PostgreSQL task: after the state init container (`mcpfleet materialise`: the dump, a
# generator run), "pg-init" (servers/postgres/bin/mcpfleet-pg-init in the database image) builds the data
# directory with the trial's database restored, as the agent's login, and writes that login to the state
# volume (and the superuser's, which the runner grades with, to a volume of the runner's and its own); the
# "postgres" native sidecar serves it on 127.0.0.1 (startup probe: pg_isready); "mcp-postgres" serves postgres-mcp
# over streamable HTTP through supergateway (its password from a libpq pgpass file, never the pod spec). The pod
# is the trial's own cluster, so the login is as locally: a role owning the database only, or the superuser for
# tasks that manage roles. pg-init copies a data directory prebuilt for the exact
# state and login when the database image carries one (the bundled states; 2-3.6x faster, bench/bench_pg_pod.py),
# else restores the dump (any pack).

POD_PG_PORT = 5432
PGDATA_VOLUME = "pgdata"
PGDATA_MOUNT = "/pgdata"
POD_DATABASE = "trial"
POD_ROLE = "agent"
POD_LOGIN_DIR = ".postgres"  # in the state volume: login.json (the runner's) and pgpass (the MCP server's)
# The superuser's login (admin.json), which the runner grades with (pggrade.py): on a volume of its own that only
# pg-init (which writes it) and the runner mount, never the database or MCP sidecars (a superuser agent's shell
# runs in the database's container). The runner is told where through ADMIN_ENV.
PG_ADMIN_VOLUME = "pg-admin"
PG_ADMIN_MOUNT = "/pg-admin"
ADMIN_ENV = "MCPFLEET_PG_ADMIN"


def _read_login(path: Path, what: str) -> Login:
    try:
        doc = json.loads(path.read_text())
        return Login(str(doc["host"]), int(doc["port"]), str(doc["database"]), str(doc["user"]), str(doc["password"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"the pod's database {what} is missing or unreadable ({path}): {exc}") from None


def pod_login(state_dir: Path) -> Login:
    """The login pg-init wrote for this pod's trial (the runner reads it; the agent's MCP server uses it)."""
    return _read_login(state_dir / POD_LOGIN_DIR / "login.json", "login")


def pod_admin() -> Login:
    """The pod's superuser login pg-init wrote for the runner (``ADMIN_ENV``: its path)."""
    return _read_login(Path(os.environ.get(ADMIN_ENV) or f"{PG_ADMIN_MOUNT}/admin.json"), "superuser's login")


def pod_runner() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The runner's mount of the superuser's login, read-only, and the variable that names it."""
    mount = {"name": PG_ADMIN_VOLUME, "mountPath": PG_ADMIN_MOUNT, "readOnly": True}
    return [mount], [{"name": ADMIN_ENV, "value": f"{PG_ADMIN_MOUNT}/admin.json"}]


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
                {"name": "ADMIN_DIR", "value": PG_ADMIN_MOUNT},
                {"name": "DB_ROLE_LIMITS", "value": " ".join(f"{k}={v}" for k, v in pgcluster.ROLE_LIMITS.items())},
            ],
            "volumeMounts": [*pg_mounts, {"name": PG_ADMIN_VOLUME, "mountPath": PG_ADMIN_MOUNT}],
            "terminationMessagePolicy": "FallbackToLogsOnError",
            **extra,
        },
        {
            "name": "postgres",
            "image": db_image,
            "restartPolicy": "Always",
            "command": ["mcpfleet-pg-serve"],
            "args": [*settings, "-c", f"listen_addresses={LOOPBACK}"],  # as the script does: said where it shows
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
