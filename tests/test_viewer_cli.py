"""``mcpfleet show`` (the console script, stdout piped: no pager) and the viewer over an ``s3://`` run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html import unescape as html_unescape
from pathlib import Path
from typing import Any

import boto3
from starlette.testclient import TestClient

from mcpfleet.runner.report.viewer.app import make_app
from mcpfleet.runner.report.viewer.runs import open_runs
from mcpfleet.runner.results.records import Totals, TrialResult, VerifierRecord, dumps, dumps_mcpmark
from mcpfleet.runner.results.store import LocalStore

TERMINAL_TRICK = "\x1b]0;pwned\x07\x1b[2J[bold red]markup[/]"


def make_run(root: Path) -> Path:
    store = LocalStore(root / "tiny")
    for model, passed in (("good", True), ("bad", False)):
        for task in ("t1", "t2"):
            trial_id = f"{model}.filesystem.standard.cat.{task}.1"
            messages = [
                {"content": f"Please {task}.", "role": "user"},
                {"arguments": json.dumps({"path": f"/w/{task}.txt"}), "call_id": "c1", "name": "read_text_file",
                 "type": "function_call"},
                {"call_id": "c1", "type": "function_call_output",
                 "output": json.dumps({"type": "text", "text": f"contents of {task} {TERMINAL_TRICK}"})},
            ]  # fmt: skip
            res = TrialResult(
                run="tiny", trial_id=trial_id, spec_hash="h", model=model, litellm_model="x/" + model,
                service="filesystem", task_id=f"filesystem/standard/cat/{task}", attempt=1, agent="mcpfleet",
                passed=passed, failure=None if passed else "verifier_failed",
                verifier=VerifierRecord(exit_code=0 if passed else 1, stdout=f"verdict for {task}"),
                totals=Totals(turns=1, tool_calls=1), harness="mcpfleet 0.1.0",
            )  # fmt: skip
            files = {"messages.json": dumps_mcpmark(messages), "trial.log": b"a log line\n"}
            if trial_id == "good.filesystem.standard.cat.t1.1":
                files["cases.jsonl"] = b'{"id": "case-<b>7</b>", "passed": true}\n'
            store.write_files(trial_id, files)
            store.commit(trial_id, dumps(res.model_dump()))
    return store.root


def show(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from mcpfleet.runner.cli.entry import main; main()", "show", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_show_prints_the_matrix_and_a_transcript_literally(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    matrix = show(str(run))
    assert matrix.returncode == 0, matrix.stderr
    assert "filesystem" in matrix.stdout and "cat/t1" in matrix.stdout and "cat/t2" in matrix.stdout
    assert "✓ 100%" in matrix.stdout and "✗ 0%" in matrix.stdout
    one = show(str(run), "bad.filesystem.standard.cat.t2.1")
    assert one.returncode == 0, one.stderr
    out = one.stdout
    assert "verifier_failed" in out and '"path": "/w/t2.txt"' in out and "contents of t2" in out
    assert "verdict for t2" in out and "a log line" in out
    assert "[bold red]markup[/]" in out  # shown as text, not as rich markup
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\x07" not in out  # no terminal control reaches it
    missing = show(str(run), "bad.filesystem.standard.cat.t9.1")
    assert missing.returncode == 2 and "no such trial" in missing.stderr
    bad_sort = show(str(run), "--sort", "random")
    assert bad_sort.returncode == 2 and "--sort random: not a sort order" in bad_sort.stderr


def test_view_reads_an_s3_run_as_a_local_one(tmp_path: Path, s3: str, bucket: str) -> None:
    run = make_run(tmp_path)
    client: Any = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    for f in run.rglob("*"):
        if f.is_file():
            client.upload_file(str(f), bucket, f"fleet/tiny/uid-1/{f.relative_to(run)}")
    (local,) = open_runs([str(run)])
    (remote,) = open_runs([f"s3://{bucket}/fleet/tiny/uid-1"], endpoint_url=s3)
    assert remote.rows == local.rows and len(remote.rows) == 4
    web = TestClient(make_app([remote]))
    page = web.get("/run/0/trial/bad.filesystem.standard.cat.t1.1")
    assert page.status_code == 200 and "contents of t1" in page.text and "verdict for t1" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    found = web.get("/run/0/trials", params={"q": "contents of t2"})
    assert found.text.count('class="trial"') == 2  # both models' t2 trials, read from S3
    cases = web.get("/run/0/trial/good.filesystem.standard.cat.t1.1").text
    assert "cases.jsonl: 1" in cases and "id: case-&lt;b&gt;7&lt;/b&gt; · passed: True" in cases
    assert web.get("/run/0/trial/nope").status_code == 404
    assert web.get("/run/3").status_code == 404 and "no such run" in web.get("/run/3").text
    assert web.get("/run/0", params={"sort": "x"}).status_code == 400


def test_records_the_plan_no_longer_counts_are_left_out(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    (run_all,) = open_runs([str(run)])
    assert len(run_all.rows) == 4 and not run_all.notes
    kept = {r.trial_id: "h" for r in run_all.rows[:3]}
    (run / "plan.json").write_text(json.dumps({"run": "tiny", "spec_hash": "s", "trials": kept}))
    (planned,) = open_runs([str(run)])
    assert sorted(r.trial_id for r in planned.rows) == sorted(kept)
    assert planned.notes == ["1 record(s) of trials no longer planned are left out"]


def first_entry(html: str) -> int:
    found = re.search(r'id="e(\d+)"', html)
    assert found, "a page with entries"
    return int(found.group(1))


def test_a_long_variant_trial_pages_forth_and_back_and_serves_an_entry_whole(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "long")
    trial_id = "m.postgres@v2.standard.cat.big.1"  # '@' in the path, URL-quoted by every link
    messages: list[dict[str, Any]] = [{"content": "go", "role": "user"}]
    for i in range(30):
        messages.append({"type": "function_call", "name": "execute_sql", "call_id": f"c{i}", "arguments": "{}"})
        text = f"result {i} " + "y" * 90_000 + ("Z" * 300_000 if i == 3 else "")
        messages.append({"type": "function_call_output", "call_id": f"c{i}", "output": json.dumps({"text": text})})
    res = TrialResult(
        run="long", trial_id=trial_id, spec_hash="h", model="m", litellm_model="x", service="postgres", variant="v2",
        task_id="postgres/standard/cat/big", attempt=1, agent="mcpfleet", passed=True,
    )  # fmt: skip
    store.write_files(trial_id, {"messages.json": dumps_mcpmark(messages)})
    store.commit(trial_id, dumps(res.model_dump()))
    web = TestClient(make_app(open_runs([str(store.root)])))
    link = re.search(r'href="(/run/0/trial/[^"]+)"', web.get("/run/0/trials").text)
    assert link and link.group(1) == "/run/0/trial/m.postgres%40v2.standard.cat.big.1"
    seen: list[int] = []
    url: str | None = link.group(1)
    pages_html = []
    while url:
        html = web.get(html_unescape(url)).text
        pages_html.append(html)
        seen += [int(n) for n in re.findall(r'<li class="entry [^"]*" id="e(\d+)"', html)]
        nxt = re.search(r'id="next" href="([^"]+)"', html)
        url = nxt.group(1) if nxt else None
    assert seen == list(range(61)) and len(pages_html) > 2  # every entry once, in order, over several pages
    back = re.search(r'id="previous" href="([^"]+)"', pages_html[2])
    assert back, "the third page links back"
    assert first_entry(web.get(html_unescape(back.group(1))).text) == first_entry(pages_html[1])
    whole = web.get("/run/0/trial/m.postgres%40v2.standard.cat.big.1/entry/8")
    assert whole.status_code == 200 and whole.text.startswith("result 3 ") and whole.text.endswith("Z" * 300_000)
    assert "whole entry as text" in "".join(pages_html)


def test_the_runs_page_warns_when_task_sets_differ(tmp_path: Path) -> None:
    one = make_run(tmp_path / "a")
    other = make_run(tmp_path / "b")
    for trial in (other / "trials").glob("*.t2.1"):
        for f in trial.iterdir():
            f.unlink()
        trial.rmdir()
    web = TestClient(make_app(open_runs([str(one), str(one)])))
    assert "task sets differ" not in web.get("/").text
    page = web.get("/", follow_redirects=False)
    assert page.status_code == 200 and "tiny #1" in page.text and "tiny #2" in page.text
    differ = TestClient(make_app(open_runs([str(one), str(other)]))).get("/").text
    assert "warning: these runs&#39; task sets differ" in differ
    assert re.search(r"<td>4</td><td>2</td><td>1</td>", differ) and re.search(r"<td>2</td><td>1</td><td>1</td>", differ)


def test_show_names_a_not_scored_trials_cause_from_its_log(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    store = LocalStore(run)
    trial_id = "late.filesystem.standard.cat.t1.1"
    res = TrialResult(
        run="tiny", trial_id=trial_id, spec_hash="h", model="late", litellm_model="x/late", service="filesystem",
        task_id="filesystem/standard/cat/t1", attempt=1, agent="mcpfleet", passed=False, failure="provider_error",
        error="APIConnectionError: refused", error_type="APIConnectionError",
    )  # fmt: skip
    log = b"10:00 provider_error: APIConnectionError: refused (attempt 1, retrying)\n"
    log += b"10:01 provider_error: APIConnectionError: refused (attempt 5, giving up)\n"
    store.write_files(trial_id, {"messages.json": b"[]", "trial.log": log})
    store.commit(trial_id, dumps(res.model_dump()))
    out = show(str(run), trial_id)
    assert out.returncode == 0, out.stderr
    assert "not scored: provider_error" in out.stdout
    assert "cause (trial.log): 10:01 provider_error: APIConnectionError: refused (attempt 5, giving up)" in out.stdout


LIGHT_PROBE = """
import sys
from mcpfleet.runner.cli.entry import main
for command in ("view", "show"):
    sys.argv = ["mcpfleet", command, "--help"]
    try:
        main()
    except SystemExit:
        pass
    print("=== end of", command)
heavy = [m for m in ("mcpfleet.runner.cli.app", "mcpfleet.runner.spec.evalrun", "mcpfleet.runner.report.scoring")
         if m in sys.modules]
print("heavy:", heavy)
"""


def test_view_and_show_start_without_the_full_cli_and_say_the_same() -> None:
    """The console script runs ``view`` and ``show`` through their own small app (the full one's imports cost a
    second or more of the viewer's start): the same commands, the same help, none of the rest imported."""
    from typer.testing import CliRunner

    from mcpfleet.runner.cli.app import app

    env = {**os.environ, "COLUMNS": "80"}
    p = subprocess.run([sys.executable, "-c", LIGHT_PROBE], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip().endswith("heavy: []"), p.stdout
    helps = p.stdout.split("=== end of ")
    for i, command in enumerate(("view", "show")):
        full = CliRunner().invoke(app, [command, "--help"], prog_name="mcpfleet", env={"COLUMNS": "80"})
        light = helps[i].split("\n", 1)[1] if i else helps[i]
        assert light == full.output, command
