"""The refiner's prompts: every field the paper names (game, description, action space, failed
steps with feedback, current code, required signatures, its instructions), kept short because the
default refiner is a 0.5B model with a small context. The ``ratchet`` method adds the helper
library's API with its output on a real board of the game and one worked example for another game.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from ratchet.envs import harnesslib as lib
from ratchet.contracts import Failure, Message
from ratchet.envs.answers import function_source
from ratchet.envs.harness.views import BoardView, excerpt, named_values
from ratchet.envs.rules import common_opening


SYSTEM = "You write short, correct Python code for game harnesses. Reply with exactly one ```python code block and nothing else."

_IS_LEGAL = 'def is_legal_action(board: str, action: str) -> bool:\n    """Return True if the game accepts `action` on this board, else False."""'
SIGNATURES = {
    "verifier": 'def propose_action(board: str) -> str:\n    """Return one random legal action for the player to move."""\n\n' + _IS_LEGAL,
    "policy": 'def propose_action(board: str) -> str:\n    """Return one of the best legal actions so that the final reward is maximized."""\n\n' + _IS_LEGAL,
}
SIGNATURES["filter"] = SIGNATURES["verifier"]

INSTRUCTIONS = [
    "`board` is the full observation text the player sees; the current position is its last board.",
    "Use only the standard library (random, re, math, itertools, collections) and numpy.",
    "Avoid infinite loops. Do not use try/except to hide errors. Do not print.",
    "propose_action must randomly sample one of the best legal actions.",
]
POLICY_INSTRUCTION = "Track the game's progress as a value in [0, 1] and pick the action that increases it most."

HARNESSLIB_API = """from harnesslib import current_board, parse_grid, cells, bracketed, action_value, action_ints
current_board(text) -> str: the last board block of the observation
parse_grid(block) -> list[list[str]]: rows of cells ('|' or spaces split cells; ---+--- lines dropped)
cells(grid) -> list[str]: the grid flattened row by row
bracketed(text) -> list[str]: every "[...]" token in text
action_value(action) -> str: the text inside the action's brackets, e.g. "[4]" -> "4"
action_ints(action) -> list[int]: the integers in the action, e.g. "[3 4]" -> [3, 4]"""
#: Listed only for a game whose board is named values (Tower of Hanoi's towers): the others' prompts stay as they were.
FIELDS_API = """\nfrom harnesslib import fields
fields(block) -> dict: its "name: value" lines, values read as Python literals ("A: [3, 1]" -> {'A': [3, 1]})"""

FEW_SHOT = '''Example of a complete harness for a different game (Connect Four, board rows of "." and X/O under a row of column numbers):
```python
import random
from harnesslib import current_board, parse_grid, action_ints

def free_columns(board):
    grid = parse_grid(current_board(board))
    top = grid[1]  # grid[0] is the row of column numbers
    return [c for c in range(len(top)) if top[c] == "."]

def propose_action(board):
    return "[" + str(random.choice(free_columns(board))) + "]"

def is_legal_action(board, action):
    nums = action_ints(action)
    return len(nums) == 1 and nums[0] in free_columns(board)
```'''


SCAFFOLD = '''import random
from harnesslib import current_board, parse_grid, cells, with_aliases, action_value, as_action

ACTION_FORM = "[{}]"
ALIASES = {}

def legal_actions(board):
    """Every legal action for the player to move, as strings like "[4]"."""
    # Small models often return the bare value ("4") or a tuple ((0, 2)); the game's format is ACTION_FORM.
    return with_aliases([as_action(a, ACTION_FORM) for a in legal_moves(cells(parse_grid(current_board(board))))], ALIASES)

def propose_action(board):
    return random.choice(legal_actions(board))

def is_legal_action(board, action):
    return action_value(action) in [action_value(a) for a in legal_actions(board)]
'''

def scaffold_for(view: BoardView, form: str = "[{}]", aliases: dict[str, list[str]] | None = None) -> str:
    """The template for ``view`` (``envs/harness/views.py``: what ``legal_moves`` is called with), its
    ``ACTION_FORM`` the game's action format (``envs.grammar``), its ``ALIASES`` ``envs.aliases``'."""
    text = SCAFFOLD.replace("legal_moves(cells(parse_grid(current_board(board))))", f"legal_moves({view.call})")
    if view.imports:
        text = text.replace("action_value, as_action\n", f"action_value, as_action, {view.imports}\n", 1)
    return view.adapt(text).replace('ACTION_FORM = "[{}]"', f"ACTION_FORM = {form!r}").replace("ALIASES = {}", f"ALIASES = {aliases or {}!r}")


def scaffold_function(examples: Sequence[tuple[tuple[Any, ...], Sequence[str]]], view: BoardView) -> str:
    """The signature of ``legal_moves`` and a docstring whose examples are real states of the game
    (``view.args`` of each) with the game's own legal lists."""
    lines = [f"def legal_moves({view.params}):", f'    """Return every legal action for the player to move. `{view.params.split(",")[0]}` is {view.what}.', ""]
    for args, legal in examples:
        # A list cut to 24 says so in the call: shown as the whole answer, Lights Out's 25 presses
        # read as "every cell but the last".
        cut = "[:24]" if len(legal) > 24 else ""
        lines.append(f"    >>> legal_moves({view.show(args)}){cut}")  # a text board shows 600 characters: 300 cut the earlier guesses
        lines.append(f"    {list(legal)[:24]!r}")
    lines.append('    """')
    return "\n".join(lines)


