"""The critic: picks at most N failed steps to show the refiner and names their error types.

Sampling takes one failure of each error type first (so one noisy error does not crowd out the
rest), then fills up at random. The consolidated summary ("3× rejected by env: cell N is already
occupied; 1× code_error: IndexError…") tells the refiner what kinds of mistakes remain.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any


def error_type(failure: dict[str, Any]) -> str:
    """A failure's type: its kind plus the last line of its feedback with numbers masked, so
    "cell 4 is occupied" and "cell 7 is occupied" are one type."""
    feedback = (failure.get("feedback") or "").strip().splitlines()
    last = feedback[-1] if feedback else ""
    last = re.sub(r"\d+", "N", last)[:120]
    return f"{failure.get('kind', 'failure')}: {last}" if last else str(failure.get("kind", "failure"))


def sample_failures(failures: Sequence[dict[str, Any]], rng: random.Random, limit: int = 5) -> list[dict[str, Any]]:
    """At most ``limit`` failures: one per error type first (in order of first appearance), then
    random others. Deterministic for a given rng state."""
    if len(failures) <= limit:
        return list(failures)
    by_type: dict[str, list[int]] = {}
    for i, f in enumerate(failures):
        by_type.setdefault(error_type(f), []).append(i)
    chosen: list[int] = []
    for indices in by_type.values():
        if len(chosen) < limit:
            chosen.append(rng.choice(indices))
    rest = [i for i in range(len(failures)) if i not in chosen]
    rng.shuffle(rest)
    chosen += rest[: limit - len(chosen)]
    return [failures[i] for i in sorted(chosen)]


def summarize(failures: Sequence[dict[str, Any]]) -> str:
    """The error types among ``failures`` with counts, most frequent first."""
    counts = Counter(error_type(f) for f in failures)
    return "; ".join(f"{n}× {t}" for t, n in counts.most_common(6))
