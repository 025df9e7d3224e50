"""Element references in oracle steps, resolved against real snapshot text from the pinned @playwright/mcp 0.0.83
(tests/data/playwright/*.txt: browser_snapshot results captured from the bundled sites), in the resolver itself
and in both places an oracle runs: the direct oracle agent and the scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.runner.agent.loop import snapshot_refs as refs
from mcpfleet.runner.launch.scripted_options import Options
from mcpfleet.runner.launch.scripted_server import ScriptedModel

DATA = Path(__file__).parent / "data" / "playwright"
SEARCH = (DATA / "shop_search_lamp.txt").read_text()
ORDERS = (DATA / "admin_orders_processing.txt").read_text()
LOGIN = (DATA / "admin_login.txt").read_text()


def ref(text: str, **selector: Any) -> str:
    snap = refs.snapshot_of(text)
    assert snap is not None
    return refs.find_ref(snap, selector)


def test_snapshot_is_found_in_a_tool_result_and_the_latest_one_wins() -> None:
    assert refs.snapshot_of("### Page\n- Page URL: x\n### Snapshot\n- [Snapshot](out/page.yml)") is None
    assert refs.latest_snapshot([SEARCH, "### Result\nok", LOGIN, "no snapshot here"]) == refs.snapshot_of(LOGIN)
    assert refs.latest_snapshot(["nothing"]) is None


def test_role_and_exact_name() -> None:
    assert ref(LOGIN, role="textbox", name="Username") == "f1e12"
    assert ref(LOGIN, role="textbox", name="Password") == "f1e15"
    assert ref(LOGIN, role="button", name="Sign in") == "f1e17"
    with pytest.raises(refs.RefError, match=r'"name": "Sign"'):
        ref(LOGIN, role="button", name="Sign")  # exact, not a prefix


def test_yaml_quoted_keys_are_unquoted_before_matching() -> None:
    # The server writes `- 'option "Total: high to low"'` (YAML needs quotes around ': '); options carry no ref.
    snap = refs.snapshot_of(ORDERS)
    assert snap is not None and "'option \"Total: high to low\"'" in snap
    names = [e.name for e in refs.parse_snapshot(snap) if e.role == "option"]
    assert "Total: high to low" in names


def test_name_regex_and_nth() -> None:
    first = ref(SEARCH, role="link", name_re=r"Desk Lamp")
    second = ref(SEARCH, role="link", name_re=r"Desk Lamp", nth=1)
    assert first != second
    assert first == ref(SEARCH, role="link", name_re=r"^.*Desk Lamp", nth=0)


def test_within_an_ancestor_line() -> None:
    # "Search" is a searchbox in the banner and another in the filter form: `within` tells them apart.
    banner = ref(SEARCH, role="searchbox", name="Search products", within="banner")
    form = ref(SEARCH, role="searchbox", name="Search", within='form "Filter and sort products"')
    assert banner != form
    with pytest.raises(refs.RefError, match="0 match"):
        ref(SEARCH, role="searchbox", name="Search products", within='form "Filter and sort products"')


def test_inside_a_row_by_what_it_shows() -> None:
    # Rows have no accessible name; the link of order #100855 is found by the row that shows it.
    snap = refs.snapshot_of(ORDERS)
    assert snap is not None
    link = refs.find_ref(snap, {"role": "link", "name": "#100855", "inside": {"role": "row", "has": "#100855"}})
    by_name = refs.find_ref(snap, {"role": "link", "name": "#100855"})
    assert link == by_name
    # A cell in the row of a guest order; the same selector in a row that does not show it fails.
    cell = refs.find_ref(snap, {"role": "cell", "name": "Processing", "inside": {"role": "row", "has": "Niamh Brown"}})
    first_processing = refs.find_ref(snap, {"role": "cell", "name": "Processing"})
    assert cell != first_processing  # the first processing row is Adrian Patterson's
    with pytest.raises(refs.RefError):
        refs.find_ref(snap, {"role": "link", "name": "#100855", "inside": {"role": "row", "has": "#100859"}})


def test_resolve_replaces_every_ref_object_and_names_the_step() -> None:
    args = {
        "fields": [
            {"target": {"$ref": {"role": "textbox", "name": "Username"}}, "name": "Username", "value": "admin"},
            {"target": {"$ref": {"role": "textbox", "name": "Password"}}, "name": "Password", "value": "x"},
        ]
    }
    out = refs.resolve_step("browser_fill_form", 2, args, [SEARCH, LOGIN])
    assert [f["target"] for f in out["fields"]] == ["f1e12", "f1e15"]
    assert args["fields"][0]["target"] == {"$ref": {"role": "textbox", "name": "Username"}}  # not mutated
    plain = {"url": "http://shop.test/"}
    assert refs.resolve_step("browser_navigate", 0, plain, []) is plain
    with pytest.raises(refs.RefError, match=r"oracle step 3 \(browser_click\): no page snapshot"):
        refs.resolve_step("browser_click", 3, {"target": {"$ref": {"role": "button", "name": "Go"}}}, ["x"])
    with pytest.raises(refs.RefError, match=r"oracle step 4 \(browser_click\): no element matches .*Nope"):
        refs.resolve_step("browser_click", 4, {"target": {"$ref": {"role": "button", "name": "Nope"}}}, [LOGIN])
    with pytest.raises(refs.RefError, match="allowed keys"):
        refs.resolve_step("browser_click", 5, {"target": {"$ref": {"role": "button", "label": "x"}}}, [LOGIN])


def _tool_call_messages(task_description: str, results: list[str]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": task_description}]
    for i, text in enumerate(results):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "browser_snapshot", "arguments": "{}"}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": text})
    return msgs


def test_scripted_model_resolves_refs_from_the_conversation(tmp_path: Path) -> None:
    """The scripted oracle reads the snapshots in the request's messages (plain and MCPMark's JSON dump)."""
    task = tmp_path / "pack" / "playwright" / "standard" / "cat" / "login"
    task.mkdir(parents=True)
    (task / "description.md").write_text("Sign in to the admin.")
    (task / "verify.py").write_text("raise SystemExit(1)\n")
    meta = {"task_id": "login", "mcp": ["playwright"], "mcpfleet": {"sites": ["admin"]}}
    (task / "meta.json").write_text(json.dumps(meta))
    steps = [
        {"tool": "browser_navigate", "arguments": {"url": "http://admin.test/login"}},
        {"tool": "browser_snapshot", "arguments": {}},
        {"tool": "browser_click", "arguments": {"target": {"$ref": {"role": "button", "name": "Sign in"}}}},
    ]
    (task / "oracle.json").write_text(json.dumps({"steps": steps}))
    model = ScriptedModel([tmp_path / "pack"])
    opts = Options("oracle", None, 0.0, 0, 503)
    tools = [{"type": "function", "function": {"name": "browser_click"}}]

    def reply(results: list[str]) -> Any:
        return model.reply(opts, {"messages": _tool_call_messages("Sign in to the admin.", results), "tools": tools})

    assert reply([]).tool_calls == (("browser_navigate", '{"url": "http://admin.test/login"}'),)
    mcpmark_dump = json.dumps({"content": [{"type": "text", "text": LOGIN}], "isError": False})
    for snapshot_result in (LOGIN, mcpmark_dump):
        name, arguments = reply(["navigated", snapshot_result]).tool_calls[0]
        assert (name, json.loads(arguments)) == ("browser_click", {"target": "f1e17"})
    # The latest snapshot counts: one without a Sign in button makes the oracle say why it cannot go on.
    stuck = reply([LOGIN, SEARCH])  # the search page has a Sign in link, no button
    assert not stuck.tool_calls and "oracle step 2 (browser_click): no element matches" in (stuck.content or "")
