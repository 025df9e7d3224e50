"""The deterministic checker: one call against the available tools' JSON schemas, every error reported.

Classification (the card's order: tool, then names, then values):

- the tool name is not among the available tools -> ``incorrect_tool``;
- the arguments are not a JSON object, a required top-level parameter is missing, or a top-level name is
  unknown -> ``incorrect_parameter_names``;
- any other schema violation (types, enums, formats, ranges, patterns, and anything inside a parameter's
  value, including nested objects' missing or unknown keys) -> ``incorrect_parameter_values``;
- otherwise ``schema_valid``: the checker cannot see whether the values are the ones the user asked for.

Unknown names: JSON Schema allows undeclared properties unless told otherwise, but a tool call naming a
parameter the tool does not declare is a wrong name. So an unknown top-level name counts unless the schema
itself opens the object (``additionalProperties``, ``patternProperties`` or ``unevaluatedProperties`` set):
the checker validates against the schema plus ``unevaluatedProperties: false`` (Draft 2019-09 and later) or
``additionalProperties: false`` (older drafts, when no composition keyword could hide the properties).

Validators come from the ``jsonschema`` library (Draft 2020-12 unless the schema names its ``$schema``), with
format checking on, and are built once per distinct schema (an LRU cache keyed by the schema's canonical
JSON, which each Tool computes once). For speed each tool gets one validator for the top level (with every
``properties`` subschema replaced by ``true``) and one per declared parameter (``evolve``d from the full
schema's validator, so ``$ref`` resolves as before): the same keywords run on the same values, but the
library's per-property descent, which builds a validator and a referencing resource each time, happens once
at build time instead of on every call.

Every regular expression the schema applies to the call runs through the ``regex`` package with a time limit
(``PATTERN_SECONDS``) instead of ``re``: ``pattern`` (also under ``propertyNames``, which applies it to each
argument name), and the ``patternProperties`` regexes, which ``patternProperties``, ``additionalProperties`` and
``unevaluatedProperties`` match against argument names. A regex with catastrophic backtracking (``^(a|aa)+$``
against a long value or name) would otherwise hold the shard's event loop for minutes, out of reach of its
deadline. jsonschema calls ``re.search`` for the name-matching keywords from three of its modules; while the
checker validates (and only then: other users of jsonschema in the process are untouched), those calls go to
the time-limited search. A regex that runs out of time makes the call ``unchecked``, like any schema the
checker cannot apply; so does a schema that nests or recurses too deeply to compile or apply. (The ``regex``
format only compiles the value, it matches nothing.)

``null`` for an optional parameter: a declared, not required top-level parameter given as ``null`` is treated
as left out when its own schema does not allow ``null`` (many models send ``null`` for "not given"): gold.py's
rule, so a call is never right by one and wrong by the other for that alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
import regex
from jsonschema import Draft7Validator, Draft201909Validator, Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from mcpfleet.runner.toolcalls import iri
from mcpfleet.runner.toolcalls.models import SCHEMA_VALID, Reason, Tool, ToolCall, Verdict

TOOL, NAMES, VALUES = "incorrect_tool", "incorrect_parameter_names", "incorrect_parameter_values"
_RANK = {TOOL: 0, NAMES: 1, VALUES: 2}
#: Keywords about which names an object has: at the top level they mean wrong parameter names.
NAME_KEYWORDS = frozenset(
    {
        "required",
        "additionalProperties",
        "unevaluatedProperties",
        "dependentRequired",
        "dependencies",
        "propertyNames",
        "minProperties",
        "maxProperties",
    }
)
_OPENING_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")
_COMPOSITION = ("allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas")
_BRANCHING = frozenset({"anyOf", "oneOf"})


PATTERN_SECONDS = 1.0  # one regex match against one argument value or name


class UncheckableSchema(Exception):
    """The tool's own input schema is not a valid JSON schema."""


class SlowPattern(Exception):
    """A schema's regex did not finish matching within PATTERN_SECONDS."""


def _search(pattern: str, text: str, what: str = "value") -> Any:
    """``regex.search`` with the time limit; SlowPattern when it runs out."""
    try:
        return regex.search(pattern, text, timeout=PATTERN_SECONDS)
    except TimeoutError:
        raise SlowPattern(
            f"the pattern {pattern!r} took over {PATTERN_SECONDS:g} s on a {len(text)}-character {what}"
        ) from None


