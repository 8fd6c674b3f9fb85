"""The default judge: a small classifier over a sentence embedding and lexical cues of the next state.

A person's next message is one of three things: a correction (-1), praise (+1) or neither (0, the
turn is left out of Binary RL). :class:`FeedbackClassifier` is a multinomial logistic regression
over the message's all-MiniLM-L6-v2 embedding (:mod:`ratchet.models.embedding`, numpy, ~10 ms a
message on one core) and the cue features of :mod:`ratchet.online.judge.cues`. Its parameters
ship as ``feedback_classifier.json`` beside this module, fitted on ``tests/data/feedback/dev.jsonl``
by ``scripts/fit_feedback_classifier.py``; the bench (``bench/online_judge.py``) scores it by
cross-validation on that set and once on a held-out set written apart from it.

Reading praise as a correction or a correction as praise (a sign error) teaches the opposite of
what the person asked; leaving a turn out only loses one sample. So a verdict of +1 or -1 needs
its class probability to reach ``min_confidence``; below it the verdict is 0. Tool outputs are
read by :func:`ratchet.online.judge.rules.tool_vote`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ratchet.contracts import FORMAT_VERSION, RatchetError
from ratchet.online.judge.cues import NAMES as CUE_NAMES
from ratchet.online.judge.cues import cue_matrix
from ratchet.online.judge.rules import TOOL_PREFIX, correction_hint, is_tool_output, tool_vote
from ratchet.online.records import Judgement, Turn
from ratchet.online.sessions import SESSION_ENDED

#: The classes in the order of the classifier's outputs, and the reward of each.
CLASSES = ("correction", "praise", "neutral")
REWARD = {"correction": -1, "praise": 1, "neutral": 0}
PARAMS_PATH = Path(__file__).with_name("feedback_classifier.json")
#: The same classifier fitted on the cues alone: what judges when the encoder is not pulled.
CUES_PARAMS_PATH = Path(__file__).with_name("feedback_classifier_cues.json")
log = logging.getLogger(__name__)


class Encoder(Protocol):
    """What the classifier needs of a sentence encoder: unit vectors of texts."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def features(encoder: Encoder | None, texts: Sequence[str], cue_scale: float = 1.0) -> np.ndarray:
    """The classifier's input: [embedding, cues * cue_scale] per text (cues alone without an encoder)."""
    cues = cue_matrix(list(texts)) * cue_scale
    if encoder is None:
        return cues
    return np.hstack([np.asarray(encoder.encode(list(texts)), dtype=np.float32), cues])


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class FeedbackClassifier:
    """Multinomial logistic regression from features to :data:`CLASSES` probabilities."""

    def __init__(self, weights: np.ndarray, bias: np.ndarray, *, encoder: str | None, cue_scale: float,
                 cues: Sequence[str] = CUE_NAMES, meta: dict[str, Any] | None = None) -> None:
        self.weights = np.asarray(weights, dtype=np.float32)
        self.bias = np.asarray(bias, dtype=np.float32)
        self.encoder = encoder
        self.cue_scale = cue_scale
        self.cues = tuple(cues)
        self.meta = dict(meta or {})
        if self.weights.shape[1] != len(CLASSES) or self.bias.shape != (len(CLASSES),):
            raise ValueError(f"classifier weights must be (features, {len(CLASSES)}), not {self.weights.shape}")

    def proba(self, x: np.ndarray) -> np.ndarray:
        if x.shape[1] != self.weights.shape[0]:
            raise ValueError(f"{x.shape[1]} features given, the classifier was fitted on {self.weights.shape[0]}")
        return _softmax(x @ self.weights + self.bias)

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "classes": list(CLASSES), "encoder": self.encoder,
                "cue_scale": self.cue_scale, "cues": list(self.cues), "meta": self.meta,
                "bias": [round(float(v), 6) for v in self.bias],
                "weights": [[round(float(v), 6) for v in row] for row in self.weights]}

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), separators=(",", ":")) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path = PARAMS_PATH) -> FeedbackClassifier:
        """The fitted parameters at ``path``; an unreadable file or one fitted on other cues is an error."""
        try:
            data = json.loads(Path(path).read_text())
            if list(data["classes"]) != list(CLASSES):
                raise ValueError(f"classes {data['classes']} are not {list(CLASSES)}")
            if tuple(data["cues"]) != CUE_NAMES:
                raise ValueError("it was fitted on other cues than cues.py defines")
            return cls(np.array(data["weights"]), np.array(data["bias"]), encoder=data["encoder"],
                       cue_scale=float(data["cue_scale"]), cues=data["cues"], meta=data.get("meta"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RatchetError(f"cannot load the feedback classifier {path}: {exc}",
                               hint="refit it: python scripts/fit_feedback_classifier.py") from None


#: The fit's settings and the weight of the cue features beside the unit-length embedding, picked by
#: 5-fold cross-validation on dev over cue scale {0.5, 1, 2} x l2 {1e-4, 1e-3, 3e-3} x min_confidence
#: {0.5, 0.6, 0.7}: the most corrections and praise heard with at most 2% sign errors.
FIT_SETTINGS: dict[str, float] = {"l2": 1e-3, "epochs": 800, "lr": 1.0}
CUE_SCALE = 2.0


def fit(x: np.ndarray, labels: Sequence[str], *, l2: float = 1e-3, epochs: int = 800, lr: float = 1.0,
        encoder: str | None, cue_scale: float, meta: dict[str, Any] | None = None) -> FeedbackClassifier:
    """Full-batch gradient descent on class-balanced cross-entropy + L2 (deterministic: no sampling)."""
    y = np.array([CLASSES.index(label) for label in labels])
    n, d = x.shape
    onehot = np.eye(len(CLASSES))[y]
    counts = np.bincount(y, minlength=len(CLASSES)).astype(float)
    sample_weight = (n / (len(CLASSES) * np.maximum(counts, 1)))[y][:, None]
    w = np.zeros((d, len(CLASSES)))
    b = np.zeros(len(CLASSES))
    x64 = x.astype(np.float64)
    for _ in range(epochs):
        grad = (_softmax(x64 @ w + b) - onehot) * sample_weight / n
        w -= lr * (x64.T @ grad + l2 * w)
        b -= lr * grad.sum(axis=0)
    return FeedbackClassifier(w, b, encoder=encoder, cue_scale=cue_scale, meta=meta)


def cross_validated_proba(x: np.ndarray, labels: Sequence[str], *, folds: int = 5, seed: int = 0,
                          **fit_kwargs: Any) -> np.ndarray:
    """Each row's class probabilities from a classifier fitted on the other folds (rows shuffled by ``seed``)."""
    order = np.random.default_rng(seed).permutation(len(labels))
    out = np.zeros((len(labels), len(CLASSES)))
    for k in range(folds):
        test = order[k::folds]
        train = np.setdiff1d(order, test)
        model = fit(x[train], [labels[i] for i in train], **fit_kwargs)
        out[test] = model.proba(x[test])
    return out


def verdict(proba: np.ndarray, min_confidence: float) -> int:
    """The reward of one row of probabilities: its class's, when that class is sure enough."""
    label = CLASSES[int(np.argmax(proba))]
    if label != "neutral" and float(np.max(proba)) < min_confidence:
        return 0
    return REWARD[label]


class ClassifierJudge:
    """Judge by :class:`FeedbackClassifier` (a person's message) or the tool rules (a tool's output).

    The encoder the parameters were fitted with is loaded on the first turn, so building the judge
    costs nothing until a turn arrives. When that encoder is not pulled and a ``fallback`` (the
    cues-only fit) is given, the judge says so once in the log and judges with the fallback; its
    judgements then carry the name ``classifier:cues``. With ``hints`` on, a corrected turn's hint
    is the instruction the correction states (:func:`ratchet.online.judge.hints.instruction_of`).
    """

    def __init__(self, classifier: FeedbackClassifier | None = None, *, encoder: Encoder | None = None,
                 fallback: FeedbackClassifier | None = None, min_confidence: float = 0.6, hints: bool = True,
                 hint_chars: int = 400) -> None:
        self.classifier = classifier or FeedbackClassifier.load()
        self.fallback = fallback
        self._encoder = encoder
        self.min_confidence = min_confidence
        self.hints = hints
        self.hint_chars = hint_chars
        self.name = "classifier" if self.classifier.encoder else "classifier:cues"

    @classmethod
    def default(cls, **kwargs: Any) -> ClassifierJudge:
        """The shipped classifier, with the shipped cues-only fit as its fallback."""
        return cls(FeedbackClassifier.load(PARAMS_PATH), fallback=FeedbackClassifier.load(CUES_PARAMS_PATH), **kwargs)

    @property
    def encoder(self) -> Encoder | None:
        if self._encoder is None and self.classifier.encoder is not None:
            from ratchet.models.embedding import SentenceEncoder

            try:
                self._encoder = SentenceEncoder.pulled(self.classifier.encoder)
            except RatchetError as exc:
                if self.fallback is None or self.fallback.encoder is not None:
                    raise
                log.warning("judging with the lexical cues alone: %s", exc)
                self.classifier, self.name = self.fallback, "classifier:cues"
        return self._encoder

    def proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities of people's messages, one row per text."""
        encoder = self.encoder  # may switch to the fallback
        return self.classifier.proba(features(encoder, texts, self.classifier.cue_scale))

    def vote(self, next_state: str) -> int:
        text = (next_state or "").strip()
        if not text or text == SESSION_ENDED:
            return 0
        if is_tool_output(text):
            return tool_vote(text[len(TOOL_PREFIX):])
        return verdict(self.proba([text])[0], self.min_confidence)

    def judge(self, turn: Turn, next_state: str) -> Judgement:
        if not isinstance(next_state, str):
            raise TypeError(f"turn {turn.turn_id}: the next state must be text, not {type(next_state).__name__}")
        vote = self.vote(next_state)
        hint = correction_hint(next_state, "instruction", self.hint_chars) if self.hints and vote < 0 else None
        return Judgement(turn.turn_id, vote, [vote], hint, next_state, self.name)
