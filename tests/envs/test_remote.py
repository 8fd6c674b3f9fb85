"""Games in a worker process (the Python >= 3.12 arrangement) behave exactly like in-process ones."""

import pytest

from ratchet.contracts import RatchetError
from ratchet.envs import EnvConfig, make
from ratchet.envs.remote import RemoteEnvironment
from ratchet.envs.textarena_env import TextArenaEnv

from .smoke import smoke


def _play(env, moves):
    out = [env.reset(4)]
    for move in moves:
        result = env.step(move)
        out.append(result)
        if result.done:
            break
    env.close()
    return out


def test_worker_and_in_process_give_the_same_game(py312: str) -> None:
    # py312: skipped like the other worker tests where no Python >= 3.12 worker exists, not failed
    moves = ["[4]", "[zz]", "[4]", "[0]", "[8]", "[2]", "[6]", "[3]", "[5]", "[1]", "[7]"]
    local = _play(make("TicTacToe-v0"), moves)
    remote_env = make("TicTacToe-v0", EnvConfig(remote="always"))
    assert isinstance(remote_env, RemoteEnvironment)
    remote = _play(remote_env, moves)
    assert local[0] == remote[0]
    for a, b in zip(local[1:], remote[1:], strict=True):
        assert (a.observation, a.done, a.legal, a.illegal_reason, a.ended_by_illegal, a.rewards) == (
            b.observation, b.done, b.legal, b.illegal_reason, b.ended_by_illegal, b.rewards
        )


def test_chess_runs_on_the_312_worker(py312: str) -> None:
    env = make("Chess-v0")
    assert isinstance(env, (RemoteEnvironment, TextArenaEnv))
    obs = env.reset(0)
    assert "a b c d e f g h" in obs.text and "Valid moves" not in obs.text
    assert "[e2e4]" in env.legal_moves_hint()
    assert env.probe("[e2e4]") and not env.probe("[e2e5]")
    bad = env.step("[e2e5]")
    assert not bad.legal and bad.illegal_reason
    good = env.step("[e2e4]")
    assert good.legal and good.observation.player_id == 1
    assert "Chess" in env.game_description()
    env.close()


@pytest.mark.parametrize("env_id", ["Checkers-v0", "ReverseTicTacToe-v0", "UltimateTexasHoldem-v0"])
def test_the_other_312_games_make_and_step(py312: str, env_id: str) -> None:
    report = smoke(env_id)
    assert report["flagged"] and all(report["flagged"]) and not report["errors"], report


def test_iterated_stag_hunt_runs_and_has_no_illegal_moves(py312: str) -> None:
    # Not one of the paper's 145 (a talk-then-decide game): talk turns take any text and a decision
    # that is not "[Stag]" counts as "[Hare]", so the game has no invalid-move branch at all.
    env = make("IteratedStagHunt-v0")
    env.reset(0)
    results = [env.step("[zzz-not-a-move]") for _ in range(6)]
    assert all(r.legal for r in results) and not results[-1].done
    env.close()


def test_worker_errors_surface_as_ratchet_errors() -> None:
    env = RemoteEnvironment("TicTacToe-v0", 2, EnvConfig())
    env.reset(0)
    env.close()
    with pytest.raises(RatchetError):
        env.step("[4]")
    with pytest.raises(RatchetError, match="unknown TextArena env"):
        RemoteEnvironment("NoSuchGame-v0", 2, EnvConfig())


def test_board_state_is_the_games_own_board_in_process_and_through_the_worker() -> None:
    for env in (make("TicTacToe-v0"), make("TicTacToe-v0", EnvConfig(remote="always"))):
        env.reset(0)
        assert env.board_state() == [["", "", ""], ["", "", ""], ["", "", ""]]
        env.step("[4]")
        env.step("[0]")
        assert env.board_state() == [["X", "", ""], ["", "O", ""], ["", "", ""]]
        env.close()


def test_board_state_is_none_where_the_board_is_an_object(py312: str) -> None:
    env = make("Chess-v0")  # a chess.Board: no agreed plain form
    env.reset(0)
    assert env.board_state() is None
    env.close()
