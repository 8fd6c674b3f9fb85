"""The honest gate: an identical copy or a cosmetic change is rejected, a planted real improvement
accepted, a guard regression or a held-out drop beyond noise rejected, with the numbers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ratchet.contracts import Candidate, TaskResult
from ratchet.evolve.config import GateOptions
from ratchet.evolve.context import EngineContext
from ratchet.evolve.archive import Archive
from ratchet.evolve.gate import (AlphaSpending, BootstrapGate, DominanceGate, PairedGate, PerProposal, noise_band, not_worse,
                                 paired_differences, paired_p, sign_flip_p)
from ratchet.evolve.manifest import Manifest
from ratchet.evolve.suites.synthetic import NoisyOptions, NoisySuite
from ratchet.store import RunStore

SEEDS = (0, 1, 2)
SUITE = NoisySuite(NoisyOptions(tasks=60))
TASKS = SUITE.tasks()


def ctx() -> EngineContext:
    return EngineContext(Manifest(name="noisy", editable=["harness.json"]), Path("."))


def cand(p: float, note: str = "", **per_task: float) -> Candidate:
    return Candidate.from_files("noisy", {"harness.json": json.dumps({"default": p, "p": per_task, "note": note})})


def results(c: Candidate, tasks=TASKS) -> list[TaskResult]:
    return [r for s in SEEDS for r in SUITE.evaluate(c, tasks, s)]


def splits(c: Candidate) -> dict[str, list[TaskResult]]:
    return {"heldin": results(c, TASKS[:30]), "heldout": results(c, TASKS[30:50]), "guard": results(c, TASKS[50:])}


def decide(gate_cls, parent: Candidate, child: Candidate, **options):
    gate = gate_cls(GateOptions(**options), ctx())
    p = splits(parent)
    return gate.decide(p, splits(child), {k: noise_band(v) for k, v in p.items()})


@pytest.mark.parametrize("gate_cls", [PairedGate, BootstrapGate])
def test_an_identical_copy_is_rejected(gate_cls) -> None:
    parent = cand(0.5)
    decision = decide(gate_cls, parent, parent)
    assert not decision.accepted
    assert decision.numbers["heldin_gain"] == 0.0 and decision.numbers["p_value"] == 1.0


@pytest.mark.parametrize("gate_cls", [PairedGate, BootstrapGate])
def test_a_planted_improvement_is_accepted_with_its_numbers(gate_cls) -> None:
    decision = decide(gate_cls, cand(0.4), cand(0.8))
    assert decision.accepted, decision.reason
    assert decision.numbers["heldin_gain"] > decision.numbers["noise_heldin"] > 0
    assert decision.numbers["p_value"] < 0.05 and decision.numbers["guard_regressions"] == 0


def test_cosmetic_changes_are_accepted_at_most_at_alpha() -> None:
    parent = cand(0.5)
    accepted = sum(decide(PairedGate, parent, cand(0.5, note=f"reworded {i}")).accepted for i in range(120))
    assert accepted / 120 <= 0.05


def test_a_guard_regression_is_rejected_even_with_a_held_in_gain() -> None:
    guard_ids = {t.id: 0.0 for t in TASKS[50:]}
    decision = decide(PairedGate, cand(0.4, **{t.id: 1.0 for t in TASKS[50:]}), cand(0.8, **guard_ids))
    assert not decision.accepted and "guard task(s) regressed" in decision.reason
    assert decision.numbers["guard_regressions"] > 0 and decision.numbers["heldin_gain"] > 0.2


def test_a_held_out_drop_beyond_noise_is_rejected() -> None:
    held_out_zero = {t.id: 0.0 for t in TASKS[30:50]}
    decision = decide(PairedGate, cand(0.4), cand(0.8, **held_out_zero))
    assert not decision.accepted and "held-out dropped" in decision.reason
    assert decision.numbers["heldout_gain"] < -decision.numbers["noise_heldout"]


def test_noise_band_and_paired_test_by_hand() -> None:
    rs = [TaskResult("a", 0, 1.0), TaskResult("b", 0, 0.0), TaskResult("a", 1, 0.0), TaskResult("b", 1, 0.0)]
    assert noise_band(rs) == pytest.approx(0.25)  # seed means 0.5 and 0.0
    assert noise_band(rs[:2]) == 0.0
    diffs = paired_differences(rs, [TaskResult("a", 0, 1.0), TaskResult("a", 1, 1.0), TaskResult("c", 0, 1.0)])
    assert diffs == {"a": 0.5}  # only pairs both sides have
    assert sign_flip_p([1, 1, 1, 1, 1], 2000, random.Random(0)) == pytest.approx(1 / 32)  # exact enumeration
    assert sign_flip_p([0.0, 0.0], 2000, random.Random(0)) == 1.0
    assert 0 < sign_flip_p([1.0] * 20, 500, random.Random(0)) < 0.01  # Monte Carlo above 2^n > resamples


def test_not_worse_is_the_gates_paired_test_on_harm_with_point_estimates_where_it_cannot_decide() -> None:
    """The check a suite's report stage judges harm with (the AutoHarness adoption verdict)."""
    worse = not_worse(0.9, 0.0, [0.9] * 10, [0.0] * 10)
    # the gate's own sign-flip test on before - after: worse on all 10 pairs, exact p = 2^-10
    assert worse["worse"] and worse["basis"] == "test" and worse["worse_p"] == paired_p([0.9] * 10) == pytest.approx(1 / 1024)
    assert worse["record"]["better_p"] == 1.0 and worse["record"]["mean_delta"] == -0.9
    noise = not_worse(1.0, 0.99, [1.0] * 10, [0.9] + [1.0] * 9)
    assert not noise["worse"] and noise["worse_p"] == 0.5  # one pair of ten a little worse: no evidence of harm
    assert not not_worse(1.0, 0.8, [1.0] * 8, [0.8] * 8, margin=0.2)["worse"]  # within the margin
    # four pairs can never reach p < 0.05 (at best 1/16): the point estimates judge
    few = not_worse(1.0, 0.0, [1.0] * 4, [0.0] * 4)
    assert few["worse"] and few["basis"] == "too few pairs" and few["record"]["test"] == "point estimates"
    assert not not_worse(1.0, 1.0, [1.0] * 4, [1.0] * 4)["worse"]
    # no paired values (or sides of different lengths): point estimates, nothing recorded
    assert not_worse(1.0, 0.5, [1.0] * 3, [0.5] * 2) == {"worse": True, "basis": "point estimates", "n": 0,
                                                         "worse_p": None, "record": None}
    boot = not_worse(0.9, 0.0, [0.9] * 10, [0.0] * 10, test="bootstrap")
    assert boot["worse"] and boot["record"]["test"] == "bootstrap"
    with pytest.raises(ValueError, match="unknown paired test 'wilcoxon'"):
        paired_p([1.0], "wilcoxon")  # type: ignore[arg-type]


