"""Build a labelled limbic-format set the way the card describes the original: real MCP server schemas (plus
hand-written ones), user requests, correct calls, and calls made wrong on purpose for each class.

Deterministic: case ``i`` of seed ``s`` is drawn from its own ``random.Random(f"{s}:{i}")``, so the first 200
cases of any larger set are the same 200 cases (the test fixture is such a prefix).

Classes and how their calls are made wrong (``mutation`` in each row):
- ``incorrect_tool``: ``wrong_existing_tool`` (another available tool, with arguments valid for it) or
  ``hallucinated_tool`` (a plausible name that is not available);
- ``incorrect_parameter_names``: ``misspelt_name``, ``missing_required``, ``unknown_name``;
- ``incorrect_parameter_values``: ``wrong_type``, ``out_of_range``, ``bad_enum``, ``bad_format``,
  ``bad_pattern``, ``nested_missing_key`` (schema violations) and ``off_intent`` (a valid value that is not
  the one the user asked for: a schema check cannot see it).
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcpfleet.runner.toolcalls.catalog import SLOT_REF, Scenario, Server, ToolSpec, load_catalog
from mcpfleet.runner.toolcalls.models import Case, Label, Tool, ToolCall
from mcpfleet.runner.toolcalls.mutations import NAME_MUTATIONS, VALUE_MUTATIONS, Maker, Mutated, show
from mcpfleet.runner.toolcalls.slots import Slot, draw

#: Label mix of a generated set: correct calls and each kind of wrong call.
LABEL_WEIGHTS: dict[Label, float] = {
    "correct": 0.35,
    "incorrect_tool": 0.2,
    "incorrect_parameter_names": 0.2,
    "incorrect_parameter_values": 0.25,
}
MUTATION_WEIGHTS = {"wrong_type": 0.5}
OFF_INTENT_SHARE = 0.4  # of incorrect_parameter_values: the rest violate the schema
EXISTING_TOOL_SHARE = 0.65  # of incorrect_tool: the rest call a tool that does not exist
FILESYSTEM_SHARE = 0.3  # cases on the real filesystem server; the rest on the hand-written servers
SYSTEM_PROMPTS = (
    "You are a helpful assistant. Use the available tools when they help.",
    "You are an operations assistant with access to MCP tools. Call exactly one tool per step.",
    "You help users get things done. Prefer tools over guessing.",
)
PREAMBLES = ("", "", "", "Sure, let me do that.", "On it.", "I'll take care of that now.")
VERB_SWAPS = {
    "get": "fetch",
    "list": "get_all",
    "create": "add",
    "delete": "remove",
    "read": "open",
    "send": "post",
    "search": "find",
    "update": "set",
    "run": "execute",
    "book": "reserve",
    "lookup": "resolve",
    "find": "search",
    "move": "rename",
    "write": "save",
    "take": "capture",
    "merge": "accept",
    "log": "record",
    "track": "log",
    "insert": "add",
    "describe": "inspect",
    "convert": "exchange",
    "refund": "reverse",
    "reply": "respond",
    "ping": "check",
    "block": "ban",
    "scale": "resize",
    "edit": "modify",
    "directory": "folder",
}


@dataclass
class Drawn:
    """One scenario with its slot values: the request and the correct arguments."""

    spec: ToolSpec
    scenario: Scenario
    slots: dict[str, Slot]
    request: str

    def arguments(self, slots: dict[str, Slot] | None = None) -> Any:
        return render(self.scenario.args, slots or self.slots)


def _ref_value(slots: dict[str, Slot], name: str, attr: str | None) -> Any:
    value = slots[name].value
    return value[attr] if attr else value


def render(template: Any, slots: dict[str, Slot]) -> Any:
    """Argument template -> value: ``"{s}"``/``"{s.attr}"`` alone is the slot's value, else text substitution."""
    if isinstance(template, str):
        m = SLOT_REF.fullmatch(template)
        if m:
            return copy.deepcopy(_ref_value(slots, m.group(1), m.group(2)))
        return SLOT_REF.sub(lambda m: str(_ref_value(slots, m.group(1), m.group(2))), template)
    if isinstance(template, dict):
        return {k: render(v, slots) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, slots) for v in template]
    return template


