"""The critic + refiner (AutoHarness): the critic picks at most N of the parent's failures to show
and names their error types; a refiner, a strategy object of the domain's, turns them into a
request and reads the new file out of the reply.

Sampling takes one failure of each error type first (so one noisy error does not crowd out the
rest), then fills up at random. The consolidated summary ("3× rejected_by_env: cell N is already
occupied; 1× code_error: IndexError…") tells the refiner what kinds of mistakes remain.

Failures are the archive's typed :class:`ratchet.contracts.Failure` (``detail`` holds what the
domain adds: the board, the action…), so the same critic serves the search and the engine. The
proposer's claim names the error types it was shown and predicts that their tasks flip. A
configuration may hide some failures from the refiner (:class:`Evidence`): they leave the pool
before it is sampled, so no request, summary or choice of what to fix sees them, while the
evaluator still scored them; a parent whose every failure is hidden is asked for a higher score
with no failure shown (:data:`NO_EVIDENCE_NOTE`).

Every step's samples are kept, not only the one proposed: one record per step in the run's
``evolve/samples.jsonl`` (:data:`SAMPLES_FILE`) holds the request, and per sample its reply, a hash
of the code read from it, its screened score and why it was unusable. Only the kept sample becomes a
candidate; the others' scores were otherwise lost, and they are what ranks a request's samples
against one another when verdicts become training signal (:mod:`ratchet.online.verdicts`).

With ``repair`` (:class:`~ratchet.evolve.proposers.repair.SampleRepair`), every screened sample
below 1.0 is climbed by its autofix and screened single-point mutants as it arrives, before the
step ranks its samples, with no model call; its record keeps the model's own screen and, under
``repair``, the screen after, the changes kept and the repaired code's hash (``kept`` then names
the repaired code when it was the best).
"""

from __future__ import annotations

import hashlib
import importlib
import random
import re
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from ratchet.contracts import (
    ArchiveView,
    BudgetExceeded,
    Candidate,
    Claim,
    Failure,
    Message,
    Proposal,
    RatchetError,
    Skip,
)
from ratchet.evolve.context import EngineContext
from ratchet.evolve.proposers.base import ModelProposer
from ratchet.evolve.proposers.config import CriticRefinerOptions
from ratchet.evolve.proposers.repair import SampleRepair

#: The run's record of every critic/refiner step's samples (JSONL, one record per step).
SAMPLES_FILE = "evolve/samples.jsonl"


def code_hash(code: str) -> str:
    """What a sample's record names its code by: the SHA-256 of the file's text."""
    return hashlib.sha256(code.encode()).hexdigest()


def error_type(failure: Failure) -> str:
    """A failure's type: its kind plus the last line of its message with numbers masked, so
    "cell 4 is occupied" and "cell 7 is occupied" are one type."""
    lines = failure.message.strip().splitlines()
    last = lines[-1] if lines else ""
    last = re.sub(r"\d+", "N", last)[:120]
    return f"{failure.kind}: {last}" if last else failure.kind


def sample_failures(failures: Sequence[Failure], rng: random.Random, limit: int = 5) -> list[Failure]:
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


def summarize(failures: Sequence[Failure], first: Collection[str] = ()) -> str:
    """The error types among ``failures`` with counts, most frequent first; the messages of the
    failures whose kind is in ``first`` (diagnoses over many steps) come before them, unabridged."""
    diagnoses = list(dict.fromkeys(f.message for f in failures if f.kind in first))
    counts = Counter(error_type(f) for f in failures if f.kind not in first)
    return "; ".join(diagnoses + [f"{n}× {t}" for t, n in counts.most_common(6)])


@runtime_checkable
class Refiner(Protocol):
    """The domain's half of the proposer: what to ask for one file and how to read the answer."""

    def request(self, code: str, shown: list[Failure], pool: list[Failure]) -> list[Message]:
        """The refiner's messages for ``code`` with the failures ``shown`` (``pool``: all of them)."""
        ...

    def new_code(self, reply: str, code: str) -> tuple[str | None, str]:
        """The new file from ``reply`` (None when it is unusable) and why it is unusable."""
        ...


@runtime_checkable
class ScreeningRefiner(Refiner, Protocol):
    """A refiner that can also rank its samples: ``screen(code)``, a cheap check of a new file in
    [0, 1] (run in the sandbox, never this process). Without it, the first usable sample is taken."""

    def screen(self, code: str) -> float: ...


