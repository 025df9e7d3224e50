"""Toolcall bench: an N-case toolcall run with the scripted model, locally and through the operator.

The cases come from the generator (``mcpfleet toolcalls generate``), made a toolcall task of a fresh pack. The
model is ``scripted/toolcall?wrong=0.1`` (gold calls, a seeded 10% of them spoilt), so both runs must end
with exactly the pass@1 that an in-process replay of the policy and the scoring gives; the bench checks that.

- local: ``mcpfleet run``'s engine (``launcher.execute``): worker processes, no pods;
- operator: the real operator (``mcpfleet operator``, its own process) against tests/kubeemu.py's emulated API
  server, and tests/kubelet.py's test kubelet, which runs every shard pod's containers as local processes (the
  real ``mcpfleet materialise`` and ``mcpfleet trial``). Pods created and API writes are counted by the
  emulator; the kubelet's own pod status writes are left out.

    .venv/bin/python bench/bench_toolcall.py [--cases 10000] [--shard-size 250] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from kubeemu import operator_crds, running_emulator  # noqa: E402
from kubelet import Kubelet  # noqa: E402

from mcpfleet.runner.launch.launcher import execute  # noqa: E402
from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess  # noqa: E402
from mcpfleet.runner.launch.scripted_toolcall import ToolCallAnswers  # noqa: E402
from mcpfleet.runner.spec.load import parse_evalrun  # noqa: E402
from mcpfleet.runner.tasks.toolcall_pack import make_task  # noqa: E402
from mcpfleet.runner.toolcalls.generator import generate  # noqa: E402
from mcpfleet.runner.toolcalls.loader import load_cases  # noqa: E402
from mcpfleet.runner.toolcalls.models import ToolCall  # noqa: E402
from mcpfleet.runner.toolcalls.shards import count_cases  # noqa: E402
from mcpfleet.runner.toolcalls.suite import Answer, openai_tools, score  # noqa: E402

NS = "default"
WRONG, SEED = 0.1, 1
WRITES = ("create", "patch", "update", "delete", "deletecollection")


def body(name: str, pack: Path, out: Path, shard_size: int, concurrency: int) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "models": [{"name": "scripted", "model": f"scripted/toolcall?wrong={WRONG}&seed={SEED}"}],
            "tasks": {"path": str(pack), "services": ["toolcall"]},
            "toolcalls": {"shardSize": shard_size, "concurrency": 8},
            "concurrency": {"total": concurrency},
            "retries": {"limit": 0},
            "output": {"uri": str(out)},
        },
    }


def expected_pass_at_1(pack: Path, data: Path) -> float:
    """What the runs must score, replayed in process: the scripted policy's answer to each case (generated sets
    repeat some requests, and a request shared by a correct and an incorrect case gets the correct case's
    gold call for both) scored by the suite's rules. No HTTP, LiteLLM, workers or pods."""

    async def replay() -> int:
        answers = ToolCallAnswers([pack])
        passed = 0
        for case in load_cases(data).cases:
            played = answers.answer(case.history, openai_tools(case.tools), WRONG, SEED)
            answer = (
                Answer(text=played)
                if isinstance(played, str)
                else Answer(call=ToolCall(name=played[0], arguments=played[1]))
            )
            passed += (await score(case, answer, None)).passed
        return passed

    return asyncio.run(replay()) / count_cases(data)


def local_run(doc: dict[str, Any], work: Path) -> dict[str, Any]:
    start = time.perf_counter()
    summary, _ = execute(parse_evalrun(doc), work, show_progress=False)
    return {"wall": time.perf_counter() - start, "summary": summary, "pods": 0, "writes": 0}


