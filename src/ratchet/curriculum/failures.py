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
The types and that mapping are the search's (:mod:`ratchet.envs.harness.failure_types`, re-exported
here): the search hides types from its refiner by the same mapping (``hide_failure_types``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ratchet.envs.harness.failure_types import (
    KIND_TYPES,
    MEANING,
    PRIORITY,
    FailureType,
    finding_kinds,
    of_kinds,
    of_reason,
)
from ratchet.evolve.archive import Archive
from ratchet.evolve.proposers.critic import SAMPLES_FILE, code_hash
from ratchet.online.verdicts import request_hash, turn_id


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
