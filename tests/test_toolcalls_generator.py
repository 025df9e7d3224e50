"""The labelled-set generator: deterministic, realistic and consistent with its own labels.

The checked-in fixture tests/data/toolcalls_200.jsonl is ``mcpfleet toolcalls generate --n 200 --seed 0``;
regenerate it with that command (then copy toolcalls.jsonl) whenever the generator or its data change.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mcpfleet.runner.toolcalls import SCHEMA_VALID, ToolCall, classify_call
from mcpfleet.runner.toolcalls.catalog import load_catalog
from mcpfleet.runner.toolcalls.generator import LABEL_WEIGHTS, generate, generate_case
from mcpfleet.runner.toolcalls.models import LABELS

FIXTURE = Path(__file__).resolve().parent / "data" / "toolcalls_200.jsonl"
SCHEMA_MISTAKES = {
    "incorrect_parameter_names": {"misspelt_name", "missing_required", "unknown_name"},
    "incorrect_parameter_values": {
        "wrong_type",
        "out_of_range",
        "bad_enum",
        "bad_format",
        "bad_pattern",
        "nested_missing_key",
    },
}


@pytest.fixture(scope="module")
def cases() -> list:
    return list(generate(1200, seed=3))


def test_the_fixture_is_what_the_generator_makes_now() -> None:
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    assert rows == [c.to_row() for c in generate(200, seed=0)]


def test_cases_are_deterministic_and_independent_of_the_set_size() -> None:
    assert generate_case(5, 17).to_row() == generate_case(5, 17).to_row()
    assert [c.to_row() for c in generate(30, seed=5)][17] == generate_case(5, 17).to_row()
    assert generate_case(5, 17).to_row() != generate_case(6, 17).to_row()


def test_the_catalog_has_real_and_hand_written_servers_with_diverse_schemas() -> None:
    servers = load_catalog()
    assert servers[0].name == "filesystem" and len(servers[0].specs) == 14
    handwritten = [s.tool.input_schema for srv in servers[1:] for s in srv.specs]
    assert len(handwritten) >= 30
    text = json.dumps(handwritten)
    for feature in (
        '"enum"',
        '"format": "date"',
        '"format": "date-time"',
        '"format": "email"',
        '"format": "uri"',
        '"pattern"',
        '"minimum"',
        '"exclusiveMinimum"',
        '"multipleOf"',
        '"items"',
        '"$ref"',
        '"oneOf"',
        '"additionalProperties": true',
        '"additionalProperties": false',
        "draft-07",
    ):
        assert feature in text, feature


def test_every_class_and_kind_of_mistake_is_made_in_roughly_the_planned_mix(cases: list) -> None:
    labels = Counter(c.label for c in cases)
    assert set(labels) == set(LABELS)
    for label, weight in LABEL_WEIGHTS.items():
        assert abs(labels[label] / len(cases) - weight) < 0.05, (label, labels)
    made = {c.mutation for c in cases}
    expected = set().union(*SCHEMA_MISTAKES.values()) | {"off_intent", "wrong_existing_tool", "hallucinated_tool"}
    assert made - {None} == expected
    assert all((c.mutation is None) == (c.label == "correct") for c in cases)
    assert all(c.failure_reason for c in cases if c.label != "correct")


def test_cases_look_like_limbic_rows(cases: list) -> None:
    for c in cases:
        row = c.to_row()
        assert set(row) >= {"available_tools", "message_history", "score", "failure_reason"}
        assert row["message_history"][-2]["role"] == "user"
        call = row["message_history"][-1]["tool_calls"][0]["function"]
        assert isinstance(call["arguments"], dict) and call["name"] == c.call.name
        assert all("scenarios" not in t and "input_schema" in t for t in row["available_tools"])
    assert len({c.history[-1]["content"] for c in cases}) > 0.9 * len(cases)  # requests rarely repeat


def test_wrong_calls_are_wrong_the_way_their_label_says(cases: list) -> None:
    for c in cases:
        names = {t.name for t in c.tools}
        v = classify_call(c.tools, c.call)
        if c.mutation == "hallucinated_tool":
            assert c.call.name not in names and v.label == "incorrect_tool"
        elif c.mutation == "wrong_existing_tool":
            assert c.call.name in names and v.label == SCHEMA_VALID  # a schema cannot see it
            assert f"needs '{c.call.name}'" not in c.failure_reason
        elif c.mutation == "off_intent":
            assert v.label == SCHEMA_VALID and "but the user asked for" in c.failure_reason
        elif c.label in SCHEMA_MISTAKES:
            assert c.mutation in SCHEMA_MISTAKES[c.label] and v.label == c.label, (c.id, c.call, v.reasons)
        else:
            assert v.label == SCHEMA_VALID


def test_an_off_intent_call_differs_from_the_correct_one_only_in_a_requested_value() -> None:
    found = 0
    for i in range(400):
        case = generate_case(11, i)
        if case.mutation != "off_intent":
            continue
        found += 1
        param = (case.failure_reason or "").split("'")[1].split(".")[0].split("[")[0]
        assert param in case.call.arguments
        tool = next(t for t in case.tools if t.name == case.call.name)
        assert classify_call([tool], ToolCall(name=tool.name, arguments=case.call.arguments)).label == SCHEMA_VALID
    assert found >= 20
