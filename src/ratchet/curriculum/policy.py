"""The feedback policy: per failure type of a round's training searches, whether the next step is a
harness edit, a weight update or both.

The curriculum consults it once per round, after the training searches and before feeding. An
action acts on both loops:

* ``harness``: the type's failed samples are not fed to the trainer; the next round's searches
  show the type to their refiner. The harness loop alone is left to remove it.
* ``weights``: the samples are fed; the next round's training searches hide the type from their
  refiner (``AutoHarnessConfig.hide_failure_types``: not in a request, its summary, its
  counterexamples or the choice of function to fix; still scored). The weights alone are left to
  remove it.
* ``both``: fed, and shown to the next round's refiner.

So the report's per-type table ("which step removed them") separates the loops: a type decided
``weights`` that went down did so without the refiner being shown it (the search's gate still
rewards a child that removes it by chance: hiding takes the evidence away, not the pressure).
Held-out searches hide nothing (every version is measured alike).

Strategies (``feedback.policy``): ``both`` (every failure to both loops, as before there was a
policy), ``harness``, ``weights``, ``by_type`` (a fixed mapping) and ``model`` (the proposer model
asked one word per type; a malformed answer falls back to ``both`` and the decision says so).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import Field

from ratchet.config import Settings
from ratchet.contracts import Model, RatchetError
from ratchet.curriculum.failures import MEANING, PRIORITY, FailureType


class Action(StrEnum):
    """What the next step does about a failure type."""

    HARNESS = "harness"
    """A harness edit only: the type's samples are not fed to the trainer."""
    WEIGHTS = "weights"
    """A weight update only: the type's samples are fed, and hidden from the next round's refiner."""
    BOTH = "both"
    """Both loops: fed, and shown to the next round's refiner."""


#: The grammar of the model strategy's answer (GBNF): one of the actions, nothing else.
ANSWER_GRAMMAR = 'root ::= "harness" | "weights" | "both"'


class FeedbackConfig(Settings):
    """Which loop each failure type of a round goes to (:mod:`ratchet.curriculum.policy`)."""

    policy: Literal["both", "harness", "weights", "by_type", "model"] = "both"
    """``both`` (default: every failure fed and left to the searches, the curriculum's behaviour
    without a policy), ``harness`` (no failed sample fed), ``weights``, ``by_type`` (``by_type``'s
    mapping) or ``model`` (the proposer model, the round's weight version, asked one word a type)."""
    by_type: dict[FailureType, Action] = Field(default_factory=dict)
    """With ``policy: by_type``: the action per failure type (``wrong_format``, ``no_change``,
    ``code_error``, ``timeout``, ``illegal_move``, ``low_score``, ``other``); a type not named is ``both``."""
    max_tokens: int = Field(default=8, ge=1)
    """With ``policy: model``: the most tokens of its answer (one word is wanted)."""


@dataclass(frozen=True)
class Decision:
    """One failure type's action for the next step, and how it was reached."""

    action: Action
    by: str
    """The strategy that decided (``both``, ``by_type``, ``model``, …)."""
    answer: str | None = None
    """The model's answer as given (``model`` only)."""
    fallback: str | None = None
    """Why the strategy's own choice was not taken (a malformed answer), when it was not."""

    def record(self) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, Action) else v) for k, v in asdict(self).items()}


class FeedbackPolicy(Protocol):
    """Decides, per failure type of a round, the next step's action."""

    def decide(self, failures: Mapping[str, int], samples: int) -> dict[str, Decision]:
        """A decision for every type in ``failures`` (failed samples per type, of ``samples``)."""
        ...


class Fixed:
    """The same action for every type (the ``both``, ``harness`` and ``weights`` strategies)."""

    def __init__(self, action: Action) -> None:
        self.action = action

    def decide(self, failures: Mapping[str, int], samples: int) -> dict[str, Decision]:
        return {t: Decision(self.action, self.action.value) for t in failures}


class ByType:
    """A configured action per type; ``both`` for a type the mapping does not name."""

    def __init__(self, mapping: Mapping[FailureType, Action]) -> None:
        self.mapping = dict(mapping)

    def decide(self, failures: Mapping[str, int], samples: int) -> dict[str, Decision]:
        return {t: Decision(self.mapping.get(FailureType(t), Action.BOTH), "by_type") for t in failures}


def question(failure: FailureType, count: int, samples: int) -> list[dict[str, str]]:
    """What the model is asked about one type."""
    return [{"role": "user", "content": (
        f"You wrote game-playing harness code. Of your {samples} attempts this round, {count} failed this way: "
        f"{failure.value} ({MEANING[failure]}).\n"
        "What should fix it next: 'harness' (the search edits the code again, shown these failures), 'weights' "
        "(your weights are trained on these attempts; the search no longer shows you these failures) or 'both'? "
        "Answer with one word: harness, weights or both.")}]


def parse_answer(text: str) -> Action | None:
    """The action a strict reading of ``text`` names: exactly one of the three words (case and a
    closing full stop aside); None for anything else."""
    word = text.strip().lower().removesuffix(".")
    return Action(word) if word in {a.value for a in Action} else None


class AskModel:
    """The proposer model answers one word per type, constrained by :data:`ANSWER_GRAMMAR` where its
    backend enforces grammars and read strictly either way; a malformed answer (or a backend that
    refuses the grammar) is ``both``, the decision recording the answer and the fallback."""

    def __init__(self, model: Callable[[], Model], max_tokens: int = 8) -> None:
        self.model, self.max_tokens = model, max_tokens

    def decide(self, failures: Mapping[str, int], samples: int) -> dict[str, Decision]:
        model = self.model() if failures else None
        out: dict[str, Decision] = {}
        for t, count in failures.items():
            try:
                answer = model.complete(question(FailureType(t), count, samples), temperature=0.0,
                                        max_tokens=self.max_tokens, grammar=ANSWER_GRAMMAR).text
            except RatchetError as exc:
                out[t] = Decision(Action.BOTH, "model", None, f"the model was not asked: {exc}")
                continue
            action = parse_answer(answer)
            out[t] = (Decision(action, "model", answer) if action is not None
                      else Decision(Action.BOTH, "model", answer, f"malformed answer {answer[:60]!r}: not one of harness, weights, both"))
        return out


def left_to_weights(decisions: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """The types a round's ``decisions`` (as recorded) left to the weights alone, in
    :data:`~ratchet.envs.harness.failure_types.PRIORITY` order: the next round's training searches
    hide them from the refiner (``hide_failure_types``)."""
    weights = {t for t, d in (decisions or {}).items() if d.get("action") == Action.WEIGHTS}
    return [t.value for t in PRIORITY if t.value in weights]


def make_policy(config: FeedbackConfig, model: Callable[[], Model]) -> FeedbackPolicy:
    """The strategy ``config`` names; ``model`` gives the proposer model (asked only by ``model``)."""
    if config.policy == "by_type":
        return ByType(config.by_type)
    if config.policy == "model":
        return AskModel(model, config.max_tokens)
    return Fixed(Action(config.policy))


__all__ = ["ANSWER_GRAMMAR", "Action", "AskModel", "ByType", "Decision", "FeedbackConfig", "FeedbackPolicy", "Fixed",
           "left_to_weights", "make_policy", "parse_answer", "question"]
