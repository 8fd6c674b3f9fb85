"""Pure logic: the which-function rule, code extraction, the critic."""

from __future__ import annotations

import random

import pytest

from ratchet.autoharness.refine import summarize
from ratchet.evolve.proposers.critic import sample_failures
from ratchet.autoharness.refine import check_signatures, which_to_refine
from ratchet.contracts import Failure


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
    shown = sample_failures(failures, random.Random(1), limit=5)
    assert len(shown) == 5
    assert any(f.kind == "code_error" for f in shown)  # the rare type is not crowded out
    summary = summarize(failures)
    assert summary.startswith("10× rejected_by_env: rejected: cell N is already occupied")
    assert "1× code_error: IndexError" in summary
    assert sample_failures(failures[:3], random.Random(1)) == failures[:3]
