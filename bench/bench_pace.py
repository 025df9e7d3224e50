"""The shared pace and a budget against a rate-limited, metered provider, side by side with no rateLimit.

The provider is the scripted model server's metered account: ``rpm`` requests per ``window`` seconds (30 per
minute by default), a 429 with ``Retry-After`` above it. ``--trials`` oracle trials of a one-file filesystem task
(6 LLM requests each) run at ``--concurrency`` through `mcpfleet run`'s worker processes, reaching the provider
over HTTP through LiteLLM as any provider (``hosted_vllm/`` with an ``apiBase``): once with the model's
``rateLimit`` at the account's limit (paced through the run's own redis-server), once without (today's
behaviour: every trial retries on its own). Then a budget run: the provider's own bill against ``spec.budget``.

    .venv/bin/python bench/bench_pace.py                      # 16 trials at 16 concurrent, 30/min: ~4 min each
    .venv/bin/python bench/bench_pace.py --window 10          # the same limit per 10 s: N per minute scaled down

Printed: requests the provider refused (goal: at most 1% of all it received), accepted requests per minute over
the busy span, from the first accepted to the last (goal: at least 90% of the limit), trials lost (not scored)
or charged to the model (failed), and for the budget run the provider's bill against the budget (never over).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import make_tiny_pack  # noqa: E402

from mcpfleet.runner.launch.launcher import execute  # noqa: E402
from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess  # noqa: E402
from mcpfleet.runner.llm.pace import WINDOW_ENV  # noqa: E402
from mcpfleet.runner.results.outcome import is_scored  # noqa: E402
from mcpfleet.runner.spec.load import parse_evalrun  # noqa: E402

PRICE = 1000.0  # USD per million tokens: a scripted request costs about 0.2-0.5 USD


def run_once(
    root: Path, url: str, args: argparse.Namespace, *, paced: bool, budget: float | None = None
) -> dict[str, Any]:
    account = uuid.uuid4().hex
    pack = root / "pack"
    model: dict[str, Any] = {
        "name": "m",
        "model": f"hosted_vllm/oracle?rpm={args.rpm}&window={args.window:g}&account={account}",
        "apiBase": url,
        "params": {"maxTokens": 100},
    }
    if paced:
        model["rateLimit"] = {"requestsPerMinute": args.rpm}
    spec: dict[str, Any] = {
        "models": [model],
        "tasks": {"path": str(pack)},
        "attempts": args.trials // args.tasks,
        "output": {"uri": str(root / f"runs-{account[:8]}")},
        "concurrency": {"total": args.concurrency},  # provider and limits: the defaults, on both sides
    }
    if budget is not None:
        model["pricing"] = {"inputPerMillionTokens": PRICE, "outputPerMillionTokens": PRICE}
        spec["budget"] = {"usd": budget}
    doc = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "bench-pace"}, "spec": spec}
    started = time.time()
    summary, folder = execute(parse_evalrun(doc), root, show_progress=False)
    wall = time.time() - started
    m = httpx.get(f"{url}/meter", timeout=10).json()["accounts"].get(account, {})
    outcomes = []
    for d in sorted(Path(folder, "trials").iterdir()):
        r = json.loads((d / "result.json").read_text())
        outcomes.append((r["passed"], r["failure"]))
    accepted, refused = int(m.get("accepted", 0)), int(m.get("refused", 0))
    times = sorted(m.get("accepted_at") or [])
    span = (times[-1] - times[0]) if len(times) > 1 else 0.0
    per_window = (len(times) - 1) / span * args.window if span else 0.0
    return {
        "received": accepted + refused,
        "refused": refused,
        "refused_share": refused / (accepted + refused) if accepted + refused else 0.0,
        "rate": per_window,  # accepted per window (per minute at the default window)
        "rate_share": per_window / args.rpm,
        "lost": sum(1 for p, f in outcomes if not p and not is_scored(f)),
        "budget_cut": sum(1 for _, f in outcomes if f == "budget_exhausted"),
        "charged": sum(1 for p, f in outcomes if not p and is_scored(f)),
        "passed": sum(1 for p, _ in outcomes if p),
        "recorded": len(outcomes),
        "wall": wall,
        "bill": (m.get("prompt_tokens", 0) + m.get("output_tokens", 0)) * PRICE / 1e6,
        "stopped": summary.get("stopped") or {},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--tasks", type=int, default=4, help="distinct tasks (trials = tasks x attempts)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rpm", type=int, default=30, help="the account's requests per window")
    ap.add_argument("--window", type=float, default=60.0, help="seconds (60: the limit is per minute)")
    ap.add_argument("--budget", type=float, default=6.0, help="USD of the budget run (about 3 trials' worth)")
    args = ap.parse_args()
    os.environ[WINDOW_ENV] = str(args.window)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory(prefix="bench-pace-") as tmp:
        root = Path(tmp)
        make_tiny_pack(root / "pack", tasks=args.tasks)
        with ScriptedServerProcess([root / "pack"]) as url:
            paced = run_once(root, url, args, paced=True)
            unpaced = run_once(root, url, args, paced=False)
            budget = run_once(root, url, args, paced=True, budget=args.budget)
    unit = "minute" if args.window == 60 else f"{args.window:g} s"
    print(f"{args.trials} trials at {args.concurrency} concurrent; the account admits {args.rpm} per {unit}\n")
    print("| | rateLimit (paced) | no rateLimit (today) | goal |")
    print("|---|---|---|---|")
    rows = [
        ("requests the provider received", "received", "{:d}", ""),
        ("refused (429)", "refused", "{:d}", ""),
        ("refused share", "refused_share", "{:.1%}", "<= 1%"),
        (f"accepted per {unit} over the busy span", "rate", "{:.1f}", f">= {0.9 * args.rpm:.1f}"),
        ("... of the limit", "rate_share", "{:.0%}", ">= 90%"),
        ("trials passed", "passed", "{:d}", str(args.trials)),
        ("trials lost (not scored)", "lost", "{:d}", "0"),
        ("trials charged to the model", "charged", "{:d}", "0"),
        ("wall time (s)", "wall", "{:.0f}", ""),
    ]
    for label, key, fmt, goal in rows:
        print(f"| {label} | {fmt.format(paced[key])} | {fmt.format(unpaced[key])} | {goal} |")
    print(
        f"\nbudget run (spec.budget {args.budget:g} USD, paced): the provider billed {budget['bill']:.4f} USD "
        f"({'within' if budget['bill'] <= args.budget else 'OVER'} the budget); {budget['passed']} passed, "
        f"{budget['budget_cut']} cut short (budget_exhausted), {args.trials - budget['recorded']} not started; "
        f"refused {budget['refused']}"
    )


if __name__ == "__main__":
    main()
