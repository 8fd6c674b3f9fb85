"""The search tree of code versions and Thompson-sampling node choice (REx, the engine's
``ThompsonSelector`` draw).

Every node is one harness version. Its value ``h`` is the heuristic score of its evaluation
(the legal-action rate, or for harness-as-policy the value H); ``refinements`` counts how many
children were already made from it. To pick the next node to refine, draw
θ ~ Beta(1 + C·h, 1 + C·(1−h) + refinements) for every node and take the argmax: good nodes are
refined often, but each refinement makes a node less attractive, so the search keeps exploring.
The RNG is injected so tests (and resumed runs) draw exactly the same numbers.

Optionally (``select_action``) one more arm competes with the nodes: sampling a fresh root from
the first request. A small model writes a correct program from scratch more often than it
repairs a wrong one, and a tree that only refines can stay stuck under a bad root; the fresh arm
is a virtual root whose posterior pools the scores of the roots sampled so far.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

from ratchet.evolve.selectors import thompson_draw


@dataclass
class Node:
    """One harness version in the tree. ``candidate_id`` is its id in the run store."""

    candidate_id: str
    parent_id: str | None
    h: float
    refinements: int = 0
    depth: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


class Tree:
    """Nodes by candidate id, in insertion order. Only evaluated (scored) nodes are selectable."""

    def __init__(self, nodes: list[Node] | None = None) -> None:
        self.nodes: dict[str, Node] = {node.candidate_id: node for node in nodes or []}

    def add(self, candidate_id: str, parent_id: str | None, h: float, **meta: Any) -> Node:
        """Add a scored node; a parent's refinement count goes up by one. Adding a node that
        already exists (identical code) only counts the refinement."""
        if parent_id is not None and parent_id in self.nodes:
            self.nodes[parent_id].refinements += 1
        if candidate_id in self.nodes:
            return self.nodes[candidate_id]
        depth = self.nodes[parent_id].depth + 1 if parent_id in self.nodes else 0
        node = Node(candidate_id, parent_id, float(h), depth=depth, meta=dict(meta))
        self.nodes[candidate_id] = node
        return node

    def best(self) -> Node | None:
        """The node with the highest h (the earliest one on ties: ``max`` keeps the first)."""
        return max(self.nodes.values(), key=lambda node: node.h, default=None)

    def __len__(self) -> int:
        return len(self.nodes)

    def to_json(self) -> list[dict[str, Any]]:
        return [asdict(n) for n in self.nodes.values()]

    @classmethod
    def from_json(cls, data: list[dict[str, Any]]) -> Tree:
        return cls([Node(**d) for d in data])


def select_action(tree: Tree, rng: random.Random, c: float = 1.0, fresh: tuple[float, float] | None = None) -> Node | None:
    """The node to refine next: the engine's Thompson draw (``evolve.selectors.thompson_draw``)
    over the nodes in insertion order, each visited as often as it was refined; with ``fresh`` (the
    fresh-root arm's Beta parameters) one more draw after the nodes. Returns None when the fresh arm
    wins (sample a new root), else the node (the first on ties, a node on a tie with the arm)."""
    if not tree.nodes and fresh is None:
        raise ValueError("cannot select from an empty tree")
    node, _ = thompson_draw([(n, n.h, n.refinements) for n in tree.nodes.values()], rng, c, fresh)
    return node

