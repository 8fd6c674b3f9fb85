"""Plain-words feedback for the ways a small model's ``legal_moves`` is wrong (the
``explain_failures`` idea): an inverted condition, a hard-coded answer, a test never true, each named
by the legality suite's legal-list check (``dense.LegalLists``) the engine scores with. (That the
refiner's request reads it: test_engine_ideas.py; the fresh-root arm on the engine: its
``FreshRootProposer`` tests there.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fakes import FakeTicTacToe

from ratchet.envs.harness import diagnoses as critic
from ratchet.autoharness.refine import summarize
from ratchet.envs.harness.dense import LegalLists
from ratchet.autoharness.prompts import SCAFFOLD
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.envs.explore import harvest, listed_states

FREE = "def legal_moves(cells):\n    return ['[' + c + ']' for c in cells if c not in ('X', 'O')]\n"
TAKEN = "def legal_moves(cells):\n    return [c for c in cells if c in ('X', 'O')]\n"
TAKEN_INDICES = "def legal_moves(cells):\n    return [str(i) for i, c in enumerate(cells) if c in ('X', 'O')]\n"
FIXED = "def legal_moves(cells):\n    return ['[0]', '[2]']\n"


class Judge:
    """The legal-list check on harvested states of the TicTacToe stand-in, ``explain`` on or off."""

    def __init__(self, transitions, explain: bool) -> None:
        self.transitions, self.listed = transitions, listed_states(list(transitions))
        self.check = LegalLists(transitions, explain=explain)

    def judge(self, code: str) -> SimpleNamespace:
        with InProcessHarness({"harness.py": code}) as runtime:
            metrics, failures = self.check.check(runtime, code)
        return SimpleNamespace(metrics=metrics, failures=failures)


@pytest.fixture(scope="module")
def judged():
    """Harvested states, judging scaffolded candidates with the feedback on."""
    s = Judge(harvest(lambda: FakeTicTacToe(), lambda: FakeTicTacToe(hints=True), [0, 1, 2], per_seed=30), explain=True)
    assert len(s.listed) >= 5
    return s


def kinds(judgement) -> list[str]:
    return [f.kind for f in judgement.failures if f.kind in critic.DIAGNOSES]


@pytest.mark.parametrize("body", [TAKEN, TAKEN_INDICES])
def test_an_inverted_condition_is_named(judged, body):
    j = judged.judge(SCAFFOLD + "\n" + body)
    assert kinds(j) == [critic.INVERTED]
    text = j.failures[0].message
    assert "NOT legal" in text and "inverted" in text
    assert summarize(j.failures).startswith(text)  # first and unabridged in the summary


def test_a_hard_coded_answer_is_named_and_traced_to_an_example(judged):
    j = judged.judge(SCAFFOLD + "\n" + FIXED)
    assert kinds(j) == [critic.COPIED]
    assert "hard-coded" in j.failures[0].message and "one example" not in j.failures[0].message
    _, legal = judged.listed[len(judged.listed) // 2]
    copied = judged.judge(SCAFFOLD + f"\ndef legal_moves(cells):\n    return {list(legal)!r}\n")
    assert kinds(copied) == [critic.COPIED] and "the answer of one example, copied" in copied.failures[0].message


def test_an_answer_that_is_always_empty_is_not_called_copied(judged):
    # The 0.5B's usual slip: free cells hold their number, not ' '.
    j = judged.judge(SCAFFOLD + "\ndef legal_moves(cells):\n    return [str(i) for i in range(9) if cells[i] == ' ']\n")
    assert kinds(j) == [critic.NEVER] and "never true" in j.failures[0].message
    # ...and it says what the legal cells of that board do hold (FakeTicTacToe shows a free cell's number).
    feedback, expected = j.failures[0].message, j.failures[0].detail["expected"]
    first = expected[0].strip("[]")
    assert f"cell {first} holds '{first}'" in feedback


def test_right_or_merely_wrong_code_gets_no_diagnosis(judged):
    assert not kinds(judged.judge(SCAFFOLD + "\n" + FREE))
    every_cell = SCAFFOLD + "\ndef legal_moves(cells):\n    return cells\n"  # wrong, but neither mistake
    j = judged.judge(every_cell)
    assert j.metrics["legal_actions_accuracy"] < 1.0 and not kinds(j)
    # Computed from the board, so the same output recurs only on boards alike in one respect.
    by_count = SCAFFOLD + "\ndef legal_moves(cells):\n    return [str(len([c for c in cells if c in 'XO']))]\n"
    j = judged.judge(by_count)
    assert j.metrics["legal_actions_accuracy"] < 0.5 and not kinds(j)


def test_feedback_is_off_without_the_switch(judged):
    assert kinds(judged.judge(SCAFFOLD + "\n" + TAKEN))
    off = Judge(judged.transitions, explain=False)
    assert not kinds(off.judge(SCAFFOLD + "\n" + TAKEN))