def test_alpha_spending_halves_the_level_per_test_and_counts_a_runs_earlier_tests(tmp_path: Path) -> None:
    run = RunStore(tmp_path / "runs").create_run("evolve", {"x": 1})
    gate = PairedGate(GateOptions(alpha=0.05), EngineContext(Manifest(name="noisy", editable=["harness.json"]),
                                                             Path("."), run=run))
    parent, child = cand(0.4), cand(0.8)
    first = gate.decide(splits(parent), splits(child), {k: noise_band(v) for k, v in splits(parent).items()})
    assert first.numbers["alpha"] == pytest.approx(0.025) and first.numbers["test_index"] == 1
    Archive(run).record_decision(child.id, first)  # the loop records it; a resumed gate reads it back
    second = PairedGate(GateOptions(alpha=0.05), gate.ctx).decide(splits(parent), splits(child), {})
    assert second.numbers["alpha"] == pytest.approx(0.0125) and second.numbers["test_index"] == 2
    assert sum(AlphaSpending().level(0.05, k) for k in range(1, 60)) <= 0.05
    assert PerProposal().level(0.05, 7) == 0.05


def test_a_result_significant_per_proposal_is_not_enough_late_in_a_run() -> None:
    # p = 1/64 from 6 of 6 tasks improving: below the 1st test's 0.025, above the 3rd test's 0.05 / 8
    diffs_p = sign_flip_p([1] * 6, 2000, random.Random(0))
    assert AlphaSpending().level(0.05, 1) > diffs_p > AlphaSpending().level(0.05, 3)


def test_tests_so_far_leaves_out_the_step_a_resumed_run_reruns(tmp_path):
    # A kill after step 3's decision but before its checkpoint: the rerun of step 3 must be tested
    # at the alpha of the 2nd test, as the first time, not the 3rd.
    from ratchet.contracts import Candidate
    from ratchet.evolve.gate import tests_so_far
    from ratchet.store import RunStore

    run = RunStore(tmp_path / "runs").create_run("evolve", {})
    for step in (1, 2, 3):
        child = Candidate.from_files("x", {"f.txt": str(step)}, step=step)
        run.add_candidate(child, status="rejected")
        run.write_json(f"evolve/decisions/{child.id}.json", {"numbers": {"p_value": 0.5} if step != 2 else {}})
    assert tests_so_far(run, before_step=3) == 1
    assert tests_so_far(run, before_step=4) == 2
    assert tests_so_far(run) == 2  # no step given: every decision of the run


def flipped(n: int, k: int, seed: int = 0) -> tuple[list[TaskResult], list[TaskResult]]:
    """Parent fails ``n`` held-in tasks; the child passes the first ``k`` of them (one seed)."""
    parent = [TaskResult(f"t{i}", seed, 0.0) for i in range(n)]
    return parent, [TaskResult(f"t{i}", seed, 1.0 if i < k else 0.0) for i in range(n)]


