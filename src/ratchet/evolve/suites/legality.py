"""AutoHarness's legality judge as a suite: a candidate's ``harness.py`` plays a TextArena game by
code alone, each task one env seed, scored by its legal-action rate there.

The suite builds :class:`ratchet.autoharness.evaluate.LegalityEvaluator` from its options: the
game's env factory (valid-move lists stripped, as the search evaluates) and the runtime the
``ratchet autoharness`` search runs harness code in, the sandbox, with ``harnesslib`` importable.
Candidate code never runs in the engine's process: only a test may hand in another runtime
factory, as ``ctx.extra["harness_runtime"]`` (e.g. ``InProcessHarness``).

The engine evaluates one task at a time, so each env plays alone here, where the search plays its
envs in lockstep; an env's legal rate does not depend on the others, but the harness's own random
draws are seeded per batched call, so a randomized harness may play differently than in the search.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ratchet.autoharness import runtime
from ratchet.autoharness.evaluate import LegalityEvaluator
from ratchet.autoharness.runtime import RuntimeFactory, sandbox_runtime_factory
from ratchet.contracts import Candidate, Task, TaskResult
from ratchet.envs import registry, textarena_env
from ratchet.envs.registry import env_factory_for
from ratchet.evolve.canary import Canary
from ratchet.evolve.context import EngineContext
from ratchet.evolve.suites.config import LegalityOptions
from ratchet.evolve.suites.fingerprint import fingerprint

VERSION = 1

#: The canary: code that fails on every call must score 0 (a grader that counted a code error as a
#: legal step would accept anything).
CRASHING_HARNESS = """def propose_action(board):
    raise RuntimeError("canary: this harness fails on every call")


def is_legal_action(board, action):
    raise RuntimeError("canary: this harness fails on every call")
"""


class LegalitySuite:
    """Env seeds of one TextArena game as tasks, judged by the harness's legal rate."""

    name = "legality"

    def __init__(self, options: LegalityOptions, ctx: EngineContext | None = None) -> None:
        self.options = options
        # Kept instead of ctx: the suite calls no model, and the default factory is built per
        # evaluation so that the suite pickles for the process executors.
        self.injected: RuntimeFactory | None = None if ctx is None else ctx.extra.get("harness_runtime")

    def judge(self) -> LegalityEvaluator:
        o = self.options
        runtime_factory = self.injected or sandbox_runtime_factory(o.call_timeout_s)
        return LegalityEvaluator(env_factory_for(o.game), runtime_factory, o.seeds, o.steps_per_env, o.step_cap,
                                 o.action_shape, o.game)

    def tasks(self) -> list[Task]:
        return self.judge().tasks()

    def canaries(self) -> list[Canary]:
        return [Canary("crashing-harness", self.tasks()[0], {"harness.py": CRASHING_HARNESS}, 0.0)]

    def fingerprint(self) -> str:
        try:
            arena = version("textarena")
        except PackageNotFoundError:
            arena = "missing"
        where = "sandbox" if self.injected is None else f"injected:{getattr(self.injected, '__qualname__', '?')}"
        settings = {"suite": self.name, "version": VERSION, "textarena": arena, "runtime": where,
                    "judge": self.judge().fingerprint(), **self.options.model_dump()}
        # harnesslib: what a harness may import decides its score as much as the harness does.
        sources = [Path(m.__file__) for m in (runtime, registry, textarena_env)]
        return fingerprint(settings, [*sources, runtime.HARNESSLIB_PATH, Path(__file__)])

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        return self.judge().evaluate(candidate, tasks, seed)
