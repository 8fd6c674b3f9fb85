"""What of the playbook enters a prompt, and what leaves the playbook for good.

Selection: a prompt gets at most ``budget_tokens`` of items, chosen by relevance to the task
(:func:`relevance`) plus a bonus for a good record (helpful minus harmful), so a long playbook
costs the generator a fixed amount however large it grows; an item less relevant than
``min_relevance`` never enters, however much budget is left (a short playbook fits any budget,
and a rule a small model obeys literally hurts wherever it does not apply).

Pruning: an item whose harmful count outweighs its helpful count by ``margin`` is deleted, and
past ``max_items`` the items with the worst record (then the oldest) go, so the playbook cannot
grow without bound. Both are deterministic functions of the playbook.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ratchet.context.lexical import scoped
from ratchet.context.operations import Delete
from ratchet.context.playbook import Item, Playbook
from ratchet.context.similarity import Embedder
from ratchet.models.request import estimate_tokens


def record_score(item: Item) -> float:
    """A counter bonus in (-1, 1): tanh of the net count, so three helpful tags matter and
    thirty do not swamp relevance."""
    return math.tanh(item.net / 3.0)


def relevance(embedder: Embedder, task: str, items: list[Item]) -> np.ndarray:
    """Each item's relevance to ``task``: the mean of the task's cosine with the item's text and
    with the task the item was learned from (its ``origin``); the text's cosine alone for an item
    without one.

    Why the mean, not the max: a lesson written as a rule for every problem ("Always convert the
    input to lowercase") matches the wording of any string problem, so the text alone scopes
    badly; and problems of one suite share their form, so the origin alone (or the max of the two)
    admits nearly everything (HumanEval/0-39: median cosine 0.31 between two different problems).
    The mean asks both, and an item scores high only on problems like the one it came from
    (measured: ``bench/results/context_relevance.md``). The combination is
    :func:`ratchet.context.lexical.scoped`, which a sandboxed workflow applies to word cosines."""
    vectors = embedder.embed([task] + [i.text for i in items])
    scores = vectors[1:] @ vectors[0]
    with_origin = [k for k, item in enumerate(items) if item.origin]
    if with_origin:
        origins = embedder.embed([items[k].origin for k in with_origin]) @ vectors[0]
        for k, cos in zip(with_origin, origins):
            scores[k] = scoped(float(scores[k]), float(cos))
    return scores


@dataclass(frozen=True)
class Selection:
    items: list[Item]
    tokens: int
    dropped: int


def select(playbook: Playbook, task: str, budget_tokens: int | None, *, embedder: Embedder | None = None,
           record_weight: float = 0.3, min_relevance: float | None = None) -> Selection:
    """The items for a prompt about ``task``, best first, within ``budget_tokens`` (each item
    costs its rendered line; None: no budget, every item), none less relevant than
    ``min_relevance`` (None: no minimum). Without an embedder (or a task) relevance is not
    measured: it counts as 0 in the ranking, the record decides, and no minimum applies."""
    items = list(playbook.items.values())
    if not items or (budget_tokens is not None and budget_tokens <= 0):
        return Selection([], 0, len(items))
    scores = np.zeros(len(items))
    measured = embedder is not None and bool(task)
    if measured:
        scores = relevance(embedder, task, items)
    scored = sorted(range(len(items)),
                    key=lambda k: (-(float(scores[k]) + record_weight * record_score(items[k])), items[k].id))
    if measured and min_relevance is not None:
        scored = [k for k in scored if float(scores[k]) >= min_relevance - 1e-9]
    chosen: list[Item] = []
    used = 0
    for k in scored:
        # The origin is the item's scope, never shown to a model: it costs no prompt tokens.
        cost = estimate_tokens(replace(items[k], origin="").line()) + 1
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
