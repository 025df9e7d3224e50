"""The schema checker: every class, every reason, formats, nested values, open and closed objects, drafts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.runner.toolcalls import SCHEMA_VALID, Tool, ToolCall, classify_call
from mcpfleet.runner.toolcalls.catalog import load_catalog
from mcpfleet.runner.toolcalls.checker import compiled
from mcpfleet.runner.toolcalls.generator import draw_scenario
from mcpfleet.runner.toolcalls.loader import load_cases

FIXTURE = Path(__file__).resolve().parent / "data" / "toolcalls_200.jsonl"
NAMES, VALUES, TOOL = "incorrect_parameter_names", "incorrect_parameter_values", "incorrect_tool"

EVENT = Tool(
    name="create_event",
    input_schema={
        "type": "object",
        "required": ["title", "start"],
        "properties": {
            "title": {"type": "string", "minLength": 1},
            "start": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "organiser": {"type": "string", "format": "email"},
            "link": {"type": "string", "format": "uri"},
            "id": {"type": "string", "format": "uuid"},
            "host": {"type": "string", "format": "hostname"},
            "ip": {"type": "string", "format": "ipv4"},
            "visibility": {"enum": ["public", "private"]},
            "reminder": {"type": "integer", "minimum": 0, "maximum": 60},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "guests": {
                "type": "array",
                "maxItems": 2,
                "items": {"type": "object", "required": ["email"], "properties": {"email": {"format": "email"}}},
            },
            "place": {"$ref": "#/$defs/place"},
        },
        "$defs": {"place": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}},
    },
)
OPEN = Tool(
    name="track",
    input_schema={
        "type": "object",
        "additionalProperties": True,
        "required": ["event"],
        "properties": {"event": {"type": "string"}},
    },
)
DRAFT7 = Tool(
    name="read",
    input_schema={
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "required": ["path"],
        "properties": {"path": {"type": "string"}, "head": {"type": "number"}},
    },
)
ONE_OF = Tool(
    name="lookup",
    input_schema={
        "type": "object",
        "properties": {"email": {"type": "string", "format": "email"}, "id": {"type": "string"}},
        "oneOf": [{"required": ["email"]}, {"required": ["id"]}],
    },
)
TOOLS = [EVENT, OPEN, DRAFT7, ONE_OF]
GOOD = {"title": "Sync", "start": "2026-03-05T10:00:00Z"}


def check(name: str, args: Any) -> tuple[str, list[tuple[str, str, str]]]:
    v = classify_call(TOOLS, ToolCall(name=name, arguments=args))
    assert v.source == "checker"
    return v.label, [(r.kind, r.path, r.keyword) for r in v.reasons]


def test_a_valid_call_is_schema_valid_with_no_reasons() -> None:
    full = {
        **GOOD,
        "day": "2026-03-05",
        "organiser": "a@example.com",
        "link": "https://example.com/x",
        "id": "5b6a9f1e-1c2d-4e3f-8a9b-0c1d2e3f4a5b",
        "host": "api.example.com",
        "ip": "10.0.0.1",
        "visibility": "private",
        "reminder": 15,
        "code": "LIS",
        "guests": [{"email": "b@example.com"}],
        "place": {"city": "Lisbon"},
    }
    assert check("create_event", full) == (SCHEMA_VALID, [])


def test_an_unknown_tool_is_incorrect_tool_and_names_the_available_ones() -> None:
    v = classify_call(TOOLS, ToolCall(name="create_meeting", arguments=GOOD))
    assert v.label == TOOL
    assert "create_meeting" in v.reasons[0].message and "create_event" in v.reasons[0].message


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"title": "Sync"}, [(NAMES, "$", "required")]),
        ({**GOOD, "titel": "x"}, [(NAMES, "$", "additionalProperties")]),
        ({"titel": "Sync", "start": GOOD["start"]}, [(NAMES, "$", "additionalProperties"), (NAMES, "$", "required")]),
        ([GOOD], [(NAMES, "$", "type")]),
        ("title=Sync", [(NAMES, "$", "type")]),
    ],
)
def test_missing_misspelt_or_unknown_names_and_non_objects_are_incorrect_names(
    args: Any, expected: list[tuple[str, str, str]]
) -> None:
    label, reasons = check("create_event", args)
    assert label == NAMES
    assert sorted(reasons) == sorted(expected)


@pytest.mark.parametrize(
    ("extra", "path", "keyword"),
    [
        ({"title": 42}, "$.title", "type"),
        ({"title": ""}, "$.title", "minLength"),
        ({"start": "2026-03-05 10:00"}, "$.start", "format"),
        ({"day": "03/05/2026"}, "$.day", "format"),
        ({"organiser": "Alice Smith"}, "$.organiser", "format"),
        ({"link": "example.com/x"}, "$.link", "format"),
        ({"id": "evt-123"}, "$.id", "format"),
        ({"host": "https://api.example.com/"}, "$.host", "format"),
        ({"ip": "10.0.0.256"}, "$.ip", "format"),
        ({"visibility": "secret"}, "$.visibility", "enum"),
        ({"reminder": 90}, "$.reminder", "maximum"),
        ({"reminder": "15"}, "$.reminder", "type"),
        ({"code": "lis"}, "$.code", "pattern"),
        ({"guests": [{"email": "a@x.io"}] * 3}, "$.guests", "maxItems"),
        ({"guests": [{"mail": "a@x.io"}]}, "$.guests[0]", "required"),
        ({"guests": [{"email": "nobody"}]}, "$.guests[0].email", "format"),
        ({"place": {"town": "Lisbon"}}, "$.place", "required"),
    ],
)
def test_schema_violations_of_values_are_incorrect_values_with_their_path(
    extra: dict[str, Any], path: str, keyword: str
) -> None:
    assert check("create_event", {**GOOD, **extra}) == (VALUES, [(VALUES, path, keyword)])


def test_every_reason_is_reported_and_names_outrank_values() -> None:
    args = {"title": 7, "start": "tomorrow", "reminder": -1, "colour": "red"}
    label, reasons = check("create_event", args)
    assert label == NAMES
    assert sorted(reasons) == sorted(
        [
            (NAMES, "$", "additionalProperties"),
            (VALUES, "$.title", "type"),
            (VALUES, "$.start", "format"),
            (VALUES, "$.reminder", "minimum"),
        ]
    )


def test_unknown_names_pass_when_the_schema_opens_the_object() -> None:
    assert check("track", {"event": "signup", "plan": "pro"}) == (SCHEMA_VALID, [])
    assert check("track", {"evnt": "signup"})[0] == NAMES  # the required name is still missing


def test_a_draft_7_schema_is_checked_with_draft_7_and_unknown_names_count() -> None:
    assert check("read", {"path": "/a", "head": 2.5}) == (SCHEMA_VALID, [])
    assert check("read", {"path": "/a", "lines": 3}) == (NAMES, [(NAMES, "$", "additionalProperties")])
    assert check("read", {"path": 3}) == (VALUES, [(VALUES, "$.path", "type")])


def test_a_top_level_one_of_is_classified_by_its_best_branch() -> None:
    assert check("lookup", {"email": "a@example.com"}) == (SCHEMA_VALID, [])
    assert check("lookup", {})[0] == NAMES  # neither alternative's required name
    assert check("lookup", {"email": "a@example.com", "mail": "x"})[0] == NAMES  # unevaluatedProperties
    assert check("lookup", {"email": "not-an-email"}) == (VALUES, [(VALUES, "$.email", "format")])


def test_an_invalid_tool_schema_is_reported_not_raised() -> None:
    broken = Tool(name="broken", input_schema={"type": "object", "properties": {"x": {"type": "strng"}}})
    v = classify_call([broken], ToolCall(name="broken", arguments={"x": 1}))
    assert v.label == SCHEMA_VALID
    assert v.reasons[0].kind == "unchecked" and "invalid" in v.reasons[0].message


def test_validators_are_built_once_per_distinct_schema() -> None:
    twin = Tool(name="create_event", description="same schema, another object", input_schema=EVENT.input_schema)
    compiled.cache_clear()
    for tool in (EVENT, twin, EVENT):
        classify_call([tool], ToolCall(name="create_event", arguments=GOOD))
    info = compiled.cache_info()
    assert (info.misses, info.hits) == (1, 2)


def test_every_correct_call_of_the_generator_catalog_is_schema_valid() -> None:
    import random

    rng = random.Random(7)
    for server in load_catalog():
        for spec in server.specs:
            for _ in range(20):
                drawn = draw_scenario(rng, spec)
                v = classify_call(server.tools, ToolCall(name=spec.tool.name, arguments=drawn.arguments()))
                assert v.label == SCHEMA_VALID, (spec.tool.name, drawn.arguments(), v.reasons)


def test_the_checker_on_the_fixture_catches_every_schema_mistake_and_no_intent_mistake() -> None:
    cases = load_cases(FIXTURE).cases
    unseen = {"off_intent", "wrong_existing_tool"}
    for case in cases:
        v = classify_call(case.tools, case.call)
        if case.label == "correct" or case.mutation in unseen:
            assert v.label == SCHEMA_VALID, (case.id, case.mutation, v.reasons)
        else:
            assert v.label == case.label, (case.id, case.mutation, json.dumps(case.call.arguments), v.reasons)
    assert {c.mutation for c in cases} >= unseen | {"hallucinated_tool", "missing_required", "wrong_type"}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}},
        {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}},
        {"$ref": "#/$defs/nope"},
    ],
)
def test_an_unresolvable_ref_is_an_uncheckable_schema_not_an_exception(schema: dict[str, Any]) -> None:
    verdict = classify_call([Tool(name="f", input_schema=schema)], ToolCall(name="f", arguments={"a": 1}))
    assert verdict.label == SCHEMA_VALID
    assert [r.kind for r in verdict.reasons] == ["unchecked"] and "$ref" in verdict.reasons[0].message


def test_a_catastrophic_pattern_is_cut_off_as_unchecked_and_other_patterns_still_decide() -> None:
    """``^(a|aa)+$`` against 40 a's and a b backtracks for hours under ``re``; the shard's event loop would be
    held out of reach of its deadline. The checker gives up after PATTERN_SECONDS and says so."""
    import time

    from mcpfleet.runner.toolcalls import checker

    slow = Tool(
        name="tag",
        input_schema={"type": "object", "properties": {"label": {"type": "string", "pattern": "^(a|aa)+$"}}},
    )
    start = time.perf_counter()
    verdict = classify_call([slow], ToolCall(name="tag", arguments={"label": "a" * 40 + "b"}))
    assert time.perf_counter() - start < checker.PATTERN_SECONDS + 2
    assert verdict.label == SCHEMA_VALID
    assert [r.kind for r in verdict.reasons] == ["unchecked"] and "pattern" in verdict.reasons[0].message
    # the same schema still decides values it can match in time, with jsonschema's own message
    assert classify_call([slow], ToolCall(name="tag", arguments={"label": "aaaa"})).label == SCHEMA_VALID
    wrong = classify_call([slow], ToolCall(name="tag", arguments={"label": "ab"}))
    assert wrong.label == VALUES and wrong.reasons[0].keyword == "pattern"
    assert wrong.reasons[0].message == "'ab' does not match '^(a|aa)+$'"
    assert check("create_event", {**GOOD, "code": "abc"})[1] == [(VALUES, "$.code", "pattern")]
    assert check("create_event", {**GOOD, "code": "ABC"})[0] == SCHEMA_VALID


def _iri_tool(draft: str | None) -> Tool:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"page": {"type": "string", "format": "iri"}, "ref": {"format": "iri-reference"}},
    }
    return Tool(name="cite", input_schema=schema | ({"$schema": draft} if draft else {}))


@pytest.mark.parametrize("draft", [None, "http://json-schema.org/draft-07/schema#"])
@pytest.mark.parametrize(
    ("args", "ok"),
    [
        ({"page": "https://de.wikipedia.org/wiki/Köln"}, True),
        ({"page": "http://例え.テスト/パス?q=値#節"}, True),
        ({"page": "urn:isbn:0451450523", "ref": "../Straße/plan.pdf#seite=2"}, True),
        ({"page": "http://example.com/?\ue000private-use-in-query"}, True),
        ({"ref": "//example.com/%C3%A9t%C3%A9"}, True),
        ({"page": "http://[::1]:8080/x", "ref": "/emoji/\U0001f600"}, True),  # rfc3987-syntax refused both
        ({"page": "/wiki/Köln"}, False),  # a reference, not an IRI: no scheme
        ({"page": "https://example.com/a b"}, False),  # a space
        ({"page": "https://example.com/%zz"}, False),  # not a percent-encoding
        ({"page": "https://example.com/\ue000"}, False),  # private use outside the query
        ({"page": "https://example.com/\ufffe"}, False),  # a non-character, in no ucschar range
        ({"page": "https://example.com/x\n"}, False),  # the pattern's "$" allows a final newline: we do not
        ({"ref": "https://exa mple.com/"}, False),
        ({"ref": "a:b:[c]"}, False),  # "[" outside a host
    ],
)
def test_iri_formats_are_checked_without_rfc3987_syntax(draft: str | None, args: dict[str, Any], ok: bool) -> None:
    verdict = classify_call([_iri_tool(draft)], ToolCall(name="cite", arguments=args))
    assert (verdict.label == SCHEMA_VALID) is ok, verdict.reasons
    if not ok:
        assert {(r.kind, r.keyword) for r in verdict.reasons} == {(VALUES, "format")}


def test_older_drafts_have_no_iri_format_to_check() -> None:
    """Draft 4 does not define "iri": an unknown format is an annotation, as the library treats it."""
    tool = _iri_tool("http://json-schema.org/draft-04/schema#")
    assert classify_call([tool], ToolCall(name="cite", arguments={"page": "a b"})).label == SCHEMA_VALID


def test_importing_the_engine_does_not_compile_lark_grammars() -> None:
    """rfc3987-syntax, if installed, makes every `import jsonschema` (LiteLLM's included) compile 38 Lark grammars:
    2.5 s of CPU in each trial pod, worker forkserver and CLI process. It is not a dependency any more."""
    import subprocess
    import sys

    probe = (
        "import sys, mcpfleet.runner.trial.engine, jsonschema\n"
        "print(sorted(m for m in ('lark', 'rfc3987_syntax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd="/", capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _slow_name_schemas() -> list[dict[str, Any]]:
    slow = "^(a|aa)+$"
    return [
        {"type": "object", "patternProperties": {slow: {"type": "string"}}},
        {"type": "object", "properties": {"p": {}}, "patternProperties": {slow: {}}, "additionalProperties": False},
        {"type": "object", "properties": {"p": {}}, "allOf": [{"patternProperties": {slow: {}}}]},  # unevaluated
        {"type": "object", "propertyNames": {"pattern": slow}},
        {"$schema": "https://json-schema.org/draft/2019-09/schema", "allOf": [{"patternProperties": {slow: {}}}]},
        {"$schema": "http://json-schema.org/draft-04/schema#", "patternProperties": {slow: {}}},
    ]


@pytest.mark.parametrize("schema", _slow_name_schemas())
def test_a_catastrophic_regex_matched_against_argument_names_is_cut_off_as_unchecked(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """patternProperties (and additionalProperties / unevaluatedProperties beside it, and propertyNames'
    pattern) match the model's argument *names*: those regexes get the time limit of ``pattern`` too. The limit
    is made short here so the test is quick; the name is long enough that the time-limited search runs out."""
    from mcpfleet.runner.toolcalls import checker

    monkeypatch.setattr(checker, "PATTERN_SECONDS", 0.02)
    verdict = classify_call([Tool(name="t", input_schema=schema)], ToolCall(name="t", arguments={"a" * 34 + "b": "x"}))
    assert verdict.label == SCHEMA_VALID
    assert [r.kind for r in verdict.reasons] == ["unchecked"], verdict.reasons
    assert "took over" in verdict.reasons[0].message
    # names the regex decides in time are still checked as before
    ok = classify_call([Tool(name="t", input_schema=schema)], ToolCall(name="t", arguments={"aaaa": "x"}))
    assert "unchecked" not in [r.kind for r in ok.reasons]


def test_name_regexes_are_not_run_by_re_and_outside_the_checker_jsonschema_is_unchanged() -> None:
    """``^(a+)+$`` backtracks for minutes under ``re`` on 34 a's and a b (the reviewer's repro): the checker's
    search answers at once; jsonschema used elsewhere in the process still runs the stdlib's ``re``."""
    import re
    import time

    import jsonschema

    schema = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}}, "additionalProperties": False}
    start = time.perf_counter()
    verdict = classify_call([Tool(name="t", input_schema=schema)], ToolCall(name="t", arguments={"a" * 34 + "b": 1}))
    assert time.perf_counter() - start < 5
    assert verdict.label == NAMES and verdict.reasons[0].keyword == "additionalProperties"
    stand_in = getattr(jsonschema._utils, "re")  # noqa: B009 - the checker's stand-in for the stdlib's re
    assert stand_in is not re and stand_in.search("^a+$", "aaa") is not None  # delegates to re outside checks
    assert stand_in.compile is re.compile
    errors = list(
        jsonschema.Draft202012Validator({"patternProperties": {"^x": {"type": "string"}}}).iter_errors({"xy": 1})
    )
    assert [e.validator for e in errors] == ["type"]


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


