"""Which tokens of a judged reply the Binary RL reward lands on (``signal`` ``rl`` / ``combine``).

Binary RL gives the judged reward (+1 praised, −1 corrected) to every token of the reply. For a
praised reply that is what the user said: all of it is wanted. For a corrected one it is not: a
user who wants replies to start with "Ahoy!" corrects "A Python list is an ordered collection…"
for its first word, and −1 on every token also pushes down the answer they did not object to,
moving its probability onto whatever else the model might write there (a refusal's "I'm" as much
as a better answer). Where the hinted teacher's own reply is known (``distill_target=teacher``),
it says where the correction speaks: the served reply agrees with it up to some token and parts
from it there; that token is the one the hint would have changed.

Each rule is one way to place the reward; the trainer multiplies the RL term of the advantage by
its 0/1 mask (the distillation terms are untouched).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from torch import Tensor

CreditName = Literal["reply", "parting"]


class RewardCredit(Protocol):
    name: str

    def mask(self, reward: float, response: Sequence[int], teacher_reply: Sequence[int] | None) -> Tensor:
        """0/1 per token of ``response``: where its reward applies. ``teacher_reply`` is the hinted
        teacher's own greedy reply for the same prompt, or None when there is none."""
        ...


class WholeReply:
    """The reward on every token of the reply (Binary RL as published; the behaviour before this rule)."""

    name = "reply"

    def mask(self, reward: float, response: Sequence[int], teacher_reply: Sequence[int] | None) -> Tensor:
        import torch  # deferred: the config imports this module, and torch is an optional dependency

        return torch.ones(len(response), dtype=torch.float32)


class PartingToken:
    """A corrected reply with a hinted teacher's reply: the reward only on the token where the served
    reply parts from the teacher's (tokens before it are what the teacher writes too, tokens after it
    follow a context the correction was not about). A served reply that does not part from it
    while both last (one is a prefix of the other) gets no reward anywhere: the teacher, told the
    correction, writes the same as far as it wrote. A praised reply, or a corrected one without a
    teacher reply, keeps the reward on every token.
    """

    name = "parting"

    def mask(self, reward: float, response: Sequence[int], teacher_reply: Sequence[int] | None) -> Tensor:
        import torch  # deferred: the config imports this module, and torch is an optional dependency

        n = len(response)
        if reward >= 0 or teacher_reply is None:
            return torch.ones(n, dtype=torch.float32)
        shared = 0
        while shared < min(n, len(teacher_reply)) and response[shared] == teacher_reply[shared]:
            shared += 1
        mask = torch.zeros(n, dtype=torch.float32)
        if shared < min(n, len(teacher_reply)):
            mask[shared] = 1.0
        return mask


def reward_credit(name: CreditName) -> RewardCredit:
    return {"reply": WholeReply, "parting": PartingToken}[name]()


__all__ = ["CreditName", "PartingToken", "RewardCredit", "WholeReply", "reward_credit"]