@runtime_checkable
class ExplainingRefiner(ScreeningRefiner, Protocol):
    """A screening refiner that also says what its check found wrong: the step's record keeps the
    failures of every sample it screens (their error types and one counterexample), the hindsight
    a verdict turn's hint is made of (:mod:`ratchet.online.verdicts`)."""

    def screen_failures(self, code: str) -> tuple[float, list[Failure]]:
        """``screen(code)`` and the failures behind it (none when the code does not load)."""
        ...


def screen_findings(failures: Sequence[Failure]) -> str:
    """What a screen found, short: the failures counted by kind, and the first one as a
    counterexample (its message and, where the domain gives one, the board it failed on)."""
    if not failures:
        return ""
    counts = ", ".join(f"{n}× {kind}" for kind, n in Counter(f.kind for f in failures).most_common())
    first = failures[0]
    board = first.detail.get("board") if isinstance(first.detail, dict) else None
    where = f"on the board ending {' '.join(board.split())[-160:]!r}, " if isinstance(board, str) and board.strip() else ""
    return f"{counts}; for example, {where}{' '.join(first.message.split())[:240]}"


@runtime_checkable
class Evidence(Protocol):
    """Which of what went wrong the refiner is shown: a configuration may keep some failures out
    of every request (AutoHarness's ``hide_failure_types``) while the evaluator still scores them."""

    def shows(self, failure: Failure) -> bool:
        """Whether a failure of the parent (or of an earlier child) may appear in a request."""
        ...

    def shows_reason(self, reason: str) -> bool:
        """Whether the reason an earlier reply was unusable may appear in a request."""
        ...


class AllEvidence:
    """Every failure and every reason shown (the critic's default)."""

    def shows(self, failure: Failure) -> bool:
        return True

    def shows_reason(self, reason: str) -> bool:
        return True


#: What a request says when the parent failed but every failure it has is hidden (:class:`Evidence`):
#: the refiner is asked to raise the score with no failure to go on.
NO_EVIDENCE_NOTE = ("\n\nNo failure of this code is shown to you. Improve it anyway so that it scores higher: "
                    "check it against the task and fix whatever you find wrong.")


