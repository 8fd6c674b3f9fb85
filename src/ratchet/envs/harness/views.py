"""How the scaffolded ``legal_moves`` sees a state: one small class per view, chosen once per
search from the states the game listed (``choose_view``).

A view names ``legal_moves``' parameters, the expression the scaffold's ``legal_actions`` calls it
with, and how a state is written as a doctest example. A grid game gets the board's cells; a game
whose boards are no grid gets the observation text, or its named values where each board is such
lines (Tower of Hanoi's towers); a two-player grid game whose openings name the mover's mark also
gets that mark where its legal moves depend on whose turn it is (Othello).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

from ratchet.envs import harnesslib as lib


class BoardView:
    """The observation text itself (boards that are no grid: towers, hands, a guess history)."""

    name = "text"
    params = "board"
    call = "board"
    imports = ""  # harnesslib names the scaffold needs beyond its own
    what = "the observation text"

    def adapt(self, scaffold: str) -> str:
        """The scaffold's text for this view (the others keep it as it is)."""
        return scaffold

    def args(self, board: str) -> tuple[Any, ...]:
        """The state as ``legal_moves``' arguments."""
        return (board,)

    def show(self, args: tuple[Any, ...], limit: int = 600) -> str:
        """The arguments as a doctest writes them (the end of a long text: the position is last)."""
        return repr(excerpt(str(args[0]), limit))


class FieldsView(BoardView):
    """The current board's named values ("A: [3, 2, 1]" lines: towers, hands), as a dict."""

    name = "fields"
    params = "fields"
    call = "fields(current_board(board))"
    imports = "fields"
    what = "the current board's named values (harnesslib's fields(current_board(board)): 'A: [3, 1]' -> {'A': [3, 1]})"

    def args(self, board: str) -> tuple[Any, ...]:
        return (lib.fields(lib.current_board(board)),)

    def show(self, args: tuple[Any, ...], limit: int = 600) -> str:
        return repr(args[0])[:limit]


def has_fields(boards: Sequence[str]) -> bool:
    """Whether every current board is such lines, two at least, some of them no plain text, in a
    game whose opening names no player: a two-player game's values (Chopsticks' hands) do not say
    whose turn it is, which its text does ("You are Player 1")."""
    return bool(boards) and all((f := named_values(b := lib.current_board(board))) and len(f) == len(
        [line for line in b.splitlines() if line.strip(" .")])
        and not re.search(r"\bPlayer \d", lib.opening(board)) for board in boards)


class CellsView(BoardView):
    """The board's cells, row by row."""

    name = "cells"
    params = "cells"
    call = "cells(parse_grid(current_board(board)))"
    what = "the cells of the current board, row by row (harnesslib's cells(parse_grid(current_board(board))))"

    def args(self, board: str) -> tuple[Any, ...]:
        return (lib.cells(lib.parse_grid(lib.current_board(board))),)

    def show(self, args: tuple[Any, ...], limit: int = 600) -> str:
        return compact_list(args[0])


class MoverCellsView(CellsView):
    """The cells and the mark of the player to move (``harnesslib.mover``)."""

    name = "cells+mover"
    params = "cells, player"
    call = "cells(parse_grid(current_board(board))), mover(board)"
    imports = "mover"
    what = ("the cells of the current board, row by row (harnesslib's cells(parse_grid(current_board(board)))), "
            "and `player` the mark of the player to move")

    def adapt(self, scaffold: str) -> str:
        # A two-player game whose mover has no move passes, and the game then takes any action
        # (Othello): the plain scaffold's random.choice fails on the empty list there.
        return (scaffold.replace("return random.choice(legal_actions(board))", "return random.choice(legal_actions(board) or [ACTION_FORM.format(*[0] * ACTION_FORM.count('{}'))])")
                .replace("    return action_value(action) in [action_value(a) for a in legal_actions(board)]",
                         "    legal = [action_value(a) for a in legal_actions(board)]\n    return not legal or action_value(action) in legal"))

    def args(self, board: str) -> tuple[Any, ...]:
        return (*super().args(board), lib.mover(board))

    def show(self, args: tuple[Any, ...], limit: int = 600) -> str:
        return super().show(args, limit) + ", " + repr(args[1])


