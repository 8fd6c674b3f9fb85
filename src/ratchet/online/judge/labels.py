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

The model sees what the person had asked, the answer's start and their next message, after the
label definitions and worked examples answered as earlier turns (a small model follows shown
verdicts better than described ones). The prompt is fixed (:data:`SYSTEM`, :data:`EXAMPLES`,
:func:`messages`) and its digest is recorded with the fitted weights: weights fitted on one
prompt's log-probabilities are refused for another's.
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

#: What the model is told. Written from the label definitions, not from any feedback set. It names
#: the kinds a first prompt (definitions only, no request, no examples) read with the wrong sign on
#: the development sets — a result reported as praise, praise before a next request, a denied fault —
#: by what they are, not by any row's words.
SYSTEM = (
    "You read one message a person wrote right after an assistant answered them, and say how the person "
    "took that answer. Judge the person's attitude to the answer, not the topic or the words they quote.\n"
    "praise: they are pleased with it: thanks, approval, or they report that it worked or what it achieved "
    "(it ran, it is faster, someone liked it), in any language, even if they then ask for the next thing or "
    "add a small extra request. Denying a fault (\"no complaints\", \"not bad at all\") is praise.\n"
    "correction: they are not satisfied: they point out a mistake or a failure, complain, ask for the answer "
    "to be changed or redone (shorter, another format, language, tone or name, something it missed), ask a "
    "question that implies it is wrong, thank it but want it different, or praise it sarcastically. Denying "
    "praise (\"not helpful\", \"not great\") is a correction.\n"
    "neutral: neither: they move on to a new question or task without judging the answer, answer a question "
    "the assistant asked, give a status (\"one sec\"), or ask to clarify.\n"
    "Reply with one word: praise, correction or neutral."
)
#: Worked examples shown as earlier turns of the chat (request, answer's start, message, label): a
#: small model follows shown verdicts far better than described ones. Written for this prompt in
#: words of their own, not taken from any feedback set; their prefix is evaluated once and cached.
EXAMPLES = (
    ("rename all my .jpeg files to .jpg", "Here is a bash loop that renames every .jpeg file to .jpg ...",
     "ran it on 3k photos, done in a second. next: same but lowercase the names?", "praise"),
    ("what's the capital of Australia?", "The capital of Australia is Sydney.", "isn't it Canberra though?",
     "correction"),
    ("write a short formal email to my landlord about the heating",
     "Dear Mr. Lopez, I hope this message finds you well. I am writing to ...",
     "how do you say 'I hope you are well' in Portuguese?", "neutral"),
    ("where does the fork come from?",
     "Sure! Here is a detailed, step-by-step overview of the history of the fork, in twelve parts ...",
     "wow, twelve parts. I only wanted one line.", "correction"),
    ("68 F in celsius?", "To convert the temperature: 68°F is 20°C.", "merci, parfait 👌", "praise"),
    ("sql to get users older than 30", "Here's the SQL: SELECT name FROM users WHERE age > 30;",
     "ok. and how would I count them per city?", "neutral"),
    ("Kannst du meinen Absatz kürzer machen?", "I'd cut the second paragraph and lead with the result.",
     "danke, aber bitte auf Deutsch", "correction"),
    ("my loss is stuck at 2.3, any idea?", "Try lowering the learning rate to 3e-4 and warming up for 500 steps.",
     "can't complain, loss finally goes down", "praise"),
)
#: The label words, in :data:`CLASSES` order (correction, praise, neutral).
WORDS = {"correction": "correction", "praise": "praise", "neutral": "neutral"}
#: How much of the assistant's answer the model sees: enough to know what was answered, cheap to read.
REPLY_CHARS = 300
#: How much of the person's request the model sees: "I only wanted one line" is a correction of an
#: answer to a question, and what was asked is often what the verdict is about. Reading it lifted the
#: model's calibrated agreement with the labels from 0.86 to 0.90 on 400 development rows
#: (bench/results/online_judge.md, "test7: the label model reads the request and worked examples").
REQUEST_CHARS = 200
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def _shown(request: str, reply: str, message: str) -> str:
    return (f"The person had asked: \"{(request or '')[:REQUEST_CHARS]}\"\n"
            f"The assistant's answer began: \"{(reply or '')[:REPLY_CHARS]}\"\n\n"
            f"The person's next message: \"{message}\"")


