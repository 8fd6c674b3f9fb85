"""The one-function request answered without a body: a small model (the 1.5B on Tower of Hanoi,
Guess the Number, Lights Out) copies a long signature and docstring back, examples and all, and
stops. Three components answer it, each tested on its own against a scripted model that behaves
that way: the body asked for alone (the docstring given as the reply's prefix), shorter examples,
and the whole-harness request after a reply with no body."""

from __future__ import annotations

import re

import pytest
from fakes import MemoryRun

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.envs.answers import has_body
from ratchet.envs import env_factory_for
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.autoharness.views import BoardView
from ratchet.models import ScriptedModel
from ratchet.models.request import continued

# Tower of Hanoi read as text, as a game whose board is no named values is (the view it had before
# its towers reached legal_moves as lists): the long request these components are about.
TEXT_ANSWER = '''import re

def legal_moves(board):
    towers = {t: [int(x) for x in body.split(",") if x.strip()]
              for t, body in re.findall(r"^([A-C]): \\[(.*?)\\]", board.split("Current Board:")[-1], re.M)}
    return [s + " " + d for s in "ABC" for d in "ABC" if towers.get(s) and (s == d or not towers.get(d) or towers[d][-1] > towers[s][-1])]
'''
# The right answer's body, written as a continuation of the signature and docstring.
BODY = "    import re\n" + TEXT_ANSWER.split("def legal_moves(board):\n", 1)[1] + "```"

WHOLE = '''import random
import re

def moves(board):
    towers = {t: [int(x) for x in body.split(",") if x.strip()]
              for t, body in re.findall(r"^([A-C]): \\[(.*?)\\]", board.split("Current Board:")[-1], re.M)}
    return ["[" + s + " " + d + "]" for s in "ABC" for d in "ABC" if towers.get(s) and (s == d or not towers.get(d) or towers[d][-1] > towers[s][-1])]

def propose_action(board):
    return random.choice(moves(board))

def is_legal_action(board, action):
    return action.strip() in moves(board)
'''


def copier(messages):
    """The failure as measured: given the function to complete, the reply is its signature and
    docstring again, no body; given the docstring as the reply's prefix, it writes the body; given
    the whole-harness request, a whole harness."""
    last = messages[-1]["content"]
    if messages[-1]["role"] == "assistant":
        return BODY
    if "def legal_moves(" in last:
        return "```python\n" + re.search(r"```python\n(def legal_moves.*?\"\"\"\n)```", last, re.S).group(1) + "```"
    return "```python\n" + WHOLE + "```"


def search_hanoi(samples: int = 1, **ideas):
    cfg = AutoHarnessConfig(env="TowerOfHanoi-v0", method="ratchet", iterations=3,
                            ideas={"samples_per_step": samples, "library_seed": False, "induce": False, "repair": False, **ideas})
    cfg.budget.max_calls = 6
    hanoi = env_factory_for("TowerOfHanoi-v0")
    model = ScriptedModel(copier)
    search = Synthesis(cfg, model, MemoryRun(), hanoi, InProcessHarness, hint_env_factory=env_factory_for("TowerOfHanoi-v0", hints=True),
                       description=hanoi().reset(0).text)
    search.view = BoardView
    return search, search.run_search(), model


OFF = {"body_prefix": False, "short_examples": False, "whole_fallback": False}


def test_a_model_that_copies_the_docstring_back_never_writes_a_body_without_the_fixes():
    _, result, model = search_hanoi(**OFF)
    assert result.best_h < 0.6 and result.calls == 6
    assert all(m["messages"][-1]["role"] == "user" for m in model.calls)


