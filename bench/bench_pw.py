"""The Playwright half of bench_local.py: a serial one-process loop against `mcpfleet run` at 1, 2, 4.

Per trial, the environment time is what a browser trial spends outside the agent's own work and the model:
site start (seeding the data and starting each site the task names, until its ready line), browser start
(Chromium launches at the first tool call: that call's time minus the median of the trial's later
navigations), MCP start (playwright-mcp's handshake), verify, teardown (sites, server and browser stopped).
Peak memory: the proportional set size (PSS, shared pages split fairly) of every site, playwright-mcp and
Chromium process of the run, sampled every 0.2 s, divided by the concurrency (a worker's spare included).

`mcpfleet run` gives each worker a spare (runner/trial/warm.py): its next trial's playwright-mcp and Chromium boot
while the current trial runs. A trial that claims one records only what it waited for them (MCP start ~0, and
a first call without the browser's launch) and the spare's own boot apart (spare_mcp_start, spare_started):
the "spare boot (hidden)" column is that boot's median over the trials that claimed a spare, "spared" how
many did (each worker's first trial starts cold), "spared / cold" the environment time's median over each
kind. The serial loop stays cold, as MCPMark runs.

    .venv/bin/python bench/bench_local.py --service playwright [--limit 2] [--attempts 2] [--concurrency 1 2 4]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

BROWSER_PARTS = ("mcpfleet.sites.", "playwright-mcp", "/chromium/")


def _pss_kb(pid: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def browser_pss_mb(marker: str) -> float:
    """PSS of the run's sites, servers and browsers: processes whose command line names one of them and
    whose command line or environment carries the run's private TMPDIR."""
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().decode(errors="replace")
            if not any(p in cmd for p in BROWSER_PARTS):
                continue
            if marker not in cmd and marker not in (d / "environ").read_bytes().decode(errors="replace"):
                continue
        except OSError:
            continue
        total += _pss_kb(d.name)
    return total / 1024


def run_sampled(cmd: list[str], marker: str) -> tuple[float, float]:
    """Run ``cmd`` with TMPDIR=marker; (wall seconds, peak PSS in MB of its browser processes)."""
    peak = 0.0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.2):
            peak = max(peak, browser_pss_mb(marker))

    sampler = threading.Thread(target=sample, daemon=True)
    start = time.perf_counter()
    sampler.start()
    try:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd="/", env={**os.environ, "TMPDIR": marker})
    finally:
        stop.set()
        sampler.join()
    return time.perf_counter() - start, peak


def _browser_start(turns: list[dict[str, Any]]) -> float:
    calls = [c for t in turns for c in t["tool_calls"]]
    if not calls:
        return 0.0
    later = [c["duration_s"] for c in calls[1:] if c["name"] == "browser_navigate"]
    return max(0.0, calls[0]["duration_s"] - (statistics.median(later) if later else 0.0))


def phases(run_dir: Path) -> dict[str, float]:
    rows = [json.loads(p.read_text()) for p in sorted(run_dir.glob("trials/*/result.json"))]
    assert rows and all(r["passed"] for r in rows), f"{run_dir}: every oracle trial must pass"
    med = statistics.median
    browser = [_browser_start(r["turns"]) for r in rows]
    claimed = [r["timings"].get("spare_started", 0.0) > 0 for r in rows]
    spared = [
        r["timings"]["spare_mcp_start"] + r["timings"]["spare_started"] for r, c in zip(rows, claimed, strict=True) if c
    ]
    env = [
        r["timings"]["state"] + b + r["timings"]["mcp_start"] + r["timings"]["verify"] + r["timings"]["teardown"]
        for r, b in zip(rows, browser, strict=True)
    ]
    env_spared = [e for e, c in zip(env, claimed, strict=True) if c]
    env_cold = [e for e, c in zip(env, claimed, strict=True) if not c]
    return {
        "trials": len(rows),
        "env": med(env),
        "env_spared": med(env_spared) if env_spared else float("nan"),
        "env_cold": med(env_cold) if env_cold else float("nan"),
        "sites": med([r["timings"]["state"] for r in rows]),
        "browser": med(browser),
        "mcp_start": med([r["timings"]["mcp_start"] for r in rows]),
        "verify": med([r["timings"]["verify"] for r in rows]),
        "teardown": med([r["timings"]["teardown"] for r in rows]),
        "total": med([r["timings"]["total"] for r in rows]),
        "spared": len(spared),
        "spare_boot": med(spared) if spared else 0.0,
    }


