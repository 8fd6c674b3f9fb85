"""harnesslib: a tiny library that synthesized harness code may import inside the sandbox.

It holds the fiddly text handling every board game needs, so that a small model writes 2-5 lines
of game logic instead of 30 lines of string parsing. It imports only the standard library and is
copied next to the harness in the sandbox (and into exported harness files), so harnesses that use
it stay self-contained.

Example (TicTacToe)::

    from harnesslib import current_board, parse_grid, cells, action_value
    def is_legal_action(board, action):
        free = [c for c in cells(parse_grid(current_board(board))) if c.isdigit()]
        return action_value(action) in free
"""

from __future__ import annotations

import ast
import re

__all__ = ["current_board", "parse_grid", "cells", "fields", "bracketed", "action_value", "as_action", "with_aliases", "action_ints",
           "mover", "opening", "index_to_rc", "rc_to_index"]

_SEPARATOR = re.compile(r"^(?=.*[-+=_])[\s\-+=|_]*$")  # "|     |     |" is a row of empty cells
_BOARD_HEADER = re.compile(r"((current )?board( state)?\s*:?|current (board|grid|state)\b.*:)\s*$", re.IGNORECASE)


def current_board(text: str) -> str:
    """The last board block of an observation: the lines after the last line ending in "Board:"
    (e.g. "[GAME] Current Board:") or a "Current grid state (...):" header up to the next blank-line-separated paragraph that is
    not part of the grid. Falls back to the last block of lines containing '|'. Returns "" if none.

    >>> obs = "[GAME] Current Board:\\n\\n 0 | 1 | 2 \\n---+---+---\\n 3 | O | 5 \\n\\nYour move"
    >>> print(current_board(obs))
     0 | 1 | 2
    ---+---+---
     3 | O | 5
    """
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        if _BOARD_HEADER.search(line.strip()):
            start = i + 1
    if start is None:
        # No header: take the last run of lines that look like a grid row.
        end = None
        for i in range(len(lines) - 1, -1, -1):
            if "|" in lines[i]:
                end = i
                break
        if end is None:
            return ""
        start = end
        while start > 0 and ("|" in lines[start - 1] or (lines[start - 1].strip() and _SEPARATOR.match(lines[start - 1]))):
            start -= 1
        return "\n".join(line.rstrip() for line in lines[start : end + 1])
    block: list[str] = []
    for line in lines[start:]:
        if not line.strip():
            if block:
                break
            continue
        if line.lstrip().startswith("[") and block:
            break  # the next "[GAME] ..." message
        block.append(line.rstrip())
    return "\n".join(block)


def parse_grid(block: str) -> list[list[str]]:
    """Rows of cell strings from a text grid. Separator lines (---+---) are dropped; a row is split
    on '|' when it has one, else on whitespace. Cells are stripped.

    >>> parse_grid(" 0 | 1 | 2 \\n---+---+---\\n 3 | X | 5 ")
    [['0', '1', '2'], ['3', 'X', '5']]
    >>> parse_grid(". . X\\n. O .")
    [['.', '.', 'X'], ['.', 'O', '.']]
    """
    rows: list[list[str]] = []
    for line in block.splitlines():
        if not line.strip() or _SEPARATOR.match(line):
            continue
        if "|" in line:
            parts = [p.strip() for p in line.strip().strip("|").split("|")]
        else:
            parts = line.split()
        rows.append(parts)
    return rows


def cells(grid: list[list[str]]) -> list[str]:
    """The grid flattened row by row (index = row * width + col).

    >>> cells([['0', '1'], ['X', '3']])
    ['0', '1', 'X', '3']
    """
    return [c for row in grid for c in row]


_FIELD = re.compile(r"^\s*([^:\[\]]+?)\s*:\s*(\S.*?)\s*$")


def fields(block: str) -> dict[str, object]:
    """The block's "name: value" lines as a dict, each value read as a Python literal where it is
    one (towers, hands, scores), else kept as text.

    >>> fields("A: [3, 2, 1]\\nB: []\\nTurn: X")
    {'A': [3, 2, 1], 'B': [], 'Turn': 'X'}
    """
    out: dict[str, object] = {}
    for line in block.splitlines():
        if found := _FIELD.match(line):
            try:
                out[found.group(1)] = ast.literal_eval(found.group(2))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                out[found.group(1)] = found.group(2)
    return out


def bracketed(text: str) -> list[str]:
    """Every "[...]" in ``text``, with the brackets, in order.

    >>> bracketed("Valid moves: '[0]', '[e2e4]' and [a b]")
    ['[0]', '[e2e4]', '[a b]']
    """
    return re.findall(r"\[[^\[\]]*\]", text)


