"""The records the four learning-from-use loops hand one another.

A :class:`Turn` is written by the serving loop (rollout collection), a :class:`Judgement` by the
judging loop, and the training loop consumes :class:`Sample` pairs of the two. They are frozen so a
record read back from the queue cannot be changed in place, and they round-trip through JSON with
``to_dict`` / ``from_dict`` (the queue stores them as JSON text).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ratchet.contracts import FORMAT_VERSION

TurnType = Literal["main", "side"]
#: Who made a judgement: the judging loop reading what followed, or the client's explicit feedback.
JudgementSource = Literal["judge", "feedback"]
#: A judgement never replaces one of a higher priority: explicit feedback outranks the judge.
JUDGEMENT_PRIORITY: dict[str, int] = {"judge": 0, "feedback": 1}
#: Why generation stopped, as OpenAI reports it; None on turns recorded before it was kept.
FinishReason = Literal["stop", "length", "tool_calls"]


def new_turn_id() -> str:
    """A fresh, sortable-enough unique id for a turn."""
    return f"t{int(time.time() * 1000):x}-{uuid.uuid4().hex[:10]}"


def holds_out(session_id: str, share: float) -> bool:
    """Whether the conversation ``session_id`` belongs to the held-out share of judged turns.

    A stable hash of the id (SHA-256, the same in every process and run), so a whole conversation
    falls on one side: the gate never scores a reply whose conversation taught the candidate.
    """
    if share <= 0:
        return False
    point = int(hashlib.sha256(session_id.encode()).hexdigest()[:15], 16) / 16 ** 15
    return point < share


@dataclass(frozen=True)
class Turn:
    """One served request and its response, as collected for training.

    ``response_logprobs`` holds one log-probability per response token, computed from the RAW
    logits of the policy that served it (not temperature-adjusted), so the trainer can form an
    importance ratio against the serving policy. ``policy_version`` is the version of the weights
    that produced the response (0 = the base model with no adapter). ``session_inferred`` is true
    when the client sent no session id and the server matched the conversation prefix instead.

    ``finish_reason`` says whether the reply ended on its own (``stop``: an end-of-turn token or a
    client's stop string; ``tool_calls``: it ended after its calls) or was cut at the token limit
    (``length``); ``tools`` are the OpenAI ``tools`` entries the chat template rendered into the
    prompt (empty when none were offered or ``tool_choice`` was ``none``). Together they let a
    scorer rebuild what was served: ``prompt_token_ids`` include the tools, and a reply that
    stopped ends with an end-of-turn token ``response_token_ids`` leave out. Turns recorded before
    these were kept load with ``finish_reason=None`` and no tools.
    """

    turn_id: str
    session_id: str
    session_inferred: bool
    turn_type: TurnType
    messages: list[dict[str, Any]]
    response_text: str
    prompt_token_ids: list[int]
    response_token_ids: list[int]
    response_logprobs: list[float]
    policy_version: int
    created_at: float = field(default_factory=time.time)
    finish_reason: FinishReason | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        """Whether the reply stopped on its own (so its end-of-turn token belongs to it); False when
        it was cut at the limit or the turn predates ``finish_reason``."""
        return self.finish_reason in ("stop", "tool_calls")

    def __post_init__(self) -> None:
        if self.finish_reason not in (None, "stop", "length", "tool_calls"):
            raise ValueError(f"turn {self.turn_id}: finish_reason must be 'stop', 'length' or 'tool_calls', "
                             f"not {self.finish_reason!r}")
        if len(self.response_token_ids) != len(self.response_logprobs):
            raise ValueError(
                f"turn {self.turn_id}: {len(self.response_token_ids)} response tokens but "
                f"{len(self.response_logprobs)} log-probs; there must be exactly one per token"
            )
        if self.turn_type not in ("main", "side"):
            raise ValueError(f"turn {self.turn_id}: turn_type must be 'main' or 'side', not {self.turn_type!r}")

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["format_version"] = FORMAT_VERSION
        return record

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        data = {k: v for k, v in data.items() if k != "format_version"}
        return cls(**data)


@dataclass(frozen=True)
class Judgement:
    """The judge's verdict on one turn, read from the turn's next state.

    ``reward`` is the majority of the parseable ``votes`` (+1 / -1), 0 on a tie or when nothing
    parsed; 0 means "exclude from Binary RL". ``hint`` is the hindsight hint for on-policy
    distillation (None when the judge gave none). ``judge`` names the judge that produced it.
    ``source`` says who decided: the judging loop (``judge``) or the client's explicit feedback
    (``feedback``), which the queue never lets a judge's later verdict replace
    (:data:`JUDGEMENT_PRIORITY`).
    """

    turn_id: str
    reward: int
    votes: list[int]
    hint: str | None
    next_state: str
    judge: str
    source: JudgementSource = "judge"

    @property
    def priority(self) -> int:
        return JUDGEMENT_PRIORITY[self.source]

    def __post_init__(self) -> None:
        if self.source not in JUDGEMENT_PRIORITY:
            raise ValueError(f"judgement for {self.turn_id}: source must be one of {sorted(JUDGEMENT_PRIORITY)}, "
                             f"not {self.source!r}")
        if self.reward not in (-1, 0, 1):
            raise ValueError(f"judgement for {self.turn_id}: reward must be -1, 0 or +1, not {self.reward!r}")

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["format_version"] = FORMAT_VERSION
        return record

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Judgement:
        data = {k: v for k, v in data.items() if k != "format_version"}
        if "source" not in data:  # written before judgements named their source: feedback signed itself
            data["source"] = "feedback" if data.get("judge") == "feedback" else "judge"
        return cls(**data)


@dataclass(frozen=True)
class Sample:
    """What the trainer consumes: a judged turn."""

    turn: Turn
    judgement: Judgement

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn.to_dict(), "judgement": self.judgement.to_dict(), "format_version": FORMAT_VERSION}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sample:
        return cls(turn=Turn.from_dict(data["turn"]), judgement=Judgement.from_dict(data["judgement"]))