@pytest.mark.parametrize("n, correction, expected", [(5, "spending", 5), (4, "spending", None), (5, "none", 4),
                                                      (9, "spending", 5), (15, "spending", 5)])
def test_the_smallest_accepted_flips_is_what_the_gate_accepts(n, correction, expected) -> None:
    """The number the coding-agent bench reports for its held-in size: the gate's own decision,
    not a formula beside it (k flips and no loss accepted, k - 1 rejected)."""
    options = GateOptions(alpha=0.1, correction=correction)
    k = PairedGate(options, ctx()).smallest_accepted_flips(n)
    assert k == expected
    for flips in range(1, n + 1):
        parent, child = flipped(n, flips)
        accepted = PairedGate(options, ctx()).decide({"heldin": parent}, {"heldin": child}, {"heldin": 0.0}).accepted
        assert accepted == (k is not None and flips >= k), flips
    # later tests of a run are stricter (alpha / 2^k): the second needs more
    assert PairedGate(options, ctx()).smallest_accepted_flips(15, test_index=2) == (6 if correction == "spending" else 4)


def _scores(rows: dict[tuple[str, int], float]) -> list[TaskResult]:
    return [TaskResult(task, seed, score) for (task, seed), score in rows.items()]


# A deterministic suite's parent: five held-in tasks at two seeds, one pair (task c, seed 1) failing
# a little, so its spread over seeds is 0.0025, which is not noise: that seed meets one bug.
PARENT = {(t, s): 1.0 for t in "abcde" for s in (0, 1)} | {("c", 1): 0.975}


def _gate_decides(gate_cls, parent: dict, child: dict, heldout: tuple[dict, dict] | None = None):
    gate = gate_cls(GateOptions(alpha=0.05, correction="none"), ctx())
    p, c = {"heldin": _scores(parent)}, {"heldin": _scores(child)}
    if heldout:
        p["heldout"], c["heldout"] = _scores(heldout[0]), _scores(heldout[1])
    return gate.decide(p, c, {k: noise_band(v) for k, v in p.items()})


def test_the_dominance_gate_keeps_a_fix_no_pair_loses_that_the_paired_gate_cannot_see() -> None:
    fixed = {**PARENT, ("c", 1): 1.0}
    paired = _gate_decides(PairedGate, PARENT, fixed)
    assert not paired.accepted and "noise band" in paired.reason  # the gain equals the parent's spread
    decision = _gate_decides(DominanceGate, PARENT, fixed)
    assert decision.accepted and "no held-in (task, seed) pair worse" in decision.reason
    assert decision.numbers["dominates"] == 1.0 and decision.numbers["heldin_gain"] > 0


def test_the_dominance_gate_rejects_a_child_that_loses_any_pair_or_gains_none() -> None:
    trade = {**PARENT, ("c", 1): 1.0, ("a", 0): 0.99}  # a gain paid for by a loss elsewhere
    assert not _gate_decides(DominanceGate, PARENT, trade).accepted
    assert not _gate_decides(DominanceGate, PARENT, dict(PARENT)).accepted  # an equal copy
    assert not _gate_decides(DominanceGate, {("a", 0): 1.0}, {("b", 0): 1.0}).accepted  # no common pair


def test_the_dominance_gate_still_checks_held_out_and_takes_the_paired_way_in() -> None:
    fixed = {**PARENT, ("c", 1): 1.0}
    out_parent = {(t, s): 1.0 for t in "xyz" for s in (0, 1)}
    out_child = {**out_parent, ("x", 0): 0.0, ("y", 0): 0.0}
    decision = _gate_decides(DominanceGate, PARENT, fixed, (out_parent, out_child))
    assert not decision.accepted and "held-out dropped" in decision.reason
    low = {(t, s): 0.2 for t in "abcde" for s in (0, 1)}
    swept = {(t, s): 0.9 for t in "abcde" for s in (0, 1)}
    accepted = _gate_decides(DominanceGate, low, swept)  # passes the paired test itself: no dominance needed
    assert accepted.accepted and "dominates" not in accepted.numbers and "p = " in accepted.reason


def test_the_dominance_gates_best_case_lets_a_dominating_child_through_futility() -> None:
    gate = DominanceGate(GateOptions(alpha=0.05, correction="none"), ctx())
    assert gate.could_accept([0.0, 0.0, 0.025, 0.0, 0.0], noise=0.0125)
    assert not PairedGate(GateOptions(alpha=0.05, correction="none"), ctx()).could_accept([0.0, 0.0, 0.025, 0.0, 0.0], 0.0125)
    assert not gate.could_accept([0.0, -0.01, 0.025], noise=0.0)