#: Characters of ``legal_moves``' signature and docstring above which the one-function request
#: counts as long. Measured with the 1.5B: it copied the docstring back without a body on Tower of
#: Hanoi (5 of 5 replies; its root request's signature and docstring are 1,826 characters), Guess
#: the Number (6 of 6, 2,295) and Lights Out (5 of 6, 1,448). Tic Tac Toe's (527: 9 cells, at most 9
#: actions an example; Connect Four 726, Frozen Lake 668) is answered with a body by the 0.5B and keeps its request.
LONG_REQUEST = 1000


def is_long(examples: Sequence[tuple[Any, Sequence[str]]], view: Any) -> bool:
    """Whether the one-function request with these (root) examples is long (``LONG_REQUEST``)."""
    return bool(examples) and len(scaffold_function(examples, view)) > LONG_REQUEST


def shortened(examples: Sequence[tuple[Any, Sequence[str]]], view: Any, keep: int = 2) -> list[tuple[Any, Sequence[str]]]:
    """The ``short_examples`` idea: ``keep`` examples, a text board's without the opening every one
    of them shares (the rules, shown above them in the request)."""
    examples = list(examples[:keep])
    if view.name == "text":
        texts = [str(args[0]) for args, _ in examples]
        common = len(common_opening(texts)) if len(texts) > 1 else 0
        examples = [(("…" + str(args[0])[common:].lstrip("\n"),) if common else args, legal) for args, legal in examples]
    return examples


def scaffold_request(examples: Sequence[tuple[tuple[Any, ...], Sequence[str]]], view: BoardView) -> str:
    """A HumanEval-style request: :func:`scaffold_function`, to be completed."""
    return ("Complete this Python function so that its examples pass. Compute the answer from its argument.\n"
            "```python\n" + scaffold_function(examples, view) + "\n```\nReply with the complete function in one ```python block.")


BODY_REQUEST = ("Write the body of the Python function that your reply starts with, so that its examples pass. "
                "Compute the answer from its argument; the docstring is written already: do not repeat it or its examples.")


def body_request(examples: Sequence[tuple[tuple[Any, ...], Sequence[str]]], view: BoardView) -> tuple[str, str]:
    """The same request with the function's signature and docstring as the reply's prefix (the
    model contract's assistant prefix): the model is asked for the body only. A small model given
    the docstring to complete copies it, examples and all, into its token limit instead."""
    return BODY_REQUEST, "```python\n" + scaffold_function(examples, view) + "\n"


def library_view(board: str) -> str:
    """What the helper library returns on a real board of the game, so a small model sees the
    data it will work with instead of guessing it."""
    block = lib.current_board(board)
    lines = [f"current_board(board) ->\n{textwrap.indent(block, '    ') if block else '    (empty: no board block found)'}"]
    return "\n".join(lines + [parsed(block)] if lib.parse_grid(block) else lines)


def parsed(block: str, grid: bool = True) -> str:
    """The parse of a board block the prompt shows: its named values where it is such lines ("A:
    [3, 2, 1]": the 1.5B, shown the grid parse of Tower of Hanoi's towers, indexed those cells),
    else its cells, after its rows with ``grid``."""
    if named := named_values(block):
        return f"fields(current_board(board)) -> {named!r}"[:500]
    rows = lib.parse_grid(block)
    return ((f"parse_grid(current_board(board)) -> {rows!r}"[:500] + "\n" if grid else "")
            + f"cells(parse_grid(current_board(board))) -> {lib.cells(rows)!r}"[:400])


