"""A local model's reading of a person's message as praise, correction or neither — without generating.

The classifier judge (``classifier.py``) reads a message through an English sentence encoder and
lexical cues; on sets written apart from its development data it still read about 5% of the rows
with the wrong sign (non-English "thanks, but …", irony, negated negatives: ``bench/results/
online_judge.md``). A chat model reads meaning in many languages, but a generated verdict is slow
and a small model's generated verdicts had sign errors of their own. So the model is asked for one
word and only the log-probabilities of the three label words' first tokens are read from one
prompt evaluation (:meth:`ratchet.online.llama_policy.LlamaPolicy.next_token_logprobs`); the
stacked judge (``stacked.py``) weighs them against the classifier's probabilities with weights
fitted on the development sets, so the model's bias toward one label is calibrated away.

The prompt is fixed (:data:`SYSTEM`, :func:`messages`) and its digest is recorded with the fitted
weights: weights fitted on one prompt's log-probabilities are refused for another's.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ratchet.online.judge.classifier import CLASSES

#: What the model is told. Written once from the label definitions, not from any feedback set.
SYSTEM = (
    "You read one message a person wrote right after an assistant answered them, and say how the person "
    "took that answer.\n"
    "praise: they are pleased with it (thanks, approval, it worked, it helped), in any language.\n"
    "correction: they are not satisfied: they point out a mistake or a failure, complain, ask for the answer "
    "to be changed or redone (for example shorter, in another format or language, with something added or "
    "left out), or they praise it sarcastically.\n"
    "neutral: neither: a new question or task, a follow-up that builds on the answer, small talk.\n"
    "Reply with one word: praise, correction or neutral."
)
#: The label words, in :data:`CLASSES` order (correction, praise, neutral).
WORDS = {"correction": "correction", "praise": "praise", "neutral": "neutral"}
#: How much of the assistant's answer the model sees: enough to know what was answered, cheap to read.
REPLY_CHARS = 300
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def messages(reply: str, message: str) -> list[dict[str, str]]:
    """The chat the model reads: the fixed system prompt, then the answer's start and the message."""
    user = (f"The assistant's answer began: \"{(reply or '')[:REPLY_CHARS]}\"\n\n"
            f"The person's next message: \"{message}\"")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def prompt_digest() -> str:
    """What identifies the prompt the log-probabilities were read with."""
    text = SYSTEM + "\x00" + messages("{reply}", "{message}")[1]["content"] + "\x00" + repr(WORDS) + str(REPLY_CHARS)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class LabelReader(Protocol):
    """Log-probabilities of the three labels for a message, in :data:`CLASSES` order."""

    name: str

    def logprobs(self, reply: str, message: str) -> np.ndarray: ...


class LlamaLabelReader:
    """:class:`LabelReader` over an embedded GGUF model, loaded on the first message."""

    def __init__(self, model: str = DEFAULT_MODEL, *, threads: int = 1, n_ctx: int = 2048) -> None:
        self.name = model
        self.threads = threads
        self.n_ctx = n_ctx
        self._policy = None
        self._ids: list[int] = []

    def _load(self):
        if self._policy is None:
            from ratchet.models.registry import model_path
            from ratchet.online.llama_policy import LlamaPolicy

            path = Path(self.name) if self.name.endswith(".gguf") else model_path(self.name)
            self._policy = LlamaPolicy(path, n_threads=self.threads, n_ctx=self.n_ctx)
            self._ids = [self._policy.first_token(WORDS[c]) for c in CLASSES]
            if len(set(self._ids)) != len(self._ids):
                raise ValueError(f"the label words share a first token in {self.name}'s vocabulary")
        return self._policy

    def policy(self):
        """The loaded model (loaded now if it was not): the tool-output reader reads with it too."""
        return self._load()

    def logprobs(self, reply: str, message: str) -> np.ndarray:
        from ratchet.online.policy import RequestRefused

        policy = self._load()
        try:
            lp = policy.next_token_logprobs(messages(reply, message), self._ids)
        except RequestRefused:  # a message past the context (rare): read its end
            lp = policy.next_token_logprobs(messages(reply, message[-2 * self.n_ctx:]), self._ids)
        return np.asarray(lp, dtype=np.float64)

    def close(self) -> None:
        if self._policy is not None:
            self._policy.close()
            self._policy = None


def read_all(reader: LabelReader, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """One row of label log-probabilities per (reply, message) pair."""
    return np.array([reader.logprobs(reply, message) for reply, message in pairs], dtype=np.float64).reshape(-1, len(CLASSES))


def cache_key(model: str, reply: str, message: str) -> str:
    """What a cached reading is filed under: the model, the prompt and exactly what it read."""
    text = "\x00".join([model, prompt_digest(), (reply or "")[:REPLY_CHARS], message])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class CachedLabelReader:
    """A :class:`LabelReader` that files every reading in a JSON-lines cache and reads it back.

    Fitting and measuring the stacked judge reads the same ~1,000 messages many times; the 1.5B
    takes seconds a message on this CPU. Each new reading is appended (with the seconds it took)
    as it is made, so an interrupted fit or bench resumes without reading a message twice.
    """

    def __init__(self, reader: LabelReader, path: Path) -> None:
        self.reader = reader
        self.name = reader.name
        self.path = Path(path)
        self.rows: dict[str, dict] = {}
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.rows[row["key"]] = row

    def logprobs(self, reply: str, message: str) -> np.ndarray:
        key = cache_key(self.name, reply, message)
        if key not in self.rows:
            start = time.perf_counter()
            lp = self.reader.logprobs(reply, message)
            row = {"key": key, "logprobs": [round(float(v), 5) for v in lp], "s": round(time.perf_counter() - start, 3)}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            self.rows[key] = row
        return np.array(self.rows[key]["logprobs"], dtype=np.float64)

    def seconds(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The seconds the model took for each pair when it was read (cached pairs only)."""
        keys = (cache_key(self.name, r, m) for r, m in pairs)
        return [self.rows[k]["s"] for k in keys if k in self.rows]
