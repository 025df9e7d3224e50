"""The bundled PostgreSQL states' dumps, and the logins to prebuild each for: the first stage of
servers/Dockerfile.postgres-db (standard library only).

    python state_dumps.py TASKS OUT

Each generator ``TASKS/postgres/states/<category>.py`` is run as a trial pod's state init container runs it
(`mcpfleet materialise`: ``python <category>.py OUT/<category>.sql``, in the runner image's Python), so the dump
here is byte for byte the one a pod restores and pg-init's key (the dump's sha256) matches. ``OUT/plan`` gets one
line ``<dump file> <database> <login>`` per data directory to prebuild: the agent's role for a category with
tasks that share nothing cluster-wide, the superuser for a category with tasks that get the cluster (the login
runner/services/pgpod.py's pod_containers gives each; tests/test_images.py checks they agree).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

POD_DATABASE = "trial"  # runner/services/pgpod.py: POD_DATABASE, POD_ROLE; pgcluster.py: SUPERUSER
POD_ROLE = "agent"
SUPERUSER = "postgres"
PREPARE = "prepare_environment.py"


def isolation(task: Path) -> str:
    """``database``, ``cluster-owner`` or ``cluster``, as runner/services/postgres.py's isolation() decides it."""
    meta = json.loads((task / "meta.json").read_text())
    declared = (meta.get("mcpfleet") or {}).get("isolation")
    if declared in ("database", "cluster-owner", "cluster"):
        return str(declared)
    return "cluster" if (task / PREPARE).is_file() else "database"


def logins(tasks: Path, category: str) -> list[str]:
    """The logins the category's tasks' pods use (the agent's role when it has no task at all). A pod is its
    trial's own cluster whatever the isolation: only ``cluster`` changes the login, to the superuser."""
    modes = {isolation(meta.parent) for meta in tasks.glob(f"postgres/*/{category}/*/meta.json")}
    users = [POD_ROLE] if modes - {"cluster"} or not modes else []
    return users + ([SUPERUSER] if "cluster" in modes else [])


def plan(tasks: Path) -> list[tuple[str, str, str]]:
    """(dump file name, database, login) for every data directory to prebuild, by category."""
    generators = sorted((tasks / "postgres" / "states").glob("*.py"))
    return [(f"{g.stem}.sql", POD_DATABASE, user) for g in generators for user in logins(tasks, g.stem)]


def generate(generator: Path, out: Path) -> None:
    with tempfile.TemporaryDirectory() as cwd:
        subprocess.run([sys.executable, str(generator), str(out)], check=True, cwd=cwd, stdin=subprocess.DEVNULL)


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit("usage: state_dumps.py TASKS OUT")
    tasks, out = Path(argv[0]), Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for generator in sorted((tasks / "postgres" / "states").glob("*.py")):
        generate(generator, out / f"{generator.stem}.sql")
        (out / f"{generator.stem}.sql").chmod(0o644)
    (out / "plan").write_text("".join(f"{dump} {db} {user}\n" for dump, db, user in plan(tasks)))


if __name__ == "__main__":
    main(sys.argv[1:])
