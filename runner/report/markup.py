"""Escaping and number formats shared by the report's tables and plots (data attributes keep full precision)."""

from __future__ import annotations

from html import escape
from typing import Any


def esc(x: Any) -> str:
    return escape(str(x), quote=True)


def num(x: Any) -> str:
    """A number for a data attribute: full precision (repr round-trips), ``null`` when unknown."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    return repr(float(x))


def attrs(**kw: Any) -> str:
    """``data_model="x"`` -> `` data-model="x"``; None values are left out (use num() for ``null``)."""
    return "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in kw.items() if v is not None)


def pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def usd(x: float | None) -> str:
    if x is None:
        return "unknown"
    return f"${x:,.4f}" if x < 1 else f"${x:,.2f}"


def fmt(x: float | None, f: str = "{:.1f}") -> str:
    return "-" if x is None else f.format(x)
