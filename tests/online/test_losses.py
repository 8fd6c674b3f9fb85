"""Each learning signal and the objective on cases small enough to compute by hand."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from ratchet.online.losses import (  # noqa: E402
    binary_rl_advantages,
    combined_advantages,
    k3_kl,
    opd_advantages,
    ppo_clipped_loss,
    token_logprobs,
    truncated_importance_weights,
)


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def test_binary_rl_gives_the_reward_to_every_token() -> None:
    assert binary_rl_advantages(1, 3).tolist() == [1.0, 1.0, 1.0]
    assert binary_rl_advantages(-1, 2).tolist() == [-1.0, -1.0]
    assert binary_rl_advantages(0, 2).tolist() == [0.0, 0.0]


def test_opd_advantage_is_teacher_minus_old_and_can_be_clipped() -> None:
    teacher, old = t(-1.0, -0.5), t(-2.0, -0.25)
    assert opd_advantages(teacher, old).tolist() == pytest.approx([1.0, -0.25])
    assert opd_advantages(teacher, old, clip=0.2).tolist() == pytest.approx([0.2, -0.2])
    with pytest.raises(ValueError):
        opd_advantages(t(1.0), t(1.0, 2.0))


def test_combined_advantage_weights_both_terms() -> None:
    adv = combined_advantages(-1, t(-1.0, -0.5), t(-2.0, -0.25), w_rl=1.0, w_opd=0.5)
    # -1 + 0.5*1.0 = -0.5 ; -1 + 0.5*(-0.25) = -1.125
    assert adv.tolist() == pytest.approx([-0.5, -1.125])
    # Without a hint there is no teacher: the RL term alone.
    assert combined_advantages(1, None, t(-2.0, -0.25), w_rl=2.0).tolist() == [2.0, 2.0]


def test_truncated_importance_weight() -> None:
    prox = t(math.log(0.5), math.log(0.25), math.log(0.3))
    serve = t(math.log(0.25), math.log(0.5), math.log(0.3))
    # 0.5/0.25 = 2 capped at 1.5 ; 0.25/0.5 = 0.5 ; equal = 1
    assert truncated_importance_weights(prox, serve, cap=1.5).tolist() == pytest.approx([1.5, 0.5, 1.0])


def test_k3_kl_matches_the_formula_and_is_zero_at_equality() -> None:
    logp, ref = t(math.log(0.5), math.log(0.2)), t(math.log(0.25), math.log(0.2))
    # delta = ln(0.25/0.5) = -ln 2 ; e^delta - delta - 1 = 0.5 + ln 2 - 1
    assert k3_kl(logp, ref).tolist() == pytest.approx([0.5 + math.log(2) - 1, 0.0], abs=1e-6)


def test_ppo_loss_inside_the_trust_region_is_the_plain_ratio_objective() -> None:
    logp = t(math.log(0.5), math.log(0.25))
    prox = t(math.log(0.4), math.log(0.25))
    adv, mask = t(1.0, -1.0), t(1.0, 1.0)
    out = ppo_clipped_loss(logp, prox, adv, mask)
    # ratios 1.25 and 1.0 are inside (0.8, 1.28): objective = (1.25 - 1.0) / 2
    assert out.objective == pytest.approx(0.125)
    assert float(out.loss) == pytest.approx(-0.125)
    assert out.clip_fraction == 0.0 and out.tokens == 2


def test_ppo_loss_clips_asymmetrically_and_pessimistically() -> None:
    # ratios 1.5, 0.5, 0.5 with advantages +1, -1, +1
    logp = t(math.log(0.75), math.log(0.25), math.log(0.25)).requires_grad_()
    prox = t(math.log(0.5), math.log(0.5), math.log(0.5))
    adv, mask = t(1.0, -1.0, 1.0), t(1.0, 1.0, 1.0)
    out = ppo_clipped_loss(logp, prox, adv, mask, eps_low=0.2, eps_high=0.28)
    # min(1.5, 1.28)=1.28 ; min(-0.5, -0.8)=-0.8 ; min(0.5, 0.8)=0.5
    assert out.objective == pytest.approx((1.28 - 0.8 + 0.5) / 3)
    out.loss.backward()
    grad = logp.grad.tolist()
    # Clipped tokens get no gradient; the unclipped one gets -A·ρ/N = -0.5/3.
    assert grad[0] == 0.0 and grad[1] == 0.0
    assert grad[2] == pytest.approx(-0.5 / 3)
    assert out.clip_fraction == pytest.approx(2 / 3)


def test_ppo_loss_applies_weights_mask_normalizer_and_kl() -> None:
    logp = t(math.log(0.5), math.log(0.5), 0.0)
    prox = logp.clone()
    adv, mask = t(1.0, 1.0, 5.0), t(1.0, 1.0, 0.0)
    weights = t(2.0, 0.5, 9.0)
    out = ppo_clipped_loss(logp, prox, adv, mask, weights=weights, normalizer=4.0)
    # masked token ignored; (2·1 + 0.5·1) / 4
    assert out.objective == pytest.approx(2.5 / 4)
    assert out.weight_mean == pytest.approx(1.25)
    ref = t(math.log(0.25), math.log(0.5), 0.0)
    out_kl = ppo_clipped_loss(logp, prox, adv, mask, kl_coef=0.1, ref_logprobs=ref)
    kl = (0.5 + math.log(2) - 1) / 2
    assert out_kl.kl == pytest.approx(kl, abs=1e-6)
    assert float(out_kl.loss) == pytest.approx(-1.0 + 0.1 * kl, abs=1e-6)
    with pytest.raises(ValueError):
        ppo_clipped_loss(logp, prox, adv, mask, kl_coef=0.1)


def test_token_logprobs_is_log_softmax_at_the_target() -> None:
    logits = torch.tensor([[0.0, math.log(3.0)], [5.0, 5.0]])
    out = token_logprobs(logits, torch.tensor([1, 0]))
    assert out.tolist() == pytest.approx([math.log(0.75), math.log(0.5)])
