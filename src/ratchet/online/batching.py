"""When the training loop trains: a full batch at once, a partial one only after waiting for more.

The wait starts when the first sample of the batch arrives, not when the loop last trained: a
loop that sat idle for an hour must not train on the first sample that then shows up. And a
partial batch needs ``min_batch`` samples however long it waited, so an idle period never makes
the trainer step on a single sample (one sample's reward is mostly noise, and Adam's first steps
are its largest).

What counts is the samples an update would learn from (:class:`Usable`, which the trainer says
before the loop decides), not the samples claimed: a retry judged 0 whose hint the user had already
written, or a sample a rollback made stale while it waited, is dropped by the update, and counting
it would let an update run on fewer than ``min_batch`` samples. Such samples stay with the batch
they were claimed with (dropped and counted in its version's record, as ever) while the usable
ones wait for company.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Usable:
    """What an update would make of some claimed samples: the ones it would learn from, and for
    each of the others (by turn id) why not: a drop reason of the trainer's (``stale``,
    ``no_signal``, ``empty``) or ``anchor`` (kept only to hold the KL to the base)."""

    samples: tuple[Any, ...]
    unused: dict[str, str] = field(default_factory=dict)

    @classmethod
    def every(cls, samples: Sequence[Any]) -> Usable:
        """All of ``samples`` usable: for trainers that drop nothing."""
        return cls(tuple(samples))

    def plus(self, other: Usable) -> Usable:
        """This and ``other`` (usables of two disjoint lists of samples) as one, in that order: the
        usable of the samples newly claimed joins that of those already waiting, and no sample is
        assessed twice."""
        return Usable(self.samples + other.samples, {**self.unused, **other.unused})

    def among(self, samples: Sequence[Any]) -> Usable:
        """Restricted to ``samples`` (a subset of those assessed), e.g. the ones whose claim still holds."""
        ids = {s.turn.turn_id for s in samples}
        return Usable(tuple(s for s in self.samples if s.turn.turn_id in ids),
                      {turn_id: why for turn_id, why in self.unused.items() if turn_id in ids})


class BatchClock:
    """Says when ``pending`` usable samples make a batch; ``now`` is injectable for tests."""

    def __init__(self, batch_size: int, min_batch: int, max_wait_s: float,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.batch_size = batch_size
        # A minimum above the batch size would never be reached by a partial batch: a full one is.
        self.min_batch = min(min_batch, batch_size)
        self.max_wait_s = max_wait_s
        self._now = now
        self.first_at: float | None = None

    def due(self, pending: int) -> bool:
        """Whether to train on the ``pending`` usable samples now. The first call that sees one
        starts the wait; a call with none clears it."""
        if pending <= 0:
            self.first_at = None
            return False
        if self.first_at is None:
            self.first_at = self._now()
        if pending >= self.batch_size:
            return True
        return pending >= self.min_batch and self._now() - self.first_at >= self.max_wait_s

    def waited_s(self) -> float:
        """Seconds since the first sample of the batch arrived (0 with none)."""
        return 0.0 if self.first_at is None else self._now() - self.first_at

    def reset(self) -> None:
        """The batch was taken: the next sample starts a new wait."""
        self.first_at = None
