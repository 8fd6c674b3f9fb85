"""Which conversations the default gate holds out: the hold-out policies.

The gate on the server's own conversations (:mod:`ratchet.online.gate`) compares a candidate with
the version it would replace only once ``min_turns`` praised or corrected held-out turns exist.
At a fixed 20% share a run of two dozen conversations rarely got there before its first versions
(``bench/results/online_personalization.md``, the "fallback" lines), and the first versions are
the ones most likely to move a preference the wrong way. A policy says, for a conversation whose
first judged turn arrives, whether it is held out:

* :class:`FixedShare` (``fixed``): a stable hash of the session id below the share
  (:func:`~ratchet.online.records.holds_out`), computed whenever asked; nothing recorded.
* :class:`FillFirst` (``fill_first``, the default): while fewer than ``min_turns`` praised or
  corrected turns are held out, ``early_share`` of the new conversations are held out, by a running
  count (a conversation is held out when that keeps the held-out part of the conversations decided
  so far within ``early_share``: at 0.75 the first trains, the next three are held out, and so on),
  afterwards the share by the hash. Whether the set was filling depends on what came before, so
  the decision is made once per conversation and recorded in the queue file
  (:meth:`~ratchet.online.queue.TurnQueue.hold_out`): a restart, or the judging and training
  processes, never put a conversation on the other side. A count, not the hash, while filling:
  the first version comes after a handful of conversations, and a hash at one half holds out two
  or fewer of the first four in 11 of 16 cases; four conversations of two judged turns each can
  then not give ``min_turns`` (5). The first conversation trains, so a server whose client sends
  one session id for everything is not held out whole from the start.

A policy is stored in the queue file as :meth:`to_dict` and read back with :func:`policy_from_dict`,
so the judging process follows the policy the training process set.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Protocol

from ratchet.online.records import holds_out


@dataclass(frozen=True)
class HeldSoFar:
    """What a policy decides a conversation on: what the queue held out before it."""

    #: Praised or corrected held-out turns (with a reply): what the gate compares candidates on.
    signed: int = 0
    #: Conversations decided while the held-out set was filling, and of those, held out.
    early_decided: int = 0
    early_held: int = 0


@dataclass(frozen=True)
class Split:
    """Which side a conversation is on: ``held`` out for the gate or trained on; ``early`` when the
    decision was made while the held-out set was filling (so at the early share)."""

    held: bool
    early: bool = False


class HoldOutPolicy(Protocol):
    """Decides a conversation's side when its first judged turn arrives."""

    #: Names the policy in config (``trainer.gate.heldout.policy``), the queue file and the record.
    name: ClassVar[str]
    #: Whether the decision is recorded once per conversation (True) or recomputed from the hash
    #: whenever asked (False: a share change then moves the conversations it covers).
    records: ClassVar[bool]

    def decide(self, session_id: str, share: float, before: HeldSoFar) -> Split:
        """The side of ``session_id`` at ``share``, given what was held out ``before`` it."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """What the queue file stores (``policy`` names the class)."""
        ...


@dataclass(frozen=True)
class FixedShare:
    """The share of conversations below a stable hash of the session id, whatever came before."""

    name: ClassVar[str] = "fixed"
    records: ClassVar[bool] = False

    def decide(self, session_id: str, share: float, before: HeldSoFar) -> Split:
        return Split(holds_out(session_id, share))

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.name}


@dataclass(frozen=True)
class FillFirst:
    """Hold out ``early_share`` of the new conversations until ``min_turns`` praised or corrected
    turns are held out, then the share (see the module docstring)."""

    early_share: float = 0.75
    min_turns: int = 5
    name: ClassVar[str] = "fill_first"
    records: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not 0 <= self.early_share <= 1:
            raise ValueError(f"the early held-out share must be in [0, 1], not {self.early_share!r}")

    def decide(self, session_id: str, share: float, before: HeldSoFar) -> Split:
        if before.signed >= self.min_turns:
            return Split(holds_out(session_id, share))
        # Held out when the count stays within the early share (never below the share): exact from
        # the first conversations on, where a hash at one half holds out none to all of the first four.
        early = max(share, self.early_share)
        return Split(before.early_held + 1 <= early * (before.early_decided + 1) + 1e-9, early=True)

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.name, **asdict(self)}


#: The policies by name, for config and the queue file.
HOLD_OUT_POLICIES: dict[str, type[FixedShare] | type[FillFirst]] = {"fixed": FixedShare, "fill_first": FillFirst}


def configured_policy(name: str, *, early_share: float, min_turns: int) -> HoldOutPolicy:
    """The policy ``trainer.gate.heldout.policy`` names, with the settings beside it."""
    if name == FillFirst.name:
        return FillFirst(early_share, min_turns)
    if name == FixedShare.name:
        return FixedShare()
    raise ValueError(f"unknown hold-out policy {name!r} (known: {', '.join(HOLD_OUT_POLICIES)})")


def policy_from_dict(data: dict[str, Any] | None) -> HoldOutPolicy:
    """The policy :meth:`HoldOutPolicy.to_dict` wrote; ``fixed`` for a queue file that stored none
    (written before there were policies, or whose share was never set)."""
    if not data:
        return FixedShare()
    fields = dict(data)
    name = fields.pop("policy")
    if name not in HOLD_OUT_POLICIES:
        raise ValueError(f"unknown hold-out policy {name!r} in the queue file (known: {', '.join(HOLD_OUT_POLICIES)})")
    return HOLD_OUT_POLICIES[name](**fields)


__all__ = ["HOLD_OUT_POLICIES", "FillFirst", "FixedShare", "HeldSoFar", "HoldOutPolicy", "Split", "configured_policy",
           "policy_from_dict"]
