"""Pure logic: Thompson selection, the which-function rule, code extraction, the critic."""

from __future__ import annotations

import random

import pytest
from fakes import make_tree

from ratchet.autoharness import critic
from ratchet.autoharness.refine import check_signatures, which_to_refine
from ratchet.autoharness.tree import Tree, select_action
from ratchet.contracts import Failure


def test_tree_counts_refinements_and_depth():
    tree = make_tree()
    assert tree.nodes["root"].refinements == 2
    assert tree.nodes["a"].depth == 1
    assert tree.best().candidate_id == "a"
    tree.add("a", "root", 0.9)  # the same code again: one more refinement, no new node
    assert len(tree) == 3 and tree.nodes["root"].refinements == 3


def test_thompson_draws_follow_the_beta_parameters_exactly():
    tree = make_tree()
    c = 2.0
    rng = random.Random(7)
    expected = {
        "root": rng.betavariate(1 + c * 0.2, 1 + c * 0.8 + 2),
        "a": rng.betavariate(1 + c * 0.9, 1 + c * 0.1 + 0),
        "b": rng.betavariate(1 + c * 0.5, 1 + c * 0.5 + 0),
    }
    chosen = select_action(tree, random.Random(7), c)
    assert chosen.candidate_id == max(expected, key=expected.get)


def test_selection_prefers_high_h_but_refinements_push_exploration():
    tree = Tree()
    tree.add("good", None, 0.95)
    tree.add("bad", None, 0.05)
    rng = random.Random(0)
    picks = [select_action(tree, rng, 1.0).candidate_id for _ in range(400)]
    assert picks.count("good") > picks.count("bad")
    tree.nodes["good"].refinements = 50  # refined many times without progress
    picks = [select_action(tree, rng, 1.0).candidate_id for _ in range(400)]
    assert picks.count("bad") > picks.count("good")


def test_tree_round_trips_through_json():
    tree = make_tree()
    again = Tree.from_json(tree.to_json())
    assert again.to_json() == tree.to_json()


@pytest.mark.parametrize(
    "failures, expected",
    [
        ([{"kind": "rejected_by_env", "function": "both", "verdict": True}], "both"),
        ([{"kind": "rejected_by_harness", "function": "propose_action", "verdict": False}], "propose_action"),
        ([{"kind": "code_error", "function": "propose_action", "verdict": None}], "propose_action"),
        ([{"kind": "code_error", "function": "is_legal_action", "verdict": None}], "is_legal_action"),
        ([{"kind": "false_reject", "function": "is_legal_action", "verdict": False}], "is_legal_action"),
        ([{"kind": "false_accept", "function": "is_legal_action", "verdict": True}], "both"),
        (
            [
                {"kind": "rejected_by_harness", "function": "propose_action", "verdict": False},
                {"kind": "rejected_by_env", "function": "both", "verdict": True},
            ],
            "both",
        ),
    ],
)
def test_which_function_to_refine(failures, expected):
    # Written as the search stored them before failures were typed: read back by Failure.from_record.
    assert which_to_refine([Failure.from_record(f) for f in failures]) == expected


def test_check_signatures_names_the_problem():
    assert "SyntaxError" in check_signatures("def propose_action(:\n")
    assert "is_legal_action" in check_signatures("def propose_action(board):\n    return 1\n")


def test_critic_samples_each_error_type_first_and_summarizes():
    failures = [Failure("rejected_by_env", f"rejected: cell {i} is already occupied") for i in range(10)]
    failures.append(Failure("code_error", "Traceback...\nIndexError: list index out of range"))
    shown = critic.sample_failures(failures, random.Random(1), limit=5)
    assert len(shown) == 5
    assert any(f.kind == "code_error" for f in shown)  # the rare type is not crowded out
    summary = critic.summarize(failures)
    assert summary.startswith("10× rejected_by_env: rejected: cell N is already occupied")
    assert "1× code_error: IndexError" in summary
    assert critic.sample_failures(failures[:3], random.Random(1)) == failures[:3]
