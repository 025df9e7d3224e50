"""``mcpfleet view`` in real Chromium (Debian's, driven headless through Playwright's Python API).

The run: the local launcher with the scripted oracle and no-op models on a pack of three services' real tasks
(two tiny filesystem tasks, one PostgreSQL answer task on a generated database, six toolcall cases), so those
records, messages.json files and verifier commands are what trials write. The Playwright service's three
records are written as a trial writes them (a tool result holding a string found nowhere else, one holding
hostile markup, a not-scored provider error with its trial.log): a real browser trial costs ~25 s more of this
module's run on 2 cores (the four services' run measured 65 s against 38 s without Playwright, at a load
average of 12-16), and only a hand-written record can hold hostile markup or a given provider error. A second
run is the same folder with one trial flipped. The viewer is the real console script on a free port;
screenshots of each page are written to ``<tmp>/screenshots`` (the path is printed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import make_tiny_pack
from pgpack import make_pg_pack

from mcpfleet.runner.launch.launcher import execute
from mcpfleet.runner.results.records import (
    ServerFingerprint,
    Totals,
    TrialResult,
    VerifierRecord,
    dumps,
    dumps_mcpmark,
    to_mcpmark_messages,
)
from mcpfleet.runner.results.store import LocalStore
from mcpfleet.runner.spec.load import load_evalrun
from mcpfleet.runner.tasks.toolcall_pack import make_task

CHROMIUM = "/usr/bin/chromium"
# The viewer dies with this process, even one killed outright (runner/_util/lifeline.py).
LIFELINE = "from mcpfleet.runner._util.lifeline import exit_with_parent; exit_with_parent(); "
NEEDLE = "zebra-quartz-7731"  # only inside one playwright tool result
HOSTILE = (
    '<script>window.__pwned = 1</script>"><img src=x onerror="window.__pwned = 2">'
    '<a id="evil" href="javascript:window.__pwned = 3">click</a><svg onload="window.__pwned = 4"></svg>'
)
FLIPPED = "oracle.filesystem.standard.tiny.move_todo_1.1"
PG_TRIAL = "oracle.postgres.standard.shop.count_big.1"
TOOLCALL_DATA = Path(__file__).parent / "data" / "toolcalls_200.jsonl"


def synthetic(store: LocalStore, run: str, service: str, task: str, model: str, **kw: Any) -> str:
    trial_id = f"{model}.{service}.standard.cat.{task}.1"
    call = {"name": kw.get("tool", "execute_sql"), "arguments": json.dumps(kw.get("args", {}))}
    chat: list[dict[str, Any]] = [
        {"role": "user", "content": f"Solve {task}."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": call}]},
        {"role": "tool", "tool_call_id": "c1", "content": kw.get("result", "ok")},
        {"role": "assistant", "content": kw.get("answer", "done")},
    ]  # fmt: skip
    passed = kw.get("passed", True)
    res = TrialResult(
        run=run, trial_id=trial_id, spec_hash="h-" + trial_id, model=model, litellm_model="scripted/" + model,
        service=service, task_id=f"{service}/standard/cat/{task}", attempt=1, agent="mcpfleet", passed=passed,
        failure=kw.get("failure"), error=kw.get("error"), error_type=kw.get("error_type"),
        verifier=VerifierRecord(exit_code=0 if passed else 1, stdout=kw.get("stdout", "checked")),
        totals=Totals(turns=2, tool_calls=1, input_tokens=300, output_tokens=20, cost_usd=0.002),
        turns=[{"index": 0, "input_tokens": 100, "output_tokens": 10, "tool_calls": [
            {"name": kw.get("tool", "execute_sql"), "call_id": "c1", "arguments": "{}", "call_class": "schema_valid"}
        ]}, {"index": 1, "input_tokens": 200, "output_tokens": 10}],
        harness="mcpfleet 0.1.0", server=ServerFingerprint(name=f"{service}-server", version="1.0", tools=3),
    )  # fmt: skip
    files = {"messages.json": dumps_mcpmark(to_mcpmark_messages(chat))}
    if kw.get("log"):
        files["trial.log"] = kw["log"].encode()
    store.write_files(trial_id, files)
    store.commit(trial_id, dumps(res.model_dump()))
    return trial_id


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("viewer")
    pack = make_tiny_pack(root / "pack", tasks=2)
    pg = make_pg_pack(root / "pg")
    shutil.copytree(pg / "postgres" / "states", pack / "postgres" / "states")
    shutil.copytree(pg / "postgres/standard/shop/count_big", pack / "postgres/standard/shop/count_big")
    cases = root / "cases.jsonl"
    cases.write_text("".join(TOOLCALL_DATA.read_text().splitlines(keepends=True)[:6]))
    make_task(pack, cases, "limbic", "set6")
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "four"},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}, {"name": "noop", "model": "scripted/noop"}],
            "tasks": {"path": str(pack)},
            "attempts": 2,
            "concurrency": {"total": 4},
            "output": {"uri": str(root / "runs")},
        },
    }
    (root / "four.yaml").write_text(yaml.safe_dump(doc))
    summary, run_root = execute(load_evalrun(root / "four.yaml"), root, show_progress=False)
    assert summary["trials_recorded"] == 16  # filesystem 8, postgres 4, toolcall 4
    a = Path(run_root)
    store = LocalStore(a)
    ids = {
        "needle": synthetic(store, "four", "playwright", "shop", "oracle", tool="browser_snapshot",
                            args={"url": "http://shop/zoo"}, result=f"name\n{NEEDLE}\n", stdout="1 row matched"),
        "unscored": synthetic(store, "four", "playwright", "shop", "noop", passed=False, failure="provider_error",
                              error="RateLimitError: 429 Too Many Requests", error_type="RateLimitError",
                              log="12:00 provider_error: RateLimitError: 429 (attempt 4, giving up)\n"),
        "hostile": synthetic(store, "four", "playwright", "forum", "oracle", tool="browser_snapshot",
                             args={"url": HOSTILE}, result=HOSTILE, answer=HOSTILE),
    }  # fmt: skip
    plan = json.loads((a / "plan.json").read_text())  # the run plans them, as if its packs had those tasks
    plan["trials"].update({t: "h-" + t for t in ids.values()})
    (a / "plan.json").write_text(json.dumps(plan))
    b = root / "runs" / "four-b"
    shutil.copytree(a, b)
    rec = json.loads((b / "trials" / FLIPPED / "result.json").read_text())
    rec.update(passed=False, failure="verifier_failed", harness="mcpfleet 0.2.0")
    (b / "trials" / FLIPPED / "result.json").write_text(json.dumps(rec))
    shots = root / "screenshots"
    shots.mkdir()
    print(f"\nviewer screenshots: {shots}")
    return {"a": a, "b": b, "ids": ids, "shots": shots}


@pytest.fixture(scope="module")
def server(runs: dict[str, Any]) -> Iterator[str]:
    cmd = [sys.executable, "-c", LIFELINE + "from mcpfleet.runner.cli.entry import main; main()", "view"]
    env = {**os.environ, "MCPFLEET_VIEWER_CACHE_DIR": str(runs["shots"].parent / "viewer-cache")}
    proc = subprocess.Popen(
        [*cmd, str(runs["a"]), str(runs["b"]), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        assert "2 run(s), 38 trial(s)" in line
        yield found.group(0).rstrip("/")
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def browser(server: str) -> Iterator[Any]:
    """(After the run: Playwright's sync API keeps an event loop in this thread, where the launcher runs its own.)"""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    pg = context.new_page()
    dialogs: list[str] = []

    def on_dialog(d: Any) -> None:
        dialogs.append(d.message)
        d.dismiss()

    pg.on("dialog", on_dialog)
    pg.dialogs = dialogs
    yield pg
    context.close()


def shot(page: Any, runs: dict[str, Any], name: str) -> None:
    page.screenshot(path=str(runs["shots"] / f"{name}.png"), full_page=True)


def listed(page: Any) -> list[str]:
    return [a.inner_text() for a in page.query_selector_all("table.trials a.trial")]


def test_matrix_renders_every_service_and_a_cell_opens_its_trials(page: Any, server: str, runs: dict[str, Any]) -> None:
    page.goto(f"{server}/run/0")
    shot(page, runs, "matrix")
    assert [h.inner_text() for h in page.query_selector_all("section.matrix h2")] == [
        "filesystem", "playwright", "postgres", "toolcall",
    ]  # fmt: skip
    fs = page.locator("#service-filesystem")
    assert fs.locator("th.col").all_inner_texts() == ["noop\n0%", "oracle\n100%"]
    assert fs.locator("tbody tr").count() == 2
    cell = fs.locator("tbody tr", has_text="move_todo_0").locator("a.cell").nth(1)
    assert cell.get_attribute("target") == "_blank" and cell.inner_text().startswith("✓✓")
    noop = fs.locator("tbody tr", has_text="move_todo_0").locator("a.cell").nth(0)
    assert noop.inner_text().split() == ["✗✗", "0%", "premature_stop"]
    with page.context.expect_page() as opened:
        cell.click()
    trials = opened.value
    trials.wait_for_load_state()
    shot(trials, runs, "cell-trials")
    assert sorted(listed(trials)) == [
        "oracle.filesystem.standard.tiny.move_todo_0.1", "oracle.filesystem.standard.tiny.move_todo_0.2",
    ]  # fmt: skip
    # Sorting by disagreement is a link too, its state in the URL.
    page.click("text=disagreement")
    assert page.url.endswith("/run/0?sort=disagreement")


def test_trial_page_shows_the_call_its_result_and_the_verifier(page: Any, server: str, runs: dict[str, Any]) -> None:
    page.goto(f"{server}/run/0/trial/oracle.filesystem.standard.tiny.move_todo_0.1")
    shot(page, runs, "trial")
    write = page.locator("li.tool_call", has_text="write_file")
    assert re.search(r'"content": "3\\n"', write.locator("pre").inner_text())
    assert write.locator(".class").inner_text() == "schema_valid"
    result = page.locator("li.tool_result", has_text="write_file").first.locator("pre").inner_text()
    assert result.startswith("Successfully wrote to ") and result.endswith("/done/summary.txt")
    assert page.locator("#verifier-stdout").inner_text().strip() == "all good"
    assert page.locator("#exit-code").inner_text().startswith("0")
    assert page.locator("#verifier-command").inner_text() == "python {task}/verify.py"
    env = page.locator("#verifier-env").inner_text().splitlines()
    assert env == ["FILESYSTEM_TEST_DIR={state}", "MCP_MESSAGES={trial}/messages.json"]
    assert "mcpfleet" in page.locator("#harness").inner_text()
    assert page.locator("#server").inner_text().startswith("secure-filesystem-server")
    assert "turn 1:" in page.locator("li.tool_call").first.inner_text()


def test_a_postgres_trial_shows_its_sql_its_rows_and_its_verifiers_command(
    page: Any, server: str, runs: dict[str, Any]
) -> None:
    page.goto(f"{server}/run/0/trial/{PG_TRIAL}")
    shot(page, runs, "trial-postgres")
    call = page.locator("li.tool_call", has_text="execute_sql")
    assert json.loads(call.locator("pre").inner_text()) == {"sql": "SELECT count(*) FROM orders WHERE qty >= 8"}
    assert "count" in page.locator("li.tool_result", has_text="execute_sql").first.locator("pre").inner_text()
    command = page.locator("#verifier-command").inner_text().split()
    env = dict(line.split("=", 1) for line in page.locator("#verifier-env").inner_text().splitlines())
    assert command[:2] == ["python", "{task}/verify.py"] and command[2:] == [env["POSTGRES_DATABASE"]]
    assert env["POSTGRES_PASSWORD"] == env["PGPASSWORD"] == "[secret]"
    assert page.locator("#outcome").inner_text() == "passed"


def test_not_scored_trial_shows_its_cause(page: Any, server: str, runs: dict[str, Any]) -> None:
    page.goto(f"{server}/run/0/trial/{runs['ids']['unscored']}")
    assert page.locator("#outcome").inner_text() == "not scored: provider_error"
    assert page.locator("#cause").inner_text().endswith("429 (attempt 4, giving up)")


def test_a_filter_narrows_the_list_and_lives_in_the_url(page: Any, server: str, runs: dict[str, Any]) -> None:
    page.goto(f"{server}/run/0/trials")
    assert page.locator("#count").inner_text() == "19"
    page.select_option("select[name=model]", "noop")
    page.select_option("select[name=outcome]", "failed")
    page.click("button[type=submit]")
    shot(page, runs, "filtered")
    assert "model=noop" in page.url and "outcome=failed" in page.url
    got = listed(page)
    services = [t.split(".")[1] for t in got]
    assert all(t.startswith("noop.") for t in got)
    assert sorted(set(services)) == ["filesystem", "postgres", "toolcall"] and services.count("filesystem") == 4
    page.goto(f"{server}/run/0/trials?cause=RateLimitError")
    assert listed(page) == [runs["ids"]["unscored"]]


def test_search_finds_a_string_only_inside_one_tool_result(page: Any, server: str, runs: dict[str, Any]) -> None:
    page.goto(f"{server}/run/0/trials")
    page.fill("input[name=q]", NEEDLE)
    page.press("input[name=q]", "Enter")
    shot(page, runs, "search")
    assert listed(page) == [runs["ids"]["needle"]]
    assert NEEDLE in page.locator(".snippet").inner_text()
    page.goto(f"{server}/run/0/trials?q=no-such-string-anywhere")
    assert listed(page) == []


def test_comparison_lists_the_known_flip_and_warns(page: Any, server: str, runs: dict[str, Any]) -> None:
    page.goto(f"{server}/compare?side=0&side=1")
    shot(page, runs, "compare")
    down = page.locator("table.flips-down tr")
    assert down.count() == 1 and "move_todo_1 #1" in down.inner_text()
    assert page.locator("table.flips-up tr").count() == 0
    assert "verifier_failed" in down.inner_text()
    warnings = page.locator("p.warning").all_inner_texts()
    assert any("harness versions differ" in w for w in warnings)
    oracle = page.locator("table.models tr", has_text="oracle").filter(has_text="filesystem")
    assert "-0.25" in oracle.inner_text()


def test_hostile_content_stays_inert(page: Any, server: str, runs: dict[str, Any]) -> None:
    page.goto(f"{server}/run/0/trial/{runs['ids']['hostile']}")
    shot(page, runs, "hostile")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert page.dialogs == []
    assert page.locator("main img, main svg, main script, #evil, a[href^='javascript:']").count() == 0
    result = page.locator("li.tool_result pre").inner_text()
    assert result == HOSTILE  # shown as text, character for character
    assert json.loads(page.locator("li.tool_call pre").inner_text()) == {"url": HOSTILE}  # the arguments too
    page.goto(f"{server}/run/0/trials?q=" + "%3Cscript%3E")
    assert listed(page) == [runs["ids"]["hostile"]]
    assert page.evaluate("window.__pwned") is None and page.locator("main img").count() == 0
