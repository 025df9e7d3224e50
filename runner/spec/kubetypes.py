"""Kubernetes' own schemas for the pod fields ``spec.pod`` passes through unchanged (tolerations, affinity, ...).

One schema serves both checks: ``kube_schemas.json`` (vendored from kubernetes-validate's bundled Kubernetes
schemas by scripts/vendor_kube_schemas.py) is embedded in the generated CRD, so the API server checks an applied
EvalRun with it, and validates the same fields in ``parse_evalrun`` (``KubeSchema``), so ``mcpfleet validate``,
``mcpfleet pods`` and the operator refuse a bad toleration naming its field (``spec.pod.tolerations[0].effect``)
before any pod is created, where a refused pod would fail every trial of the run alike.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

SCHEMA_FILE = "kube_schemas.json"
ERROR_TYPE = "kube_schema"  # the pydantic error type; its ctx["where"] extends the field's path (spec.load)


@cache
def vendored() -> dict[str, Any]:
    return json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(v, definitions) for v in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _inline(definitions[node["$ref"].rsplit("/", 1)[-1]], definitions)
    return {k: _inline(v, definitions) for k, v in node.items()}


@cache
def _openapi(name: str, many: bool) -> dict[str, Any]:
    definitions = vendored()["definitions"]
    node = _inline(definitions[name], definitions)
    node.pop("nullable", None)  # a field of this type may be null (pydantic's Optional); an item or member not
    return {"type": "array", "items": node} if many else node


def openapi(name: str, many: bool = False) -> dict[str, Any]:
    """The structural (OpenAPI v3.0) schema of a Kubernetes type, references inlined; ``many``: a list of it."""
    return copy.deepcopy(_openapi(name, many))


def openapi_to_jsonschema(node: Any) -> Any:
    """OpenAPI v3.0 ``nullable: true`` -> JSON Schema ``type: [X, 'null']``, recursively.

    For checking documents against the CRD schema with ``jsonschema.Draft4Validator`` offline.
    """
    if isinstance(node, list):
        return [openapi_to_jsonschema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k != "nullable"}
    if "properties" in node:
        out["properties"] = {k: openapi_to_jsonschema(v) for k, v in node["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out[key] = openapi_to_jsonschema(node[key])
    if node.get("nullable") and "type" in node:
        out["type"] = [node["type"], "null"]
    return out


@cache
def _validator(name: str, many: bool) -> Any:
    import jsonschema  # here, not at import: most processes that read an EvalRun never set these fields

    return jsonschema.Draft4Validator(openapi_to_jsonschema(_openapi(name, many)))


def without_nulls(value: Any) -> Any:
    """``value`` with null members dropped: the API server takes ``effect: null`` as no effect, as pydantic does."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def _where(path: list[Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _explain(error: Any) -> tuple[str, str]:
    """(where below the field, what is wrong and what is allowed) for one jsonschema error."""
    path, kind, schema = list(error.absolute_path), error.validator, error.schema
    if kind == "enum":
        allowed = ", ".join(json.dumps(v) if v == "" else str(v) for v in error.validator_value)
        return _where(path), f"{json.dumps(error.instance)[:60]} is not allowed; give one of {allowed}"
    if kind == "required":
        missing = next((r for r in error.validator_value if r not in error.instance), "")
        return _where([*path, missing]), "required field is missing"
    if kind == "additionalProperties":
        extra = sorted(set(error.instance) - set(schema.get("properties", {})))
        allowed = ", ".join(sorted(schema.get("properties", {})))
        return _where([*path, extra[0] if extra else "?"]), f"unknown field; allowed fields: {allowed}"
    if kind == "type":
        wanted = error.validator_value
        wanted = next(t for t in wanted if t != "null") if isinstance(wanted, list) else wanted
        return _where(path), f"must be {'an' if wanted in ('object', 'array', 'integer') else 'a'} {wanted}, not " + (
            json.dumps(error.instance)[:60]
        )
    if kind in ("minimum", "maximum"):
        return _where(path), f"must be {'>=' if kind == 'minimum' else '<='} {error.validator_value}"
    return _where(path), error.message


def kube_problems(name: str, value: Any, many: bool = False) -> list[tuple[str, str]]:
    """What is wrong with ``value`` as a Kubernetes ``name`` (a list of them with ``many``), as (where, problem),
    in path order; empty when it is valid."""
    errors = _validator(name, many).iter_errors(without_nulls(value))
    found = sorted((_explain(e) for e in errors), key=lambda wp: wp[0])
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class KubeSchema:
    """A field holding a Kubernetes type as plain JSON: checked against that type's schema, and its JSON schema
    (hence the CRD's) that type's. ``Annotated[list[dict[str, Any]], KubeSchema("io.k8s.api.core.v1.Toleration",
    many=True)]``."""

    name: str
    many: bool = False

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def check(self, value: Any) -> Any:
        problems = kube_problems(self.name, value, self.many)
        if problems:
            where, problem = problems[0]
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise PydanticCustomError(
                ERROR_TYPE,
                "{where}: {problem}",
                {"where": where, "problem": f"{problem} (a Kubernetes {self.short}){more}"},
            )
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return openapi(self.name, self.many)