def request_text(template: str, slots: dict[str, Slot]) -> str:
    def sub(m: re.Match[str]) -> str:
        slot = slots[m.group(1)]
        return str(slot.value[m.group(2)]) if m.group(2) else slot.text

    return SLOT_REF.sub(sub, template)


def draw_slots(rng: random.Random, kinds: dict[str, str], keep: dict[str, Slot] | None = None) -> dict[str, Slot]:
    """Draw every slot in order; two slots of one kind get different values (no flight from LIS to LIS)."""
    out: dict[str, Slot] = {}
    for name, kind in kinds.items():
        if keep and name in keep:
            out[name] = keep[name]
            continue
        slot = draw(kind, rng, out)
        for _ in range(10):
            if all(slot.value != out[o].value for o, k in kinds.items() if o in out and k == kind):
                break
            slot = draw(kind, rng, out)
        out[name] = slot
    return out


def draw_scenario(rng: random.Random, spec: ToolSpec) -> Drawn:
    scenario = rng.choice(spec.scenarios)
    slots = draw_slots(rng, scenario.slots)
    return Drawn(spec, scenario, slots, request_text(rng.choice(scenario.requests), slots))


# ------------------------------------------------------------------------------------------------ wrong calls


def changed_paths(a: Any, b: Any, path: tuple[str | int, ...] = ()) -> list[str]:
    """Where two argument values differ (paths as ``x.y[0]``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in dict.fromkeys([*a, *b]) for p in changed_paths(a.get(k), b.get(k), (*path, k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in changed_paths(x, y, (*path, i))]
    return [] if a == b else [show(path)]


def off_intent(rng: random.Random, drawn: Drawn, args: Any) -> Mutated | None:
    """Redraw one slot the request and the arguments share: schema-valid, but not what the user asked."""
    in_args = {m.group(1) for m in SLOT_REF.finditer(str(drawn.scenario.args))}
    in_request = {m.group(1) for r in drawn.scenario.requests for m in SLOT_REF.finditer(r)}
    names = sorted(in_args & in_request)
    rng.shuffle(names)
    for name in names:
        kind = drawn.scenario.slots[name]
        for _ in range(10):
            new = draw(kind, rng, drawn.slots)
            if new.value != drawn.slots[name].value:
                changed = drawn.arguments({**drawn.slots, name: new})
                where = changed_paths(args, changed)
                if where:
                    asked, sent = drawn.slots[name].text, new.text
                    reason = f"'{where[0]}' is {sent} but the user asked for {asked}."
                    return Mutated(changed, reason, "off_intent")
    return None


def wrong_existing_tool(rng: random.Random, drawn: Drawn, tools: list[ToolSpec]) -> tuple[str, Mutated] | None:
    """Another tool of the same server, with arguments valid for it (slots shared by name and kind reused)."""
    spec = drawn.spec
    others = [t for t in tools if t.server == spec.server and t.tool.name != spec.tool.name]
    others = [t for t in others if t.tool.name not in spec.equivalent]
    if not others:
        return None
    other = rng.choice(others)
    scenario = rng.choice(other.scenarios)
    keep = {n: s for n, s in drawn.slots.items() if scenario.slots.get(n) == drawn.scenario.slots.get(n)}
    args = render(scenario.args, draw_slots(rng, scenario.slots, keep))
    reason = f"The request needs '{spec.tool.name}', but the call uses '{other.tool.name}'."
    return other.tool.name, Mutated(args, reason, "wrong_existing_tool")


def hallucinated_name(rng: random.Random, name: str, server: str, taken: set[str]) -> str:
    words = name.split("_")
    options = [
        "_".join(VERB_SWAPS.get(w, w) for w in words),
        words[0] + "".join(w.title() for w in words[1:]),
        f"{server}_{name}",
        f"{name}_v2",
        "_".join(words[:-1]) if len(words) > 2 else f"{name}s",
    ]
    options = [o for o in options if o and o not in taken]
    return rng.choice(options) if options else f"{name}_tool"


# ------------------------------------------------------------------------------------------------ cases


def _tools_shown(rng: random.Random, servers: tuple[Server, ...], server: Server) -> list[Tool]:
    """The case's server, sometimes with a second server's tools beside it, in a shuffled order."""
    tools = list(server.tools)
    if rng.random() < 0.3:
        other = rng.choice([s for s in servers if s is not server])
        tools += other.tools
    rng.shuffle(tools)
    return tools


def _history(rng: random.Random, request: str) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    if rng.random() < 0.25:
        history.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    if rng.random() < 0.1:
        history += [
            {"role": "user", "content": "Hi! I need a hand with something."},
            {"role": "assistant", "content": "Of course. What would you like me to do?"},
        ]
    history.append({"role": "user", "content": request})
    return history


def _wrong(
    rng: random.Random, label: Label, drawn: Drawn, args: Any, specs: list[ToolSpec], taken: set[str]
) -> tuple[str, Mutated] | None:
    """(tool name called, mutated arguments) for a wrong label, or None when this scenario cannot host it."""
    name, schema = drawn.spec.tool.name, drawn.spec.tool.input_schema
    if label == "incorrect_tool":
        if rng.random() < EXISTING_TOOL_SHARE:
            return wrong_existing_tool(rng, drawn, specs)
        fake = hallucinated_name(rng, name, drawn.spec.server, taken)
        return fake, Mutated(
            args, f"'{fake}' is not an available tool; the request needs '{name}'.", "hallucinated_tool"
        )
    makers: tuple[Maker, ...]
    if label == "incorrect_parameter_names":
        makers = NAME_MUTATIONS
    elif rng.random() < OFF_INTENT_SHARE:
        mutated = off_intent(rng, drawn, args)
        return (name, mutated) if mutated else None
    else:
        makers = VALUE_MUTATIONS
    # Every kind of mistake the schema has room for can be drawn; a wrong type fits almost anywhere, so it is
    # drawn at half the weight to leave room for the rarer kinds.
    possible = [m for m in (make(rng, args, schema) for make in makers) if m is not None]
    if not possible:
        return None
    weights = [MUTATION_WEIGHTS.get(m.mutation, 1.0) for m in possible]
    return name, rng.choices(possible, weights=weights)[0]


def generate_case(seed: int, i: int) -> Case:
    """Case ``i`` of the set for ``seed``."""
    rng = random.Random(f"{seed}:{i}")
    servers = load_catalog()
    label: Label = rng.choices(list(LABEL_WEIGHTS), weights=list(LABEL_WEIGHTS.values()))[0]
    for _ in range(100):
        server = servers[0] if rng.random() < FILESYSTEM_SHARE else rng.choice(servers[1:])
        drawn = draw_scenario(rng, rng.choice(server.specs))
        tools = _tools_shown(rng, servers, server)
        args = drawn.arguments()
        if label == "correct":
            called, mutated = drawn.spec.tool.name, Mutated(args, "", "")
            break
        shown = {t.name for t in tools}
        specs = [t for s in servers for t in s.specs if t.tool.name in shown]
        wrong = _wrong(rng, label, drawn, args, specs, shown)
        if wrong is not None:
            called, mutated = wrong
            break
    else:  # pragma: no cover - the catalog always has hosts for every class
        raise RuntimeError(f"no scenario could host a {label} case (seed {seed}, case {i})")
    call = ToolCall(name=called, arguments=mutated.arguments, id=f"call_{i:05d}")
    return Case(
        id=f"gen{seed}-{i:05d}",
        tools=tools,
        history=_history(rng, drawn.request),
        call=call,
        call_content=rng.choice(PREAMBLES) or None,
        label=label,
        failure_reason=mutated.reason or None,
        mutation=mutated.mutation or None,
    )


def generate(n: int, seed: int = 0) -> Iterator[Case]:
    for i in range(n):
        yield generate_case(seed, i)
