"""Ending a reply that is stuck in a loop, instead of letting it run to its token limit.

A small model asked for a long reply (a whole file, a long plan) sometimes falls into repeating one
block of text until ``max_tokens``: measured here, the 1.5B asked to rewrite a 1,300-token workflow
file wrote one docstring 14 times over, 2,500 tokens and 346 s of CPU for a reply nothing could use.
:class:`LoopStop` is a llama.cpp logits processor that watches the tokens written so far and, once
their tail is one block repeated (:func:`looping`), makes the end-of-turn the only possible next
token. The reply is then reported as cut (``finish_reason: length``): it did not end on its own.

What counts as a loop is deliberately narrow: at least ``min_repeats`` exact copies of a block,
covering at least ``min_tokens`` tokens. A board drawn with identical rows, a list of similar lines
or a repeated word in a sentence is shorter than that or not exact; a reply past it would not have
become useful by going on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["LoopStop", "looping"]


def looping(tokens: Any, *, min_tokens: int = 256, min_repeats: int = 3) -> int | None:
    """The period of the loop the tail of ``tokens`` is in, or None: the smallest ``p`` such that
    the last ``max(min_repeats * p, min_tokens)`` tokens (rounded up to whole blocks) are one block
    of ``p`` tokens repeated."""
    ids = np.asarray(tokens)
    n = len(ids)
    if n < min_tokens:
        return None
    # Only periods at which the last token recurs can be loops: a cheap first filter.
    candidates = np.nonzero(ids[n - 1 - np.arange(1, n // min_repeats + 1)] == ids[-1])[0] + 1
    for p in candidates:
        span = max(min_repeats * p, -(-min_tokens // p) * p)
        if span > n:
            continue
        tail = ids[n - span:]
        if np.array_equal(tail[p:], tail[:-p]):
            return int(p)
    return None


class LoopStop:
    """A llama-cpp-python logits processor (one per request): once the reply's tokens are in a
    loop (:func:`looping`), only ``eos`` may come next. Checked every ``every`` tokens, so its cost
    is a small share of a token's. ``fired`` says whether it ended the reply."""

    def __init__(self, eos: int, *, min_tokens: int = 256, min_repeats: int = 3, every: int = 8) -> None:
        self.eos = eos
        self.min_tokens = min_tokens
        self.min_repeats = min_repeats
        self.every = every
        self.fired = False
        self._start: int | None = None  # where the reply begins: the prompt's length at the first call

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self._start is None:
            self._start = len(input_ids)
        written = len(input_ids) - self._start
        if not self.fired and written >= self.min_tokens and written % self.every == 0:
            self.fired = looping(input_ids[self._start:], min_tokens=self.min_tokens,
                                 min_repeats=self.min_repeats) is not None
        if self.fired:
            scores[:] = -np.inf
            scores[self.eos] = 0.0
        return scores
