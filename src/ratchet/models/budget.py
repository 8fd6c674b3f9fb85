"""Budgets: every LLM call in Ratchet is counted, priced and stopped at a limit.

:class:`AccountedModel` wraps any model; before each call it asks the :class:`Accountant` whether
a limit is reached (raising :class:`ratchet.contracts.BudgetExceeded` if so) and after it records an
:class:`ratchet.contracts.LLMCall`, failed calls included. Calls in flight count against
``max_calls``, so concurrent callers cannot overshoot it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field

from ratchet.config import Settings
from ratchet.contracts import BudgetExceeded, Completion, LLMCall, Message, Model, Usage


class Price(Settings):
    """What one model costs, in US dollars per million tokens."""

    prompt_usd_per_1m: float = 0.0
    """Price of one million prompt (input) tokens."""
    completion_usd_per_1m: float = 0.0
    """Price of one million completion (output) tokens."""


class BudgetConfig(Settings):
    """Limits on a run's model use; every limit is optional (None = unlimited)."""

    max_calls: int | None = Field(default=None, ge=0)
    """Most model calls, failed ones included."""
    max_tokens: int | None = Field(default=None, ge=0)
    """Most tokens, prompt + completion, over all calls."""
    max_wall_s: float | None = Field(default=None, ge=0)
    """Most seconds since the accountant started (wall clock, not model time)."""
    max_usd: float | None = Field(default=None, ge=0)
    """Most dollars, priced with ``prices``; models without a price cost nothing."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """Price per model name: the full name (``openai:gpt-4.1-mini``) or the part after the prefix."""


class Accountant:
    """Thread-safe tally of model calls against a :class:`BudgetConfig`.

    ``on_call`` (e.g. the run store's writer) is called with every recorded :class:`LLMCall`,
    outside the lock, in the recording thread.
    """

    def __init__(self, config: BudgetConfig | None = None,
                 on_call: Callable[[LLMCall], None] | None = None) -> None:
        self.config = config or BudgetConfig()
        self.on_call = on_call
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._calls = 0
        self._failed = 0
        self._in_flight = 0
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._model_s = 0.0
        self._usd = 0.0

    def price(self, model: str, usage: Usage) -> float | None:
        """Dollar cost of ``usage`` on ``model``, or None when the model has no price."""
        table = self.config.prices
        entry = table.get(model) or table.get(model.split(":", 1)[-1]) or table.get(model.rsplit("#", 1)[-1])
        if entry is None:
            return None
        return (usage.prompt_tokens * entry.prompt_usd_per_1m
                + usage.completion_tokens * entry.completion_usd_per_1m) / 1e6

    def _exceeded(self, pending: int) -> tuple[str, float] | None:
        cfg = self.config
        if cfg.max_calls is not None and self._calls + pending >= cfg.max_calls:
            return "max_calls", cfg.max_calls
        if cfg.max_tokens is not None and self._prompt_tokens + self._completion_tokens >= cfg.max_tokens:
            return "max_tokens", cfg.max_tokens
        if cfg.max_wall_s is not None and time.monotonic() - self._started >= cfg.max_wall_s:
            return "max_wall_s", cfg.max_wall_s
        if cfg.max_usd is not None and self._usd >= cfg.max_usd:
            return "max_usd", cfg.max_usd
        return None

    def _raise(self, limit: tuple[str, float]) -> None:
        name, value = limit
        raise BudgetExceeded(
            f"budget reached: {name}={value} ({self._describe()})",
            hint=f"raise it with --set budget.{name}=..., or resume the run later",
        )

    def _describe(self) -> str:
        return (f"{self._calls} calls, {self._prompt_tokens + self._completion_tokens} tokens, "
                f"{time.monotonic() - self._started:.1f} s, ${self._usd:.4f}")

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` (naming the limit and its value) if any limit is reached."""
        with self._lock:
            limit = self._exceeded(self._in_flight)
            if limit:
                self._raise(limit)

    def begin(self) -> None:
        """Check, then reserve one call slot until :meth:`record` (so parallel calls cannot overshoot)."""
        with self._lock:
            limit = self._exceeded(self._in_flight)
            if limit:
                self._raise(limit)
            self._in_flight += 1

    def record(self, call: LLMCall, *, reserved: bool = False) -> None:
        """Add one finished call (``reserved`` when it was started with :meth:`begin`)."""
        with self._lock:
            if reserved:
                self._in_flight -= 1
            self._calls += 1
            self._failed += 0 if call.ok else 1
            self._prompt_tokens += call.prompt_tokens
            self._completion_tokens += call.completion_tokens
            self._model_s += call.latency_s
            self._usd += call.cost_usd or 0.0
        if self.on_call is not None:
            self.on_call(call)

    def release(self) -> None:
        """Give back a slot taken by :meth:`begin` for a call that was never recorded."""
        with self._lock:
            self._in_flight -= 1

    def snapshot(self) -> dict[str, Any]:
        """Totals so far and what is left of each limit (None = unlimited)."""
        with self._lock:
            wall = time.monotonic() - self._started
            tokens = self._prompt_tokens + self._completion_tokens
            cfg = self.config
            remaining = {
                "calls": None if cfg.max_calls is None else max(0, cfg.max_calls - self._calls),
                "tokens": None if cfg.max_tokens is None else max(0, cfg.max_tokens - tokens),
                "wall_s": None if cfg.max_wall_s is None else max(0.0, cfg.max_wall_s - wall),
                "usd": None if cfg.max_usd is None else max(0.0, cfg.max_usd - self._usd),
            }
            return {
                "calls": self._calls,
                "failed_calls": self._failed,
                "in_flight": self._in_flight,
                "prompt_tokens": self._prompt_tokens,
                "completion_tokens": self._completion_tokens,
                "tokens": tokens,
                "wall_s": wall,
                "model_s": self._model_s,
                "usd": self._usd,
                "remaining": remaining,
            }


class AccountedModel:
    """A model whose every call is checked against and recorded by an :class:`Accountant`."""

    def __init__(self, inner: Model, accountant: Accountant, purpose: str = "call") -> None:
        self.inner = inner
        self.accountant = accountant
        self.purpose = purpose
        self.name = inner.name

    def computed_by(self, model: Model) -> AccountedModel:
        """This model's accounting around ``model``, a copy of it that computes the same replies
        elsewhere (a node's model server): checked and recorded by the same accountant, under this
        model's name, so where a reply was computed changes nothing in the budget
        (:class:`ratchet.contracts.ComputedElsewhere`)."""
        twin = AccountedModel(model, self.accountant, self.purpose)
        twin.name = self.name
        return twin

    def _call(self, started: float, t0: float, completion: Completion | None, error: BaseException | None) -> LLMCall:
        usage = completion.usage if completion is not None else Usage()
        return LLMCall(
            model=self.name,
            purpose=self.purpose,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            latency_s=completion.latency_s if completion is not None else time.perf_counter() - t0,
            ok=error is None,
            cost_usd=self.accountant.price(self.name, usage) if completion is not None else None,
            error=None if error is None else f"{type(error).__name__}: {error}"[:500],
            started_at=started,
        )

    def complete(self, messages: Sequence[Message], **kwargs: Any) -> Completion:
        self.accountant.begin()
        started, t0 = time.time(), time.perf_counter()
        try:
            completion = self.inner.complete(messages, **kwargs)
        except BaseException as exc:
            self.accountant.record(self._call(started, t0, None, exc), reserved=True)
            raise
        self.accountant.record(self._call(started, t0, completion, None), reserved=True)
        return completion

    async def acomplete(self, messages: Sequence[Message], **kwargs: Any) -> Completion:
        self.accountant.begin()
        started, t0 = time.time(), time.perf_counter()
        try:
            completion = await self.inner.acomplete(messages, **kwargs)
        except BaseException as exc:
            self.accountant.record(self._call(started, t0, None, exc), reserved=True)
            raise
        self.accountant.record(self._call(started, t0, completion, None), reserved=True)
        return completion