def is_grid(boards: Sequence[str]) -> bool:
    """Whether the boards parse as a grid (legal_moves gets its cells); cells with "[" are lists ("A: [3, 1]")."""
    return bool(boards) and all(len(g := lib.parse_grid(lib.current_board(b))) >= 2 and "[" not in "".join(lib.cells(g)) for b in boards)


def every_free_cell_is_a_move(states: Sequence[tuple[str, Sequence[str]]], marks: set[str]) -> bool:
    """Whether each listed state has as many legal actions as cells holding no player's mark: then
    the cells alone say what is legal (Tic Tac Toe: every numbered square), whoever moves."""
    return all(len(legal) == sum(c not in marks for c in lib.cells(lib.parse_grid(lib.current_board(b))))
               for b, legal in states)


def choose_view(states: Sequence[tuple[str, Sequence[str]]]) -> BoardView:
    """The view for a game's listed states (board, legal actions): the mover's mark joins the cells
    where the states show more than one mover, each named by its opening (both players of a
    two-player game moved), and the cells alone cannot say what is legal (Othello: few of the empty
    squares are moves, and which depends on the mover). A view the game does not need costs a small
    model: given a `player` it has no use for, the 0.5B stopped solving Tic Tac Toe. The first five
    boards decide whether there is a grid; all of them, who moves."""
    boards = [b for b, _ in states]
    if not is_grid(boards[:5]):
        return FieldsView() if has_fields(boards[:5]) else BoardView()
    movers = [lib.mover(b) for b in boards]
    if all(movers) and len(set(movers)) > 1 and not every_free_cell_is_a_move(states, set(movers)):
        return MoverCellsView()
    return CellsView()


def examples(view: BoardView, states: Sequence[tuple[str, Sequence[str]]], limit: int | None = None) -> list[tuple[tuple[Any, ...], Sequence[str]]]:
    """States (board, legal actions) as ``legal_moves`` sees them (``view.args``), with their legal
    lists: the first ``limit`` that look different (Tower of Hanoi's towers repeat where its histories do not)."""
    seen, out = set(), []
    for board, legal in states:
        if (shown := view.show(args := view.args(board))) not in seen and len(out) != limit:
            seen.add(shown)
            out.append((args, legal))
    return out


def compact_list(values: Sequence[Any], run: int = 4) -> str:
    """A list as a Python expression with runs of one value written once: a small model copying a
    spelled-out 6×7 board writes dots until its token limit, inside an unterminated docstring.

    >>> compact_list(['0', '1', '.', '.', '.', '.', 'X'])
    "['0', '1'] + ['.'] * 4 + ['X']"
    """
    parts: list[str] = []
    plain: list[Any] = []
    for value, group in itertools.groupby(values):
        n = len(list(group))
        if n < run:
            plain += [value] * n
            continue
        parts += [repr(plain)] if plain else []
        parts.append(f"[{value!r}] * {n}")
        plain = []
    return " + ".join(parts + ([repr(plain)] if plain or not parts else []))


def excerpt(text: str, limit: int = 700) -> str:
    """The end of a long observation (the current position is at the end)."""
    text = text.strip("\n")
    return text if len(text) <= limit else "…" + text[-limit:]


def named_values(block: str) -> dict[str, Any]:
    """The block's named values (``harnesslib.fields``) where it has two at least and some are no
    plain text (towers, hands, scores), else empty: a "Turn: X" line alone is no such board."""
    named = lib.fields(block)
    return named if len(named) >= 2 and any(not isinstance(v, str) for v in named.values()) else {}
