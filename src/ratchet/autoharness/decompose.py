"""Decomposition (``ideas.decompose``): the harness as a board parser plus a rule, each checked alone.

The refiner writes two short functions instead of one:

* ``parse_board(observation)`` → the game's own board state (TextArena's ``game_state["board"]``:
  rows of cells, e.g. ``[['', 'O', ''], ...]`` for TicTacToe), and
* ``legal_moves(state)`` → every legal action in that state,

and a fixed template builds ``legal_actions`` / ``propose_action`` / ``is_legal_action`` from them.
Each part is checked on its own against ground truth from the environment: the parser on harvested
observations against the env's internal board at that moment, the rule on the env's *true* board
(never the parser's output, so a bad parser cannot hide a good rule or the reverse) against the
game's printed legal lists and the labelled transitions. Each part's failures are fed back on their
own, and only the failing part is asked for again; the other is kept verbatim.

Ground truth needs an env that exposes its state: a ``board_state()`` method (the TextArena
adapter's, local or behind a Python 3.12 worker, reads the game's ``game_state["board"]``) whose
value is plain data (lists of str/int/float/bool/None). Games without one (Chess keeps a
``chess.Board``) get no ground truth; the refiner then refuses the game and says why (``reason``).
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from ratchet.autoharness import critic
from ratchet.envs.harnesslib import action_value
from ratchet.autoharness.prompts import decomposed_prompt
from ratchet.autoharness.runtime import HarnessRuntime
from ratchet.sandbox.errors import feedback_of
from ratchet.contracts import Environment, Failure, Message
from ratchet.envs.answers import extract_code, function_source
from ratchet.envs.explore import TrueState, true_states
from ratchet.envs.textarena_env import plain_board

PARSER = "parse_board"
RULE = "legal_moves"
FIXED = ("legal_actions", "propose_action", "is_legal_action")

HEADER = "import random\nfrom harnesslib import current_board, parse_grid, cells, bracketed, action_value, action_ints\n"
PARSER_MARK = "# --- board parser: parse_board(observation) -> the game's board state ---"
RULE_MARK = "# --- rule: legal_moves(state) -> the legal actions in that state ---"
FIXED_MARK = "# --- fixed template: the harness functions, built from the two parts ---"
FIXED_CODE = '''def legal_actions(board):
    """Every legal action for the player to move, in the game's bracketed format ("[4]")."""
    return ["[" + action_value(str(a)) + "]" for a in legal_moves(parse_board(board))]


def propose_action(board):
    return random.choice(legal_actions(board))


def is_legal_action(board, action):
    return action_value(action) in [action_value(a) for a in legal_actions(board)]
