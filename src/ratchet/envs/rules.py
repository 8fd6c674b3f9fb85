"""Legal-move rules induced from the states a game listed its legal actions in, with no model.

Exploring a game that prints its legal list gives states together with every legal action there
(``explore.listed_states``). Many games' rules are then one of a few shapes: the same list in every
state (Lights Out presses any cell); an action that is legal while one cell shows some values (Tic
Tac Toe's free cell shows its number, a Connect Four column while its top cell is empty); an action
that is legal unless a marker stands in some cells (a sliding puzzle's blank on the edge it would
leave); a formula over the tops of the two stacks an action names (Tower of Hanoi's "[A C]", its
state the towers as named lists); or the actions not yet played, with no number repeated (Guess
the Number's guesses, Mastermind's codes; a game that lists no state is fitted over its grammar's
every action from the single moves explored). ``induce`` fits the shapes in that order to every
listed state and labelled move and writes the first that fits as the ``legal_moves`` source a
scaffolded search asks the model for, so the search judges it like any other candidate; ``fit``
adds the moves the judge saw rejected and fits again, so a shape that only fits the states seen is
caught by the search's own rollouts, and what they miss by the held-out check.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ratchet.envs.explore import Transition, listed_states
from ratchet.envs.grammar import ActionGrammar
from ratchet.envs.harnesslib import action_ints, action_value, bracketed

#: (the arguments legal_moves is called with, the legal actions listed there)
State = tuple[tuple[Any, ...], Sequence[str]]
#: (those arguments, an action tried there, whether the game took it): a state's label for one action
Label = tuple[tuple[Any, ...], str, bool]


def _distinct(action: str) -> bool:
    """No number repeats in the action (Mastermind's codes)."""
    return len(set(numbers := action_ints(action))) == len(numbers)


def _universe(states: Sequence[State]) -> list[str]:
    """Every action some state listed, in the order first listed."""
    return list(dict.fromkeys(a for _, legal in states for a in legal))


def _labels(states: Sequence[State], labelled: Sequence[Label],
            universe: Sequence[str] | None = None) -> dict[str, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """Per action (listed, or of ``universe``: a game that lists none, its grammar's every action),
    the arguments where it was legal and where it was not: every listed state tells each action, a
    single label only its own (matched by value: "[3]" is "[ 3 ]")."""
    actions = list(universe) if universe is not None else _universe(states)
    by_value = {action_value(a): a for a in actions}
    out: dict[str, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = {a: ([], []) for a in actions}
    for args, legal in states:
        for a in actions:
            out[a][0 if a in legal else 1].append(args)
    for args, action, legal in labelled:
        if (a := by_value.get(action_value(action))) is not None:
            out[a][0 if legal else 1].append(args)
    return out


def constant(states: Sequence[State], labelled: Sequence[Label] = ()) -> list[str] | None:
    """The one list every state shows, if they all show the same one and no label contradicts it."""
    lists = {frozenset(legal) for _, legal in states}
    if len(lists) != 1 or any(bad for _, bad in _labels(states, labelled).values()):
        return None
    return _universe(states)


def cell_rules(states: Sequence[State], labelled: Sequence[Label] = ()) -> dict[str, tuple[str, Any]] | None:
    """Per action, a rule over the cells (the first argument, a list of equal length in every
    state) that tells every listed state and label right: ``("always", None)``, ``("when", (j,
    values))`` (legal while cell j shows one of values) or ``("unless", (value, cells))`` (legal
    unless value stands in one of those cells). None where some action fits no rule."""
    grids = [args[0] for args, _ in states] + [args[0] for args, _, _ in labelled]
    if not grids or not all(isinstance(g, list) and len(g) == len(grids[0]) for g in grids):
        return None
    labels = {a: ([args[0] for args in legal], [args[0] for args in illegal]) for a, (legal, illegal) in _labels(states, labelled).items()}
    mapped = _index_map(labels, len(grids[0]))
    rules: dict[str, tuple[str, Any]] = {}
    for action, (legal, illegal) in labels.items():
        rule = _cell_rule(action, legal, illegal, mapped.get(action))
        if rule is None:
            return None
        rules[action] = rule
    return rules


def _fits(legal: list[list[Any]], illegal: list[list[Any]]) -> list[int]:
    """The cells whose values while the action is legal never show while it is not."""
    return [j for j in range(len(legal[0]) if legal else 0) if not {g[j] for g in legal} & {g[j] for g in illegal}]


def _index_map(labels: dict[str, tuple[list[list[Any]], list[list[Any]]]], width: int) -> dict[str, int]:
    """The cell each action names, where the actions' numbers map to cells by one row-major or
    column-major formula (``offset + stride·a + b``, or ``offset + stride·n`` for one number) that
    puts a cell telling the action's legality under every action seen both legal and illegal
    (Minesweeper's ``[3 4]`` is cell 9 + 9·3 + 4 under a header row and row labels). Such a map
    also names the cell of an action never seen illegal (one full Connect Four column tells the
    top cell of all seven: strides and offsets are tried smallest first); empty where none fits."""
    numbers = {a: tuple(action_ints(a)) for a in labels}
    sizes = {len(v) for v in numbers.values()}
    if len(sizes) != 1 or (size := sizes.pop()) not in (1, 2):
        return {}
    told = {a: set(_fits(legal, illegal)) for a, (legal, illegal) in labels.items() if legal and illegal}
    if not told:
        return {}
    forms = ([lambda v, m, o: o + m * v[0]] if size == 1 else
             [lambda v, m, o: o + m * v[0] + v[1], lambda v, m, o: o + v[0] + m * v[1]])
    for form in forms:
        for m in range(1, width + 1):
            for o in range(width):
                if all(form(numbers[a], m, o) in fit for a, fit in told.items()):
                    cells = {a: form(v, m, o) for a, v in numbers.items()}
                    if all(0 <= j < width for j in cells.values()):
                        return cells
    return {}


def _cell_rule(action: str, legal: list[list[Any]], illegal: list[list[Any]], mapped: int | None = None) -> tuple[str, Any] | None:
    if mapped is not None and legal:
        # The cell the action names: one value while legal generalizes to states never seen.
        values = {g[mapped] for g in legal}
        if not values & {g[mapped] for g in illegal} and (illegal or len(values) == 1):
            return ("when", (mapped, sorted(values, key=str)))
    if not illegal:
        return ("always", None)
    width = len(legal[0]) if legal else len(illegal[0])
    fits = _fits(legal, illegal)
    shown = {j: {g[j] for g in legal} for j in fits}
    # Most telling first: a cell that shows the action's own value while legal (Tic Tac Toe's free
    # "4"), then one that shows a single value (an empty top cell); a marker that stands somewhere
    # in every illegal state (a puzzle's blank) comes before a cell that shows many values while
    # legal, which only the states seen may bear out (the tiles a blank is not on).
    for j in [j for j in fits if {str(v) for v in shown[j]} == {action_value(action)}] + [j for j in fits if len(shown[j]) == 1]:
        return ("when", (j, sorted(shown[j], key=str)))
    for marker in sorted(set(illegal[0]).intersection(*map(set, illegal[1:])), key=str):
        where = sorted({j for g in illegal for j in range(width) if g[j] == marker})
        if not any(g[j] == marker for g in legal for j in where):
            return ("unless", (marker, where))
    if fits:
        j = min(fits, key=lambda j: (len(shown[j]), j))
        return ("when", (j, sorted(shown[j], key=str)))
    return None


def common_opening(texts: Sequence[str]) -> str:
    """The lines every text starts with (whole lines, so an excerpt never starts mid-word)."""
    first = texts[0].splitlines(keepends=True) if texts else []
    n = 0
    while n < len(first) and all(t.startswith("".join(first[: n + 1])) for t in texts[1:]):
        n += 1
    return "".join(first[:n])


def filtered(states: Sequence[State], labelled: Sequence[Label] = (), universe: Sequence[str] | None = None) -> tuple[list[str], str, list[str]] | None:
    """The actions (listed, or ``universe``) that pass some of two checks on the text (the first
    argument): ``unplayed``, the action's value is not shown in brackets after the opening every
    text shares (the moves so far; the opening is the rules, which name example actions: "For
    example, [5]."), and ``distinct``, no number repeats in the action (Mastermind's codes).
    Every check that each legal label passes is kept; the fit holds if they then reject every
    illegal label. Returns (actions, the opening's last line, the checks kept)."""
    args = [a for a, _ in states] + [a for a, _, _ in labelled]
    if not args or not all(isinstance(a[0], str) for a in args):
        return None
    marker = next((line.strip() for line in reversed(common_opening([a[0] for a in args]).splitlines()) if line.strip()), "")
    shown_in: dict[str, set[str]] = {}

    def shown(text: str) -> set[str]:
        if text not in shown_in:
            shown_in[text] = {action_value(b) for b in bracketed(text.split(marker, 1)[-1] if marker else text)}
        return shown_in[text]

    checks = {"unplayed": lambda text, action: action_value(action) not in shown(text),
              "distinct": lambda text, action: _distinct(action)}
    labels = _labels(states, labelled, universe)
    if all(len(action_ints(action)) < 2 for action in labels):
        del checks["distinct"]  # one number cannot repeat: the check would be kept and say nothing
    kept = [name for name, check in checks.items() if all(check(a[0], action) for action, (legal, _) in labels.items() for a in legal)]
    if any(all(checks[name](a[0], action) for name in kept) for action, (_, illegal) in labels.items() for a in illegal):
        return None
    return list(labels), marker, kept


#: What a rule over the two stacks an action names may test (Tower of Hanoi's "[A C]" moves A's top
#: onto C): each a Python expression over ``s`` and ``d``, the lists the state holds under those names.
STACK_ATOMS = ("s", "d", "not s", "not d", "s and d and d[-1] > s[-1]", "s and d and d[-1] >= s[-1]",
               "s and d and d[-1] < s[-1]", "s and d and d[-1] <= s[-1]")


def _stack_rules() -> list[str]:
    """Every rule over :data:`STACK_ATOMS` of the forms ``a``, ``a and b``, ``a and (b or c)``, simplest first."""
    atoms = [f"({a})" if " " in a else a for a in STACK_ATOMS]
    pairs = list(itertools.combinations(atoms, 2))
    return atoms + [f"{a} and {b}" for a, b in pairs] + [f"{a} and ({b} or {c})" for a in atoms for b, c in pairs if a not in (b, c)]


def stack_rule(states: Sequence[State], labelled: Sequence[Label] = ()) -> str | None:
    """The simplest rule over the stacks an action names (each action names two of the state's
    lists: the first argument maps names to lists) that tells every listed state and label right,
    as a Python expression over ``s`` and ``d``; None where the states are no such lists or no rule fits."""
    args = [a for a, _ in states] + [a for a, _, _ in labelled]
    if not args or not all(isinstance(a[0], dict) and all(isinstance(v, list) for v in a[0].values()) for a in args):
        return None
    labels = _labels(states, labelled)
    names = {a: action_value(a).split() for a in labels}
    if not names or any(len(n) != 2 for n in names.values()):
        return None
    cases = [([stacks[0].get(k) or [] for k in names[a]], ok) for a, (legal, illegal) in labels.items()
             for ok, group in ((True, legal), (False, illegal)) for stacks in group]
    for rule in _stack_rules():
        # Compiled from the text the harness is given (one of the fixed rules above, never input):
        # the rule judged here is the rule written.
        test = eval(compile(f"lambda s, d: bool({rule})", "<stack rule>", "eval"))
        if all(test(*pair) == ok for pair, ok in cases):
            return rule
    return None


def fit(states: Sequence[State], params: str, labelled: Sequence[Label], judge: Callable[[str, str], tuple[float, list[Label], Any]],
        rounds: int = 6, universe: Sequence[str] | None = None) -> Any:
    """Induce, judge, and induce again with what the judge saw go wrong: ``judge(name, source)``
    returns the source's score, new labels (the actions the game rejected where the rules said
    legal) and a token. The token of the first source scored 1.0, or None where no shape fits, a
    judgement adds no label, or ``rounds`` run out (Connect Four's harvest never fills a column:
    the first fit is "every column", and the rollouts' rejected drops teach the top cells)."""
    labelled = list(labelled)
    for _ in range(rounds):
        found = induce(states, params, labelled, universe)
        if found is None:
            return None
        score, rejected, token = judge(*found)
        if score >= 1.0:
            return token
        if not rejected:
            return None
        labelled += rejected
    return None


def rejected_labels(rejections: Iterable[tuple[Any, Any]], args_of: Callable[[str], tuple[Any, ...]]) -> list[Label]:
    """The (board, action) pairs the game rejected as illegal labels (each board as ``args_of``
    gives it to ``legal_moves``), each pair once, in order; a pair with no board or action is skipped."""
    out: dict[tuple[str, str], Label] = {}
    for board, action in rejections:
        if board and action and (board, str(action)) not in out:
            out[(board, str(action))] = (args_of(board), str(action), False)
    return list(out.values())


#: A game that lists no state is fitted over its grammar's every action where there are at most this many.
MAX_UNIVERSE = 5000


def harvest_inputs(transitions: Sequence[Transition], args_of: Callable[[str], tuple[Any, ...]],
                   grammar: ActionGrammar) -> tuple[list[State], list[Label], list[str] | None]:
    """What a game's harvest gives :func:`induce`: its states with a full legal list, every labelled
    move (each board as ``args_of`` gives it to ``legal_moves``), and, for a game that lists no
    state, its grammar's every action where there are few enough to list (Mastermind's 1,296 codes)."""
    states = [(args_of(board), legal) for board, legal in listed_states(transitions, limit=None)]
    universe = None if states or not 0 < grammar.size() <= MAX_UNIVERSE else grammar.enumerate(MAX_UNIVERSE)
    return states, [(args_of(t.board), t.action, t.legal) for t in transitions], universe


def fit_harvest(transitions: Sequence[Transition], args_of: Callable[[str], tuple[Any, ...]], params: str, grammar: ActionGrammar,
                judge: Callable[[str, str], tuple[float, list[Label], Any]], rounds: int = 6) -> Any:
    """:func:`fit` over a game's harvest (:func:`harvest_inputs`)."""
    states, labels, universe = harvest_inputs(transitions, args_of, grammar)
    return fit(states, params, labels, judge, rounds, universe)


def induce(states: Sequence[State], params: str, labelled: Sequence[Label] = (), universe: Sequence[str] | None = None) -> tuple[str, str] | None:
    """(the rule's name, the source of ``def legal_moves(<params>)``) for the first shape that
    tells each listed state's legal list and each label right. Needs two listed states, or, for a
    game that lists none, its actions (``universe``, the grammar's) and labels both legal and illegal."""
    if len(states) < 2 and not (universe and any(t[2] for t in labelled) and not all(t[2] for t in labelled)):
        return None
    head = f"def legal_moves({params}):\n"
    told = f"{len(states)} states the game listed its legal actions in" if states else f"{len(labelled)} labelled moves"
    doc = f'    """Induced from {told} (no model)."""\n'
    if states and (same := constant(states, labelled)) is not None:
        return "constant", head + doc + f"    return {same!r}\n"
    if states and (rules := cell_rules(states, labelled)) is not None:
        return ("cells", f"RULES = {rules!r}\n\n\n" + head + doc + "    cells = " + params.split(",")[0] + "\n"
                "    return [a for a, (kind, arg) in RULES.items() if kind == 'always'\n"
                "            or (kind == 'when' and cells[arg[0]] in arg[1])\n"
                "            or (kind == 'unless' and all(cells[j] != arg[0] for j in arg[1]))]\n")
    if states and (rule := stack_rule(states, labelled)) is not None:
        return ("stacks", f"ACTIONS = {list(_labels(states, labelled))!r}\n\n\n" + head + doc +
                f"    stacks = {params.split(',')[0]}\n"
                "    pairs = [(a, [stacks.get(k) or [] for k in action_value(a).split()]) for a in ACTIONS]\n"
                f"    return [a for a, (s, d) in pairs if {rule}]\n")
    if (found := filtered(states, labelled, universe)) is None:
        return None
    actions, marker, kept = found
    if "distinct" in kept:  # a check on the action alone: made here once, not at every call
        actions = [a for a in actions if _distinct(a)]
    return ("filtered:" + "+".join(kept or ["none"]), "from harnesslib import bracketed\n\n" f"ACTIONS = {actions!r}\n"
            "VALUES = [(a, action_value(a)) for a in ACTIONS]\n\n\n" + head + doc +
            f"    text = {params.split(',')[0]}\n"
            + (f"    text = text.split({marker!r}, 1)[-1]  # after the opening's last line: the moves so far\n" if marker else "")
            + ("    shown = {action_value(b) for b in bracketed(text)}\n"
               "    return [a for a, value in VALUES if value not in shown]\n" if "unplayed" in kept else "    return list(ACTIONS)\n"))
