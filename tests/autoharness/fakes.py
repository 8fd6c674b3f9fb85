"""Small in-test stand-ins: a TicTacToe env with TextArena's text, harness code samples (correct,
subtly wrong, broken), and a synthesis on the engine with a scripted refiner."""

from __future__ import annotations

import random
from typing import Any

from ratchet.contracts import Observation, StepResult

RULES = (
    "[GAME] You are Player {p} in Tic Tac Toe.\nYour goal is to win three in a row on the board.\n"
    "On your turn, you should select the square number (0-8) you want to put your mark in next.\n"
    "For example, '[4]' places your mark in the center cell of the board.\n"
)
LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


class FakeTicTacToe:
    """TicTacToe with TextArena's board text; both seats played by the caller; hints optional."""

    env_id = "TicTacToe-v0"
    num_players = 2

    def __init__(self, hints: bool = False) -> None:
        self.hints = hints
        self.cells = [""] * 9
        self.player = 0
        self.warned = False
        self.steps = 0

    def _text(self, message: str = "") -> str:
        rows = []
        for r in range(3):
            rows.append(" " + " | ".join(self.cells[3 * r + c] or str(3 * r + c) for c in range(3)) + " ")
        board = "\n---+---+---\n".join(rows)
        text = RULES.format(p=self.player) + message + "[GAME] Current Board:\n\n" + board + "\n"
        if self.hints:
            text += "\nAvailable Moves: " + ", ".join(f"'[{i}]'" for i in range(9) if not self.cells[i])
        return text

    def reset(self, seed: int) -> Observation:
        self.cells = [""] * 9
        self.player = 0
        self.warned = False
        self.steps = 0
        return Observation(0, self._text())

    def step(self, action: str) -> StepResult:
        self.steps += 1
        inner = action.strip().strip("[]").strip()
        reason = None
        if not inner.isdigit() or not 0 <= int(inner) <= 8:
            reason = "invalid format, use [0]-[8]"
        elif self.cells[int(inner)]:
            reason = f"cell {inner} is already occupied"
        if reason:
            if self.warned:
                return StepResult(None, True, False, reason, True, False, {self.player: -1.0, 1 - self.player: 1.0})
            self.warned = True
            return StepResult(Observation(self.player, self._text(f"[GAME] Player {self.player} attempted an invalid move. Reason: {reason}\n")), False, False, reason)
        self.warned = False
        self.cells[int(inner)] = "OX"[self.player]
        mark = self.cells[int(inner)]
        if any(all(self.cells[i] == mark for i in line) for line in LINES):
            return StepResult(None, True, rewards={self.player: 1.0, 1 - self.player: -1.0})
        if all(self.cells):
            return StepResult(None, True, rewards={0: 0.0, 1: 0.0})
        self.player = 1 - self.player
        return StepResult(Observation(self.player, self._text()), False)

    def close(self) -> None:
        pass


PIG_RULES = ("[GAME] You are playing Pig Dice. Reach 20 points. On your turn type '[roll]' to roll the die "
             "or '[hold]' to bank your turn total; a 1 loses the turn total.\n")


