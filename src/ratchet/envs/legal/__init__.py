"""Legal moves of TextArena games, computed from the game's own state and rule code.

The random-legal opponent needs, at every turn, moves the game will accept. Text is a poor source:
most games never print their legal moves, and some print a stale list (Santorini lists only the
first player's opening moves, in every seat's rules prompt). So each supported game family has a
*rule*: a function of the live (unwrapped) TextArena env that reads its state and, wherever the
game has one, calls its own validator (``_is_valid_move``, ``_get_valid_moves``, ``legal_moves``…).

A rule is one of three kinds (see :class:`Rule`):

* **exact**: every move it returns is legal now, and it returns all of them.
* **subset**: every move it returns is legal now, but not all legal moves are listed: the space
  is too large (Colonel Blotto allocations, Mastermind codes: a random sample drawn from ``rng``), or
  moves that are legal but pointless are left out (each rule's note says which).
* **filtered**: a complete, finite superset (Golf's dozen commands) that :func:`legal_moves` narrows
  with the game's own ``step`` on a copy (``probe``). Used only where an invalid move is reported
  through ``set_invalid_move`` and no legal move is ever reported that way (so not Minesweeper,
  whose mines are "invalid", nor Snake, whose invalid moves kill instead).

:func:`support` says, per game id, whether its legal moves are computed here (``rules``), only
printed by the game (``listed``), or not known (``none``: the random-legal player then guesses and
says so). Nothing here draws from the global ``random`` module, so computing moves never changes
the game's own random stream.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ratchet.envs.notes import family_of

MoveFn = Callable[[Any, random.Random], list[str]]


@dataclass(frozen=True)
class Rule:
    """How one game family's legal moves are computed."""

    fn: MoveFn
    kind: str = "exact"  # "exact" | "subset" | "filtered"
    note: str = ""


RULES: dict[str, Rule] = {}


def rule(*families: str, kind: str = "exact", note: str = "") -> Callable[[MoveFn], MoveFn]:
    """Register ``fn(env, rng) -> moves`` for the given families (the id before ``-v``)."""

    def register(fn: MoveFn) -> MoveFn:
        for family in families:
            RULES[family] = Rule(fn, kind, note)
        return fn

    return register


#: Families whose observation lists the legal moves for the player to move at every turn (checked
#: in the TextArena 0.7.4 source), used when no rule exists; variants that hide the list (Chess
#: blind, Othello hard) are excluded by id.
LISTED = frozenset({
    "Crusade", "FifteenPuzzle", "FrozenLake", "IndianPoker", "KuhnPoker", "PigDice",
    "ReverseTicTacToe", "SimpleTak", "Sokoban", "SpiteAndMalice", "Stratego", "TicTacToe", "WildTicTacToe",
})


def support(env_id: str) -> str:
    """``rules`` (computed here from the game's state), ``listed`` (the game prints them; the
    player samples that list) or ``none`` (not computable: the random-legal player guesses)."""
    _load()
    if family_of(env_id) in RULES:
        return "rules"
    return "listed" if family_of(env_id) in LISTED else "none"


def legal_moves(env_id: str, env: Any, seed: int = 0, probe: Callable[[str], bool] | None = None) -> list[str] | None:
    """Legal moves for the player to move in ``env`` (a reset, unwrapped TextArena env), or None
    when this game has no rule. ``seed`` draws the sample of a ``subset`` rule; ``probe(action)``
    (try on a copy) narrows a ``filtered`` rule's superset and is required for those."""
    _load()
    found = RULES.get(family_of(env_id))
    if found is None:
        return None
    moves = list(dict.fromkeys(found.fn(env, random.Random(seed))))
    if found.kind == "filtered":
        if probe is None:
            return None
        moves = [m for m in moves if probe(m)]
    return moves


def kind(env_id: str) -> str | None:
    """The rule kind for ``env_id`` (exact / subset / filtered), None without a rule."""
    _load()
    found = RULES.get(family_of(env_id))
    return found.kind if found else None


_loaded = False


def _load() -> None:
    """Import the rule modules once (they register themselves)."""
    global _loaded
    if not _loaded:
        _loaded = True
        from ratchet.envs.legal import boards, cards, choices, puzzles  # noqa: F401


__all__ = ["LISTED", "RULES", "Rule", "family", "kind", "legal_moves", "rule", "support"]
