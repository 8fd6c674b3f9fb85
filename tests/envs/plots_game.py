"""A 1-player TextArena game registered the ordinary TextArena way, as a user's plugin would:
one id with default wrappers, no ``-raw`` twin, and no printed list of legal moves.

Plots: plant seeds on a 3 x 3 field, one free plot a turn, by answering ``[row col]``; a planted
plot shows ``#``. Five plants win. A malformed answer, a plot off the field or one already planted
is an invalid move (the game ends, reward 0).
"""

from __future__ import annotations

import re

import textarena as ta
from textarena.envs.registration import ENV_REGISTRY, register
from textarena.wrappers import ActionFormattingWrapper, LLMObservationWrapper

ID = "Plots-v0"
SIZE = 3
_MOVE = re.compile(r"\[\s*(\d+)\s+(\d+)\s*\]")


class PlotsEnv(ta.Env):
    def reset(self, num_players: int, seed: int | None = None):
        self.state = ta.SinglePlayerState(num_players=num_players, seed=seed, max_turns=20)
        self.field = [["." for _ in range(SIZE)] for _ in range(SIZE)]
        self.state.reset(game_state={"planted": 0}, player_prompt_function=self._prompt)
        self.state.add_observation(message=self._board(), observation_type=ta.ObservationType.GAME_BOARD)

    def _board(self) -> str:
        return "Field:\n" + "\n".join(" ".join(row) for row in self.field)

    def _prompt(self, player_id: int, game_state) -> str:
        return (f"You are Player {player_id} in Plots. Plant a seed on a free plot ('.') of the {SIZE} x {SIZE} field "
                f"each turn by answering [row col], rows and columns numbered 0 to {SIZE - 1}, for example [0 2]. "
                "A planted plot shows '#'. Plant five seeds to win.")

    def step(self, action: str):
        self.state.add_observation(from_id=0, to_id=-1, message=action, observation_type=ta.ObservationType.PLAYER_ACTION)
        match = _MOVE.search(action)
        if not match:
            self.state.set_invalid_move(reward=0.0, reason="Invalid format: answer [row col], e.g. [0 2].")
        else:
            r, c = int(match.group(1)), int(match.group(2))
            if r >= SIZE or c >= SIZE:
                self.state.set_invalid_move(reward=0.0, reason=f"Plot {r} {c} is off the field.")
            elif self.field[r][c] == "#":
                self.state.set_invalid_move(reward=0.0, reason=f"Plot {r} {c} is already planted.")
            else:
                self.field[r][c] = "#"
                self.state.game_state["planted"] += 1
                if self.state.game_state["planted"] >= 5:
                    self.state.set_outcome(reward=1.0, reason="Five seeds planted.")
                else:
                    self.state.add_observation(message=self._board(), observation_type=ta.ObservationType.GAME_BOARD)
        return self.state.step()


if ID not in ENV_REGISTRY:  # a module may be imported twice (the CLI, then the probe)
    register(id=ID, entry_point=PlotsEnv, default_wrappers=[LLMObservationWrapper, ActionFormattingWrapper])
