"""A declared server against the same server run by its bundled module (issue 46 §5): what declaring costs.

The bundled filesystem service and a pack's declaration of the very same pinned server (``files``: the same
tasks, the same state, ``warmStart`` on as the bundled module's spares are), run side by side in one go at
concurrency 1, 2 and 4 with the scripted oracle. Per trial, the environment time is what the engine spends
before the agent can act: the state's copy (``timings.state``) plus the wait for the MCP server's session
(``timings.mcp_start``). A trial whose worker had a spare server booted for it is *warm*; a worker's first trial
(or one whose spare did not fit) is *cold*. The table gives each side's median per (concurrency, warm/cold), and
the declared side's overhead; the goal is at most 5%.

    .venv/bin/python bench/bench_declared.py               # 10 tasks x 3 attempts x 2 rounds (~8 min)
    .venv/bin/python bench/bench_declared.py --tasks 4 --repeat 1 --rounds 1   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
DECLARATION = {
    "server": {"command": "mcp-server-filesystem", "args": ["{state}"], "env": {"TZ": "UTC"}, "warmStart": True},
    "state": {"kind": "folder"},
    "verifier": {"env": {"FILESYSTEM_TEST_DIR": "{state}"}},
}


def make_packs(work: Path, tasks: int) -> tuple[Path, Path]:
    """(bundled pack, declared pack): the first ``tasks`` bundled filesystem tasks, under each service name."""
    source = REPO / "tasks" / "filesystem"
    chosen = sorted(source.glob("standard/*/*/description.md"))[:tasks]
    packs = []
    for name in ("filesystem", "files"):
        root = work / f"pack-{name}"
        for desc in chosen:
            rel = desc.parent.relative_to(source)
            shutil.copytree(desc.parent, root / name / rel)
        shutil.copytree(source / "states", root / name / "states")
        if name == "files":
            (root / name / "service.yaml").write_text(yaml.safe_dump(DECLARATION))
        packs.append(root)
    return packs[0], packs[1]


def run(
    work: Path, pack: Path, label: str, concurrency: int, repeat: int, env: dict[str, str] | None = None
) -> list[dict]:
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": f"{label}-c{concurrency}"},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}],
            "tasks": {"path": str(pack)},
            "attempts": repeat,
            "concurrency": {"total": concurrency},
            "output": {"uri": str(work / "runs")},
        },
    }
    path = work / f"{label}-c{concurrency}.yaml"
    path.write_text(yaml.safe_dump(doc))
    done = subprocess.run(
        [str(MCPFLEET), "run", str(path), "--no-progress"],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        sys.exit(f"{label} at concurrency {concurrency} failed:\n{done.stdout}\n{done.stderr}")
    trials = work / "runs" / f"{label}-c{concurrency}" / "trials"
    return [json.loads((d / "result.json").read_text()) for d in trials.iterdir()]


def env_times(records: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"warm": [], "cold": []}
    for r in records:
        t = r["timings"]
        out["warm" if t.get("spare_mcp_start") else "cold"].append(t["state"] + t["mcp_start"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="attempts per task")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side per concurrency, alternated")
    args = parser.parse_args()
    rows: list[tuple[int, str, int | None, float, list[tuple[int | None, float, float | None]]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-declared-") as tmp:
        work = Path(tmp)
        bundled, declared = make_packs(work, args.tasks)
        sides = [
            ("bundled", bundled, {}),
            ("declared", declared, {}),
            ("unsandboxed", declared, {"MCPFLEET_SANDBOX": "off"}),  # the declaration's cost alone
        ]
        for c in args.concurrency:
            times: dict[str, dict[str, list[float]]] = {k: {"warm": [], "cold": []} for k, _, _ in sides}
            walls: dict[str, list[float]] = {k: [] for k, _, _ in sides}
            for round_ in range(args.rounds):  # alternated, so a busy spell of a shared machine hits every side
                for label, pack, env in sides if round_ % 2 == 0 else sides[::-1]:
                    start = time.perf_counter()
                    records = run(work, pack, f"{label}-r{round_}", c, args.repeat, env)
                    assert all(r["passed"] for r in records), f"{label}: an oracle trial failed"
                    walls[label].append(time.perf_counter() - start)
                    for kind, values in env_times(records).items():
                        times[label][kind] += values
            for kind in ("cold", "warm"):
                b = times["bundled"][kind]
                if not b:
                    continue
                mb = statistics.median(b)
                cells: list[tuple[int | None, float, float | None]] = []
                for label in ("declared", "unsandboxed"):
                    d = times[label][kind]
                    md = statistics.median(d) if d else float("nan")
                    cells.append((len(d), md, (md - mb) / mb * 100 if mb else 0.0))
                rows.append((c, kind, len(b), mb, cells))
            rows.append(
                (
                    c,
                    "wall",
                    None,
                    statistics.median(walls["bundled"]),
                    [(None, statistics.median(walls[k]), None) for k in ("declared", "unsandboxed")],
                )
            )
    print(
        f"{args.tasks} filesystem tasks x {args.repeat} attempts x {args.rounds} rounds per side, scripted oracle; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    head = f"{'conc':>4} {'trials':>6} {'n':>4} {'bundled s':>10} | {'declared s':>10} {'overhead':>9} | "
    print(head + f"{'unsandboxed s':>13} {'overhead':>9}")
    for c, kind, nb, mb, cells in rows:
        if kind == "wall":
            print(
                f"{c:>4} {'wall':>6} {'':>4} {mb:>10.2f} | {cells[0][1]:>10.2f} {'':>9} | {cells[1][1]:>13.2f} {'':>9}"
            )
        else:
            (_, d1, p1), (_, d2, p2) = cells
            line = f"{c:>4} {kind:>6} {nb:>4} {mb:>10.3f} | {d1:>10.3f} {p1 or 0.0:>+8.1f}% | "
            print(line + f"{d2:>13.3f} {p2 or 0.0:>+8.1f}%")


if __name__ == "__main__":
    main()
