"""Judge evaluation: the metrics, ``mcpfleet judge-eval`` (table, JSON, HTML) and ``mcpfleet toolcalls generate``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from conftest import REPO
from judge_server import JudgeServer, judge_server

from mcpfleet.runner.toolcalls import LABELS, SCHEMA_VALID, classify_call
from mcpfleet.runner.toolcalls.evaluate import evaluate
from mcpfleet.runner.toolcalls.judge import Judge
from mcpfleet.runner.toolcalls.loader import load_cases
from mcpfleet.runner.toolcalls.metrics import classification_report

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
FIXTURE = Path(__file__).resolve().parent / "data" / "toolcalls_200.jsonl"
CASES = load_cases(FIXTURE).cases


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | (env or {})
    return subprocess.run(
        [str(MCPFLEET), *args], capture_output=True, text=True, timeout=300, env=full, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="module")
def server() -> Iterator[JudgeServer]:
    with judge_server() as s:
        yield s


def matrix(gold: Sequence[str], predicted: Sequence[str]) -> list[list[int]]:
    pairs = Counter(zip(gold, predicted, strict=True))
    return [[pairs[(g, p)] for p in LABELS] for g in LABELS]


def test_metrics_match_a_hand_computed_example() -> None:
    gold = ["correct", "correct", "incorrect_tool", "incorrect_parameter_values", "incorrect_parameter_values"]
    pred = ["correct", "incorrect_tool", "incorrect_tool", "correct", "judge_error"]
    m = classification_report(gold, pred)
    assert m["accuracy"] == pytest.approx(2 / 5)
    assert m["per_class"]["correct"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2}
    assert m["per_class"]["incorrect_tool"] == pytest.approx(
        {"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1}
    )
    values = m["per_class"]["incorrect_parameter_values"]
    assert values == {"precision": None, "recall": 0.0, "f1": None, "support": 2}
    assert m["per_class"]["incorrect_parameter_names"]["support"] == 0
    assert m["macro_f1"] == pytest.approx((0.5 + 2 / 3 + 0.0) / 3)  # classes without support are left out
    assert m["confusion"]["columns"] == [*LABELS, "judge_error"]
    assert m["confusion"]["matrix"][3] == [1, 0, 0, 0, 1]


def test_judge_eval_without_a_judge_scores_the_checker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(FIXTURE, data / "cases.jsonl")
    (data / "bad.jsonl").write_text('{"available_tools": [], "score": "correct"}\n')
    refused = cli("judge-eval", str(data))
    assert refused.returncode == 2
    assert f"{data / 'bad.jsonl'}: row 1: field 'message_history': missing" in " ".join(refused.stderr.split())
    out = cli(
        "judge-eval", str(data), "--skip-bad", "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html")
    )
    assert out.returncode == 0, out.stderr
    assert "skipped:" in out.stderr and "bad.jsonl: row 1" in " ".join(out.stderr.split())
    assert "judge-eval: 200 cases" in out.stdout and "confusion: checker" in out.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert list(result["systems"]) == ["checker"] and result["judge"] is None
    assert result["data"]["rows"] == 201 and len(result["data"]["skipped"]) == 1
    verdicts = [classify_call(c.tools, c.call) for c in CASES]
    predicted = ["correct" if v.label == SCHEMA_VALID else v.label for v in verdicts]
    gold = [c.label or "" for c in CASES]
    assert result["systems"]["checker"]["confusion"]["matrix"] == matrix(gold, predicted)
    blind = sum(1 for c in CASES if c.mutation in ("off_intent", "wrong_existing_tool"))
    assert result["checker_missed_wrong"] == blind == len(result["disagreements"])
    assert result["by_mutation"]["off_intent"]["checker"] == 0.0
    assert result["by_mutation"]["missing_required"]["checker"] == 1.0
    html = (tmp_path / "r.html").read_text()
    assert html.startswith("<!doctype html>") and "<script" not in html and "http" not in html.split("<body>")[0]
    assert 'id="confusion-checker"' in html and 'id="disagreements"' in html
    hit = matrix(gold, predicted)[0][0]
    assert f'data-gold="correct" data-predicted="correct">{hit}</td>' in html


def test_judge_eval_with_a_judge_scores_all_three_systems_and_reuses_its_cache(
    tmp_path: Path, server: JudgeServer
) -> None:
    args = ["judge-eval", str(FIXTURE), "--judge", "openai/rule", "--api-base", server.url]
    args += ["--api-key-env", "JUDGE_KEY", "--cache-dir", str(tmp_path / "cache"), "--json", str(tmp_path / "r.json")]
    env = {"JUDGE_KEY": "sk-test"}
    first = cli(*args, env=env)
    assert first.returncode == 0, first.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert list(result["systems"]) == ["checker", "judge", "checker+judge"]
    stats = result["judge"]["stats"]
    assert (stats["requests"], stats["cache_hits"], stats["malformed"]) == (200, 0, 0)
    # The rule judge says incorrect_tool exactly when the called tool is not available, otherwise correct.
    gold = [c.label or "" for c in CASES]
    judged = ["correct" if c.call.name in {t.name for t in c.tools} else "incorrect_tool" for c in CASES]
    assert result["systems"]["judge"]["confusion"]["matrix"] == matrix(gold, judged)
    checker = result["systems"]["checker"]["confusion"]["matrix"]
    assert result["systems"]["checker+judge"]["confusion"]["matrix"] == checker
    served = len(server.requests)
    second = cli(*args, env=env)
    assert second.returncode == 0 and len(server.requests) == served
    again = json.loads((tmp_path / "r.json").read_text())
    assert (again["judge"]["stats"]["requests"], again["judge"]["stats"]["cache_hits"]) == (0, 200)
    assert again["systems"] == result["systems"]
    missing = cli(*args[:-2], "--api-key-env", "NO_SUCH_VARIABLE_SET")
    assert missing.returncode == 2 and "NO_SUCH_VARIABLE_SET" in missing.stderr


async def test_schema_valid_only_judges_what_the_checker_passes(server: JudgeServer) -> None:
    from mcpfleet.runner.toolcalls.loader import Loaded

    judge = Judge.for_model("openai/answer=incorrect_parameter_values", api_base=server.url, api_key="sk-test")
    try:
        result = await evaluate(Loaded(CASES, [str(FIXTURE)], len(CASES)), judge, judge_all=False)
    finally:
        await judge.aclose()
    assert list(result["systems"]) == ["checker", "checker+judge"]
    assert judge.stats.requests == result["checker_schema_valid"]
    combined = result["by_mutation"]
    assert combined["off_intent"]["checker+judge"] == 1.0 and combined["(correct)"]["checker+judge"] == 0.0


def test_generate_writes_jsonl_json_and_parquet_that_load_back_identically(tmp_path: Path) -> None:
    loaded = {}
    for fmt in ("jsonl", "json", "parquet"):
        out = cli("toolcalls", "generate", "--out", str(tmp_path / fmt), "--n", "40", "--seed", "9", "--format", fmt)
        assert out.returncode == 0, out.stderr
        manifest = json.loads((tmp_path / fmt / "_manifest.json").read_text())
        assert manifest["n"] == 40 and sum(manifest["labels"].values()) == 40
        loaded[fmt] = [c.model_dump(exclude={"source"}) for c in load_cases(tmp_path / fmt).cases]
    assert loaded["jsonl"] == loaded["json"] == loaded["parquet"]
    assert len(loaded["jsonl"]) == 40 and {c["label"] for c in loaded["jsonl"]} == set(LABELS)


def test_judge_eval_prints_markup_in_data_as_text_and_writes_its_files(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()[:20]]
    for i, r in enumerate(rows):
        r["id"] = f"[/bold]case-{i}[/]"
        r["failure_reason"] = "[link=x]closing [/] tags"
    data = tmp_path / "markup.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r.json"
    done = cli("judge-eval", str(data), "--json", str(out), "--show", "20")
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.exists() and "[/bold]case-" in done.stdout


def test_judge_eval_never_prints_or_writes_the_judge_key(tmp_path: Path) -> None:
    """A judge endpoint whose errors echo the key it was sent (as some proxies do): judge-eval fails or reports
    per case, but the key named by --api-key-env appears in none of stdout, stderr or the JSON report."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    secret = "sk-judge-eval-secret-0123456789"

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.dumps(
                {"error": {"message": f"bad request from {self.headers.get('authorization')}", "type": "invalid"}}
            ).encode()
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(line for line in FIXTURE.read_text().splitlines(keepends=True)[:6]))
    report = tmp_path / "r.json"
    try:
        args = [
            "judge-eval",
            str(data),
            "--judge",
            "openai/echo",
            "--api-base",
            f"http://127.0.0.1:{httpd.server_port}/v1",
        ]
        out = cli(
            *args,
            "--api-key-env",
            "ECHO_KEY",
            "--no-cache",
            "--attempts",
            "1",
            "--json",
            str(report),
            env={"ECHO_KEY": secret},
        )
    finally:
        httpd.shutdown()
    seen = out.stdout + out.stderr + (report.read_text() if report.exists() else "")
    assert "bad request from" in seen or "400" in seen, seen[-2000:]  # the judge's failure is told ...
    assert secret not in seen and "sk-judge-eval" not in seen  # ... without the key


