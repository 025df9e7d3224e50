"""Deliberate mistakes in a correct call's arguments, driven by the tool's schema: the generator's error makers.

Each maker takes the correct arguments and returns ``Mutated`` (new arguments, a failure reason) or None when
the schema offers no place for that mistake. They are written from the schema's declared constraints, never
by asking the checker, so the checker's score on the generated set is a real cross-check.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

PathT = tuple[str | int, ...]
#: A mistake maker: (rng, correct arguments, tool schema) -> the wrong arguments, or None if it has no room.
Maker = Callable[[random.Random, Any, dict[str, Any]], "Mutated | None"]

SYNONYMS = {
    "path": ("file_path", "filepath", "filename"),
    "paths": ("files", "file_paths"),
    "content": ("text", "contents", "data"),
    "source": ("src", "from_path"),
    "destination": ("dest", "target", "to_path"),
    "pattern": ("glob", "query"),
    "query": ("q", "search", "search_query"),
    "to": ("recipients", "to_addresses"),
    "body": ("message", "text"),
    "subject": ("title",),
    "title": ("name", "summary"),
    "location": ("city", "place"),
    "start": ("start_time", "begin"),
    "end": ("end_time", "finish"),
    "date": ("day", "on_date"),
    "attendees": ("participants", "invitees"),
    "owner": ("org", "organization"),
    "repo": ("repository", "repo_name"),
    "sql": ("query", "statement"),
    "table": ("table_name",),
    "url": ("link", "uri"),
    "host": ("hostname", "address"),
    "amount": ("value", "sum"),
    "city": ("location", "town"),
    "origin": ("from", "departure"),
    "destination_airport": ("to",),
    "task_id": ("id", "taskId"),
    "event_id": ("id", "eventId"),
    "message_id": ("id", "email_id"),
    "status": ("state",),
    "currency": ("currency_code",),
}
EXTRA_NAMES: tuple[tuple[str, Any], ...] = (
    ("recursive", True),
    ("encoding", "utf-8"),
    ("verbose", True),
    ("format", "json"),
    ("timezone", "UTC"),
    ("confirm", True),
    ("limit", 10),
    ("sort_order", "asc"),
    ("dry_run", False),
    ("user_id", "me"),
    ("include_metadata", True),
    ("overwrite", True),
)
ENUM_SLIPS = {
    "high": "urgent",
    "low": "minor",
    "metric": "celsius",
    "imperial": "fahrenheit",
    "done": "completed",
    "in_progress": "in progress",
    "blocked": "on_hold",
    "squash": "squash_merge",
    "rebase": "rebase_merge",
    "business": "business_class",
    "premium_economy": "premium",
    "size": "filesize",
    "week": "weekly",
    "month": "monthly",
    "day": "daily",
    "open": "opened",
    "closed": "merged",
    "strict": "high",
    "update": "upsert",
    "ignore": "skip",
    "fraudulent": "fraud",
    "duplicate": "duplicated",
    "requested_by_customer": "customer_request",
    "transit": "public_transport",
    "bicycling": "cycling",
    "walking": "on_foot",
    "failed": "declined",
    "refunded": "reversed",
    "revenue": "sales",
    "signups": "registrations",
    "active_users": "dau",
    "tolls": "toll_roads",
    "sent": "outbox",
    "archive": "archived",
}
_JSON_TYPES = {bool: "boolean", str: "string", list: "array", dict: "object", type(None): "null"}


@dataclass(frozen=True)
class Mutated:
    arguments: Any
    reason: str
    mutation: str


def json_type(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _JSON_TYPES.get(type(value), "unknown")
    return "integer" if isinstance(value, int) else "number"


def allowed_types(schema: dict[str, Any]) -> set[str] | None:
    t = schema.get("type")
    if t is None:
        return None
    types = {t} if isinstance(t, str) else set(t)
    if "number" in types:
        types.add("integer")
    return types


def resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    """Follow a local ``$ref`` (``#/$defs/x``); the generator's schemas use no other kind."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/"):
        node: Any = root
        for part in schema["$ref"][2:].split("/"):
            node = node[part]
        schema = node
    return schema if isinstance(schema, dict) else {}


def leaves(
    value: Any, schema: dict[str, Any], root: dict[str, Any], path: PathT = ()
) -> Iterator[tuple[PathT, Any, dict]]:
    """(path, value, subschema) for every value in the arguments that the schema describes, nested ones too."""
    schema = resolve(schema, root)
    if path:
        yield path, value, schema
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for k, v in value.items():
            if k in props:
                yield from leaves(v, props[k], root, (*path, k))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            yield from leaves(v, schema["items"], root, (*path, i))


def show(path: PathT) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(path))


