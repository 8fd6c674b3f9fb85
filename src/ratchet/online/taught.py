"""What the distillation teaches at each position it distills, and what it holds there.

At a distilled position (along the hinted teacher's own reply, ``distill_target=teacher``, or
along the served reply, ``served``) the hinted teacher's distribution says what to write there.
Its first token is where the greeting asked for lives, and also where a refusal starts ("I'm
sorry, but I can't assist with that."): measured on the 0.5B (``bench/results/online_inner_loop.md``),
a KL to the base that covers the opening keeps the guard and the base's opening alike, and one that
leaves it free lets the refusal rise with the greeting. Each rule here is one way to tell the two
apart; the trainer sums its per-position loss over the distilled positions and divides by their count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from torch import Tensor

TaughtName = Literal["topk", "top_token", "top_share"]


class TaughtLoss(Protocol):
    name: str
    #: Whether :meth:`loss` needs the base model's logits at the same positions (one forward, adapter off).
    needs_base: bool

    def loss(self, student_logits: Tensor, teacher_values: Tensor, teacher_ids: Tensor,
             base_logits: Tensor | None) -> tuple[Tensor, dict[str, float]]:
        """Summed loss over the positions (``[tokens, vocab]`` logits, ``[tokens, k]`` teacher top-k,
        sorted, most likely first) and its parts as floats for the version's record."""
        ...


class TopK:
    """Forward KL from the teacher's top-k (renormalized) to the student at every position: the
    teacher's second and third choices are taught with its first (the behaviour before this rule)."""

    name = "topk"
    needs_base = False

    def loss(self, student_logits: Tensor, teacher_values: Tensor, teacher_ids: Tensor,
             base_logits: Tensor | None) -> tuple[Tensor, dict[str, float]]:
        import torch  # deferred: the config imports this module, and torch is an optional dependency

        from ratchet.online.losses import topk_distill_loss

        student = torch.log_softmax(student_logits.float(), -1).gather(-1, teacher_ids)
        term, kl_sum = topk_distill_loss(student, teacher_values, 1.0)
        return term, {"distill": kl_sum}


class TopTokenHoldRest:
    """The teacher's most likely token is taught (its log-likelihood), and the rest of the
    vocabulary is held where the base had it: ``hold_coef`` × KL(π_θ ‖ π_base) over the tokens other
    than the taught one, both renormalized (:func:`~ratchet.online.losses.kl_excluding_token`).

    So probability may move onto "Ahoy" from every other token in proportion, but not from the
    base's answer onto "I'm": the shape of everything the feedback did not ask for stays the base's.
    The teacher's other top tokens are not taught (a hinted teacher's second choice after "Ahoy!"
    is its "I'm here to help" mode). The hold's gradient is 0 at the base, so it pulls back what
    earlier updates moved, from the second update on.
    """

    name = "top_token"
    needs_base = True

    def __init__(self, hold_coef: float) -> None:
        self.hold_coef = hold_coef

    def loss(self, student_logits: Tensor, teacher_values: Tensor, teacher_ids: Tensor,
             base_logits: Tensor | None) -> tuple[Tensor, dict[str, float]]:
        if base_logits is None:
            raise ValueError("top_token needs the base model's logits at the distilled positions")
        import torch  # deferred: the config imports this module, and torch is an optional dependency

        from ratchet.online.losses import kl_excluding_token

        top = teacher_ids[:, 0]
        log_p = torch.log_softmax(student_logits.float(), -1)
        nll = -log_p.gather(-1, top.unsqueeze(-1)).squeeze(-1).sum()
        hold = kl_excluding_token(student_logits, base_logits, top).sum()
        return nll + self.hold_coef * hold, {"distill": float(nll.detach()), "hold": float(hold.detach())}


class TopShareHoldRest(TopTokenHoldRest):
    """As :class:`TopTokenHoldRest`, but the teacher's top token is taught the probability the
    teacher gives it, not a hard label: the binary KL between "that token or not" under the
    teacher and under the student, ``q log(q/p) + (1−q) log((1−q)/(1−p))``.

    Why: measured on the 0.5B (``bench/results/online_inner_loop.md``), the hard label spends each
    update on fitting every word of the teacher's reply (its gradient is as large where the
    student already writes that reply as at the opening), and the greeting came slower than with
    the top-k (log p("Ahoy!") −4.2 after four updates against −0.3 after three). Where the student
    already gives the token the teacher's probability this term is 0; at the opening it is the
    whole gap.
    """

    name = "top_share"

    def loss(self, student_logits: Tensor, teacher_values: Tensor, teacher_ids: Tensor,
             base_logits: Tensor | None) -> tuple[Tensor, dict[str, float]]:
        if base_logits is None:
            raise ValueError("top_share needs the base model's logits at the distilled positions")
        import torch  # deferred: the config imports this module, and torch is an optional dependency

        from ratchet.online.losses import kl_excluding_token, share_kl

        top = teacher_ids[:, 0]
        log_p = torch.log_softmax(student_logits.float(), -1).gather(-1, top.unsqueeze(-1)).squeeze(-1)
        # teacher_values are log-probs of the full teacher distribution (top-k of a log_softmax).
        taught = share_kl(teacher_values[:, 0], log_p).sum()
        hold = kl_excluding_token(student_logits, base_logits, top).sum()
        return taught + self.hold_coef * hold, {"distill": float(taught.detach()), "hold": float(hold.detach())}


def taught_loss(name: TaughtName, *, hold_coef: float) -> TaughtLoss:
    if name == "top_token":
        return TopTokenHoldRest(hold_coef)
    if name == "top_share":
        return TopShareHoldRest(hold_coef)
    return TopK()


__all__ = ["TaughtLoss", "TaughtName", "TopK", "TopShareHoldRest", "TopTokenHoldRest", "taught_loss"]
