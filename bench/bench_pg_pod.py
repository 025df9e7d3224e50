"""How a PostgreSQL trial pod's database starts, by the two paths of its pg-init container
(servers/postgres/bin/mcpfleet-pg-init): restoring the dump (any pack) against copying the data directory the
database image prebuilt for the state (the bundled states), side by side per state, interleaved so a busy spell
hits both alike.

Both run the pod's own scripts with the pod spec's arguments and environment (runner/services/postgres.py's
pod_containers), the database sidecar's start included (until pg_isready answers); each round checks from
pg-init's log line that it took the path measured. The state's dump is made beforehand, as `mcpfleet
materialise` makes it (in the pod, the state init container runs the generator while the runner image starts:
not part of either path), and the prebuilt directory with `mcpfleet-pg-init --prebuild`, as the image's build does.
Each timed start begins after a sync, so neither path pays for the other's writeback.

    .venv/bin/python bench/bench_pg_pod.py [--rounds 3] [--states retail hr]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcpfleet.runner.services.base import PodContext
from mcpfleet.runner.services.pgpod import POD_DATABASE, POD_ROLE, pod_containers

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "servers" / "postgres" / "bin"
STATES = REPO / "tasks" / "postgres" / "states"
STATE_MOUNT = "/state"


def pg_path() -> str:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    return os.pathsep.join([str(BIN), *(str(p) for p in found[-1:]), os.environ.get("PATH", "/usr/bin:/bin")])


def pod_spec(dump: str) -> dict[str, dict[str, Any]]:
    """The pg-init and postgres containers of an agent-login pod for this dump, as the operator renders them."""
    pod = PodContext("runner", "mcp", 8000, STATE_MOUNT, images={"postgres-db": "db", "postgres": "mcp"})
    return {c["name"]: c for c in pod_containers({"dump": dump, "isolation": "database"}, pod)}


def fresh(root: Path, name: str, dump: Path) -> Path:
    """A pod's volumes: the state volume with the dump in it, an empty pgdata."""
    base = root / name
    (base / "state").mkdir(parents=True)
    (base / "pgdata").mkdir()
    for d in (base, base / "state", base / "pgdata"):
        d.chmod(0o755)
    shutil.copyfile(dump, base / "state" / dump.name)
    (base / "state" / dump.name).chmod(0o644)
    os.sync()  # no writeback left from the round before (a restore dirties ~100 MB) to slow the next start
    return base


def pod_env(base: Path, container: dict[str, Any], port: int, prebuilt: Path) -> dict[str, str]:
    def local(value: str) -> str:
        return value.replace("/pgdata", str(base / "pgdata")).replace(STATE_MOUNT, str(base / "state"))

    env = {"PATH": pg_path(), "MCPFLEET_PG_PREBUILT": str(prebuilt)}
    env |= {e["name"]: local(e["value"]) for e in container["env"]}
    env["PGPORT"] = str(port)
    return env


def start_pod(base: Path, dump: Path, prebuilt: Path, port: int, expect: str) -> float:
    """pg-init, then the database sidecar until pg_isready answers: seconds. The sidecar is stopped after."""
    spec = pod_spec(dump.name)
    init, serve = spec["pg-init"], spec["postgres"]
    env = pod_env(base, init, port, prebuilt)
    t = time.perf_counter()
    out = subprocess.run([*init["command"], *init["args"]], env=env, check=True, capture_output=True, text=True)
    if not out.stdout.startswith(f"mcpfleet-pg-init: {expect}"):
        sys.exit(f"pg-init took another path than '{expect}': {out.stdout.strip()}")
    proc = subprocess.Popen(
        [*serve["command"], *serve["args"]],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], env=env).returncode != 0:
            if proc.poll() is not None:
                sys.exit(f"the database sidecar exited {proc.returncode}")
            time.sleep(0.02)
        return time.perf_counter() - t
    finally:
        os.killpg(proc.pid, 15)
        proc.wait()


def make_dump(root: Path, state: str) -> Path:
    """The generator's output, as `mcpfleet materialise` writes it into a pod's state volume."""
    dump = root / "dumps" / f"{state}.sql"
    dump.parent.mkdir(exist_ok=True)
    dump.parent.chmod(0o755)
    subprocess.run([sys.executable, str(STATES / f"{state}.py"), str(dump)], check=True, cwd=root)
    dump.chmod(0o644)
    return dump


def prebuild(dump: Path, prebuilt: Path) -> Path:
    env = {"PATH": pg_path(), "LANG": "C.UTF-8", "TZ": "UTC", "DB_NAME": POD_DATABASE, "DB_USER": POD_ROLE}
    args = pod_spec(dump.name)["pg-init"]["args"]
    out = subprocess.run(
        [str(BIN / "mcpfleet-pg-init"), "--prebuild", str(dump), str(prebuilt), *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return Path(out.strip().removeprefix("mcpfleet-pg-init: prebuilt "))


def size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def bench_state(root: Path, state: str, rounds: int) -> tuple[str, float, float, float, float]:
    dump = make_dump(root, state)
    prebuilt, nothing = root / "prebuilt", root / "no-prebuilt"
    built = prebuild(dump, prebuilt)
    restore, copy = [], []
    for i in range(rounds):
        base = fresh(root, f"{state}-r{i}", dump)
        restore.append(start_pod(base, dump, nothing, 55432, "no prebuilt for "))
        shutil.rmtree(base)
        base = fresh(root, f"{state}-c{i}", dump)
        copy.append(start_pod(base, dump, prebuilt, 55433, "prebuilt "))
        shutil.rmtree(base)
    data_mb = size_mb(built)
    shutil.rmtree(built)
    return state, dump.stat().st_size / 2**20, data_mb, statistics.median(restore), statistics.median(copy)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--states", nargs="*", default=sorted(p.stem for p in STATES.glob("*.py")))
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-pg-pod-"))
    root.chmod(0o755)
    load_before = os.getloadavg()[0]
    try:
        rows = [bench_state(root, state, args.rounds) for state in args.states]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    print(f"rounds {args.rounds}, {load}; seconds from pg-init's start to pg_isready, median")
    print("| state | dump MB | data dir MB | restore s | prebuilt s | ratio |")
    print("|---|---|---|---|---|---|")
    for state, dmb, smb, r, c in rows:
        print(f"| {state} | {dmb:.1f} | {smb:.1f} | {r:.2f} | {c:.2f} | {r / c:.1f}x |")


if __name__ == "__main__":
    main()