def with_note(messages: list[Message], note: str) -> list[Message]:
    """``messages`` with ``note`` at the end of the last user message (a request that ends in an
    assistant prefix keeps it last)."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last is None:
        return messages
    return [*messages[:last], {**messages[last], "content": messages[last]["content"] + note}, *messages[last + 1:]]


@dataclass(frozen=True)
class PreviousReply:
    """What was wrong with a proposer's previous reply for one parent, read from the archive (so a
    resumed step is told what the uninterrupted one was): the reason its step kept when the reply
    was unusable (the step's :class:`~ratchet.contracts.Skip`), or the error types of the child it
    made when that child scored 0 on every task it was evaluated on."""

    step: int
    problem: str

    def told(self, messages: list[Message]) -> list[Message]:
        """``messages`` with the problem said at the end of the last user message (a request that
        ends in an assistant prefix keeps it last)."""
        return with_note(messages, f"\n\nYour previous reply to this request was unusable: "
                                   f"{' '.join(self.problem.split())[:400]}. Do not repeat that mistake.")

    @classmethod
    def of(cls, archive: ArchiveView, proposer: str, parent_id: str, splits: Sequence[str],
           evidence: Evidence | None = None) -> PreviousReply | None:
        """The problem with ``proposer``'s latest reply for ``parent_id``; None when it had none
        (its child scored above 0 somewhere) or there was no reply yet, or when ``evidence`` hides
        it (the step's reason, or every failure of the child that scored 0)."""
        evidence = evidence or AllEvidence()
        # A step that asked nothing (a request that could not be built) had no reply to be told of.
        skipped = next((r for r in archive.unusable() if r.get("parent") == parent_id and r.get("proposer") == proposer
                        and r.get("model_calls", 0) > 0), None)
        made = [c for c in archive.candidates() if c.parent_id == parent_id and c.meta.get("proposer") == proposer]
        child = made[-1] if made else None
        child_step = -1 if child is None else int(child.meta.get("step", -1))
        if skipped is not None and int(skipped["step"]) > child_step:
            reason = str(skipped["reason"])
            return cls(int(skipped["step"]), reason) if evidence.shows_reason(reason) else None
        if child is None:
            return None
        results = [r for split in splits for r in archive.results(child.id, split)]
        if not results or any(r.score > 0 for r in results):
            return None
        failures = [f for r in results for f in r.failures]
        if failures and not any(evidence.shows(f) for f in failures):
            return None
        found = summarize([f for f in failures if evidence.shows(f)])
        return cls(child_step, f"its code scored 0 on every task ({found})" if found else "its code scored 0 on every task")


class CriticRefinerProposer(ModelProposer):
    """One refinement of the parent's ``options.surface`` by a :class:`Refiner`: the one
    ``options.refiner`` names, else ``ctx.extra["refiner"]``."""

    name = "critic_refiner"
    Options = CriticRefinerOptions
    options: CriticRefinerOptions

    def __init__(self, options: CriticRefinerOptions, ctx: EngineContext) -> None:
        super().__init__(options, ctx)
        self.refiner: Refiner | None = (self._refiner(options.refiner, options.refiner_options, "refiner")
                                        if options.refiner else ctx.extra.get("refiner"))
        self.fallback: Refiner | None = (self._refiner(options.fallback_refiner, options.fallback_refiner_options,
                                                       "fallback_refiner") if options.fallback_refiner else None)
        #: Which failures the requests may show (a subclass may keep some out; all by default).
        self.evidence: Evidence = AllEvidence()
        #: Climbs each screened sample by its fix and single-point mutants before the step ranks them.
        self.repair: SampleRepair | None = SampleRepair(options.repair) if options.repair is not None else None

    @staticmethod
    def _refiner(path: str, kwargs: dict[str, Any], field: str) -> Refiner:
        module, _, attr = path.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)(**kwargs)
        except (ImportError, AttributeError, TypeError, ValueError) as exc:
            raise RatchetError(f"critic_refiner proposer: cannot build {field} {path!r}: {exc}",
                               hint=f"{field} takes module:Class, built as Class(**{field}_options)") from None

    def refiner_for(self, parent: Candidate, archive: ArchiveView) -> tuple[Refiner | None, str]:
        """The refiner asked for ``parent`` and which one it is: the fallback once this proposer's
        replies for it were unusable ``fallback_after`` times (read from the archive: a resumed
        run picks the same), else the refiner."""
        if self.fallback is not None:
            unusable = sum(1 for r in archive.unusable() if r.get("parent") == parent.id and r.get("proposer") == self.name)
            if unusable >= self.options.fallback_after:
                return self.fallback, "fallback"
        return self.refiner, "refiner"

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any) -> Proposal | Skip:
        (refiner, which), surface = self.refiner_for(parent, archive), self.options.surface
        if refiner is None or surface not in parent.files:
            return self.skip(parent, "no refiner in the run's context" if refiner is None else f"the parent has no {surface}")
        every = [f if f.task_id else replace(f, task_id=r.task_id) for r in self.results(archive, parent.id) for f in r.failures]
        # Hidden failures leave the pool before anything is drawn from it: not shown, not summed
        # up, not a reason to pick one function over another; the evaluator still scored them.
        pool = [f for f in every if self.evidence.shows(f)]
        shown = sample_failures(pool, rng, self.options.max_failures_shown)
        old = parent.files[surface]
        try:
            messages = refiner.request(old, shown, pool)
        except BudgetExceeded:
            raise
        except RatchetError:
            if self.fallback is None or refiner is self.fallback:
                raise
            # The refiner cannot ask about this parent at all (e.g. the scaffold's one-function
            # request has no examples when exploring the game listed no legal moves): the step goes
            # to the fallback now. Counting unusable replies per parent never reaches the fallback
            # when the selector spreads its steps over parents (measured: Bandit, 14 of 40 steps).
            refiner, which = self.fallback, "fallback"
            messages = refiner.request(old, shown, pool)
        if every and not pool:
            messages = with_note(messages, NO_EVIDENCE_NOTE)
        previous = (PreviousReply.of(archive, self.name, parent.id, tuple(dict.fromkeys((self.options.split, "heldin"))),
                                     self.evidence) if self.options.tell_previous_reply else None)
        if previous is not None:
            messages = previous.told(messages)
        screen = refiner.screen if isinstance(refiner, ScreeningRefiner) else None
        explain = refiner.screen_failures if isinstance(refiner, ExplainingRefiner) else None
        usable: list[tuple[float, str]] = []  # (screened score, code), in the order sampled
        samples: list[dict[str, Any]] = []  # every sample paid for, usable or not (SAMPLES_FILE)
        reasons, reply = [], ""
        repairs: dict[str, dict[str, Any]] = {}  # a repaired code -> its sample's repair record
        for _ in range(self.options.samples):
            try:
                reply = self.ask(messages, rng)
            except BudgetExceeded:
                # The budget refuses a call before it is made: the samples already paid for are
                # still proposed (and judged), as the search judges a refinement's samples so far.
                if not usable:
                    self._record_samples(parent, surface, which, messages, samples, None)
                    raise
                break
            code, why = refiner.new_code(reply, old)
            sample: dict[str, Any] = {"reply": reply, "code": None if code is None else code_hash(code),
                                      "screen": None, "reason": None}
            samples.append(sample)
            if code is None or code == old or any(code == c for _, c in usable):
                sample["reason"] = (why if code is None else f"the refined {surface} is identical to the parent's"
                                    if code == old else "the same code as an earlier sample")
                reasons.append(sample["reason"])
                continue
            if screen is None or (self.options.samples == 1 and self.repair is None):  # nothing to rank by: the first usable one
                if self.repair is not None and (fix := self.repair.autofix(code)) is not None:
                    # No screen to climb by, but a missing import has one reading (measured: Bandit's
                    # whole-harness samples read harnesslib's parse_grid/action_value and random
                    # unimported, and every one scored 0 on a NameError).
                    sample["repair"] = fix.record(code_hash)
                    repairs[fix.code] = sample["repair"]
                    code = fix.code
                usable.append((0.0, code))
                break
            if explain is not None:
                score, found = explain(code)
                sample["findings"] = screen_findings(found)
            else:
                score = screen(code)
            sample["screen"] = score
            if self.repair is not None and score < 1.0:
                # Repaired as the sample arrives, so a repair that screens 1.0 spares the later samples' calls.
                repaired = self.repair.repair(code, score, screen)
                sample["repair"] = repaired.record(code_hash)
                repairs[repaired.code] = sample["repair"]
                score, code = repaired.screen, repaired.code
            usable.append((score, code))
            if usable[-1][0] >= 1.0:  # no later sample can screen higher: its calls would be wasted
                break
        if not usable:
            self._record_samples(parent, surface, which, messages, samples, None)
            return self.skip(parent, "; ".join(dict.fromkeys(reasons)), reply=reply)
        _, code = max(usable, key=lambda sample: sample[0])  # the first of the best: max keeps the first
        self._record_samples(parent, surface, which, messages, samples, code_hash(code))
        claim = Claim(target=summarize(shown) or ("(every failure of the parent hidden from the refiner)" if every
                                                  else "(the parent recorded no failure)"),
                      predicted_flips=tuple(dict.fromkeys(f.task_id for f in shown)))
        screened = ({"screened": [round(s, 4) for s, _ in usable]}
                    if screen is not None and (self.options.samples > 1 or self.repair is not None) else {})
        if code in repairs and repairs[code]["changes"]:
            screened["repaired"] = {k: repairs[code][k] for k in ("before", "after", "changes")}
        return self.proposal({surface: code}, claim, (parent.id,), shown, shown=len(shown), refiner=which, **screened)

    def _record_samples(self, parent: Candidate, surface: str, refiner: str, messages: list[Message],
                        samples: list[dict[str, Any]], kept: str | None) -> None:
        """One step's samples in the run's :data:`SAMPLES_FILE`: the request, and per sample its
        reply, code hash, screened score (None when the step did not screen it), what the screen
        found wrong (an :class:`ExplainingRefiner`'s), what its repair did (``repair``) and why it was unusable;
        ``kept``: the hash of the code proposed, repaired or not (None: the step proposed nothing).
        A hotter retry inside one sample (``HarnessRefinerProposer``) is not a sample of its own:
        its reply is recorded as the answer to the step's request."""
        run = self.ctx.run if self.ctx is not None else None
        if run is None or not samples:
            return
        run.append_jsonl(SAMPLES_FILE, {"proposer": self.name, "parent": parent.id, "surface": surface,
                                        "refiner": refiner, "request": [dict(m) for m in messages],
                                        "samples": samples, "kept": kept, "at": time.time()})
