"""A scripted model that says its context window (``ratchet.contracts.ContextWindow``), for the
tests of requests fitted to a window."""

from __future__ import annotations

from ratchet.models.scripted import ScriptedModel


class SmallWindow(ScriptedModel):
    """A scripted model with a context window, counting 4 characters a token."""

    def __init__(self, responses, context_tokens: int) -> None:
        super().__init__(responses, cycle=True)
        self.context_tokens = context_tokens

    def count_tokens(self, messages) -> int:
        return sum(len(str(m.get("content", ""))) // 4 + 8 for m in messages)
