"""A sentence encoder in plain numpy: all-MiniLM-L6-v2 (BERT, 6 layers, 384-d, mean-pooled, unit length).

Why numpy and not torch + transformers: the judging loop runs beside the served model on two cores,
and a short feedback message needs one forward pass of a 22M-parameter encoder (a few ms of matrix
products). Importing torch costs seconds and hundreds of MB per process; this needs only numpy,
which every install has. The weights are the catalog entry ``all-minilm-l6-v2`` (``ratchet models
pull all-minilm-l6-v2``): a zip holding ``model.safetensors`` and ``tokenizer.json``, read here
without the safetensors package (its format is a JSON header and raw little-endian arrays).

The tokenizer reproduces the BERT ``BertNormalizer`` + ``BertPreTokenizer`` + WordPiece pipeline the
model was trained with (lower-case, accents stripped, CJK ideographs split, punctuation split,
greedy longest-match sub-words); the real-model test checks it against known token ids.
"""

from __future__ import annotations

import io
import json
import struct
import unicodedata
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ratchet.contracts import RatchetError

#: The catalog name of the default encoder.
DEFAULT_ENCODER = "all-minilm-l6-v2"

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file's bytes (8-byte header length, JSON header, raw arrays)."""
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise RatchetError(f"tensor {name}: dtype {info['dtype']} is not supported by the numpy encoder")
        tensors[name] = np.frombuffer(data[base + start:base + end], dtype=dtype).reshape(info["shape"])
    return tensors


# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class WordPiece:
    """BERT's uncased WordPiece tokenizer over ``vocab`` (token -> id)."""

    def __init__(self, vocab: dict[str, int], *, max_word_chars: int = 100) -> None:
        self.vocab = vocab
        self.max_word_chars = max_word_chars
        self.unk, self.cls, self.sep = vocab["[UNK]"], vocab["[CLS]"], vocab["[SEP]"]

    @staticmethod
    def normalize(text: str) -> str:
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
                continue
            if ch.isspace():
                out.append(" ")
            elif _is_cjk(cp):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        text = unicodedata.normalize("NFD", "".join(out).lower())
        return "".join(ch for ch in text if unicodedata.category(ch) != "Mn")

    def words(self, text: str) -> list[str]:
        words: list[str] = []
        for chunk in self.normalize(text).split():
            current = ""
            for ch in chunk:
                if _is_punctuation(ch):
                    if current:
                        words.append(current)
                        current = ""
                    words.append(ch)
                else:
                    current += ch
            if current:
                words.append(current)
        return words

    def word_ids(self, word: str) -> list[int]:
        if len(word) > self.max_word_chars:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    break
                end -= 1
            if end == start:
                return [self.unk]
            start = end
        return ids

    def encode(self, text: str, max_len: int = 256) -> list[int]:
        ids = [i for w in self.words(text) for i in self.word_ids(w)]
        return [self.cls, *ids[: max_len - 2], self.sep]


# ---------------------------------------------------------------------------------------------
# Encoder
# ---------------------------------------------------------------------------------------------


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and BERT's GELU is the exact one.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class SentenceEncoder:
    """all-MiniLM-L6-v2 in numpy: ``encode(texts)`` -> (n, 384) unit vectors, as sentence-transformers gives."""

    def __init__(self, tensors: dict[str, np.ndarray], vocab: dict[str, int], *, heads: int = 12,
                 max_len: int = 256, name: str = DEFAULT_ENCODER) -> None:
        self.w = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()
                  if not k.endswith("position_ids")}
        self.tokenizer = WordPiece(vocab)
        self.heads = heads
        self.max_len = max_len
        self.name = name
        self.layers = sum(1 for k in self.w if k.endswith("attention.self.query.weight"))
        self.dim = self.w["embeddings.word_embeddings.weight"].shape[1]

    @classmethod
    def from_zip(cls, path: str | Path, **kwargs) -> SentenceEncoder:
        """Load the sentence-transformers export zipped at ``path`` (weights + ``tokenizer.json``)."""
        try:
            with zipfile.ZipFile(path) as archive:
                tensors = read_safetensors(archive.read("model.safetensors"))
                vocab = json.load(io.TextIOWrapper(archive.open("tokenizer.json"), encoding="utf-8"))["model"]["vocab"]
        except (OSError, KeyError, zipfile.BadZipFile, ValueError) as exc:
            raise RatchetError(f"cannot read the sentence encoder at {path}: {exc}",
                               hint=f"ratchet models pull {DEFAULT_ENCODER}") from None
        return cls(tensors, vocab, **kwargs)

    @classmethod
    def pulled(cls, name: str = DEFAULT_ENCODER) -> SentenceEncoder:
        """The catalog encoder ``name``, verified against its pinned SHA-256 (raises with the pull command)."""
        from ratchet.models.registry import model_path

        return cls.from_zip(model_path(name), name=name)

    def _linear(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        n, length = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = self.dim // self.heads
        bias = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(n, length, self.heads, head).transpose(0, 2, 1, 3)

            q = split(self._linear(x, f"{p}.attention.self.query"))
            k = split(self._linear(x, f"{p}.attention.self.key"))
            v = split(self._linear(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, self.dim)
            x = _layer_norm(self._linear(context, f"{p}.attention.output.dense") + x,
                            w[f"{p}.attention.output.LayerNorm.weight"], w[f"{p}.attention.output.LayerNorm.bias"])
            hidden = self._linear(x, f"{p}.intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + _erf(hidden / np.sqrt(2.0)))
            x = _layer_norm(self._linear(hidden, f"{p}.output.dense") + x,
                            w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"])
        return x

    def encode(self, texts: Sequence[str], *, batch: int = 16) -> np.ndarray:
        """Unit-length mean-pooled embeddings of ``texts``, shape (len(texts), 384)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths pad little
        for start in range(0, len(order), batch):
            chunk = order[start:start + batch]
            encoded = [self.tokenizer.encode(texts[i], self.max_len) for i in chunk]
            length = max(len(e) for e in encoded)
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.float32)
            for row, e in enumerate(encoded):
                ids[row, :len(e)] = e
                mask[row, :len(e)] = 1.0
            hidden = self._forward(ids, mask)
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[chunk] = pooled
        return out
