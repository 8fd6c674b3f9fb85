"""Stand-ins for a curriculum's models and trainer: a scripted model per weight version, and a
training that feeds through ``verdicts.feed`` and publishes a dummy adapter (the real trainer is
the real-model test's)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from fakes import FIXED, LOOSE, fenced

from ratchet.curriculum.training import AWAITING
from ratchet.models import ScriptedModel
from ratchet.online import verdicts
from ratchet.online.queue import TurnQueue
from ratchet.online.status import QUEUE_NAME, VERSIONS_NAME, online_dir
from ratchet.online.versions import VersionStore

#: Per version, the harness its model writes: the base's is wrong, v1's right, v2's wrong again.
CODES = {0: LOOSE, 1: FIXED, 2: LOOSE}


class Killed(BaseException):
    """A kill: not an Exception, so nothing on the way catches it."""


class Models:
    """A scripted model per version (``codes``); ``kill_at``: the call (counted over all models)
    that is killed instead of answered."""

    def __init__(self, codes: dict[int, str] = CODES, kill_at: int | None = None) -> None:
        self.codes, self.kill_at, self.calls, self.asked = codes, kill_at, 0, []

    def spec(self, version: int) -> str:
        return f"scripted:v{version}"

    def __call__(self, version: int) -> ScriptedModel:
        self.asked.append(version)

        def reply(messages: Any) -> str:
            self.calls += 1
            if self.kill_at is not None and self.calls == self.kill_at:
                raise Killed(f"killed at call {self.calls}")
            return fenced(self.codes[version])

        return ScriptedModel(reply, name=f"scripted@v{version}")


class Training:
    """Feeds as ``serve feed`` does (no policy: no token ids) and publishes one dummy adapter per
    ``train``, unpromoted, as the real loop's games-gate hook leaves it. ``kill``: the phase
    (``feed``, ``train``) killed, after its work was done and before it returned."""

    def __init__(self, run_dir: Path, kill: str | None = None) -> None:
        self.queue = TurnQueue(online_dir(run_dir) / QUEUE_NAME)
        self.versions = VersionStore(online_dir(run_dir) / VERSIONS_NAME)
        self.kill, self.fed, self.trained = kill, [], []

    def feed(self, runs: Sequence[Any], version: int, *, skip: Collection[str] = ()) -> int:
        added = 0
        for run in runs:
            added += verdicts.feed(run, self.queue, policy_version=version, skip=skip)
            if self.kill == "feed":  # after the first run's turns
                raise Killed("killed while feeding")
        self.fed.append(added)
        return sum(t.turn_id not in skip for run in runs for t, _ in verdicts.verdict_turns(run))

    def train(self, version: int) -> tuple[int | None, str]:
        adapter = self.versions.root.parent / f"adapter-{len(self.trained)}"
        adapter.mkdir(exist_ok=True)
        (adapter / "adapter_config.json").write_text("{}")
        published = self.versions.publish(adapter, {"parent_version": version, "evaluation": {"promote": False,
                                                                                             "reason": AWAITING}},
                                          promote=False)
        self.trained.append(published.number)
        if self.kill == "train":
            raise Killed("killed after publishing")
        return published.number, f"v{published.number} from v{version}"
