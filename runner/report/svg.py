"""The SVG primitives the report's plots are drawn with: marks with titles, ticks, axes, legends, figures."""

from __future__ import annotations

import hashlib
import math
from typing import Any

from mcpfleet.runner.report.markup import attrs, esc


def mark(tag: str, title: str, **kw: Any) -> str:
    return f"<{tag}{attrs(**kw)}><title>{esc(title)}</title></{tag}>"


def text(x: float, y: float, s: str, anchor: str = "start", cls: str = "", **kw: Any) -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{attrs(class_=cls or None, **kw)}>{esc(s)}</text>'


def clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def nice_ticks(hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """Ticks from 0 to a round number >= hi."""
    if hi <= 0 or not math.isfinite(hi):
        hi = 1.0
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = mag
    for m in (1, 2, 2.5, 5, 10):
        step = m * mag
        if hi / step <= n:
            break
    if integer:
        step = max(1, math.ceil(step))
    top = math.ceil(hi / step - 1e-9) * step
    count = int(round(top / step))
    return [round(i * step, 10) for i in range(count + 1)]


def jitter(key: str) -> float:
    """A stable pseudo-random number in [-1, 1] for a mark (the same page for the same records)."""
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
    return h / 0xFFFFFFFF * 2 - 1


def tick_label(v: float, percent: bool, money: bool = False) -> str:
    if percent:
        return f"{100 * v:.0f}%"
    if money:
        return f"${v:g}"
    return f"{v:g}"


W = 900  # every plot's width in user units (the page scales it down on narrow screens)
FONT = 7.0  # rough width of a 12px character, for margins


def svg_open(fig_id: str, width: float, height: float, title: str) -> str:
    return (
        f'<svg viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-labelledby="{fig_id}-title {fig_id}-caption">'
        f'<title id="{fig_id}-title">{esc(title)}</title>'
    )


def figure(fig_id: str, svg: str, caption: str, notes: list[str] | None = None) -> str:
    extra = "".join(f'<p class="note">{esc(n)}</p>' for n in notes or [])
    return (
        f'<figure id="{fig_id}" class="plot">{svg}<figcaption id="{fig_id}-caption">{esc(caption)}'
        f"</figcaption>{extra}</figure>"
    )


def x_axis(
    x0: float,
    x1: float,
    y: float,
    top: float,
    ticks: list[float],
    scale: Any,
    label: str,
    percent: bool = False,
    money: bool = False,
) -> str:
    parts = [f'<g class="axis x-axis"><line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" class="axis-line"/>']
    for t in ticks:
        x = scale(t)
        parts.append(f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(text(x, y + 16, tick_label(t, percent, money), "middle", "tick"))
    parts.append(text((x0 + x1) / 2, y + 36, label, "middle", "axis-label"))
    parts.append("</g>")
    return "".join(parts)


def legend(x: float, y: float, items: list[tuple[str, str, str]], max_width: float = W - 20) -> tuple[str, float]:
    """Items (kind, color, label) in rows from (x, y); returns the svg and the height used."""
    parts = ['<g class="legend">']
    cx, cy = x, y
    for kind, color, label in items:
        w = 22 + FONT * len(label) + 16
        if cx + w > max_width and cx > x:
            cx, cy = x, cy + 18
        if kind == "circle":
            parts.append(f'<circle cx="{cx + 6:.1f}" cy="{cy - 4:.1f}" r="5" fill="{color}"/>')
        elif kind == "ring":
            parts.append(
                f'<circle cx="{cx + 6:.1f}" cy="{cy - 4:.1f}" r="4.5" fill="#fff" stroke="{color}" stroke-width="2"/>'
            )
        elif kind == "tick":
            parts.append(
                f'<line x1="{cx + 6:.1f}" y1="{cy - 11:.1f}" x2="{cx + 6:.1f}" y2="{cy + 3:.1f}" '
                f'stroke="{color}" stroke-width="2"/>'
            )
        elif kind == "errorbar":
            parts.append(
                f'<path d="M{cx:.1f} {cy - 4:.1f}h12M{cx:.1f} {cy - 8:.1f}v8M{cx + 12:.1f} {cy - 8:.1f}v8" '
                f'stroke="{color}" stroke-width="1.5" fill="none"/>'
            )
        else:
            parts.append(f'<rect x="{cx:.1f}" y="{cy - 10:.1f}" width="12" height="12" fill="{color}"/>')
        parts.append(text(cx + 18, cy, label, cls="legend-label"))
        cx += w
    parts.append("</g>")
    return "".join(parts), cy - y + 18
