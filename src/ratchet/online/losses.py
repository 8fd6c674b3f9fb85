"""The learning signals and the policy objective, as pure functions on tensors.

Shapes: every per-token tensor is ``[tokens]`` for one response or ``[batch, tokens]`` for a padded
batch with a 0/1 ``mask`` marking real response tokens. Log-probabilities are natural-log
probabilities of the response tokens that were actually generated, from RAW logits.

Three policies appear, and the objective keeps them apart (decoupled PPO, Hilton et al. 2022):

* the **behaviour** policy ``π_serve``: the one that generated the sample. Its log-probs are the
  ones the server recorded (``Turn.response_logprobs``) under ``Turn.policy_version``. It is the
  quantized GGUF that llama.cpp serves, so even at the same version it differs from the fp32 trainer
  by a small, systematic gap: that gap is logged, and absorbed by the weight below.
* the **proximal** policy ``π_prox``: the trainer's weights before this update (θ_old). The PPO
  ratio ``ρ = π_θ / π_prox`` is clipped around it, so the trust region is measured from where the
  trainer is, not from a possibly stale serving version.
* the current policy ``π_θ`` being optimized.

The staleness correction is the truncated importance weight ``w = min(π_prox / π_serve, c)`` per
token, treated as a constant, multiplying the clipped objective::

    J = token-mean over the batch of  w · min(ρ·A, clip(ρ, 1-ε_low, 1+ε_high)·A)

Samples more than K versions older than the trainer are dropped before they get here (the queue
marks them ``dropped``); within K the weight corrects the rest, and the cap ``c`` bounds its
variance. With one optimization pass per batch ``π_prox`` equals ``π_θ`` at the forward pass, so
``ρ = 1`` and ``π_prox`` costs no extra forward pass (it is the detached current log-prob).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


def binary_rl_advantages(reward: float, n_tokens: int) -> Tensor:
    """Binary RL: the judged reward (+1 / -1) is the advantage of every response token.

    A reward of 0 means "ambiguous": such samples are excluded from Binary RL upstream; here it
    simply yields zeros.
    """
    return torch.full((n_tokens,), float(reward), dtype=torch.float32)


def opd_advantages(teacher_logprobs: Tensor, old_logprobs: Tensor, clip: float | None = None) -> Tensor:
    """On-policy distillation with a hindsight hint: ``A_t = log π_teacher(a_t | s+hint) − log π_old(a_t | s)``.

    ``teacher_logprobs`` score the ORIGINAL response tokens under the hint-augmented prompt;
    ``old_logprobs`` score them under the original prompt. ``clip`` (optional) bounds |A_t| so one
    token the teacher finds absurd cannot dominate the batch.
    """
    if teacher_logprobs.shape != old_logprobs.shape:
        raise ValueError(f"teacher {tuple(teacher_logprobs.shape)} and old {tuple(old_logprobs.shape)} differ in shape")
    adv = (teacher_logprobs - old_logprobs).detach().float()
    if clip is not None:
        adv = adv.clamp(-clip, clip)
    return adv


def combined_advantages(
    reward: float,
    teacher_logprobs: Tensor | None,
    old_logprobs: Tensor,
    *,
    w_rl: float = 1.0,
    w_opd: float = 1.0,
    opd_clip: float | None = None,
    rl_mask: Tensor | None = None,
) -> Tensor:
    """``A_t = w_rl·r·m_t + w_opd·(teacher − old)``; without a teacher (no hint) only the RL term
    remains. ``rl_mask`` (0/1 per token, :mod:`ratchet.online.credit`) says where the reward lands;
    None: every token."""
    adv = binary_rl_advantages(reward, old_logprobs.shape[-1]) * w_rl
    if rl_mask is not None:
        adv = adv * rl_mask
    if teacher_logprobs is not None:
        adv = adv + w_opd * opd_advantages(teacher_logprobs, old_logprobs, clip=opd_clip)
    return adv


def truncated_importance_weights(proximal_logprobs: Tensor, behaviour_logprobs: Tensor, cap: float) -> Tensor:
    """Per-token ``min(π_prox / π_serve, cap)``, a constant (no gradient flows through it)."""
    log_w = (proximal_logprobs - behaviour_logprobs).detach().float()
    return torch.exp(log_w.clamp(max=torch.log(torch.tensor(cap)).item()))


def k3_kl(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(π_θ ‖ π_ref) on tokens sampled from π_θ: ``e^(ref−θ) − (ref−θ) − 1``.

    Non-negative, unbiased for samples of π_θ, and differentiable in ``logprobs``.
    """
    delta = ref_logprobs.detach() - logprobs
    return torch.exp(delta) - delta - 1.0


