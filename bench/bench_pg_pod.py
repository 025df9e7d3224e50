"""How a PostgreSQL trial pod's database starts: restoring the dump in the pod (what the pod does) against
copying a prebuilt data directory (the alternative: one data directory per state, shipped in an image or a
volume snapshot), side by side per state, interleaved so a busy spell hits both alike.

Both run the pod's own scripts (servers/postgres/bin) as the pod would, the database sidecar's start included
(until pg_isready answers); the state's dump is made beforehand (in the pod, the state init container runs the
generator while the runner image starts: not part of either path).

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

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "servers" / "postgres" / "bin"
STATES = REPO / "tasks" / "postgres" / "states"


def pg_path() -> str:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    return os.pathsep.join([str(BIN), *(str(p) for p in found[-1:]), os.environ.get("PATH", "/usr/bin:/bin")])


def env_for(base: Path, port: int, dump: Path | None) -> dict[str, str]:
    return {
        "PATH": pg_path(),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "PGDATA": str(base / "pg" / "data"),
        "PGSOCKET": str(base / "pg" / "run"),
        "PGPORT": str(port),
        "STATE_DUMP": str(dump) if dump else "",
        "DB_NAME": "trial",
        "DB_USER": "agent",
        "LOGIN_DIR": str(base / "state" / ".postgres"),
    }


def serve_until_ready(env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [str(BIN / "mcpfleet-pg-serve"), "-c", "fsync=off"],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], env=env).returncode != 0:
        if proc.poll() is not None:
            sys.exit(f"the database sidecar exited {proc.returncode}")
        time.sleep(0.02)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, 15)
    proc.wait()


def fresh(root: Path, name: str) -> Path:
    base = root / name
    (base / "state").mkdir(parents=True)
    (base / "pg").mkdir()
    for d in (root, base, base / "state", base / "pg"):
        d.chmod(0o755)
    return base


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--states", nargs="*", default=sorted(p.stem for p in STATES.glob("*.py")))
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-pg-pod-"))
    root.chmod(0o755)
    rows = []
    try:
        for state in args.states:
            dump = root / f"{state}.sql"
            subprocess.run([sys.executable, str(STATES / f"{state}.py"), str(dump)], check=True, cwd=root)
            dump.chmod(0o644)
            # The prebuilt data directory: built once, as the restore path builds it, then stopped.
            built = fresh(root, f"{state}-built")
            subprocess.run([str(BIN / "mcpfleet-pg-init")], env=env_for(built, 55431, dump), check=True)
            size_mb = sum(f.stat().st_size for f in (built / "pg" / "data").rglob("*") if f.is_file()) / 2**20
            restore, copy = [], []
            for i in range(args.rounds):
                base = fresh(root, f"{state}-r{i}")
                env = env_for(base, 55432, dump)
                t = time.perf_counter()
                subprocess.run([str(BIN / "mcpfleet-pg-init")], env=env, check=True)
                stop(serve_until_ready(env))
                restore.append(time.perf_counter() - t)
                shutil.rmtree(base)
                base = fresh(root, f"{state}-c{i}")
                env = env_for(base, 55433, dump)
                t = time.perf_counter()
                subprocess.run(["cp", "-a", str(built / "pg"), str(base)], check=True)
                subprocess.run(["cp", "-a", str(built / "state" / ".postgres"), str(base / "state")], check=True)
                stop(serve_until_ready(env))
                copy.append(time.perf_counter() - t)
                shutil.rmtree(base)
            rows.append(
                (state, dump.stat().st_size / 2**20, size_mb, statistics.median(restore), statistics.median(copy))
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"rounds {args.rounds}, load average {load:.1f}; seconds to a database that answers pg_isready, median")
    print("| state | dump MB | data dir MB | restore dump in pod | copy prebuilt data dir | ratio |")
    print("|---|---|---|---|---|---|")
    for state, dmb, smb, r, c in rows:
        print(f"| {state} | {dmb:.1f} | {smb:.1f} | {r:.2f} | {c:.2f} | {r / c:.1f}x |")


if __name__ == "__main__":
    main()
