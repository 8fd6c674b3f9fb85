"""What of the playbook enters a prompt, and what leaves the playbook for good.

Selection: a prompt gets at most ``budget_tokens`` of items, chosen by relevance to the task
(cosine of embeddings) plus a bonus for a good record (helpful minus harmful), so a long playbook
costs the generator a fixed amount however large it grows.

Pruning: an item whose harmful count outweighs its helpful count by ``margin`` is deleted, and
past ``max_items`` the items with the worst record (then the oldest) go, so the playbook cannot
grow without bound. Both are deterministic functions of the playbook.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ratchet.context.operations import Delete
from ratchet.context.playbook import Item, Playbook
from ratchet.context.similarity import Embedder
from ratchet.models.request import estimate_tokens


def record_score(item: Item) -> float:
    """A counter bonus in (-1, 1): tanh of the net count, so three helpful tags matter and
    thirty do not swamp relevance."""
    return math.tanh(item.net / 3.0)


@dataclass(frozen=True)
class Selection:
    items: list[Item]
    tokens: int
    dropped: int


def select(playbook: Playbook, task: str, budget_tokens: int | None, *, embedder: Embedder | None = None,
           record_weight: float = 0.3) -> Selection:
    """The items for a prompt about ``task``, best first, within ``budget_tokens`` (each item
    costs its rendered line; None: no budget, every item). Without an embedder, relevance is 0
    and the record decides."""
    items = list(playbook.items.values())
    if not items or (budget_tokens is not None and budget_tokens <= 0):
        return Selection([], 0, len(items))
    relevance = np.zeros(len(items))
    if embedder is not None and task:
        vectors = embedder.embed([task] + [i.text for i in items])
        relevance = vectors[1:] @ vectors[0]
    scored = sorted(range(len(items)),
                    key=lambda k: (-(float(relevance[k]) + record_weight * record_score(items[k])), items[k].id))
    chosen: list[Item] = []
    used = 0
    for k in scored:
        cost = estimate_tokens(items[k].line()) + 1
        if budget_tokens is not None and used + cost > budget_tokens:
            continue
        chosen.append(items[k])
        used += cost
    return Selection(chosen, used, len(items) - len(chosen))


def prune(playbook: Playbook, *, margin: int | None = 1, max_items: int | None = None) -> list[Delete]:
    """DELETE operations for items that hurt (``harmful - helpful >= margin``; None: none for
    their record) and, past ``max_items``, for the weakest remaining items (lowest net count, then
    oldest id)."""
    doomed = [i.id for i in playbook.items.values() if margin is not None and i.harmful - i.helpful >= margin]
    if max_items is not None:
        rest = [i for i in playbook.items.values() if i.id not in doomed]
        excess = len(rest) - max_items
        if excess > 0:
            doomed += [i.id for i in sorted(rest, key=lambda i: (i.net, i.id))[:excess]]
    return [Delete(key) for key in sorted(doomed)]
