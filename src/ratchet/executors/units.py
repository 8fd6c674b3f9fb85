"""Model calls made inside a unit of work, named so that a rerun of the unit can be given back what
its earlier attempt was already given.

A unit (one task evaluation, say) is run inside :func:`unit_scope`. Each model call it makes is
then the ``index``-th call of that unit, and a :class:`UnitServer` — the driver's one accounted,
journaled model — answers it as ``complete_for(unit, index, ...)``: a call it has answered before
for the same unit, index and request is replayed, not paid again. So a unit rerun after its worker
died, or after the driver was killed and resumed, makes the calls an uninterrupted run makes and
pays only for those its earlier attempts never got. The count restarts with every attempt (every
:func:`unit_scope`), which is what makes the rerun's calls line up with the first attempt's.

:class:`ScopedModel` is that model for units run in the driver's own process;
:mod:`ratchet.executors.gateway` serves it to units on other machines.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from ratchet.contracts import Completion, Message


class UnitServer(Protocol):
    """The driver-side model that answers the calls units make (see :class:`ratchet.evolve.cache.JournaledModel`)."""

    name: str

    def complete_for(self, unit: str | None, index: int, messages: Sequence[Message], *,
                     computed_by: Any = None, **params: Any) -> Completion:
        """The reply to the ``index``-th call of ``unit`` (None: a call made outside any unit).
        ``computed_by``: a copy of the model elsewhere (a node's model server) that computes the
        reply if it is not replayed; accounting and journal stay here."""
        ...


@dataclass
class _Scope:
    unit: str
    counter: Iterator[int] = field(default_factory=itertools.count)


_CURRENT: ContextVar[_Scope | None] = ContextVar("ratchet_unit", default=None)


@contextmanager
def unit_scope(unit: str) -> Iterator[None]:
    """Model calls made inside are calls of ``unit``, numbered from 0 (one attempt of the unit)."""
    token = _CURRENT.set(_Scope(unit))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def next_call() -> tuple[str | None, int]:
    """(unit, index) of the call about to be made; (None, 0) outside any unit."""
    scope = _CURRENT.get()
    if scope is None:
        return None, 0
    return scope.unit, next(scope.counter)  # itertools.count: atomic, should a unit call from threads


class ScopedModel:
    """A ``Model`` that numbers each call by the unit it is made in and asks ``server`` for it."""

    def __init__(self, server: UnitServer) -> None:
        self.server = server
        self.name = server.name
        # What ``models.request.context_window`` looks through: an agent's context policy in an
        # in-process evaluation fits its prompt to the embedded model's window behind the journal
        # (without it the policy kept its configured 6000 tokens and a long run met the 4096 window).
        self.inner = server

    def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        unit, index = next_call()
        return self.server.complete_for(unit, index, messages, **params)

    async def acomplete(self, messages: Sequence[Message], **params: Any) -> Completion:
        return self.complete(messages, **params)
