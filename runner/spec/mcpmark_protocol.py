"""MCPMark's protocol strings (``mcpmark_protocol.json``) and the few rules that place them.

A score is comparable with MCPMark's only if the model reads the same words, so the strings live in one
data file, quoted exactly with their source and the commit they were read at; this module only fills
their placeholders and says where each one goes.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("mcpmark_protocol.json")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@cache
def _data() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def about() -> dict[str, str]:
    """Where the strings come from: repository, commit, licence."""
    return dict(_data()["about"])


def version() -> str:
    """A short tag for records: which protocol a trial's conversation followed."""
    return f"mcpmark@{about()['commit'][:12]}"


def text(key: str) -> str:
    return str(_data()["strings"][key]["text"])


def render(key: str, **values: Any) -> str:
    """The string with its placeholders filled in one pass (a value containing braces is left alone)."""
    template = text(key)
    missing = set(_PLACEHOLDER.findall(template)) - set(values)
    if missing:
        raise KeyError(f"{key}: no value for {', '.join(sorted(missing))}")
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)


def task_suffix(service: str) -> str:
    """What MCPMark appends to a task's description.md for this service."""
    strings = _data()["strings"]
    return text(f"task_suffix.{service}") if f"task_suffix.{service}" in strings else text("task_suffix.default")


def instruction(service: str, description: str) -> str:
    """The first user message MCPMark's agents receive: description.md as read, plus the service's suffix."""
    return description + task_suffix(service)


def retryable_patterns() -> frozenset[str]:
    """MCPMark's RETRYABLE_PATTERNS (src/errors.py): the texts that make a failed task a pipeline error there."""
    return frozenset(_data()["retryable_patterns"]["patterns"])


def retryable_pattern(error_message: str | None) -> str | None:
    """The first of MCPMark's retryable patterns (alphabetically) that ``error_message`` holds, else None."""
    low = str(error_message or "").lower()
    return next((p for p in sorted(retryable_patterns()) if p in low), None)


def is_retryable(error_message: str | None) -> bool:
    """MCPMark's ``is_retryable_error`` on a meta.json ``error_message``: such a failed task is re-run on resume and
    never reported as the model's failure (its aggregate_results sets the model aside while one is left)."""
    return retryable_pattern(error_message) is not None


def standardize_error(error: str, service: str) -> str:
    """MCPMark's rewording of an agent error for meta.json (a few keywords become a fixed phrase)."""
    low = error.strip().lower()
    if "timeout" in low:
        base = text("standard_error.timeout")
    elif "connection refused" in low or "econnrefused" in low:
        base = text("standard_error.refused")
    elif "not found" in low:
        base = text("standard_error.not_found")
    elif "already exists" in low:
        base = text("standard_error.exists")
    else:
        return error.strip()
    return f"{service.title()} {base}"
