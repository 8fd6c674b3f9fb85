"""Line charts drawn on the server as inline SVG: no script, no library, works offline.

Every label goes through ``markupsafe.escape``; the numbers are formatted by this module, so the
returned markup is safe to insert into a page as is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

COLOURS = ("#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b7791f")


@dataclass(frozen=True)
class Series:
    """One line: its legend label and its (x, y) points, x increasing."""

    label: str
    points: Sequence[tuple[float, float]]


def _ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / count for i in range(count + 1)]


def _fmt(value: float, span: float) -> str:
    """A tick label with as many decimals as the axis's span needs to tell its ticks apart."""
    if value == int(value) and span >= 4:
        return f"{value:.0f}"
    digits = 0 if span <= 0 else max(0, min(4, 2 - math.floor(math.log10(span))))
    return f"{value:.{digits}f}"


def line_chart(series: Sequence[Series], *, title: str, x_label: str, y_label: str, width: int = 520,
               height: int = 200, max_points: int = 400) -> Markup:
    """An SVG chart of ``series``; an empty chart says so instead of drawing axes over nothing.

    A series longer than ``max_points`` is thinned evenly (its last point kept), so a chart of a
    long run stays a few kilobytes."""
    drawn = [Series(s.label, _thin(s.points, max_points)) for s in series if s.points]
    head = f'<figure class="chart"><figcaption>{escape(title)}</figcaption>'
    if not drawn:
        return Markup(head + '<p class="muted">no data yet</p></figure>')
    xs = [x for s in drawn for x, _ in s.points]
    ys = [y for s in drawn for _, y in s.points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if y0 == y1:
        y0, y1 = y0 - 1, y1 + 1
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    left, right, top, bottom = 48, 12, 10, 34
    w, h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * w

    def py(y: float) -> float:
        return top + (1 - (y - y0) / (y1 - y0)) * h

    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}">']
    for t in _ticks(y0, y1):
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="grid"/>'
                     f'<text x="{left - 4}" y="{py(t) + 4:.1f}" text-anchor="end">{_fmt(t, y1 - y0)}</text>')
    for t in _ticks(x0, x1):
        parts.append(f'<text x="{px(t):.1f}" y="{top + h + 16}" text-anchor="middle">{_fmt(t, x1 - x0)}</text>')
    parts.append(f'<text x="{left + w / 2}" y="{height - 2}" text-anchor="middle" class="axis">{escape(x_label)}</text>')
    parts.append(f'<text x="12" y="{top + h / 2}" text-anchor="middle" class="axis" '
                 f'transform="rotate(-90 12 {top + h / 2})">{escape(y_label)}</text>')
    for i, s in enumerate(drawn):
        colour = COLOURS[i % len(COLOURS)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        if len(s.points) == 1:
            (x, y), = s.points
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        parts.append(f'<text x="{left + 8 + 150 * i}" y="{top + 12}" style="fill: {colour}">{escape(s.label)}</text>')
    parts.append("</svg></figure>")
    return Markup(head + "".join(parts))


def _thin(points: Sequence[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    clean = [(float(x), float(y)) for x, y in points if math.isfinite(x) and math.isfinite(y)]
    if len(clean) <= limit:
        return clean
    step = len(clean) / limit
    kept = [clean[int(i * step)] for i in range(limit)]
    if kept[-1] != clean[-1]:
        kept[-1] = clean[-1]
    return kept
