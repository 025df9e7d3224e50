"""The test suite's own speed: serial pytest against pytest-xdist workers, the wall time and the slowest tests.

Runs the suite (or the paths given) twice in one go, once serially and once with ``--workers`` xdist workers
(README's test command uses 3), each writing a JUnit XML report, then prints the wall times and the 20 slowest
tests of each side by side. A test's time is setup + call + teardown, as JUnit counts it. The load average each
run saw is printed too: on a shared machine a run in a busy spell reads slower than it is.

    .venv/bin/python bench/bench_suite.py                      # the whole suite: ~50 + ~15 min on 2 cores
    .venv/bin/python bench/bench_suite.py tests/test_spec.py   # a smoke run
    .venv/bin/python bench/bench_suite.py --report BEFORE.xml AFTER.xml   # two reports made earlier

The suite waits on servers, browsers and databases far more than it computes (a serial run keeps about one of
two cores busy), which is why workers beyond the core count pay off.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = REPO / ".venv" / "bin" / "python"


@dataclass(frozen=True)
class Report:
    """One run of the suite as its JUnit XML tells it."""

    label: str
    wall_s: float | None  # measured around the run; None for a report read back
    tests: int
    failures: int
    times: dict[str, float]  # test id -> seconds


def read_junit(path: Path, label: str, wall_s: float | None = None) -> Report:
    root = ET.parse(path).getroot()
    times: dict[str, float] = {}
    failures = 0
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        times[name] = times.get(name, 0.0) + float(case.get("time") or 0.0)
        failures += any(child.tag in ("failure", "error") for child in case)
    return Report(label, wall_s, len(times), failures, times)


def slowest(report: Report, n: int) -> list[tuple[str, float]]:
    return sorted(report.times.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def render(before: Report, after: Report, n: int = 20) -> str:
    """The side-by-side table: totals first, then the ``n`` slowest tests of each run with the other's time."""

    def wall(r: Report) -> str:
        return f"{r.wall_s:,.0f} s" if r.wall_s is not None else "-"

    lines = [
        f"| | {before.label} | {after.label} |",
        "|---|---:|---:|",
        f"| wall time | {wall(before)} | {wall(after)} |",
        f"| tests | {before.tests:,} | {after.tests:,} |",
        f"| failed | {before.failures} | {after.failures} |",
        f"| sum of test times | {sum(before.times.values()):,.0f} s | {sum(after.times.values()):,.0f} s |",
        "",
        f"| # | slowest in {before.label} | s | in {after.label} | slowest in {after.label} | s |",
        "|---:|---|---:|---:|---|---:|",
    ]
    left, right = slowest(before, n), slowest(after, n)
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ("", 0.0)
        b = right[i] if i < len(right) else ("", 0.0)
        other = after.times.get(a[0])
        lines.append(
            f"| {i + 1} | {a[0]} | {a[1]:.1f} | {'-' if other is None else f'{other:.1f}'} | {b[0]} | {b[1]:.1f} |"
        )
    return "\n".join(lines)


def run_suite(label: str, args: list[str], out: Path) -> tuple[Report, tuple[float, float]]:
    load0 = os.getloadavg()[0]
    started = time.monotonic()
    subprocess.run(
        [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={out}", *args], cwd=REPO, check=False
    )
    wall = time.monotonic() - started
    return read_junit(out, label, wall), (load0, os.getloadavg()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="test paths (default: the whole suite)")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--slowest", type=int, default=20)
    ap.add_argument("--report", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="render two JUnit reports")
    a = ap.parse_args()
    if a.report:
        print(render(read_junit(a.report[0], "before"), read_junit(a.report[1], "after"), a.slowest))
        return
    with tempfile.TemporaryDirectory() as tmp:
        serial, load_s = run_suite("serial", a.paths, Path(tmp) / "serial.xml")
        xdist = ["-n", str(a.workers), "--dist", "worksteal", *a.paths]
        parallel, load_p = run_suite(f"{a.workers} workers", xdist, Path(tmp) / "parallel.xml")
    print(render(serial, parallel, a.slowest))
    print(f"\nload average: serial {load_s[0]:.1f} -> {load_s[1]:.1f}, parallel {load_p[0]:.1f} -> {load_p[1]:.1f}")
    sys.exit(1 if serial.failures or parallel.failures else 0)


if __name__ == "__main__":
    main()