def _pair(p: dict[str, float]) -> str:
    """The environment time's median over the trials that claimed a spare, then over the cold ones."""
    return " / ".join("-" if v != v else f"{v:.2f}" for v in (p["env_spared"], p["env_cold"]))


def playwright_bench(args: Any, evalrun: Any, mcpfleet: Path, bench_script: str) -> None:
    from mcpfleet.runner.tasks.discovery import discover

    # The standard suite: an `easy` smoke task would shift `--limit`'s selection and the medians.
    suite = sorted(t.id for t in discover(args.tasks) if t.service == "playwright" and t.difficulty == "standard")
    include = suite[: args.limit] if args.limit else suite
    work = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-pw-"))
    concurrency = [c for c in args.concurrency if c <= 4] or [1]
    modes: list[tuple[str, int]] = ([] if args.skip_serial else [("serial loop", 1)]) + [
        ("mcpfleet run", c) for c in concurrency
    ]
    results: list[tuple[str, int | None, float, float, dict[str, float]]] = []
    for label, conc in modes:
        name = "serial" if label == "serial loop" else f"c{conc}"
        spec_path = work / f"{name}.yaml"
        spec = evalrun(name, work / "runs", args.attempts, args.latency, conc, "playwright", args.tasks, include)
        spec_path.write_text(yaml.safe_dump(spec))
        marker = tempfile.mkdtemp(prefix=f"pw-{name}-", dir=work)
        if label == "serial loop":
            cmd = [sys.executable, bench_script, "--serial-worker", str(spec_path)]
        else:
            cmd = [str(mcpfleet), "run", str(spec_path), "--no-progress"]
        load_before = os.getloadavg()[0]
        wall, peak = run_sampled(cmd, marker)
        level = None if label == "serial loop" else conc
        load = (load_before + os.getloadavg()[0]) / 2
        results.append((label, level, wall, peak / conc, phases(work / "runs" / name) | {"load": load}))
        print(f"  {label} c={conc}: {wall:.1f} s, peak {peak:.0f} MB", file=sys.stderr)

    base = results[0][2] if not args.skip_serial else None
    first = results[0][4]
    print(
        f"\nplaywright suite ({len(include) or len(suite)} task(s)), scripted oracle at {args.latency:g} s per LLM "
        f"call, attempts={args.attempts}, {first['trials']} trials per mode; medians per trial in seconds; load: the "
        "1-min load average, mean of the mode's start and end\n"
    )
    head = (
        "mode",
        "conc",
        "wall",
        "speedup",
        "env/trial",
        "spared / cold",
        "site start",
        "browser start",
        "MCP start",
        "verify",
        "teardown",
        "trial total",
        "spared",
        "spare boot (hidden)",
        "peak MB/worker",
        "load",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for label, level, wall, mem, p in results:
        speed = f"{base / wall:.2f}x" if base else "-"
        print(
            f"| {label} | {level or 1} | {wall:.1f} | {speed} | {p['env']:.2f} | {_pair(p)} | {p['sites']:.2f} | "
            f"{p['browser']:.2f} | {p['mcp_start']:.2f} | {p['verify']:.2f} | {p['teardown']:.2f} | "
            f"{p['total']:.1f} | {p['spared']:.0f}/{p['trials']:.0f} | {p['spare_boot']:.2f} | {mem:.0f} | "
            f"{p['load']:.1f} |"
        )
    print(f"\nrecords under {work}")