def describe_failure(i: int, f: Failure, board_limit: int = 500) -> str:
    """One failed step as the refiner sees it: board, action, what the code said, the env's
    reason or the traceback."""
    d = f.detail
    parts = [f"Failure {i}:", "board (end of observation):", textwrap.indent(excerpt(d.get("board") or "", board_limit), "  ")]
    if d.get("action") is not None:
        parts.append(f"action: {d['action']}")
    verdict = d.get("verdict")
    if verdict is not None:
        parts.append(f"your is_legal_action returned: {verdict}")
    if "legal" in d:
        truth = "legal" if d["legal"] else f"illegal ({d.get('env_reason') or 'rejected'})"
        parts.append(f"the environment says: {truth}")
    parts.append(f"problem: {f.message}".rstrip())
    return "\n".join(parts)


def scaffold_prompt(*, game: str, description: str, code: str | None, error_summary: str,
                    examples: Sequence[tuple[Any, Sequence[str]]], view: BoardView, body_only: bool = False) -> list[Message]:
    """The one-function request: ``legal_moves`` alone, its doctests real states of the game
    (``examples``); ``code`` a parent with its own ``legal_moves``, shown as wrong, or None.
    ``body_only``: the signature and docstring are the reply's prefix (:func:`body_request`)."""
    if code is not None:
        # Counterexample-guided: the same short request, the states it got wrong added as
        # examples, and the wrong attempt shown.
        head = (f"Game: {game}\n\n{excerpt(description, 600)}\n\n"
                f"This attempt is wrong:\n```python\n{function_source(code, 'legal_moves')}\n```\n"
                + (f"Its errors: {error_summary}\n\n" if error_summary else "\n"))
    else:
        # Small models echo a template instead of filling it in, hard-code a single example's
        # answer, and copy API listings into their code: ask for one function in the HumanEval
        # format (signature + doctest examples from real states) and nothing else; propose_action
        # / is_legal_action are built around it when the code is extracted.
        head = f"Game: {game}\n\n{excerpt(description, 600)}\n\n"
    system = {"role": "system", "content": SYSTEM}
    if body_only:
        ask, prefix = body_request(examples, view)
        return [system, {"role": "user", "content": head + ask}, {"role": "assistant", "content": prefix}]
    return [system, {"role": "user", "content": head + scaffold_request(examples, view)}]


def harness_prompt(*, game: str, description: str, mode: str, code: str, failures: Sequence[Failure], refine: str,
                   error_summary: str = "", helper_library: bool = False, few_shot: bool = False,
                   sample_board: str | None = None) -> list[Message]:
    """The paper's request: both functions of ``code`` (the parent), its failed steps and error
    types, fix ``refine`` (``refine.which_to_refine``); with ``helper_library`` the ``harnesslib``
    API and its output on ``sample_board``, with ``few_shot`` a worked harness for another game."""
    sections = [f"Game: {game}", "Game description:\n" + excerpt(description, 900),
                "Write these Python functions:\n" + SIGNATURES[mode]]
    instructions = list(INSTRUCTIONS) + ([POLICY_INSTRUCTION] if mode == "policy" else [])
    if helper_library:
        instructions[1] = "Use only the standard library, numpy and harnesslib (below)."
    sections.append("Instructions:\n" + "\n".join(f"- {s}" for s in instructions))
    if helper_library:
        sections.append("harnesslib API:\n" + HARNESSLIB_API + (FIELDS_API if sample_board and named_values(lib.current_board(sample_board)) else ""))
        if sample_board:
            sections.append("A board of this game:\n" + textwrap.indent(excerpt(sample_board, 500), "  ") + "\nOn it, harnesslib gives:\n" + library_view(sample_board))
    if few_shot:
        sections.append(FEW_SHOT)
    sections.append("Current code:\n```python\n" + code.strip() + "\n```")
    if failures:
        sections.append("Failed steps:\n" + "\n\n".join(describe_failure(i + 1, f) for i, f in enumerate(failures)))
    if error_summary:
        sections.append("Error types: " + error_summary)
    target = {"both": "both functions", "propose_action": "propose_action", "is_legal_action": "is_legal_action"}[refine]
    ask = f"Fix {target} so these steps succeed." if failures else f"Make {target} right for this game."  # none shown
    sections.append(ask + " Return the complete code.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(sections)}]
