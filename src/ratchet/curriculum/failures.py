"""Failure types of a search's samples: a small closed set read from what the search recorded, so
a feedback policy (:mod:`~ratchet.curriculum.policy`) can decide per type whether the next step is a
harness edit or a weight update, and the report can say which one removed each type.

A sample is one reply the proposer asked the model for (a record of the run's
``evolve/samples.jsonl``, :data:`~ratchet.evolve.proposers.critic.SAMPLES_FILE`); it is typed by the
evaluator's own fields, never by reading the model's reply:

* a sample the refiner found unusable (its ``reason``) is ``wrong_format`` when the reply held no
  code, ``no_change`` when its code repeats the parent's or an earlier sample's, else
  ``code_error`` (the code does not load as a harness: a syntax error, a required function missing);
* the kept sample's code, where the search ran it on games (the archive), is typed by the
  failures its evaluation recorded when its h is below 1;
* a screened sample scoring below 1 is typed by the failure kinds its screen found (the
  ``findings`` the :class:`~ratchet.evolve.proposers.critic.ExplainingRefiner` recorded);
* a repeat of an earlier sample's code takes that sample's type;
* a sample that reached h (or a screen of) 1 did not fail; one never scored is not typed.

Failure kinds (:class:`~ratchet.contracts.Failure`) map to types by :data:`KIND_TYPES`; where a
sample has several, the one that blocks first wins (:data:`PRIORITY`: code that does not run shows
no illegal moves). Kinds not listed are ``other``; h below 1 with no failure recorded is ``low_score``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ratchet.evolve.archive import Archive
from ratchet.evolve.proposers.critic import SAMPLES_FILE, code_hash
from ratchet.online.verdicts import request_hash, turn_id


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

#: Failure kinds (as the evaluators write them) to types.
KIND_TYPES: Mapping[str, FailureType] = {
    "code_error": FailureType.CODE_ERROR, "exception": FailureType.CODE_ERROR,
    "invalid_harness": FailureType.CODE_ERROR, "static_check": FailureType.CODE_ERROR,
    "timeout": FailureType.TIMEOUT,
    "illegal_action": FailureType.ILLEGAL_MOVE, "rejected_by_env": FailureType.ILLEGAL_MOVE,
    "false_accept": FailureType.ILLEGAL_MOVE, "false_reject": FailureType.ILLEGAL_MOVE,
    "wrong_legal_actions": FailureType.ILLEGAL_MOVE,
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


def of_kinds(kinds: Iterable[str]) -> FailureType:
    """The type of a sample whose evaluation recorded failures of ``kinds`` (none: ``low_score``)."""
    found = {KIND_TYPES.get(k, FailureType.OTHER) for k in kinds}
    return next((t for t in PRIORITY if t in found), FailureType.LOW_SCORE)


def of_reason(reason: str) -> FailureType:
    """The type of a sample the refiner found unusable, from its recorded reason."""
    return next((t for start, t in _REASONS if reason.startswith(start)), FailureType.CODE_ERROR)


def finding_kinds(findings: str) -> list[str]:
    """The failure kinds a screen's ``findings`` counted (the part before its example)."""
    return [kind for _, kind in _FINDING.findall(findings.split(";", 1)[0])]


@dataclass(frozen=True)
class TypedSample:
    """One failed sample: the judged turn it becomes when fed (``turn_id``) and its type."""

    turn_id: str
    type: FailureType


def _kept_evaluation(archive: Archive, surface: str, digest: str) -> tuple[float, list[str]] | None:
    """(h, failure kinds) of the archived candidate whose ``surface`` is the code with this hash."""
    for candidate in archive.candidates():
        text = candidate.files.get(surface)
        if candidate.parent_id is None or text is None or code_hash(text) != digest:
            continue
        split = "heldin" if archive.results(candidate.id, "heldin") else "search"
        results = archive.results(candidate.id, split)
        if not results:
            return None
        return archive.score(candidate.id, split), [f.kind for r in results for f in r.failures]
    return None


def _sample_type(sample: Mapping[str, Any], record: Mapping[str, Any], archive: Archive,
                 screened: Mapping[str, FailureType | None]) -> FailureType | None:
    digest, reason = sample.get("code"), sample.get("reason")
    if reason:
        return of_reason(str(reason))
    kept = record.get("kept")
    if kept is not None and kept in (digest, (sample.get("repair") or {}).get("code")):
        evaluated = _kept_evaluation(archive, record["surface"], kept)
        if evaluated is not None:  # the games' verdict outranks the screen's
            h, kinds = evaluated
            return None if h >= 1.0 else of_kinds(kinds)
    if sample.get("screen") is not None:
        return None if float(sample["screen"]) >= 1.0 else of_kinds(finding_kinds(str(sample.get("findings") or "")))
    if digest is not None and digest in screened:
        return screened[digest]
    return None


def typed_samples(run: Any) -> list[TypedSample]:
    """Every failed sample of ``run``, once per judged turn it becomes (a step replayed after a
    resume recorded the same replies again), oldest first."""
    archive = Archive(run)
    seen: dict[str, TypedSample] = {}
    for record in run.read_jsonl(SAMPLES_FILE):
        key = request_hash([dict(m) for m in record["request"]])
        screened: dict[str, FailureType | None] = {}
        for sample in record["samples"]:
            kind = _sample_type(sample, record, archive, screened)
            if sample.get("code") and sample.get("screen") is not None:
                screened.setdefault(sample["code"], kind)
            tid = turn_id(run.id, key, sample["reply"])
            if kind is not None and tid not in seen:
                seen[tid] = TypedSample(tid, kind)
    return list(seen.values())


def counts(samples: Sequence[TypedSample]) -> dict[str, int]:
    """Failed samples per type, in :data:`PRIORITY` order (types with none left out)."""
    found = Counter(s.type for s in samples)
    return {t.value: found[t] for t in PRIORITY if found[t]}


__all__ = ["KIND_TYPES", "MEANING", "PRIORITY", "FailureType", "TypedSample", "counts", "finding_kinds", "of_kinds", "of_reason",
           "typed_samples"]
