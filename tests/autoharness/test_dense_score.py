"""h = 0.5·legal + 0.5·dense, the engine's legality suite's score: its ``dense`` option runs the
checks (labelled transitions as unit tests, the scaffold's legal lists) and scores each task with
``dense.harness_value``."""

from __future__ import annotations

import random

import pytest
from fakes import GOOD, LOOSE, FakeTicTacToe

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.envs.harness.dense import LegalLists, UnitTests, build_checks, dense_of, harness_value
from ratchet.autoharness.engine import engine_config
from ratchet.autoharness.legality import LegalityEvaluator
from ratchet.autoharness.legality import LegalityOptions, LegalitySuite
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.contracts import Candidate
from ratchet.envs.explore import harvest

SEEDS = [0, 1, 2]


def candidate(code: str) -> Candidate:
    return Candidate.from_files("autoharness.harness", {"harness.py": code})


def fake_harvest():
    return harvest(FakeTicTacToe, lambda: FakeTicTacToe(hints=True), SEEDS, 30, random.Random(0))


def test_the_value_is_the_primary_alone_without_a_dense_check_else_the_mean_of_both() -> None:
    assert harness_value(0.6, {"legal_rate": 0.6, "steps": 30.0}) == 0.6
    assert harness_value(0.6, {"unit_accuracy": 1.0}) == pytest.approx(0.8)
    assert harness_value(0.6, {"unit_accuracy": 1.0, "legal_actions_accuracy": 0.5}) == pytest.approx(0.675)
    assert dense_of({"legal_rate": 1.0}) is None


def test_the_evaluator_scores_each_task_by_its_legal_rate_and_the_dense_checks() -> None:
    checks = build_checks(["transitions", "legal_actions"], fake_harvest())
    assert [type(c) for c in checks] == [UnitTests, LegalLists]
    plain = LegalityEvaluator(FakeTicTacToe, InProcessHarness, SEEDS, 30, game="TicTacToe-v0")
    dense = LegalityEvaluator(FakeTicTacToe, InProcessHarness, SEEDS, 30, game="TicTacToe-v0", dense=checks)
    assert plain.fingerprint() != dense.fingerprint()
    assert all(r.score == 1.0 for r in dense.evaluate(candidate(GOOD), dense.tasks(), seed=0))
    loose = dense.evaluate(candidate(LOOSE), dense.tasks(), seed=0)
    alone = plain.evaluate(candidate(LOOSE), plain.tasks(), seed=0)
    # LOOSE accepts every move: right on the legal share of the unit tests only.
    unit_set = checks[0].unit_set
    assert all(r.metrics["unit_accuracy"] == sum(t.legal for t in unit_set) / len(unit_set) < 1.0 for r in loose)
    assert "legal_actions_accuracy" not in loose[0].metrics  # no legal_actions to compare
    for r, a in zip(loose, alone):
        assert r.metrics["legal_rate"] == a.score < 1.0
        assert r.score == pytest.approx(0.5 * a.score + 0.5 * r.metrics["unit_accuracy"])
    # the checks' counterexamples are shown once, with the first task's failures
    assert any(f.kind == "false_accept" for f in loose[0].failures)
    assert not any(f.kind == "false_accept" for r in loose[1:] for f in r.failures)


def test_a_legal_moves_that_returns_every_cell_does_not_score_as_solved() -> None:
    # Its is_legal_action labels every transition right (taken cells show X/O, not their number),
    # but it proposes taken cells: only the comparison of legal_actions with the game's own legal
    # lists exposes that, so it must pull the score below 1.
    from ratchet.autoharness.prompts import SCAFFOLD

    checks = build_checks(["transitions", "legal_actions"], fake_harvest())
    judge = LegalityEvaluator(FakeTicTacToe, InProcessHarness, SEEDS, 30, game="TicTacToe-v0", dense=checks)
    every_cell = SCAFFOLD + "\ndef legal_moves(cells):\n    return cells\n"
    free_cells = SCAFFOLD + "\ndef legal_moves(cells):\n    return [c for c in cells if c not in ('X', 'O')]\n"
    [loose, *_] = judge.evaluate(candidate(every_cell), judge.tasks(), seed=0)
    [right, *_] = judge.evaluate(candidate(free_cells), judge.tasks(), seed=0)
    assert loose.metrics["unit_accuracy"] == 1.0 and loose.metrics["legal_actions_accuracy"] < 1.0
    # The comparison counts in the score: lower than the legal rate and the unit tests alone give.
    assert loose.score < 0.5 * loose.metrics["legal_rate"] + 0.5 * loose.metrics["unit_accuracy"]
    assert right.metrics["legal_actions_accuracy"] == 1.0 and right.score == 1.0


def test_the_policy_mode_scores_the_policy_value() -> None:
    judge = LegalityEvaluator(FakeTicTacToe, InProcessHarness, SEEDS, 30, policy=True)
    results = judge.evaluate(candidate(LOOSE), judge.tasks(), seed=0)
    assert all(r.score == 0.0 for r in results if r.metrics["illegal"])  # a failed move: value 0
    good = judge.evaluate(candidate(GOOD), judge.tasks(), seed=0)
    assert all(0.5 <= r.score <= 1.0 for r in good)


def test_the_suite_explores_the_real_game_and_the_engine_config_asks_for_the_ideas_checks(tmp_path) -> None:
    pytest.importorskip("textarena")
    suite = LegalitySuite(LegalityOptions(game="TicTacToe-v0", seeds=[0, 1], steps_per_env=10, dense=["transitions"],
                                          harvest_seeds=[0], transitions_per_seed=20))
    suite.injected = InProcessHarness
    loose = suite.evaluate(candidate(LOOSE), suite.tasks(), seed=0)
    assert all(0.0 < r.metrics["unit_accuracy"] < 1.0 and r.score < 1.0 for r in loose)
    with pytest.raises(ValueError):
        LegalityOptions(dense=["nonsense"])
    settings = {"env": "TicTacToe-v0", "search_seeds": [0, 1, 2, 3], "heldout_seeds": [9]}
    options = engine_config(AutoHarnessConfig(**settings), tmp_path).suite.options
    assert options["dense"] == ["transitions", "legal_actions"] and options["harvest_seeds"] == [0, 1]
    assert engine_config(AutoHarnessConfig(method="faithful", **settings), tmp_path).suite.options["dense"] == []
