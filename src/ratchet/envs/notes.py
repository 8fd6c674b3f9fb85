"""Games where TextArena calls a merely *losing* move "invalid".

In these games the env's invalid-move call also fires for moves that are perfectly well-formed and
allowed by the rules but bad: stepping on a mine, a digit that contradicts the solution, walking into
a wall, a 2048 move that changes nothing. A harness cannot always know those in advance (a mine is
hidden), so reports count them as *lost*, not *illegal*: ``StepResult.losing_not_illegal`` is set
when the env's reason matches the game's pattern below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class LosingInvalidNote:
    """Which invalid-move reasons of a game family mean "a legal but losing move"."""

    family: str
    pattern: re.Pattern[str]
    note: str


NOTES: tuple[LosingInvalidNote, ...] = (
    LosingInvalidNote(
        "Minesweeper",
        re.compile(r"hit a mine", re.IGNORECASE),
        "Revealing a mine is reported as an invalid move; it is a legal move that loses.",
    ),
    LosingInvalidNote(
        "Sudoku",
        re.compile(r"violates Sudoku rules", re.IGNORECASE),
        "A digit that contradicts the solution is reported as invalid; format, bounds and pre-filled "
        "cells are true illegal moves.",
    ),
    LosingInvalidNote(
        "FrozenLake",
        re.compile(r"hit a wall", re.IGNORECASE),
        "Walking off the grid is reported as invalid; it is a wasted (losing) move, not a malformed one.",
    ),
    LosingInvalidNote(
        "2048",
        re.compile(r"did not change", re.IGNORECASE),
        "A direction that moves no tile is reported as invalid; it is a no-op move.",
    ),
)


def family_of(env_id: str) -> str:
    """``Sudoku-v0-hard`` → ``Sudoku``."""
    return env_id.split("-v", 1)[0]


def note_for(env_id: str) -> LosingInvalidNote | None:
    family = family_of(env_id)
    return next((n for n in NOTES if n.family == family), None)


def is_losing_not_illegal(env_id: str, reason: str | None) -> bool:
    note = note_for(env_id)
    return bool(note and reason and note.pattern.search(reason))
