"""A count and its noun as a person writes them: "1 task", "2 tasks", "1,200 trials"."""

from __future__ import annotations


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1: ``many`` if given (``plural(n, "trial has", "trials
    have")``), else ``noun`` with an s. A count that is not a number (a summary's "?") is shown as it is."""
    shown = f"{n:,}" if isinstance(n, int) else str(n)
    return f"{shown} {noun if n == 1 else many or noun + 's'}"
