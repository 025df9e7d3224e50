"""What a trial's trial.log says of why it was not scored (pure)."""

from __future__ import annotations


def cause_line(log: str) -> str:
    """trial.log's line that says why a trial was not scored: the last one naming a cause, else its last line."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    marks = ("giving up", "not scored", "infrastructure error", "budget:", "not graded", "config_error")
    for ln in reversed(lines):
        if any(m in ln for m in marks):
            return ln.strip()
    return lines[-1].strip() if lines else ""
