"""Compare a model's call with a gold call: same tool, same parameter names, values equal after normalisation.

Normalisation forgives what does not change the call's meaning and nothing else: key order, whitespace around
strings, Unicode composition (NFC), 1 vs 1.0, an optional parameter left out vs given as null, and an optional
parameter left out vs given its schema default. Types are not coerced ("5" is not 5) and list order counts.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from typing import Any

from mcpfleet.runner.toolcalls.models import Tool, ToolCall

MATCH = "match"
TOOL, NAMES, VALUES = "incorrect_tool", "incorrect_parameter_names", "incorrect_parameter_values"


@dataclass(frozen=True)
class GoldDiff:
    """How a call differs from the gold call: ``kind`` is MATCH or one of the three incorrect classes."""

    kind: str
    detail: str = ""

    @property
    def matches(self) -> bool:
        return self.kind == MATCH


def normalise(value: Any) -> Any:
    """A JSON value in canonical form (see the module docstring); objects lose their null members."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        return value
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value.strip())
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, dict):
        return {str(k): normalise(v) for k, v in value.items() if v is not None}
    return value


def arguments(tool: Tool | None, args: Any) -> Any:
    """Top-level arguments normalised, with schema defaults filled in for optional parameters left out."""
    out = normalise(args)
    if not isinstance(out, dict) or tool is None:
        return out
    props = tool.input_schema.get("properties")
    if isinstance(props, dict):
        for name, sub in props.items():
            if name not in out and isinstance(sub, dict) and sub.get("default") is not None:
                out[name] = normalise(sub["default"])
    return out


def _diff_paths(a: Any, b: Any, path: str = "$") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff_paths(a.get(k), b.get(k), f"{path}.{k}") if k in a and k in b else [f"{path}.{k}"]
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in _diff_paths(x, y, f"{path}[{i}]")]
    return [] if type(a) is type(b) and a == b else [path]


def compare(tools: list[Tool], gold: ToolCall, call: ToolCall) -> GoldDiff:
    """MATCH, or the first class (tool, names, values) in which ``call`` departs from ``gold``."""
    if call.name != gold.name:
        return GoldDiff(TOOL, f"called '{call.name}', expected '{gold.name}'")
    tool = next((t for t in tools if t.name == gold.name), None)
    want, got = arguments(tool, gold.arguments), arguments(tool, call.arguments)
    if not isinstance(want, dict) or not isinstance(got, dict):
        return GoldDiff(MATCH) if want == got else GoldDiff(NAMES, "the arguments are not a JSON object")
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    if missing or extra:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"extra {', '.join(extra)}"] if extra else []
        )
        return GoldDiff(NAMES, "; ".join(parts))
    paths = _diff_paths(want, got)
    return GoldDiff(VALUES, f"differs at {', '.join(paths[:5])}") if paths else GoldDiff(MATCH)