def replaced(args: Any, path: PathT, new: Any) -> Any:
    out = copy.deepcopy(args)
    node = out
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = new
    return out


def _pick_leaf(rng: random.Random, args: Any, schema: dict[str, Any], test: Any) -> tuple[PathT, Any, dict] | None:
    found = [leaf for leaf in leaves(args, schema, schema) if test(leaf[1], leaf[2])]
    return rng.choice(found) if found else None


# ------------------------------------------------------------------------------------------------ values


def _other_type(rng: random.Random, value: Any, allowed: set[str]) -> Any | None:
    if isinstance(value, bool):
        options: list[Any] = ["true" if value else "false", "yes" if value else "no", int(value)]
    elif isinstance(value, int | float):
        options = [str(value), [value]]
    elif isinstance(value, str):
        options = [[value], {"name": value}] + ([int(value)] if value.isdigit() else [])
    elif isinstance(value, list):
        options = [", ".join(map(str, value))] if all(isinstance(v, str) for v in value) else []
        options += [value[0]] if len(value) == 1 else [json.dumps(value)]
    elif isinstance(value, dict):
        options = [json.dumps(value), list(value.values())]
    else:
        return None
    options = [o for o in options if json_type(o) not in allowed]
    return rng.choice(options) if options else None


def wrong_type(rng: random.Random, args: Any, schema: dict[str, Any]) -> Mutated | None:
    def ok(v: Any, s: dict) -> bool:
        types = allowed_types(s)
        return types is not None and "enum" not in s and _other_type(random.Random(0), v, types) is not None

    leaf = _pick_leaf(rng, args, schema, ok)
    if leaf is None:
        return None
    path, value, sub = leaf
    new = _other_type(rng, value, allowed_types(sub) or set())
    reason = f"'{show(path)}' must be of type {sub['type']}, but the call sends {json.dumps(new)}."
    return Mutated(replaced(args, path, new), reason, "wrong_type")


