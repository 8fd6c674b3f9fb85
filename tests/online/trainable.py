"""A queue of judged, trainable samples, shared by the claim and lease tests."""

from __future__ import annotations

from pathlib import Path

from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn


def judged_queue(path: Path, n: int) -> TurnQueue:
    """A queue with ``n`` judged, trainable samples t0..t{n-1}, oldest first."""
    q = TurnQueue(path)
    for i in range(n):
        q.add_turn(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": f"q{i}"}], f"a{i}", [1, 2],
                        [3, 4], [-0.5, -0.7], 0, created_at=1000.0 + i))
        q.set_next_state(f"t{i}", "thanks")
        q.add_judgement(Judgement(f"t{i}", 1, [1], None, "thanks", "rule"))
    return q