@dataclass(frozen=True)
class PolicyLoss:
    """The scalar to minimize and what to log about it (floats, already detached)."""

    loss: Tensor
    objective: float
    kl: float
    clip_fraction: float
    ratio_mean: float
    weight_mean: float
    tokens: int


def _masked_sum(values: Tensor, mask: Tensor) -> Tensor:
    return (values * mask).sum()


def ppo_clipped_loss(
    logprobs: Tensor,
    proximal_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    weights: Tensor | None = None,
    kl_coef: float = 0.0,
    ref_logprobs: Tensor | None = None,
    normalizer: float | None = None,
) -> PolicyLoss:
    """The weighted, clipped PPO surrogate, negated and averaged over real tokens.

    ``loss = −Σ w·min(ρA, clip(ρ)A)·mask / N + kl_coef · Σ k3(θ, ref)·mask / N`` with
    ``ρ = exp(logprobs − proximal_logprobs)`` and ``N = normalizer`` (default: the number of real
    tokens here). Pass the token count of the whole batch as ``normalizer`` when the batch is
    split into micro-batches, so that accumulated gradients equal the whole-batch token mean.
    """
    mask = mask.to(logprobs.dtype)
    n_tokens = float(mask.sum().item())
    norm = float(normalizer) if normalizer is not None else max(n_tokens, 1.0)
    ratio = torch.exp(logprobs - proximal_logprobs.detach())
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    surrogate = torch.minimum(ratio * advantages, clipped * advantages)
    w = weights.detach() if weights is not None else torch.ones_like(surrogate)
    objective = _masked_sum(w * surrogate, mask) / norm
    loss = -objective
    kl_value = torch.zeros(())
    if kl_coef or ref_logprobs is not None:
        if ref_logprobs is None:
            raise ValueError("kl_coef > 0 needs ref_logprobs (the base model's log-probs)")
        kl_value = _masked_sum(k3_kl(logprobs, ref_logprobs), mask) / norm
        if kl_coef:
            loss = loss + kl_coef * kl_value
    with torch.no_grad():
        denom = max(n_tokens, 1.0)
        # A token is clipped when the clipped branch wins the min: it then contributes no gradient.
        was_clipped = (clipped * advantages < ratio * advantages - 1e-8).to(mask.dtype)
        stats = (
            float(_masked_sum(was_clipped, mask) / denom),
            float(_masked_sum(ratio, mask) / denom),
            float(_masked_sum(w, mask) / denom),
        )
    return PolicyLoss(
        loss=loss,
        objective=float(objective.detach()),
        kl=float(kl_value.detach()),
        clip_fraction=stats[0],
        ratio_mean=stats[1],
        weight_mean=stats[2],
        tokens=int(n_tokens),
    )


def token_logprobs(logits: Tensor, targets: Tensor) -> Tensor:
    """``log softmax(logits)[target]`` per position, computed without materializing the full softmax.

    ``logits`` is ``[..., vocab]`` and ``targets`` ``[...]`` (the token each position predicts).
    """
    logits = logits.float()
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def topk_distill_loss(student_logprobs: Tensor, teacher_logprobs: Tensor, normalizer: float) -> tuple[Tensor, float]:
    """Forward KL from the hinted teacher's top-k to the student at each reply position.

    ``teacher_logprobs`` ``[tokens, k]`` are the teacher's k largest log-probs at each position,
    ``student_logprobs`` ``[tokens, k]`` the student's log-probs of the same k token ids. The
    teacher's top-k is renormalized to a distribution ``q``; the loss is
    ``Σ_t Σ_k q_tk (log q_tk − log π_θ(k))`` summed over positions and divided by ``normalizer``.

    Why: the sampled-token OPD advantage only reweights tokens the student already produced, so a
    behaviour it never samples (a greeting, capitals) gets no push up; the teacher's top-k names
    those tokens at every position. Returns (loss, the summed KL as a float for logging).
    """
    q = torch.softmax(teacher_logprobs.detach().float(), dim=-1)
    log_q = torch.log_softmax(teacher_logprobs.detach().float(), dim=-1)
    kl = (q * (log_q - student_logprobs)).sum()
    return kl / max(float(normalizer), 1.0), float(kl.detach())