async def operator_run(
    doc: dict[str, Any], work: Path, pack: Path, pods: int, timeout: float, verbose: bool = False
) -> dict[str, Any]:
    name = doc["metadata"]["name"]
    with ScriptedServerProcess([pack]) as scripted, running_emulator(crds=operator_crds()) as kube:
        env = {
            **os.environ,
            "KUBECONFIG": str(kube.kubeconfig_path),
            "MCPFLEET_SCRIPTED_URL": scripted,
            "MCPFLEET_STATUS_INTERVAL": "2",
            "MCPFLEET_CREATE_RATE": "50",
        }
        log = (work / "operator.log").open("wb")
        op = subprocess.Popen(
            [str(Path(sys.executable).with_name("mcpfleet")), "operator", "-n", NS],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd="/",
        )
        try:
            (work / "kubelet").mkdir()
            async with Kubelet(kube.url, max_pods=pods, workdir=work / "kubelet") as kubelet:
                await asyncio.sleep(3)  # the operator is up and watching
                kube.emulator.reset_counts()
                start = time.perf_counter()
                kube.create(doc)
                status: dict[str, Any] = {}
                while time.perf_counter() - start < timeout:
                    await asyncio.sleep(0.5)
                    status = (kube.get("evalruns", NS, name) or {}).get("status") or {}
                    if verbose:
                        pods_now = kube.objects("pods", NS)
                        print(
                            status.get("phase"),
                            status.get("counts"),
                            len(pods_now),
                            len(kubelet.started),
                            [(p["metadata"]["name"], (p.get("status") or {}).get("phase")) for p in pods_now][:3],
                            file=sys.stderr,
                            flush=True,
                        )
                    if status.get("phase") in ("Succeeded", "Failed"):
                        break
                    if op.poll() is not None:
                        raise RuntimeError(f"the operator exited; see {work / 'operator.log'}")
                wall = time.perf_counter() - start
                counts = dict(kube.emulator.request_counts)
                started = len(kubelet.started)
        finally:
            op.terminate()
            op.wait(timeout=30)
            log.close()
    created = sum(c for (verb, res), c in counts.items() if verb == "create" and res == "pods")
    writes = sum(c for (verb, res), c in counts.items() if verb in WRITES and res != "pods/status")
    summaries = list((work / "op-out").rglob("summary.json"))
    summary = json.loads(summaries[0].read_text()) if summaries else {}
    return {
        "wall": wall,
        "summary": summary,
        "pods": created,
        "started": started,
        "writes": writes,
        "phase": status.get("phase"),
        "counts": status.get("counts"),
    }


def main() -> None:
    # SIGTERM (timeout, kill) unwinds like Ctrl-C: the scripted server, the operator and the kubelet's pods stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--shard-size", type=int, default=250)
    ap.add_argument("--concurrency", type=int, default=2, help="trials (shards, pods) in flight")
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--skip-local", action="store_true")
    ap.add_argument("--skip-operator", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--verbose", action="store_true", help="print the operator run's status every half second")
    args = ap.parse_args()

    # Outside /tmp: trial pods mount an emptyDir over /tmp, and the pack is "in the image".
    base = REPO / ".test-image"
    base.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-toolcall-", dir=base))
    try:
        t = time.perf_counter()
        rows = [c.to_row() for c in generate(args.cases, seed=0)]
        data = work / "cases.jsonl"
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        pack = work / "pack"
        task = make_task(pack, data, "limbic", f"gen{args.cases}")
        gen_s = time.perf_counter() - t
        want = expected_pass_at_1(pack, task / "cases.jsonl")
        shards = -(-args.cases // args.shard_size)
        results: dict[str, dict[str, Any]] = {}
        if not args.skip_local:
            doc = body("tc-local", pack, work / "local-out", args.shard_size, args.concurrency)
            results["local (mcpfleet run)"] = local_run(doc, work)
        if not args.skip_operator:
            doc = body("tc-operator", pack, work / "op-out", args.shard_size, args.concurrency)
            results["operator (emulated API + test kubelet)"] = asyncio.run(
                operator_run(doc, work, pack, args.concurrency, args.timeout, args.verbose)
            )
        print(
            f"\n{args.cases} cases, shard size {args.shard_size} -> {shards} shards, {args.concurrency} in flight; "
            f"data generated in {gen_s:.1f} s; expected pass@1 {want:.4f}\n"
        )
        print("| run | wall time | cases/s | pods created | API writes | trials | pass@1 | as expected |")
        print("|---|---|---|---|---|---|---|---|")
        for label, r in results.items():
            s = r["summary"]
            row = (s.get("rows") or [{}])[0]
            p1 = row.get("pass_at_1")
            ok = p1 is not None and abs(p1 - want) < 1e-9 and row.get("tasks") == args.cases
            print(
                f"| {label} | {r['wall']:.1f} s | {args.cases / r['wall']:.0f} | {r['pods']} | {r['writes']} | "
                f"{s.get('trials_recorded')}/{s.get('trials_planned')} | {p1 if p1 is None else f'{p1:.4f}'} | "
                f"{'yes' if ok else 'NO'} |"
            )
        print(f"\nwork folder {work}" + ("" if args.keep else " (removed)"))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
