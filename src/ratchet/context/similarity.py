"""Meaning, for the playbook: an ``Embedder`` protocol and de-duplication by it.

A small curator says the same lesson many times in slightly different words; left alone the
playbook only grows (ace-framework's users ask how to stop that). Before an ADD is applied its
text is compared with every item's by cosine similarity of sentence embeddings; at or above the
threshold the ADD becomes a TAG ``helpful`` of the nearest item (the lesson was learned again),
which is what ace-framework's de-duplication does at 0.85 with the same encoder.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ratchet.context.operations import Add, Operation, Tag
from ratchet.context.playbook import Playbook


@runtime_checkable
class Embedder(Protocol):
    """Texts to unit-length row vectors (one row a text), so a dot product is a cosine."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class SentenceEmbedder:
    """all-MiniLM-L6-v2 in numpy (:mod:`ratchet.models.embedding`), pulled and hash-checked by
    ``ratchet models pull all-minilm-l6-v2``. Loaded on first use (:meth:`load` to load it now);
    the latest ``cache_size`` texts are cached (the playbook's items are embedded again at every
    step otherwise), no more: a serving process embeds every request, and an unbounded cache would
    grow with them. Safe to share between threads (the server embeds off its event loop)."""

    def __init__(self, name: str = "all-minilm-l6-v2", cache_size: int = 4096) -> None:
        self.name = name
        self.cache_size = cache_size
        self._encoder = None
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def load(self) -> SentenceEmbedder:
        """Load the encoder now (a missing pull fails here, naming the command), not at first use."""
        with self._lock:
            if self._encoder is None:
                from ratchet.models.embedding import SentenceEncoder

                self._encoder = SentenceEncoder.pulled(self.name)
        return self

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        self.load()
        with self._lock:
            rows = {t: self._cache[t] for t in dict.fromkeys(texts) if t in self._cache}
            for t in rows:
                self._cache.move_to_end(t)
        todo = [t for t in dict.fromkeys(texts) if t not in rows]
        if todo:
            for text, row in zip(todo, self._encoder.encode(todo)):
                rows[text] = np.asarray(row, dtype=np.float32)
            with self._lock:
                for text in todo:
                    self._cache[text] = rows[text]
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return np.stack([rows[t] for t in texts])


@dataclass(frozen=True)
class Duplicate:
    """An ADD folded away: its text, the item it repeats (``batch-add:K`` when it repeats the K-th
    ADD of the same batch, 0-based, which is kept instead), and how similar they are."""

    text: str
    item: str
    similarity: float


class Deduplicator:
    """Rewrites ADDs that repeat an existing item (or an earlier ADD of the same batch) at
    ``threshold`` cosine or more. Deterministic: ties go to the lowest id."""

    def __init__(self, embedder: Embedder, threshold: float = 0.85) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"de-duplication threshold {threshold} must be in (0, 1]")
        self.embedder = embedder
        self.threshold = threshold

    def rewrite(self, playbook: Playbook, ops: list[Operation]) -> tuple[list[Operation], list[Duplicate]]:
        adds = [op for op in ops if isinstance(op, Add)]
        if not adds:
            return ops, []
        keys = sorted(playbook.items)
        texts = [playbook.items[k].text for k in keys] + [op.text for op in adds]
        vectors = self.embedder.embed(texts)
        known, known_vecs = list(keys), list(vectors[: len(keys)])
        out: list[Operation] = []
        dups: list[Duplicate] = []
        add_index = 0
        pending: dict[int, str] = {}  # position among adds -> the id it will get, for in-batch repeats
        for op in ops:
            if not isinstance(op, Add):
                out.append(op)
                continue
            vec = vectors[len(keys) + add_index]
            best, best_sim = None, -1.0
            for key, other in zip(known, known_vecs):
                sim = float(np.dot(vec, other))
                if sim > best_sim + 1e-9:
                    best, best_sim = key, sim
            if best is not None and best_sim >= self.threshold and not best.startswith("batch-add:"):
                out.append(Tag(best, "helpful"))
                dups.append(Duplicate(op.text, best, round(best_sim, 4)))
            elif best is not None and best_sim >= self.threshold:
                dups.append(Duplicate(op.text, best, round(best_sim, 4)))  # repeats an ADD of this batch
            else:
                out.append(op)
                pending[add_index] = f"batch-add:{add_index}"
                known.append(pending[add_index])
                known_vecs.append(vec)
            add_index += 1
        return out, dups


class ExactDuplicates:
    """De-duplication without an encoder: an ADD whose text is an item's (case and spacing aside)
    is that lesson learned again, a helpful TAG of the item (similarity 1.0), as folding by meaning
    would make it; a repeat of an earlier ADD of the same batch is dropped. Same contract as
    :class:`Deduplicator`."""

    @staticmethod
    def key(text: str) -> str:
        return " ".join(text.lower().split())

    def rewrite(self, playbook: Playbook, ops: list[Operation]) -> tuple[list[Operation], list[Duplicate]]:
        known = {self.key(item.text): item.id for item in playbook.items.values()}
        batch: dict[str, int] = {}  # text key -> position among this batch's ADDs, 0-based
        out: list[Operation] = []
        dups: list[Duplicate] = []
        adds = 0
        for op in ops:
            if not isinstance(op, Add):
                out.append(op)
                continue
            k = self.key(op.text)
            if k in known:
                out.append(Tag(known[k], "helpful"))
                dups.append(Duplicate(op.text, known[k], 1.0))
            elif k in batch:
                dups.append(Duplicate(op.text, f"batch-add:{batch[k]}", 1.0))
            else:
                batch[k] = adds
                out.append(op)
            adds += 1
        return out, dups