_GUARDING: ContextVar[bool] = ContextVar("mcpfleet_checker_guarding", default=False)


class _GuardedRe:
    """Stands in for ``re`` in the jsonschema modules that match ``patternProperties`` against names: the
    stdlib's ``re`` unless the checker is validating, then the time-limited search."""

    def search(self, pattern: Any, string: Any, flags: int = 0) -> Any:
        if _GUARDING.get() and isinstance(pattern, str) and isinstance(string, str) and not flags:
            return _search(pattern, string, "name")
        return re.search(pattern, string, flags)

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)


_REGEX_MODULES = (jsonschema._keywords, jsonschema._utils, jsonschema._legacy_keywords)
for _module in _REGEX_MODULES:
    if getattr(_module, "re", None) is re:
        setattr(_module, "re", _GuardedRe())  # noqa: B010 - replacing a module attribute of the library


@contextmanager
def _guarding() -> Iterator[None]:
    token = _GUARDING.set(True)
    try:
        yield
    finally:
        _GUARDING.reset(token)


def _pattern(validator: Validator, pattern: str, instance: Any, schema: Any) -> Iterable[ValidationError]:
    """jsonschema's ``pattern`` keyword (same message), time-limited."""
    if not validator.is_type(instance, "string"):
        return
    if _search(pattern, instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _guarded(cls: type[Validator]) -> type[Validator]:
    """The draft's validator class with the time-limited ``pattern``."""
    if "pattern" not in cls.VALIDATORS:
        return cls
    return validators.extend(cls, {"pattern": _pattern})


def strict_schema(schema: dict[str, Any], cls: type[Validator]) -> dict[str, Any]:
    """The schema with unknown top-level names forbidden, unless it already says what extra names may be. A
    ``type`` listing ``"object"`` among others (``["object", "null"]``) is an object schema too."""
    kind = schema.get("type", "object")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    if any(k in schema for k in _OPENING_KEYWORDS) or not is_object:
        return schema
    if not any(k in schema for k in _COMPOSITION):
        return {**schema, "additionalProperties": False}  # cheaper than unevaluatedProperties
    if "unevaluatedProperties" in cls.VALIDATORS:
        return {**schema, "unevaluatedProperties": False}  # sees properties declared in subschemas
    return schema  # older drafts: additionalProperties cannot see properties declared in subschemas


@dataclass(frozen=True, slots=True)
class Compiled:
    """A tool's validators: ``top`` checks everything but the declared parameters' values, ``params`` those;
    ``null_means_absent``: the optional parameters whose schema does not allow ``null`` (dropped when null)."""

    top: Validator
    params: dict[str, Validator]
    null_means_absent: frozenset[str] = frozenset()


_IRI_DRAFTS = (Draft7Validator, Draft201909Validator, Draft202012Validator)  # the drafts that define the formats


@cache
def format_checker(cls: type[Validator]) -> FormatChecker:
    """The draft's format checker, with ``iri`` and ``iri-reference`` (iri.py) in the drafts that define them."""
    base = cls.FORMAT_CHECKER
    if cls not in _IRI_DRAFTS:
        return base
    checker = FormatChecker(formats=())
    checker.checkers = dict(base.checkers)
    for name, check in (("iri", iri.is_iri), ("iri-reference", iri.is_iri_reference)):
        checker.checkers.setdefault(name, (check, ()))
    return checker


@lru_cache(maxsize=4096)
def compiled(key: str) -> Compiled:
    """The validators for one schema (canonical JSON), built once; raises UncheckableSchema (also for a schema
    nested too deeply to compile: jsonschema recurses once per level)."""
    try:
        with _guarding():
            return _compile(key)
    except RecursionError:
        raise UncheckableSchema("the input schema nests too deeply") from None


def _null_means_absent(full: Validator, schema: dict[str, Any], props: Any) -> frozenset[str]:
    """Declared parameters that are not required and whose own schema rejects ``null``."""
    if not isinstance(props, dict):
        return frozenset()
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    out = set()
    for name, sub in props.items():
        if name in required:
            continue
        try:
            if not full.evolve(schema=sub).is_valid(None):
                out.add(name)
        except (Unresolvable, SlowPattern, RecursionError):  # decided when the call is checked
            continue
    return frozenset(out)


def _compile(key: str) -> Compiled:
    schema = json.loads(key)
    if not isinstance(schema, dict):
        raise UncheckableSchema(f"the input schema is a {type(schema).__name__}, not an object")
    draft = validators.validator_for(schema, default=Draft202012Validator)
    cls, formats = _guarded(draft), format_checker(draft)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise UncheckableSchema(f"the input schema is invalid: {exc.message}") from None
    strict = strict_schema(schema, cls)
    full = cls(strict, format_checker=formats)
    props = strict.get("properties")
    nulls = _null_means_absent(full, strict, props)
    # Before 2019-09 a $ref beside "properties" makes the validator ignore them: keep the library's behaviour.
    if not isinstance(props, dict) or ("$ref" in strict and "unevaluatedProperties" not in cls.VALIDATORS):
        return Compiled(full, {}, nulls)
    top = cls({**strict, "properties": dict.fromkeys(props, True)}, format_checker=formats)
    return Compiled(top, {name: full.evolve(schema=sub) for name, sub in props.items()}, nulls)


def json_path(parts: Iterable[Any]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def error_kind(error: ValidationError) -> str:
    """NAMES for a top-level problem with which names are present (or no object at all), else VALUES.

    A top-level anyOf/oneOf failure is classified by its most relevant branch error.
    """
    if error.absolute_path:
        return VALUES
    if error.validator in NAME_KEYWORDS or error.validator == "type":
        return NAMES
    if error.validator in _BRANCHING and error.context:
        inner = best_match(error.context)
        if inner is not None:
            return error_kind(inner)
    return VALUES


def _reason(error: ValidationError) -> Reason:
    return Reason(error_kind(error), json_path(error.absolute_path), error.message, str(error.validator))


def _reasons(check: Compiled, arguments: Any) -> list[Reason]:
    reasons = [_reason(e) for e in check.top.iter_errors(arguments)]
    if check.params and isinstance(arguments, dict):
        params = check.params
        for name, value in arguments.items():
            param = params.get(name)
            if param is not None:
                for e in param.iter_errors(value):
                    reasons.append(Reason(VALUES, json_path((name, *e.absolute_path)), e.message, str(e.validator)))
    return reasons


def check_arguments(tool: Tool, arguments: Any) -> Verdict:
    """Validate arguments against one tool's schema; every error becomes a Reason."""
    try:
        check = compiled(tool.key)
    except UncheckableSchema as exc:
        return Verdict(SCHEMA_VALID, "checker", (Reason("unchecked", "$", f"tool '{tool.name}': {exc}"),))
    if check.null_means_absent and isinstance(arguments, dict):
        drop = check.null_means_absent
        arguments = {k: v for k, v in arguments.items() if v is not None or k not in drop}
    try:
        with _guarding():
            reasons = _reasons(check, arguments)
    except Unresolvable as exc:  # a $ref the schema cannot resolve (jsonschema wraps it; both derive from this)
        problem = f"the input schema has an unresolvable $ref: {exc}"
        return Verdict(SCHEMA_VALID, "checker", (Reason("unchecked", "$", f"tool '{tool.name}': {problem}"),))
    except SlowPattern as exc:
        return Verdict(SCHEMA_VALID, "checker", (Reason("unchecked", "$", f"tool '{tool.name}': {exc}"),))
    except RecursionError:  # a $ref cycle that never consumes input, or a schema or value nested too deeply
        problem = "the input schema recurses without end or nests too deeply"
        return Verdict(SCHEMA_VALID, "checker", (Reason("unchecked", "$", f"tool '{tool.name}': {problem}"),))
    if not reasons:
        return Verdict(SCHEMA_VALID, "checker")
    reasons.sort(key=lambda r: (_RANK[r.kind], r.path))
    return Verdict(reasons[0].kind, "checker", tuple(reasons))


def classify_call(tools: Sequence[Tool], call: ToolCall) -> Verdict:
    """Classify one call: ``incorrect_tool``, ``incorrect_parameter_names``, ``incorrect_parameter_values`` or
    ``schema_valid``; the verdict lists every reason found."""
    for tool in tools:
        if tool.name == call.name:
            return check_arguments(tool, call.arguments)
    names = ", ".join(t.name for t in tools) or "(none)"
    return Verdict(TOOL, "checker", (Reason(TOOL, "$", f"tool '{call.name}' is not available; tools: {names}"),))
