"""Element references in oracle steps: ``{"$ref": {"role": ..., "name": ...}}`` -> the ref of the LATEST snapshot.

@playwright/mcp names page elements by refs (``[ref=e23]``) that change with every snapshot, so an oracle
written in advance cannot hold them. A step's argument may instead be ``{"$ref": {"role": "button", "name":
"Sign in", "within": "row \\"Order #100842\\"", "nth": 0}}`` (or ``name_re``: a regex), replaced just before
the call by the ref of the matching element in the last tool result of the conversation that holds a page
snapshot. ``inside: {"role": "row", "has": "#100842"}`` picks an element in the ancestor of that role whose
subtree shows that text (table rows have no accessible name, so ``within`` cannot tell them apart).
The direct oracle agent (agent/loop.py) and the scripted model (launch/scripted_policies.py) both resolve here.

Snapshot lines are YAML as the pinned server writes them: ``<indent>- <key>[: value]`` where the key is
``role "name" [attr]... [ref=eN]``, single-quoted (``''`` for ``'``) when YAML needs it, the name a JSON string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

REF_KEY = "$ref"
SELECTOR_KEYS = {"role", "name", "name_re", "within", "inside", "nth"}
_SNAPSHOT = re.compile(r"### Snapshot\n```yaml\n(.*?)\n```", re.S)
_ROLE = re.compile(r"[A-Za-z]+")
_REF = re.compile(r"\[ref=([^\]\s]+)\]")
_ATTRS = re.compile(r"(?:\s*\[[^\]]*\])*")
_JSON_STRING = json.JSONDecoder()


class RefError(ValueError):
    """No element (or no snapshot) matches a step's ``$ref``: the oracle cannot go on."""


@dataclass(frozen=True)
class Element:
    role: str
    name: str
    ref: str | None
    line: str  # the decoded line: key, then ": value" if any
    ancestors: tuple[int, ...]  # indexes of every ancestor, outermost first
    end: int  # index after its last descendant


def snapshot_of(text: str) -> str | None:
    """The YAML of the last page snapshot inside one tool result's text, or None."""
    found = _SNAPSHOT.findall(text)
    return found[-1] if found else None


def latest_snapshot(results: Iterable[str]) -> str | None:
    """The snapshot in the last of these tool results (oldest first) that holds one."""
    latest = None
    for text in results:
        snap = snapshot_of(text)
        if snap is not None:
            latest = snap
    return latest


def _decode_line(body: str) -> str:
    """A sequence item without its ``- `` as plain text: a single-quoted YAML key is unquoted."""
    if not body.startswith("'"):
        return body
    i, out = 1, []
    while i < len(body):
        if body[i] == "'":
            if body[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out) + body[i + 1 :]
        out.append(body[i])
        i += 1
    return "".join(out)


def _parse_key(line: str) -> tuple[str, str, str | None]:
    """(role, name, ref) of a decoded line; name is '' when the element has none."""
    m = _ROLE.match(line)
    role = m.group(0) if m else ""
    rest = line[len(role) :]
    name = ""
    if rest.startswith(' "'):
        try:
            name, end = _JSON_STRING.raw_decode(rest, 1)
        except ValueError:
            end = 1
        rest = rest[end:]
    attrs = _ATTRS.match(rest)
    ref = _REF.search(attrs.group(0)) if attrs else None
    return role, name, ref.group(1) if ref else None


def parse_snapshot(yaml_text: str) -> list[Element]:
    """Every item line of a snapshot (elements, ``/url`` and text lines), with its ancestors by indentation."""
    items: list[tuple[int, str, tuple[int, ...]]] = []
    stack: list[tuple[int, int]] = []  # (indent, index) of the open ancestors
    for raw in yaml_text.splitlines():
        stripped = raw.lstrip(" ")
        if not stripped.startswith("- "):
            continue
        indent = len(raw) - len(stripped)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        items.append((indent, _decode_line(stripped[2:]), tuple(i for _, i in stack)))
        stack.append((indent, len(items) - 1))
    out = []
    for i, (indent, line, ancestors) in enumerate(items):
        end = i + 1
        while end < len(items) and items[end][0] > indent:
            end += 1
        out.append(Element(*_parse_key(line), line, ancestors, end))
    return out


def _inside(elements: list[Element], e: Element, scope: dict[str, Any]) -> bool:
    """Whether an ancestor of ``e`` has role ``scope["role"]`` and ``scope["has"]`` on a line of its subtree."""
    for a in e.ancestors:
        anc = elements[a]
        if anc.role == scope.get("role") and any(scope.get("has", "") in x.line for x in elements[a : anc.end]):
            return True
    return False


def _describe(selector: dict[str, Any]) -> str:
    return json.dumps({REF_KEY: selector}, ensure_ascii=False)


def find_ref(snapshot: str, selector: dict[str, Any]) -> str:
    """The ref of the ``nth`` element matching ``selector`` in ``snapshot``; RefError if there is none."""
    unknown = set(selector) - SELECTOR_KEYS
    if unknown or not isinstance(selector.get("role"), str):
        raise RefError(f"bad selector {_describe(selector)}: needs 'role'; allowed keys {sorted(SELECTOR_KEYS)}")
    pattern = re.compile(selector["name_re"]) if "name_re" in selector else None
    within, inside = selector.get("within"), selector.get("inside")
    if inside is not None and (not isinstance(inside, dict) or set(inside) != {"role", "has"}):
        raise RefError(f'bad selector {_describe(selector)}: \'inside\' takes {{"role": ..., "has": ...}}')
    elements = parse_snapshot(snapshot)
    matches = [
        e
        for e in elements
        if e.ref is not None
        and e.role == selector["role"]
        and ("name" not in selector or e.name == selector["name"])
        and (pattern is None or pattern.search(e.name) is not None)
        and (within is None or any(within in elements[a].line for a in e.ancestors))
        and (inside is None or _inside(elements, e, inside))
    ]
    nth = int(selector.get("nth", 0))
    if nth >= len(matches):
        raise RefError(f"no element matches {_describe(selector)} ({len(matches)} match(es) in the latest snapshot)")
    return str(matches[nth].ref)


def has_refs(value: Any) -> bool:
    if isinstance(value, dict):
        return REF_KEY in value or any(has_refs(v) for v in value.values())
    if isinstance(value, list):
        return any(has_refs(v) for v in value)
    return False


def resolve(value: Any, snapshot: str | None) -> Any:
    """``value`` with every ``{"$ref": selector}`` object replaced by its ref in ``snapshot``."""
    if isinstance(value, dict):
        if set(value) == {REF_KEY}:
            selector = value[REF_KEY]
            if not isinstance(selector, dict):
                raise RefError(f"bad selector {_describe(selector)}: '$ref' takes an object")
            if snapshot is None:
                raise RefError(f"no page snapshot in the conversation yet to resolve {_describe(selector)}")
            return find_ref(snapshot, selector)
        return {k: resolve(v, snapshot) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, snapshot) for v in value]
    return value


def resolve_step(tool: str, index: int, arguments: dict[str, Any], results: Iterable[str]) -> dict[str, Any]:
    """A step's arguments with refs resolved against the latest snapshot among ``results`` (oldest first).
    RefError names the step."""
    if not has_refs(arguments):
        return arguments
    try:
        resolved: dict[str, Any] = resolve(arguments, latest_snapshot(results))
    except (RefError, re.error) as exc:
        raise RefError(f"oracle step {index} ({tool}): {exc}") from None
    return resolved
