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

    def __post_init__(self) -> None:
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
    """

    turn_id: str
    reward: int
    votes: list[int]
    hint: str | None
    next_state: str
    judge: str

    def __post_init__(self) -> None:
        if self.reward not in (-1, 0, 1):
            raise ValueError(f"judgement for {self.turn_id}: reward must be -1, 0 or +1, not {self.reward!r}")

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["format_version"] = FORMAT_VERSION
        return record

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Judgement:
        data = {k: v for k, v in data.items() if k != "format_version"}
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
