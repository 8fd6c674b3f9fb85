"""Program repair without a model: single-point mutations of a Python file's syntax tree.

A small model's wrong programs are often one token away from right: an inverted condition
(``in`` for ``not in``), a comparison off by one, two constants swapped. Trying every such
neighbour of a program costs no model call and is cheap to score on the evaluator's dense checks,
so a search can try them first and keep a mutant only when the checks prefer it. The operators:

* a comparison flipped to its negation (``==``/``!=``, ``<``/``>=``, ``in``/``not in``…) or to its
  boundary neighbour (``<``/``<=``, ``>``/``>=``);
* a condition (``if``, ``while``, conditional expression, comprehension filter) negated, or its
  ``not`` dropped; ``and``/``or`` swapped;
* an integer constant moved by one;
* a string constant swapped for another string constant of the same program, and a name read
  swapped for another name the same function assigns or takes;
* a test of equality with a string (``cell != " "``) swapped for a character-class test
  (``cell.isdigit()``, ``not cell.isalpha()``…): a small model guesses what an empty cell looks
  like, and a board that numbers its free cells or letters its pieces tells which class is right.

:func:`mutants` lists them (deterministically, shuffled by ``rng`` when given); ``MutationProposer``
is the engine's proposer over them (one random mutant of one ``.py`` surface per proposal).

:func:`fixed` is the other kind of repair: the slips that have one reading only (a module used but
never imported, an action written without the brackets the game's actions have), all fixed at
once, since a program with both plays no legal move until both are fixed; ``AutofixProposer``
(``autofix``) proposes them to the engine. Both are the dedicated AutoHarness search's ``repair``
and ``autofix`` ideas as engine components; here the engine's own evaluation and gate judge each
proposal (the search screens its mutants on its dense checks first).
"""

from __future__ import annotations

import ast
import copy
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import Any

from pydantic import Field

from ratchet.config import Settings
from ratchet.contracts import Candidate, Claim, Proposal, Skip
from ratchet.evolve.proposers.base import BaseProposer

_NEGATED: dict[type, type] = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE,
                              ast.LtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BOUNDARY: dict[type, type] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_SYMBOL = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.In: "in",
           ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


@dataclass(frozen=True)
class Mutant:
    """One neighbour of a program: its full source and the change in words (line numbers are the original's)."""

    code: str
    change: str


def normalized(code: str) -> str:
    """The program without comments and formatting (its unparsed syntax tree): two replies that
    differ only in layout or comments are the same program. Code that does not parse is only
    stripped of trailing white space."""
    try:
        return ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError):
        return "\n".join(line.rstrip() for line in code.strip().splitlines())


