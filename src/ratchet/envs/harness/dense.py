"""A harness's value h: its rollouts' legal rate (or, as a policy, its policy value) averaged with
the dense checks, h = 0.5·primary + 0.5·dense, where dense is the mean of the checks that ran.

One formula for the dedicated search and the engine's legality suite, so a run on either reports
numbers the other's can be read beside. The dense checks are small strategy objects over the game
explored once (:class:`DenseCheck`): the ``transitions`` idea's labelled transitions as unit tests
of ``is_legal_action`` (:class:`UnitTests`) and the ``scaffold`` idea's comparison of a
scaffolded harness's ``legal_actions`` with the game's own legal lists (:class:`LegalLists`).
A rollout alone says only "the first illegal move"; the checks make the score dense and show the
refiner concrete false accepts and false rejects.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ratchet.envs.harness.diagnoses import diagnose_legal_actions
from ratchet.envs.harness.runtime import HarnessRuntime
from ratchet.envs.harness.transitions import check_legal_actions, listed_accuracy, score_is_legal
from ratchet.contracts import Failure
from ratchet.envs.explore import Transition, balanced_subset, listed_states
from ratchet.envs.measure import PlayStats

#: The metrics that are dense checks; the others (legal_rate, steps, games, policy_value) are not
#: averaged into the dense half.
DENSE = ("unit_accuracy", "legal_actions_accuracy")


def dense_of(metrics: Mapping[str, float]) -> float | None:
    """The mean of the dense checks in ``metrics``; None when none ran."""
    values = [metrics[k] for k in DENSE if k in metrics]
    return sum(values) / len(values) if values else None


def harness_value(primary: float, metrics: Mapping[str, float]) -> float:
    """h: ``primary`` (the legal rate, or the policy value) alone when no dense check ran, else
    0.5·primary + 0.5·dense. Every dense check counts: a ``legal_moves`` that returns every cell
    labels the transitions right (its ``is_legal_action`` is perfect) yet proposes taken cells,
    which only the comparison with the game's own legal lists exposes."""
    dense = dense_of(metrics)
    return primary if dense is None else 0.5 * primary + 0.5 * dense


def policy_value(stats: PlayStats) -> float:
    """Harness-as-policy value H: 0 if any move failed, else 0.5 + 0.5·mean reward in [0, 1]."""
    if stats.failures or not stats.rewards:
        return 0.0
    return 0.5 + 0.5 * min(1.0, max(0.0, sum(stats.rewards) / len(stats.rewards)))


class DenseCheck(Protocol):
    """One dense check of a loaded harness: metrics (named in :data:`DENSE`) and counterexamples."""

    name: str

    def check(self, runtime: HarnessRuntime, code: str) -> tuple[dict[str, float], list[Failure]]: ...


class UnitTests:
    """The ``transitions`` idea: ``is_legal_action`` on a balanced set of labelled transitions
    (``size`` at most, half legal where the harvest allows), counterexamples of both signs."""

    name = "transitions"

    def __init__(self, transitions: Sequence[Transition], rng_seed: int = 0, size: int = 200) -> None:
        # Random(rng_seed + 1): the subset the search's Transitions idea draws from the same harvest.
        self.unit_set = balanced_subset(list(transitions), size, random.Random(rng_seed + 1)) if transitions else []

    def check(self, runtime: HarnessRuntime, code: str) -> tuple[dict[str, float], list[Failure]]:
        if not self.unit_set:
            return {}, []
        unit = score_is_legal(runtime, self.unit_set)
        # Both signs, so the refiner cannot fix one by breaking the other.
        return {"unit_accuracy": unit.accuracy}, unit.errors[:3] + unit.false_accepts[:4] + unit.false_rejects[:4]


class LegalLists:
    """The ``scaffold`` idea's check: a harness with ``legal_actions`` compared with the game's
    whole legal list on the explored states that show one (none: no metric)."""

    name = "legal_actions"

    def __init__(self, transitions: Sequence[Transition], explain: bool = False) -> None:
        self.listed = listed_states(list(transitions))
        #: The ``explain_failures`` idea: plain-words diagnoses of the wrong states (an inverted
        #: condition, a hard-coded answer, a test never true: ``diagnoses.diagnose_legal_actions``) first.
        self.explain = explain

    def check(self, runtime: HarnessRuntime, code: str) -> tuple[dict[str, float], list[Failure]]:
        if "def legal_actions" not in code or not self.listed:
            return {}, []
        wrong = check_legal_actions(runtime, self.listed)
        told = diagnose_legal_actions(wrong, self.listed) if self.explain else []
        return {"legal_actions_accuracy": listed_accuracy(wrong, self.listed)}, told + wrong[:4]


#: The dense checks by the name a configuration gives them (``LegalitySuite``'s ``dense`` option).
CHECKS: dict[str, Any] = {UnitTests.name: UnitTests, LegalLists.name: LegalLists}


def build_checks(names: Sequence[str], transitions: Sequence[Transition], rng_seed: int = 0,
                 explain: bool = False) -> list[DenseCheck]:
    """The checks ``names`` names, in that order, over the harvest ``transitions`` (``explain``:
    :class:`LegalLists` diagnoses its wrong states)."""
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown dense check(s) {unknown}; known: {sorted(CHECKS)}")
    return [UnitTests(transitions, rng_seed) if n == UnitTests.name else LegalLists(transitions, explain) for n in names]


def run_checks(checks: Sequence[DenseCheck], runtime: HarnessRuntime, code: str) -> tuple[dict[str, float], list[Failure]]:
    """Every check's metrics and failures on one loaded harness, in the checks' order."""
    metrics: dict[str, float] = {}
    failures: list[Failure] = []
    for c in checks:
        m, f = c.check(runtime, code)
        metrics.update(m)
        failures += f
    return metrics, failures
