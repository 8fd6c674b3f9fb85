"""Finding and removing "Valid moves / Available moves" hints in observation text.

The paper evaluates harnesses on games "modified to remove Valid moves / Available moves hints". We
do that on the text, not by patching games: a *hint* is a line (or the tail of a line) that starts
with a label such as ``Valid moves:``, ``Available Moves:``, ``Available actions:``, ``Legal moves:``
or ``Your available actions are:``. Two rules keep the game playable:

* In dynamic messages (boards, feedback, invalid-move reasons) every hint is removed.
* In the rules prompt only *long* lists (more than ``STATIC_MAX_ITEMS`` options, e.g. Chess's or
  Santorini's opening move list) are removed; a short static action space such as 2048's
  "Valid moves: [Up], [Down], [Left], [Right]" or PigDice's "'[roll]' or '[hold]'" is the game's
  action format, not a hint about the position, and stays.
"""

from __future__ import annotations

import re

#: The label of a hint. Matched case-insensitively anywhere in a line; the hint runs to line end.
HINT_LABEL = re.compile(
    r"(?i)\b(?:valid|available|legal|possible)\s+(?:moves|actions)(?:\s+are)?(?:\s*\([^)\n]*\))?\s*:"
)
#: "Your available actions are: …": the word before the label goes with it.
_YOUR = re.compile(r"(?i)\byour\s*$")
#: A cheap necessary condition for HINT_LABEL (a literal scan instead of a regex at every position).
_KEYWORDS = ("moves", "actions", "Moves", "Actions", "MOVES", "ACTIONS")


def _maybe_hinted(text: str) -> bool:
    """A cheap necessary condition: one of the ``_KEYWORDS`` occurs (an ``or`` chain of literal
    scans: no generator, no regex)."""
    return ("moves" in text or "actions" in text or "Moves" in text or "Actions" in text
            or "MOVES" in text or "ACTIONS" in text)


def has_hint(text: str) -> bool:
    """Does ``text`` contain a hint label? (Fast for the common case of no "moves"/"actions" word.)"""
    return _maybe_hinted(text) and HINT_LABEL.search(text) is not None

#: Items of a hint list: bracketed tokens first, else quoted tokens, else comma-separated words.
_BRACKETED = re.compile(r"\[[^\[\]\n]{1,40}\]")
_QUOTED = re.compile(r"'([^'\n]{1,40})'")

STATIC_MAX_ITEMS = 8


def hint_items(line: str) -> list[str]:
    """The options a hint line lists (``[e2e4]``-style bracketed tokens kept with brackets)."""
    match = HINT_LABEL.search(line)
    tail = line[match.end():] if match else line
    items = _BRACKETED.findall(tail)
    if items:
        return items
    quoted = _QUOTED.findall(tail)
    if quoted:
        return [q if q.startswith("[") else f"[{q}]" for q in quoted]
    parts = [p.strip(" .'\"") for p in re.split(r",|\bor\b|\|", tail)]
    return [f"[{p}]" for p in parts if p and len(p) <= 40]


def _hint_spans(text: str) -> list[tuple[int, int, int]]:
    """(line start, label start, line end) of every line holding a hint; one regex scan."""
    spans: list[tuple[int, int, int]] = []
    last_line = -1
    for match in HINT_LABEL.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if line_start == last_line:
            continue  # the rest of this line is already part of the first hint on it
        line_end = text.find("\n", match.end())
        spans.append((line_start, match.start(), len(text) if line_end < 0 else line_end))
        last_line = line_start
    return spans


def hint_spans(text: str) -> list[tuple[int, int, int]]:
    """Where the hints of ``text`` are: (line start, label start, line end) per hinted line, [] when
    there is none. The one regex scan that :func:`items_in` and :func:`strip_spans` share, so a
    caller that needs both the options and the stripped text scans the text once."""
    if not _maybe_hinted(text):  # the common case: a literal scan of the whole text
        return []
    return _hint_spans(text)


def items_in(text: str, spans: list[tuple[int, int, int]]) -> list[str]:
    """Every option listed by the hints at ``spans`` (from :func:`hint_spans`), in order, deduplicated."""
    seen: dict[str, None] = {}
    for line_start, _, line_end in spans:
        for item in hint_items(text[line_start:line_end]):
            seen.setdefault(item, None)
    return list(seen)


def find_hints(text: str) -> list[str]:
    """Every option listed by a hint in ``text``, in order, duplicates removed."""
    return items_in(text, hint_spans(text))


def strip_spans(text: str, spans: list[tuple[int, int, int]], *, static: bool = False) -> str:
    """``text`` without the hints at ``spans`` (from :func:`hint_spans`); see :func:`strip_hints`."""
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for line_start, label_start, line_end in spans:
        if static and len(hint_items(text[line_start:line_end])) <= STATIC_MAX_ITEMS:
            continue
        out.append(text[pos:line_start])
        head = _YOUR.sub("", text[line_start:label_start]).rstrip()
        if head.strip(" \t-*"):
            out.append(head)
            pos = line_end
        else:
            pos = line_end + 1 if line_end < len(text) else line_end  # drop the line and its newline
    out.append(text[pos:])
    result = "".join(out)
    return result[:-1] if result.endswith("\n") and not text.endswith("\n") else result


def strip_hints(text: str, *, static: bool = False) -> str:
    """``text`` without its hints. ``static=True`` (the rules prompt) removes only long lists.

    A hint runs from its label to the end of its line; text before the label stays, and a line
    left empty (or holding only a bullet) is dropped.
    """
    return strip_spans(text, hint_spans(text), static=static)
