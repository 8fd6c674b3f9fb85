"""The ``repair`` idea on the engine as the dedicated search runs it: single-point mutants of the
harness (``evolve.proposers.mutation.mutants``, no model call) screened on the dense checks first,
named ``ratchet.autoharness.screened:ScreenedMutationProposer``.

The engine's plain ``mutation`` proposer draws one mutant at random and leaves the judging to the
suite and the gate; most mutants of a program are worse, so most of those proposals cost a full
evaluation to learn it. The search scores its mutants on the dense checks (the labelled
transitions' unit tests, the game's legal lists: :mod:`ratchet.envs.harness.dense`), which take
milliseconds and no rollout, and only judges those the checks prefer. This proposer does the same:
it screens up to ``max_mutants`` mutants of ``harness.py`` in the sandbox and proposes the one that
scores highest on the checks, only when it scores higher than the parent; else it skips, so the
engine's step goes to another proposer.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import Field

from ratchet.envs.harness.dense import DenseCheck, build_checks, dense_of, run_checks
from ratchet.envs.harness.runtime import RuntimeFactory, sandbox_runtime_factory
from ratchet.config import Settings
from ratchet.contracts import ArchiveView, Candidate, Claim, Proposal, RatchetError, Skip
from ratchet.envs.explore import harvest
from ratchet.envs.registry import env_factory_for
from ratchet.evolve.proposers.base import BaseProposer
from ratchet.evolve.proposers.mutation import mutants


class ScreenedMutationOptions(Settings):
    """Mutants of one surface screened on the game's dense checks before one is proposed."""

    surface: str = "harness.py"
    """The file mutated."""
    game: str
    """The TextArena game explored for the checks (as the legality suite's ``game``)."""
    checks: list[Literal["transitions", "legal_actions"]] = Field(default_factory=lambda: ["transitions", "legal_actions"])
    """The dense checks that screen (``dense.build_checks``); a check that does not apply to a
    harness (``legal_actions`` without that function) gives no metric and does not count."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1])
    """Env seeds the game is explored on (once, on the first proposal) for the checks."""
    transitions_per_seed: int = Field(default=40, ge=1)
    """Transitions harvested per explored seed."""
    max_mutants: int = Field(default=40, ge=1)
    """Most mutants screened per proposal (drawn in the engine's random order)."""
    rng_seed: int = 0
    """Seed of the harvest and of the unit tests' balanced subset (the suite's, so the checks agree)."""
    call_timeout_s: float = Field(default=2.0, gt=0)
    """Per-call limit of a harness function in the sandbox."""


class ScreenedMutationProposer(BaseProposer):
    """Proposes the mutant of ``harness.py`` the dense checks score highest, when above its parent."""

    name = "screened_mutation"
    Options = ScreenedMutationOptions

    def __init__(self, options: ScreenedMutationOptions, ctx: Any = None) -> None:
        self.options = options
        self.ctx = ctx
        injected = None if ctx is None else getattr(ctx, "extra", {}).get("harness_runtime")
        self.runtime_factory: RuntimeFactory = injected or sandbox_runtime_factory(options.call_timeout_s)
        self._checks: list[DenseCheck] | None = None

    def checks(self) -> list[DenseCheck]:
        """The dense checks, the game explored for them once (on the first proposal)."""
        o = self.options
        if self._checks is None:
            transitions = harvest(env_factory_for(o.game), env_factory_for(o.game, hints=True), o.seeds,
                                  o.transitions_per_seed, random.Random(o.rng_seed))
            self._checks = build_checks(o.checks, transitions, o.rng_seed)
        return self._checks

    def score(self, code: str) -> float | None:
        """The mean of the dense checks on ``code`` (None: none applied); 0 when it does not load."""
        try:
            with self.runtime_factory({self.options.surface: code}) as runtime:
                return dense_of(run_checks(self.checks(), runtime, code)[0])
        except RatchetError:
            return 0.0

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any) -> Proposal | Skip:
        surface = self.options.surface
        if surface not in parent.files:
            return self.skip(parent, f"the parent has no {surface}")
        rng = rng if isinstance(rng, random.Random) else random.Random(0)
        found = mutants(parent.files[surface], rng=rng, limit=self.options.max_mutants)
        if not found:
            return self.skip(parent, f"{surface} parses into no mutable program")
        base = self.score(parent.files[surface])
        if base is None:
            return self.skip(parent, "no dense check applies to the parent's harness, so nothing screens its mutants")
        scored = [(self.score(m.code) or 0.0, i) for i, m in enumerate(found)]
        best, index = max(scored, key=lambda si: (si[0], -si[1]))  # the first of the best
        if best <= base:
            return self.skip(parent, f"none of {len(found)} mutants scores above the parent's {base:.3f} on the dense checks")
        pick = found[index]
        claim = Claim(target=f"{surface}: {pick.change}",
                      root_cause=f"a single-point mutation (no model), dense checks {base:.3f} -> {best:.3f}", predicted_flips=())
        return Proposal(files={surface: pick.code}, claim=claim, proposer=self.name, parents=(parent.id,),
                        meta={"surfaces": [surface], "change": pick.change, "screened": len(found),
                              "dense_parent": round(base, 4), "dense_mutant": round(best, 4)})
