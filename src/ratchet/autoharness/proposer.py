"""The critic + refiner proposer with the dedicated search's ways of asking the model, for
``ratchet autoharness`` on the engine: named ``ratchet.autoharness.proposer:HarnessRefinerProposer``.

It is the engine's ``critic_refiner`` (the critic picks the failures, a refiner builds the request
and reads the reply) with three of the search's ideas, each an option:

- ``grammar``: every call constrained by a GBNF grammar to one python block (``envs.answers.CODE_BLOCK_GRAMMAR``).
- ``hotter_retry`` (the ``novelty`` idea's retry): a sample that is its parent or an earlier sample
  of the step once comments and layout are dropped (``mutation.normalized``) is no new program;
  it is asked again at once, ``hotter_retry`` hotter per repeat (at most 1.3), its request told not
  to repeat it, and does not use up one of the step's samples (as in the search: up to ``samples``
  repeats a step; past them a repeat counts as an unusable sample). The engine's
  ``static.novelty`` drops twins of archived programs besides.
- ``hide_failure_types``: those types' failures never shown (``HiddenTypes``; no repeat note with ``no_change``).
- ``fit_context`` (every model proposer's, ``ModelProposer.fitted``): fewer failed steps shown,
  down to none, as the search gives those up first, until the request fits the model's window.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ratchet.envs.harness.failure_types import FailureType, HiddenTypes, TypeNames
from ratchet.autoharness.refine import Restartable
from ratchet.contracts import ArchiveView, Candidate, Failure, Message, Proposal, Skip
from ratchet.envs.answers import CODE_BLOCK_GRAMMAR
from ratchet.evolve.context import EngineContext
from ratchet.evolve.proposers.config import CriticRefinerOptions
from ratchet.evolve.proposers.critic import (
    CriticRefinerProposer,
    ExplainingRefiner,
    Refiner,
    ScreeningRefiner,
    with_note,
)
from ratchet.evolve.proposers.mutation import normalized
from ratchet.evolve.proposers.parsing import closed
from ratchet.models.request import continued

#: What the request says after a repeated sample (the search's ``novelty`` note).
REPEAT_NOTE = ("\n\nYour last reply was code that was already tried, unchanged, and it is wrong. "
               "Write a different implementation: change the logic, not the formatting.")


class HarnessRefinerOptions(CriticRefinerOptions):
    """``critic_refiner``'s options and the search's ways of asking (see the module's docstring)."""

    grammar: bool = False
    """Constrain every reply to one ```python block with a GBNF grammar (the ``grammar`` idea);
    a backend that cannot honour a grammar refuses the call."""
    hotter_retry: float = Field(default=0.0, ge=0.0, le=1.0)
    """Temperature added per repeated sample of a step, the request told not to repeat it (the
    ``novelty`` idea's retry: 0.3); 0 asks every sample alike."""
    hide_failure_types: TypeNames = Field(default_factory=list)
    """Failure types the requests never show (``AutoHarnessConfig.hide_failure_types``)."""


class _Asking:
    """A refiner as this proposer asks it: its requests fitted to the window, its replies'
    repeats counted (for the hotter retry)."""

    def __init__(self, refiner: Refiner, owner: HarnessRefinerProposer) -> None:
        self.inner, self.owner = refiner, owner

    def request(self, code: str, shown: list[Failure], pool: list[Failure]) -> list[Message]:
        self.owner.begin_step(code, self.inner)
        return self.owner.fitted(lambda n: self.inner.request(code, shown[:n], pool), len(shown))

    def new_code(self, reply: str, code: str) -> tuple[str | None, str]:
        new, why = self.inner.new_code(reply, code)
        if new is not None and self.owner.repeated(new):
            return None, "a repeat of a program already tried (comments and layout aside)"
        return new, why


class _ScreeningAsking(_Asking):
    inner: ScreeningRefiner

    def screen(self, code: str) -> float:
        return self.inner.screen(code)


class _ExplainingAsking(_ScreeningAsking):
    inner: ExplainingRefiner

    def screen_failures(self, code: str) -> tuple[float, list[Failure]]:
        return self.inner.screen_failures(code)


def asking(refiner: Refiner | None, owner: HarnessRefinerProposer) -> Refiner | None:
    """``refiner`` as ``owner`` asks it, screening (and explaining its screen) still where the refiner does."""
    if refiner is None:
        return None
    if isinstance(refiner, ExplainingRefiner):
        return _ExplainingAsking(refiner, owner)
    return _ScreeningAsking(refiner, owner) if isinstance(refiner, ScreeningRefiner) else _Asking(refiner, owner)


class HarnessRefinerProposer(CriticRefinerProposer):
    """``critic_refiner`` with the grammar, the hotter retry and requests fitted to the window."""

    name = "harness_refiner"
    Options = HarnessRefinerOptions
    options: HarnessRefinerOptions

    def __init__(self, options: HarnessRefinerOptions, ctx: EngineContext) -> None:
        super().__init__(options, ctx)
        self.evidence = HiddenTypes(options.hide_failure_types)
        self.refiner = asking(self.refiner, self)
        self.fallback = asking(self.fallback, self)
        self.repeats = 0
        self._seen: set[str] = set()
        self._step: tuple[Refiner, str] | None = None  # the step's refiner and parent code

    def begin_step(self, parent_code: str, refiner: Refiner | None = None) -> None:
        """A new step's request (by ``refiner``): no repeats yet, the parent the first program known."""
        self.repeats, self._seen = 0, {normalized(parent_code)}
        self._step = (refiner, parent_code) if refiner is not None else None

    def _repeats_known(self, reply: str) -> bool:
        """Whether ``reply`` reads (by the step's refiner) as a program this step already knows."""
        if self._step is None:
            return False
        refiner, parent_code = self._step
        code, _ = refiner.new_code(reply, parent_code)
        return code is not None and normalized(code) in self._seen

    def repeated(self, code: str) -> bool:
        """Whether ``code`` is the parent or an earlier sample of this step (normalized); counts it."""
        key = normalized(code)
        if key in self._seen and self.options.hotter_retry:
            self.repeats += 1
            return True
        self._seen.add(key)
        return False

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any) -> Proposal | Skip:
        self.repeats = 0
        return super().propose(parent, archive, rng)

    def ask(self, messages: list[Message], rng: Any) -> str:
        """One sample: the base call, hotter and told not to repeat after repeated samples, with the
        grammar; a repeat is asked again at once (up to ``samples`` repeats a step), so it does not
        use up one of the step's samples."""
        reply = self._call(messages, rng)
        while (self.options.hotter_retry and self.ctx.model is not None and self.repeats < self.options.samples
               and self._repeats_known(reply)):
            self.repeats += 1
            reply = self._call(messages, rng)
        return reply

    def _call(self, messages: list[Message], rng: Any) -> str:
        if self.ctx.model is None:
            return super().ask(messages, rng)
        seed = int(rng.random() * 2**31)
        self.asks += 1
        temperature = self.options.temperature
        if self.repeats:
            temperature = min(1.3, temperature + self.options.hotter_retry * self.repeats)
            if FailureType.NO_CHANGE not in self.options.hide_failure_types:  # the note shows a no_change failure
                messages = with_note(messages, REPEAT_NOTE)  # the user's request's end, not an assistant prefix
        extra = {"grammar": CODE_BLOCK_GRAMMAR} if self.options.grammar else {}
        completion = self.ctx.model.complete(messages, temperature=temperature, max_tokens=self.options.max_tokens,
                                             seed=seed, **extra)
        text = continued(messages, completion.text)
        return closed(text) if completion.finish_reason == "stop" else text