def test_the_body_alone_is_asked_for_with_the_docstring_as_the_replys_prefix():
    search, result, model = search_hanoi(**{**OFF, "body_prefix": True})
    assert result.best_h == 1.0 and result.calls == 1
    prefix = model.calls[0]["messages"][-1]
    assert prefix["role"] == "assistant" and prefix["content"].startswith("```python\ndef legal_moves(board):\n")
    assert "do not repeat it" in model.calls[0]["messages"][-2]["content"]
    # The stored answer is the prefix and the reply joined.
    stored = next(c for c in search.run.cands.values() if c.meta.get("response"))
    assert stored.meta["response"].startswith(prefix["content"]) and stored.meta["response"].endswith(BODY)


def test_after_two_replies_without_a_body_the_node_asks_for_the_whole_harness():
    _, result, model = search_hanoi(samples=2, **{**OFF, "whole_fallback": True})
    assert result.best_h == 1.0 and result.calls == 3
    first, second, third = (c["messages"][-1]["content"] for c in model.calls)
    # One reply without a body is not enough: the second sample gets the one-function request again.
    assert "def legal_moves(" in first and "def legal_moves(" in second
    assert "def legal_moves(" not in third and "def propose_action(board: str)" in third


def test_a_copied_docstring_that_entered_the_tree_is_refined_by_the_whole_harness_request():
    # One sample per refinement: the root's copy is judged and becomes the tree's only node; its
    # refinement asks for the whole harness.
    search, result, model = search_hanoi(samples=1, **{**OFF, "whole_fallback": True})
    assert result.best_h == 1.0 and result.calls == 2
    assert "def legal_moves(" not in model.calls[1]["messages"][-1]["content"]


def test_a_long_request_shows_two_examples_without_the_opening_every_observation_shares():
    _, _, short = search_hanoi(**{**OFF, "short_examples": True})
    _, _, full = search_hanoi(**OFF)
    opening = "You are playing Tower of Hanoi"
    request = lambda model: model.calls[0]["messages"][-1]["content"]  # noqa: E731
    assert request(full).count(">>> legal_moves(") == 3 and request(full).count(opening) == 4  # the rules, then each example
    assert request(short).count(">>> legal_moves(") == 2 and request(short).count(opening) == 1
    assert ">>> legal_moves('…" in request(short) and len(request(short)) < len(request(full)) - 600


def test_tic_tac_toes_request_is_short_and_unchanged():
    def request(**ideas):
        cfg = AutoHarnessConfig(env="TicTacToe-v0", method="ratchet", iterations=0,
                                ideas={"samples_per_step": 1, "library_seed": False, "induce": False, "repair": False, **ideas})
        cfg.budget.max_calls = 1
        game = env_factory_for("TicTacToe-v0")
        model = ScriptedModel(["```python\ndef legal_moves(cells):\n    return []\n```"])
        Synthesis(cfg, model, MemoryRun(), game, InProcessHarness, hint_env_factory=env_factory_for("TicTacToe-v0", hints=True),
                  description=game().reset(0).text).run_search()
        return model.calls[0]["messages"]

    assert request() == request(**OFF)


def test_the_continuation_is_joined_to_its_prefix_unless_the_reply_starts_over():
    ask = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "```python\ndef f(x):\n"}]
    assert continued(ask, "    return x\n```") == "```python\ndef f(x):\n    return x\n```"
    assert continued(ask, "```python\ndef f(x):\n    return 2\n```") == "```python\ndef f(x):\n    return 2\n```"
    assert continued(ask[:1], "anything") == "anything"


@pytest.mark.parametrize("code, body", [
    ('def legal_moves(b):\n    """Doc."""\n', False),
    ('def legal_moves(b):\n    """Doc."""\n    pass\n', False),
    ('def legal_moves(b):\n    """Doc.\n    >>> legal_moves("x', False),  # cut off inside its docstring
    ('def legal_moves(b):\n    """Doc."""\n    return [b\n', True),  # a body, broken
    ("def other(b):\n    return 1\n", False),
    (None, False),
])
def test_what_counts_as_a_body(code, body):
    assert has_body(code, "legal_moves") is body
