"""The honest gate: keep a child only if it beats its parent by more than the parent's own noise.

Every check is paired: parent and child ran the same tasks at the same seeds. Per task the score
is averaged over seeds, and the child's gain is the mean of the per-task differences.

1. **Held-in**: the gain must exceed ``noise_k`` × the parent's noise band there, and a paired
   test on the per-task differences must reject "no difference" at ``alpha``:
   :class:`PairedGate` flips the signs of the differences at random (a permutation test),
   :class:`BootstrapGate` resamples tasks (a paired bootstrap of the mean gain).
2. **Guard tasks**: none may drop by more than ``guard_tolerance``.
3. **Held-out**: the gain may not be below −``heldout_k`` × the noise band there.
4. **Cost** (only with ``cost_metric``): the child's mean cost per held-in task (model calls or
   tokens) may not exceed the parent's (by more than ``cost_tolerance``): better at no more cost.

The noise band of a split is measured by the loop (:func:`noise_band`): the standard deviation
over seeds of the parent's mean score, from its repeated evaluation on every seed.

A run asks the gate many times, so a per-proposal alpha is not a per-run one: with 5 null
proposals at alpha = 0.05 a run keeps one with probability up to 23%. The ``correction``
strategies set the level of each test: :class:`AlphaSpending` (the default) tests the k-th
proposal to reach the paired test at alpha / 2^k (the levels add up to less than alpha, so the
run's chance of keeping any null change is at most alpha, for any number of proposals; k is
counted from the run's recorded decisions, so a resumed run tests at the same levels);
:class:`PerProposal` tests each at alpha.

The paired tests themselves are one function, :func:`paired_p`, which every verdict built on the
gate's statistics calls: the gate's own held-in test, and :func:`not_worse`, the one-sided check
that a change does no harm over paired measurements taken after a run (a suite's report stage: the
AutoHarness adoption verdict on the held-out protocol's two sides).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any, Literal

from ratchet.contracts import Decision, TaskResult
from ratchet.evolve.archive import per_task_means
from ratchet.evolve.config import GateOptions
from ratchet.evolve.context import EngineContext
from ratchet.stats import bootstrap_p, sign_flip_p

PairedTest = Literal["sign_flip", "bootstrap"]

#: The one-sided paired tests of "mean difference > 0" (:mod:`ratchet.stats`), by name.
PAIRED_TESTS = {"sign_flip": sign_flip_p, "bootstrap": bootstrap_p}


def paired_p(diffs: Sequence[float], test: PairedTest = "sign_flip", resamples: int | None = None,
             rng: random.Random | None = None) -> float:
    """The one-sided p-value of "mean(diffs) > 0" under ``test``: what the gate and every verdict
    on its statistics decide with. ``resamples`` and ``rng`` default to the test's own
    (:func:`ratchet.stats.sign_flip_p`, :func:`ratchet.stats.bootstrap_p`)."""
    if test not in PAIRED_TESTS:
        raise ValueError(f"unknown paired test {test!r}: use one of {', '.join(PAIRED_TESTS)}")
    if resamples is None:
        return PAIRED_TESTS[test](diffs, rng=rng)
    return PAIRED_TESTS[test](diffs, resamples, rng)


def paired_values(before: Sequence[float | None] | None, after: Sequence[float | None] | None) -> list[tuple[float, float]]:
    """The (before, after) pairs both sides measured, in order (a unit with no value on a side is
    left out); none when the sides were not measured on the same units (different lengths)."""
    if not before or not after or len(before) != len(after):
        return []
    return [(float(x), float(y)) for x, y in zip(before, after, strict=True) if x is not None and y is not None]


def not_worse(before: float | None, after: float | None, before_each: Sequence[float | None] | None = None,
              after_each: Sequence[float | None] | None = None, *, margin: float = 0.0, alpha: float = 0.05,
              test: PairedTest = "sign_flip") -> dict[str, Any]:
    """Whether ``after`` is worse than ``before`` by more than ``margin``: the one-sided paired test
    of "before − after − margin > 0" over the units both measured (``before_each``/``after_each``,
    e.g. per seed), rejecting "no harm" at p < ``alpha``. Where no outcome of so few pairs could
    reach p < ``alpha`` (the sign-flip test's smallest p over n pairs is 2^-n), or no paired values
    were kept, the point estimates ``before``/``after`` judge: any drop beyond the margin is harm.

    Returns ``worse`` (bool), ``basis`` (``test``, ``too few pairs`` or ``point estimates``), ``n``
    (pairs), ``worse_p`` (None unless tested) and ``record`` (what the verdict stores: the test, its
    n, mean delta and both one-sided p-values; None when no pair was kept)."""
    pairs = paired_values(before_each, after_each)
    dropped = before is not None and after is not None and after < before - margin - 1e-9
    if pairs and 0.5 ** len(pairs) >= alpha:
        # A test would pass every change here (4 pairs: at best p = 1/16), so the point estimates judge.
        return {"worse": dropped, "basis": "too few pairs", "n": len(pairs), "worse_p": None,
                "record": {"test": "point estimates", "n": len(pairs), "why": f"{len(pairs)} pairs cannot reach p < {alpha}"}}
    if pairs:
        p_worse = paired_p([x - y - margin for x, y in pairs], test)
        p_better = paired_p([y - x for x, y in pairs], test)
        return {"worse": p_worse < alpha, "basis": "test", "n": len(pairs), "worse_p": p_worse,
                "record": {"test": test, "n": len(pairs), "mean_delta": round(fmean(y - x for x, y in pairs), 4),
                           "worse_p": round(p_worse, 4), "better_p": round(p_better, 4)}}
    return {"worse": dropped, "basis": "point estimates", "n": 0, "worse_p": None, "record": None}


def noise_band(results: Sequence[TaskResult]) -> float:
    """Std over seeds of a candidate's mean score (0 with one seed or a deterministic suite)."""
    by_seed: dict[int, list[float]] = {}
    for r in results:
        by_seed.setdefault(r.seed, []).append(r.score)
    means = [fmean(v) for v in by_seed.values()]
    return pstdev(means) if len(means) > 1 else 0.0


def paired_differences(parent: Sequence[TaskResult], child: Sequence[TaskResult]) -> dict[str, float]:
    """Per task: child mean − parent mean, over the (task, seed) pairs both have."""
    p = {(r.task_id, r.seed): r.score for r in parent}
    c = {(r.task_id, r.seed): r.score for r in child}
    common = sorted(p.keys() & c.keys())
    diffs: dict[str, list[float]] = {}
    for key in common:
        diffs.setdefault(key[0], []).append(c[key] - p[key])
    return {task: fmean(v) for task, v in diffs.items()}


def tests_so_far(run, before_step: int | None = None) -> int:
    """How many children of this run reached the paired test (their decisions carry a p-value),
    counting only children of the steps before ``before_step``, the step the run resumes at (the
    engine gives it as ``ctx.resumes_at``): a step cut off by a kill after its decision is rerun,
    and must be tested at the alpha it was tested at the first time."""
    if run is None or getattr(run, "dir", None) is None:
        return 0
    count = 0
    for path in sorted((Path(run.dir) / "evolve" / "decisions").glob("*.json")):
        try:
            numbers = json.loads(path.read_text()).get("numbers") or {}
        except (OSError, ValueError, AttributeError):
            continue
        try:
            step = (json.loads((Path(run.dir) / "candidates" / path.stem / "meta.json").read_text()).get("meta") or {}).get("step")
        except (OSError, ValueError, AttributeError):
            step = None  # a decision without a stored candidate counts, as before
        if before_step is not None and step is not None and step >= before_step:
            continue
        count += "p_value" in numbers
    return count


class PerProposal:
    """Every proposal is tested at alpha (no correction over the run)."""

    name = "none"

    def level(self, alpha: float, k: int) -> float:
        return alpha


class AlphaSpending:
    """The k-th test of a run (k = 1, 2, ...) is at alpha / 2^k: the run's levels sum to < alpha."""

    name = "spending"

    def level(self, alpha: float, k: int) -> float:
        return alpha / 2 ** k


CORRECTIONS = {c.name: c for c in (PerProposal, AlphaSpending)}


class PairedGate:
    """Held-in gain beyond noise with a sign-flip permutation test; guards; held-out bound."""

    name = "paired"
    test: PairedTest = "sign_flip"

    def __init__(self, options: GateOptions, ctx: EngineContext) -> None:
        self.options = options
        self.ctx = ctx
        self.correction = CORRECTIONS[options.correction]()
        self.tested: int | None = None  # tests made in this run, read from its decisions once

    def level(self) -> tuple[float, int]:
        """The alpha of the next paired test and its index k in the run."""
        if self.tested is None:
            self.tested = tests_so_far(self.ctx.run, self.ctx.resumes_at)
        k = self.tested + 1
        return self.correction.level(self.options.alpha, k), k

    def rng(self, diffs: Sequence[float]) -> random.Random:
        # Seeded by the data itself, so a resumed run decides exactly as an uninterrupted one.
        return random.Random(repr((self.ctx.seed, list(diffs))))

    def p_value(self, diffs: Sequence[float]) -> float:
        return paired_p(diffs, self.test, self.options.resamples, self.rng(diffs))

    def smallest_accepted_flips(self, tasks: int, test_index: int = 1) -> int | None:
        """The fewest of ``tasks`` held-in tasks a child must flip from fail to pass, losing none
        (one seed, so no noise band), for this gate's own paired test to accept it as the
        ``test_index``-th test of the run; None when even flipping every task is not enough.
        What a run's split must allow before it is worth paying for: with 5 held-in tasks and
        the first test at alpha/2 = 0.05, only a sweep of all 5 (p = 1/32) passes."""
        level = self.correction.level(self.options.alpha, test_index)
        for k in range(1, tasks + 1):
            diffs = [1.0] * k + [0.0] * (tasks - k)
            if self.p_value(diffs) < level:  # the gain (k / tasks) clears a zero noise band
                return k
        return None

    def could_accept(self, diffs: Sequence[float], noise: float) -> bool:
        """Whether held-in per-task differences ``diffs`` (the tasks evaluated so far, then each
        remaining task at the most it can gain) would pass this gate's held-in test at the level
        of the run's next test. The sign-flip p-value only falls as one task's gain rises, so when
        the best case fails, every real outcome fails too: the engine's ``futility`` stop."""
        gain = fmean(diffs) if diffs else 0.0
        if gain <= 0 or gain <= self.options.noise_k * noise:
            return False
        return self.p_value(diffs) < self.level()[0]

    def decide(self, parent: Mapping[str, Sequence[TaskResult]], child: Mapping[str, Sequence[TaskResult]],
               noise: Mapping[str, float]) -> Decision:
        o = self.options
        diffs = paired_differences(parent.get("heldin", ()), child.get("heldin", ()))
        values = [diffs[t] for t in sorted(diffs)]
        gain = fmean(values) if values else 0.0
        p = self.p_value(values)
        alpha, k = self.level()
        self.tested = k
        numbers = {"heldin_parent": fmean(per_task_means(list(parent.get("heldin", ()))).values() or [0.0]),
                   "heldin_child": fmean(per_task_means(list(child.get("heldin", ()))).values() or [0.0]),
                   "heldin_gain": gain, "p_value": p, "alpha": alpha, "run_alpha": o.alpha, "test_index": float(k),
                   "heldin_tasks": float(len(values)),
                   "noise_heldin": noise.get("heldin", 0.0)}
        reasons = self.heldin_reasons(parent.get("heldin", ()), child.get("heldin", ()), values, noise, numbers)
        guard = paired_differences(parent.get("guard", ()), child.get("guard", ()))
        regressed = sorted(t for t, d in guard.items() if d < -o.guard_tolerance)
        numbers["guard_regressions"] = float(len(regressed))
        if regressed:
            reasons.append(f"guard task(s) regressed: {', '.join(regressed)}")
        out = paired_differences(parent.get("heldout", ()), child.get("heldout", ()))
        if out:
            out_gain = fmean(out.values())
            bound = -o.heldout_k * noise.get("heldout", 0.0)
            numbers.update(heldout_gain=out_gain, noise_heldout=noise.get("heldout", 0.0))
            if out_gain < bound - 1e-12:
                reasons.append(f"held-out dropped {out_gain:+.3f}, beyond the noise bound {bound:+.3f}")
        if o.cost_metric is not None:
            reasons += self.cost_reasons(parent.get("heldin", ()), child.get("heldin", ()), numbers)
        if reasons:
            return Decision(False, "; ".join(reasons), numbers)
        return Decision(True, f"{self.accepted_because(numbers)}; no guard regressed; held-out within noise", numbers)

    def heldin_reasons(self, parent: Sequence[TaskResult], child: Sequence[TaskResult], values: Sequence[float],
                       noise: Mapping[str, float], numbers: dict[str, float]) -> list[str]:
        """Why the held-in results do not let the child in (none: they do): a gain beyond
        ``noise_k`` × the noise band, significant under the paired test at this test's level."""
        o, gain, p, alpha, k = self.options, numbers["heldin_gain"], numbers["p_value"], numbers["alpha"], int(numbers["test_index"])
        if not values:
            return ["no paired held-in results"]
        if gain <= o.noise_k * noise.get("heldin", 0.0) or gain <= 0:
            return [f"held-in gain {gain:+.3f} does not clear the noise band {o.noise_k * noise.get('heldin', 0.0):.3f}"]
        if p >= alpha:
            return [f"held-in gain {gain:+.3f} is not significant (p = {p:.4f} >= {alpha:.4g}, test {k} of the run)"]
        return []

    def accepted_because(self, numbers: Mapping[str, float]) -> str:
        return (f"held-in gain {numbers['heldin_gain']:+.3f} > noise {numbers['noise_heldin']:.3f}, "
                f"p = {numbers['p_value']:.4f} < {numbers['alpha']:.4g}")


    def cost_reasons(self, parent: Sequence[TaskResult], child: Sequence[TaskResult], numbers: dict[str, float]) -> list[str]:
        """Why the child costs too much per task under ``cost_metric`` (none: it does not); the
        parent's and child's mean costs per task go into ``numbers``."""
        metric, tolerance = self.options.cost_metric, self.options.cost_tolerance
        costs = []
        for results in (parent, child):
            values = [r.metrics[metric] for r in results if metric in r.metrics]
            if not values:
                return [(f"no held-in result records the cost metric {metric!r}; "
                         "set gate cost_metric to one the suite records (model_calls, tokens) or drop it")]
            costs.append(fmean(values))
        numbers.update(cost_parent=costs[0], cost_child=costs[1])
        if costs[1] > costs[0] * (1 + tolerance) + 1e-12:
            return [f"costs more per task: {metric} {costs[1]:.2f} > parent's {costs[0]:.2f}"
                    + (f" (+{tolerance:.0%} allowed)" if tolerance else "")]
        return []


class BootstrapGate(PairedGate):
    """The same checks with a paired bootstrap of the held-in gain instead of sign flips."""

    name = "bootstrap"
    test: PairedTest = "bootstrap"

    def could_accept(self, diffs: Sequence[float], noise: float) -> bool:
        """Always: a bootstrap p-value need not fall as one task's gain rises, so no best case
        bounds the outcome and the engine's ``futility`` stop never stops this gate's children."""
        return True


def dominates(parent: Sequence[TaskResult], child: Sequence[TaskResult]) -> bool:
    """Whether ``child`` scores at least ``parent``'s score on every (task, seed) pair both ran and
    more on at least one."""
    p = {(r.task_id, r.seed): r.score for r in parent}
    c = {(r.task_id, r.seed): r.score for r in child}
    common = p.keys() & c.keys()
    return bool(common) and all(c[k] >= p[k] - 1e-12 for k in common) and any(c[k] > p[k] + 1e-12 for k in common)


class DominanceGate(PairedGate):
    """The paired gate, with one more way in on held-in: a child that is at least as good as its
    parent on every held-in (task, seed) pair and better on at least one is kept without the noise
    band and the paired test. Guards, held-out and cost are checked as by the paired gate.

    Sound only for a suite whose score is a deterministic function of the candidate, the task and
    the seed (the legality suite scoring harness code alone: the same code on the same seed meets
    the same states). There the parent's spread over seeds is which states each seed reaches, not
    noise, and a fix of a bug only one seed meets (a 0.9975 harness made 1.0) moves one task of a
    handful: no paired test over five tasks can see it, yet it loses nowhere. On a noisy suite a
    lucky draw dominates as easily as a real gain: use ``paired`` there."""

    name = "dominance"

    def could_accept(self, diffs: Sequence[float], noise: float) -> bool:
        # Dominance on pairs implies every per-task mean difference is >= 0 and one is > 0.
        if diffs and all(d >= -1e-12 for d in diffs) and any(d > 1e-12 for d in diffs):
            return True
        return super().could_accept(diffs, noise)

    def heldin_reasons(self, parent: Sequence[TaskResult], child: Sequence[TaskResult], values: Sequence[float],
                       noise: Mapping[str, float], numbers: dict[str, float]) -> list[str]:
        reasons = super().heldin_reasons(parent, child, values, noise, numbers)
        if reasons and dominates(parent, child):
            numbers["dominates"] = 1.0  # the decision's record says which way in it took
            return []
        return reasons

    def accepted_because(self, numbers: Mapping[str, float]) -> str:
        if numbers.get("dominates"):
            return (f"held-in gain {numbers['heldin_gain']:+.3f}: no held-in (task, seed) pair worse than the "
                    "parent's and one better (the dominance gate, for a deterministic suite)")
        return super().accepted_because(numbers)
