"""The gate before promotion: a new weight version is served only if every check passes.

Two sets of held-out cases feed it:

* preference cases ``{messages, preferred, dispreferred}``: a conversation with the reply users
  prefer and the one they correct (written by the person running the server, or collected from
  judged turns kept out of training);
* guard cases ``{messages, reference}``: neutral prompts with a good reference answer, which say
  whether the model is still the model (optional).

A candidate is promoted only when ALL of these hold (each measured by teacher forcing with the
trainer's fp32 weights, no generation):

1. ``preference``: the mean margin ``log p(preferred) − log p(dispreferred)`` is not below the
   current version's by more than ``tolerance`` nats;
2. ``preferred_floor``: the mean per-token log p(preferred) is not below the BASE model's by more
   than ``preferred_drop`` nats/token. The margin alone is blind to collapse: when a model falls
   into one-word answers and ``******``, both log-probs fall and their difference can still grow;
3. ``guard``: the mean per-token log p(reference) of the guard cases is not below the base's by
   more than its noise band, ``max(guard_tolerance, guard_z · standard error of the per-case
   differences)`` (only with guard cases);
4. ``tasks``: greedy replies to checkable neutral tasks (``{messages, answer}``) solve at most
   ``tasks_drop`` fewer than the base model's (only with tasks). Teacher forcing alone missed a
   collapse: a version that answered every prompt "Ah, hello there! I'm here to help…" still gave
   the references good log-probs and a KL of 0.93;
5. ``kl``: the exact full-vocabulary KL(candidate ‖ base) per token, at the reply positions of the
   guard references and preferred replies, is at most ``max_kl``.

A version failing any check is kept on disk (``promoted: false``) and never served; its record
(``version.json`` → ``metrics.evaluation``) lists every check with its numbers and ``failed``
names the ones that failed, which ``ratchet serve status`` prints.

Without a held-out file, the gate scores candidates on the server's own held-out conversations
(:mod:`ratchet.online.gate`, ``trainer.gate.heldout``) on top of the built-in tasks and the KL
bound here; after promotion the served reward is watched (:mod:`ratchet.online.watch`,
``trainer.gate.watch``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field

from ratchet.config import Settings
from ratchet.contracts import RatchetError
from ratchet.online.holdout import FixedShare, configured_policy
from ratchet.stats import standard_error


class HeldOutConfig(Settings):
    """The gate on the server's own held-out conversations (:mod:`ratchet.online.gate`), used when
    no ``trainer.heldout_path`` is set and ``builtin`` is on."""

    share: float = Field(default=0.2, ge=0, lt=1)
    """Share of conversations whose judged turns never train and are what candidates are scored on,
    chosen by a stable hash of the session id (after the early ones of ``policy``), so a conversation
    is wholly on one side. 0 holds nothing out: the built-in tasks and the KL bound gate alone. A
    server whose clients send a single session id holds out all of its turns or none (with
    ``fill_first`` none: the first conversation trains): set 0 there, or send one id per conversation."""
    policy: Literal["fill_first", "fixed"] = "fill_first"
    """Which conversations are held out, decided once per conversation at its first judged turn
    (:mod:`ratchet.online.holdout`). ``fill_first``: ``early_share`` of them, by a running count,
    until ``min_turns`` praised or corrected turns are held out, then ``share`` by the session id's
    hash; each decision is recorded in the queue file and stands. ``fixed``: ``share`` by the hash
    from the start; at 20% of two dozen conversations the first versions were gated without the
    held-out checks (``bench/results/online_personalization.md``)."""
    early_share: float = Field(default=0.75, ge=0, le=1)
    """Share of new conversations held out while the held-out set is filling (``fill_first`` only;
    never less than ``share``). 0.75: the first conversation trains and the next three are held out,
    so with two judged turns per conversation the set has 6 before the trainer has its first 4
    training turns from later conversations; at 0.5 four conversations give it 4 (< ``min_turns``)
    and the first version is gated without it. 1 holds out every conversation until it is filled."""
    min_turns: int = Field(default=5, ge=1)
    """Fewest praised or corrected held-out turns for the held-out checks (and for each of its
    praised / corrected parts). 5 is the fewest with which the exact sign-flip test can reject at
    ``alpha`` 0.05 at all (1/2^5 = 0.031). With fewer the version's record says so and it is gated
    by the KL bound and the guard tasks only."""
    max_turns: int = Field(default=64, ge=1)
    """The newest held-out turns scored: each costs one teacher-forced pass per candidate and one per
    current version (cached)."""
    alpha: float = Field(default=0.05, gt=0, lt=1)
    """Level of the one-sided paired sign-flip test of "the candidate moved the held-out replies the
    wrong way" (the engine gate's test, :func:`ratchet.stats.sign_flip_p`)."""
    tolerance: float = Field(default=0.02, ge=0)
    """Smallest mean move the wrong way (nats per reply token, signed by the feedback) that refuses,
    however significant: any update shifts every log-prob a little. A setting, not a measured noise
    band: per-token log-probs are computed exactly, so the noise is which turns are held out, and
    the paired test carries that."""
    text_checks: bool = True
    """Also compare greedy replies to held-out prompts by the text checks that the corrections ask
    for (:data:`ratchet.online.gate.TEXT_CHECKS`: shorter, longer, bullets, a language)."""
    text_prompts: int = Field(default=6, ge=1)
    """Held-out prompts (the newest) the text checks generate on; each costs one greedy generation per
    candidate and one per current version (cached)."""
    text_max_tokens: int = Field(default=96, ge=8)
    """Reply budget of each text check generation; long enough that a reply growing from ~40 words
    to ~50 is still seen growing."""
    length_slack: float = Field(default=0.1, ge=0)
    """A length check fails when the candidate's mean words per reply moves the wrong way by more
    than this fraction of the current version's (:class:`ratchet.online.gate.Length`; its record
    also gives each prompt's change and a paired p that does not decide)."""
    share_slack: float = Field(default=0.2, ge=0, le=1)
    """A share check (bullets, language) fails when the candidate's share of replies that have it
    falls by more than this below the current version's (0.2: one of six replies may flip)."""
    corrections: int = Field(default=200, ge=1)
    """The newest corrections read to infer which text checks apply."""