class FreshRootOptions(HarnessRefinerOptions):
    """``harness_refiner``'s options, and when a fresh root is asked for."""

    after_stall: int = Field(default=0, ge=0)
    """0: a fresh root whenever this proposer is drawn (the ``fresh_roots`` idea: an arm beside
    refining, its weight in the proposer mix); N > 0: only once the last N candidates were all
    rejected (the ``restarts`` idea: 2 in the search), else it skips."""


class FreshRootProposer(HarnessRefinerProposer):
    """A new root instead of a refinement (the search's ``fresh_roots`` and ``restarts``): the
    refiner asked about the run's starting harness, with its failures, as the run's first step was.
    The child still faces the gate against the selected parent, so it is kept only when it beats it.
    A refiner that is :class:`~ratchet.autoharness.refine.Restartable` (the scaffold's) shows the
    n-th restart other example states, as the search's restarts do."""

    name = "fresh_root"
    Options = FreshRootOptions
    options: FreshRootOptions

    _restart = 0

    def refiner_for(self, parent: Candidate, archive: ArchiveView) -> tuple[Refiner | None, str]:
        refiner, which = super().refiner_for(parent, archive)
        if self._restart and isinstance(refiner, _Asking) and isinstance(refiner.inner, Restartable):
            return asking(refiner.inner.restarted(self._restart), self), which
        return refiner, which

    def stalled(self, archive: ArchiveView) -> int:
        """How many candidates since the last accepted one (all of them when none was)."""
        every = [c.id for c in archive.candidates()]
        kept = {c.id for c in archive.candidates("accepted")}
        last = max((i for i, cid in enumerate(every) if cid in kept), default=-1)
        return len(every) - 1 - last

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any) -> Proposal | Skip:
        if self.options.after_stall and self.stalled(archive) < self.options.after_stall:
            return self.skip(parent, f"no restart yet: fewer than {self.options.after_stall} rejected candidates in a row")
        every = archive.candidates()
        if not every:
            return self.skip(parent, "the archive holds no starting harness yet")
        # The run's first candidate (the starting harness) with its own failures, whichever parent
        # was drawn; a refiner that can (Restartable) asks it from other example states each restart,
        # counted from the archive so a resumed run draws the same ones.
        fresh = every[0]
        self._restart = 1 + sum(1 for c in every if (c.meta.get("proposal") or {}).get("fresh_root"))
        proposal = super().propose(fresh, archive, rng)
        if isinstance(proposal, Proposal):
            proposal = Proposal(files=proposal.files, claim=proposal.claim, proposer=self.name, parents=(parent.id,),
                                meta={**proposal.meta, "fresh_root": True}, shown=proposal.shown)
        return proposal
