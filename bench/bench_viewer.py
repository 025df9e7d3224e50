"""Time ``mcpfleet view`` on a 10,000-trial run and on one 50 MB transcript (issue 49: 3 s and 4 s).

Synthesises a run folder (records written as a trial writes them: TrialResult through a LocalStore) of
``--trials`` trials over four services, 4 models and 2 attempts, one of whose messages.json is ``--mb`` MB
(``--calls`` tool calls with long results) and one of whose tool results holds ``NEEDLE``. Then it times:

- building the index (``open_runs``: every result.json read, no cache) in this process;
- the real console script, started twice on the unchanged run (the second start finds the viewer's cache):
  from its start until it serves, and until the matrix has loaded in the browser;
- in Debian's Chromium (Playwright, headless): each page's navigation until first contentful paint and until
  the load event, as the browser's performance timeline reports them: the matrix, the trial list, searches
  (one before the search index is built, then, once it is, three new queries: none matches, one tool result
  matches, every trial matches), the 50 MB trial's page (first open: messages.json read and parsed; again).

With ``--baseline PYTHONPATH`` the same is measured first for the mcpfleet found there (e.g. main's), in the
same run of the bench, and the table has both side by side.

    .venv/bin/python bench/bench_viewer.py [--trials 10000] [--mb 50] [--keep DIR] [--baseline PYTHONPATH]
"""

from __future__ import annotations

import argparse
import json
import os
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
NEEDLE = "walrus-umbra-5521"  # inside one small trial's tool result, nowhere else
TARGET_RUN_S = 3.0
TARGET_BIG_S = 4.0
# The viewer dies with this process, even one killed outright (runner/_util/lifeline.py).
LIFELINE = "from mcpfleet.runner._util.lifeline import exit_with_parent; exit_with_parent(); "
Row = tuple[str, float, float, float | None]


def synthesise(root: Path, trials: int, mb: float, calls: int) -> tuple[Path, str]:
    """The run folder and the id of its big trial; trial number ``trials // 2`` holds ``NEEDLE``."""
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
                if n == trials // 2:
                    messages = small.replace(b"[FILE] a.txt", f"[FILE] {NEEDLE}.txt".encode())
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
    for tries in range(100):  # a viewer that printed its URL before it listened (main's) refuses at first
        try:
            page.goto(url, wait_until="load", timeout=120_000)  # type: ignore[attr-defined]
            break
        except Exception as exc:  # noqa: BLE001 - playwright's Error; anything else is raised on the last try
            if "ERR_CONNECTION_REFUSED" not in str(exc) or tries == 99:
                raise
            time.sleep(0.05)
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


def serve(run_root: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str, float]:
    """The real console script on a free port: the process, its URL and the seconds until it served."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-c", LIFELINE + "from mcpfleet.runner.cli.entry import main; main()", "view"]
    proc = subprocess.Popen([*cmd, str(run_root), "--port", "0"], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+", line)
    assert found, line
    return proc, found.group(0), time.perf_counter() - t0


def search_index_ready(cache: Path, timeout: float = 600) -> float | None:
    """Seconds until a search index file appears in the viewer's cache (None: this viewer builds none)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if list(cache.glob("*.search.sqlite")):
            time.sleep(0.5)  # (the viewer opens it once it is in place)
            return time.perf_counter() - t0
        time.sleep(0.1)
    return None


def builds_index(pythonpath: str) -> bool:
    """Whether the mcpfleet on ``pythonpath`` (or the installed one) builds a search index (main's did not)."""
    for entry in [p for p in pythonpath.split(os.pathsep) if p] or [str(Path(__file__).resolve().parents[1])]:
        base = Path(entry) / ("mcpfleet/runner" if (Path(entry) / "mcpfleet").is_dir() else "runner")
        if (base / "report" / "viewer" / "search_index.py").exists():
            return True
    return False


