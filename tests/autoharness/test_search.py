"""The synthesis loop with a scripted model, a TicTacToe stand-in and in-process harness code."""

from __future__ import annotations

from fakes import CRASHING, GOOD, LOOSE, RULES, FakeTicTacToe, MemoryRun, fenced

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.evaluate import CODE_ERROR, ENV_REJECTED, HarnessPlayer
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.autoharness.transitions import score_is_legal
from ratchet.envs.explore import harvest
from ratchet.envs.measure import lockstep
from ratchet.models import ScriptedModel


def config(method: str = "faithful", **kw) -> AutoHarnessConfig:
    base = dict(method=method, eval_envs=3, eval_steps=30, iterations=6, search_seeds=[0, 1, 2], heldout_seeds=[100, 101],
                transitions_per_seed=30)
    base.update(kw)
    if method == "ratchet":  # these tests are about the model's search: rules fitted to the listed states would solve the fake game first
        base["ideas"] = {"induce": False, **base.get("ideas", {})}
    return AutoHarnessConfig(**base)


def synthesis(cfg, model, run=None, **kw) -> Synthesis:
    return Synthesis(cfg, model, run or MemoryRun(), lambda: FakeTicTacToe(), InProcessHarness,
                     hint_env_factory=lambda: FakeTicTacToe(hints=True), description=RULES.format(p=0), **kw)


def rollout(code: str, seeds: list[int], steps: int):
    """The harness alone in lockstep, each env stopped at its first failure (the search's play)."""
    return lockstep(FakeTicTacToe, HarnessPlayer(InProcessHarness({"harness.py": code})), seeds, steps).total


def test_rollout_measures_legal_rate_and_records_failures():
    good = rollout(GOOD, [0, 1], 40)
    assert good.steps == 80 and good.legal_rate == 1.0 and not good.failures and good.games > 5

    loose = rollout(LOOSE, [0, 1, 2], 40)
    assert loose.failures and all(f.kind == ENV_REJECTED for f in loose.failures)
    assert len(loose.failures) == 3  # each env stops at its first illegal move
    first = loose.failures[0]
    assert "already occupied" in first.message and first.detail["verdict"] is True and "Current Board" in first.detail["board"]
    assert 0 < loose.legal_rate < 1

    crash = rollout(CRASHING, [0], 10)
    assert crash.legal_rate == 0.0 and crash.failures[0].kind == CODE_ERROR
    assert "IndexError" in crash.failures[0].message and "harness.py" in crash.failures[0].message


class SlowReset(FakeTicTacToe):
    """A game whose reset is slow (Sokoban's depth-first room generation), on a fake clock."""

    clock = [0.0]

    def reset(self, seed=None):
        SlowReset.clock[0] += 10.0
        return super().reset(seed)


def test_held_out_play_stops_at_its_deadline_and_says_so(monkeypatch):
    import time

    from ratchet.autoharness import protocol

    monkeypatch.setattr(time, "monotonic", lambda: SlowReset.clock[0])
    SlowReset.clock[0] = 0.0
    # LOOSE fails often, and each failure resets its game (10 s a reset): 35 s allow a few steps only.
    held = protocol.code_heldout(LOOSE, SlowReset, InProcessHarness, [0, 1], steps=200, max_seconds=35.0)
    assert 0 < held["steps"] < 400 and held["cut_after_s"] >= 35.0
    whole = protocol.code_heldout(GOOD, FakeTicTacToe, InProcessHarness, [0, 1], steps=50, max_seconds=35.0)
    assert whole["steps"] == 100 and "cut_after_s" not in whole  # its resets leave the clock where it is


def test_harvested_transitions_are_labelled_by_the_environment():
    transitions = harvest(lambda: FakeTicTacToe(), lambda: FakeTicTacToe(hints=True), [0, 1], per_seed=40)
    assert any(t.legal for t in transitions) and any(not t.legal for t in transitions)
    for t in transitions:
        env = FakeTicTacToe()
        env.reset(t.seed)
        for a in t.prefix:
            env.step(a)
        assert env.step(t.action).legal == t.legal
    good = score_is_legal(InProcessHarness({"harness.py": GOOD}), transitions)
    assert good.accuracy == 1.0
    loose = score_is_legal(InProcessHarness({"harness.py": LOOSE}), transitions)
    assert loose.false_accepts and not loose.false_rejects and loose.accuracy < 1.0


def test_stops_at_h_one_and_stores_every_node():
    model = ScriptedModel([fenced(LOOSE), fenced(CRASHING), fenced(GOOD), fenced(LOOSE)])
    run = MemoryRun()
    result = synthesis(config(), model, run).run_search()
    assert result.best_h == 1.0 and result.stop_reason.startswith("solved")
    assert result.calls == 3 and len(model.calls) == 3  # nothing asked after h = 1.0
    assert len(run.cands) == 3
    statuses = {run.cands[cid].files["harness.py"]: st for cid, st in run.status.items()}
    assert statuses[GOOD][1] == 1.0
    crashing = next(c for c in run.cands.values() if c.files["harness.py"] == CRASHING)
    assert crashing.parent_id is not None and crashing.meta["prompt"] and crashing.meta["response"]
    assert statuses[CRASHING][1] < statuses[LOOSE][1]


def test_code_failures_are_fed_back_to_the_refiner():
    model = ScriptedModel([fenced(CRASHING), fenced(GOOD)])
    synthesis(config(), model).run_search()
    second_prompt = model.calls[1]["messages"][-1]["content"]
    assert "IndexError" in second_prompt and "Traceback" in second_prompt
    assert "Fix propose_action" in second_prompt  # a crash in propose_action refines propose_action
    assert CRASHING.strip() in second_prompt