def test_judge_eval_and_generate_refuse_unwritable_outputs_before_any_work(tmp_path: Path, server: JudgeServer) -> None:
    """`judge-eval --json /` was an IsADirectoryError traceback after the whole evaluation (its judge calls paid
    for); `--html /nonexist/x.html` created /nonexist; `toolcalls generate --out <a file>` was a traceback. Each
    is now one line naming the option, before any judge call, with nothing created."""
    args = ["judge-eval", str(FIXTURE), "--judge", "openai/rule", "--api-base", server.url, "--no-cache"]
    args += ["--api-key-env", "JUDGE_KEY", "--limit", "5"]
    served = len(server.requests)
    missing = tmp_path / "nope" / "x.html"
    for extra, said in [
        (["--json", str(tmp_path)], f"--json {tmp_path}: is a folder; name the file to write"),
        (["--html", str(missing)], f"--html {missing}: the folder {missing.parent} does not exist; create it"),
        (["--json", str(tmp_path / "ok.json"), "--html", "/sys/x.html"], "--html /sys/x.html: /sys cannot be written"),
    ]:
        out = cli(*args, *extra, env={"JUDGE_KEY": "sk-test"})
        assert out.returncode == 2 and said in " ".join(out.stderr.split()), out.stderr
        assert "Traceback" not in out.stderr
    assert len(server.requests) == served and not missing.parent.exists() and not (tmp_path / "ok.json").exists()
    afile = tmp_path / "afile"
    afile.write_text("keep")
    out = cli("toolcalls", "generate", "--out", str(afile), "--n", "5")
    assert out.returncode == 2 and f"--out {afile}: is a file; give a folder" in " ".join(out.stderr.split())
    assert "Traceback" not in out.stderr and afile.read_text() == "keep"
