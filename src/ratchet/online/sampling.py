"""Choosing the next token from raw logits, as the embedded model's decode loop does.

Kept apart from :class:`~ratchet.online.llama_policy.LlamaPolicy` because the rule is the
behaviour policy's definition: temperature and top-p shape only the CHOICE, while the log-prob
recorded for the chosen token is the raw one, which the trainer's importance ratio needs. Plain
numpy, so it is tested without a model.
"""

from __future__ import annotations

import math

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable log-softmax of one row of raw logits (float64)."""
    z = logits.astype(np.float64)
    z = z - z.max()
    return z - math.log(np.exp(z).sum())


def sampling_seed(seed: int | None) -> int | None:
    """A request's ``seed`` as numpy's generator takes it: OpenAI's seeds are any 64-bit integer,
    numpy's only non-negative ones; distinct 64-bit seeds stay distinct (two's complement)."""
    return None if seed is None else seed % (1 << 64)


def choose_token(raw_logprobs: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    """Greedy at temperature 0, else sample from softmax(logits / T) restricted to the top-p mass.

    Only the CHOICE uses temperature and top-p; the log-prob recorded for the chosen token is the
    raw one (``raw_logprobs[token]``), the behaviour policy's own distribution.
    """
    if temperature <= 0.0:
        return int(np.argmax(raw_logprobs))
    # Shifted before scaling: every value is then <= 0, and a tiny temperature (the request's
    # 5e-324 is valid JSON within the schema's range) gives -inf (probability 0), never inf - inf = NaN.
    with np.errstate(over="ignore", divide="ignore"):
        scaled = (raw_logprobs - raw_logprobs.max()) / temperature
    probs = np.exp(scaled)
    probs /= probs.sum()
    if top_p < 1.0:
        order = np.argsort(-probs)
        keep = order[: int(np.searchsorted(np.cumsum(probs[order]), top_p) + 1)]
        mask = np.zeros_like(probs)
        mask[keep] = probs[keep]
        probs = mask / mask.sum()
    return int(rng.choice(len(probs), p=probs))
