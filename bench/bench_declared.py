"""A declared server against the same server run by its bundled module (issue 46 §5): what declaring costs.

The bundled filesystem service and a pack's declaration of the very same pinned server (``files``: the same
tasks, the same state, ``warmStart`` on as the bundled module's spares are), run side by side in one go at
concurrency 1, 2 and 4 with the scripted oracle. Per trial, the environment time is what the engine spends
before the agent can act: the state's copy (``timings.state``) plus the wait for the MCP server's session
(``timings.mcp_start``). A trial whose worker had a spare server booted for it is *warm*; a worker's first trial
(or one whose spare did not fit) is *cold*. The table gives, per concurrency and per warm/cold, each phase's
median and count (n) for each side, and the declared sides' difference from the bundled one; ``all`` pools the
concurrencies. The goal is at most 5% on ``env``. Sides alternate run by run (the order reversed every round), so
a busy spell of a shared machine hits each side; for the per-call costs without the whole run's noise see
bench_declared_claim.py.

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
# This checkout's mcpfleet (the interpreter's, with the caller's PYTHONPATH), not whatever the console script is.
MCPFLEET = [sys.executable, "-c", "from mcpfleet.runner.cli.entry import main; main()"]
PHASES = ("state", "mcp_start", "env")  # env: the two together, what the <= 5% goal is about
DECLARATION = {
    "server": {"command": "mcp-server-filesystem", "args": ["{state}"], "env": {"TZ": "UTC"}, "warmStart": True},
    "state": {"kind": "folder"},
    "verifier": {"env": {"FILESYSTEM_TEST_DIR": "{state}"}},
}
# (label, pack, environment): the bundled module; the declaration; the declaration with its sandbox off, the
# bundled filesystem server being unsandboxed (what declaring alone costs).
SIDES = [
    ("bundled", "bundled", {}),
    ("declared", "declared", {}),
    ("unsandboxed", "declared", {"MCPFLEET_SANDBOX": "off"}),
]


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
        [*MCPFLEET, "run", str(path), "--no-progress"],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        sys.exit(f"{label} at concurrency {concurrency} failed:\n{done.stdout}\n{done.stderr}")
    trials = work / "runs" / f"{label}-c{concurrency}" / "trials"
    return [json.loads((d / "result.json").read_text()) for d in trials.iterdir()]


Times = dict[tuple[str, str], list[float]]  # (warm|cold, phase) -> seconds, one per trial


def env_times(records: list[dict]) -> Times:
    out: Times = {}
    for r in records:
        t = r["timings"]
        kind = "warm" if t.get("spare_mcp_start") else "cold"
        for phase, value in (("state", t["state"]), ("mcp_start", t["mcp_start"])):
            out.setdefault((kind, phase), []).append(value)
        out.setdefault((kind, "env"), []).append(t["state"] + t["mcp_start"])
    return out


def cell(values: list[float], base: float | None) -> str:
    """n, the median in milliseconds and (``base`` given) its difference from ``base``."""
    if not values:
        return f"{'-':>4} {'-':>14} {'':>8}"
    med = statistics.median(values)
    diff = f"{(med - base) / base * 100:>+7.1f}%" if base else f"{'':>8}"
    return f"{len(values):>4} {med * 1000:>14.1f} {diff}"


def table(by_conc: dict[str, dict[str, Times]], walls: dict[str, dict[str, list[float]]]) -> list[str]:
    """One line per (concurrency, warm/cold, phase): n and median milliseconds per side, the declared sides'
    difference from the bundled median; a wall line (median whole-run seconds) per concurrency."""
    labels = [label for label, _, _ in SIDES]
    head = f"{'conc':>4} {'trials':>6} {'phase':>9} | " + " | ".join(
        f"{'n':>4} {lab + ' ms':>14} {'':>8}" for lab in labels
    )
    lines = [head]
    for conc, times in by_conc.items():
        for kind in ("warm", "cold"):
            for phase in PHASES:
                base_values = times[labels[0]].get((kind, phase), [])
                if not base_values:
                    continue
                base = statistics.median(base_values)
                cells = [cell(base_values, None)] + [
                    cell(times[lab].get((kind, phase), []), base) for lab in labels[1:]
                ]
                lines.append(f"{conc:>4} {kind:>6} {phase:>9} | " + " | ".join(cells))
        if conc in walls:
            cells = [f"{'':>4} {statistics.median(walls[conc][lab]):>12.2f} s {'':>8}" for lab in labels]
            lines.append(f"{conc:>4} {'wall':>6} {'':>9} | " + " | ".join(cells))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="attempts per task")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side per concurrency, alternated")
    args = parser.parse_args()
    labels = [label for label, _, _ in SIDES]
    by_conc: dict[str, dict[str, Times]] = {}
    walls: dict[str, dict[str, list[float]]] = {}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-declared-") as tmp:
        work = Path(tmp)
        packs = dict(zip(("bundled", "declared"), make_packs(work, args.tasks), strict=True))
        sides = [(label, packs[pack], env) for label, pack, env in SIDES]
        for c in args.concurrency:
            times: dict[str, Times] = {label: {} for label in labels}
            walls[str(c)] = {label: [] for label in labels}
            for round_ in range(args.rounds):  # alternated, so a busy spell of a shared machine hits every side
                for label, pack, env in sides if round_ % 2 == 0 else sides[::-1]:
                    start = time.perf_counter()
                    records = run(work, pack, f"{label}-r{round_}", c, args.repeat, env)
                    assert all(r["passed"] for r in records), f"{label}: an oracle trial failed"
                    walls[str(c)][label].append(time.perf_counter() - start)
                    loads.append(os.getloadavg()[0])
                    for key, values in env_times(records).items():
                        times[label].setdefault(key, []).extend(values)
            by_conc[str(c)] = times
    pooled: dict[str, Times] = {label: {} for label in labels}
    for times in by_conc.values():
        for label in labels:
            for key, values in times[label].items():
                pooled[label].setdefault(key, []).extend(values)
    by_conc["all"] = pooled
    print(
        f"{args.tasks} filesystem tasks x {args.repeat} attempts x {args.rounds} rounds per side, scripted oracle; "
        f"load average (1 min) after each run: median {statistics.median(loads):.1f}, "
        f"range {min(loads):.1f}-{max(loads):.1f}"
    )
    print("\n".join(table(by_conc, walls)))


if __name__ == "__main__":
    main()
