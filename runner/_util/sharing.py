"""Many decoded JSON documents of one shape held at once (a run's every trial record, for its summary or an operator's
rebuild), sharing their strings: ``json.loads`` gives each document its own copy of every key and of every short value
("model", "service", "failure", "passed" ... ), about two thirds of a trial record's 5.8 KB in memory (measured). The
documents stay equal to what was decoded; only their strings are one object per distinct text.
"""

from __future__ import annotations

from typing import Any

SHORT = 64  # longer strings (errors, messages) are rarely repeated: left as they are


def shared(value: Any, memo: dict[str, str]) -> Any:
    """``value`` (decoded JSON) with its dict keys, and its strings up to SHORT characters, taken from ``memo`` (one
    object per distinct text, added as met). Keep ``memo`` for as long as the documents are built, then drop it."""
    if isinstance(value, dict):
        return {memo.setdefault(k, k) if isinstance(k, str) else k: shared(v, memo) for k, v in value.items()}
    if isinstance(value, list):
        return [shared(v, memo) for v in value]
    if isinstance(value, str) and len(value) <= SHORT:
        return memo.setdefault(value, value)
    return value


def shared_all(docs: Any) -> list[Any]:
    """Every document of an iterable, sharing strings with one another (see ``shared``)."""
    memo: dict[str, str] = {}
    return [shared(d, memo) for d in docs]
