"""A curriculum's training: its searches' samples fed as judged turns and one update of the one
trainer, published as a version that waits for the games gate.

Feeding is ``ratchet serve feed``'s code path (:func:`ratchet.online.verdicts.feed`: idempotent,
scored by the trainer at the version that ran the searches), into the curriculum run's own queue
(``online/queue.sqlite``); training is the online trainer's loop
(:func:`ratchet.online.trainer_loop.run_trainer_loop`) on that queue, publishing to the run's
version store (``online/versions``), stopped at its first published version. Its evaluation hook
(:class:`AwaitGamesGate`) promotes nothing: the version is kept unpromoted, the trainer goes back to
the weights it trained from, and the games gate promotes it or not. So the curriculum run is also
a learning run ``ratchet serve status --run RUN`` reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Protocol

from ratchet.contracts import RatchetError
from ratchet.online.status import QUEUE_NAME, VERSIONS_NAME, online_dir
from ratchet.online.trainer_config import TrainerConfig

#: Why every version waits: the reason its record keeps under ``evaluation``.
AWAITING = "kept unpromoted for the games gate (ratchet autoharness learn): held-out games decide"


class Training(Protocol):
    """Turns searches into a weight version (the online trainer; a test's stand-in)."""

    def feed(self, runs: Sequence[Any], version: int, *, skip: Collection[str] = ()) -> int:
        """Add the searches' samples, written by weight version ``version``, as judged turns, those
        not in the queue yet (a second call adds none) and not in ``skip`` (turn ids the feedback
        policy left to the harness); how many turns the searches gave, less those skipped."""
        ...

    def train(self, version: int) -> tuple[int | None, str]:
        """Publish one version trained from ``version`` on the fed turns, unpromoted; its number
        (None: none was published) and what happened, in words."""
        ...


class AwaitGamesGate:
    """The training loop's evaluation hook: every update is published unpromoted (the trainer goes
    back to the weights it had), for the games gate to decide on."""

    def score(self, scorer: Any) -> float:
        return 0.0

    def evaluate(self, scorer: Any, baseline: float) -> dict[str, Any]:
        return {"promote": False, "reason": AWAITING}


class LoopTraining:
    """The online trainer on the curriculum run's queue and version store (see the module)."""

    def __init__(self, config: TrainerConfig, run_dir: Path, timeout_s: float = 3600.0) -> None:
        self.config, self.timeout_s = config, timeout_s
        self.queue_path = online_dir(run_dir) / QUEUE_NAME
        self.versions = online_dir(run_dir) / VERSIONS_NAME
        self._trainer: Any = None

    def _policy(self, version: int) -> Any:
        """The trainer at ``version`` (loaded once; moved when another version is current)."""
        from ratchet.online import verdicts

        if self._trainer is None:
            self._trainer, _ = verdicts.trainer_policy(self.config, self.versions)
        if self._trainer.version != version:
            from ratchet.online.versions import VersionStore

            found = VersionStore(self.versions).get(version)
            if found.adapter_dir is None:
                self._trainer.reset_to_base()
            else:
                self._trainer.load_adapter(found.adapter_dir, version)
        return self._trainer

    def feed(self, runs: Sequence[Any], version: int, *, skip: Collection[str] = ()) -> int:
        from ratchet.online import verdicts
        from ratchet.online.queue import TurnQueue

        queue = TurnQueue(self.queue_path)
        turns = {r.id: [p for p in verdicts.verdict_turns(r) if p[0].turn_id not in skip] for r in runs}
        waiting = [r for r in runs if verdicts.unfed(turns[r.id], queue)]
        if waiting:
            policy = self._policy(version)
            for r in waiting:
                verdicts.feed(r, queue, policy, policy_version=version, skip=skip)
        return sum(len(t) for t in turns.values())

    def train(self, version: int) -> tuple[int | None, str]:
        from ratchet.online.queue import TurnQueue
        from ratchet.online.trainer_loop import run_trainer_loop

        trainer = self._policy(version)
        queue = TurnQueue(self.queue_path)
        stop, records, failed = threading.Event(), [], []

        def published(record: dict[str, Any]) -> None:
            records.append(record)
            if record.get("version"):
                stop.set()

        def loop() -> None:
            try:
                run_trainer_loop(self.config, self.queue_path, self.versions, stop, published, trainer=trainer,
                                 hook=AwaitGamesGate())
            except BaseException as exc:  # noqa: BLE001 - re-raised below, in the curriculum's thread
                failed.append(exc)
                stop.set()

        thread = threading.Thread(target=loop, name="curriculum-trainer", daemon=True)
        thread.start()
        deadline = time.monotonic() + self.timeout_s
        why = ""
        while not stop.wait(1.0):
            if time.monotonic() > deadline:
                why = f"no version after {self.timeout_s:.0f} s of training (trainer.* settings, train_timeout_s)"
                break
            if _nothing_left(queue):
                why = "the fed turns taught nothing: every sample was trained on or dropped and no update was made"
                break
        stop.set()
        thread.join()
        if failed:
            raise RatchetError(f"training failed: {type(failed[0]).__name__}: {failed[0]}",
                               hint="the queue keeps the samples; resume the curriculum to train them again") from failed[0]
        done = [r for r in records if r.get("version")]
        if done:
            r = done[-1]
            return int(r["version"]), (f"v{r['version']} from v{version}: {r.get('samples', '?')} samples, "
                                       f"loss {r.get('loss', float('nan')):.4f}")
        return None, why


def _nothing_left(queue: Any) -> bool:
    """No sample waits to be trained (none judged and unclaimed, none claimed)."""
    s = queue.stats()
    waiting = s["turns"] - sum(s[k] for k in ("trained", "dropped_stale", "ready", "claimed", "excluded", "pending",
                                              "failed", "heldout"))
    return waiting <= 0 and s["claimed"] == 0