def exact_kl_per_token(logits: Tensor, ref_logits: Tensor) -> Tensor:
    """``KL(π_θ ‖ π_ref)`` over the whole vocabulary at each position: ``[tokens, vocab]`` -> ``[tokens]``.

    Exact, not the sampled-token k3 estimate: k3 looks at one token per position (the one served),
    so it cannot see mass moving between tokens nobody sampled (a refusal's "I'm" rising at the
    first position of every reply), which is how the guard tasks were lost. The reference is a
    constant (no gradient).
    """
    log_p = torch.log_softmax(logits.float(), dim=-1)
    log_r = torch.log_softmax(ref_logits.detach().float(), dim=-1)
    return (log_p.exp() * (log_p - log_r)).sum(-1)


def untaught_positions(response: Sequence[int], taught: Sequence[int] | None) -> Tensor:
    """Which positions of a served reply the KL-to-base penalty covers: a 0/1 float mask.

    ``taught`` is the reply the distillation runs along in the same prompt (the hinted teacher's own
    reply, or the served reply itself), or None when nothing is distilled there. Position ``i`` of
    the served reply predicts its token ``i`` from ``prompt + response[:i]``; while that context is
    also one the distillation teaches at (``response[:i] == taught[:i]``), the user's feedback says
    what to do there and a KL to the base would only argue with it (at the first position: keep the
    base's opening against the greeting asked for). Past the point where the two replies part, the
    contexts are the model's ordinary ones, where nothing asked for a change: the penalty keeps them
    as the base had them.
    """
    n = len(response)
    shared = 0
    if taught is not None:
        while shared < min(n, len(taught)) and response[shared] == taught[shared]:
            shared += 1
        shared = min(shared + 1, n)  # the position where they part is still taught (same context)
    mask = torch.ones(n, dtype=torch.float32)
    mask[:shared] = 0.0
    return mask


def kl_excluding_token(logits: Tensor, ref_logits: Tensor, token: Tensor) -> Tensor:
    """``KL(π̃_θ ‖ π̃_ref)`` per position, over the vocabulary without ``token`` (``[tokens]`` ids),
    each distribution renormalized over what is left: ``[tokens, vocab]`` -> ``[tokens]``.

    Whatever probability ``token`` takes or gives up costs nothing; moving mass between the other
    tokens does (the base's answer handing its share to a refusal's "I'm"). The reference is a
    constant. The taught logit is replaced by a finite floor, not −inf, so that its term is an
    exact 0 in the sum and in the gradient (−inf − −inf would be NaN, and NaN times 0 stays NaN).
    """
    index = token.unsqueeze(-1)
    floor = -1e4  # logits are O(10): e^(floor − logsumexp) is 0 in float32
    log_p = torch.log_softmax(logits.float().scatter(-1, index, floor), dim=-1)
    log_r = torch.log_softmax(ref_logits.detach().float().scatter(-1, index, floor), dim=-1)
    return (log_p.exp() * (log_p - log_r)).sum(-1)


def share_kl(teacher_logprob: Tensor, student_logprob: Tensor) -> Tensor:
    """Binary KL between "this token or another" under the teacher (``q``) and the student (``p``),
    per position from the two log-probs of the token: ``q log(q/p) + (1−q) log((1−q)/(1−p))``.

    0 where the student already gives the token the teacher's probability. The teacher is a constant.
    """
    log_q = teacher_logprob.detach().float().clamp(max=-1e-6)
    log_p = student_logprob.float().clamp(max=-1e-6)  # log(1 − p) is −inf at p = 1
    log_not_q = torch.log1p(-log_q.exp())
    log_not_p = torch.log1p(-log_p.exp())
    return log_q.exp() * (log_q - log_p) + log_not_q.exp() * (log_not_q - log_not_p)
