"""A journal of model replies in the run store: nothing a model said is paid for twice.

:class:`JournaledModel` is a ``Model`` that records each reply (fsynced) before handing it back,
keyed by a hash of the exact request. A caller checkpoints the journal's call count; on resume,
replies recorded from that count on (the interrupted step's) are given back, each once, to the
request that matches them, so the resumed work makes the calls an uninterrupted one makes and sees
the same replies. The engine journals its model and its proposers' model with it, the AutoHarness
search its refiner, each in its own file of the run.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from ratchet.contracts import Completion, ComputedElsewhere, Message, Model, Usage

REPLIES = "evolve/replies.jsonl"
"""The journal's file in a run directory unless the caller names one (the engine's model's)."""


def request_key(model_name: str, messages: Sequence[Message], params: dict[str, Any]) -> str:
    """A hash of the exact request: equal only for the same model, messages and parameters."""
    text = json.dumps({"model": model_name, "messages": [dict(m) for m in messages], "params": params},
                      sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class JournaledModel:
    """A ``Model`` whose replies are durable before they are used, and replayed after a kill.

    Wrap the *accounted* model, so a replayed reply is not counted again: it was paid for (and
    logged in the run's model calls) when it first arrived.

    Calls made inside a unit of work (an evaluation: :func:`complete_for`, through
    :class:`ratchet.executors.units.ScopedModel` here or the gateway from another machine) are
    journaled with the unit and their index in it, and the ``index``-th call of a unit is answered
    from the journal whenever it was answered before for the same request: a unit rerun after a
    lost worker or a killed driver pays only for the calls no earlier attempt got. Thread-safe.
    """

    def __init__(self, inner: Model, run: Any, path: str = REPLIES) -> None:
        self.inner = inner
        self.run = run
        self.path = path
        self.name = inner.name
        records = run.read_jsonl(path)
        self.calls = len(records)
        self.replayed = 0
        self._pending: dict[str, deque[dict[str, Any]]] = {}
        self._units = {(r["unit"], r["index"]): r for r in records if r.get("unit") is not None}
        self._lock = threading.Lock()
        self._slots: dict[tuple[str, int], threading.Lock] = {}

    def calls_in(self, units: Collection[str]) -> int:
        """How many replies are journaled inside ``units``: what those evaluations cost in model
        calls, whether they were paid in this process or before a resume."""
        with self._lock:
            return sum(1 for unit, _ in self._units if unit in units)

    def resume(self, calls: int) -> int:
        """Replies recorded outside units at call index ``calls`` or later become replayable;
        returns how many (replies of units are replayable always, by unit)."""
        self._pending = {}
        count = 0
        for record in self.run.read_jsonl(self.path):
            if record["call"] >= calls and record.get("unit") is None:
                self._pending.setdefault(record["key"], deque()).append(record)
                count += 1
        return count

    def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        key = request_key(self.name, messages, params)
        with self._lock:
            queue = self._pending.get(key)
            record = queue.popleft() if queue else None
            if record is not None:
                self.replayed += 1
        if record is not None:
            return self._replay(record)
        completion = self._ask(messages, params)
        self._append(key, completion, {})
        return completion

    def complete_for(self, unit: str | None, index: int, messages: Sequence[Message], *,
                     computed_by: Model | None = None, **params: Any) -> Completion:
        """The ``index``-th call of ``unit``: from the journal when answered before for this request.
        ``computed_by``: a copy of the model elsewhere (a node's model server) that computes a reply
        this journal has not got; it is accounted and journaled here all the same."""
        if unit is None:
            return self.complete(messages, **params)
        key = request_key(self.name, messages, params)
        slot = (unit, index)
        with self._lock:
            slot_lock = self._slots.setdefault(slot, threading.Lock())
        with slot_lock:  # two attempts of one unit asking at once: the second waits and replays
            record = self._units.get(slot)
            if record is not None and record["key"] == key:
                with self._lock:
                    self.replayed += 1
                return self._replay(record)
            completion = self._ask(messages, params, computed_by)
            self._units[slot] = self._append(key, completion, {"unit": unit, "index": index})
        return completion

    def _replay(self, r: dict[str, Any]) -> Completion:
        # Journals written before replies carried a finish reason have none.
        return Completion(r["text"], Usage(r["prompt_tokens"], r["completion_tokens"]), 0.0, self.name, r.get("finish_reason", "stop"))

    def _ask(self, messages: Sequence[Message], params: dict[str, Any],
             computed_by: Model | None = None) -> Completion:
        inner = self.inner
        if computed_by is not None:  # the inner model's accounting (if any) around the copy that computes
            inner = inner.computed_by(computed_by) if isinstance(inner, ComputedElsewhere) else computed_by
        completion = inner.complete(messages, **params)
        # A backend can pass undecodable bytes through as lone surrogates; they are not text (no
        # parser, store or prompt takes them), so they become "?" here, once, for every reader.
        text = completion.text.encode("utf-8", errors="replace").decode("utf-8")
        return completion if text == completion.text else replace(completion, text=text)

    def _append(self, key: str, completion: Completion, where: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            record = {"call": self.calls, "key": key, **where, "text": completion.text,
                      "prompt_tokens": completion.usage.prompt_tokens,
                      "completion_tokens": completion.usage.completion_tokens,
                      "finish_reason": completion.finish_reason, "recorded_at": time.time()}
            self.run.append_jsonl(self.path, record)
            self.calls += 1
        return record

    async def acomplete(self, messages: Sequence[Message], **params: Any) -> Completion:
        # The engine's loop is synchronous; an async caller gets the same journaled path.
        return self.complete(messages, **params)
