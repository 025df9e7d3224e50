"""The toolcall suite's oracle and no-op, ``--repeat`` attempts each, through ``mcpfleet run``: issue 51's 20/20.

``mcpfleet tasks stress`` runs tasks whose oracle is an ``oracle.json``; a toolcall task has none: its ``oracle``
agent replays each case's labelled call, so exactly the cases labelled ``correct`` must pass, and its ``noop``
agent makes no call, so every case must fail. This script makes the bundled suite's data (``mcpfleet toolcalls
generate``, ``--cases`` cases, seeded), makes it a task, runs it with ``agent: oracle`` and then ``agent: noop``
(``--repeat`` attempts, ``--concurrency`` shards at once, no retries), and prints per agent how many case
judgements disagreed with the label, by attempt and by label: the goal is none.

    .venv/bin/python bench/stress_toolcall.py --repeat 20 --concurrency 4    # 5,000 cases: ~5 min per agent
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

MCPFLEET = Path(sys.executable).with_name("mcpfleet")


def run(args: list[str], cwd: Path) -> None:
    subprocess.run([str(MCPFLEET), *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def evalrun(agent: str, repeat: int, concurrency: int, shard: int) -> dict[str, object]:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": f"toolcall-{agent}"},
        "spec": {
            "models": [{"name": agent, "model": "scripted/noop"}],  # the agent answers, not the model
            "tasks": {"path": "pack", "services": ["toolcall"]},
            "attempts": repeat,
            "agent": agent,
            "concurrency": {"total": concurrency},
            "retries": {"limit": 0},
            "toolcalls": {"shardSize": shard},
            "output": {"uri": "out"},
        },
    }


def judge(trials: Path, agent: str) -> tuple[int, collections.Counter[str], collections.Counter[str], int]:
    """(case judgements, disagreements by attempt, disagreements by label, shards without cases.jsonl)."""
    seen, by_attempt, by_label, missing = 0, collections.Counter[str](), collections.Counter[str](), 0
    for trial in sorted(trials.iterdir()):
        attempt = trial.name.rsplit(".", 1)[1]
        cases = trial / "cases.jsonl"
        if not cases.is_file():
            missing += 1
            continue
        for line in cases.read_text().splitlines():
            row = json.loads(line)
            seen += 1
            want = agent == "oracle" and row["label"] == "correct"
            if bool(row["passed"]) != want:
                by_attempt[attempt] += 1
                by_label[row["label"]] += 1
    return seen, by_attempt, by_label, missing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--cases", type=int, default=5000)
    ap.add_argument("--shard", type=int, default=250)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="mcpfleet-stress-tc-") as tmp:
        root = Path(tmp)
        run(["toolcalls", "generate", "--out", "data", "--n", str(a.cases), "--seed", str(a.seed)], root)
        run(["toolcalls", "task", "data/toolcalls.jsonl", "--pack", "pack", "--name", "suite"], root)
        print(f"toolcall suite: {a.cases} cases (seed {a.seed}) in shards of {a.shard}, {a.repeat} attempts per agent")
        print(f"{'agent':<7} {'shards':>6} {'judgements':>10} {'disagree':>8} {'no record':>9} {'wall s':>7}")
        for agent in ("oracle", "noop"):
            (root / f"{agent}.yaml").write_text(yaml.safe_dump(evalrun(agent, a.repeat, a.concurrency, a.shard)))
            started = time.monotonic()
            proc = subprocess.run([str(MCPFLEET), "run", f"{agent}.yaml"], cwd=root, capture_output=True, text=True)
            wall = time.monotonic() - started
            if proc.returncode not in (0, 1):  # 1: trials failed, which the no-op's all do
                print(proc.stderr[-2000:], file=sys.stderr)
                return 2
            trials = root / "out" / f"toolcall-{agent}" / "trials"
            seen, by_attempt, by_label, missing = judge(trials, agent)
            shards = sum(1 for _ in trials.iterdir())
            bad = sum(by_attempt.values())
            print(f"{agent:<7} {shards:>6} {seen:>10} {bad:>8} {missing:>9} {wall:>7.1f}")
            if bad or missing or seen != a.cases * a.repeat:
                ok = False
                print(f"  by attempt: {dict(by_attempt)}; by label: {dict(by_label)}")
    print("every judgement as its label says" if ok else "FAIL: judgements disagreed with their labels")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
