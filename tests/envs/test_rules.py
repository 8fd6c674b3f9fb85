"""Legal-move rules induced from listed states (envs/rules.py): each shape fits where it should,
refuses where it does not, and the source it writes gives the listed lists back."""

from __future__ import annotations

import random
import sys

from ratchet.envs import harnesslib
from ratchet.envs.rules import cell_rules, constant, filtered, induce, rejected_labels, stack_rule


def _run(source: str, *args):
    # The sandbox's harness imports harnesslib by name and gets action_value from the scaffold.
    sys.modules.setdefault("harnesslib", harnesslib)
    namespace = {"action_value": harnesslib.action_value}
    exec(source, namespace)
    return namespace["legal_moves"](*args)


def _tictactoe_states(n: int = 12, seed: int = 0):
    rng = random.Random(seed)
    states = []
    for _ in range(n):
        cells = [str(i) for i in range(9)]
        for i in rng.sample(range(9), rng.randrange(0, 8)):
            cells[i] = rng.choice("XO")
        states.append(((cells,), [f"[{c}]" for c in cells if c.isdigit()]))
    return states


def test_constant_list_is_found_and_only_when_every_state_shows_it():
    states = [(([".", "X"],), ["[up]", "[down]"]), ((["X", "."],), ["[down]", "[up]"])]
    assert constant(states) == ["[up]", "[down]"]
    assert constant(states + [(([".", "."],), ["[up]"])]) is None
    name, source = induce(states, "cells")
    assert name == "constant" and _run(source, ["X", "X"]) == ["[up]", "[down]"]


def test_free_cell_rule_prefers_the_cell_that_shows_the_action_and_generalizes():
    states = _tictactoe_states()
    rules = cell_rules(states)
    assert rules is not None
    assert rules["[4]"] == ("when", (4, ["4"]))
    name, source = induce(states, "cells")
    assert name == "cells"
    # A board none of the listed states showed.
    board = ["X", "1", "O", "3", "X", "5", "O", "7", "8"]
    assert sorted(_run(source, board)) == ["[1]", "[3]", "[5]", "[7]", "[8]"]


def test_marker_rule_for_a_blank_that_cannot_leave_the_edge():
    # A 1x3 sliding row: "[left]" is legal unless the blank "_" is in the first cell, "[right]" unless in the last.
    rng = random.Random(0)
    states = []
    for blank in (0, 1, 2, 1, 0, 2, 1, 0):
        cells = rng.sample(["a", "b", "c"], 3)  # the tiles move around
        cells[blank] = "_"
        legal = [a for a, ok in (("[left]", blank > 0), ("[right]", blank < 2)) if ok]
        states.append(((cells,), legal))
    rules = cell_rules(states)
    assert rules is not None
    assert rules["[left]"] == ("unless", ("_", [0]))
    assert rules["[right]"] == ("unless", ("_", [2]))
    _, source = induce(states, "cells")
    assert sorted(_run(source, ["c", "_", "a"])) == ["[left]", "[right]"]


def test_no_cell_rule_when_legality_depends_on_two_cells_at_once():
    # "[x]" legal exactly when the two cells are equal: no single cell and no marker tells it.
    states = [(([a, b],), ["[x]"] if a == b else ["[y]"]) for a, b in (("0", "0"), ("0", "1"), ("1", "1"), ("1", "0"))]
    assert cell_rules(states) is None
    assert induce(states, "cells") is None


def test_unplayed_actions_read_after_the_opening_every_state_shares():
    opening = "[GAME] Guess a number from 1 to 4, e.g. '[2]'.\n"
    states = [((opening,), ["[1]", "[2]", "[3]", "[4]"]),
              ((opening + "[Player] [2]\n[GAME] Higher.",), ["[1]", "[3]", "[4]"]),
              ((opening + "[Player] [2]\n[Player] [4]\n",), ["[1]", "[3]"])]
    assert filtered(states) == (["[1]", "[2]", "[3]", "[4]"], "[GAME] Guess a number from 1 to 4, e.g. '[2]'.", ["unplayed"])
    name, source = induce(states, "board")
    assert name == "filtered:unplayed"
    assert _run(source, opening + "[Player] [3]\n") == ["[1]", "[2]", "[4]"]
    # A listed state the rule gets wrong (here [1] missing although never played) refuses it.
    assert filtered(states + [((opening,), ["[2]", "[3]"]),]) is None


def test_fewer_than_two_states_induce_nothing():
    assert induce(_tictactoe_states(1), "cells") is None


