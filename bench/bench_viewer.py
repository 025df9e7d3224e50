"""Time ``mcpfleet view`` on a 10,000-trial run and on one 50 MB transcript (issue 49: 3 s and 4 s).

Synthesises a run folder (records written as a trial writes them: TrialResult through a LocalStore) of
``--trials`` trials over four services, 4 models and 2 attempts, one of whose messages.json is ``--mb`` MB
(``--calls`` tool calls with long results). Then it times:

- building the index (``open_runs``: every result.json read) in this process;
- the real console script from its start until it serves (what a user waits for before the first page);
- in Debian's Chromium (Playwright, headless): each page's navigation until first contentful paint and until
  the load event, as the browser's performance timeline reports them: the matrix, the trial list, a search,
  the 50 MB trial's page (first open: messages.json read and parsed; then again, from the viewer's cache).

    .venv/bin/python bench/bench_viewer.py [--trials 10000] [--mb 50] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcpfleet.runner.report.viewer.runs import open_runs
from mcpfleet.runner.results.records import Totals, TrialResult, VerifierRecord, dumps, dumps_mcpmark
from mcpfleet.runner.results.store import LocalStore

SERVICES = ("filesystem", "postgres", "playwright", "toolcall")
MODELS = ("m-alpha", "m-beta", "m-gamma", "m-delta")
TARGET_RUN_S = 3.0
TARGET_BIG_S = 4.0
# The viewer dies with this process, even one killed outright (runner/_util/lifeline.py).
LIFELINE = "from mcpfleet.runner._util.lifeline import exit_with_parent; exit_with_parent(); "


def synthesise(root: Path, trials: int, mb: float, calls: int) -> tuple[Path, str]:
    store = LocalStore(root / "big")
    rng = random.Random(49)
    per_task = len(MODELS) * 2
    tasks = max(1, trials // per_task)
    small = dumps_mcpmark(
        [
            {"content": "Do the task.", "role": "user"},
            {"arguments": '{"path": "/w"}', "call_id": "c1", "name": "list_directory", "type": "function_call"},
            {"call_id": "c1", "output": json.dumps({"type": "text", "text": "[FILE] a.txt"}),
             "type": "function_call_output"},
        ]
    )  # fmt: skip
    big_id = ""
    n = 0
    for t in range(tasks):
        service = SERVICES[t % len(SERVICES)]
        for model in MODELS:
            for attempt in (1, 2):
                if n >= trials:
                    break
                n += 1
                trial_id = f"{model}.{service}.standard.cat{t % 7}.task_{t}.{attempt}"
                passed = rng.random() < 0.5
                res = TrialResult(
                    run="big", trial_id=trial_id, spec_hash="h", model=model, litellm_model="openai/" + model,
                    service=service, task_id=f"{service}/standard/cat{t % 7}/task_{t}", attempt=attempt,
                    agent="mcpmark", passed=passed, failure=None if passed else "verifier_failed",
                    verifier=VerifierRecord(exit_code=0 if passed else 1, stdout="ok" if passed else "wrong"),
                    totals=Totals(turns=5, tool_calls=4, input_tokens=4000, output_tokens=300, cost_usd=0.01),
                    harness="mcpfleet 0.1.0",
                )  # fmt: skip
                messages = small
                if not big_id:
                    big_id = trial_id
                    chunk = "row %d: " + "lorem ipsum dolor sit amet " * max(1, int(mb * 1e6 / calls / 27))
                    items: list[dict[str, object]] = [{"content": "Read everything.", "role": "user"}]
                    for i in range(calls):
                        items.append({"arguments": json.dumps({"path": f"/w/f{i}"}), "call_id": f"c{i}",
                                      "name": "read_text_file", "type": "function_call"})  # fmt: skip
                        items.append({"call_id": f"c{i}", "output": json.dumps({"type": "text", "text": chunk % i}),
                                      "type": "function_call_output"})  # fmt: skip
                    messages = dumps_mcpmark(items)
                store.write_files(trial_id, {"messages.json": messages})
                store.commit(trial_id, dumps(res.model_dump()))
    return store.root, big_id


def paint(page: object, url: str) -> tuple[float, float]:
    """(first contentful paint, load event end) in seconds since the navigation started."""
    page.goto(url, wait_until="load", timeout=120_000)  # type: ignore[attr-defined]
    got = page.evaluate(  # type: ignore[attr-defined]
        """async () => {
          const fcp = await new Promise(resolve => {
            const seen = performance.getEntriesByName('first-contentful-paint')[0];
            if (seen) return resolve(seen.startTime);
            new PerformanceObserver(list => {
              const e = list.getEntriesByName('first-contentful-paint')[0];
              if (e) resolve(e.startTime);
            }).observe({type: 'paint', buffered: true});
            setTimeout(() => resolve(-1000), 3000);
          });
          return [fcp, performance.getEntriesByType('navigation')[0].loadEventEnd];
        }"""
    )
    return got[0] / 1000, got[1] / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--calls", type=int, default=2_000, help="Tool calls in the big transcript.")
    ap.add_argument("--keep", type=Path, help="Write the run here (kept) instead of a temporary folder.")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    root = args.keep or Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    run_root, big_id = synthesise(root, args.trials, args.mb, args.calls)
    made = time.perf_counter() - t0
    size = (run_root / "trials" / big_id / "messages.json").stat().st_size
    total = sum(f.stat().st_size for f in run_root.rglob("*") if f.is_file())
    print(
        f"synthesised {args.trials} trials ({total / 1e6:.0f} MB of files) in {made:.1f} s; "
        f"{big_id}'s messages.json: {size / 1e6:.1f} MB"
    )

    t0 = time.perf_counter()
    open_runs([str(run_root)])
    index_s = time.perf_counter() - t0

    from playwright.sync_api import sync_playwright

    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            LIFELINE + "from mcpfleet.runner.cli.entry import main; main()",
            "view",
            str(run_root),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        serving_s = time.perf_counter() - t0
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found, line
        base = found.group(0)
        rows: list[tuple[str, float, float, float | None]] = [
            ("index built (open_runs, in process)", index_s, index_s, None),
            ("`mcpfleet view` start until serving", serving_s, serving_s, None),
        ]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            context = browser.new_context()
            pages = [
                (f"matrix ({args.trials:,} trials)", f"{base}/run/0", TARGET_RUN_S),
                ("matrix again (page cached)", f"{base}/run/0", TARGET_RUN_S),
                ("matrix sorted by disagreement", f"{base}/run/0?sort=disagreement", TARGET_RUN_S),
                (f"trial list ({args.trials:,}, page 1)", f"{base}/run/0/trials", TARGET_RUN_S),
                ("trial list, filtered (model, outcome)", f"{base}/run/0/trials?model=m-beta&outcome=failed",
                 TARGET_RUN_S),
                (f"search q= over {args.trials:,} trials (cold)", f"{base}/run/0/trials?q=no-such-text", None),
                ("search again (cached)", f"{base}/run/0/trials?q=no-such-text", None),
                (f"{size / 1e6:.0f} MB transcript, first open", f"{base}/run/0/trial/{big_id}", TARGET_BIG_S),
                (f"{size / 1e6:.0f} MB transcript, again", f"{base}/run/0/trial/{big_id}", TARGET_BIG_S),
                (f"{size / 1e6:.0f} MB transcript, page 2", f"{base}/run/0/trial/{big_id}?from=1000", TARGET_BIG_S),
            ]  # fmt: skip
            for name, url, target in pages:
                page = context.new_page()  # each page in a new tab, as a matrix cell's link opens it
                fcp, load = paint(page, url)
                page.close()
                rows.append((name, fcp, load, target))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"\n{'what':48} {'first paint':>12} {'load':>8} {'target':>8}  ok")
    for name, fcp, load, target in rows:
        ok = "" if target is None else ("yes" if max(fcp, load) < target else "NO")
        tgt = "" if target is None else f"{target:.0f} s"
        shown = f"{fcp:>10.2f} s" if fcp >= 0 else f"{'n/a':>12}"  # Chromium reported no paint entry
        print(f"{name:48} {shown} {load:>6.2f} s {tgt:>8}  {ok}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