def action_value(action: str) -> str:
    """The inside of an action's first brackets, stripped, its parts one space apart (the games that
    print "[2, 3]" accept "[2 3]"); the whole action if none.

    >>> action_value(" [4] "), action_value("[A 3]"), action_value("[2, 3]"), action_value("up")
    ('4', 'A 3', '2 3', 'up')
    """
    found = re.search(r"\[([^\[\]]*)\]", action)
    return " ".join((found.group(1) if found else action).replace(",", " ").split())


def as_action(value: object, form: str = "[{}]") -> str:
    """What code returned, as the game's action text: a bracketed string is kept as it is; a tuple,
    list, number or bare string fills ``form``'s slots (the game's action format, one ``{}`` a slot)
    when it has as many parts, else its parts go in brackets, space-separated.

    >>> as_action((1, 2), "[{} {}]")
    '[1 2]'
    >>> as_action(4), as_action("4"), as_action("[4]")
    ('[4]', '[4]', '[4]')
    >>> as_action("B 3", "[{} {}]"), as_action([0, 2])
    ('[B 3]', '[0 2]')
    """
    if isinstance(value, str) and value.strip().startswith("["):
        return value.strip()
    parts = [str(p) for p in value] if isinstance(value, (tuple, list)) else re.findall(r"[^\s,()\[\]'\"]+", str(value))
    if form.count("{}") == len(parts):
        return form.format(*parts)
    return "[" + " ".join(parts) + "]"


def with_aliases(actions: list[str], aliases: dict[str, list[str]]) -> list[str]:
    """``actions``, each followed by its other names (``aliases``: an action -> the actions the game
    takes as the same move), without repeats; names are compared by :func:`action_value`.

    >>> with_aliases(["[w]", "[left]"], {"[up]": ["[w]"], "[left]": ["[a]"]}), with_aliases(["[4]"], {})
    (['[w]', '[up]', '[left]', '[a]'], ['[4]'])
    """
    groups = {action_value(m): [k, *v] for k, v in aliases.items() for m in [k, *v]}
    out: dict[str, str] = {}
    for name in (n for a in actions for n in [a, *groups.get(action_value(a), [])]):
        out.setdefault(action_value(name), name)
    return list(out.values())


def action_ints(action: str) -> list[int]:
    """All integers in an action, in order.

    >>> action_ints("[3 4]")
    [3, 4]
    >>> action_ints("[move 12 to 7]")
    [12, 7]
    """
    return [int(x) for x in re.findall(r"-?\d+", action)]


#: How games' openings name the mover's mark, most specific first: "playing Black (B)", "you will be 'X'",
#: "Your disc symbol: O."; a colour alone ("You are playing White") gives its initial.
_MARKS = [re.compile(p, re.IGNORECASE) for p in (r"playing \w+ \(([a-z])\)", r"you will be '([a-z])'", r"symbol:\s*'?([a-z])\b")]
_COLOUR = re.compile(r"\bplaying (?:as )?(white|black|red|blue|yellow|green)\b", re.IGNORECASE)


def opening(text: str) -> str:
    """The observation's opening: the text before the game's first "[...]" message (its rules)."""
    return re.split(r"^\[", text, maxsplit=1, flags=re.MULTILINE)[0]


def mover(text: str) -> str:
    """The mark of the player to move, as the observation's opening (the text before the game's
    first "[...]" message) names it; "" when it names none. A two-player board's legal moves often
    depend on whose turn it is (Othello's flanking), which the board's cells alone do not say.

    >>> mover("You are Player 1 playing White (W) in a game of Othello.\\n[GAME] Game Board:")
    'W'
    >>> mover("As Player 1, you will be 'X', while your opponent is 'O'."), mover("You are playing Black in a game")
    ('X', 'B')
    >>> mover("[GAME] Current Board: ...")
    ''
    """
    first = opening(text)
    for pattern in _MARKS:
        found = pattern.search(first)
        if found:
            return found.group(1).upper()
    found = _COLOUR.search(first)
    return found.group(1)[0].upper() if found else ""


def index_to_rc(index: int, width: int) -> tuple[int, int]:
    """Flat index → (row, col) on a grid ``width`` cells wide.

    >>> index_to_rc(5, 3)
    (1, 2)
    """
    return divmod(index, width)


def rc_to_index(row: int, col: int, width: int) -> int:
    """(row, col) → flat index on a grid ``width`` cells wide.

    >>> rc_to_index(1, 2, 3)
    5
    """
    return row * width + col
