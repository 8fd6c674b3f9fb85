"""A harness is an agent: the runner plays it one env at a time (``act``) and the lockstep loop
batched (``act_many``), and for the same seed both take the same actions and measure the same
legal rate, a harness's own failures included."""

from __future__ import annotations

from fakes import CRASHING, GOOD, LOOSE, FakeTicTacToe

from ratchet.envs.harness.player import HarnessPlayer
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.envs.agents import Agent, BatchedAgent
from ratchet.envs.measure import lockstep
from ratchet.envs.registry import register_env
from ratchet.envs.runner import RolloutConfig, run_rollouts

# Its own check rejects every proposal: a failure the env never sees.
STRICT = '''def propose_action(board):
    return "[4]"

def is_legal_action(board, action):
    return False
'''

SENT: list[str] = []


class Recorded(FakeTicTacToe):
    """The fake TicTacToe, writing down every action it is sent."""

    def step(self, action: str):
        SENT.append(action)
        return super().step(action)


register_env("recorded-tictactoe", lambda config: Recorded(), num_players=2)


def player(code: str) -> HarnessPlayer:
    return HarnessPlayer(InProcessHarness({"harness.py": code}))


def test_a_harness_is_an_agent_that_can_play_batched() -> None:
    assert isinstance(player(GOOD), Agent) and isinstance(player(GOOD), BatchedAgent)


def test_the_runner_and_lockstep_play_a_harness_alike() -> None:
    games: set[tuple[str, ...]] = set()
    for code, fails in ((GOOD, False), (LOOSE, False), (CRASHING, True), (STRICT, True)):
        for seed in (0, 1, 2):
            SENT.clear()
            # Self-play of one game, stopped at the first illegal step: the runner's single-env path.
            report = run_rollouts("recorded-tictactoe", lambda c=code: player(c), [seed],
                                  RolloutConfig(workers=1, opponent="self", stop_on_illegal=True))
            by_runner = list(SENT)
            SENT.clear()
            played = lockstep(Recorded, player(code), [seed], steps_per_env=report.agent_steps).total
            assert played.steps == report.agent_steps and played.legal_rate == report.legal_rate
            # A failed attempt is never stepped by lockstep; the runner sends "" for it (rejected).
            assert by_runner == SENT + [""] * fails
            games.add(tuple(SENT))
            if code == GOOD:
                assert played.legal_rate == 1.0 and played.games == 1
    assert len(games) > 4  # the seeds do choose the moves: the comparison is not of one fixed game
