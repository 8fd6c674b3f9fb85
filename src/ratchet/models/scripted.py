"""A deterministic fake model for tests and plumbing: no weights, no network."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ratchet.contracts import Completion, Message, RatchetError, Usage
from ratchet.models.request import estimate_tokens, generation_params, last_user_message, prompt_text

Responder = Callable[[Sequence[Message]], str]


class ScriptedModel:
    """Answers from a list of responses (in order) or from ``responder(messages) -> str``.

    With neither, it echoes the last user message, which is enough to test plumbing. Token counts
    are estimated (4 characters a token). Every request is kept in ``calls`` (messages + params) so
    tests can assert what was asked. A grammar is accepted and recorded but not enforced: the
    script decides the text. Running out of scripted responses is an error, not a silent repeat,
    unless ``cycle=True``.
    """

    def __init__(
        self,
        responses: Sequence[str] | Responder | None = None,
        *,
        name: str = "scripted",
        cycle: bool = False,
    ) -> None:
        self.name = name
        self._responder: Responder | None = responses if callable(responses) else None
        self._responses = list(responses) if responses is not None and not callable(responses) else None
        self._cycle = cycle
        self._index = 0
        self._lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []

    def _next_text(self, messages: Sequence[Message]) -> str:
        if self._responder is not None:
            return self._responder(messages)
        if self._responses is None:
            return last_user_message(messages)
        with self._lock:
            if self._index >= len(self._responses):
                if not self._cycle or not self._responses:
                    raise RatchetError(
                        f"scripted model {self.name!r} ran out of responses after {self._index} calls",
                        hint="give it more responses, a callable, or cycle=True",
                    )
                self._index = 0
            text = self._responses[self._index]
            self._index += 1
        return text

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
        start = time.perf_counter()
        params = generation_params(temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed,
                                   logprobs=logprobs, grammar=grammar)
        with self._lock:
            self.calls.append({"messages": [dict(m) for m in messages], "params": params})
        text = self._next_text(messages)
        finish = "stop"
        for marker in stop or ():
            if marker and marker in text:
                text = text[: text.index(marker)]
        if estimate_tokens(text) > max_tokens:
            text, finish = text[: max_tokens * 4], "length"
        usage = Usage(estimate_tokens(prompt_text(messages)), estimate_tokens(text))
        return Completion(text, usage, time.perf_counter() - start, self.name, finish, None)

    async def acomplete(self, messages: Sequence[Message], **kwargs: Any) -> Completion:
        await asyncio.sleep(0)
        return self.complete(messages, **kwargs)