def _range_options(value: Any, s: dict) -> list[tuple[Any, str]]:
    out: list[tuple[Any, str]] = []
    integer = s.get("type") == "integer"
    if isinstance(value, int | float) and not isinstance(value, bool):
        step = 1 if integer else 0.5
        if "minimum" in s:
            out.append((s["minimum"] - step * (2 if value != s["minimum"] else 1), f"below the minimum {s['minimum']}"))
        if "maximum" in s:
            out.append((s["maximum"] + step * 3, f"above the maximum {s['maximum']}"))
        if "exclusiveMinimum" in s:
            out.append((s["exclusiveMinimum"], f"not above the exclusive minimum {s['exclusiveMinimum']}"))
        if "multipleOf" in s:
            bump = s["multipleOf"] / 2
            new = value + (int(bump) or 1) if integer else round(value + bump / 2, 3)
            out.append((new, f"not a multiple of {s['multipleOf']}"))
    elif isinstance(value, str):
        if s.get("minLength", 0) >= 1:
            out.append(("", f"shorter than the minimum length {s['minLength']}"))
        if "maxLength" in s:
            out.append(((value + " ") * (s["maxLength"] // max(1, len(value)) + 2), f"longer than {s['maxLength']}"))
    elif isinstance(value, list):
        if s.get("minItems", 0) >= 1:
            out.append(([], f"fewer items than the minimum {s['minItems']}"))
        if "maxItems" in s and value:
            out.append(((value * (s["maxItems"] // len(value) + 2))[: s["maxItems"] + 2], "more items than allowed"))
        if s.get("uniqueItems") and value:
            out.append(([*value, value[0]], "duplicate items where items must be unique"))
    return out


def out_of_range(rng: random.Random, args: Any, schema: dict[str, Any]) -> Mutated | None:
    leaf = _pick_leaf(rng, args, schema, lambda v, s: bool(_range_options(v, s)))
    if leaf is None:
        return None
    path, value, sub = leaf
    new, why = rng.choice(_range_options(value, sub))
    shown = json.dumps(new) if not isinstance(new, str) or len(new) < 40 else f"a {len(new)}-character string"
    return Mutated(replaced(args, path, new), f"'{show(path)}' is {shown}: {why}.", "out_of_range")


def _enum_slip(value: Any, enum: list[Any]) -> Any | None:
    if not isinstance(value, str):
        return None
    for candidate in (ENUM_SLIPS.get(value), value.capitalize() if value.islower() else value.lower(), value + "s"):
        if candidate and candidate not in enum:
            return candidate
    return None


def bad_enum(rng: random.Random, args: Any, schema: dict[str, Any]) -> Mutated | None:
    leaf = _pick_leaf(rng, args, schema, lambda v, s: "enum" in s and _enum_slip(v, s["enum"]) is not None)
    if leaf is None:
        return None
    path, value, sub = leaf
    new = _enum_slip(value, sub["enum"])
    reason = f"'{show(path)}' is '{new}', not one of {', '.join(map(str, sub['enum']))}."
    return Mutated(replaced(args, path, new), reason, "bad_enum")


def _format_slip(rng: random.Random, value: str, fmt: str) -> str | None:
    if fmt == "date" and len(value) == 10:
        y, m, d = value.split("-")
        return rng.choice((f"{m}/{d}/{y}", f"{d}.{m}.{y}", f"{y}-{m}-{d}T00:00:00", f"{y}{m}{d}"))
    if fmt == "date-time" and "T" in value:
        day, time = value.split("T")
        return rng.choice((day, f"{day} {time[:5]}", f"{day}T{time[:5]}", time[:5]))
    if fmt == "email" and "@" in value:
        user, _, domain = value.partition("@")
        return rng.choice((user.replace(".", " ").title(), f"{user} at {domain}", user))
    if fmt == "uri" and "://" in value:
        return value.split("://", 1)[1]
    if fmt == "uuid":
        return rng.choice((value[:8], value.replace("-", "")[:30], f"evt-{value[:6]}"))
    if fmt == "hostname":
        return rng.choice((f"https://{value}/", f"{value}:443", value.replace(".", "_")))
    if fmt == "ipv4":
        head = value.rsplit(".", 1)[0]
        return rng.choice((f"{head}.256", head, f"{value}/24"))
    return None


def bad_format(rng: random.Random, args: Any, schema: dict[str, Any]) -> Mutated | None:
    def ok(v: Any, s: dict) -> bool:
        return isinstance(v, str) and _format_slip(random.Random(0), v, s.get("format", "")) is not None

    leaf = _pick_leaf(rng, args, schema, ok)
    if leaf is None:
        return None
    path, value, sub = leaf
    new = _format_slip(rng, value, sub["format"])
    return Mutated(replaced(args, path, new), f"'{show(path)}' = '{new}' is not a valid {sub['format']}.", "bad_format")


def _pattern_slip(value: Any, pattern: str) -> str | None:
    if not isinstance(value, str):
        return None
    for candidate in (value.lower(), value.upper(), value.title(), value.replace("_", "-"), f"{value} ", f"#{value}"):
        if candidate != value and not re.search(pattern, candidate):
            return candidate
    return None


def bad_pattern(rng: random.Random, args: Any, schema: dict[str, Any]) -> Mutated | None:
    leaf = _pick_leaf(rng, args, schema, lambda v, s: "pattern" in s and _pattern_slip(v, s["pattern"]) is not None)
    if leaf is None:
        return None
    path, value, sub = leaf
    new = _pattern_slip(value, sub["pattern"])
    reason = f"'{show(path)}' = '{new}' does not match the required pattern {sub['pattern']}."
    return Mutated(replaced(args, path, new), reason, "bad_pattern")


def nested_missing_key(rng: random.Random, args: Any, schema: dict[str, Any]) -> Mutated | None:
    def ok(v: Any, s: dict) -> bool:
        return isinstance(v, dict) and any(k in v for k in s.get("required") or ())

    leaf = _pick_leaf(rng, args, schema, ok)
    if leaf is None:
        return None
    path, value, sub = leaf
    key = rng.choice([k for k in sub["required"] if k in value])
    new = {k: v for k, v in value.items() if k != key}
    return Mutated(replaced(args, path, new), f"'{show(path)}' lacks its required key '{key}'.", "nested_missing_key")


VALUE_MUTATIONS: tuple[Maker, ...] = (wrong_type, out_of_range, bad_enum, bad_format, bad_pattern, nested_missing_key)


# ------------------------------------------------------------------------------------------------ names


def _typos(name: str) -> list[str]:
    out = []
    if "_" in name:
        head, *rest = name.split("_")
        out.append(head + "".join(p.title() for p in rest))  # camelCase
    elif re.search(r"[a-z][A-Z]", name):
        out.append(re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower())  # snake_case
    if len(name) > 3:
        i = len(name) // 2
        out += [name[:i] + name[i + 1 :], name[:i] + name[i + 1] + name[i] + name[i + 2 :]]
    out.append(name[:-1] if name.endswith("s") else name + "s")
    return out


def open_object(schema: dict[str, Any]) -> bool:
    """Whether the schema itself allows undeclared top-level names (the checker's rule)."""
    if any(k in schema for k in ("patternProperties", "unevaluatedProperties")):
        return True
    return "additionalProperties" in schema and schema["additionalProperties"] is not False


def misspelt_name(rng: random.Random, args: Any, schema: dict[str, Any]) -> Mutated | None:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    keys = [k for k in args if not open_object(schema) or k in required]
    if not keys:
        return None
    key = rng.choice(keys)
    candidates = [c for c in (*SYNONYMS.get(key, ()), *_typos(key)) if c not in props and c not in args and c != key]
    if not candidates:
        return None
    new = rng.choice(candidates)
    out = {(new if k == key else k): v for k, v in args.items()}
    return Mutated(out, f"Parameter '{key}' is sent as '{new}'.", "misspelt_name")


def missing_required(rng: random.Random, args: Any, schema: dict[str, Any]) -> Mutated | None:
    keys = [k for k in schema.get("required") or () if k in args]
    if not keys:
        return None
    key = rng.choice(keys)
    return Mutated(
        {k: v for k, v in args.items() if k != key}, f"Required parameter '{key}' is missing.", "missing_required"
    )


def unknown_name(rng: random.Random, args: Any, schema: dict[str, Any]) -> Mutated | None:
    if open_object(schema):
        return None
    props = schema.get("properties") or {}
    options = [(k, v) for k, v in EXTRA_NAMES if k not in props]
    key, value = rng.choice(options)
    return Mutated({**args, key: value}, f"'{key}' is not a parameter of this tool.", "unknown_name")


NAME_MUTATIONS: tuple[Maker, ...] = (misspelt_name, missing_required, unknown_name)
