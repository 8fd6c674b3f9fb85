"""One-player puzzles: legal moves from the puzzle's state (TextArena 0.7.4 field names)."""

from __future__ import annotations

import itertools
import random
from typing import Any

from ratchet.envs.legal import rule


@rule("Bandit")
def bandit(env: Any, rng: random.Random) -> list[str]:
    return [f"[{b}]" for b in env.buttons]


@rule("Blackjack")
def blackjack(env: Any, rng: random.Random) -> list[str]:
    return ["[Hit]", "[Stand]"]


@rule("Secretary")
def secretary(env: Any, rng: random.Random) -> list[str]:
    return ["[accept]", "[continue]"]


@rule("Cryptarithm")
def cryptarithm(env: Any, rng: random.Random) -> list[str]:
    # A letter of the puzzle, a digit no other letter holds, no leading zero; re-assigning is allowed.
    return [
        f"[{letter} {digit}]"
        for letter in sorted(env.letters)
        for digit in range(10)
        if env.digit_used.get(digit, letter) == letter and not (digit == 0 and letter in env.first_letters)
    ]


@rule("GuessTheNumber")
def guess_the_number(env: Any, rng: random.Random) -> list[str]:
    return [f"[{n}]" for n in range(env.min_number, env.max_number + 1) if n not in env.guessed_numbers]


@rule("Mastermind", kind="subset", note="a random sample of the codes not guessed yet")
def mastermind(env: Any, rng: random.Random) -> list[str]:
    gs = env.state.game_state
    length, top, dup = gs["code_length"], gs["num_numbers"], gs["duplicate_numbers"]
    guessed = [entry["guess"] for entry in gs["history"]]
    out = []
    for _ in range(64):
        code = [rng.randint(1, top) for _ in range(length)] if dup else rng.sample(range(1, top + 1), length)
        if code not in guessed:
            out.append("[" + " ".join(map(str, code)) + "]")
    return out


@rule("Minesweeper")
def minesweeper(env: Any, rng: random.Random) -> list[str]:
    # Every hidden cell; a mine there loses the game (the env reports it as "losing, not illegal").
    return [f"[{r} {c}]" for r in range(env.rows) for c in range(env.cols) if not env.revealed[r][c]]


@rule("PegJump")
def peg_jump(env: Any, rng: random.Random) -> list[str]:
    board = env.state.game_state["board"]
    return [f"[{f} {t}]" for f, o, t in env.ALLOWED_MOVES if board[f] and board[o] and not board[t]]


@rule("Sudoku", note="legal here means correct: the game accepts only the hidden solution's digit, "
      "so the list reads the solution the player cannot see")
def sudoku(env: Any, rng: random.Random) -> list[str]:
    board = env.state.game_state["board"]
    return [f"[{r + 1} {c + 1} {env.full_grid[r][c]}]" for r in range(9) for c in range(9) if board[r][c] == 0]


@rule("TowerOfHanoi", kind="subset", note="moving a disk onto its own tower is accepted by the game but not listed")
def tower_of_hanoi(env: Any, rng: random.Random) -> list[str]:
    towers = env.state.game_state["towers"]
    return [
        f"[{s} {t}]"
        for s, t in itertools.permutations(sorted(towers), 2)
        if towers[s] and (not towers[t] or towers[t][-1] > towers[s][-1])
    ]


@rule("LightsOut")
def lights_out(env: Any, rng: random.Random) -> list[str]:
    return [f"[{r} {c}]" for r in range(env.size) for c in range(env.size)]


@rule("RushHour")
def rush_hour(env: Any, rng: random.Random) -> list[str]:
    vehicles = env.state.game_state["vehicles"]
    return [
        f"[{vid}{'+' if forward else '-'}]"
        for vid, vehicle in sorted(vehicles.items())
        for forward in (True, False)
        if env._can_move(vehicles, vehicle, forward)
    ]


@rule("2048", kind="filtered")
def twenty_forty_eight(env: Any, rng: random.Random) -> list[str]:
    # A direction that leaves the board unchanged is refused; the game's own move (on a copy) decides.
    return ["[Up]", "[Down]", "[Left]", "[Right]"]
