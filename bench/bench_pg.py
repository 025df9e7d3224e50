"""The PostgreSQL half of bench_local.py: MCPMark's way (serial, one shared server) against `mcpfleet run`.

Per trial, the environment time is what a trial spends outside the agent and the model for its database and
server: clone (mcpfleet: the clone, or claiming a spare; its first trial per category also builds the
template), MCP server start, verify, drop. The cluster's start is paid once per run and amortised over its
trials. MCPMark's way restores its templates at set-up (counted with its server's start).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml


def verifier_messages(description: str, answer: str | None) -> list[dict[str, Any]]:
    """A conversation as MCPMark's agent leaves it for verify.py: the task, then the final answer if any."""
    items: list[dict[str, Any]] = [{"role": "user", "content": description}]
    if answer:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer}],
            }
        )
    return items


async def _mcpmark_task(task: Any, h: Any, template: str | None, latency: float, n: int, work: Path) -> dict[str, Any]:
    from psycopg2 import sql

    from mcpfleet.runner.environment.mcp_client import connect_stdio
    from mcpfleet.runner.environment.server import ServerCommand
    from mcpfleet.runner.environment.verifier import run_verifier
    from mcpfleet.runner.services.pgstate import PREPARE, run_prepare
    from mcpfleet.runner.services.pgtrial import Login
    from mcpfleet.runner.services.postgres import server_executable

    db = f"{task.name[:40]}_{n}"
    login = Login(h.host, h.port, db, "postgres", h.password)

    def admin(statement: Any) -> None:
        with contextlib.closing(h.connect()) as conn, conn.cursor() as cur:
            cur.execute(statement)

    row: dict[str, Any] = {"task": task.id}
    t = time.perf_counter()
    source = sql.SQL(" WITH TEMPLATE {}").format(sql.Identifier(template)) if template else sql.SQL("")
    await asyncio.to_thread(admin, sql.SQL("CREATE DATABASE {}{}").format(sql.Identifier(db), source))
    if template is None and (task.path / PREPARE).is_file():
        await run_prepare(task, login)
    row["clone"] = time.perf_counter() - t
    server = ServerCommand(str(server_executable()), ["--access-mode=unrestricted"], {"DATABASE_URI": login.dsn()})
    with open(work / f"server-{n}.log", "w+b") as log:
        t = time.perf_counter()
        async with connect_stdio(server, log, cwd=work) as session:
            await session.list_tools()
            row["mcp_start"] = time.perf_counter() - t
            for step in task.oracle:
                await asyncio.sleep(latency)  # the model's turn, as the scripted oracle's latency in mcpfleet
                await session.call_tool(step.tool, step.resolve(str(work)))
            await asyncio.sleep(latency)  # the final answer's turn
    messages = work / f"messages-{n}" / "messages.json"
    messages.parent.mkdir()
    messages.write_text(json.dumps(verifier_messages(task.description, task.oracle_answer)))
    v = await run_verifier(task.verifier, {**login.env(), "MCP_MESSAGES": str(messages)}, [db], 300)
    row["verify"], row["passed"] = v.duration_s, v.passed
    t = time.perf_counter()
    await asyncio.to_thread(admin, sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(db)))
    row["drop"] = time.perf_counter() - t
    return row


def mcpmark_main(spec_path: Path, latency: float) -> None:
    """MCPMark's way, in this process: results go to <spec>.mcpmark.json."""
    from mcpfleet.runner.plan.expand import plan
    from mcpfleet.runner.services import run_resources
    from mcpfleet.runner.services.pgstate import ensure_template
    from mcpfleet.runner.services.postgres import state_source
    from mcpfleet.runner.spec.load import load_evalrun
    from mcpfleet.runner.tasks.discovery import find_task

    run = load_evalrun(spec_path)
    trials = plan(run, spec_path.parent)
    tasks = [find_task(Path(t.tasks_root), t.task_id, Path(t.states_path) if t.states_path else None) for t in trials]
    t0 = time.perf_counter()
    with run_resources(["postgres"]) as res, tempfile.TemporaryDirectory() as tmp:
        h = res["postgres"]
        templates = {}
        for task in tasks:  # MCPMark restores every category's database once, at set-up
            src = state_source(task)
            if src is not None and src.template not in templates:
                templates[src.template] = ensure_template(h, src)
        setup = time.perf_counter() - t0
        wall = time.perf_counter()
        rows = []
        for n, task in enumerate(tasks):
            src = state_source(task)
            rows.append(asyncio.run(_mcpmark_task(task, h, src.template if src else None, latency, n, Path(tmp))))
        wall = time.perf_counter() - wall
    spec_path.with_suffix(".mcpmark.json").write_text(json.dumps({"setup": setup, "loop": wall, "trials": rows}))