def messages(reply: str, message: str, request: str = "") -> list[dict[str, str]]:
    """The chat the model reads: the fixed system prompt and worked examples, then the person's
    request, the answer's start and their next message."""
    chat = [{"role": "system", "content": SYSTEM}]
    for asked, answer, said, label in EXAMPLES:
        chat += [{"role": "user", "content": _shown(asked, answer, said)}, {"role": "assistant", "content": WORDS[label]}]
    return chat + [{"role": "user", "content": _shown(request, reply, message)}]


#: The messages every reading starts with (the system prompt and the examples' turns): their model
#: state is kept, so reading a tool output on the same model in between costs nothing on return.
FIXED = 1 + 2 * len(EXAMPLES)


def last_request(chat: Sequence[dict]) -> str:
    """The text of the last message a person (role ``user``) sent in ``chat``: what a reply answered."""
    for message in reversed(chat):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # OpenAI content parts: their text
                return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            return ""
    return ""


def prompt_digest() -> str:
    """What identifies the prompt the log-probabilities were read with."""
    text = "\x00".join(json.dumps(m, ensure_ascii=False) for m in messages("{reply}", "{message}", "{request}"))
    text += "\x00" + repr(WORDS) + str(REPLY_CHARS) + str(REQUEST_CHARS)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class LabelReader(Protocol):
    """Log-probabilities of the three labels for a message, in :data:`CLASSES` order."""

    name: str

    def logprobs(self, reply: str, message: str, request: str = "") -> np.ndarray:
        """``request``: what the person had asked that ``reply`` answered (empty when unknown)."""
        ...


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

    def logprobs(self, reply: str, message: str, request: str = "") -> np.ndarray:
        from ratchet.online.policy import RequestRefused

        policy = self._load()
        try:
            lp = policy.next_token_logprobs(messages(reply, message, request), self._ids, fixed=FIXED)
        except RequestRefused:  # a message past the context (rare): read its end
            lp = policy.next_token_logprobs(messages(reply, message[-self.n_ctx:], request), self._ids, fixed=FIXED)
        return np.asarray(lp, dtype=np.float64)

    def close(self) -> None:
        if self._policy is not None:
            self._policy.close()
            self._policy = None


def read_all(reader: LabelReader, triples: Sequence[tuple[str, str, str]]) -> np.ndarray:
    """One row of label log-probabilities per (reply, message, request)."""
    return np.array([reader.logprobs(reply, message, request) for reply, message, request in triples],
                    dtype=np.float64).reshape(-1, len(CLASSES))


def cache_key(model: str, reply: str, message: str, request: str = "") -> str:
    """What a cached reading is filed under: the model, the prompt and exactly what it read."""
    text = "\x00".join([model, prompt_digest(), (reply or "")[:REPLY_CHARS], message])
    if request:  # an unknown request (empty) adds nothing to the key
        text += "\x00" + request[:REQUEST_CHARS]
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

    def logprobs(self, reply: str, message: str, request: str = "") -> np.ndarray:
        key = cache_key(self.name, reply, message, request)
        if key not in self.rows:
            start = time.perf_counter()
            lp = self.reader.logprobs(reply, message, request)
            row = {"key": key, "logprobs": [round(float(v), 5) for v in lp], "s": round(time.perf_counter() - start, 3)}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            self.rows[key] = row
        return np.array(self.rows[key]["logprobs"], dtype=np.float64)

    def seconds(self, triples: Sequence[tuple[str, str, str]]) -> list[float]:
        """The seconds the model took for each (reply, message, request) when it was read (cached ones only)."""
        keys = (cache_key(self.name, r, m, q) for r, m, q in triples)
        return [self.rows[k]["s"] for k in keys if k in self.rows]
