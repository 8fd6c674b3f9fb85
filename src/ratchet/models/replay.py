"""Record/replay cache of model calls: tests and demos that never need the model twice.

The cache is a JSONL file; each line is one recorded call::

    {"format_version": 1, "key": "<sha256>", "model": "...", "request": {...}, "completion": {...}}

``key`` is the sha256 of the canonical request (model name + messages + generation params, see
:func:`ratchet.models.request.request_key`). Lines are appended with a single ``write`` on a file
opened for appending and flushed to disk, so concurrent recorders never interleave and a killed
run leaves at worst one torn last line, which loading skips.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ratchet.contracts import FORMAT_VERSION, Completion, Message, Model, RatchetError
from ratchet.models.request import (canonical_json, completion_from_dict, completion_to_dict, generation_params,
                                    last_user_message, request_key)

ReplayMode = Literal["replay", "record", "auto"]


class ReplayModel:
    """Wraps a model with a record/replay cache.

    Modes: ``replay`` answers only from the cache and raises a loud :class:`RatchetError` (with the
    request key and the head of the last user message) on an unseen request; ``record`` always
    calls the inner model and appends the result; ``auto`` replays what it has and records the
    rest. The key uses ``name`` (the inner model's name by default); with no inner model and no
    name, the name is taken from the cache when it holds a single model.
    """

    def __init__(
        self,
        inner: Model | None,
        path: str | Path,
        *,
        mode: ReplayMode = "auto",
        name: str | None = None,
    ) -> None:
        if mode not in ("replay", "record", "auto"):
            raise RatchetError(f"unknown replay mode {mode!r}", hint="use one of: replay, record, auto")
        if inner is None and mode != "replay":
            raise RatchetError(f"replay mode {mode!r} needs an inner model to call", hint="pass inner=<Model>")
        self.inner = inner
        self.path = Path(path)
        self.mode: ReplayMode = mode
        self._lock = threading.Lock()
        self._entries: dict[str, Completion] = {}
        self._models: set[str] = set()
        self._load()
        self.name = name or (inner.name if inner is not None else self._single_model_name())
        self.hits = 0
        self.misses = 0

    def _load(self) -> None:
        if not self.path.exists():
            if self.mode == "replay":
                raise RatchetError(f"replay cache {self.path} does not exist",
                                   hint="record it first with mode='record' or 'auto'")
            return
        with open(self.path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line from a killed recorder; everything before it stands
                version = record.get("format_version")
                if version != FORMAT_VERSION:
                    raise RatchetError(
                        f"{self.path}:{number} has format_version {version!r}; this Ratchet reads {FORMAT_VERSION}",
                        hint="re-record the cache with this version of Ratchet",
                    )
                self._entries[record["key"]] = completion_from_dict(record["completion"])
                self._models.add(record["model"])

    def _single_model_name(self) -> str:
        if len(self._models) == 1:
            return next(iter(self._models))
        raise RatchetError(
            f"replay cache {self.path} holds {len(self._models)} models ({', '.join(sorted(self._models))}); "
            "cannot tell which one to replay",
            hint="name it: replay:PATH#MODEL",
        )

    def __len__(self) -> int:
        return len(self._entries)

    def _lookup(self, messages: Sequence[Message], params: dict[str, Any]) -> tuple[str, Completion | None]:
        key = request_key(self.name, messages, params)
        if self.mode == "record":
            return key, None
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None:
            self.hits += 1
            return key, hit
        if self.mode == "replay":
            head = last_user_message(messages)[:200]
            raise RatchetError(
                f"replay cache {self.path} has no entry for request {key} (model {self.name!r}, "
                f"{len(self._entries)} entries); last user message begins: {head!r}",
                hint="the prompt or generation params changed; re-record with mode='record' or 'auto'",
            )
        self.misses += 1
        return key, None

    def _store(self, key: str, messages: Sequence[Message], params: dict[str, Any], completion: Completion) -> None:
        record = {
            "format_version": FORMAT_VERSION,
            "key": key,
            "model": self.name,
            "request": {"messages": [dict(m) for m in messages], "params": params},
            "completion": completion_to_dict(completion),
        }
        line = (canonical_json(record) + "\n").encode()
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._entries[key] = completion

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        grammar: str | None = None,
    ) -> Completion:
        params = generation_params(temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed,
                                   logprobs=logprobs, grammar=grammar)
        key, hit = self._lookup(messages, params)
        if hit is not None:
            return hit
        assert self.inner is not None  # replay mode raised in _lookup
        completion = self.inner.complete(messages, temperature=temperature, max_tokens=max_tokens, stop=stop,
                                         seed=seed, logprobs=logprobs, grammar=grammar)
        self._store(key, messages, params, completion)
        return completion

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        grammar: str | None = None,
    ) -> Completion:
        params = generation_params(temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed,
                                   logprobs=logprobs, grammar=grammar)
        key, hit = self._lookup(messages, params)
        if hit is not None:
            return hit
        assert self.inner is not None
        completion = await self.inner.acomplete(messages, temperature=temperature, max_tokens=max_tokens,
                                                stop=stop, seed=seed, logprobs=logprobs, grammar=grammar)
        await asyncio.to_thread(self._store, key, messages, params, completion)
        return completion
