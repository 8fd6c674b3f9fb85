"""The TextArena adapter: illegal moves from the source, lost-vs-illegal, observations, seeds."""

import random

import pytest

from ratchet.contracts import Environment, Observation
from ratchet.envs import EnvConfig, make
from ratchet.envs.textarena_env import TextArenaEnv


def test_tictactoe_illegal_then_game_ending_illegal() -> None:
    env = make("TicTacToe-v0")
    assert isinstance(env, Environment) and env.num_players == 2
    obs = env.reset(0)
    assert obs.player_id == 0
    first = env.step("[zzz-not-a-move]")
    assert not first.legal and first.illegal_reason and "format" in first.illegal_reason
    assert not first.done and not first.ended_by_illegal
    assert first.observation is not None and first.observation.player_id == 0  # same player again
    assert "attempted an invalid move" in first.observation.text
    second = env.step("[also-bad]")
    assert second.done and not second.legal and second.ended_by_illegal
    assert second.rewards == {0: -1.0, 1: 1.0}


def test_legal_moves_and_occupied_cell_reason() -> None:
    env = make("TicTacToe-v0")
    env.reset(1)
    ok = env.step("4")  # unbracketed, formatted like TextArena's default wrapper
    assert ok.legal and ok.illegal_reason is None and ok.observation.player_id == 1
    bad = env.step("[4]")
    assert not bad.legal and "occupied" in bad.illegal_reason


def test_losing_moves_are_marked_not_illegal() -> None:
    env = make("FrozenLake-v0")
    env.reset(0)
    result = env.step("[up]")  # the start is the top-left corner: up walks into the wall
    assert not result.legal and "wall" in result.illegal_reason
    assert result.losing_not_illegal
    fmt = env.step("[fly]")
    assert not fmt.legal and not fmt.losing_not_illegal


def test_minesweeper_mine_is_losing_not_illegal() -> None:
    env = make("Minesweeper-v0-small")
    assert isinstance(env, TextArenaEnv)
    env.reset(3)
    env.step("[0 0]")  # first reveal is safe and places the mines
    grid = env._env.grid if hasattr(env._env, "grid") else env._env.state.game_state["grid"]
    mine = next((r, c) for r, row in enumerate(grid) for c, v in enumerate(row) if v == -1)
    result = env.step(f"[{mine[0]} {mine[1]}]")
    assert not result.legal and "mine" in result.illegal_reason and result.losing_not_illegal


def test_move_hints_are_stripped_but_kept_for_the_runner() -> None:
    stripped = make("TicTacToe-v0").reset(0)
    raw_env = make("TicTacToe-v0", EnvConfig(strip_move_hints=False))
    raw = raw_env.reset(0)
    assert "Available Moves" in raw.text
    assert "Available Moves" not in stripped.text
    assert "---+---" in stripped.text  # the board is still there
    env = make("TicTacToe-v0")
    env.reset(0)
    assert env.legal_moves_hint() == [f"[{i}]" for i in range(9)]


@pytest.mark.parametrize(
    ("env_id", "board_marker", "moves"),
    [
        ("TicTacToe-v0", "---+---", ["[4]", "[0]", "[8]", "[2]"]),
        ("Othello-v0", "0 1 2 3 4 5 6 7", ["[2, 3]", "[2, 2]", "[2, 1]"]),
        ("ConnectFour-v0", "col", ["[col 3]", "[col 3]", "[col 4]", "[col 2]"]),
        ("Minesweeper-v0", " 0  1  2", ["[3 3]", "[0 0]"]),
        ("Sudoku-v0-very-easy", "C1", ["[zzz-not-a-move]"]),
    ],
)
def test_bounded_observation_keeps_the_board(env_id: str, board_marker: str, moves: list[str]) -> None:
    env = make(env_id)
    obs = env.reset(0)
    for move in moves:
        result = env.step(move)
        if result.done:
            break
        obs = result.observation
        assert board_marker.lower() in obs.text.lower(), obs.text[-500:]


def test_bounded_observation_stays_bounded() -> None:
    lengths = {}
    for bounded in (True, False):
        env = make("PigDice-v0", EnvConfig(bounded_observation=bounded, max_steps=400))
        env.reset(0)
        sizes = []
        for i in range(120):
            result = env.step("[roll]" if i % 3 else "[hold]")
            if result.done:
                break
            sizes.append(len(result.observation.text))
        lengths[bounded] = sizes
    assert max(lengths[True]) < 3000
    assert lengths[False][-1] > 3 * lengths[True][-1]


def test_global_random_is_not_touched_and_seeds_reproduce() -> None:
    random.seed(42)
    expected = [random.random() for _ in range(3)]
    random.seed(42)
    env = make("Sudoku-v0-very-easy")
    a = env.reset(7).text
    env.step("[1 1 1]")
    assert [random.random() for _ in range(3)] == expected
    assert make("Sudoku-v0-very-easy").reset(7).text == a
    assert make("Sudoku-v0-very-easy").reset(8).text != a


def test_interleaved_envs_do_not_share_a_stream() -> None:
    def play(env, steps):
        out = [env.reset(5).text]
        for _ in range(steps):
            out.append(env.step("[roll]").observation.text)
        return out

    alone = play(make("PigDice-v0"), 6)
    one, two = make("PigDice-v0"), make("PigDice-v0")
    mixed_one = [one.reset(5).text]
    two.reset(9)
    for _ in range(6):
        two.step("[roll]")
        mixed_one.append(one.step("[roll]").observation.text)
    assert mixed_one == alone


def test_step_cap_truncates_and_auto_reset_continues() -> None:
    env = make("PigDice-v0", EnvConfig(max_steps=3))
    env.reset(0)
    results = [env.step("[roll]") for _ in range(3)]
    assert results[-1].done and results[-1].info.get("truncated")
    auto = make("TicTacToe-v0", EnvConfig(auto_reset=True))
    auto.reset(0)
    auto.step("[bad]")
    end = auto.step("[bad]")
    assert end.done and isinstance(end.observation, Observation) and end.info["auto_reset_seed"] == 1
    assert auto.step("[4]").legal  # the new episode is playable


def test_probe_tests_a_move_without_playing_it() -> None:
    env = make("TicTacToe-v0")
    obs = env.reset(0)
    assert env.probe("[4]") and not env.probe("[9]")
    assert env.observe() == obs
    assert env.step("[4]").legal  # the probe did not play it


def test_game_description_is_the_rules_prompt() -> None:
    text = make("TicTacToe-v0").game_description()
    assert "Tic Tac Toe" in text and "Available Moves" not in text


def test_unknown_id_has_a_hint() -> None:
    from ratchet.contracts import RatchetError

    with pytest.raises(RatchetError) as err:
        make("TicTacTo-v0")
    assert err.value.hint


def test_legal_moves_hint_describes_the_current_position():
    # The drain for the player to move also holds the list printed after the previous move;
    # only the newest list may count, or a just-taken cell shows up as legal.
    env = make("TicTacToe-v0")
    env.reset(0)
    assert "[4]" in env.legal_moves_hint()
    env.step("[4]")
    assert "[4]" not in env.legal_moves_hint()
    env.step("[0]")
    assert env.legal_moves_hint() == ["[1]", "[2]", "[3]", "[5]", "[6]", "[7]", "[8]"]
    env.close()