def test_env_rejections_refine_both_functions_with_the_env_reason():
    model = ScriptedModel([fenced(LOOSE), fenced(GOOD)])
    synthesis(config(), model).run_search()
    second_prompt = model.calls[1]["messages"][-1]["content"]
    assert "already occupied" in second_prompt and "Fix both functions" in second_prompt


def test_unparseable_responses_are_stored_as_failed():
    model = ScriptedModel(["I do not know.", "def broken(:", fenced(GOOD)])
    run = MemoryRun()
    result = synthesis(config(), model, run).run_search()
    assert result.best_h == 1.0
    assert sorted(st for st, _ in run.status.values()).count("failed") == 2


def test_iteration_and_call_budgets_stop_the_search():
    result = synthesis(config(iterations=2), ScriptedModel([fenced(LOOSE)], cycle=True)).run_search()
    assert result.stop_reason == "iterations" and result.iterations == 2 and result.calls == 3
    cfg = config(iterations=50)
    cfg.budget.max_calls = 4
    result = synthesis(cfg, ScriptedModel([fenced(LOOSE)], cycle=True)).run_search()
    assert result.stop_reason == "call budget" and result.calls == 4


def test_ratchet_method_samples_several_and_keeps_the_best():
    model = ScriptedModel([fenced(CRASHING), fenced(LOOSE), fenced(GOOD)])
    run = MemoryRun()
    result = synthesis(config("ratchet"), model, run).run_search()
    assert result.best_h == 1.0 and result.calls == 3 and result.nodes == 1  # one root, the best sample
    prompt = model.calls[0]["messages"][-1]["content"]
    assert "def legal_moves(cells):" in prompt and "harnesslib API" not in prompt  # the short scaffold request
    assert ">>> legal_moves([" in prompt  # doctest examples: real states with the game's own legal lists
    assert "Connect Four" not in prompt  # the worked example is off by default


def test_ratchet_unit_tests_give_counterexamples_of_both_signs():
    rejects_all = "def propose_action(board):\n    return '[0]'\n\ndef is_legal_action(board, action):\n    return action == '[0]'\n"
    model = ScriptedModel([fenced(LOOSE), fenced(rejects_all), fenced(LOOSE), fenced(GOOD)], cycle=True)
    cfg = config("ratchet", ideas={"samples_per_step": 1, "few_shot": False})
    synthesis(cfg, model).run_search()
    second = model.calls[1]["messages"][-1]["content"]
    assert "is_legal_action said True, but the environment rejects it" in second


def test_library_seed_can_solve_without_any_call():
    model = ScriptedModel([])
    seeds = [{"env": "TicTacToe-v0-small", "code": GOOD}]
    result = synthesis(config("ratchet"), model, library_seeds=seeds).run_search()
    assert result.best_h == 1.0 and result.calls == 0


SCAFFOLD_HARDCODED = '''import random
from harnesslib import action_value

def legal_actions(board):
    return ["[0]", "[2]"]

def propose_action(board):
    return random.choice(legal_actions(board))

def is_legal_action(board, action):
    return action_value(action) in [action_value(a) for a in legal_actions(board)]
'''


def test_scaffold_checks_legal_actions_against_the_games_own_lists():
    # The reply gives only legal_actions: the template's other two functions are kept.
    only_body = "```python\ndef legal_moves(cells):\n    return ['[0]', '[2]']\n```"
    model = ScriptedModel([only_body, fenced(GOOD + "\ndef legal_actions(board):\n    return ['[' + c + ']' for c in free(board)]\n")])
    cfg = config("ratchet", ideas={"samples_per_step": 1})
    run = MemoryRun()
    result = synthesis(cfg, model, run).run_search()
    first = next(c for c in run.cands.values() if c.meta.get("iteration") == 0)
    assert "def propose_action" in first.files["harness.py"] and "def is_legal_action" in first.files["harness.py"]
    second_prompt = model.calls[1]["messages"][-1]["content"]
    # Counterexample-guided: the wrong attempt, its error types, and the states it got wrong as examples.
    assert "This attempt is wrong" in second_prompt and "return ['[0]', '[2]']" in second_prompt
    assert "wrong_legal_actions: legal_actions returned" in second_prompt
    assert second_prompt.count(">>> legal_moves(") == 5
    assert result.best_h == 1.0


def test_a_legal_moves_that_returns_every_cell_does_not_score_as_solved():
    # Its is_legal_action labels every transition right (taken cells show X/O, not their
    # number), but it proposes taken cells: only the comparison of legal_actions with the
    # game's own legal lists exposes that, so it must pull h below 1.
    from ratchet.autoharness.prompts import SCAFFOLD

    s = synthesis(config("ratchet"), ScriptedModel([]))
    s.set_transitions(harvest(lambda: FakeTicTacToe(), lambda: FakeTicTacToe(hints=True), [0, 1, 2], per_seed=30))
    assert s.listed, "the fake game prints its legal moves, so states with full lists exist"
    every_cell = SCAFFOLD + "\ndef legal_moves(cells):\n    return cells\n"
    free_cells = SCAFFOLD + "\ndef legal_moves(cells):\n    return [c for c in cells if c not in ('X', 'O')]\n"
    loose, right = s.judge(every_cell), s.judge(free_cells)
    assert loose.metrics["unit_accuracy"] == 1.0
    assert loose.metrics["legal_actions_accuracy"] < 1.0
    # The comparison counts in h: lower than the search legal rate and the unit tests alone give.
    assert loose.h < 0.5 * loose.metrics["legal_rate"] + 0.5 * loose.metrics["unit_accuracy"]
    assert right.metrics["legal_actions_accuracy"] == 1.0 and right.h == 1.0