'''
#: Stand-ins for a part not written yet (the root asks for the parser first); calling one is a
#: code error, so the missing part scores 0 and is the one asked for next.
MISSING = {
    PARSER: 'def parse_board(observation):\n    raise NotImplementedError("parse_board is not written yet")\n',
    RULE: 'def legal_moves(state):\n    raise NotImplementedError("legal_moves is not written yet")\n',
}


# ---------------------------------------------------------------- code layout


def assemble(parser: str, rule: str) -> str:
    """A complete decomposed harness from its two parts."""
    return "\n\n".join([HEADER, PARSER_MARK, parser.strip("\n") + "\n", RULE_MARK, rule.strip("\n") + "\n", FIXED_MARK, FIXED_CODE])


def split(code: str | None) -> tuple[str, str] | None:
    """(parser part, rule part) of a harness made by :func:`assemble`; None for any other code."""
    if not code or PARSER_MARK not in code or RULE_MARK not in code or FIXED_MARK not in code:
        return None
    after_parser = code.split(PARSER_MARK, 1)[1]
    parser, rest = after_parser.split(RULE_MARK, 1)
    rule = rest.split(FIXED_MARK, 1)[0]
    return parser.strip("\n") + "\n", rule.strip("\n") + "\n"


def part_from_response(response: str, target: str) -> str | None:
    """The ``target`` part in a model reply: its imports and top-level definitions, without the
    other part and without the template's functions (those are fixed). None if the reply does not
    define ``target``. A reply that does not parse is kept whole, so the judge reports the error."""
    code = extract_code(response)
    if code is None or not re.search(rf"^\s*def {target}\s*\(", code, re.MULTILINE):
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    other = RULE if target == PARSER else PARSER
    dropped = set(FIXED) | {other}
    keep: list[str] = []
    lines = code.splitlines()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in dropped:
            continue
        if isinstance(node, ast.Expr):  # stray docstrings and doctest-like expressions
            continue
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        keep.append("\n".join(lines[start - 1 : node.end_lineno]))
    return "\n\n".join(keep) + "\n"


# ---------------------------------------------------------------- checking each part


def first_difference(got: Any, expected: Any, path: tuple[int, ...] = ()) -> str:
    """Where two boards first differ, in words ("row 1, column 2: 'O' instead of ''")."""
    if isinstance(got, list) and isinstance(expected, list):
        if len(got) != len(expected):
            where = "the board" if not path else "row " + ", ".join(map(str, path))
            return f"{where} has {len(got)} entries instead of {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            if g != e:
                return first_difference(g, e, path + (i,))
        return ""
    names = ("row", "column", "index", "index")
    where = ", ".join(f"{names[min(k, 3)]} {i}" for k, i in enumerate(path)) or "the board"
    return f"{where}: {got!r} instead of {expected!r}"


def check_parser(runtime: HarnessRuntime, states: Sequence[TrueState]) -> tuple[float, list[Failure]]:
    """``parse_board`` on every state's observation against the env's board: (accuracy, failures)."""
    results = runtime.call_many(PARSER, [(s.board,) for s in states], seed=0)
    wrong: list[Failure] = []
    for s, (status, value) in zip(states, results):
        base = {"board": s.board, "action": None, "verdict": None, "function": PARSER, "part": PARSER, "expected": s.truth}
        if status != "ok":
            wrong.append(Failure("code_error", feedback_of(value), detail=base))
        elif (plain := plain_board(value)) != s.truth:
            diff = first_difference(plain, s.truth) if plain is not None else "not plain data"
            wrong.append(Failure("wrong_parse", f"parse_board returned {critic.short(value, 240)} but the board is {critic.short(s.truth, 240)} ({diff})",
                                 detail={**base, "got": value if plain is not None else repr(value)[:300]}))
    return (1.0 - len(wrong) / len(states) if states else 0.0), wrong


def check_rule(runtime: HarnessRuntime, states: Sequence[TrueState]) -> tuple[float, list[Failure]]:
    """``legal_moves`` on every state's TRUE board against the game's legal list (where printed)
    and the labelled actions: (accuracy over states, one failure per wrong state)."""
    results = runtime.call_many(RULE, [(s.truth,) for s in states], seed=0)
    wrong: list[Failure] = []
    for s, (status, value) in zip(states, results):
        base = {"board": s.board, "action": None, "verdict": None, "function": RULE, "part": RULE, "state": s.truth,
                "expected": list(s.listed)}
        if status != "ok":
            wrong.append(Failure("code_error", feedback_of(value), detail=base))
            continue
        got = value if isinstance(value, list) else [value]
        have = {action_value(str(a)) for a in got}
        problem = None
        if s.listed and have != {action_value(a) for a in s.listed}:
            problem = f"legal_moves returned {critic.short(got, 240)} but the legal actions in this state are {list(s.listed)!r}"
        else:
            for action, legal, reason in s.labelled:
                if (action_value(action) in have) != legal:
                    problem = (f"legal_moves omits {action}, which the environment accepts" if legal else
                               f"legal_moves includes {action}, but the environment rejects it: {reason or 'invalid move'}")
                    break
        if problem:
            wrong.append(Failure("wrong_rule", problem, detail={**base, "got": got[:24]}))
    return (1.0 - len(wrong) / len(states) if states else 0.0), wrong


def choose_part(metrics: dict[str, float], parts: tuple[str, str] | None = None) -> str:
    """The part to ask for next. A part not written yet comes first: the parts are checked
    apart, so a rule can be written and scored while the parser is still wrong (with the 0.5B, a
    search that kept refining a parser stuck at 0 never asked for the rule). Then the failing part;
    when both fail, the less accurate (the parser on ties); when both pass their own checks but
    the harness still fails elsewhere (unseen states, rollouts), the rule."""
    if parts is None or parts[0].strip() == MISSING[PARSER].strip():
        return PARSER
    if parts[1].strip() == MISSING[RULE].strip():
        return RULE
    p, r = metrics.get("parse_accuracy", 0.0), metrics.get("rule_accuracy", 0.0)
    if p < 1.0 and (r >= 1.0 or p <= r):
        return PARSER
    return RULE


# ---------------------------------------------------------------- the refiner's view


class Decomposer:
    """What the decompose refiner (``refine.DecomposeRefiner``) asks of the decomposition: ground
    truth (prepared once), the part checks for :meth:`check`, the next request for :meth:`request`,
    and the new code for :meth:`new_code`. Inactive (``active`` False, ``reason`` says why) when the
    env has no ground truth; the refiner then refuses the game with that reason."""

    def __init__(self, helper_library: bool = True) -> None:
        self.helper_library = helper_library
        self.states: list[TrueState] = []
        self.reason: str | None = "not prepared"

    @property
    def active(self) -> bool:
        return bool(self.states)

    def prepare(self, env_factory: Callable[[], Environment], transitions: Sequence[Any]) -> None:
        self.states, self.reason = true_states(env_factory, transitions)

    def check(self, runtime: HarnessRuntime, code: str) -> tuple[dict[str, float], list[Failure]]:
        """Each part's accuracy and failures ({} and [] for code that is not decomposed, such as
        a harness from the library)."""
        if not self.active or split(code) is None:
            return {}, []
        parse_acc, parse_wrong = check_parser(runtime, self.states)
        rule_acc, rule_wrong = check_rule(runtime, self.states)
        return {"parse_accuracy": parse_acc, "rule_accuracy": rule_acc}, parse_wrong[:4] + rule_wrong[:4]

    def request(self, *, game: str, description: str, code: str | None, pool: Sequence[Failure], metrics: dict[str, float],
                rng: random.Random, limit: int) -> tuple[str, list[Failure], list[Message]]:
        """(part asked for, failures shown, messages). The root (or a parent that is not
        decomposed) asks for the parser, its child for the rule; later, the failing part, with that
        part's failures only (:func:`choose_part`)."""
        parts = split(code)
        target = choose_part(metrics, parts)
        own = [f for f in pool if f.detail.get("part") == target]
        # Both parts pass their own checks: what still fails (rollouts, unit tests) goes to the rule.
        shown = critic.sample_failures(own or ([f for f in pool if "part" not in f.detail] if parts else []), rng, limit)
        part = None if parts is None else (parts[0] if target == PARSER else parts[1])
        # A part not written yet is asked for afresh, not shown as a wrong attempt.
        current = None if part is None or part.strip() == MISSING[target].strip() else function_source(part, target)
        accuracy = metrics.get("parse_accuracy" if target == PARSER else "rule_accuracy")
        summary = (f"{target} is wrong on {round((1.0 - accuracy) * len(self.states))} of {len(self.states)} states of this game"
                   if own and accuracy is not None else "")
        messages = decomposed_prompt(game=game, description=description, target=target, current=current, failures=shown,
                                     error_summary=summary, examples=self.examples(target, shown),
                                     helper_library=self.helper_library)
        return target, shown, messages

    def examples(self, target: str, shown: Sequence[Failure] = ()) -> list[tuple[str, Any, Any]]:
        """Three doctest examples (observation or state, expected value, kind): states a part got
        wrong first, then states spread over the game."""
        wrong_boards = {f.detail["board"] for f in shown if f.kind in ("wrong_parse", "wrong_rule")}
        first = [s for s in self.states if s.board in wrong_boards][:2]
        spread = self.states[len(self.states) // 3 :: max(1, len(self.states) // 4)] or self.states
        chosen: list[TrueState] = []
        for s in first + spread + self.states:
            if s not in chosen and len(chosen) < 3:
                chosen.append(s)
        if target == PARSER:
            return [("parse", s.board, s.truth) for s in chosen]
        out: list[tuple[str, Any, Any]] = []
        for s in chosen:
            if s.listed:
                out.append(("list", s.truth, list(s.listed)))
            else:  # no printed list: the labelled actions, as membership examples
                out += [("member", s.truth, (a, ok)) for a, ok, _ in s.labelled[:2]]
        return out[:4]

    def new_code(self, previous: str | None, response: str, target: str) -> str | None:
        """The harness after a reply: the new ``target`` part, the other part kept verbatim."""
        part = part_from_response(response, target)
        if part is None:
            return None
        parts = split(previous)
        parser, rule = parts if parts is not None else (MISSING[PARSER], MISSING[RULE])
        return assemble(part, rule) if target == PARSER else assemble(parser, part)
