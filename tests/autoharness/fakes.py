"""Small in-test stand-ins: a TicTacToe env with TextArena's text, an in-memory run, and
harness code samples (correct, subtly wrong, broken)."""

from __future__ import annotations

import copy
import random
from typing import Any

from ratchet.autoharness.tree import Tree
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


class MemoryRun:
    """The run-store surface the search writes to, in memory (checkpoints deep-copied)."""

    def __init__(self) -> None:
        self.cands: dict[str, Any] = {}
        self.status: dict[str, tuple[str, float | None]] = {}
        self.evals: list[Any] = []
        self.ckpt: dict[str, Any] = {}
        self.logs: dict[str, list[dict[str, Any]]] = {}
        self.run_status: tuple[str, dict[str, Any] | None] = ("running", None)

    def add_candidate(self, candidate, status="proposed"):
        if candidate.id not in self.cands:
            self.cands[candidate.id] = candidate
            self.status[candidate.id] = (status, None)

    def set_candidate_status(self, candidate_id, status, score=None):
        self.status[candidate_id] = (status, score)

    def add_evaluation(self, evaluation):
        self.evals.append(evaluation)

    def checkpoint(self, name, obj):
        import json

        self.ckpt[name] = json.loads(json.dumps(obj))

    def load_checkpoint(self, name):
        return copy.deepcopy(self.ckpt.get(name))

    def append_jsonl(self, relpath, record):
        import json

        self.logs.setdefault(relpath, []).append(json.loads(json.dumps(record)))

    def read_jsonl(self, relpath):
        return copy.deepcopy(self.logs.get(relpath, []))

    def set_status(self, status, summary=None):
        self.run_status = (status, summary)


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

# The two parts of a decomposed TicTacToe harness (autoharness/decompose.py), right and wrong.
GOOD_PARSER = '''def parse_board(observation):
    grid = parse_grid(current_board(observation))
    return [[c if c in ("X", "O") else "" for c in row] for row in grid]
'''
# Keeps O but loses X: right only on boards without an X.
PARTIAL_PARSER = '''def parse_board(observation):
    grid = parse_grid(current_board(observation))
    return [[c if c == "O" else "" for c in row] for row in grid]
'''
# Leaves the cell numbers in: wrong on every board.
BAD_PARSER = '''def parse_board(observation):
    return parse_grid(current_board(observation))
'''
GOOD_RULE = '''def legal_moves(state):
    return ["[" + str(3 * r + c) + "]" for r in range(3) for c in range(3) if state[r][c] == ""]
'''
# Every cell, taken or not.
BAD_RULE = '''def legal_moves(state):
    return ["[" + str(i) + "]" for i in range(9)]
'''


def fenced(code: str) -> str:
    return "Here is the code:\n```python\n" + code + "```\n"


def make_tree() -> Tree:
    """root (h 0.2) with two children, a (0.9) and b (0.5): the tree the selection tests draw on."""
    tree = Tree()
    tree.add("root", None, 0.2)
    tree.add("a", "root", 0.9)
    tree.add("b", "root", 0.5)
    return tree