def _cluster_start() -> float:
    from mcpfleet.runner.services import run_resources

    t = time.perf_counter()
    with run_resources(["postgres"]):
        return time.perf_counter() - t


def _fleet_rows(run_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for p in sorted(run_dir.glob("trials/*/result.json")):
        r = json.loads(p.read_text())
        tm = r["timings"]
        rows.append(
            {
                "task": r["task_id"],
                "passed": r["passed"],
                "clone": tm["state"],
                "mcp_start": tm["mcp_start"],
                "verify": tm["verify"],
                "drop": tm.get("teardown", 0.0),
            }
        )
    return rows


def _medians(rows: list[dict[str, Any]], amortised: float) -> dict[str, float]:
    med = statistics.median
    env = [r["clone"] + r["mcp_start"] + r["verify"] + r["drop"] + amortised for r in rows]
    return {
        "env": med(env),
        "clone": med(r["clone"] for r in rows),
        "mcp_start": med(r["mcp_start"] for r in rows),
        "verify": med(r["verify"] for r in rows),
        "drop": med(r["drop"] for r in rows),
    }


def postgres_bench(args: Any, evalrun: Any, timed: Any, mcpfleet: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-pg-"))
    cluster_s = _cluster_start()
    print(f"  cluster start (initdb + start, once per run): {cluster_s:.2f} s", file=sys.stderr)
    results: list[tuple[str, int, float, dict[str, float], int, int]] = []
    modes = ([] if args.skip_serial else [("MCPMark's way (serial)", 1)]) + [
        ("mcpfleet run", c) for c in args.concurrency
    ]
    for label, conc in modes:
        name = "mcpmark" if label.startswith("MCPMark") else f"c{conc}"
        spec_path = work / f"{name}.yaml"
        spec = evalrun(name, work / "runs", args.attempts, args.latency, conc, "postgres", args.tasks.resolve())
        spec_path.write_text(yaml.safe_dump(spec))
        if name == "mcpmark":
            env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
            wall = timed(
                [
                    sys.executable,
                    str(Path(__file__).with_name("bench_local.py")),
                    "--mcpmark-worker",
                    str(spec_path),
                    "--latency",
                    str(args.latency),
                ],
                env=env,
            )
            data = json.loads(spec_path.with_suffix(".mcpmark.json").read_text())
            rows, setup = data["trials"], data["setup"]
        else:
            wall = timed([str(mcpfleet), "run", str(spec_path), "--no-progress"])
            rows, setup = _fleet_rows(work / "runs" / name), cluster_s
        passed = sum(r["passed"] for r in rows)
        results.append((label, conc, wall, _medians(rows, setup / max(1, len(rows))), passed, len(rows)))
        print(f"  {label} c={conc}: {wall:.1f} s, {passed}/{len(rows)} passed", file=sys.stderr)

    base = results[0][2] if not args.skip_serial else None
    print(
        f"\npostgres suite ({args.tasks}), scripted oracle at {args.latency:g} s per model turn, "
        f"attempts={args.attempts}, {results[0][5]} trials per mode; per-trial medians in seconds\n"
    )
    head = ("mode", "conc", "wall", "speedup", "passed", "env/trial", "clone", "mcp_start", "verify", "drop")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for label, conc, wall, m, passed, n in results:
        speed = f"{base / wall:.2f}x" if base else "-"
        print(
            f"| {label} | {conc} | {wall:.1f} | {speed} | {passed}/{n} | {m['env']:.3f} | {m['clone']:.3f} | "
            f"{m['mcp_start']:.3f} | {m['verify']:.3f} | {m['drop']:.3f} |"
        )
    print(f"\nenv/trial = clone + mcp_start + verify + drop + the run's set-up / trials; records under {work}")
