"""A fake embedder for context tests: bag of words hashed into 64 dimensions, unit length.

Texts that share most of their words come out close, texts with no word in common orthogonal
(up to hash collisions), which is all de-duplication and selection need to be tested."""

from __future__ import annotations

import hashlib
import re

import numpy as np


class BagOfWords:
    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
        return out