def mutants(code: str, *, functions: Sequence[str] | None = None, rng: random.Random | None = None,
            limit: int = 60) -> list[Mutant]:
    """Single-point mutants of ``code`` (only inside the named top-level ``functions`` when given),
    each distinct from the original and from each other once normalized; at most ``limit``, a
    random subset when ``rng`` is given. Code that does not parse has none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    scopes = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
              and (functions is None or n.name in functions)]
    strings = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                      and len(n.value) <= 12 and not _is_docstring(tree, n)})
    sites = [(i, edit) for i, scope in enumerate(tree.body) if scope in scopes for edit in _edits(scope, strings)]
    if rng is not None:
        rng.shuffle(sites)
    seen = {normalized(code)}
    out: list[Mutant] = []
    for index, (describe, apply) in sites:
        copy_tree = copy.deepcopy(tree)
        scope = copy_tree.body[index]
        change = describe()
        apply(scope)
        try:
            text = ast.unparse(ast.fix_missing_locations(copy_tree)) + "\n"
        except Exception:  # noqa: BLE001 - an operator that made an unprintable tree offers nothing
            continue
        key = normalized(text)
        if key not in seen:
            seen.add(key)
            out.append(Mutant(text, change))
            if len(out) >= limit:
                break
    return out


Edit = tuple[Callable[[], str], Callable[[ast.AST], None]]


def _is_docstring(tree: ast.Module, node: ast.Constant) -> bool:
    for owner in [tree, *ast.walk(tree)]:
        body = getattr(owner, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and body[0].value is node:
            return True
    return False


def _path_to(scope: ast.AST, target: ast.AST) -> list[tuple[str, int | None]]:
    """The field path from ``scope`` to ``target``, to find the same node in a deep copy."""
    for name, value in ast.iter_fields(scope):
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if item is target:
                return [(name, i if isinstance(value, list) else None)]
            if isinstance(item, ast.AST):
                rest = _path_to(item, target)
                if rest:
                    return [(name, i if isinstance(value, list) else None), *rest]
    return []


def _follow(scope: ast.AST, path: list[tuple[str, int | None]]) -> Any:
    node: Any = scope
    for name, i in path:
        node = getattr(node, name) if i is None else getattr(node, name)[i]
    return node


def _at(scope: ast.AST, node: ast.AST, change: Callable[[Any], None]) -> Callable[[ast.AST], None]:
    path = _path_to(scope, node)
    return lambda copied: change(_follow(copied, path))


def _edits(scope: ast.AST, strings: list[str]) -> Iterator[Edit]:
    names = sorted({a.arg for a in scope.args.args} | {n.id for n in ast.walk(scope) if isinstance(n, ast.Name)  # type: ignore[attr-defined]
                                                         and isinstance(n.ctx, ast.Store)})
    for node in ast.walk(scope):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                for table in (_NEGATED, _BOUNDARY):
                    new = table.get(type(op))
                    if new is not None:
                        yield ((lambda o=op, n=new, ln=line: f"line {ln}: `{_SYMBOL[type(o)]}` → `{_SYMBOL[n]}`"),
                               _at(scope, node, lambda c, k=k, n=new: c.ops.__setitem__(k, n())))
            if (len(node.ops) == 1 and type(node.ops[0]) in (ast.Eq, ast.NotEq) and isinstance(node.comparators[0], ast.Constant)
                    and isinstance(node.comparators[0].value, str)):
                before, subject = ast.unparse(node), ast.unparse(node.left)
                for method in _CHARACTER_CLASSES:
                    for negate in (False, True):
                        after = f"{'not ' if negate else ''}{subject}.{method}()"
                        yield ((lambda b=before, a=after, ln=line: f"line {ln}: `{b}` → `{a}`"),
                               _character_class(scope, node, method, negate))
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            yield (lambda ln=line: f"line {ln}: condition negated"), _at(scope, node, _negate_test)
        if isinstance(node, ast.comprehension):
            for k in range(len(node.ifs)):
                yield ((lambda ln=getattr(node.target, "lineno", "?"): f"line {ln}: comprehension filter negated"),
                       _at(scope, node, lambda c, k=k: c.ifs.__setitem__(k, _negation(c.ifs[k]))))
        if isinstance(node, ast.BoolOp):
            yield ((lambda ln=line: f"line {ln}: `and`/`or` swapped"),
                   _at(scope, node, lambda c: setattr(c, "op", ast.Or() if isinstance(c.op, ast.And) else ast.And())))
        if isinstance(node, ast.Constant) and type(node.value) is int:
            for delta in (1, -1):
                yield ((lambda v=node.value, d=delta, ln=line: f"line {ln}: {v} → {v + d}"),
                       _at(scope, node, lambda c, d=delta: setattr(c, "value", c.value + d)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in strings:
            for other in strings:
                if other != node.value:
                    yield ((lambda v=node.value, o=other, ln=line: f"line {ln}: {v!r} → {o!r}"),
                           _at(scope, node, lambda c, o=other: setattr(c, "value", o)))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
            for other in names:
                if other != node.id:
                    yield ((lambda v=node.id, o=other, ln=line: f"line {ln}: `{v}` → `{o}`"),
                           _at(scope, node, lambda c, o=other: setattr(c, "id", o)))


_CHARACTER_CLASSES = ("isdigit", "isalpha")


def _character_class(scope: ast.AST, node: ast.Compare, method: str, negate: bool) -> Callable[[ast.AST], None]:
    """Replace the comparison ``node`` (wherever it sits) by ``[not] left.method()``."""
    path = _path_to(scope, node)
    *up, (field, index) = path

    def change(copied: ast.AST) -> None:
        owner = _follow(copied, up)
        old = getattr(owner, field) if index is None else getattr(owner, field)[index]
        call: ast.expr = ast.Call(ast.Attribute(old.left, method, ast.Load()), [], [])
        new = ast.UnaryOp(ast.Not(), call) if negate else call
        if index is None:
            setattr(owner, field, new)
        else:
            getattr(owner, field)[index] = new

    return change


def _negation(test: ast.expr) -> ast.expr:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    return ast.UnaryOp(ast.Not(), test)


def _negate_test(node: Any) -> None:
    node.test = _negation(node.test)


# ------------------------------------------------------------------ fixes that need no judgement

#: Modules by the name code uses for them: each is the name everyone uses for that module, so a
#: use of it that nothing in the program binds can only mean that module, left unimported.
MODULE_ALIASES: dict[str, str] = {"np": "import numpy as np", **{m: f"import {m}" for m in (
    "random", "re", "math", "itertools", "collections", "string", "functools", "operator", "heapq", "json", "copy",
    "statistics", "bisect")}}


def fixed(code: str, spelled: Mapping[str, str] | None = None, imports: Mapping[str, str] | None = None) -> Mutant | None:
    """``code`` with the slips a small model makes that need no model to fix, all in one pass, or
    None when there is none (or the code does not parse):

    * a module alias (:data:`MODULE_ALIASES`), or a name of ``imports`` (name -> the line that
      binds it, e.g. ``{"parse_grid": "from harnesslib import parse_grid"}``: the helpers a request
      offers), read but bound nowhere in the program (no import, assignment, argument or definition
      of that name, no ``import *``) gets its import;
    * a string constant equal to a key of ``spelled`` becomes its value: an action written with the
      wrong shape, e.g. ``'roll'`` where the game's action is ``'[roll]'``
      (``ActionGrammar.spelled``). Left alone where the program writes brackets itself (a string
      with ``[`` or ``]`` that is not one of the actions: ``'[' + a + ']'``, ``action.strip('[]')``),
      since it may compare or build the bare words on purpose; a docstring or f-string part too.

    Single-point mutants cannot find these: a program with both slips needs both fixed before it
    plays one legal move. Only text is changed, so comments and layout stay."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    spelled = dict(spelled or {})
    bound = _bound_names(tree)
    star = any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree))
    used = dict.fromkeys(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    aliases = {**MODULE_ALIASES, **(imports or {})}
    lines_to_add = [] if star else list(dict.fromkeys(aliases[name] for name in used if name in aliases and name not in bound))
    in_fstring = {id(c) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for c in ast.walk(n)}
    strings = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
               and not _is_docstring(tree, n) and id(n) not in in_fstring]
    if any(("[" in n.value or "]" in n.value) and n.value not in spelled.values() for n in strings):
        spelled = {}  # the program brackets actions itself
    lines = code.splitlines(keepends=True)
    swapped: dict[str, str] = {}
    # From the last constant back, so the byte offsets of the earlier ones on a line stay right.
    for node in sorted((n for n in strings if n.value in spelled and n.lineno == n.end_lineno),
                       key=lambda n: (n.lineno, n.col_offset), reverse=True):
        line = lines[node.lineno - 1].encode()
        literal = line[node.col_offset:node.end_col_offset].decode()
        quote = literal[:1]
        if quote not in ("'", '"') or literal != quote + node.value + quote:
            continue  # a prefixed, triple-quoted or escaped literal: not a plain spelling to swap
        lines[node.lineno - 1] = (line[:node.col_offset] + (quote + spelled[node.value] + quote).encode()
                                  + line[node.end_col_offset:]).decode()
        swapped[node.value] = spelled[node.value]
    if not lines_to_add and not swapped:
        return None
    # After the module's docstring and ``from __future__`` imports, which must come first.
    at = 0
    for k, n in enumerate(tree.body):
        if not ((k == 0 and isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str))
                or (isinstance(n, ast.ImportFrom) and n.module == "__future__")):
            break
        at = n.end_lineno or at
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    text = "".join(lines[:at] + [stmt + "\n" for stmt in lines_to_add] + lines[at:])
    change = "; ".join([f"`{stmt}` added" for stmt in lines_to_add] + [f"{a!r} → {b!r}" for a, b in sorted(swapped.items())])
    return Mutant(text, change)


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the program binds anywhere (any scope): such a name is the program's own."""
    bound: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            bound.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            bound.update(n.names)
        elif isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name:
            bound.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            bound.add(n.rest)
    return bound


