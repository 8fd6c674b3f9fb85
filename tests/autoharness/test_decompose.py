"""Decomposition (the ``decompose`` idea, ``decompose.Decomposer``): a board parser and a rule, each
checked against the env's ground truth, each fed back and asked for on its own; TicTacToe stand-in,
in-process code. (On the engine, ``refine.DecomposeRefiner``: test_decompose_refiner.py.)"""

from __future__ import annotations

import random

from fakes import BAD_PARSER, BAD_RULE, GOOD_PARSER, GOOD_RULE, RULES, FakeTicTacToe, fenced

from ratchet.autoharness.decompose import MISSING, PARSER, RULE, Decomposer, assemble, split
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.envs.explore import harvest


class BoardTicTacToe(FakeTicTacToe):
    """The stand-in with the ground truth a TextArena TicTacToe keeps: rows of '', 'X', 'O'."""

    def board_state(self):
        return [[self.cells[3 * r + c] for c in range(3)] for r in range(3)]


def prepared() -> Decomposer:
    transitions = harvest(lambda: BoardTicTacToe(), lambda: BoardTicTacToe(hints=True), [0, 1, 2], per_seed=30)
    d = Decomposer()
    d.prepare(lambda: BoardTicTacToe(), transitions)
    return d


def test_states_carry_the_envs_own_board_and_its_legal_list():
    d = prepared()
    assert d.active and d.reason is None and len(d.states) >= 10
    for s in d.states:
        free = [f"[{3 * r + c}]" for r in range(3) for c in range(3) if s.truth[r][c] == ""]
        assert sorted(s.listed) == sorted(free) and s.labelled
        assert "Current Board" in s.board
    assert any(any("X" in row for row in s.truth) for s in d.states)  # mid-game states, not only the empty board
    assert len({s.board for s in d.states}) == len(d.states)  # a position reached from several seeds is checked once


def test_each_part_is_checked_on_its_own():
    d = prepared()

    def check(parser, rule):
        return d.check(InProcessHarness({"harness.py": assemble(parser, rule)}), assemble(parser, rule))

    metrics, failures = check(BAD_PARSER, GOOD_RULE)
    assert metrics == {"parse_accuracy": 0.0, "rule_accuracy": 1.0}  # the rule is judged on the true board
    assert failures and all(f.detail["part"] == PARSER and f.kind == "wrong_parse" for f in failures)
    assert "but the board is" in failures[0].message and "instead of ''" in failures[0].message

    metrics, failures = check(GOOD_PARSER, BAD_RULE)
    assert metrics["parse_accuracy"] == 1.0 and metrics["rule_accuracy"] < 1.0
    assert failures and all(f.detail["part"] == RULE and f.kind == "wrong_rule" for f in failures)
    assert "but the legal actions in this state are" in failures[0].message

    metrics, failures = check(GOOD_PARSER, MISSING[RULE])
    assert metrics["rule_accuracy"] == 0.0 and "NotImplementedError" in failures[-1].message
    assert check(GOOD_PARSER, GOOD_RULE) == ({"parse_accuracy": 1.0, "rule_accuracy": 1.0}, [])
    assert d.check(InProcessHarness({"harness.py": "x = 1"}), "x = 1") == ({}, [])  # not decomposed: no part checks


def test_a_bad_parser_with_a_good_rule_gets_parser_feedback_and_vice_versa():
    d = prepared()
    for parser, rule, target, other in [(BAD_PARSER, GOOD_RULE, PARSER, RULE), (GOOD_PARSER, BAD_RULE, RULE, PARSER)]:
        code = assemble(parser, rule)
        metrics, pool = d.check(InProcessHarness({"harness.py": code}), code)
        asked, shown, messages = d.request(game="TicTacToe-v0", description=RULES.format(p=0), code=code, pool=pool,
                                           metrics=metrics, rng=random.Random(0), limit=5)
        text = messages[-1]["content"]
        assert asked == target and shown and all(f.detail["part"] == target for f in shown)
        assert f"def {target}(" in text and f"def {other}(" not in text  # only the failing part is shown and asked for
        assert (parser if target == PARSER else rule).strip().splitlines()[-1].strip() in text  # its wrong attempt
        assert ("parse_board returned" if target == PARSER else "legal_moves returned") in text
        # The reply replaces only the part asked for; the other is kept verbatim.
        fixed = d.new_code(code, fenced(GOOD_PARSER if target == PARSER else GOOD_RULE), asked)
        assert split(fixed) == (GOOD_PARSER, GOOD_RULE)


def test_textarena_tictactoe_exposes_its_board_as_ground_truth():
    from ratchet.envs import env_factory_for

    env, hints = env_factory_for("TicTacToe-v0"), env_factory_for("TicTacToe-v0", hints=True)
    transitions = harvest(env, hints, [0], per_seed=20)
    d = Decomposer()
    d.prepare(env, transitions)
    assert d.active, d.reason
    code = assemble(GOOD_PARSER, GOOD_RULE)
    assert d.check(InProcessHarness({"harness.py": code}), code) == ({"parse_accuracy": 1.0, "rule_accuracy": 1.0}, [])
