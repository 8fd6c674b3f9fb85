"""A label model's reading of whether a tool call succeeded, and the rules' verdict checked against it.

The rules (:mod:`ratchet.online.judge.tools`) read what a tool states; a failure stated in no form
they know ("is not mergeable", ``NXDOMAIN``) they read as a success. The stacked judge has a label
model loaded already (:mod:`ratchet.online.judge.labels`); asked "success or failure" about the call
and its output, the log-probabilities of the two words after one prompt evaluation are its reading,
and :class:`ModelCheckedToolReader` keeps the rules' verdict only where that reading does not say
the opposite. The model alone is not trusted with a sign (``bench/results/tool_reader.md``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ratchet.online.judge.tools import ToolReader, ToolReading

#: What the label model is told: written from what success and failure mean, not from any set.
OUTCOME_SYSTEM = (
    "You read the output of a command or tool call an assistant made, and say whether the call succeeded.\n"
    "success: it ran and did what was asked; warnings alone are fine, and words like 'error' inside file "
    "names, data or logs it was asked to show do not count.\n"
    "failure: it did not: an error, a failing test or check, a crash, a refused or denied request, a missing "
    "file, command or package, a non-zero exit status, output cut off before it finished.\n"
    "Reply with one word: success or failure."
)
#: The two words, in the order of :meth:`OutcomeReader.logprobs`.
OUTCOME_WORDS = ("success", "failure")
#: How much of the call and of the output the model reads: the call's start, the output's end
#: (where runners and shells print their verdict).
CALL_CHARS, OUTPUT_CHARS = 300, 1500


def outcome_messages(call: str, output: str) -> list[dict[str, str]]:
    """The chat the label model reads for one tool output."""
    out = output if len(output) <= OUTPUT_CHARS else "[...]" + output[-OUTPUT_CHARS:]
    user = f"The call: \"{(call or '')[:CALL_CHARS]}\"\n\nIts output:\n{out}"
    return [{"role": "system", "content": OUTCOME_SYSTEM}, {"role": "user", "content": user}]


def outcome_digest() -> str:
    """What identifies the prompt the cached log-probabilities were read with."""
    text = OUTCOME_SYSTEM + "\x00" + outcome_messages("{call}", "{output}")[1]["content"] + repr(OUTCOME_WORDS)
    return hashlib.sha256(f"{text}{CALL_CHARS}/{OUTPUT_CHARS}".encode()).hexdigest()[:16]


class OutcomeReader(Protocol):
    """Log-probabilities of "success" and "failure" for a tool output (in :data:`OUTCOME_WORDS` order)."""

    name: str

    def logprobs(self, call: str, output: str) -> np.ndarray: ...


class LlamaOutcomeReader:
    """:class:`OutcomeReader` over the label model of :class:`~ratchet.online.judge.labels.LlamaLabelReader`:
    one prompt evaluation, nothing generated; given that reader, its loaded model is shared."""

    def __init__(self, model: Any = "qwen2.5-coder-1.5b", *, threads: int = 1) -> None:
        from ratchet.online.judge.labels import LlamaLabelReader

        self.labels = model if isinstance(model, LlamaLabelReader) else LlamaLabelReader(model, threads=threads)
        self.name = self.labels.name
        self._ids: list[int] = []

    def logprobs(self, call: str, output: str) -> np.ndarray:
        from ratchet.online.policy import RequestRefused

        policy = self.labels.policy()
        if not self._ids:
            ids = [policy.first_token(w) for w in OUTCOME_WORDS]
            if len(set(ids)) != len(ids):
                raise ValueError(f"'success' and 'failure' share a first token in {self.name}'s vocabulary")
            self._ids = ids
        try:
            lp = policy.next_token_logprobs(outcome_messages(call, output), self._ids)
        except RequestRefused:  # past the context (rare): read less of the output
            lp = policy.next_token_logprobs(outcome_messages(call[:100], output[-OUTPUT_CHARS // 3:]), self._ids)
        return np.asarray(lp, dtype=np.float64)


class CachedOutcomeReader:
    """An :class:`OutcomeReader` that files each reading in a JSON-lines cache as it is made and reads it
    back, so a bench or a sweep reads each output once (the model takes seconds a row on a CPU)."""

    def __init__(self, reader: OutcomeReader, path: Path) -> None:
        self.reader, self.name, self.path = reader, reader.name, Path(path)
        self.rows: dict[str, list[float]] = {}
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.rows[row["key"]] = row["logprobs"]

    def key(self, call: str, output: str) -> str:
        text = "\x00".join([self.name, outcome_digest(), (call or "")[:CALL_CHARS], output])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]

    def logprobs(self, call: str, output: str) -> np.ndarray:
        key = self.key(call, output)
        if key not in self.rows:
            lp = [round(float(v), 5) for v in self.reader.logprobs(call, output)]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"key": key, "logprobs": lp}) + "\n")
            self.rows[key] = lp
        return np.array(self.rows[key], dtype=np.float64)


class ModelCheckedToolReader:
    """The rules' verdict where a label model does not read the opposite; 0 where it does.

    The model's reading is ``log p(success) - log p(failure)``; it says +1 above ``margin``, -1
    below ``-margin`` and nothing in between. A rules verdict the model contradicts is 0 (a sign
    error costs more than a lost sample); a rules 0 stays 0 (the model alone is not trusted to give
    a sign); when the rules and the model agree, or the model is unsure, the rules' verdict stands —
    except a +1 read from no fact at all. That +1 is only the absence of every failure form the
    rules know, and a failure in a form they do not know ("would reformat", ``NXDOMAIN``, "is already
    taken") lands there: it stands only where the model reads a success by ``affirm``, else 0.
    """

    #: log-probability gap the model must reach to read a call as a success or a failure
    MARGIN = 2.0
    #: the gap toward success a fact-less output needs to keep its +1. On the development sets' 148
    #: tool outputs in which the rules found no fact (138 successes, 10 failures), a gap above 1 was
    #: reached by 109 successes and no failure; above 0 by 122 and 2 (bench/results/tool_reader.md).
    AFFIRM = 1.0

    def __init__(self, rules: ToolReader, model: OutcomeReader, *, margin: float = MARGIN,
                 affirm: float | None = AFFIRM) -> None:
        self.rules, self.model, self.margin, self.affirm = rules, model, margin, affirm
        self.name = f"{rules.name}+{model.name}"

    def gap(self, call: str, output: str) -> float:
        lp = self.model.logprobs(call, output)
        return float(lp[0] - lp[1])

    def model_vote(self, call: str, output: str) -> int:
        gap = self.gap(call, output)
        return 1 if gap > self.margin else -1 if gap < -self.margin else 0

    def read(self, output: str, call: str = "") -> ToolReading:
        reading = self.rules.read(output, call)
        if reading.vote == 0:
            return reading
        if reading.vote > 0 and not reading.facts and self.affirm is not None:
            if self.gap(call, output) > self.affirm:
                return reading
            return ToolReading(0, reading.facts, reading.loose, f"{reading.why}; the label model does not affirm a success")
        seen = self.model_vote(call, output)
        if seen and seen != reading.vote:
            return ToolReading(0, reading.facts, reading.loose, f"{reading.why}; the label model reads the opposite")
        return reading
