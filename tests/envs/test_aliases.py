"""Action aliases inferred from labelled transitions: two listed actions are one move when every
harvested state that knows both finds them equally legal and leading to the same next observation."""

from __future__ import annotations

import doctest

from ratchet.envs import harnesslib
from ratchet.envs import aliases as aliases_module
from ratchet.envs.aliases import infer_aliases, outcome
from ratchet.envs.explore import Transition

LISTED = ("[up]", "[down]", "[w]", "[s]")


def moved(seed: int, at: str, action: str, to: str, legal: bool = True, listed: tuple[str, ...] = LISTED) -> Transition:
    """``action`` tried at position ``at`` of walk ``seed``: the game echoes it and shows position ``to``."""
    after = f"You are at {at}.\n[Player 0] {action}\n[GAME] You are at {to}."
    return Transition(seed, (at,), f"You are at {at}.", action, legal, None if legal else "no", 0, listed,
                      outcome(after, False, [action, *listed]))


def after(move: str, listed: tuple[str, ...] = LISTED, seed: int = 5) -> Transition:
    """A state reached by taking ``move``, with the game's list there (a name of a move stays listed)."""
    return Transition(seed, (move,), "You moved.", listed[0], True, None, 0, listed, "o")


def test_the_doctests_pass():
    assert doctest.testmod(aliases_module).failed == 0
    assert doctest.testmod(harnesslib).failed == 0


def test_two_names_of_one_move_are_aliases_and_the_first_listed_is_canonical():
    found = infer_aliases([moved(0, "1", "[up]", "0"), moved(0, "1", "[w]", "0"), moved(0, "1", "[down]", "2"), moved(0, "1", "[s]", "2"),
                           moved(1, "2", "[w]", "1"), moved(1, "2", "[up]", "1"), moved(1, "2", "[s]", "3"), moved(1, "2", "[down]", "3"),
                           after("[w]"), after("[down]")])
    assert found == {"[up]": ["[w]"], "[down]": ["[s]"]}


def test_moves_that_agree_at_one_state_but_not_another_are_not_merged():
    # At a wall, up and down both stay put; elsewhere they differ: one state is enough to tell them apart.
    walls = [moved(s, "0", a, "0") for s in (0, 1) for a in ("[up]", "[down]")]
    assert infer_aliases(walls + [moved(2, "1", "[up]", "0"), moved(2, "1", "[down]", "2")]) == {}
    assert infer_aliases(walls + [after("[up]")]) == {"[up]": ["[down]"]}  # never told apart: one move as far as the harvest shows


def test_actions_with_different_legality_are_not_merged():
    same_board = [moved(s, "1", a, "1") for s in (0, 1) for a in ("[up]", "[w]")] + [after("[up]")]
    rejected = [moved(2, "1", "[up]", "1"), moved(2, "1", "[w]", "1", legal=False)]
    assert infer_aliases(same_board) == {"[up]": ["[w]"]}
    assert infer_aliases(same_board + rejected) == {}
    # A printed list that holds one and not the other tells them apart too, tried or not.
    only_up = [moved(3, "5", "[down]", "6", listed=("[up]", "[down]"))]
    assert infer_aliases(same_board + only_up) == {}


def test_one_shared_state_is_not_enough_and_a_game_without_lists_has_no_aliases():
    assert infer_aliases([moved(0, "1", "[up]", "0"), moved(0, "1", "[w]", "0")]) == {}
    assert infer_aliases([moved(s, "1", a, "0", listed=()) for s in (0, 1) for a in ("[up]", "[w]")]) == {}


def test_the_actions_are_dropped_from_the_next_observation_but_not_a_board_written_in_brackets():
    rules = "Type [up], [down] or [w], [s].\n"
    assert outcome(rules + "[Player] [up]\n| P |", False, ["[up]", *LISTED]) == outcome(rules + "[Player] [w]\n| P |", False, ["[w]", *LISTED])
    # Tower-of-Hanoi-like boards are written in brackets: dropping every bracketed token would make
    # every move look the same.
    hanoi = ("[A B]", "[A C]")
    assert outcome("[Player] [A B]\nA: [3, 2]\nB: [1]\nC: []", False, ["[A B]", *hanoi]) != \
        outcome("[Player] [A C]\nA: [3, 2]\nB: []\nC: [1]", False, ["[A C]", *hanoi])
    assert outcome("x", True, ["[w]"]) != outcome("x", False, ["[w]"])


def test_groups_are_cliques_and_the_order_is_the_listing_order():
    listed = ("[a]", "[b]", "[c]")
    same = [Transition(s, (), "b", x, True, None, 0, listed, "o") for s in (0, 1) for x in listed] + [after("[a]", listed), after("[b]", listed)]
    assert infer_aliases(same) == {"[a]": ["[b]", "[c]"]}
    # [c] is told apart from [a] (not from [b]): [a] keeps [b], and [c] stays on its own.
    apart = [Transition(9, (), "b", "[a]", True, None, 0, listed, "p"), Transition(9, (), "b", "[c]", True, None, 0, listed, "q")]
    assert infer_aliases(same + apart) == {"[a]": ["[b]"]}


def test_with_aliases_adds_every_other_name_once_in_order():
    names = {"[up]": ["[w]"], "[left]": ["[a]"]}
    assert harnesslib.with_aliases(["[up]", "[left]"], names) == ["[up]", "[w]", "[left]", "[a]"]
    assert harnesslib.with_aliases(["[w]", "[up]", "[ up ]"], names) == ["[w]", "[up]"]
    assert harnesslib.with_aliases(["[down]"], names) == ["[down]"] and harnesslib.with_aliases([], names) == []


def test_two_guesses_with_the_same_reply_are_not_one_move():
    # Guess the Number: [1] and [2] both get "higher" wherever both were tried, but the state
    # reached by guessing [1] lists [2] and not [1]; with no such state the pair is not confirmed.
    numbers = ("[1]", "[2]", "[3]")
    guesses = [Transition(s, (), "Guess 1-50.", g, True, None, 0, numbers, "higher") for s in (0, 1) for g in ("[1]", "[2]")]
    assert infer_aliases(guesses) == {}
    assert infer_aliases(guesses + [Transition(0, ("[1]",), "Guess.", "[2]", True, None, 0, ("[2]", "[3]"), "higher")]) == {}
    # The same two, still both listed after one was taken: now one move as far as the harvest shows.
    assert infer_aliases(guesses + [after("[1]", numbers)]) == {"[1]": ["[2]"]}
