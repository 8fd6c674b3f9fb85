"""The shape of a game's actions, read from its rules text and its error messages.

Most games print no list of legal moves, but their rules say what an action looks like: "answer
[row col], rows and columns numbered 0 to 2, for example [0 2]", "select the square number (0-8)
… '[4]'", "[a-z]", "Invalid format: use [n]". :func:`infer_grammar` turns that into an
:class:`ActionGrammar` of bracketed patterns whose slots are integers or letters over the ranges
the text names; its actions can be enumerated (to try every one at a state and label it legal or
not, :mod:`ratchet.envs.harness.transitions`), matched, and used to format what code returns
(a tuple ``(1, 2)`` → ``"[1 2]"``, see ``harnesslib.as_action``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_TOKEN = re.compile(r"\[([^\[\]\n]{1,40})\]")
_NOT_ACTION = re.compile(r"^(GAME|Player|player|[A-Z][a-z]+ \d+$)")
_RANGE = re.compile(r"\b(\d{1,3})\s*(?:-|–|to|through|and)\s*(\d{1,3})\b")
_LETTERS = re.compile(r"\b([a-zA-Z])\s*(?:-|–|to|through)\s*([a-zA-Z])\b")
#: A board's Python-style list ("A: [3, 2, 1]", "Player 0: [1, 1]"): contents, not an action.
_LIST_LITERAL = re.compile(r"^-?\d+(?:, -?\d+)+$")
#: Words that stand for a number in a rules text's action template ("[row col]", "[n]").
NUMBER_WORDS = frozenset({"row", "col", "column", "r", "c", "x", "y", "n", "i", "j", "k", "num", "number", "index", "pos",
                          "position", "cell", "square", "digit", "guess", "amount", "count", "pile", "from", "to", "id", "quantity",
                          "stones", "value", "size", "tile", "card", "bid", "col1", "col2", "row1", "row2"})
#: Moves that come as a family: naming one names the others.
DIRECTIONS = ("up", "down", "left", "right")
#: Words that stand for a letter ("[letter]", "[a-z]").
LETTER_WORDS = frozenset({"letter", "char", "character"})


@dataclass(frozen=True)
class Slot:
    """One variable part of an action: its kind ("int", "letter" or "word") and the values it takes."""

    kind: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Pattern:
    """A bracketed action: literal words and slots, space-separated (``[col {int}]``, ``[{int} {int}]``)."""

    parts: tuple[str | Slot, ...]

    @property
    def form(self) -> str:
        """A format string with one ``{}`` per slot (``"[{} {}]"``)."""
        return "[" + " ".join("{}" if isinstance(p, Slot) else p for p in self.parts) + "]"

    def describe(self) -> str:
        def one(p: str | Slot) -> str:
            if isinstance(p, str):
                return p
            return f"<{'|'.join(p.values)}>" if p.kind == "word" else f"<{p.kind} {p.values[0]}-{p.values[-1]}>"

        return "[" + " ".join(one(p) for p in self.parts) + "]"

    def actions(self) -> Iterable[str]:
        slots = [p.values for p in self.parts if isinstance(p, Slot)]
        for combo in itertools.product(*slots):
            yield self.form.format(*combo)

    def size(self) -> int:
        n = 1
        for p in self.parts:
            if isinstance(p, Slot):
                n *= len(p.values)
        return n

    def matches(self, action: str) -> bool:
        found = _TOKEN.search(action)
        words = found.group(1).split() if found else []
        return len(words) == len(self.parts) and all(w in p.values if isinstance(p, Slot) else w == p for w, p in zip(words, self.parts))


@dataclass(frozen=True)
class ActionGrammar:
    """The patterns an action may take (none known: an empty grammar, which matches nothing)."""

    patterns: tuple[Pattern, ...] = ()

    def enumerate(self, limit: int = 10_000) -> list[str]:
        """Every action the grammar allows, pattern by pattern, at most ``limit``."""
        return list(itertools.islice(itertools.chain.from_iterable(p.actions() for p in self.patterns), limit))

    def size(self) -> int:
        return sum(p.size() for p in self.patterns)

    def matches(self, action: str) -> bool:
        return any(p.matches(action) for p in self.patterns)

    def spelled(self) -> dict[str, str]:
        """The actions made of words alone (``[roll]``, ``[move up]``), each by its words without
        the brackets (``{"roll": "[roll]"}``): a string of code equal to such words can only be meant
        as that action. Actions with a number or a letter are left out: a bare ``"4"`` or ``"a"`` in
        code is as often a cell or a piece of the board as an action."""
        return {a[1:-1]: a for p in self.patterns if all(isinstance(x, str) or x.kind == "word" for x in p.parts)
                for a in p.actions()}

    @property
    def form(self) -> str:
        """The main pattern's format string (``"[{}]"`` when nothing is known)."""
        return self.patterns[0].form if self.patterns else "[{}]"

    def describe(self) -> str:
        return " or ".join(p.describe() for p in self.patterns) or "(unknown)"


