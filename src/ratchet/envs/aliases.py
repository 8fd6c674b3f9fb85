"""Actions a game lists that are the same move under two names, read from the harvest.

Frozen Lake lists ``[up] [down] [left] [right]`` and also ``[w] [a] [s] [d]``: eight legal actions,
four moves. A small model's ``legal_moves`` returns the four directions and never the letters, so
its ``is_legal_action`` rejects legal actions. Which listed actions are one move is a fact of the
game that the labelled transitions already show: two actions are aliases when, at every harvested
state where both are known, they are equally legal and lead to the same next observation once the
actions (the echo of the move, the rules' list) are dropped from it (:func:`outcome`, kept on each
transition by ``explore.harvest``). Nothing here names a game.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # explore imports this module's outcome
    from ratchet.envs.explore import Transition


def outcome(text: str | None, done: bool, actions: Sequence[str]) -> str:
    """A short digest of what an action led to: the next observation's text with every occurrence of
    ``actions`` (the action taken and the state's listed actions) dropped, and whether the game
    ended. So the game's echo of the move (``[Player] [w]``) and its rules' list of actions do not
    tell two names of one move apart; any other bracketed text is kept, since a board may be written
    in brackets (``A: [3, 2, 1]``), and two moves that change it differently must not look the same.

    >>> up, w = "[Player] [up]\\n| P |", "[Player] [w]\\n| P |"
    >>> outcome(up, False, ["[up]", "[w]"]) == outcome(w, False, ["[w]", "[up]"])
    True
    >>> outcome("[Player] [A B]\\nB: [1]", False, ["[A B]"]) == outcome("[Player] [A C]\\nC: [1]", False, ["[A C]"])
    False
    """
    kept = text or ""
    for action in sorted({a.strip() for a in actions}, key=lambda a: (-len(a), a)):
        kept = kept.replace(action, "")
    return hashlib.sha1(f"{bool(done)}\n{kept}".encode()).hexdigest()[:16]


def infer_aliases(transitions: Sequence[Transition], min_shared: int = 2) -> dict[str, list[str]]:
    """Listed actions that are one move: canonical action (the first listed) -> its aliases, in the
    order the game lists them.

    Two listed actions are aliases when they were both tried, legal, with the same :func:`outcome`
    at ``min_shared`` states at least, and no harvested state tells them apart: none where both
    were tried with different legality, or both legal with different outcomes (an illegal action's
    next observation is the game's complaint, which may name it), and none whose printed list holds
    one and not the other, a state reached by taking one of them among them. A group is kept only
    where every two of its actions are aliases."""
    states: dict[tuple[int, tuple[str, ...]], list[Transition]] = {}
    for t in transitions:
        states.setdefault((t.seed, t.prefix), []).append(t)
    order = list(dict.fromkeys(a for t in transitions for a in t.listed))
    known = set(order)
    # Candidates: listed actions tried legal at one state with the same outcome.
    candidates: set[tuple[str, str]] = set()
    for group in states.values():
        by_outcome: dict[str, list[str]] = {}
        for t in group:
            if t.action in known and t.legal and t.outcome:
                by_outcome.setdefault(t.outcome, []).append(t.action)
        for same in by_outcome.values():
            candidates |= {(a, b) for a in same for b in same if order.index(a) < order.index(b)}
    alias = {pair for pair in candidates if _same_move(pair, states.values(), min_shared)}
    out: dict[str, list[str]] = {}
    taken: set[str] = set()
    for i, first in enumerate(order):
        if first in taken:
            continue
        members = [first]
        for other in order[i + 1 :]:
            if other not in taken and all((m, other) in alias for m in members):
                members.append(other)
        if len(members) > 1:
            out[first] = members[1:]
            taken.update(members)
    return out


def _same_move(pair: tuple[str, str], states: Iterable[list[Transition]], min_shared: int) -> bool:
    shared, after = 0, False
    for group in states:
        # A state reached by taking one of the two, with the game's list there: two names of one move
        # stay both listed or both not (Frozen Lake's [w] and [up]); two guesses with the same reply
        # do not (Guess the Number lists [2] after [1], not [1]), which no earlier state tells.
        after = after or bool(group[0].prefix and group[0].prefix[-1] in pair and group[0].listed)
        seen = {t.action: t for t in group}
        listed = set(group[0].listed)
        a, b = (seen.get(x) for x in pair)
        if listed and (pair[0] in listed) != (pair[1] in listed):
            return False  # the game's own list tells them apart
        if a is None or b is None:
            continue
        if a.legal != b.legal or (a.legal and a.outcome and b.outcome and a.outcome != b.outcome):
            return False
        shared += bool(a.legal and a.outcome and a.outcome == b.outcome)
    return shared >= min_shared and after

