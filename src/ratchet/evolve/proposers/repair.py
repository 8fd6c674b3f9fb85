"""Repair of a refiner's samples before a step ranks them, no model call: the dedicated AutoHarness
search's ``repair`` and ``autofix`` ideas applied to every screened sample, as the search applies
them to every sample it judges.

A small model's sample is often one token from right (an inverted condition, an off-by-one); a
step that proposes only the best sample as written leaves that near miss for a later step to find,
if the selector ever draws it again. :class:`SampleRepair` climbs each sample that screens below
1.0 instead: its one-reading slips fixed (:func:`~ratchet.evolve.proposers.mutation.fixed`, kept
unless it screens lower), then up to ``rounds`` rounds of single-point mutants
(:func:`~ratchet.evolve.proposers.mutation.mutants`), each round's best kept only when it screens
higher than the code it came from. The screen is the refiner's own (``ScreeningRefiner.screen``,
run in the sandbox), so this module knows nothing of games or harnesses.

The mutants of a code are drawn by a generator seeded with the code's hash: the same sample gets
the same repair in a resumed run.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ratchet.evolve.proposers.config import SampleRepairOptions
from ratchet.evolve.proposers.mutation import fixed, game_spellings, mutants


@dataclass
class Repaired:
    """What the repair of one sample did: its code and screen after, and the changes on the way."""

    code: str
    """The repaired code (the sample's own when nothing screened higher)."""
    screen: float | None
    """Its screen (None: not screened, :meth:`SampleRepair.autofix`)."""
    before: float | None
    """The sample's screen as the model wrote it (None: not screened)."""
    changes: list[str] = field(default_factory=list)
    """The kept changes in order (``autofix: …``, then one mutant's change per round climbed)."""
    screened: int = 0
    """Mutants and fixes screened (each one sandbox run of the refiner's check)."""

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def record(self, code_hash: Callable[[str], str]) -> dict[str, Any]:
        """The sample record's ``repair`` entry (``evolve/samples.jsonl``)."""
        return {"before": None if self.before is None else round(self.before, 4),
                "after": None if self.screen is None else round(self.screen, 4), "changes": list(self.changes),
                "screened": self.screened, "code": code_hash(self.code) if self.changed else None}


class SampleRepair:
    """Climbs one sample's screen by its autofix and single-point mutants (see the module's docstring)."""

    def __init__(self, options: SampleRepairOptions) -> None:
        self.options = options
        self._spelled: dict[str, str] | None = None

    def spelled(self) -> dict[str, str]:
        """The bare action words and how they are written (``autofix``), read once from the game."""
        if self._spelled is None:
            o = self.options
            self._spelled = dict(o.spelled) or (game_spellings(o.game) if o.game else {})
        return self._spelled

    def autofix(self, code: str) -> Repaired | None:
        """``code`` with its slips of one reading fixed, for a refiner that cannot screen (its
        whole-harness fallback): unscreened, so no climb and no screen (``before``/``after`` None);
        None when ``autofix`` is off or there is nothing to fix."""
        if not self.options.autofix or (fix := fixed(code, self.spelled(), self.options.imports)) is None:
            return None
        return Repaired(fix.code, None, None, [f"autofix: {fix.change}"])

    def repair(self, code: str, score: float, screen: Callable[[str], float]) -> Repaired:
        """``code`` (which screens ``score``) climbed as far as its fix and mutants go, never lower."""
        out = Repaired(code, score, score)
        if score >= 1.0:
            return out
        if self.options.autofix and (fix := fixed(code, self.spelled(), self.options.imports)) is not None:
            # A slip with one reading: kept unless the check prefers the slip (a fix may matter
            # only where the check does not look, e.g. how an action is written).
            fixed_score = screen(fix.code)
            out.screened += 1
            if fixed_score >= out.screen:
                out.code, out.screen = fix.code, fixed_score
                out.changes.append(f"autofix: {fix.change}")
        for _ in range(self.options.rounds):
            if out.screen >= 1.0:
                break
            rng = random.Random(hashlib.sha256(out.code.encode()).hexdigest())
            best: tuple[float, str, str] | None = None
            for mutant in mutants(out.code, functions=self.options.functions, rng=rng, limit=self.options.mutants):
                mutant_score = screen(mutant.code)
                out.screened += 1
                if mutant_score > (best[0] if best else out.screen):
                    best = (mutant_score, mutant.code, mutant.change)
                    if mutant_score >= 1.0:  # nothing screens higher: the round's other mutants are not run
                        break
            if best is None:
                break
            out.screen, out.code = best[0], best[1]
            out.changes.append(best[2])
        return out
