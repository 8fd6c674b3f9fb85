"""Plain-words diagnoses of a harness's ``legal_actions`` over many boards of a game: mistakes small
models make over and over when asked for it. An inverted condition (it returns exactly the moves
that are not legal, e.g. the taken cells), an answer copied from an example (the same list on boards
whose legal moves differ), and a test for "legal" that never holds (always []). A per-board
"returned X but the legal actions are Y" (``transitions.check_legal_actions``) says none of these;
a refiner's error summary puts the diagnoses (``DIAGNOSES``) first, unabridged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratchet.contracts import Failure
from ratchet.envs import harnesslib as lib

#: Failure kinds that are diagnoses over many boards, not single failed steps.
INVERTED = "inverted_condition"
COPIED = "copied_answer"
NEVER = "never_legal"
DIAGNOSES = (INVERTED, COPIED, NEVER)


def diagnose_legal_actions(wrong: Sequence[Failure], states: Sequence[tuple[str, Sequence[str]]]) -> list[Failure]:
    """Diagnoses (failures of kind ``INVERTED`` / ``COPIED`` / ``NEVER``, at most one each)
    over the wrong states of a ``legal_actions`` check (``check_legal_actions``' failures) among
    ``states`` (board, the game's legal list), the states that were checked.

    Inverted: on at least half of the wrong boards (and 2) it returned no legal move and exactly
    the others, either as actions (every action the game listed anywhere, minus the legal ones
    here) or as the taken cells of the grid (their contents, e.g. "X"/"O", or their indices).
    Copied: one and the same output on at least half of the boards (and 3) whose legal lists
    differ: an answer hard-coded instead of computed (if it is some state's legal list, most likely
    an example's). When that output is [] it is a test for "legal" that never holds (``NEVER``)."""
    listed = [f for f in wrong if f.kind == "wrong_legal_actions"]
    universe = {lib.action_value(str(a)) for _, legal in states for a in legal}
    out: list[Failure] = []
    inverted = [f for f in listed if _inverted(f, universe)]
    if len(inverted) < max(2, len(listed) // 2):  # one board can match by chance; a real inversion is everywhere
        inverted = []
    if inverted:
        first = inverted[0].detail
        out.append(Failure(INVERTED, (f"On {len(inverted)} of {len(states)} boards legal_actions returned exactly the moves that are "
                                      f"NOT legal (e.g. {short(first['got'])} where the legal ones are {short(first['expected'])}): "
                                      "the condition is inverted. Keep the moves it drops and drop the ones it keeps."),
                           detail=_diagnosis(first["board"])))
    groups: dict[str, list[Failure]] = {}
    for f in listed:
        if f not in inverted:
            groups.setdefault(repr(f.detail.get("got")), []).append(f)
    same = max(groups.values(), key=len, default=[])
    # A hard-coded answer is the same on (nearly) every board; a computed one repeats on a few.
    if len(same) < max(3, len(states) // 2):
        same = []
    if len({tuple(f.detail["expected"]) for f in same}) >= 3 and same[0].detail["got"] == []:
        # Not a copied answer: a test for "legal" that never holds (e.g. `cell == ' '` where free
        # cells hold their number).
        out.append(Failure(NEVER, (f"legal_actions returned [] on {len(same)} boards that all have legal moves: its test for a "
                                   "legal move is never true. Compare that test with the values in the examples."
                                   + _legal_cell_values(same[0])),
                           detail={**_diagnosis(same[0].detail["board"]), "expected": same[0].detail["expected"], "got": []}))
    elif len({tuple(f.detail["expected"]) for f in same}) >= 3:
        got = same[0].detail["got"]
        values = sorted(lib.action_value(str(a)) for a in got) if isinstance(got, list) else None
        origin = ("; that is the answer of one example, copied" if values is not None and any(
            sorted(lib.action_value(a) for a in legal) == values for _, legal in states) else "")
        out.append(Failure(COPIED, (f"legal_actions returned the same {short(got)} on {len(same)} boards whose legal moves all differ: "
                                    f"the answer is hard-coded{origin}. Compute the list from the argument instead."),
                           detail=_diagnosis(same[0].detail["board"])))
    return out


def _diagnosis(board: str) -> dict[str, Any]:
    """The detail of a diagnosis: it blames ``legal_actions`` on one example board, no action."""
    return {"function": "legal_actions", "board": board, "action": None, "verdict": None}


def _legal_cell_values(failure: Failure) -> str:
    """What the legal cells of a board actually hold (" On this board cell 4 holds '4'..."), when the
    legal actions are cell indices of a grid: the concrete fact a "never true" test contradicts."""
    cells = lib.cells(lib.parse_grid(lib.current_board(failure.detail.get("board") or "")))
    shown = []
    for action in failure.detail.get("expected") or []:
        value = lib.action_value(str(action))
        if value.isdigit() and int(value) < len(cells):
            shown.append(f"cell {value} holds {cells[int(value)]!r}")
    if not shown:
        return ""
    return f" On this board the legal moves are {short(failure.detail['expected'])}: " + ", ".join(shown[:4]) + "."


def _inverted(failure: Failure, universe: set[str]) -> bool:
    got = failure.detail.get("got")
    if not isinstance(got, list) or not got:
        return False
    values = {lib.action_value(str(a)) for a in got}
    legal = {lib.action_value(str(a)) for a in failure.detail.get("expected", [])}
    if values & legal:
        return False
    if values == universe - legal:
        return True
    cells = lib.cells(lib.parse_grid(lib.current_board(failure.detail.get("board") or "")))
    taken = [i for i, c in enumerate(cells) if lib.action_value(c) not in legal]
    return bool(taken) and (values == {lib.action_value(cells[i]) for i in taken} or values == {str(i) for i in taken})


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters for a prompt."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