def measure(run_root: Path, big_id: str, size: float, trials: int, pythonpath: str, cache: Path) -> list[Row]:
    """Every row of the table for the viewer found on ``pythonpath``, its cache in ``cache`` (empty at first)."""
    from playwright.sync_api import sync_playwright

    env = {**os.environ, "PYTHONPATH": pythonpath, "MCPFLEET_VIEWER_CACHE_DIR": str(cache)}
    rows: list[Row] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        context = browser.new_context()

        def visit(name: str, url: str, target: float | None) -> None:
            page = context.new_page()  # each page in a new tab, as a matrix cell's link opens it
            fcp, load = paint(page, url)
            page.close()
            rows.append((name, fcp, load, target))

        for start in ("first start", "second start (run unchanged)"):
            t0 = time.perf_counter()
            proc, base, serving_s = serve(run_root, env)
            try:
                rows.append((f"{start}: `mcpfleet view` until serving", serving_s, serving_s, None))
                page = context.new_page()
                fcp, load = paint(page, f"{base}/run/0")
                page.close()
                whole = time.perf_counter() - t0
                rows.append((f"{start}: command to matrix loaded", whole, whole, TARGET_RUN_S))
                if start != "first start":
                    continue
                visit("matrix again (page cached)", f"{base}/run/0", TARGET_RUN_S)
                visit("matrix sorted by disagreement", f"{base}/run/0?sort=disagreement", TARGET_RUN_S)
                visit(f"trial list ({trials:,}, page 1)", f"{base}/run/0/trials", TARGET_RUN_S)
                visit("trial list, filtered (model, outcome)", f"{base}/run/0/trials?model=m-beta&outcome=failed",
                      TARGET_RUN_S)  # fmt: skip
                visit(f"search q= over {trials:,} trials, before any index", f"{base}/run/0/trials?q=no-such-text",
                      None)  # fmt: skip
                ready = search_index_ready(cache) if builds_index(pythonpath) else None
                if ready is not None:
                    rows.append(("search index built (background, after that search)", ready, ready, None))
                for q in ("no-such-text-2", NEEDLE, "lorem ipsum dolor"):
                    visit(f"search q={q} over {trials:,} trials", f"{base}/run/0/trials?q={q}", None)
                visit("the same search again (answer cached)", f"{base}/run/0/trials?q=lorem ipsum dolor", None)
                visit(f"{size:.0f} MB transcript, first open", f"{base}/run/0/trial/{big_id}", TARGET_BIG_S)
                visit(f"{size:.0f} MB transcript, again", f"{base}/run/0/trial/{big_id}", TARGET_BIG_S)
                visit(f"{size:.0f} MB transcript, page 2", f"{base}/run/0/trial/{big_id}?from=1000", TARGET_BIG_S)
            finally:
                proc.terminate()
                proc.wait(10)
        browser.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--calls", type=int, default=2_000, help="Tool calls in the big transcript.")
    ap.add_argument("--keep", type=Path, help="Write the run here (kept) instead of a temporary folder.")
    ap.add_argument("--baseline", help="A PYTHONPATH whose mcpfleet to measure first, beside this one (before/after).")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    root = args.keep or Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)

    run_root = root / "big"
    if (run_root / "trials").is_dir() and args.keep:
        big_id = max((run_root / "trials").iterdir(), key=lambda d: (d / "messages.json").stat().st_size).name
        print(f"using the run kept in {run_root}")
    else:
        t0 = time.perf_counter()
        run_root, big_id = synthesise(root, args.trials, args.mb, args.calls)
        print(f"synthesised {args.trials} trials in {time.perf_counter() - t0:.1f} s")
    size = (run_root / "trials" / big_id / "messages.json").stat().st_size / 1e6
    total = sum(f.stat().st_size for f in run_root.rglob("*") if f.is_file())
    print(f"{total / 1e6:.0f} MB of files; {big_id}'s messages.json: {size:.1f} MB")

    t0 = time.perf_counter()
    open_runs([str(run_root)], use_cache=False)
    index_s = time.perf_counter() - t0
    here = os.environ.get("PYTHONPATH", "")
    sides = [("before", args.baseline)] if args.baseline is not None else []
    sides.append(("after" if sides else "", here))
    tables = []
    for _, pythonpath in sides:
        with tempfile.TemporaryDirectory() as cache:
            tables.append(measure(run_root, big_id, size, args.trials, pythonpath, Path(cache)))
    print(f"\nindex built in process (every result.json read, no cache): {index_s:.2f} s")
    heads = "".join(f" {label + ' paint':>13} {label + ' load':>12}" for label, _ in sides)
    print(f"\n{'what':58}{heads} {'target':>7}")
    names = list(dict.fromkeys(name for table in tables for name, *_ in table))
    for name in names:
        cells, target = "", None
        for table in tables:
            got = next(((f, lo, t) for n, f, lo, t in table if n == name), None)
            if got is None:
                cells += f" {'-':>13} {'-':>12}"
                continue
            fcp, load, target = got
            cells += (f" {fcp:>11.2f} s" if fcp >= 0 else f" {'n/a':>13}") + f" {load:>10.2f} s"
        print(f"{name:58}{cells} {'' if target is None else f'{target:.0f} s':>7}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