class RewardWatchConfig(Settings):
    """The watch on the reward of served turns (:mod:`ratchet.online.watch`), run by the server."""

    enabled: bool = True
    """Roll back a version whose served reward fell beyond noise below the version it replaced."""
    min_turns: int = Field(default=8, ge=2)
    """Judged turns each of the two versions needs before they are compared."""
    alpha: float = Field(default=0.05, gt=0, lt=1)
    """Level of the one-sided test of "the current version's mean served reward is lower"."""
    min_drop: float = Field(default=0.1, ge=0)
    """Smallest fall of the mean reward (on the −1..+1 scale) that rolls back, however significant."""


class GateConfig(Settings):
    """The promotion gate's checks beyond the held-out preference margin (``trainer.heldout_path``)."""

    guard_path: Path | None = None
    """JSONL of guard cases ({messages, reference}): neutral prompts whose reference answers must
    stay as likely as under the base model. None skips the guard check."""
    guard_tolerance: float = Field(default=0.3, ge=0)
    """Noise band of the guard (nats per token): a drop of the mean per-token log p(reference) below
    the base's by at most this passes. Measured on the 0.5B with the base's own greedy answers as
    references (docs/online.md): the first served greeting version moved it by −0.23, an overshooting
    update at lr 1e-3 by −3.5."""
    guard_z: float = Field(default=0.0, ge=0)
    """Widen the band to this many standard errors of the per-case changes (0: the fixed band only).
    Off by default: a collapse damages cases unevenly, so its own spread would widen its band (the
    overshooting update above had a 3-SE band of ±3.1)."""
    preferred_drop: float = Field(default=1.0, ge=0)
    """Floor of the preferred replies: their mean per-token log-prob may fall at most this far (nats
    per token) below the base model's."""
    tasks_path: Path | None = None
    """JSONL of checkable tasks ({messages, answer}): neutral prompts whose greedy reply must contain
    the answer (case-insensitive). Teacher forcing cannot see a model that still scores good answers
    well but no longer writes them; this check generates. None skips it."""
    tasks_max_tokens: int = Field(default=24, ge=1)
    """Reply budget of each task's greedy generation."""
    tasks_drop: int = Field(default=1, ge=0)
    """How many fewer tasks than the base model solved may still pass (the noise of a small set)."""
    max_kl: float = Field(default=1.0, gt=0)
    """Largest KL(candidate ‖ base) per reply token on the held-out replies; the collapse measured
    8.2, healthy versions < 0.5."""
    builtin: bool = True
    """Without ``trainer.heldout_path`` the gate still runs: the built-in neutral tasks
    (:data:`BUILTIN_TASKS`, unless ``tasks_path`` names others) must stay solved, and the KL to base
    on the base's own replies to them must stay under ``max_kl``. There is no preference check (no
    one has said what is preferred) unless the server holds out its own conversations (``heldout``).
    False promotes every update when no held-out file is given."""
    heldout: HeldOutConfig = Field(default_factory=HeldOutConfig)
    """Without ``trainer.heldout_path``: the share of the server's own judged conversations held out
    from training, and how candidates are scored on them (:mod:`ratchet.online.gate`)."""
    watch: RewardWatchConfig = Field(default_factory=RewardWatchConfig)
    """After promotion: the served-reward watch that rolls a version back (:mod:`ratchet.online.watch`)."""