# ------------------------------------------------------------------ the engine's proposer


class MutationOptions(Settings):
    """Single-point AST mutants of one Python surface (no model call)."""

    surfaces: list[str] = Field(default_factory=lambda: ["*.py"])
    """Glob patterns of the parent's files a mutation may change (only Python files parse)."""
    max_mutants: int = Field(default=60, ge=1)
    """Most mutants listed per surface before one is drawn."""


class MutationProposer(BaseProposer):
    """Proposes one random single-point mutant of one Python surface of the parent."""

    name = "mutation"

    def __init__(self, options: MutationOptions, ctx: Any = None) -> None:
        self.options = options
        self.ctx = ctx

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        paths = [p for p in sorted(parent.files) if p.endswith(".py") and any(fnmatch(p, g) for g in self.options.surfaces)]
        rng = rng if isinstance(rng, random.Random) else random.Random(0)
        rng.shuffle(paths)
        for path in paths:
            found = mutants(parent.files[path], rng=rng, limit=self.options.max_mutants)
            if found:
                pick = found[0]
                claim = Claim(target=f"{path}: {pick.change}", root_cause="a single-point mutation (no model)", predicted_flips=())
                return Proposal(files={path: pick.code}, claim=claim, proposer=self.name, parents=(parent.id,),
                                meta={"surfaces": [path], "change": pick.change})
        return self.skip(parent, "no Python surface of the parent parses into a mutable program")


