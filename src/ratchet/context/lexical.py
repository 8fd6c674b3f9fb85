"""Relevance by shared words, for code that cannot load the sentence encoder: a sandboxed workflow.

A workflow's sandbox may import the standard library and the files it is given, never the project,
and cannot read the encoder's weights; so this module is one standard-library-only file, which
``workflow.libraries`` copies into the sandbox (``from lexical import relevance``). The context
skill of ``examples/humaneval-playbook`` keeps a lesson out of a prompt with it, by the rule
:func:`ratchet.context.budget.relevance` applies with the encoder: the mean of the task's
similarity to the item's text and to the task the item was learned from (:func:`scoped`), at
least a minimum. The similarity here is the cosine of word counts (identifiers split at
underscores, English and Python boilerplate words left out), so its scale is not the encoder's and
its minimum, :data:`MIN_RELEVANCE`, is its own, measured on the same problems
(``bench/results/context_relevance.md``).
"""

from __future__ import annotations

import math
import re
from collections import Counter

MIN_RELEVANCE = 0.3
"""Least word relevance for an item to enter a prompt; see ``bench/results/context_relevance.md``."""

_WORD = re.compile(r"[a-z]+")
# Words every HumanEval prompt (and most requests) carries, and the words of a Python traceback and
# of a test run (an origin kept from an attempt's trace has them): none says which problem.
_BOILERPLATE = frozenset("""
a an and are as at be by can do does each else for from given has have if in into is it its of on
or that the then this to was were will with you your which when where not all any there their than
def return returns int str float bool list tuple dict none true false import typing optional
function input output example examples value values should write
traceback most recent call last file line module main name exec compile program py runner code error
assertionerror exception raised failed failure passed test tests run result results returned expected
wrong got model reply python answer""".split())


def words(text: str) -> Counter[str]:
    """The counts of a text's content words: lower case, identifiers split at ``_`` and digits,
    a plural ``s`` dropped, boilerplate left out."""
    out: Counter[str] = Counter()
    for word in _WORD.findall(text.lower()):
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        if len(word) > 1 and word not in _BOILERPLATE:
            out[word] += 1
    return out


def cosine(a: Counter[str], b: Counter[str]) -> float:
    """Cosine of two word counts (0 when either is empty)."""
    dot = sum(n * b[w] for w, n in a.items() if w in b)
    norm = math.sqrt(sum(n * n for n in a.values()) * sum(n * n for n in b.values()))
    return dot / norm if norm else 0.0


def scoped(text_similarity: float, origin_similarity: float | None) -> float:
    """An item's relevance from the task's similarity to its text and to its origin (None: the item
    has none, its text alone judges it). The mean, not the max: a rule worded for every problem
    matches any problem's words, and problems of one suite share their form; the mean asks both."""
    return text_similarity if origin_similarity is None else (text_similarity + origin_similarity) / 2.0


def relevance(task: str, text: str, origin: str = "") -> float:
    """How relevant an item (its ``text``, and the ``origin`` task it was learned from) is to ``task``."""
    bag = words(task)
    return scoped(cosine(bag, words(text)), cosine(bag, words(origin)) if origin else None)