def infer_grammar(texts: Sequence[str] | str, examples: Sequence[str] = ()) -> ActionGrammar:
    """The action grammar the rules text(s) and error messages describe; ``examples`` are actions
    known to be accepted. Bracketed tokens become patterns (a number → an int slot, a lone letter or
    ``a-z`` → a letter slot, a template word such as ``row`` → an int slot); numeric ranges the text
    names ("0 to 2", "(0-8)") bound the int slots, else 0-9. Patterns of the same shape merge."""
    text = "\n".join([texts] if isinstance(texts, str) else texts)
    ranges = [(int(a), int(b)) for a, b in _RANGE.findall(text) if int(a) < int(b) <= 999]
    low = min((a for a, _ in ranges), default=0)
    high = max((b for _, b in ranges), default=9)
    ints = tuple(str(i) for i in range(low, min(high, low + 63) + 1))
    letter_ranges = [(a, b) for a, b in _LETTERS.findall(text) if a.islower() == b.islower() and a < b]
    shapes: dict[tuple, Pattern] = {}
    tokens = [t.strip() for t in [*_TOKEN.findall(text), *_TOKEN.findall(" ".join(examples))]]
    # One-word actions ("[up]", "[Hit]", "[stand]") are the values of one choice slot; a direction
    # named alone ("for example [up]") stands for all four.
    words = [t for t in dict.fromkeys(tokens) if re.fullmatch(r"[A-Za-z][a-z]{1,11}", t) and not _NOT_ACTION.match(t)
             and t.lower() not in NUMBER_WORDS | LETTER_WORDS]
    for w in list(words):
        if w.lower() in DIRECTIONS:
            words += [d.capitalize() if w[0].isupper() else d for d in DIRECTIONS if d not in {x.lower() for x in words}]
    if words:
        shapes[("word",)] = Pattern((Slot("word", tuple(words)),))
    for token in tokens:
        pattern = _pattern(token, ints, letter_ranges, text)
        if pattern is not None:
            shape = tuple(p.kind if isinstance(p, Slot) else p for p in pattern.parts)
            shapes.setdefault(shape, pattern)
    # Templates ("[row col]") and examples ("[0 2]") of one shape are one pattern; the most slots first.
    ordered = sorted(shapes.values(), key=lambda p: -sum(isinstance(x, Slot) for x in p.parts))
    return ActionGrammar(tuple(ordered))


def _pattern(token: str, ints: tuple[str, ...], letter_ranges: list[tuple[str, str]], text: str = "") -> Pattern | None:
    if _NOT_ACTION.match(token) or not token or _LIST_LITERAL.match(token):
        return None
    words = token.replace(",", " ").split()
    if len(words) > 4:
        return None  # prose in brackets, not an action
    has_number = any(w.isdigit() for w in words)
    parts: list[str | Slot] = []
    for w in words:
        low = w.lower()
        span = re.fullmatch(r"([a-zA-Z])-([a-zA-Z])", w)
        if w.isdigit():
            parts.append(Slot("int", ints if w in ints else tuple(sorted(set(ints) | {w}, key=int))))
        elif span:
            a, b = span.groups()
            parts.append(Slot("letter", tuple(chr(c) for c in range(ord(a), ord(b) + 1))))
        elif re.fullmatch(r"\d+-\d+", w):
            a, b = (int(x) for x in w.split("-"))
            parts.append(Slot("int", tuple(str(i) for i in range(a, min(b, a + 63) + 1))))
        elif not has_number and low in NUMBER_WORDS and not (len(w) == 1 and w.isupper()):  # "[A C]": towers, not a column
            parts.append(Slot("int", ints))
        elif not has_number and low in LETTER_WORDS:
            parts.append(Slot("letter", _letters(letter_ranges, lower=True)))
        elif len(w) == 1 and w.isalpha() and (number := _letter_number(w, text, ints)):
            parts.append(Slot("int", number))
        elif len(w) == 1 and w.isalpha():
            letters = _letters(letter_ranges, lower=w.islower())
            parts.append(Slot("letter", letters if w in letters else tuple(sorted({*letters, w}))))
        elif re.fullmatch(r"[A-Za-z][a-z]*", w):
            parts.append(w)
        else:
            return None  # e2e4-like or mixed tokens: not enumerable here
    if not any(isinstance(p, Slot) for p in parts):
        return None
    return Pattern(tuple(parts))


def _letter_number(name: str, text: str, ints: tuple[str, ...]) -> tuple[str, ...] | None:
    """The values of a template's one-letter name that the rules define as a number ("[attack M O] where
    M=your hand (0 or 1)", "[split L R] … L+R = your total"), else None (then it is a letter slot)."""
    n = re.escape(name)
    choice = re.search(rf"\b{n}\s*=[^=\n]{{0,40}}?\((\d+) or (\d+)\)", text)
    if choice:
        low, high = sorted(int(x) for x in choice.groups())
        return tuple(str(i) for i in range(low, high + 1))
    return ints if re.search(rf"\b{n}\s*[=+<>]|[+<>]\s*{n}\b", text) else None


def _letters(ranges: list[tuple[str, str]], lower: bool) -> tuple[str, ...]:
    for a, b in ranges:
        if a.islower() == lower:
            return tuple(chr(c) for c in range(ord(a), ord(b) + 1))
    return tuple("abcdefghijklmnopqrstuvwxyz") if lower else tuple("ABCDE")