class FakePigDice:
    """A 1-player Pig Dice with TextArena-like text: its only actions, ``[roll]`` and ``[hold]``,
    are words in brackets (the shape a small model writes bare)."""

    env_id = "PigDice-v0"
    num_players = 1

    def __init__(self, hints: bool = False) -> None:
        self.hints = hints
        self.score = self.turn = self.steps = 0
        self.warned = False
        self.rng = random.Random(0)

    def _text(self, message: str = "") -> str:
        text = PIG_RULES + message + f"[GAME] Current Total Scores: Player 0: '{self.score}'\nTurn total: {self.turn}\n"
        return text + ("\nAvailable actions: '[roll]', '[hold]'" if self.hints else "")

    def reset(self, seed: int) -> Observation:
        self.score = self.turn = self.steps = 0
        self.warned = False
        self.rng = random.Random(seed)
        return Observation(0, self._text())

    def step(self, action: str) -> StepResult:
        self.steps += 1
        move = action.strip()
        if move not in ("[roll]", "[hold]"):
            reason = "invalid action, type [roll] or [hold]"
            if self.warned:
                return StepResult(None, True, False, reason, True, False, {0: -1.0})
            self.warned = True
            return StepResult(Observation(0, self._text(f"[GAME] Player 0 attempted an invalid move. Reason: {reason}\n")), False, False, reason)
        self.warned = False
        if move == "[hold]":
            self.score, self.turn = self.score + self.turn, 0
        else:
            die = self.rng.randint(1, 6)
            self.turn = 0 if die == 1 else self.turn + die
        if self.score >= 20 or self.steps >= 30:
            return StepResult(None, True, rewards={0: 1.0 if self.score >= 20 else 0.0})
        return StepResult(Observation(0, self._text()), False)

    def close(self) -> None:
        pass


GOOD = '''import random
from harnesslib import current_board, parse_grid, cells, action_value

def free(board):
    return [c for c in cells(parse_grid(current_board(board))) if c.isdigit()]

def propose_action(board):
    return "[" + random.choice(free(board)) + "]"

def is_legal_action(board, action):
    return action_value(action) in free(board)
'''

# Accepts everything: proposes a random cell 0-8, occupied or not.
LOOSE = '''import random

def propose_action(board):
    return "[" + str(random.randint(0, 8)) + "]"

def is_legal_action(board, action):
    return True
'''

CRASHING = '''def propose_action(board):
    return "[" + str([][1]) + "]"

def is_legal_action(board, action):
    return True
'''

def fenced(code: str) -> str:
    return "Here is the code:\n```python\n" + code + "```\n"


def synthesized(tmp_path: Any, env_id: str, reply: str, **fields: Any) -> tuple[dict[str, Any], Any, Any, str, float]:
    """One synthesis on the engine of the real ``env_id`` (harness code run in-process), every
    refiner call answered with ``reply``; the ratchet method with one sample a step and none of the
    ideas that write a harness without the model (library seed, fitted rules, repair, autofix: the
    model's answer is what is tested), 30 steps a game. Returns (the engine's summary, the
    run, the scripted model, the best harness, its held-in h)."""
    from ratchet.autoharness.config import AutoHarnessConfig
    from ratchet.autoharness.engine import game_description, run_on_engine
    from ratchet.envs.harness.runtime import InProcessHarness
    from ratchet.evolve.archive import Archive
    from ratchet.models import ScriptedModel
    from ratchet.store import RunStore

    ideas = {"samples_per_step": 1, "library_seed": False, "induce": False, "repair": False, "autofix": False,
             **fields.pop("ideas", {})}
    cfg = AutoHarnessConfig.model_validate({"env": env_id, "model": "scripted:", "method": "ratchet", "iterations": 1, "eval_steps": 30,
                                            "library_dir": str(tmp_path / "lib"), "ideas": ideas, **fields})
    run = RunStore(tmp_path / "runs").create_run("autoharness", cfg.model_dump(), env_id)
    model = ScriptedModel([reply], cycle=True)
    summary = run_on_engine(cfg, model, run, description=game_description(env_id), extra={"harness_runtime": InProcessHarness})
    archive = Archive(run)
    best = summary["report"]["best"]["id"]
    return summary, run, model, archive.get(best).files["harness.py"], archive.score(best, "heldin")


#: A correct TicTacToe harness that plays the first free cell (the engine tests' refiner reply).
FIXED = '''import re


def free_cells(board):
    return re.findall(r"\\b([0-8])\\b", board.rsplit("Current Board:", 1)[-1])


def propose_action(board):
    return "[" + free_cells(board)[0] + "]"


def is_legal_action(board, action):
    return action.strip().strip("[]").strip() in free_cells(board)
'''
