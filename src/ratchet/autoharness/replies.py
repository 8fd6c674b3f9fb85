"""Refiner replies made durable the moment they arrive, so a resumed search asks nothing twice.

The search checkpoints after every node, so a process killed inside an iteration loses the
replies that iteration had already received; asking again wastes the calls and, with a
non-deterministic endpoint, changes the run. Each reply is therefore appended to
``autoharness/replies.jsonl`` in the run (one fsynced line, see ``ratchet.store.files``) before
the search looks at it, with the index of the call and a hash of the exact request: model name,
messages and generation parameters.

On resume the search hands :meth:`ReplyJournal.resume` the call count of its checkpoint; the
replies recorded from that call on belong to the interrupted iteration and are given back, each
once, to the request that matches them exactly. A killed-and-resumed run thus makes the model
calls an uninterrupted run makes (only a call cut off before its reply arrived is made again)
and sees the same replies. Replies recorded before the checkpoint are never replayed: the
checkpoint already holds what came of them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ratchet.contracts import Message, Model
from ratchet.evolve.cache import request_key  # the engine's journal keys requests the same way

REPLIES = "autoharness/replies.jsonl"


class ReplyLog(Protocol):
    """The part of the run store the journal needs (``ratchet.store.Run``)."""

    def append_jsonl(self, relpath: str, record: dict[str, Any]) -> Any: ...
    def read_jsonl(self, relpath: str) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Reply:
    """What the search keeps of one completion."""

    text: str
    prompt_tokens: int
    completion_tokens: int

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ReplyJournal:
    """Records every reply as it arrives and replays those of an interrupted iteration."""

    def __init__(self, run: ReplyLog) -> None:
        self.run = run
        self._pending: dict[str, deque[Reply]] = {}
        self.replayed = 0

    def resume(self, calls: int) -> int:
        """Make the replies recorded at call index ``calls`` or later available for replay;
        returns how many there are."""
        self._pending = {}
        count = 0
        for record in self.run.read_jsonl(REPLIES):
            if record.get("call", -1) >= calls:
                reply = Reply(record["text"], int(record["prompt_tokens"]), int(record["completion_tokens"]))
                self._pending.setdefault(record["key"], deque()).append(reply)
                count += 1
        return count

    def complete(self, model: Model, messages: Sequence[Message], call: int, **params: Any) -> Reply:
        """The reply to this request: a recorded one not yet replayed, else a fresh call to
        ``model`` whose reply is on disk before this returns. ``call`` is the index of the call
        in the run (the search's call count before it)."""
        name = getattr(model, "name", "")
        key = request_key(name, messages, params)
        queue = self._pending.get(key)
        if queue:
            self.replayed += 1
            return queue.popleft()
        completion = model.complete(messages, **params)
        # A backend can pass undecodable bytes through as lone surrogates; they are not text (no
        # parser, store or prompt takes them), so they become "?" here, once, for every reader.
        text = completion.text.encode("utf-8", errors="replace").decode("utf-8")
        reply = Reply(text, completion.usage.prompt_tokens, completion.usage.completion_tokens)
        self.run.append_jsonl(REPLIES, {"call": call, "key": key, "model": name, "text": reply.text,
                                        "prompt_tokens": reply.prompt_tokens,
                                        "completion_tokens": reply.completion_tokens, "recorded_at": time.time()})
        return reply


__all__ = ["REPLIES", "Reply", "ReplyJournal", "ReplyLog", "request_key"]