#: Neutral tasks any chat model of the catalog answers (checked by substring, case-insensitive, so a
#: learned greeting, capitals or a bullet list still pass): the default gate's proof the model is still
#: the model. Distinct from the personalization bench's guard tasks, which measure it independently.
BUILTIN_TASKS: tuple[tuple[str, str], ...] = (
    ("What is 6 times 7? Answer with the number.", "42"), ("What is the capital of Italy?", "rome"),
    ("What is 20 plus 5? Answer with the number.", "25"), ("How many hours are in a day?", "24"),
    ("What is the opposite of hot?", "cold"), ("What is the capital of Germany?", "berlin"),
    ("What is 12 minus 4? Answer with the number.", "8"), ("Which animal says meow?", "cat"),
)


@dataclass(frozen=True)
class HeldOutCase:
    """A prompt (chat messages) with the reply users prefer and the one they correct."""

    messages: list[dict[str, Any]]
    preferred: str
    dispreferred: str


@dataclass(frozen=True)
class Task:
    """A neutral prompt whose greedy reply must contain ``answer`` (case-insensitive)."""

    messages: list[dict[str, Any]]
    answer: str


@dataclass(frozen=True)
class GuardCase:
    """A neutral prompt with a good reference answer."""

    messages: list[dict[str, Any]]
    reference: str


class SequenceScorer(Protocol):
    """What the gate needs of a policy, e.g. :class:`ratchet.online.trainer.Trainer`.

    ``version`` is the number of the weights it holds now (0 = base): the gate caches the current
    version's scores by it, so the training loop may ask for them before every update.
    """

    version: int

    def sequence_logprob(self, messages: Sequence[dict[str, Any]], response: str, *, base: bool = False) -> float: ...

    def mean_token_logprob(self, messages: Sequence[dict[str, Any]], response: str, *, base: bool = False,
                           end_of_turn: bool = False, tools: Sequence[dict[str, Any]] | None = None) -> float:
        """Mean per-token log p(response | messages); ``end_of_turn``: the reply stopped there, so its
        end-of-turn token is scored with it; ``tools``: the OpenAI tools its prompt showed."""
        ...

    def response_kl_to_base(self, pairs: Sequence[tuple[Sequence[dict[str, Any]], str]]) -> float: ...

    def generate(self, messages: Sequence[dict[str, Any]], max_tokens: int, *, base: bool = False) -> str: ...


