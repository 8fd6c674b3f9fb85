"""Labelled transitions on a real TextArena game: the legal list comes from the env's own
``legal_moves_hint()``, and agrees with reading it from a hint-keeping twin."""

from __future__ import annotations

import random
import re
from typing import Any

from ratchet.envs.explore import harvest
from ratchet.envs import EnvConfig, make


class WithoutHint:
    """An env that hides ``legal_moves_hint`` (a plugin env, say): harvest must use the hint env."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self.env_id, self.num_players = env.env_id, env.num_players

    def reset(self, seed: int):
        return self._env.reset(seed)

    def step(self, action: str):
        return self._env.step(action)

    def close(self) -> None:
        self._env.close()


def _stripped():
    return make("TicTacToe-v0", EnvConfig(strip_move_hints=True, remote="never"))


def _hinted():
    return make("TicTacToe-v0", EnvConfig(strip_move_hints=False, remote="never"))


def test_the_legal_list_comes_from_legal_moves_hint_without_a_second_replay():
    built: list[int] = []

    def hint_factory():
        built.append(1)
        return _hinted()

    transitions = harvest(_stripped, hint_factory, [0, 1], per_seed=24)
    assert not built  # the env lists its own moves: no hint twin was built or replayed
    assert transitions and all(t.listed for t in transitions)
    for t in transitions:
        assert "Available Moves" not in t.board  # the harness still sees stripped text
        # The list is the position's own: exactly the free cells (digits) of the latest board shown.
        board = t.board.rsplit("Current Board:", 1)[1].split("\n[", 1)[0]
        assert set(re.findall(r"\b\d\b", board)) == {m.strip("[]") for m in t.listed}
        if t.action in t.listed:
            assert t.legal
    assert any(not t.legal for t in transitions)


def test_same_transitions_as_reading_the_hint_twin():
    direct = harvest(_stripped, _hinted, [0, 1, 2], per_seed=20, rng=random.Random(3))
    twin = harvest(lambda: WithoutHint(_stripped()), _hinted, [0, 1, 2], per_seed=20, rng=random.Random(3))
    assert [t.to_json() for t in direct] == [t.to_json() for t in twin]


def test_without_printed_lists_every_action_of_the_grammar_is_tried_and_the_legal_ones_are_the_list():
    # No hint factory: no printed list. The rules name "[4]" and "(0-8)": nine actions, all tried.
    transitions = harvest(_stripped, None, [0], per_seed=30)
    assert transitions and all(t.listed for t in transitions)
    for t in transitions:
        board = t.board.rsplit("Current Board:", 1)[1].split("\n[", 1)[0]
        assert set(re.findall(r"\b\d\b", board)) == {m.strip("[]") for m in t.listed}
        assert t.legal == (t.action in t.listed)
    # With too many actions to try them all (here: at most 5), nothing counts as the full list.
    sampled = harvest(_stripped, None, [0], per_seed=10, exhaustive=5)
    assert sampled and not any(t.listed for t in sampled)
