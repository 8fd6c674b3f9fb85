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
    r"(?i)(?:your\s+)?\b(?:valid|available|legal|possible)\s+(?:moves|actions)(?:\s+are)?"
    r"(?:\s*\([^)\n]*\))?\s*:"
)
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


def find_hints(text: str) -> list[str]:
    """Every option listed by a hint in ``text``, in order, duplicates removed."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        if HINT_LABEL.search(line):
            for item in hint_items(line):
                seen.setdefault(item, None)
    return list(seen)


def strip_hints(text: str, *, static: bool = False) -> str:
    """``text`` without its hints. ``static=True`` (the rules prompt) removes only long lists."""
    out: list[str] = []
    for line in text.split("\n"):
        match = HINT_LABEL.search(line)
        if match is None or (static and len(hint_items(line)) <= STATIC_MAX_ITEMS):
            out.append(line)
            continue
        head = line[: match.start()].rstrip()
        if head.strip(" \t-*"):
            out.append(head)
    return "\n".join(out)
