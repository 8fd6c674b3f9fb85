"""Candidates scored on labelled transitions (``envs.explore.harvest``) as unit tests: a dense
score (fraction judged right) and concrete false-accept / false-reject counterexamples for the
refiner, instead of only "the first illegal move"; and a scaffold's ``legal_actions`` checked
against the full legal lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ratchet.envs.harnesslib import action_value
from ratchet.envs.harness.runtime import HarnessRuntime
from ratchet.contracts import Failure
from ratchet.sandbox.errors import feedback_of
from ratchet.envs.explore import Transition

@dataclass
class UnitScore:
    """How a candidate's ``is_legal_action`` did on labelled transitions."""

    total: int
    correct: int
    false_accepts: list[Failure]
    false_rejects: list[Failure]
    errors: list[Failure]

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


def score_is_legal(runtime: HarnessRuntime, transitions: Sequence[Transition]) -> UnitScore:
    """Run ``is_legal_action`` on every transition; a code error counts as a wrong answer."""
    results: list[tuple[str, Any]] = []
    # In chunks, so a check that times out costs one chunk, not one timeout per transition.
    for start in range(0, len(transitions), 25):
        chunk = transitions[start : start + 25]
        got = runtime.call_many("is_legal_action", [(t.board, t.action) for t in chunk], seed=start)
        results += got
        stuck = next((v for s, v in got if s == "error" and "timeout" in type(v).__name__.lower()), None)
        if stuck is not None:
            results += [("error", stuck)] * (len(transitions) - len(results))
            break
    score = UnitScore(len(transitions), 0, [], [], [])
    for t, (status, value) in zip(transitions, results):
        case = {"board": t.board, "action": t.action, "legal": t.legal, "env_reason": t.reason}
        if status != "ok":
            score.errors.append(Failure("code_error", feedback_of(value), detail={**case, "function": "is_legal_action", "verdict": None}))
        elif bool(value) == t.legal:
            score.correct += 1
        elif t.legal:
            score.false_rejects.append(Failure("false_reject", "is_legal_action said False, but the environment accepts this move",
                                               detail={**case, "function": "is_legal_action", "verdict": False}))
        else:
            score.false_accepts.append(Failure("false_accept", f"is_legal_action said True, but the environment rejects it: {t.reason or 'invalid move'}",
                                               detail={**case, "function": "is_legal_action", "verdict": True}))
    return score


def listed_accuracy(wrong: Sequence[Failure], states: Sequence[tuple[str, list[str]]]) -> float:
    """The share of ``states`` where ``legal_actions`` gave the game's legal list, from the failures
    :func:`check_legal_actions` found there (0 with no state to judge by)."""
    return 1.0 - len(wrong) / len(states) if states else 0.0


def check_legal_actions(runtime: HarnessRuntime, states: Sequence[tuple[str, list[str]]]) -> list[Failure]:
    """Compare a scaffolded harness's ``legal_actions(board)`` with the game's own legal list on
    each state; one failure per wrong state, saying what it returned and what is right."""
    results = runtime.call_many("legal_actions", [(board,) for board, _ in states], seed=0)
    wrong: list[Failure] = []
    for (board, listed), (status, value) in zip(states, results):
        base = {"board": board, "action": None, "verdict": None, "function": "legal_actions"}
        if status != "ok":
            wrong.append(Failure("code_error", feedback_of(value), detail=base))
            continue
        got = value if isinstance(value, list) else [value]
        if sorted({action_value(str(a)) for a in got}) != sorted({action_value(a) for a in listed}):
            shown = got[:12] if isinstance(value, list) else value
            wrong.append(Failure("wrong_legal_actions", f"legal_actions returned {shown!r} but the legal actions on this board are {listed!r}",
                                 detail={**base, "expected": list(listed), "got": got[:24] if isinstance(value, list) else value}))
    return wrong
