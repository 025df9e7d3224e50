"""The viewer's pure parts: the messages.json normaliser on every agent's shape, the index's rows and filters,
the matrix's cells and sorts, the search's scan, the comparison's flips and warnings, trial.log's cause line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest

from mcpfleet.runner.report.viewer.comparison import Side, comparison
from mcpfleet.runner.report.viewer.index import filter_rows, label, row_of
from mcpfleet.runner.report.viewer.logs import cause_line
from mcpfleet.runner.report.viewer.matrix import matrices
from mcpfleet.runner.report.viewer.pages import cases_shown, entries_page, matrix_page, page_starts, url
from mcpfleet.runner.report.viewer.search import scan
from mcpfleet.runner.report.viewer.transcript import CHAT, REACT, SDK, normalise
from mcpfleet.runner.results.records import to_mcpmark_messages
from mcpfleet.runner.spec import mcpmark_protocol as protocol

RECORDS = Path(__file__).parent / "fixtures" / "mcpmark_records"


def kinds(entries: list[Any]) -> list[str]:
    return [e.kind for e in entries]


def test_mcpmark_agent_items_unwrap_the_mcp_result_and_take_classes_from_the_turns() -> None:
    messages = json.loads((RECORDS / "messages.json").read_text())
    turns = [
        {"tool_calls": [{"call_id": "call_a", "call_class": "schema_valid", "duration_s": 0.5}]},
        {"tool_calls": [{"call_id": "call_c", "call_class": "wrong_arguments", "is_error": True}]},
    ]
    t = normalise(messages, turns, "mcpmark")
    assert t.shape == SDK and not t.problems
    assert kinds(t.entries) == [
        "user", "assistant", "tool_call", "tool_call", "tool_result", "tool_result",
        "tool_call", "tool_call", "tool_result", "tool_result", "assistant",
    ]  # fmt: skip
    first_call = t.entries[2]
    assert first_call.name == "list_directory" and first_call.text == '{\n  "path": "/w"\n}'
    assert first_call.call_class == "schema_valid" and first_call.duration_s == 0.5
    assert t.entries[1].turn == 1 and first_call.turn is None and t.entries[6].turn == 2 and t.entries[10].turn == 3
    listing = t.entries[4]  # the MCP result's dump unwrapped to its text
    assert listing.text == "[DIR] logs\n[FILE] readme.txt" and listing.name == "list_directory"
    assert not listing.is_error
    denied = t.entries[8]
    assert denied.is_error and denied.text.startswith("Access denied") and denied.name == "read_text_file"
    assert t.entries[9].text.startswith("Error: Tool call 'read_text_file' timed out")  # a plain text output


def test_mcpfleet_agent_plain_text_results() -> None:
    chat: list[dict[str, Any]] = [
        {"role": "user", "content": "do it"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "function": {"name": "query", "arguments": '{"sql": "select 1"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "[{'?column?': 1}]"},
        {"role": "assistant", "content": "one row"},
    ]  # fmt: skip
    t = normalise(to_mcpmark_messages(chat), None, "mcpfleet")
    assert t.shape == SDK
    assert kinds(t.entries) == ["user", "tool_call", "tool_result", "assistant"]
    assert t.entries[1].text == '{\n  "sql": "select 1"\n}' and t.entries[1].turn == 1
    assert t.entries[2].text == "[{'?column?': 1}]" and t.entries[2].name == "query"
    assert t.entries[3].turn == 2


def test_react_agent_replies_become_thoughts_calls_and_observations() -> None:
    act = {"thought": "list first", "action": {"tool": "list_directory", "arguments": {"path": "/w"}}}
    observation = protocol.render("react.observation", observation="total 3 files\n<b>x</b>")
    chat = [
        {"role": "user", "content": "Task: count the files"},
        {"role": "assistant", "content": json.dumps(act)},
        {"role": "user", "content": observation},
        {"role": "assistant", "content": "not json at all"},
        {"role": "user", "content": protocol.text("react.invalid_json")},
        {"role": "assistant", "content": '```json\n{"thought": "done", "answer": "3"}\n```'},
    ]  # fmt: skip
    turns = [{"tool_calls": [{"call_id": "", "call_class": "schema_valid", "name": "list_directory"}]}, {}, {}]
    t = normalise(to_mcpmark_messages(chat), turns, "react")
    assert t.shape == REACT
    assert kinds(t.entries) == [
        "user",
        "thought",
        "tool_call",
        "tool_result",
        "assistant",
        "user",
        "thought",
        "assistant",
    ]
    call, result = t.entries[2], t.entries[3]
    assert (
        call.name == "list_directory" and json.loads(call.text) == {"path": "/w"} and call.call_class == "schema_valid"
    )
    assert result.text == "total 3 files\n<b>x</b>" and result.name == "list_directory"
    assert t.entries[-1].text == "3" and [e.turn for e in t.entries if e.turn] == [1, 2, 3]
    # Without the record's agent, the replies' JSON still tells the shape.
    assert normalise(to_mcpmark_messages(chat)).shape == REACT


def test_claude_raw_chat_list() -> None:
    messages = json.loads((RECORDS / "messages_claude_timeout.json").read_text())
    t = normalise(messages, None, "mcpmark")
    assert t.shape == CHAT
    assert kinds(t.entries) == ["system", "user", "assistant", "tool_call", "tool_call", "tool_result", "tool_result",
                                "tool_call", "tool_call"]  # fmt: skip
    assert t.entries[0].text.startswith("You are a helpful agent")
    assert t.entries[5].text == "[DIR] logs\n[FILE] readme.txt" and t.entries[5].name == "list_directory"
    assert t.entries[6].text.startswith("[FILE] café.log")
    assert t.entries[2].turn == 1 and t.entries[7].turn == 2


def test_malformed_arguments_and_foreign_items_are_kept_and_flagged() -> None:
    items = [
        {"type": "function_call", "name": "f", "arguments": '{"a": 1', "call_id": "x"},
        {"weird": True},
        "not an object",
    ]
    t = normalise(items)
    assert t.entries[0].malformed and t.entries[0].text == '{"a": 1'
    assert '"weird": true' in t.entries[1].text
    assert t.problems and "2 item(s)" in t.problems[0]
    assert normalise({"a": 1}).problems == ["messages.json holds a JSON dict, not a list of messages"]


def test_a_long_transcript_is_cut_into_pages_and_a_huge_entry_folded_never_dropped() -> None:
    messages = [{"role": "user", "content": "x" * 300_000} for _ in range(10)]
    t = normalise(messages)
    first, nxt = entries_page(t, 0, [])
    assert nxt is not None and 1 <= len(first) < 10 and all(s.folded and s.cut for s in first)
    assert first[0].body == "x" * 200_000  # the rest is behind the entry's raw link
    seen = len(first)
    start_at: int | None = nxt
    while start_at is not None:
        page, start_at = entries_page(t, start_at, [])
        seen += len(page)
    assert seen == 10
    starts = page_starts(t)
    assert starts[0] == 0 and starts[1] == nxt and len(starts) == 10 // len(first) + bool(10 % len(first))


def test_a_page_holds_at_most_page_entries() -> None:
    t = normalise([{"role": "user", "content": "short"} for _ in range(1000)])
    assert page_starts(t) == [0, 400, 800]
    page, nxt = entries_page(t, 800, [])
    assert len(page) == 200 and nxt is None


def test_cases_jsonl_is_shown_case_by_case() -> None:
    raw = b'{"id": "c1", "label": "correct", "passed": true}\nnot json\n\n{"id": "c2"}\n'
    shown, count = cases_shown(raw)
    assert count == 3 and [h for h, _ in shown] == [
        "id: c1 \u00b7 label: correct \u00b7 passed: True",
        "not json",
        "id: c2",
    ]
    assert json.loads(shown[0][1]) == {"id": "c1", "label": "correct", "passed": True}
    assert cases_shown(raw, most=1)[1] == 3 and len(cases_shown(raw, most=1)[0]) == 1
    assert cases_shown(None) == ([], 0)


def rec(model: str, task: str, attempt: int, passed: bool, failure: str | None = None, **extra: Any) -> dict[str, Any]:
    service = extra.pop("service", "filesystem")
    variant = extra.pop("variant", None)
    return {
        "trial_id": f"{model}.{service}{'@' + variant if variant else ''}.standard.cat.{task}.{attempt}",
        "model": model, "service": service, "variant": variant, "task_id": f"{service}/standard/cat/{task}",
        "attempt": attempt, "passed": passed, "failure": failure, "harness": "mcpfleet 1",
        "totals": {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.01}, **extra,
    }  # fmt: skip


def test_rows_filters_and_labels() -> None:
    rows = [
        row_of(rec("a", "t1", 1, True)),
        row_of(rec("a", "t1", 2, False, "turn_limit")),
        row_of(rec("b", "t1", 1, False, "provider_error", error_type="RateLimitError", error="RateLimitError: 429")),
    ]
    assert [label(r) for r in rows] == ["passed", "turn_limit", "not scored: provider_error"]
    assert rows[2].cause == "RateLimitError" and rows[1].cause == ""
    assert (rows[0].difficulty, rows[0].category, rows[0].task) == ("standard", "cat", "t1")
    assert filter_rows(rows, {"model": ["a"]}) == rows[:2]
    assert filter_rows(rows, {"outcome": ["not_scored", "passed"]}) == [rows[0], rows[2]]
    assert filter_rows(rows, {"cause": ["RateLimitError"], "model": ["b"]}) == [rows[2]]
    assert filter_rows(rows, {"model": [""], "nonsense": ["x"]}) == rows


def test_matrix_cells_rates_and_sorts() -> None:
    rows = [row_of(r) for r in [
        rec("a", "agree", 1, True), rec("b", "agree", 1, True),
        rec("a", "split", 1, True), rec("a", "split", 2, True), rec("b", "split", 1, False, "abandoned"),
        rec("b", "split", 2, False, "infra_error"),
        rec("a", "hard", 1, False, "verifier_failed"), rec("b", "hard", 1, False, "verifier_failed"),
        rec("a", "agree", 1, True, service="postgres", variant="v2"),
    ]]  # fmt: skip
    fs, pg = matrices(rows, "disagreement")
    assert fs.service == "filesystem" and [c[0] for c in fs.columns] == ["a", "b"]
    assert [r.task for r in fs.rows] == ["split", "agree", "hard"]
    split = fs.rows[0]
    assert split.cells["a"].pass_rate == 1.0 and split.cells["b"].pass_rate == 0.0  # the infra error is not scored
    assert [m[0] for m in split.cells["b"].marks()] == ["fail", "unscored"]
    assert split.cells["b"].failures() == ["abandoned", "infra_error"] and split.cells["a"].failures() == []
    assert fs.column_rate("a") == 0.75
    assert [r.task for r in matrices(rows, "difficulty")[0].rows] == ["hard", "split", "agree"]
    assert pg.columns == [("a @v2", "a", "v2")]
    with pytest.raises(ValueError, match="sort=x"):
        matrices(rows, "x")


HOSTILE_NAME = 'm<script>alert(1)</script>&x=1+2 "q" #frag %41 Ünï 🦭'


def test_links_quote_every_value_as_urlencode_does() -> None:
    params = {"model": HOSTILE_NAME, "task": ["a b", "c&d", ""], "variant": "", "n": 3, "none": None, "k=&": "="}
    want = urlencode([("model", HOSTILE_NAME), ("task", "a b"), ("task", "c&d"), ("n", "3"), ("k=&", "=")])
    assert url("/run/0/trials", params) == "/run/0/trials?" + want
    assert parse_qsl(url("/x", params).split("?", 1)[1])[0] == ("model", HOSTILE_NAME)
    assert url("/x", {"a": ""}) == "/x"


def test_the_matrix_page_escapes_names_and_links_each_cell_to_its_trials() -> None:
    rows = [row_of(r) for r in [
        rec(HOSTILE_NAME, "t<b>1", 1, True), rec(HOSTILE_NAME, "t<b>1", 2, False, "verifier_<i>failed"),
        rec("plain", "t<b>1", 1, False, "abandoned"),
    ]]  # fmt: skip
    run = SimpleNamespace(label="run <u>x</u>", rows=rows, notes=[], spec_hash="", store=SimpleNamespace(location=str))
    html = matrix_page(0, run, matrices(rows), "task")
    assert "<script>alert" not in html and "t<b>1" not in html and "_<i>" not in html and "<u>" not in html
    assert "t&lt;b&gt;1" in html and "verifier_&lt;i&gt;failed" in html
    cell = urlencode({"service": "filesystem", "task": "t<b>1", "category": "cat", "model": HOSTILE_NAME})
    assert f'href="/run/0/trials?{cell}"'.replace("&", "&amp;") in html
    assert html.count('class="cell"') == 2 * 2  # two cells, each a <td> and its <a>
    assert html.count('title="attempt 2: verifier_&lt;i&gt;failed"') == 1


def test_search_finds_escaped_text_caps_and_reports_bytes() -> None:
    files = {
        ("t1", "messages.json"): json.dumps([{"output": json.dumps({"text": 'say "Zebra" now'})}]).encode(),
        ("t2", "messages.json"): b'[{"content": "nothing here"}]',
        ("t2", "trial.log"): b"provider_error: zebra in the log",
    }
    found = scan('say "zebra"', ["t1", "t2"], lambda t, n: files.get((t, n)))
    assert [h.trial_id for h in found.hits] == ["t1"] and found.scanned == 2 and not found.stopped
    assert found.bytes_read == sum(len(v) for v in files.values())
    both = scan("zebra", ["t1", "t2"], lambda t, n: files.get((t, n)))
    assert [(h.trial_id, h.file) for h in both.hits] == [("t1", "messages.json"), ("t2", "trial.log")]
    capped = scan("zebra", ["t1", "t2"], lambda t, n: files.get((t, n)), max_hits=1)
    assert len(capped.hits) == 1 and capped.stopped == "stopped at 1 matching trials"


def test_comparison_flips_deltas_and_warnings() -> None:
    base = [row_of(rec("a", f"t{i}", 1, True)) for i in range(4)] + [row_of(rec("a", "t4", 1, False, "abandoned"))]
    new = [row_of(rec("a", f"t{i}", 1, i != 0, None if i else "turn_limit")) for i in range(4)]
    new += [row_of(rec("a", "t4", 1, True)), row_of(rec("a", "t9", 1, True)), row_of(rec("a", "t9", 2, True))]
    got = comparison([Side("old", base), Side("new", new)])
    (v,) = got.versus
    assert [f.before.task for f in v.down] == ["t0"] and [f.after.task for f in v.up] == ["t4"]
    (m,) = v.models
    assert m["pairs"] == 5 and m["difference"] == 0.0 and m["delta_cost_usd"] == 0.0
    assert any(w.startswith("task sets differ: 0 task(s) only in old, 1 only in new") for w in got.warnings)
    assert "attempts differ: old has 1, new has 2" in got.warnings
    with pytest.raises(ValueError, match="two sides"):
        comparison([Side("old", base)])


def test_cause_line_picks_the_giving_up_line() -> None:
    log = "12:00 provider_error: RateLimitError: 429 (attempt 1, retrying in 2 s)\n"
    log += "12:01 provider_error: RateLimitError: 429 (attempt 4, giving up)\n\n"
    assert cause_line(log) == "12:01 provider_error: RateLimitError: 429 (attempt 4, giving up)"
    assert cause_line("only line\n") == "only line" and cause_line("") == ""


def test_a_matrix_of_many_tasks_is_paged_per_service_and_every_row_is_reachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from starlette.testclient import TestClient

    from mcpfleet.runner.report.viewer import pages
    from mcpfleet.runner.report.viewer.app import make_app
    from mcpfleet.runner.report.viewer.index import sort_rows
    from mcpfleet.runner.report.viewer.runs import Run

    monkeypatch.setattr(pages, "MATRIX_ROWS", 3)
    rows = sort_rows(
        [row_of(rec(m, f"t{i}", 1, i % 2 == 0)) for i in range(7) for m in ("a", "b")]
        + [row_of(rec("a", "p0", 1, True, service="postgres"))]
    )
    run = Run("ref", "run", SimpleNamespace(location=lambda: "here"), rows, {r.trial_id: r for r in rows})
    web = TestClient(make_app([run]))

    def tasks(html: str, service: str) -> list[str]:
        section = html.split(f'id="service-{service}"', 1)[1].split("</section>", 1)[0]
        return [t.split("/", 1)[1] for t in re.findall(r'rel="noopener">(cat/t\d+|cat/p\d+)</a></td>', section)]

    first = web.get("/run/0").text
    assert tasks(first, "filesystem") == ["t0", "t1", "t2"] and tasks(first, "postgres") == ["p0"]
    assert "tasks 1–3 of 7" in first and 'href="/run/0?service=filesystem&amp;page=2">next' in first
    assert first.count('class="rows-shown"') == 1  # postgres' one task needs no paging
    seen = []
    page, nxt = 1, "/run/0?service=filesystem&page=1"
    while nxt:
        html = web.get(nxt).text
        assert 'id="service-postgres"' not in html and "only filesystem" in html
        seen += tasks(html, "filesystem")
        found = re.search(r'href="([^"]+)">next</a>', html)
        nxt = found.group(1).replace("&amp;", "&") if found else ""
        page += 1
    assert seen == [f"t{i}" for i in range(7)] and page == 4
    everything = web.get("/run/0", params={"service": "filesystem", "rows": "all"}).text
    assert tasks(everything, "filesystem") == seen and 'class="rows-shown"' not in everything
    # Column rates are over every row, not the page's; a sort keeps the service and starts at its first page.
    fs_head = first.split('id="service-filesystem"', 1)[1].split("</thead>", 1)[0]
    assert '<th class="col">a<br><small>57%</small>' in fs_head  # 4 of t0-t6, not 2 of the page's t0-t2
    sorted_page = web.get("/run/0", params={"service": "filesystem", "page": "3", "sort": "difficulty"}).text
    assert 'href="/run/0?sort=disagreement&amp;service=filesystem">disagreement' in sorted_page
    assert web.get("/run/0", params={"service": "nope"}).status_code == 400
    assert "give one of filesystem, postgres" in web.get("/run/0", params={"service": "nope"}).text
    assert web.get("/run/0", params={"rows": "9"}).status_code == 400
