"""Start-up CPU of mcpfleet's processes: without rfc3987-syntax (today) against with it (the old dependency set).

jsonschema's ``format-nongpl`` extra brought in ``rfc3987-syntax``, and jsonschema imports it whenever it is
installed; importing it compiles 38 Lark grammars. Every process that imports jsonschema paid for that,
LiteLLM's import included: each trial pod's runner, the operator, the worker forkserver of ``mcpfleet run``, and
each CLI command that loads the engine. The baseline installs the old pins (rfc3987-syntax 1.1.0, lark 1.3.1)
into a scratch folder with pip and puts it on PYTHONPATH; nothing else differs. Modes alternate, each run in a
fresh interpreter; printed: the median wall time and user+system CPU of each process's start.

    .venv/bin/python bench/bench_imports.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OLD_PINS = ["rfc3987-syntax==1.1.0", "lark==1.3.1"]

PROCESSES = {
    "trial pod runner (import the engine)": [sys.executable, "-c", "import mcpfleet.runner.trial.engine"],
    "operator (import the handlers)": [sys.executable, "-c", "import mcpfleet.operator.handlers"],
    "mcpfleet validate quickstart": [
        str(Path(sys.executable).with_name("mcpfleet")),
        "validate",
        str(REPO / "examples" / "quickstart.yaml"),
    ],
}


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def once(cmd: list[str], extra_path: str | None) -> tuple[float, float]:
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = extra_path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cpu, start = children_cpu(), time.perf_counter()
    subprocess.run(cmd, cwd="/", env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, children_cpu() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    old = tempfile.mkdtemp(prefix="mcpfleet-bench-rfc3987-")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", old, *OLD_PINS], cwd="/", check=True
    )
    probe = "import jsonschema, sys; sys.exit('lark' not in sys.modules)"
    if subprocess.run([sys.executable, "-c", probe], cwd="/", env={**os.environ, "PYTHONPATH": old}).returncode:
        sys.exit("the baseline does not import rfc3987-syntax: nothing to compare")
    modes = {"with rfc3987-syntax (before)": old, "without (now)": None}
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {(p, m): [] for p in PROCESSES for m in modes}
    for _ in range(args.runs):
        for proc, cmd in PROCESSES.items():
            for mode, path in modes.items():
                samples[(proc, mode)].append(once(cmd, path))
    print(f"\nmedians of {args.runs} fresh starts per cell, modes alternating\n")
    print("| process | mode | wall s | CPU s |")
    print("|---|---|---|---|")
    for (proc, mode), xs in samples.items():
        wall = statistics.median(x[0] for x in xs)
        cpu = statistics.median(x[1] for x in xs)
        print(f"| {proc} | {mode} | {wall:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
