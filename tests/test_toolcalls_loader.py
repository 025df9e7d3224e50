"""The limbic-format loader: file types, folders, string-encoded fields, tolerated shapes and bad rows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mcpfleet.runner.toolcalls.loader import DataError, load_cases

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": SCHEMA}]
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Read /tmp/a.txt"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "read_file", "arguments": {"path": "/tmp/a.txt"}}}],
    },
]


def row(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "available_tools": TOOLS,
        "message_history": HISTORY,
        "score": "correct",
        "failure_reason": "",
    }
    base.update(over)
    return base


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_the_cards_shape_loads_into_a_case(tmp_path: Path) -> None:
    loaded = load_cases(write_jsonl(tmp_path / "d.jsonl", [row()]))
    (case,) = loaded.cases
    assert (loaded.rows, loaded.skipped, loaded.files) == (1, [], [str(tmp_path / "d.jsonl")])
    assert case.id == "d.jsonl:1" and case.source == f"{tmp_path / 'd.jsonl'}:1"
    assert case.tools[0].name == "read_file" and case.tools[0].input_schema == SCHEMA
    assert case.history == HISTORY[:1]
    assert (case.call.name, case.call.arguments) == ("read_file", {"path": "/tmp/a.txt"})
    assert case.label == "correct" and case.failure_reason is None
    assert case.messages()[-1]["tool_calls"][0]["function"]["arguments"] == {"path": "/tmp/a.txt"}


def test_json_encoded_strings_are_decoded_at_every_level(tmp_path: Path) -> None:
    history = json.loads(json.dumps(HISTORY))
    history[1]["tool_calls"][0]["function"]["arguments"] = json.dumps({"path": "/tmp/b.txt"})
    tools = [{**TOOLS[0], "input_schema": json.dumps(SCHEMA)}]
    r = row(available_tools=json.dumps(tools), message_history=json.dumps(history), score="incorrect_parameter_values")
    (case,) = load_cases(write_jsonl(tmp_path / "d.jsonl", [r])).cases
    assert case.call.arguments == {"path": "/tmp/b.txt"}
    assert case.tools[0].input_schema == SCHEMA
    assert case.label == "incorrect_parameter_values"


@pytest.mark.parametrize(
    "tool",
    [
        {"name": "read_file", "parameters": SCHEMA},
        {"name": "read_file", "inputSchema": SCHEMA},
        {"type": "function", "function": {"name": "read_file", "description": "Read.", "parameters": SCHEMA}},
    ],
)
def test_openai_and_mcp_tool_shapes_are_tolerated(tmp_path: Path, tool: dict[str, Any]) -> None:
    (case,) = load_cases(write_jsonl(tmp_path / "d.jsonl", [row(available_tools=[tool])])).cases
    assert case.tools[0].name == "read_file" and case.tools[0].input_schema == SCHEMA


@pytest.mark.parametrize(
    "assistant",
    [
        {"role": "assistant", "tool_calls": [{"name": "read_file", "arguments": '{"path": "/x"}'}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "/x"}}],
        },
    ],
)
def test_flat_and_anthropic_calls_are_tolerated(tmp_path: Path, assistant: dict[str, Any]) -> None:
    r = row(message_history=[HISTORY[0], assistant])
    (case,) = load_cases(write_jsonl(tmp_path / "d.jsonl", [r])).cases
    assert (case.call.name, case.call.arguments) == ("read_file", {"path": "/x"})


def test_json_lists_data_objects_parquet_and_folders(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.json").write_text(json.dumps([row(), row(score="incorrect_tool")]))
    (folder / "sub" / "b.json").write_text(json.dumps({"data": [row(id="custom-id")]}))
    flat = [
        {
            **row(score="incorrect_parameter_names"),
            "available_tools": json.dumps(TOOLS),
            "message_history": json.dumps(HISTORY),
        }
    ]
    pq.write_table(pa.Table.from_pylist(flat), folder / "c.parquet")
    (folder / "_manifest.json").write_text('{"not": "data"}')
    (folder / "notes.txt").write_text("ignored")
    loaded = load_cases(folder)
    assert [Path(f).name for f in loaded.files] == ["a.json", "c.parquet", "b.json"]
    assert [c.id for c in loaded.cases] == ["a.json:1", "a.json:2", "c.parquet:1", "custom-id"]
    assert [c.label for c in loaded.cases] == ["correct", "incorrect_tool", "incorrect_parameter_names", "correct"]
    assert loaded.cases[2].call.arguments == {"path": "/tmp/a.txt"}


def test_identical_tools_are_one_object_across_rows(tmp_path: Path) -> None:
    loaded = load_cases(write_jsonl(tmp_path / "d.jsonl", [row(), row(), row()]))
    assert len({id(c.tools[0]) for c in loaded.cases}) == 1


BAD_ROWS = [
    ("{not json", "(row)", "not valid JSON"),
    (row(available_tools="[{"), "available_tools", "not valid JSON"),
    (row(available_tools=[{"description": "no name"}]), "available_tools[0].name", "missing"),
    (
        row(available_tools=[{"name": "x", "input_schema": [1]}]),
        "available_tools[0].input_schema",
        "JSON schema object",
    ),
    (row(message_history=[]), "message_history", "non-empty list"),
    (row(message_history=[{"content": "hi"}]), "message_history[0]", "'role'"),
    (row(message_history=HISTORY[:1]), "message_history", "no assistant message"),
    (
        row(
            message_history=[
                HISTORY[0],
                {"role": "assistant", "tool_calls": [{"function": {"name": "read_file", "arguments": '{"path": '}}]},
            ]
        ),
        "message_history[1].tool_calls[0].function.arguments",
        "not valid JSON",
    ),
    (
        row(message_history=[HISTORY[0], {"role": "assistant", "tool_calls": HISTORY[1]["tool_calls"] * 2}]),
        "message_history[1].tool_calls",
        "exactly one tool call, found 2",
    ),
    (row(score="wrong"), "score", "'wrong' is not one of"),
    ({k: v for k, v in row().items() if k != "score"}, "score", "missing"),
    ({"message_history": HISTORY}, "available_tools", "missing"),
]


@pytest.mark.parametrize(("bad", "field", "message"), BAD_ROWS)
def test_a_bad_row_is_an_error_naming_file_row_and_field(tmp_path: Path, bad: Any, field: str, message: str) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row(), bad, row()])
    with pytest.raises(DataError) as info:
        load_cases(path)
    text = str(info.value)
    assert text.startswith(f"{path}: row 2: field '{field}':"), text
    assert message in text and "--skip-bad" in text


def test_skip_bad_skips_and_counts_every_bad_row(tmp_path: Path) -> None:
    rows = [row()] + [b for b, _, _ in BAD_ROWS] + [row(score="incorrect_tool")]
    loaded = load_cases(write_jsonl(tmp_path / "d.jsonl", rows), skip_bad=True)
    assert loaded.rows == len(rows)
    assert [c.label for c in loaded.cases] == ["correct", "incorrect_tool"]
    assert [(b.row, b.field) for b in loaded.skipped] == [(i + 2, f) for i, (_, f, _) in enumerate(BAD_ROWS)]


def test_a_json_file_that_is_no_row_list_and_an_empty_folder_are_errors(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"rows": []}')
    with pytest.raises(DataError, match=r"x.json: expected a JSON list of rows"):
        load_cases(tmp_path / "x.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no .jsonl, .ndjson, .json, .parquet files"):
        load_cases(tmp_path / "empty")
    with pytest.raises(DataError, match="no such file or folder"):
        load_cases(tmp_path / "missing.jsonl")


def test_unlabelled_rows_load_when_labels_are_not_required(tmp_path: Path) -> None:
    r = {k: v for k, v in row().items() if k != "score"}
    (case,) = load_cases(write_jsonl(tmp_path / "d.jsonl", [r]), require_label=False).cases
    assert case.label is None


# ------------------------------------------------------------------------------------------------ hostile data


def test_rows_are_counted_by_the_rule_the_shards_read_them(tmp_path: Path) -> None:
    """'\\r'-separated rows and a line holding only U+00A0: count and shards agree with load_cases."""
    from mcpfleet.runner.toolcalls.shards import count_cases, load_shard, shard_count

    cr = tmp_path / "cr.jsonl"
    cr.write_bytes("\r".join(json.dumps(row(id=f"r{i}")) for i in range(5)).encode() + b"\r")
    nbsp = tmp_path / "nbsp.jsonl"
    nbsp.write_bytes(
        b"\n".join([json.dumps(row(id="a")).encode(), "\u00a0".encode(), json.dumps(row(id="b")).encode()])
    )
    for path, n in ((cr, 5), (nbsp, 2)):
        assert count_cases(path) == len(load_cases(path).cases) == n
        shards = [load_shard(path, s, 2) for s in range(shard_count(count_cases(path), 2))]
        assert all(shards) and sum(len(s) for s in shards) == n


def test_repeated_case_ids_are_refused_naming_the_id_and_rows(tmp_path: Path) -> None:
    from mcpfleet.runner.spec.task import TaskError
    from mcpfleet.runner.tasks.toolcall_pack import make_task
    from mcpfleet.runner.toolcalls.shards import count_cases, load_shard

    data = write_jsonl(tmp_path / "dup.jsonl", [row(id="x1"), row(id="x2"), row(id="x1")])
    with pytest.raises(DataError, match=r"case id 'x1' appears in 2 rows .*dup.jsonl:1, .*dup.jsonl:3"):
        load_cases(data)
    with pytest.raises(DataError, match=r"case id 'x1'"):
        count_cases(data)  # the plan
    with pytest.raises(DataError, match=r"case id 'x1'"):
        load_shard(data, 0, 10)
    with pytest.raises((DataError, TaskError), match=r"case id 'x1'"):
        make_task(tmp_path / "pack", data, "limbic", "dup")
    assert not (tmp_path / "pack" / "toolcall" / "standard" / "limbic" / "dup").exists()


def test_making_a_task_from_its_own_data_keeps_the_data(tmp_path: Path) -> None:
    from mcpfleet.runner.tasks.toolcall_pack import make_task

    task = tmp_path / "pack" / "toolcall" / "standard" / "limbic" / "s"
    task.mkdir(parents=True)
    data = write_jsonl(task / "cases.jsonl", [row(id="a"), row(id="b")])
    assert make_task(tmp_path / "pack", data, "limbic", "s") == task
    assert len(load_cases(task / "cases.jsonl").cases) == 2 and (task / "meta.json").exists()
    (tmp_path / "d").mkdir()
    write_jsonl(tmp_path / "d" / "x.jsonl", [row(id="a")])
    made = make_task(tmp_path / "pack", tmp_path / "d", "limbic", "s")
    assert len(load_cases(made / "cases").cases) == 1
    again = make_task(tmp_path / "pack", made / "cases", "limbic", "s")
    assert len(load_cases(again / "cases").cases) == 1


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b'{"x": "caf\xe9"}', "not valid UTF-8"),
        (b'{"n": ' + b"9" * 5000 + b"}", "digits"),
        (b"[" * 200000 + b"]" * 200000, "nested too deeply"),
    ],
)
def test_unreadable_rows_are_data_errors_naming_file_and_row(tmp_path: Path, bad: bytes, message: str) -> None:
    from mcpfleet.runner.toolcalls.shards import count_cases, load_shard

    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(row(id="ok")).encode() + b"\n" + bad + b"\n")
    with pytest.raises(DataError, match=rf"bad.jsonl: row 2: .*{message}"):
        load_cases(path)
    loaded = load_cases(path, skip_bad=True)
    assert [c.id for c in loaded.cases] == ["ok"] and len(loaded.skipped) == 1
    assert count_cases(path) == 2
    with pytest.raises(DataError, match=rf"bad.jsonl: row 2: .*{message}"):
        load_shard(path, 0, 10)


def test_a_tool_name_repeated_within_a_row_is_a_bad_row_naming_it(tmp_path: Path) -> None:
    """The checker and the gold rule would use the first definition only, and a strict provider refuses the
    request: a row with two tools of one name is refused, naming the second."""
    other = {"name": "read_file", "description": "Another.", "input_schema": {"type": "object", "properties": {}}}
    data = write_jsonl(tmp_path / "d.jsonl", [row(available_tools=[*TOOLS, other])])
    with pytest.raises(
        DataError,
        match=r"row 1: field 'available_tools\[1\]\.name': repeats tool 'read_file' \(also at available_tools\[0\]\)",
    ):
        load_cases(data)


CALL = {"type": "function", "function": {"name": "read_file", "arguments": {"path": "/tmp/a.txt"}}}


@pytest.mark.parametrize(
    ("history", "field", "message"),
    [
        ([{"role": "tool", "content": "x"}], "message_history[1]", "answers no tool call"),
        (
            [{"role": "assistant", "content": "", "tool_calls": [CALL]}, {"role": "user", "content": "and?"}],
            "message_history[1]",
            "no tool result",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [{**CALL, "id": "c1"}]},
                {"role": "tool", "tool_call_id": "c9", "content": ""},
            ],
            "message_history[2]",
            "'c9'",
        ),
    ],
)
def test_a_history_that_is_no_valid_openai_conversation_is_a_bad_row(
    tmp_path: Path, history: list[dict[str, Any]], field: str, message: str
) -> None:
    """The model gets the history as an OpenAI conversation; one that cannot be made one is the data's fault,
    reported as a bad row, never sent (a provider's 400 would be scored against the model)."""
    data = write_jsonl(
        tmp_path / "d.jsonl", [row(message_history=[{"role": "user", "content": "hi"}, *history, *HISTORY[1:]])]
    )
    with pytest.raises(DataError, match=f"field '{re.escape(field)}'.*{message}"):
        load_cases(data)


def test_a_limbic_history_with_earlier_calls_loads_and_converts(tmp_path: Path) -> None:
    from mcpfleet.runner.toolcalls.loader import openai_history

    history = [
        {"role": "user", "content": "read a, then b"},
        {"role": "assistant", "content": "", "tool_calls": [CALL, {**CALL, "id": "call_mcpfleet_0"}]},
        {"role": "tool", "content": "A"},
        {"role": "tool", "tool_call_id": "call_mcpfleet_0", "content": "B"},
        *HISTORY[1:],
    ]
    (case,) = load_cases(write_jsonl(tmp_path / "d.jsonl", [row(message_history=history)])).cases
    wire = openai_history(case.history)
    ids = [c["id"] for c in wire[1]["tool_calls"]]
    assert len(set(ids)) == 2 and [m["tool_call_id"] for m in wire[2:]] == ids
    assert all(isinstance(c["function"]["arguments"], str) for c in wire[1]["tool_calls"])


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_bytes(b"\xef\xbb\xbf" + (json.dumps(row()) + "\n").encode())
    js = tmp_path / "d.json"
    js.write_bytes(b"\xef\xbb\xbf" + json.dumps([row()]).encode())
    assert len(load_cases(jsonl).cases) == 1 and len(load_cases(js).cases) == 1


@pytest.mark.parametrize("content", ["", "\n\n", "  \n\u00a0\n", "[]"])
def test_data_without_a_case_is_refused_by_toolcalls_task_and_the_checks(tmp_path: Path, content: str) -> None:
    """Before: `toolcalls task` wrote a 0-case task, `validate` and `tasks validate` took it, and its one planned
    shard ended as infra_error, retried on every try."""
    from mcpfleet.runner.tasks.checks import check_task
    from mcpfleet.runner.tasks.discovery import discover
    from mcpfleet.runner.tasks.toolcall_pack import make_task
    from mcpfleet.runner.toolcalls.shards import count_cases

    data = tmp_path / ("empty.json" if content == "[]" else "empty.jsonl")
    data.write_text(content)
    with pytest.raises(DataError, match=r"empty.jsonl?: no rows .*needs at least one case"):
        make_task(tmp_path / "pack", data, "limbic", "t0")
    assert not (tmp_path / "pack").exists()
    with pytest.raises(DataError, match="no rows"):
        count_cases(data)  # the plan: `validate` and `run` refuse it (services/toolcall.py: shards)
    good = write_jsonl(tmp_path / "one.jsonl", [row(id="a")])
    made = make_task(tmp_path / "pack", good, "limbic", "t0")
    (made / "cases.jsonl").unlink()  # emptied after it was made
    (made / f"cases{data.suffix}").write_text(content)
    [task] = discover(tmp_path / "pack")
    assert [p for p in check_task(task) if "no rows" in p], check_task(task)  # `tasks validate`


@pytest.mark.parametrize(
    ("difficulty", "category", "name", "said"),
    [
        ("states", "limbic", "ok", "a difficulty folder named 'states' holds initial states"),
        ("standard", "limbic", "n" * 65, "has 65 characters; rename it to at most 64"),
        ("standard", "limbic", "n" * 160, "has 160 characters"),
        ("d" * 40, "c" * 60, "n" * 60, "the task id has 171 characters"),
        ("standard", "limbic", "__pycache__", "must match"),
    ],
)
def test_toolcalls_task_refuses_names_the_task_checks_would_refuse(
    tmp_path: Path, difficulty: str, category: str, name: str, said: str
) -> None:
    """Before: these were written, then skipped by `discover` (a `states` difficulty) or refused by the run (long
    names). The one rule (tasks.name_problems) now refuses them before anything is written."""
    from mcpfleet.runner.spec.task import TaskError
    from mcpfleet.runner.tasks.toolcall_pack import make_task

    data = write_jsonl(tmp_path / "d.jsonl", [row(id="a")])
    with pytest.raises(TaskError, match=re.escape(said)):
        make_task(tmp_path / "pack", data, category, name, difficulty)
    assert not (tmp_path / "pack").exists()


def test_toolcalls_task_names_pack_when_it_is_a_file(tmp_path: Path) -> None:
    """Before: `--pack <a file>` failed with "[Errno 20] Not a directory: '<file>/toolcall/standard/limbic'",
    naming neither the option nor the fix."""
    from mcpfleet.runner.spec.task import TaskError
    from mcpfleet.runner.tasks.toolcall_pack import make_task

    data = write_jsonl(tmp_path / "d.jsonl", [row(id="a")])
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(TaskError, match=re.escape(f"--pack {afile}: not a folder; give the task pack's root folder")):
        make_task(afile, data, "limbic", "t")
    assert afile.read_text() == "x"


def test_toolcalls_task_takes_names_at_the_limits(tmp_path: Path) -> None:
    from mcpfleet.runner.tasks.checks import check_selected
    from mcpfleet.runner.tasks.discovery import discover
    from mcpfleet.runner.tasks.toolcall_pack import make_task

    data = write_jsonl(tmp_path / "d.jsonl", [row(id="a")])
    made = make_task(tmp_path / "pack", data, "c" * 64, "n" * 64, "d" * 21)  # a task id of 160 characters
    assert len(made.relative_to(tmp_path / "pack").as_posix()) == 160
    [task] = discover(tmp_path / "pack")
    check_selected([task])
