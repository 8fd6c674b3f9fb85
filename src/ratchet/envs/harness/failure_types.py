"""Failure types: a small closed set that every failure of a harness search falls into, read from
what the search recorded (a failure's ``kind``, an unusable reply's reason), never from the reply.

Two readers share this one mapping: the curriculum (:mod:`ratchet.curriculum.failures` types each
sample of a search, and its feedback policy decides per type whether the next step is a harness edit
or a weight update), and the AutoHarness search itself (``AutoHarnessConfig.hide_failure_types``:
the types the refiner is not shown, :class:`HiddenTypes`). It lives with the harness checks that
write most of these kinds, below both: the curriculum is built on the search, and the search must
not import it.

Failure kinds (:class:`~ratchet.contracts.Failure`, as the evaluators write them) map to types by
:data:`KIND_TYPES`; kinds not listed are ``other``. Where a sample has several, the one that blocks
first wins (:data:`PRIORITY`: code that does not run shows no illegal moves); h below 1 with no
failure recorded is ``low_score``. An unusable reply's reason (the refiners' and the critic's
words) is ``wrong_format`` (no code), ``no_change`` (a repeat) or else ``code_error``
(:func:`of_reason`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BeforeValidator

from ratchet.contracts import Failure


class FailureType(StrEnum):
    """Why a sample failed, in the order a harness meets them (:data:`PRIORITY`; :data:`MEANING`)."""

    WRONG_FORMAT = "wrong_format"
    NO_CHANGE = "no_change"
    CODE_ERROR = "code_error"
    TIMEOUT = "timeout"
    ILLEGAL_MOVE = "illegal_move"
    LOW_SCORE = "low_score"
    OTHER = "other"


#: What each type means, in words (the report's and the model policy's question).
MEANING: Mapping[FailureType, str] = {
    FailureType.WRONG_FORMAT: "the reply held no code to run",
    FailureType.NO_CHANGE: "the code repeats the parent's or an earlier attempt's: nothing new was proposed",
    FailureType.CODE_ERROR: "the code does not load or raises when called (syntax, a missing function, an exception)",
    FailureType.TIMEOUT: "the code ran past its time limit",
    FailureType.ILLEGAL_MOVE: "the harness's legality is wrong: it accepts a move the game refuses, refuses a legal "
                              "one, lists the wrong moves, or the game rejected the move it chose",
    FailureType.LOW_SCORE: "the code ran and played legally but lost or scored below 1",
    FailureType.OTHER: "a failure of a kind this table does not name",
}

#: Which type blocks first, when a sample's evaluation recorded failures of several.
PRIORITY: tuple[FailureType, ...] = tuple(FailureType)

#: Failure kinds (as the evaluators write them) to types. The last three are the legality check's
#: diagnoses over many boards (``envs.harness.diagnoses``, the ``explain_failures`` idea): wrong
#: legal lists said in words, so they go with the lists they explain.
KIND_TYPES: Mapping[str, FailureType] = {
    "code_error": FailureType.CODE_ERROR, "exception": FailureType.CODE_ERROR,
    "invalid_harness": FailureType.CODE_ERROR, "static_check": FailureType.CODE_ERROR,
    "timeout": FailureType.TIMEOUT,
    "illegal_action": FailureType.ILLEGAL_MOVE, "rejected_by_env": FailureType.ILLEGAL_MOVE,
    "false_accept": FailureType.ILLEGAL_MOVE, "false_reject": FailureType.ILLEGAL_MOVE,
    "wrong_legal_actions": FailureType.ILLEGAL_MOVE,
    "inverted_condition": FailureType.ILLEGAL_MOVE, "copied_answer": FailureType.ILLEGAL_MOVE,
    "never_legal": FailureType.ILLEGAL_MOVE,
    "lost": FailureType.LOW_SCORE, "wrong_answer": FailureType.LOW_SCORE, "test_failed": FailureType.LOW_SCORE,
}

#: The refiners' reasons for an unusable reply that are not code errors (``refine.new_code``,
#: ``CriticRefinerProposer``, ``proposer._Asking``): the start of the reason as they write it.
_REASONS: tuple[tuple[str, FailureType], ...] = (
    ("no code in the reply", FailureType.WRONG_FORMAT),
    ("the refined ", FailureType.NO_CHANGE),  # "... is identical to the parent's"
    ("the same code as an earlier sample", FailureType.NO_CHANGE),
    ("a repeat of a program already tried", FailureType.NO_CHANGE),
)
#: The counts ``critic.screen_findings`` writes before its example: "3× false_accept, 1× code_error; …".
_FINDING = re.compile(r"(\d+)× ([a-z_]+)")


def of_kind(kind: str) -> FailureType:
    """The type of one failure kind (``other`` for a kind :data:`KIND_TYPES` does not name)."""
    return KIND_TYPES.get(kind, FailureType.OTHER)


def of_kinds(kinds: Iterable[str]) -> FailureType:
    """The type of a sample whose evaluation recorded failures of ``kinds`` (none: ``low_score``)."""
    found = {of_kind(k) for k in kinds}
    return next((t for t in PRIORITY if t in found), FailureType.LOW_SCORE)


def of_reason(reason: str) -> FailureType:
    """The type of a sample the refiner found unusable, from its recorded reason."""
    return next((t for start, t in _REASONS if reason.startswith(start)), FailureType.CODE_ERROR)


def finding_kinds(findings: str) -> list[str]:
    """The failure kinds a screen's ``findings`` counted (the part before its example)."""
    return [kind for _, kind in _FINDING.findall(findings.split(";", 1)[0])]


def known_types(value: Any) -> Any:
    """``value`` (a type's name or a list of them) as a list, refused when a name is no type, the
    message naming the types there are (a config field's check, :data:`TypeNames`)."""
    names = [value] if isinstance(value, str) else value
    if isinstance(names, list | tuple):
        unknown = [n for n in names if str(n) not in {t.value for t in FailureType}]
        if unknown:
            raise ValueError(f"{', '.join(map(repr, unknown))} is no failure type; the types are "
                             + ", ".join(t.value for t in FailureType))
    return names


#: A config field's list of failure types, a name that is no type refused at load by :func:`known_types`.
TypeNames = Annotated[list[FailureType], BeforeValidator(known_types)]


class HiddenTypes:
    """The refiner's evidence without the failures of ``hidden`` types (the critic's
    :class:`~ratchet.evolve.proposers.critic.Evidence`): a failure is shown unless its kind's type
    is hidden, an unusable reply's reason unless its type is."""

    def __init__(self, hidden: Collection[FailureType | str]) -> None:
        self.hidden = frozenset(FailureType(t) for t in hidden)

    def shows(self, failure: Failure) -> bool:
        return of_kind(failure.kind) not in self.hidden

    def shows_reason(self, reason: str) -> bool:
        return of_reason(reason) not in self.hidden

    def shows_type(self, failure: FailureType) -> bool:
        return failure not in self.hidden


__all__ = ["KIND_TYPES", "MEANING", "PRIORITY", "FailureType", "HiddenTypes", "TypeNames", "finding_kinds", "known_types",
           "of_kind", "of_kinds", "of_reason"]
