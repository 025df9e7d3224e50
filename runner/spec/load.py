"""An EvalRun read from YAML or a decoded document: every bad field named with its fix, and the spec's hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from mcpfleet.runner.spec.checks import QUANTITY
from mcpfleet.runner.spec.evalrun import DNS_LABEL, KIND, EvalRun
from mcpfleet.runner.spec.kubetypes import ERROR_TYPE as KUBE_ERROR
from mcpfleet.runner.spec.placement import CLASS_NAME


class SpecError(ValueError):
    """An invalid EvalRun, with one human line per problem: '<field path>: <what is allowed>'."""

    def __init__(self, problems: list[str], source: str | None = None):
        self.problems = problems
        self.source = source
        head = f"invalid EvalRun{f' in {source}' if source else ''}:"
        super().__init__("\n".join([head, *(f"  {p}" for p in problems)]))


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]" or str(part).startswith(("function-", "literal[")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "(root)"


def _allowed_fields(model: type[BaseModel]) -> str:
    return ", ".join(sorted(f.alias or n for n, f in model.model_fields.items()))


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """Walk the pydantic model tree along a location to find the object an unknown field sits in."""
    model: Any = EvalRun
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        field = fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        cand = [a for a in (ann, *args) if isinstance(a, type) and issubclass(a, BaseModel)]
        if not cand:
            return None
        model = cand[0]
    return model


def _explain(err: ErrorDetails) -> str:
    kind, ctx, msg = err["type"], err.get("ctx") or {}, err["msg"]
    if kind == "extra_forbidden":
        model = _model_at(err["loc"])
        field = model.model_fields.get(str(err["loc"][-1])) if model else None
        if field is not None and field.alias and field.alias != err["loc"][-1]:
            # A field's own name is taken as well as its camelCase alias, so it is unknown only beside the alias.
            return f"given twice, as {field.alias} and {err['loc'][-1]}; keep one"
        allowed = f"; allowed fields: {_allowed_fields(model)}" if model else ""
        return f"unknown field{allowed}"
    if kind == "missing":
        return "required field is missing"
    table = {
        "greater_than_equal": "must be >= {ge}",
        "greater_than": "must be > {gt}",
        "less_than_equal": "must be <= {le}",
        "less_than": "must be < {lt}",
        "finite_number": "must be a finite number (not .nan or .inf)",
        "too_short": "must have at least {min_length} item(s)",
        "too_long": "must have at most {max_length} item(s)",
        "string_too_short": "must not be empty",
        "string_too_long": "must be at most {max_length} characters",
        "string_pattern_mismatch": "must match {pattern}",
        "literal_error": "must be {expected}",
        "enum": "must be one of {expected}",
    }
    if kind in table:
        try:
            text = table[kind].format(**ctx)
        except KeyError:
            text = msg
        if kind == "string_pattern_mismatch" and ctx.get("pattern") == DNS_LABEL:
            text = "must be a DNS label: lowercase letters, digits and '-', starting and ending alphanumeric"
        elif kind == "string_pattern_mismatch" and ctx.get("pattern") == CLASS_NAME:
            text = "must be a DNS subdomain: lowercase letters, digits, '-' and '.', starting and ending alphanumeric"
        elif kind == "string_pattern_mismatch" and ctx.get("pattern") == QUANTITY:
            text = "must be a Kubernetes quantity, e.g. 500m, 2, 1Gi (no sign, no other suffix)"
        return text
    if kind == "value_error":
        return str(ctx.get("error", msg)).removeprefix("Value error, ")
    if kind == KUBE_ERROR:
        return str(ctx["problem"])
    strict = {
        "int_type": "a whole number",
        "float_type": "a number",
        "bool_type": "true or false",
        "string_type": "text",
    }
    if kind in strict:  # strict, as the CRD's schema: say what was given, since YAML decides its type
        given = json.dumps(err.get("input"), default=str)
        if kind == "string_type":
            hint = " (quote it in YAML)"
        else:
            hint = " (quoted in YAML, so it is text: remove the quotes)" if isinstance(err.get("input"), str) else ""
        return f"must be {strict[kind]}, not {given[:60]}{hint}"
    return msg[0].lower() + msg[1:] if msg else kind


def format_validation_error(exc: ValidationError) -> list[str]:
    return [f"{_path(e['loc'])}{_below(e)}: {_explain(e)}" for e in exc.errors()]


def _below(err: ErrorDetails) -> str:
    """Where inside a Kubernetes-typed field the problem is (``[0].effect`` of ``spec.pod.tolerations``)."""
    return str((err.get("ctx") or {}).get("where", "")) if err["type"] == KUBE_ERROR else ""


MAX_SPEC_BYTES = 256 * 1024  # a spec is a few KiB; the API server's own object limit is ~1.5 MiB
MAX_ANNOTATION_BYTES = 256 * 1024  # the API server's limit for all of an object's annotations together


def _size_problems(data: dict[str, Any]) -> list[str]:
    """Refuse a spec or annotations too large to be an EvalRun (a document expanded from YAML aliases, or an
    annotation stuffed with data): they would be copied into run.json, status and every trial pod."""
    from mcpfleet.runner.spec.yamlload import YAMLLimitError, expanded_nodes

    problems = []
    try:
        expanded_nodes(data)
    except YAMLLimitError as exc:
        return [f"(root): refused: {exc}"]
    try:
        spec_size = len(json.dumps(data.get("spec"), default=str))
    except (ValueError, OverflowError):  # an int of more than 4,300 digits cannot be written as text
        return ["(root): refused: a number with more than 4,300 digits; no field takes one"]
    if spec_size > MAX_SPEC_BYTES:
        problems.append(f"spec: {spec_size:,} bytes as JSON; at most {MAX_SPEC_BYTES:,} are allowed")
    meta = data.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict):
        size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
        if size > MAX_ANNOTATION_BYTES:
            problems.append(
                f"metadata.annotations: {size:,} bytes in all; at most {MAX_ANNOTATION_BYTES:,} are allowed"
            )
    return problems


def parse_evalrun(data: Any, source: str | None = None) -> EvalRun:
    """Validate a decoded EvalRun document; raise SpecError naming every bad field."""
    if not isinstance(data, dict):
        raise SpecError(["(root): must be a mapping with apiVersion, kind, metadata and spec"], source)
    if problems := _size_problems(data):
        raise SpecError(problems, source)
    try:
        # Strict, as the API server's schema is: `attempts: true`, `attempts: "3"` or `suspend: "yes"` is refused
        # by kubectl apply, so it is refused here too instead of running 1 attempt. JSON mode: enums are their
        # values; anything YAML decodes beyond JSON (an unquoted date) arrives as its text, as kubectl sends it.
        text = json.dumps(data, default=str)
    except (ValueError, OverflowError):  # an int of more than 4,300 digits (in metadata: spec was sized above)
        raise SpecError(["(root): refused: a number with more than 4,300 digits; no field takes one"], source) from None
    try:
        return EvalRun.model_validate_json(text, strict=True)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc), source) from None


def load_evalrun(path: str | Path) -> EvalRun:
    from mcpfleet.runner.spec.yamlload import YAMLLimitError, load_file

    path = Path(path)
    try:
        docs = load_file(path)
    except yaml.YAMLError as exc:
        raise SpecError([f"(file): not valid YAML: {exc}"], str(path)) from None
    except YAMLLimitError as exc:
        raise SpecError([f"(file): refused: {exc}"], str(path)) from None
    except UnicodeDecodeError:
        raise SpecError(["(file): not UTF-8 text; an EvalRun is a YAML file"], str(path)) from None
    except OSError as exc:
        raise SpecError([f"(file): cannot read: {exc.strerror}"], str(path)) from None
    runs = [d for d in docs if isinstance(d, dict) and d.get("kind") == KIND]
    if len(runs) != 1:
        raise SpecError([f"(file): expected exactly one document of kind EvalRun, found {len(runs)}"], str(path))
    return parse_evalrun(runs[0], str(path))


def canonical_hash(obj: Any, length: int = 16) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


def spec_hash(run: EvalRun) -> str:
    """Hash of what the run measures; concurrency, retries, output, suspend and deadlines do not change it."""
    return canonical_hash(run.spec.results_view())
