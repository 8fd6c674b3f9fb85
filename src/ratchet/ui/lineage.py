"""Trees of candidates: the drawing order (pre-order, children oldest first) shared by the
AutoHarness tree and the Evolution view's lineage graph, and that graph as inline SVG.

The graph is drawn on the server: one row per candidate, indented by its depth, an elbow from
its parent, a dot coloured by status, each node a link. Every label goes through
``markupsafe.escape`` and the numbers are formatted here, so the markup is safe to insert as is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

ROW, INDENT, LEFT, TOP = 22, 22, 12, 14


def preorder(parents: dict[str, str | None], limit: int) -> list[tuple[str, int]]:
    """(node, depth) in drawing order, at most ``limit`` of them; a node whose parent is not in
    ``parents`` is a root. Insertion order decides among siblings."""
    children: dict[str | None, list[str]] = {}
    for node, parent in parents.items():
        children.setdefault(parent if parent in parents else None, []).append(node)
    ordered: list[tuple[str, int]] = []
    stack = [(n, 0) for n in reversed(children.get(None, []))]
    while stack and len(ordered) < limit:  # iterative: a chain of refinements can be deep
        node, depth = stack.pop()
        ordered.append((node, depth))
        stack += [(c, depth + 1) for c in reversed(children.get(node, []))]
    return ordered


@dataclass(frozen=True)
class LineageNode:
    """One candidate as the graph draws it."""

    id: str
    parent_id: str | None
    status: str
    score: float | None
    label: str = ""  # shown after the id and score (the step and the proposer)


def lineage_svg(nodes: Sequence[LineageNode], href: Callable[[str], str], *, current: str | None = None,
                limit: int = 250) -> Markup:
    """The lineage graph of ``nodes`` (oldest first); ``href(id)`` is each node's link."""
    by_id = {n.id: n for n in nodes}
    order = preorder({n.id: n.parent_id for n in nodes}, limit)
    if not order:
        return Markup('<p class="muted">no candidates yet</p>')
    row_of = {node: i for i, (node, _) in enumerate(order)}
    depth_of = dict(order)
    width = LEFT + INDENT * max(depth_of.values()) + 380
    height = TOP + ROW * len(order)
    parts = [f'<svg class="lineage" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="lineage of {len(order)} candidates">']
    for node, depth in order:  # edges first, so the dots sit on top of them
        parent = by_id[node].parent_id
        if parent in row_of:
            px, py = LEFT + INDENT * depth_of[parent], TOP + ROW * row_of[parent]
            x, y = LEFT + INDENT * depth, TOP + ROW * row_of[node]
            parts.append(f'<path d="M{px} {py} V{y} H{x}" class="edge"/>')
    for node, depth in order:
        n = by_id[node]
        x, y = LEFT + INDENT * depth, TOP + ROW * row_of[node]
        score = "–" if n.score is None else f"{n.score:.3f}"
        mark = " current" if node == current else ""
        parts.append(f'<a href="{escape(href(node))}" data-cand="{escape(node)}" class="node {escape(n.status)}{mark}">'
                     f'<title>{escape(node)}: {escape(n.status)}</title>'
                     f'<circle cx="{x}" cy="{y}" r="6"/>'
                     f'<text x="{x + 12}" y="{y + 4}">{escape(node[:8])} · {score} · {escape(n.status)}'
                     f'{" · " + escape(n.label) if n.label else ""}</text></a>')
    parts.append("</svg>")
    return Markup("".join(parts))
