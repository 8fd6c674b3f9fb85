"""The critic: picks at most N failed steps to show the refiner and names their error types.

Sampling takes one failure of each error type first (so one noisy error does not crowd out the
rest), then fills up at random. The consolidated summary ("3× rejected by env: cell N is already
occupied; 1× code_error: IndexError…") tells the refiner what kinds of mistakes remain.

``diagnose_legal_actions`` names, in plain words, mistakes small models make over and over when
asked for ``legal_actions``: an inverted condition (it returns exactly the moves that are not
legal, e.g. the taken cells), an answer copied from an example (the same list on boards whose
legal moves differ), and a test for "legal" that never holds (always []). A per-board "returned
X but the legal actions are Y" says none of these; the summary puts the diagnoses first, unabridged.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ratchet.autoharness import harnesslib as lib

#: Failure kinds that are diagnoses over many boards, not single failed steps.
INVERTED = "inverted_condition"
COPIED = "copied_answer"
NEVER = "never_legal"
DIAGNOSES = (INVERTED, COPIED, NEVER)


def error_type(failure: dict[str, Any]) -> str:
    """A failure's type: its kind plus the last line of its feedback with numbers masked, so
    "cell 4 is occupied" and "cell 7 is occupied" are one type."""
    feedback = (failure.get("feedback") or "").strip().splitlines()
    last = feedback[-1] if feedback else ""
    last = re.sub(r"\d+", "N", last)[:120]
    return f"{failure.get('kind', 'failure')}: {last}" if last else str(failure.get("kind", "failure"))


def sample_failures(failures: Sequence[dict[str, Any]], rng: random.Random, limit: int = 5) -> list[dict[str, Any]]:
    """At most ``limit`` failures: one per error type first (in order of first appearance), then
    random others. Deterministic for a given rng state."""
    if len(failures) <= limit:
        return list(failures)
    by_type: dict[str, list[int]] = {}
    for i, f in enumerate(failures):
        by_type.setdefault(error_type(f), []).append(i)
    chosen: list[int] = []
    for indices in by_type.values():
        if len(chosen) < limit:
            chosen.append(rng.choice(indices))
    rest = [i for i in range(len(failures)) if i not in chosen]
    rng.shuffle(rest)
    chosen += rest[: limit - len(chosen)]
    return [failures[i] for i in sorted(chosen)]


def summarize(failures: Sequence[dict[str, Any]]) -> str:
    """The error types among ``failures`` with counts, most frequent first."""
    diagnoses = list(dict.fromkeys(f["feedback"] for f in failures if f.get("kind") in DIAGNOSES))
    counts = Counter(error_type(f) for f in failures if f.get("kind") not in DIAGNOSES)
    return "; ".join(diagnoses + [f"{n}× {t}" for t, n in counts.most_common(6)])


def diagnose_legal_actions(wrong: Sequence[dict[str, Any]], states: Sequence[tuple[str, Sequence[str]]]) -> list[dict[str, Any]]:
    """Diagnoses (failure dicts of kind ``INVERTED`` / ``COPIED`` / ``NEVER``, at most one each)
    over the wrong states of a ``legal_actions`` check (``check_legal_actions``' failures) among
    ``states`` (board, the game's legal list), the states that were checked.

    Inverted: on at least half of the wrong boards (and 2) it returned no legal move and exactly
    the others, either as actions (every action the game listed anywhere, minus the legal ones
    here) or as the taken cells of the grid (their contents, e.g. "X"/"O", or their indices).
    Copied: one and the same output on at least half of the boards (and 3) whose legal lists
    differ: an answer hard-coded instead of computed (if it is some state's legal list, most likely
    an example's). When that output is [] it is a test for "legal" that never holds (``NEVER``)."""
    listed = [f for f in wrong if f.get("kind") == "wrong_legal_actions"]
    universe = {lib.action_value(str(a)) for _, legal in states for a in legal}
    out: list[dict[str, Any]] = []
    inverted = [f for f in listed if _inverted(f, universe)]
    if len(inverted) < max(2, len(listed) // 2):  # one board can match by chance; a real inversion is everywhere
        inverted = []
    if inverted:
        first = inverted[0]
        out.append({"kind": INVERTED, "function": "legal_actions", "board": first["board"], "action": None, "verdict": None,
                    "feedback": (f"On {len(inverted)} of {len(states)} boards legal_actions returned exactly the moves that are "
                                 f"NOT legal (e.g. {short(first['got'])} where the legal ones are {short(first['expected'])}): "
                                 "the condition is inverted. Keep the moves it drops and drop the ones it keeps.")})
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in listed:
        if f not in inverted:
            groups.setdefault(repr(f.get("got")), []).append(f)
    same = max(groups.values(), key=len, default=[])
    # A hard-coded answer is the same on (nearly) every board; a computed one repeats on a few.
    if len(same) < max(3, len(states) // 2):
        same = []
    if len({tuple(f["expected"]) for f in same}) >= 3 and same[0]["got"] == []:
        # Not a copied answer: a test for "legal" that never holds (e.g. `cell == ' '` where free
        # cells hold their number).
        out.append({"kind": NEVER, "function": "legal_actions", "board": same[0]["board"], "action": None, "verdict": None,
                    "expected": same[0]["expected"], "got": [],
                    "feedback": (f"legal_actions returned [] on {len(same)} boards that all have legal moves: its test for a "
                                 "legal move is never true. Compare that test with the values in the examples."
                                 + _legal_cell_values(same[0]))})
    elif len({tuple(f["expected"]) for f in same}) >= 3:
        got = same[0]["got"]
        values = sorted(lib.action_value(str(a)) for a in got) if isinstance(got, list) else None
        origin = ("; that is the answer of one example, copied" if values is not None and any(
            sorted(lib.action_value(a) for a in legal) == values for _, legal in states) else "")
        out.append({"kind": COPIED, "function": "legal_actions", "board": same[0]["board"], "action": None, "verdict": None,
                    "feedback": (f"legal_actions returned the same {short(got)} on {len(same)} boards whose legal moves all differ: "
                                 f"the answer is hard-coded{origin}. Compute the list from the argument instead.")})
    return out


def _legal_cell_values(failure: dict[str, Any]) -> str:
    """What the legal cells of a board actually hold (" On this board cell 4 holds '4'..."), when the
    legal actions are cell indices of a grid: the concrete fact a "never true" test contradicts."""
    cells = lib.cells(lib.parse_grid(lib.current_board(failure.get("board") or "")))
    shown = []
    for action in failure.get("expected") or []:
        value = lib.action_value(str(action))
        if value.isdigit() and int(value) < len(cells):
            shown.append(f"cell {value} holds {cells[int(value)]!r}")
    if not shown:
        return ""
    return f" On this board the legal moves are {short(failure['expected'])}: " + ", ".join(shown[:4]) + "."


def _inverted(failure: dict[str, Any], universe: set[str]) -> bool:
    got = failure.get("got")
    if not isinstance(got, list) or not got:
        return False
    values = {lib.action_value(str(a)) for a in got}
    legal = {lib.action_value(str(a)) for a in failure.get("expected", [])}
    if values & legal:
        return False
    if values == universe - legal:
        return True
    cells = lib.cells(lib.parse_grid(lib.current_board(failure.get("board") or "")))
    taken = [i for i, c in enumerate(cells) if lib.action_value(c) not in legal]
    return bool(taken) and (values == {lib.action_value(cells[i]) for i in taken} or values == {str(i) for i in taken})


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters for a prompt."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
