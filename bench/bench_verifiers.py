"""What each PostgreSQL verifier costs: wall time, its own CPU and its database backend's CPU, standalone.

For every bundled PostgreSQL task (or those matching `--tasks`), the trial's database is built as a run builds
it (the run's cluster, the task's template, a clone owned by a trial role; a cluster of its own for tasks that
declare one), the oracle's `execute_sql` calls are applied to it directly (each call one transaction, as
postgres-mcp runs it), and verify.py runs `--repeat` times under the runner's own contract and environment.
Printed per verifier: the median wall time, the verifier process's user+system CPU, the backend's CPU (the
postmaster's reaped children over the run: the verifier's backends, plus any autovacuum worker that ended
meanwhile) and the exit code.

    .venv/bin/python bench/bench_verifiers.py [--tasks SUBSTR ...] [--repeat 3]
    .venv/bin/python bench/bench_verifiers.py --ref main            # also time main's verify.py on the same state
    .venv/bin/python bench/bench_verifiers.py --states all --ref main   # oracle, no-op and every mutant: exit codes
    .venv/bin/python bench/bench_verifiers.py --tasks vp_org --profile  # cProfile of one run, top 25 by cumtime

`--ref REV` runs the verify.py of a git revision on the same database right after the current one (a
before/after table from one session); with `--states all` the no-op and every mutant of mutants.json are
built too, and a line per state shows both exit codes (the oracle must pass, everything else must fail).
`--fails` prints the two verifiers' failed checks when they differ. `--pgtz ZONE` sets the verifiers' session
time zone through PGTZ (they must not depend on it); `--env KEY=VALUE` sets any other variable for them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parent.parent


def _reaped_cpu(pid: int) -> float:
    """CPU seconds of the children a live process has reaped (a postmaster: its ended backends)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK


def _postmaster(base: str, port: int) -> int:
    """The pid of the cluster under ``base`` listening on ``port``."""
    for pidfile in Path(base).glob("**/postmaster.pid"):
        lines = pidfile.read_text().split("\n")
        if len(lines) > 3 and lines[3].strip() == str(port):
            return int(lines[0])
    raise RuntimeError(f"no postmaster on port {port} under {base}")


def _messages(path: Path, answer: str | None) -> Path:
    from bench_pg import verifier_messages

    path.mkdir(parents=True, exist_ok=True)
    (path / "messages.json").write_text(json.dumps(verifier_messages("task", answer)))
    return path / "messages.json"


def _apply(login: Any, steps: list[Any]) -> None:
    """The steps' execute_sql calls, each in one transaction; a failing call is rolled back, as postgres-mcp does."""
    import psycopg2

    conn = psycopg2.connect(
        host=login.host, port=login.port, dbname=login.database, user=login.user, password=login.password
    )
    try:
        for step in steps:
            if step.tool != "execute_sql":
                continue
            with conn.cursor() as cur:
                try:
                    cur.execute(step.arguments["sql"])
                    conn.commit()
                except psycopg2.Error:
                    conn.rollback()
    finally:
        conn.close()


