"""Explicit feedback on a reply: ``POST /v1/feedback`` with the reply's id as the receipt.

A client (a thumbs-up button, an agent's own test run) sends ``{"id": <the reply's id>,
"score": -1..1, "text": "..."}``; the id is the ``id`` of a chat completion (``chatcmpl-...``), of
an Anthropic message (``msg_...``), or the bare turn id (``X-Turn-Id``). The feedback becomes a
judged turn on the one path judged turns take (the queue's judgements, read by the trainer):

* a ``score`` is the reward: its sign (+1, 0, -1) is the turn's reward, recorded at once as a
  judgement by ``feedback``; a ``text`` sent with it is the hint for on-policy distillation;
* a ``text`` alone is the turn's next state, which the judging loop reads as it reads a user's
  next message (and may turn into a reward and a hint).

One feedback per reply: a second gets 409 ``feedback_exists``. A text alone for a reply whose
conversation already went on (its next state is set) gets 409 ``already_followed`` — send a score,
which replaces the judgement made from what followed. A score is an explicit judgement: a judge
that was reading the turn when it came never overwrites it (the queue ranks judgements by their
``source``, :data:`~ratchet.online.records.JUDGEMENT_PRIORITY`).

Receipts are the replies this serving process produced (the last ``max_receipts``, in memory) and,
beyond those, every turn in the queue: a reply served before a restart or long ago is looked up
there by its id, and its feedback counts as given when the queue holds an explicit judgement for
it. An id in neither is a 404. Side turns are never trained on (409 ``side_turn``); a server with
learning off takes no feedback (409 ``not_learning``).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, model_validator

from ratchet.online.api import error_body, validation_error
from ratchet.online.records import Judgement

if TYPE_CHECKING:
    from ratchet.online.server import ServingState

RECEIPT_PREFIXES = ("chatcmpl-", "msg_")


class FeedbackRequest(BaseModel):
    """The body of ``POST /v1/feedback``."""

    model_config = ConfigDict(extra="forbid")  # a misspelt "scroe" must not pass as no score

    id: Annotated[str, Field(strict=True, min_length=1)]
    #: -1 (bad) .. 1 (good); 0 says neither (the turn is then trained on only through ``text``).
    score: Annotated[float, Field(strict=True, ge=-1.0, le=1.0)] | None = None
    text: Annotated[StrictStr, Field(min_length=1, max_length=20_000)] | None = None

    @model_validator(mode="after")
    def _something(self) -> FeedbackRequest:
        if self.score is None and (self.text is None or not self.text.strip()):
            raise ValueError("send a 'score' (-1..1), a 'text', or both")
        return self

    def turn_id(self) -> str:
        for prefix in RECEIPT_PREFIXES:
            if self.id.startswith(prefix):
                return self.id[len(prefix):]
        return self.id


#: Looks a turn up where it is stored: (turn type, explicit feedback recorded) or None when unknown.
ReceiptLookup = Callable[[str], tuple[str, bool] | None]


class Receipts:
    """The replies this process served (bounded, oldest forgotten) and which got feedback.

    ``lookup`` (the queue's :meth:`~ratchet.online.queue.TurnQueue.feedback_receipt`) answers for
    ids not in memory: replies served before a restart, or pushed out by ``max_receipts`` newer ones.
    """

    def __init__(self, max_receipts: int = 100_000, lookup: ReceiptLookup | None = None) -> None:
        self.max_receipts = max_receipts
        self.lookup = lookup
        self._turns: OrderedDict[str, tuple[str, bool]] = OrderedDict()  # turn id -> (turn type, feedback given)
        self._lock = threading.Lock()

    def served(self, turn_id: str, turn_type: str) -> None:
        with self._lock:
            self._remember(turn_id, (turn_type, False))

    def _remember(self, turn_id: str, receipt: tuple[str, bool]) -> None:
        self._turns[turn_id] = receipt
        while len(self._turns) > self.max_receipts:
            self._turns.popitem(last=False)

    def claim(self, turn_id: str) -> str:
        """Mark the turn's feedback given; returns "ok", "unknown", "given" or "side".

        May read the queue (``lookup``), so an async caller runs it off the event loop."""
        with self._lock:
            known = turn_id in self._turns
        stored = None if known or self.lookup is None else self.lookup(turn_id)
        with self._lock:
            if turn_id not in self._turns and stored is not None:
                self._remember(turn_id, stored)
            found = self._turns.get(turn_id)
            if found is None:
                return "unknown"
            turn_type, given = found
            if turn_type != "main":
                return "side"
            if given:
                return "given"
            self._turns[turn_id] = (turn_type, True)
            return "ok"

    def release(self, turn_id: str) -> None:
        """Feedback that could not be recorded does not count as given."""
        with self._lock:
            if turn_id in self._turns:
                self._turns[turn_id] = (self._turns[turn_id][0], False)


def _sign(score: float) -> int:
    return (score > 0) - (score < 0)


async def record_feedback(state: ServingState, raw: Any) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) for one feedback request body ``raw`` (parsed JSON)."""
    if not isinstance(raw, dict):
        return 400, error_body("the body must be a JSON object", "invalid_json")
    try:
        req = FeedbackRequest.model_validate(raw)
    except ValidationError as exc:
        return 400, validation_error(exc)
    if not state.learn or state.collector is None:
        return 409, error_body("this server does not learn (serve with --learn), so it takes no feedback",
                               "not_learning", "id")
    turn_id = req.turn_id()
    claim = await asyncio.to_thread(state.receipts.claim, turn_id)
    if claim == "unknown":
        return 404, error_body(f"no reply with id {json.dumps(req.id)} was served here (send the 'id' of a reply "
                               "this server gave)", "unknown_reply", "id")
    if claim == "given":
        return 409, error_body(f"the reply {req.id} already has feedback; one feedback per reply",
                               "feedback_exists", "id")
    if claim == "side":
        return 409, error_body(f"the reply {req.id} is a side turn, which is never trained on",
                               "side_turn", "id")
    text = req.text.strip() if req.text else None
    if req.score is not None:
        reward = _sign(req.score)
        state.collector.add_judgement(Judgement(
            turn_id=turn_id, reward=reward, votes=[reward], hint=text,
            next_state=text or f"(explicit feedback: score {req.score:+.2f})", judge="feedback",
            source="feedback"))
        return 200, {"id": req.id, "turn_id": turn_id, "recorded": "reward", "reward": reward, "hint": text}
    applied = await asyncio.wrap_future(state.collector.set_next_state(turn_id, text or "", wait=True))
    if not applied:
        state.receipts.release(turn_id)
        return 409, error_body(f"the reply {req.id} already has what followed it (the conversation went on); "
                               "send a 'score' to judge it directly", "already_followed", "id")
    return 200, {"id": req.id, "turn_id": turn_id, "recorded": "next_state", "reward": None, "hint": None}
