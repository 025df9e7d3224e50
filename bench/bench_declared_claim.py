"""A declared server's environment, phase by phase, against the bundled module's, in one process (issue 46 §5).

``bench_declared.py`` compares whole ``mcpfleet run`` invocations; on a shared machine their cells swing by
tens of percent, which hides a difference of a few. This bench times the very calls a worker makes for a trial's
environment, in one process and one event loop, the sides alternated trial by trial, so a busy spell of the
machine hits every side alike, and it reports CPU time beside wall time (CPU time does not count the waits for a
core that a loaded machine adds):

- **warm:** a spare server booted on an empty folder beforehand (``Service.spare``, then its session); timed is
  the claim (``Spare.claim``: the state copied in, the trial's environment made), as ``timings.state`` is;
- **cold:** no spare; timed are the environment (``Service.environment``: the copy, the server's command made,
  and for a sandboxed server its plan and launcher) and the MCP session's start (spawn to ``initialize``'s
  answer), as ``timings.state`` and ``timings.mcp_start`` are.

The sides are ``bench_declared.py``'s: the bundled ``filesystem`` service; the same pinned server declared in a
pack's ``service.yaml``; and that declaration with its sandbox off (``MCPFLEET_SANDBOX=off``), the bundled
filesystem server being unsandboxed. CPU is this process's (all its threads), not the server's.

    .venv/bin/python bench/bench_declared_claim.py                  # 6 tasks x 10 rounds
    .venv/bin/python bench/bench_declared_claim.py --tasks 2 --rounds 2   # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_declared import SIDES, make_packs  # noqa: E402

from mcpfleet.runner.environment import sandbox  # noqa: E402
from mcpfleet.runner.environment.mcp_client import connect_stdio  # noqa: E402
from mcpfleet.runner.services import service_of  # noqa: E402
from mcpfleet.runner.tasks.discovery import discover  # noqa: E402

Sample = dict[str, float]


def _sandbox(on: bool) -> None:
    """The sandbox on or off for the servers made from here on (``sandbox.available`` is probed once)."""
    if on:
        os.environ.pop(sandbox.OFF_ENV, None)
    else:
        os.environ[sandbox.OFF_ENV] = "off"
    sandbox.reset()


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clocks()
    return wall - start[0], cpu - start[1]


async def warm(service: Any, task: Any, work: Path, log: Any) -> Sample:
    """A spare booted and its session up, then the claim timed (what ``timings.state`` is for a warm trial)."""
    state = work / "state"
    state.mkdir()
    async with AsyncExitStack() as stack:
        spare = await stack.enter_async_context(service.spare(state, None))
        await stack.enter_async_context(connect_stdio(spare.server, log, cwd=state))
        start = _clocks()
        async with spare.claim(task):
            wall, cpu = _since(start)
    return {"state": wall, "state_cpu": cpu}


async def cold(service: Any, task: Any, work: Path, log: Any) -> Sample:
    """The environment made and its server's session started (``timings.state`` and ``timings.mcp_start``)."""
    state = work / "state"
    start = _clocks()
    async with service.environment(task, state, None) as env:
        wall, cpu = _since(start)
        start = _clocks()
        async with connect_stdio(env.server, log, cwd=state):
            mwall, mcpu = _since(start)
    return {"state": wall, "state_cpu": cpu, "mcp_start": mwall, "mcp_start_cpu": mcpu}


async def one(kind: str, service: Any, task: Any) -> Sample:
    work = Path(tempfile.mkdtemp(prefix="bench-claim-"))
    try:
        with open(work / "mcp_server.log", "w+b") as log:
            return await (warm if kind == "warm" else cold)(service, task, work, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def measure(args: argparse.Namespace) -> dict[tuple[str, str], list[Sample]]:
    out: dict[tuple[str, str], list[Sample]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-declared-claim-") as tmp:
        packs = dict(zip(("bundled", "declared"), make_packs(Path(tmp), args.tasks), strict=True))
        for pack in packs.values():  # hidden from sandboxed servers, as a worker hides its run's packs
            sandbox.register_root(functools.partial(Path, pack))
        tasks = {name: sorted(discover(root), key=lambda t: t.id) for name, root in packs.items()}
        sides = [(label, packs[pack_name], tasks[pack_name], env) for label, pack_name, env in SIDES]
        for round_ in range(-1, args.rounds):  # round -1: a pass not counted (first imports, the page cache)
            for i in range(args.tasks):
                for kind in ("warm", "cold"):
                    order = sides if (round_ + i) % 2 == 0 else sides[::-1]
                    for label, root, chosen, env in order:
                        _sandbox(env.get(sandbox.OFF_ENV) != "off")
                        task = chosen[i]
                        sample = await one(kind, service_of(task.service, root), task)
                        if round_ >= 0:
                            out.setdefault((label, kind), []).append(sample)
        _sandbox(True)
    return out


def table(results: dict[tuple[str, str], list[Sample]], labels: list[str]) -> list[str]:
    """Median per (trial kind, phase) per side, and each side's difference from the bundled one's."""
    head = f"{'trials':>6} {'phase':>14} {'n':>4} {'bundled ms':>10}"
    for label in labels[1:]:
        head += f" | {label + ' ms':>16} {'vs bundled':>10}"
    lines = [head]
    for kind in ("warm", "cold"):
        phases = ["state", "state_cpu"] + (["mcp_start", "mcp_start_cpu"] if kind == "cold" else [])
        for phase in phases:
            base = statistics.median(s[phase] for s in results[(labels[0], kind)])
            n = len(results[(labels[0], kind)])
            line = f"{kind:>6} {phase:>14} {n:>4} {base * 1000:>10.1f}"
            for label in labels[1:]:
                med = statistics.median(s[phase] for s in results[(label, kind)])
                line += f" | {med * 1000:>16.1f} {(med - base) / base * 100 if base else 0.0:>+9.1f}%"
            lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=10, help="passes over the tasks, each side once per pass")
    args = parser.parse_args()
    results = asyncio.run(measure(args))
    print(f"{args.tasks} filesystem tasks x {args.rounds} rounds, sides alternated; load {os.getloadavg()[0]:.1f}")
    print("\n".join(table(results, [label for label, _, _ in SIDES])))


if __name__ == "__main__":
    main()
