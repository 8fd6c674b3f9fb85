"""Which of the run's proposers a step asks (``proposer_schedule``), as small strategy objects.

``weighted`` draws one at random by weight (the default). ``round_robin`` asks them in the order
the config lists them, one per step: a run with two proposers of equal weight can draw the same
one eight times in a row (p = 1/128), and then the other is never measured. Both read only the
step index and the run's RNG, which the checkpoint keeps, so a resumed step asks the proposer the
uninterrupted one asked.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol


class Schedule(Protocol):
    name: str

    def pick(self, proposers: Sequence[Any], drawable: Sequence[tuple[Any, float]], step: int, rng: random.Random) -> Any:
        """The proposer of step ``step``: one of ``drawable`` (proposer, weight) pairs, a subset of
        ``proposers`` (the config's order) without those the engine skips for this parent."""
        ...


class Weighted:
    name = "weighted"

    def pick(self, proposers: Sequence[Any], drawable: Sequence[tuple[Any, float]], step: int, rng: random.Random) -> Any:
        return rng.choices([p for p, _ in drawable], weights=[w for _, w in drawable])[0]


class RoundRobin:
    """The config's proposers in turn; one the engine skips this step passes its turn to the next."""

    name = "round_robin"

    def pick(self, proposers: Sequence[Any], drawable: Sequence[tuple[Any, float]], step: int, rng: random.Random) -> Any:
        left = {id(p) for p, _ in drawable}
        turn = step % len(proposers)
        return next(p for p in [*proposers[turn:], *proposers[:turn]] if id(p) in left)


SCHEDULES: dict[str, type[Weighted] | type[RoundRobin]] = {s.name: s for s in (Weighted, RoundRobin)}