class AutofixOptions(Settings):
    """The slips with one reading (:func:`fixed`), all fixed at once in one Python surface (no model call)."""

    surfaces: list[str] = Field(default_factory=lambda: ["*.py"])
    """Glob patterns of the parent's files it may fix (only Python files parse)."""
    spelled: dict[str, str] = Field(default_factory=dict)
    """Bare action words and how the game spells each (``{"roll": "[roll]"}``); empty: read from ``game``."""
    game: str | None = None
    """A TextArena game whose rules text gives ``spelled`` (its action grammar's word actions); none:
    only the missing imports are fixed."""
    imports: dict[str, str] = Field(default_factory=dict)
    """Names a program may read without binding them, each with the line that binds it (the
    helpers its request offers: ``{"parse_grid": "from harnesslib import parse_grid"}``), beside the
    standard modules of ``MODULE_ALIASES``."""


class AutofixProposer(BaseProposer):
    """Proposes the parent's first Python surface that :func:`fixed` changes, with its fixes."""

    name = "autofix"
    deterministic = True
    """The fix is a function of the parent alone: once it has none, asking again gives none."""

    def __init__(self, options: AutofixOptions, ctx: Any = None) -> None:
        self.options = options
        self.ctx = ctx
        self._spelled: dict[str, str] | None = None

    def spelled(self) -> dict[str, str]:
        if self._spelled is None:
            self._spelled = dict(self.options.spelled) or (game_spellings(self.options.game) if self.options.game else {})
        return self._spelled

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        for path in sorted(parent.files):
            if path.endswith(".py") and any(fnmatch(path, g) for g in self.options.surfaces):
                if (fix := fixed(parent.files[path], self.spelled(), self.options.imports)) is not None:
                    claim = Claim(target=f"{path}: {fix.change}", root_cause="a slip with one reading (no model)", predicted_flips=())
                    return Proposal(files={path: fix.code}, claim=claim, proposer=self.name, parents=(parent.id,),
                                    meta={"surfaces": [path], "change": fix.change})
        return self.skip(parent, "nothing to fix: every module the code reads is imported and no action is "
                                 "written without its brackets")


def game_spellings(game: str) -> dict[str, str]:
    """The word actions of ``game`` as its rules text spells them (``ActionGrammar.spelled``)."""
    from ratchet.envs.grammar import infer_grammar  # the envs (TextArena) only for a proposer that names a game
    from ratchet.envs.registry import env_factory_for

    env = env_factory_for(game)()
    try:
        return infer_grammar(env.reset(0).text).spelled()
    finally:
        env.close()