def _run_once(script: Path, env: dict[str, str], db: str, pm: int) -> tuple[float, float, float, int, str]:
    """(wall, own CPU, backend CPU, exit code, output) of one verify.py run."""
    from mcpfleet.runner.environment.verifier import verifier_command

    with tempfile.TemporaryFile() as out:
        before = _reaped_cpu(pm)
        t = time.perf_counter()
        proc = subprocess.Popen(
            verifier_command(script, [db]), cwd=str(script.parent), env=env, stdout=out, stderr=subprocess.STDOUT
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        time.sleep(0.05)  # the postmaster reaps the verifier's backend
        backend = _reaped_cpu(pm) - before
        out.seek(0)
        text = out.read().decode(errors="replace")
    return wall, usage.ru_utime + usage.ru_stime, backend, proc.returncode, text


def _timed(script: Path, env: dict[str, str], db: str, pm: int, repeat: int) -> dict[str, Any]:
    runs = [_run_once(script, env, db, pm) for _ in range(repeat)]
    return {
        "wall": statistics.median(r[0] for r in runs),
        "cpu": statistics.median(r[1] for r in runs),
        "backend": statistics.median(r[2] for r in runs),
        "codes": sorted({r[3] for r in runs}),
        "out": runs[-1][4],
    }


def _fails(out: str) -> list[str]:
    return sorted(line.strip() for line in out.splitlines() if line.lstrip().startswith("FAIL"))


def _diff_fails(now: str, ref: str) -> None:
    """The failed checks of the two verifiers, side by side, when they differ."""
    a, b = _fails(now), _fails(ref)
    if a != b:
        print("    now: " + "\n         ".join(a or ["(none)"]))
        print("    ref: " + "\n         ".join(b or ["(none)"]))


def _ref_script(rev: str, task: Any, into: Path) -> Path:
    rel = task.verifier.resolve().relative_to(ROOT)
    text = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    path = into / task.name / "verify.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def _state(
    service: Any, handle: Any, task: Any, name: str, steps: list[Any], answer: str | None, args: Any, work: Path
) -> list[dict[str, Any]]:
    from mcpfleet.runner.environment.verifier import verifier_env
    from mcpfleet.runner.services.pgtrial import Login

    rows = []
    async with service.environment(task, work / f"{task.name}-{name}", handle) as env:
        login_env = env.verifier_env
        db = env.verifier_args[0]
        login = Login(
            login_env["POSTGRES_HOST"],
            int(login_env["POSTGRES_PORT"]),
            login_env["POSTGRES_DATABASE"],
            login_env["POSTGRES_USERNAME"],
            login_env["POSTGRES_PASSWORD"],
        )
        await asyncio.to_thread(_apply, login, steps)
        messages = _messages(work / f"messages-{task.name}-{name}", answer)
        venv = verifier_env({**login_env, "MCP_MESSAGES": str(messages)})
        if args.pgtz:
            venv["PGTZ"] = args.pgtz
        venv.update(kv.split("=", 1) for kv in args.env or [])
        pm = _postmaster(handle.base, login.port)
        scripts = [("now", task.verifier)] + ([("ref", _ref_script(args.ref, task, work / "ref"))] if args.ref else [])
        for label, script in scripts:
            if args.profile and label == "now":
                prof = work / "verify.prof"
                subprocess.run(
                    [sys.executable, "-m", "cProfile", "-o", str(prof), str(script), db],
                    cwd=str(script.parent),
                    env=venv,
                    capture_output=True,
                )
                import pstats

                pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(25)
            r = await asyncio.to_thread(_timed, script, venv, db, pm, args.repeat if name == "oracle" else 1)
            rows.append({"task": task.name, "state": name, "which": label, **r})
    return rows


async def _main(args: argparse.Namespace) -> int:
    from mcpfleet.runner.services import get_service
    from mcpfleet.runner.tasks.discovery import discover

    tasks = [t for t in discover(ROOT / "tasks") if t.service == "postgres"]
    if args.tasks:
        tasks = [t for t in tasks if any(s in t.id for s in args.tasks)]
    service = get_service("postgres")
    bad = 0
    with service.run_resource() as handle, tempfile.TemporaryDirectory(prefix="bench-verifiers-") as tmp:
        work = Path(tmp)
        print(f"{'task':34} {'state':28} {'which':5} {'wall s':>7} {'cpu s':>6} {'backend s':>9}  exit")
        for task in tasks:
            states: list[tuple[str, list[Any], str | None, bool]] = [
                ("oracle", list(task.oracle), task.oracle_answer, True)
            ]
            if args.states == "all":
                states.append(("noop", [], None, False))
                for m in task.mutants:
                    steps = (list(task.oracle) if m.after_oracle else []) + list(m.steps)
                    states.append((m.name, steps, m.answer, False))
            for name, steps, answer, should_pass in states:
                rows = await _state(service, handle, task, name, steps, answer, args, work)
                if args.fails and len(rows) == 2:
                    _diff_fails(rows[0]["out"], rows[1]["out"])
                for r in rows:
                    ok = (r["codes"] == [0]) == should_pass
                    bad += not ok
                    print(
                        f"{r['task'][:34]:34} {name[:28]:28} {r['which']:5} {r['wall']:7.3f} {r['cpu']:6.3f} "
                        f"{r['backend']:9.3f}  {r['codes']}{'' if ok else '  <-- WRONG'}",
                        flush=True,
                    )
                    if args.verbose or not ok:
                        print("    " + r["out"].strip().replace("\n", "\n    "))
    print(f"load average {os.getloadavg()[0]:.2f}; {bad} wrong outcome(s)")
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="*", help="task ids containing any of these")
    ap.add_argument("--repeat", type=int, default=3, help="runs per verifier on the oracle's state (median)")
    ap.add_argument("--states", choices=["oracle", "all"], default="oracle")
    ap.add_argument("--ref", help="git revision whose verify.py is also timed on the same state")
    ap.add_argument("--pgtz", help="PGTZ for the verifiers (their session time zone)")
    ap.add_argument("--env", action="append", help="KEY=VALUE for the verifiers (e.g. PGOPTIONS='-c jit=off')")
    ap.add_argument("--profile", action="store_true", help="cProfile one run of each current verifier")
    ap.add_argument("--fails", action="store_true", help="with --ref: print both failed-check lists when they differ")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every verifier's output")
    sys.exit(asyncio.run(_main(ap.parse_args())))


if __name__ == "__main__":
    main()