class PromotionGate(Protocol):
    """What the training loop asks of a gate: :class:`EvaluationHook` and
    :class:`~ratchet.online.gate.SelfHeldOutGate`."""

    def score(self, scorer: SequenceScorer) -> float:
        """Measure the current version (the scorer's weights before an update); the loop asks before
        every update, so an implementation caches by ``scorer.version``."""
        ...

    def evaluate(self, scorer: SequenceScorer, baseline: float) -> dict[str, Any]:
        """The candidate's record: every check, ``failed`` (names) and ``promote``."""
        ...


def _read_jsonl(path: str | Path, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            rows.append({"messages": list(data["messages"]), **{k: str(data[k]) for k in keys}})
        except (ValueError, KeyError, TypeError) as exc:
            fields = ", ".join(f'"{k}": "..."' for k in keys)
            raise RatchetError(f"{path}:{number}: not a held-out case ({exc})",
                               hint=f'each line: {{"messages": [...], {fields}}}') from None
    if not rows:
        raise RatchetError(f"{path} holds no held-out cases")
    return rows


def load_cases(path: str | Path) -> list[HeldOutCase]:
    """Read preference cases from JSONL: one ``{"messages", "preferred", "dispreferred"}`` per line."""
    return [HeldOutCase(r["messages"], r["preferred"], r["dispreferred"])
            for r in _read_jsonl(path, ("preferred", "dispreferred"))]


def load_guard(path: str | Path) -> list[GuardCase]:
    """Read guard cases from JSONL: one ``{"messages", "reference"}`` per line."""
    return [GuardCase(r["messages"], r["reference"]) for r in _read_jsonl(path, ("reference",))]


def load_tasks(path: str | Path) -> list[Task]:
    """Read checkable tasks from JSONL: one ``{"messages", "answer"}`` per line."""
    return [Task(r["messages"], r["answer"]) for r in _read_jsonl(path, ("answer",))]


def margins(scorer: SequenceScorer, cases: Sequence[HeldOutCase], *, base: bool = False) -> list[tuple[float, float]]:
    """(log p(preferred), log p(dispreferred)) per case."""
    return [
        (scorer.sequence_logprob(c.messages, c.preferred, base=base),
         scorer.sequence_logprob(c.messages, c.dispreferred, base=base))
        for c in cases
    ]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


class EvaluationHook:
    """Scores policies on held-out cases and decides promotion (see the module docstring)."""

    def __init__(self, cases: Sequence[HeldOutCase], tolerance: float = 0.5, *, guard: Sequence[GuardCase] = (),
                 gate: GateConfig | None = None, tasks: Sequence[Task] = ()) -> None:
        if not cases and not tasks:
            raise RatchetError("the evaluation hook needs at least one held-out case or task")
        self.cases = list(cases)
        self.guard = list(guard)
        self.tasks = list(tasks)
        self.tolerance = tolerance
        self.gate = gate or GateConfig()
        self._base: dict[str, Any] | None = None
        #: (scorer, its version, score) of the last :meth:`score`: the loop asks before every update.
        self._scored: tuple[Any, int, float] | None = None

    @classmethod
    def from_jsonl(cls, path: str | Path, tolerance: float = 0.5, *, gate: GateConfig | None = None) -> EvaluationHook:
        gate = gate or GateConfig()
        guard = load_guard(gate.guard_path) if gate.guard_path else []
        tasks = load_tasks(gate.tasks_path) if gate.tasks_path else []
        return cls(load_cases(path), tolerance, guard=guard, gate=gate, tasks=tasks)

    @classmethod
    def from_config(cls, heldout_path: str | Path | None, tolerance: float = 0.5, *,
                    gate: GateConfig | None = None, queue: Any = None) -> PromotionGate | None:
        """The gate of a trainer's settings: the held-out file's when one is set; else, given the
        training ``queue``, the gate on the server's own held-out conversations
        (:class:`~ratchet.online.gate.SelfHeldOutGate`, which sets the queue's held-out share and policy), with
        the built-in tasks and KL bound inside it; else the built-in tasks-and-KL gate. None only
        when ``gate.builtin`` is off (and nothing is held out then)."""
        gate = gate or GateConfig()
        own = queue is not None and not heldout_path and gate.builtin and gate.heldout.share > 0
        if queue is not None and own:
            h = gate.heldout
            queue.hold_out(h.share, configured_policy(h.policy, early_share=h.early_share, min_turns=h.min_turns))
        elif queue is not None:
            queue.hold_out(0.0, FixedShare())
        if heldout_path:
            return cls.from_jsonl(heldout_path, tolerance, gate=gate)
        if not gate.builtin and not gate.tasks_path:
            return None
        tasks = (load_tasks(gate.tasks_path) if gate.tasks_path
                 else [Task([{"role": "user", "content": q}], a) for q, a in BUILTIN_TASKS])
        guard = load_guard(gate.guard_path) if gate.guard_path else []
        builtin = cls([], tolerance, guard=guard, gate=gate, tasks=tasks)
        if own:
            from ratchet.online.gate import SelfHeldOutGate  # it builds on this module

            return SelfHeldOutGate(queue, gate.heldout, builtin)
        return builtin

    def score(self, scorer: SequenceScorer) -> float:
        """Mean log-prob margin preferred − dispreferred of the scorer's current policy (0 without
        cases); computed once per scorer and version."""
        if not self.cases:
            return 0.0
        if self._scored is not None and self._scored[0] is scorer and self._scored[1] == scorer.version:
            return self._scored[2]
        pairs = margins(scorer, self.cases)
        score = _mean([p - d for p, d in pairs])
        self._scored = (scorer, scorer.version, score)
        return score

    def base_reference(self, scorer: SequenceScorer) -> dict[str, Any]:
        """The base model's per-token log-probs of the preferred replies and guard references (cached)."""
        if self._base is None:
            replies = self._replies(scorer, base=True)
            self._base = {
                "preferred": [scorer.mean_token_logprob(c.messages, c.preferred, base=True) for c in self.cases],
                "guard": [scorer.mean_token_logprob(g.messages, g.reference, base=True) for g in self.guard],
                "tasks": _solved_count(replies, self.tasks),
                # The base's own replies: where KL is measured when there are no cases or references.
                "task_replies": replies,
            }
        return self._base

    def _replies(self, scorer: SequenceScorer, *, base: bool = False) -> list[str]:
        max_tokens = self.gate.tasks_max_tokens
        return [scorer.generate(t.messages, max_tokens, base=base) for t in self.tasks]

    def evaluate(self, scorer: SequenceScorer, baseline: float) -> dict[str, Any]:
        """Score the candidate (the scorer's current weights) against ``baseline`` (the current version's score).

        The returned record goes into the version's metrics: the margin ``score`` and ``baseline``,
        each check with its numbers and verdict, ``failed`` (names) and the decision ``promote``.
        """
        gate = self.gate
        base = self.base_reference(scorer)
        pairs = margins(scorer, self.cases)
        score = _mean([p - d for p, d in pairs]) if pairs else 0.0
        checks: dict[str, dict[str, Any]] = {}
        if self.cases:
            checks["preference"] = {"value": score, "limit": baseline - self.tolerance, "current": baseline,
                                    "passed": score >= baseline - self.tolerance}
            preferred = [scorer.mean_token_logprob(c.messages, c.preferred) for c in self.cases]
            floor = _mean(base["preferred"]) - gate.preferred_drop
            checks["preferred_floor"] = {"value": _mean(preferred), "limit": floor, "base": _mean(base["preferred"]),
                                         "passed": _mean(preferred) >= floor}
        kl_pairs = [(g.messages, g.reference) for g in self.guard] + [(c.messages, c.preferred) for c in self.cases]
        if not kl_pairs:
            kl_pairs = [(t.messages, r) for t, r in zip(self.tasks, base["task_replies"], strict=True) if r.strip()]
        kl = scorer.response_kl_to_base(kl_pairs) if kl_pairs else 0.0
        checks["kl"] = {"value": kl, "limit": gate.max_kl, "passed": kl <= gate.max_kl}
        if self.guard:
            guard = [scorer.mean_token_logprob(g.messages, g.reference) for g in self.guard]
            diffs = [c - b for c, b in zip(guard, base["guard"], strict=True)]
            band = max(gate.guard_tolerance, gate.guard_z * standard_error(diffs))
            checks["guard"] = {"value": _mean(guard), "base": _mean(base["guard"]), "change": _mean(diffs),
                               "band": band, "passed": _mean(diffs) >= -band}
        if self.tasks:
            solved = _solved_count(self._replies(scorer), self.tasks)
            checks["tasks"] = {"value": solved, "base": base["tasks"], "limit": base["tasks"] - gate.tasks_drop,
                               "of": len(self.tasks), "passed": solved >= base["tasks"] - gate.tasks_drop}
        failed = [name for name, check in checks.items() if not check["passed"]]
        return {
            "score": score,
            "baseline": baseline,
            "tolerance": self.tolerance,
            "preferred_logprob": _mean([p for p, _ in pairs]) if pairs else None,
            "dispreferred_logprob": _mean([d for _, d in pairs]) if pairs else None,
            "cases": len(pairs),
            "guard_cases": len(self.guard),
            "checks": checks,
            "failed": failed,
            "promote": not failed,
        }


def _solved_count(replies: Sequence[str], tasks: Sequence[Task]) -> int:
    return sum(t.answer.lower() in r.lower() for r, t in zip(replies, tasks, strict=True))


def refusal_line(evaluation: dict[str, Any]) -> str | None:
    """Which checks refused a version, with their numbers; None when it passed (or was not evaluated)."""
    failed = evaluation.get("failed") or []
    if not failed:
        return None
    parts = []
    for name in failed:
        check = evaluation["checks"][name]
        if name == "guard":
            parts.append(f"guard: per-token log p(reference) changed {check['change']:+.3f} vs base "
                         f"(band ±{check['band']:.3f})")
        elif name == "tasks":
            parts.append(f"tasks: solved {check['value']}/{check['of']} < {check['limit']} (base {check['base']})")
        elif name == "kl":
            parts.append(f"kl: {check['value']:.3f} > max {check['limit']:.3f}")
        elif name.startswith("heldout"):
            parts.append(f"{name}: the held-out replies moved the wrong way, {check['value']:+.3f} nats/token "
                         f"signed by their feedback over {check['turns']} turns (p = {check['p_wrong_way']:.3f} < "
                         f"{check['alpha']}, beyond −{check['tolerance']})")
        elif name.startswith("text_"):
            paired = f"; paired p = {check['p_wrong_way']:.3f}" if "p_wrong_way" in check else ""
            parts.append(f"{name}: {check['measure']} {check['value']:.2f} vs the current version's "
                         f"{check['current']:.2f} (limit {check['limit']:.2f}{paired}) on {check['of']} held-out prompts; "
                         f"{check['asked']} corrections asked for it")
        elif name == "preferred_floor":
            parts.append(f"preferred_floor: per-token log p(preferred) {check['value']:.3f} < floor "
                         f"{check['limit']:.3f} (base {check['base']:.3f})")
        else:
            parts.append(f"preference: margin {check['value']:+.3f} < current {check['current']:+.3f} − tolerance")
    return "; ".join(parts)