def test_the_actions_numbers_name_their_cell_even_for_an_action_never_seen_illegal():
    # A 3x3 board under a header row of column numbers, each row led by its number (9 + 3 cells,
    # "[r c]" is cell 3 + 4·r + 1 + c): unrevealed "." cells are legal, revealed digits are not.
    rng = random.Random(1)

    def board(revealed):
        cells = ["0", "1", "2"]
        for r in range(3):
            cells += [str(r)] + [str(rng.randrange(1, 4)) if (r, c) in revealed else "." for c in range(3)]
        return cells

    every = [(r, c) for r in range(3) for c in range(3)]
    states = [((board(set()),), [f"[{r} {c}]" for r, c in every])]
    labels = []
    for _ in range(6):
        revealed = set(rng.sample(every, 3))
        if (2, 2) in revealed:
            revealed.discard((2, 2))  # never seen revealed: only the map can tell its rule
        cells = board(revealed)
        labels += [((cells,), f"[{r} {c}]", (r, c) not in revealed) for r, c in every]
    states.append(((board(set()),), [f"[{r} {c}]" for r, c in every]))
    rules = cell_rules(states, labels)
    assert rules is not None
    assert rules["[2 2]"] == ("when", (3 + 4 * 2 + 1 + 2, ["."]))
    _, source = induce(states, "cells", labels)
    shown = board({(2, 2), (0, 0)})
    assert sorted(_run(source, shown)) == sorted(f"[{r} {c}]" for r, c in every if (r, c) not in {(2, 2), (0, 0)})


def test_a_game_that_lists_nothing_is_fitted_over_its_grammar_from_labels_alone():
    # Mastermind-like: codes of two distinct digits 1-3, no code guessed twice; the labels are
    # single moves tried on states, the actions the grammar's every code.
    universe = [f"[{a} {b}]" for a in range(1, 4) for b in range(1, 4)]
    opening = "[GAME] Guess the code of two distinct digits 1-3, e.g. '[2 1]'.\n"
    later = opening + "[Player] [1 2]\n[GAME] 1 black peg.\n"
    labels = [((opening,), "[2 1]", True), ((opening,), "[1 1]", False), ((opening,), "[3 1]", True),
              ((later,), "[1 2]", False), ((later,), "[2 3]", True), ((later,), "[3 3]", False)]
    assert filtered([], labels, universe)[2] == ["unplayed", "distinct"]
    name, source = induce([], "board", labels, universe)
    assert name == "filtered:unplayed+distinct"
    assert _run(source, later) == ["[1 3]", "[2 1]", "[2 3]", "[3 1]", "[3 2]"]
    # Labels all legal say nothing of what is illegal: no fit.
    assert induce([], "board", [t for t in labels if t[2]], universe) is None


def _hanoi_states(n: int = 30, disks: int = 3, seed: int = 0):
    """Random walks of Tower of Hanoi, each state the towers by name with the game's legal list (a
    move onto the same tower is legal: the game takes it)."""
    rng, towers, states = random.Random(seed), {"A": list(range(disks, 0, -1)), "B": [], "C": []}, []
    for _ in range(n):
        legal = [f"[{s} {d}]" for s in "ABC" for d in "ABC" if towers[s] and (not towers[d] or towers[d][-1] >= towers[s][-1])]
        states.append((({k: list(v) for k, v in towers.items()},), legal))
        s, d = rng.choice(legal)[1::2]
        towers[d].append(towers[s].pop())
    return states


def test_a_rule_over_the_tops_of_the_two_stacks_an_action_names():
    states = _hanoi_states()
    rule = stack_rule(states)
    assert rule == "s and ((not d) or (s and d and d[-1] >= s[-1]))"
    name, source = induce(states, "fields")
    assert name == "stacks"
    # Four disks, never seen: the rule reads the tops, not the states it was fitted to.
    for (towers,), legal in _hanoi_states(40, disks=4, seed=1):
        assert sorted(_run(source, towers)) == sorted(legal)


def test_the_simplest_stack_rule_that_fits_is_kept_and_a_label_refutes_it():
    # Only the opening state: "any move from a tower that has disks" tells it, and is chosen first.
    opening = ({"A": [3, 2, 1], "B": [], "C": []},)
    states = [(opening, ["[A A]", "[A B]", "[A C]"]), (({"A": [3, 2, 1], "B": [], "C": []},), ["[A A]", "[A B]", "[A C]"])]
    assert stack_rule(states) == "s"
    # A larger disk refused onto a smaller one rules that out.
    refuted = ({"A": [3, 2], "B": [1], "C": []},), "[A B]", False
    assert stack_rule(states, [refuted]) not in (None, "s")
    # Cells, text or actions that do not name two of the lists: not this shape.
    assert stack_rule(_tictactoe_states()) is None
    assert stack_rule([((towers,), [a.replace(" ", "") for a in legal]) for (towers,), legal in _hanoi_states()]) is None


def test_rejected_labels_are_illegal_once_each_in_order() -> None:
    rejections = [("X..", "[1]"), (None, "[2]"), ("X..", "[1]"), ("XO.", 3), ("XO.", "")]
    labels = rejected_labels(rejections, lambda board: (board.upper(),))
    assert labels == [(("X..",), "[1]", False), (("XO.",), "3", False)]
