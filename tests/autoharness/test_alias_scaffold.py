"""The aliases idea end to end on the real Frozen Lake, which lists each move under two names
(``[up]`` and ``[w]``): the harvest infers them, the scaffold refiner's template carries them into
the harness as ``ALIASES``, and its ``legal_actions`` adds them to what the model's ``legal_moves``
returns, so ``legal_moves`` may return one name a move. (The option's place in the engine
configuration: test_ideas.py.)"""

from __future__ import annotations

import pytest

from ratchet.autoharness.refine import ScaffoldRefiner
from ratchet.envs.harness.runtime import InProcessHarness

pytest.importorskip("textarena")

# The directions only, never the letters: what the 0.5B wrote on Frozen Lake (here every direction,
# so the board's edges do not matter to what is tested).
DIRECTIONS = "```python\ndef legal_moves(cells):\n    return ['[up]', '[down]', '[left]', '[right]']\n```"
BLANK = "def propose_action(board):\n    return '[0]'\n\ndef is_legal_action(board, action):\n    return True\n"


def built(aliases: bool) -> tuple[str, str]:
    """The harness the scaffold refiner builds from the reply, and a Frozen Lake board."""
    from ratchet.envs import env_factory_for

    refiner = ScaffoldRefiner("FrozenLake-v0", seeds=[0, 1], transitions_per_seed=30, aliases=aliases)
    code, _ = refiner.new_code(DIRECTIONS, BLANK)
    return code, env_factory_for("FrozenLake-v0")().reset(0).text


def test_aliases_reach_the_harness_and_its_legal_actions_return_them():
    code, board = built(aliases=True)
    assert "ALIASES = {'[up]': ['[w]'], '[down]': ['[s]'], '[left]': ['[a]'], '[right]': ['[d]']}" in code
    with InProcessHarness({"harness.py": code}) as runtime:
        assert runtime.call("legal_actions", board) == ["[up]", "[w]", "[down]", "[s]", "[left]", "[a]", "[right]", "[d]"]
        assert runtime.call("is_legal_action", board, "[d]") and runtime.call("is_legal_action", board, "[right]")


def test_without_the_idea_the_same_legal_moves_rejects_the_letters():
    code, board = built(aliases=False)
    assert "ALIASES = {}" in code
    with InProcessHarness({"harness.py": code}) as runtime:
        assert runtime.call("legal_actions", board) == ["[up]", "[down]", "[left]", "[right]"]
        assert not runtime.call("is_legal_action", board, "[d]") and runtime.call("is_legal_action", board, "[right]")
