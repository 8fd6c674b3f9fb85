"""Grammar-constrained decoding for the embedded model's own decode loop.

The serving policy samples token by token itself (to record raw-logit log-probs), so llama.cpp's
sampler chain is not in the loop; its grammar sampler is used here as a mask instead.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np


class GrammarDeadEnd(RuntimeError):
    """The grammar allows no token at all next (it cannot be completed from here)."""


class GrammarMask:
    """llama.cpp's grammar sampler used as a mask on our own decode loop: :meth:`restrict` sets the
    log-prob of every token the grammar forbids next to -inf, :meth:`accept` advances it.

    Greedy decoding first asks about the best token alone (one token instead of the whole
    vocabulary through the grammar: most steps of a constrained reply take the model's own choice).
    """

    def __init__(self, lib: Any, vocab: Any, grammar: str) -> None:
        self._lib = lib
        self._sampler = lib.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
        if not self._sampler:
            raise ValueError("llama.cpp could not parse the reply's grammar")
        self._data: Any = None

    def _apply(self, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        data = np.zeros(len(ids), dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)],
                                                 align=True))
        data["id"], data["logit"] = ids, logits
        array = self._lib.llama_token_data_array(
            data=data.ctypes.data_as(self._lib.llama_token_data_p), size=len(ids), selected=-1, sorted=False)
        self._lib.llama_sampler_apply(self._sampler, ctypes.byref(array))
        # The sampler writes -inf into the forbidden entries in place (it never reorders them).
        return np.asarray(data["logit"], dtype=np.float64)

    def restrict(self, logprobs: np.ndarray, greedy: bool) -> np.ndarray:
        if greedy:
            best = int(np.argmax(logprobs))
            if np.isfinite(self._apply(np.array([best]), logprobs[[best]].astype(np.single))[0]):
                out = np.full_like(logprobs, -np.inf)
                out[best] = logprobs[best]
                return out
        allowed = self._apply(np.arange(len(logprobs)), logprobs.astype(np.single))
        if not np.isfinite(allowed).any():
            raise GrammarDeadEnd("the grammar allows no next token")
        return np.where(np.isfinite(allowed), logprobs, -np.inf)

    def accept(self, token: int) -> None:
        self._lib.llama_sampler_accept(self._sampler, token)

    def close(self) -> None:
        if self._sampler:
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = None
