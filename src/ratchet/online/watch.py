"""The served-reward watch: a version whose served turns are judged worse than the version it replaced
is rolled back, automatically and with its reason on record.

The promotion gate (:mod:`ratchet.online.gate`) decides before a version serves, on held-out
turns; this watch decides after, on the reward the judge gave the turns each version served (the
``R avg`` column of ``ratchet serve status``). The serving process runs it with its status
updates (``ratchet serve``), since it owns the queue and the version store.

The current version is compared with the version it was trained from (its record's
``parent_version``: the one it replaced), on the rewards of all their judged turns (0 included,
as status shows them). Once each has ``min_turns`` judged turns, the current version is rolled
back to that one when its mean reward is lower by more than ``min_drop`` and a one-sided test
rejects "not lower" at ``alpha``. The test is unpaired (the two versions served different
turns): the difference of the means over its standard error (:func:`ratchet.stats.standard_error`
of each), read against the normal tail; with rewards of −1/0/+1 and a handful of turns that tail
is an approximation, which ``min_turns`` and ``min_drop`` keep from deciding on a few turns.

The version left gets ``rolled_back`` (the reason) in its record, which ``ratchet serve status``
and the dashboard show; the trainer follows ``current`` back before its next update. A version
made current by a rollback (a person's, or the watch's own) is not watched: the watch never
overrides a person's choice, and never walks down the version tree on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Any

from ratchet.online.evaluation import RewardWatchConfig
from ratchet.stats import standard_error


def drop_p(previous: list[int], current: list[int]) -> float:
    """One-sided p-value of "the current rewards' mean is lower than the previous ones'" (normal
    approximation of the difference of two independent means; 0 or 1 when neither varies)."""
    diff = fmean(previous) - fmean(current)
    se = math.hypot(standard_error(previous), standard_error(current))
    if se == 0:
        return 0.0 if diff > 0 else 1.0
    return 0.5 * math.erfc(diff / se / math.sqrt(2))


@dataclass(frozen=True)
class RewardDrop:
    """A comparison the watch made, and whether it rolled back."""

    current: int
    previous: int
    current_mean: float
    previous_mean: float
    current_turns: int
    previous_turns: int
    p: float
    rolled_back: bool

    def reason(self, alpha: float) -> str:
        return (f"served reward {self.current_mean:+.2f} over {self.current_turns} judged turns fell below "
                f"v{self.previous}'s {self.previous_mean:+.2f} over {self.previous_turns} (one-sided p = "
                f"{self.p:.3f} < {alpha})")


class RewardWatch:
    """Compares the current version's served reward with its predecessor's; rolls back on a drop."""

    def __init__(self, config: RewardWatchConfig | None = None) -> None:
        self.config = config or RewardWatchConfig()

    def check(self, queue: Any, store: Any) -> RewardDrop | None:
        """Look once; returns the comparison made (None when there was none to make yet)."""
        cfg = self.config
        if not cfg.enabled:
            return None
        current = store.current_number()
        if current == 0:
            return None
        rollbacks = store.rollbacks()
        if rollbacks and rollbacks[-1].get("to") == current:
            return None
        version = store.get(current)
        if version.rolled_back:
            return None
        previous = int(version.metrics.get("parent_version", current - 1))
        served = queue.served_rewards()
        before, after = served.get(previous, []), served.get(current, [])
        if len(before) < cfg.min_turns or len(after) < cfg.min_turns:
            return None
        p = drop_p(before, after)
        fell = fmean(before) - fmean(after) > cfg.min_drop and p < cfg.alpha
        drop = RewardDrop(current, previous, fmean(after), fmean(before), len(after), len(before), p, False)
        if fell:
            # Only if nothing moved ``current`` since it was read (a promotion, a person's rollback).
            now = store.rollback(previous, reason=drop.reason(cfg.alpha), if_current=current)
            drop = replace(drop, rolled_back=now.number == previous)
        return drop


__all__ = ["RewardDrop", "RewardWatch", "drop_p"]
