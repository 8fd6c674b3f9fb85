"""A game that prints no legal moves (Plots: a 1-player TextArena game written for the tests, actions
``[row col]``): the action grammar read from its rules lets exploration try every action, the legal
ones found become each state's full list, and the scaffold formats what the code returns in the
game's action form, so the search reaches h = 1.0 with code that returns Python tuples."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from fakes import synthesized

from ratchet.envs.harnesslib import as_action
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.envs import EnvConfig, make
from ratchet.envs.explore import harvest
from ratchet.envs.grammar import infer_grammar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs"))
importlib.import_module("plots_game")  # registers Plots-v0 with TextArena, as a user's plugin would

TUPLES = '''def legal_moves(board):
    rows = board.split("Field:")[-1].strip().splitlines()[:3]
    return [(r, c) for r in range(3) for c, v in enumerate(rows[r].split()) if v == "."]
'''


def plots():
    return make("Plots-v0", EnvConfig(remote="never"))


def test_the_grammar_of_a_game_without_a_legal_list():
    rules = plots().reset(0).text
    assert "Available" not in rules and "Valid" not in rules
    grammar = infer_grammar(rules)
    assert grammar.describe() == "[<int 0-2> <int 0-2>]" and grammar.size() == 9 and grammar.form == "[{} {}]"
    assert grammar.matches("[1 2]") and not grammar.matches("(1, 2)") and not grammar.matches("[3 0]")
    assert as_action((1, 2), grammar.form) == "[1 2]" and as_action("[1 2]", grammar.form) == "[1 2]"
    # Templates in other shapes: a letter range, a keyword and a number, an error message's format.
    assert infer_grammar("Guess a letter [a-z].").size() == 26
    assert infer_grammar("Drop a disc with [col 3]; columns 0-6.").enumerate()[:2] == ["[col 0]", "[col 1]"]
    assert infer_grammar(["Pick a pile.", "Invalid move: use [pile n], e.g. [2 3]"]).patterns[0].form == "[{} {}]"
    assert infer_grammar("No actions here.").enumerate() == []


def test_exploring_labels_every_action_and_finds_full_lists():
    transitions = harvest(plots, None, [0, 1], per_seed=40)
    legal = [t for t in transitions if t.legal]
    illegal = [t for t in transitions if not t.legal]
    assert len(legal) >= 20 and len(illegal) >= 10
    assert all(t.listed for t in transitions)
    for t in transitions:
        field = t.board.split("Field:")[-1].strip().splitlines()[:3]
        free = {f"[{r} {c}]" for r in range(3) for c, v in enumerate(field[r].split()) if v == "."}
        assert set(t.listed) == free and t.legal == (t.action in free)


def test_the_engine_reaches_h_1_on_a_game_with_no_printed_legal_list(tmp_path):
    summary, _, model, code, h = synthesized(tmp_path, "Plots-v0", "```python\n" + TUPLES + "```", eval_steps=30,
                                             search_seeds=list(range(10)), heldout_seeds=[100], transitions_per_seed=30)
    assert h == 1.0 and summary["model_calls"] == 1
    assert "ACTION_FORM = '[{} {}]'" in code
    # The prompt showed the states' lists in the game's own format.
    assert "'[0 0]'" in model.calls[0]["messages"][-1]["content"]


def test_code_that_returns_a_tuple_is_told_the_games_action_shape():
    from ratchet.envs.harness.player import HarnessPlayer
    from ratchet.envs.measure import lockstep

    code = '''def propose_action(board):
    return (0, 0)


def is_legal_action(board, action):
    return True
'''
    runtime = InProcessHarness({"harness.py": code})
    shape = infer_grammar(plots().reset(0).text).describe()
    stats = lockstep(plots, HarnessPlayer(runtime, shape), [0], 5).total
    [failure] = stats.failures
    assert "returned the tuple (0, 0), not the action text" in failure.message
    assert "[<int 0-2> <int 0-2>]" in failure.message
    text = '''def propose_action(board):
    return "(0, 0)"


def is_legal_action(board, action):
    return True
'''
    [failure] = lockstep(plots, HarnessPlayer(InProcessHarness({"harness.py": text}), shape), [0], 5).total.failures
    assert "not the action text" not in failure.message  # a string is the code's own choice of text
