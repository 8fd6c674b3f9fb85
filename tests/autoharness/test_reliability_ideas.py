"""Two ideas against the ways a small model's search gets stuck: a Thompson arm that samples a
fresh root, and plain-words feedback for an inverted condition and a hard-coded answer."""

from __future__ import annotations

import random

import pytest
from fakes import RULES, FakeTicTacToe, MemoryRun, make_tree

from ratchet.autoharness import critic
from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.prompts import SCAFFOLD
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.envs.explore import harvest
from ratchet.autoharness.tree import Tree, select_action
from ratchet.evolve.selectors import pooled_arm as fresh_root_arm
from ratchet.models import ScriptedModel

FREE = "def legal_moves(cells):\n    return ['[' + c + ']' for c in cells if c not in ('X', 'O')]\n"
TAKEN = "def legal_moves(cells):\n    return [c for c in cells if c in ('X', 'O')]\n"
TAKEN_INDICES = "def legal_moves(cells):\n    return [str(i) for i, c in enumerate(cells) if c in ('X', 'O')]\n"
FIXED = "def legal_moves(cells):\n    return ['[0]', '[2]']\n"


def reply(body: str) -> str:
    return "```python\n" + body + "```"


def config(iterations: int = 6, **ideas) -> AutoHarnessConfig:
    return AutoHarnessConfig(method="ratchet", eval_envs=3, eval_steps=30, iterations=iterations, search_seeds=[0, 1, 2],
                             heldout_seeds=[100, 101], transitions_per_seed=30,
                             ideas={"samples_per_step": 1, "induce": False, "novelty": False, "repair": False, **ideas})


def synthesis(cfg, model, run=None) -> Synthesis:
    return Synthesis(cfg, model, run or MemoryRun(), lambda: FakeTicTacToe(), InProcessHarness,
                     hint_env_factory=lambda: FakeTicTacToe(hints=True), description=RULES.format(p=0))


# ------------------------------------------------------------------ the fresh-root arm


def test_fresh_root_arm_pools_the_root_scores():
    assert fresh_root_arm([], 1.0) == (1.0, 1.0)
    assert fresh_root_arm([0.2, 0.6], 2.0) == pytest.approx((1 + 2 * 0.8, 1 + 2 * 1.2))
    # One root: exactly the prior that root has as an unrefined node.
    assert fresh_root_arm([0.3], 1.0) == pytest.approx((1.3, 1.7))


def test_select_action_draws_nodes_then_the_fresh_arm():
    tree, c, arm = make_tree(), 2.0, (1.5, 2.5)
    outcomes = set()
    for seed in range(12):
        rng = random.Random(seed)
        expected = {
            "root": rng.betavariate(1 + c * 0.2, 1 + c * 0.8 + 2),
            "a": rng.betavariate(1 + c * 0.9, 1 + c * 0.1),
            "b": rng.betavariate(1 + c * 0.5, 1 + c * 0.5),
        }
        fresh = rng.betavariate(*arm)
        best = max(expected, key=expected.get)
        chosen = select_action(tree, random.Random(seed), c, arm)
        assert chosen is (None if fresh > expected[best] else tree.nodes[best])
        outcomes.add(chosen is None)
    assert outcomes == {True, False}  # both branches were exercised


def test_select_action_extremes_and_empty_tree():
    tree = make_tree()
    assert select_action(tree, random.Random(0), 1.0, (1e6, 1.0)) is None  # a near-certain fresh arm
    assert select_action(tree, random.Random(0), 1.0, (1.0, 1e6)) is not None  # a hopeless one
    assert select_action(Tree(), random.Random(0), 1.0, (1.0, 1.0)) is None  # nothing else to choose
    with pytest.raises(ValueError):
        select_action(Tree(), random.Random(0), 1.0)


def test_the_search_draws_its_choice_exactly():
    s = synthesis(config(fresh_roots=True), ScriptedModel([]))
    s.tree, s.state = make_tree(), {"root_scores": [0.9, 0.7]}
    outcomes = set()
    for seed in range(12):
        s.rng = random.Random(seed)
        rng = random.Random(seed)
        draws = {"root": rng.betavariate(1.2, 1.8 + 2), "a": rng.betavariate(1.9, 1.1), "b": rng.betavariate(1.5, 1.5)}
        fresh = rng.betavariate(1 + 1.6, 1 + 0.4)
        best = max(draws, key=draws.get)
        chosen = s._choose()
        assert chosen is (None if fresh > draws[best] else s.tree.nodes[best])
        assert s.rng.getstate() == rng.getstate()  # nothing else was drawn
        outcomes.add(chosen is None)
    assert outcomes == {True, False}


def _stuck_model():
    """The first root request gets a hard-coded answer and every refinement an inverted one; only
    a second root request gets the right function."""
    roots = [reply(FIXED), reply(FREE)]

    def respond(messages):
        text = messages[-1]["content"]
        if "This attempt is wrong" in text:
            return reply(TAKEN)
        return roots.pop(0) if len(roots) > 1 else roots[0]

    return ScriptedModel(respond)


def test_a_fresh_root_unsticks_a_search_that_only_refines_a_bad_root():
    off = synthesis(config(iterations=8), _stuck_model()).run_search()
    assert off.best_h < 1.0 and off.stop_reason == "iterations"

    model, run = _stuck_model(), MemoryRun()
    cfg = config(iterations=8, fresh_roots=True)
    on = synthesis(cfg, model, run).run_search()
    assert on.best_h == 1.0 and on.stop_reason.startswith("solved")
    roots = [c for c in run.cands.values() if c.parent_id is None]
    first, fresh = sorted(c.meta["iteration"] for c in roots)
    assert first == 0 and fresh > 0
    # The first root samples at first_temperature, a fresh root at temperature.
    root_temps = [c["params"]["temperature"] for c in model.calls if "This attempt is wrong" not in c["messages"][-1]["content"]]
    assert root_temps == [cfg.first_temperature, cfg.temperature]
    # The arm's evidence is every root request's best score.
    assert len(run.ckpt["autoharness"]["root_scores"]) == 2 and run.ckpt["autoharness"]["root_scores"][1] == 1.0


# ------------------------------------------------------------------ feedback in plain words


@pytest.fixture(scope="module")
def judged():
    """A search with harvested states, judging scaffolded candidates with the feedback on."""
    s = synthesis(config(explain_failures=True), ScriptedModel([]))
    s.set_transitions(harvest(lambda: FakeTicTacToe(), lambda: FakeTicTacToe(hints=True), [0, 1, 2], per_seed=30))
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
    assert critic.summarize(j.failures).startswith(text)  # first and unabridged in the summary


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
    off = synthesis(config(explain_failures=False), ScriptedModel([]))
    off.set_transitions(judged.transitions)
    assert not kinds(off.judge(SCAFFOLD + "\n" + TAKEN))


def test_the_refiner_reads_the_diagnosis():
    model = ScriptedModel([reply(TAKEN), reply(FREE)])
    result = synthesis(config(explain_failures=True), model).run_search()
    assert result.best_h == 1.0
    second = model.calls[1]["messages"][-1]["content"]
    assert "Its errors: On " in second and "the condition is inverted" in second
