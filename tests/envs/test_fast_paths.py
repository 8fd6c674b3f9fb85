"""The per-step shortcuts of the adapter and runner give the same results as the plain way."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ratchet.envs import EnvConfig, make
from ratchet.envs.hints import find_hints, hint_spans, items_in, strip_hints, strip_spans
from ratchet.envs.registry import paper_players
from ratchet.envs.runner import bootstrap_mean_ci
from ratchet.envs.textarena_env import _GLOBAL_RANDOM, _random_module_bound_to, _strip_line

TEXTS = [
    "Current Board:\n\n 0 | 1 | 2 \n---+---+---\n 3 | O | 5 \n\nAvailable Moves: '[0]', '[1]', '[2]'",
    "Game Board:\n0|.|B|\nValid moves: '[2, 2]', '[2, 4]'\nScores - Black: 4, White: 1\n",
    "Your available actions are: '[check]', '[bet]'",
    "Available Moves: up, down\nmore text\nLegal moves: [a], [b]\n",
    "  - Valid moves: [x]\n- Possible actions (pick one): '[y]'",
    "no hints here, just moves and actions",
    "Valid moves:",
    "",
]


@pytest.mark.parametrize("text", TEXTS)
def test_one_scan_serves_items_and_stripping(text: str) -> None:
    spans = hint_spans(text)
    assert items_in(text, spans) == find_hints(text)
    assert strip_spans(text, spans) == strip_hints(text)
    assert strip_spans(text, spans, static=True) == strip_hints(text, static=True)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("prefix", ["[GAME] ", "[Player 1] ", "[Black] "])
def test_a_line_is_stripped_from_its_message_spans(text: str, prefix: str) -> None:
    spans = hint_spans(text)
    expected = strip_hints(prefix + text)
    assert (_strip_line(prefix, text, spans) if spans else prefix + text) == expected


def _play(env, moves: list[str]) -> list[tuple]:
    out = [(env.reset(3).text, env.legal_moves_hint())]
    for move in moves:
        result = env.step(move)
        out.append((result.legal, result.illegal_reason, result.observation and result.observation.text,
                    env.legal_moves_hint()))
        if result.done:
            break
    return out


@pytest.mark.parametrize("config", [EnvConfig(), EnvConfig(strip_move_hints=False), EnvConfig(bounded_observation=False)])
def test_remembered_hint_scans_change_nothing(config: EnvConfig) -> None:
    # The same game twice: once with the per-env scan memo, once with the memo emptied before every
    # step (every text scanned afresh). Includes a rejected move, whose board comes back unchanged.
    moves = ["[4]", "[4]", "[0]", "[8]", "[2]", "[6]", "[1]"]
    cached = make("TicTacToe-v0", config)
    fresh = make("TicTacToe-v0", config)

    class Forgetful(dict):
        def get(self, key, default=None):
            self.clear()
            return default

    fresh._scans = Forgetful()
    assert _play(cached, moves) == _play(fresh, moves)
    assert cached._scans  # the memo was used


def test_a_rejected_move_repeats_the_board_once() -> None:
    env = make("TicTacToe-v0")
    env.reset(0)
    env.step("[4]")
    result = env.step("[4]")  # occupied: warned, same player again
    assert not result.legal
    text = result.observation.text
    assert text.count("Current Board") == 1 and "Available Moves" not in text
    assert "[4]" not in env.legal_moves_hint()


def test_private_random_is_unbound_even_when_game_code_raises() -> None:
    import random as module

    rng = random.Random(5)
    binding = _random_module_bound_to({name: getattr(rng, name) for name in _GLOBAL_RANDOM})
    with pytest.raises(RuntimeError), binding:
        assert module.random() == random.Random(5).random()
        raise RuntimeError("game code failed")
    assert all(getattr(module, name) is fn for name, fn in _GLOBAL_RANDOM.items())


def test_bootstrap_draws_what_rng_choice_draws() -> None:
    # The interval is computed by indexing with rng.integers; it must equal the rng.choice formula.
    data_rng = random.Random(0)
    for n in (2, 3, 7, 20):
        values = [data_rng.choice([-1.0, 0.0, 0.5, 1.0]) for _ in range(n)]
        rng = np.random.default_rng(0)
        means = rng.choice(np.asarray(values), size=(2000, n), replace=True).mean(axis=1)
        reference = (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))
        assert bootstrap_mean_ci(values) == reference


def test_paper_players_is_a_fresh_dict_each_call() -> None:
    first = paper_players()
    first["TicTacToe-v0"] = 99
    assert paper_players()["TicTacToe-v0"] == 2