@pytest.mark.parametrize("levels", [120, 400])
def test_a_schema_nested_too_deeply_to_compile_is_unchecked_not_a_recursion_error(levels: int) -> None:
    verdict = classify_call([Tool(name="t", input_schema=_deep(levels))], ToolCall(name="t", arguments={"x": {}}))
    assert verdict.label == SCHEMA_VALID
    assert [r.kind for r in verdict.reasons] == ["unchecked"] and "too deeply" in verdict.reasons[0].message


@pytest.mark.parametrize("kind", [["object"], ["object", "null"], ["null", "object"]])
def test_a_type_list_holding_object_still_detects_unknown_names(kind: list[str]) -> None:
    schema = {"type": kind, "properties": {"path": {"type": "string"}}}
    verdict = classify_call(
        [Tool(name="t", input_schema=schema)], ToolCall(name="t", arguments={"path": "/a", "pathh": "/b"})
    )
    assert verdict.label == NAMES and verdict.reasons[0].keyword == "additionalProperties"
    assert (
        classify_call([Tool(name="t", input_schema=schema)], ToolCall(name="t", arguments={"path": "/a"})).label
        == SCHEMA_VALID
    )


NULLS = Tool(
    name="ls",
    input_schema={
        "type": "object",
        "required": ["path"],
        "properties": {
            "path": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1},
            "cursor": {"type": ["string", "null"]},
            "depth": {"type": "integer", "enum": [1, 2]},
        },
    },
)


def test_null_for_an_optional_parameter_is_left_out_as_the_gold_rule_says() -> None:
    """gold.py treats an optional parameter given as null as left out; the checker agrees, so the same call is
    not correct for one case and a wrong value for another."""
    from mcpfleet.runner.toolcalls.gold import MATCH, compare

    given = ToolCall(name="ls", arguments={"path": "/data", "limit": None, "depth": None})
    assert classify_call([NULLS], given).label == SCHEMA_VALID
    assert compare([NULLS], ToolCall(name="ls", arguments={"path": "/data"}), given).kind == MATCH
    # a null the schema allows is a value like any other; one it does not allow for a required name is wrong
    assert classify_call([NULLS], ToolCall(name="ls", arguments={"path": "/d", "cursor": None})).label == SCHEMA_VALID
    required = classify_call([NULLS], ToolCall(name="ls", arguments={"path": None}))
    assert required.label == VALUES and required.reasons[0].path == "$.path"
    # an undeclared name is still an unknown name, null or not
    assert classify_call([NULLS], ToolCall(name="ls", arguments={"path": "/d", "limt": None})).label == NAMES
