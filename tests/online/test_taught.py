"""What the distillation teaches at a distilled position (``trainer.taught``): the teacher's top-k,
or its top token with the rest of the vocabulary held where the base had it."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from test_trainer import finish_teacher_replies, make_trainer, sample  # noqa: E402  (the tiny random Llama and its samples)  (the tiny random Llama and its samples)

from ratchet.online.losses import kl_excluding_token, share_kl  # noqa: E402
from ratchet.online.taught import TopK, TopShareHoldRest, TopTokenHoldRest, taught_loss  # noqa: E402

# One position, four tokens: 0 = the greeting the user asked for, 1 = "I'm" (a refusal's opening),
# 2 and 3 = the base's answers.
BASE = torch.log(torch.tensor([[0.02, 0.08, 0.6, 0.3]]))
GREETING, IM = 0, 1
#: The hinted teacher: mostly the greeting, and "I'm" as its second choice.
TEACHER = torch.log(torch.tensor([[0.7, 0.25, 0.04, 0.01]]))


def _rest(logits: torch.Tensor) -> list[float]:
    """The distribution over the tokens other than the greeting, renormalized."""
    p = torch.softmax(logits, -1)[0, 1:]
    return (p / p.sum()).tolist()


def test_kl_excluding_the_taught_token_ignores_its_share_and_sees_the_rest_move() -> None:
    # Only the greeting's share differs: the rest has the same shape, so nothing to hold.
    more_greeting = torch.log(torch.tensor([[0.9, 0.008, 0.06, 0.03]]))  # softmax renormalizes
    assert kl_excluding_token(more_greeting, BASE, torch.tensor([GREETING])).item() == pytest.approx(0.0, abs=1e-6)
    # "I'm" taking the answers' share costs exactly KL of the renormalized rests.
    drifted = torch.log(torch.tensor([[0.02, 0.5, 0.3, 0.18]]))
    p, r = [0.5 / 0.98, 0.3 / 0.98, 0.18 / 0.98], [0.08 / 0.98, 0.6 / 0.98, 0.3 / 0.98]
    expected = sum(a * math.log(a / b) for a, b in zip(p, r, strict=True))
    assert kl_excluding_token(drifted, BASE, torch.tensor([GREETING])).item() == pytest.approx(expected, rel=1e-5)
    # Its gradient is finite and never touches the taught logit.
    logits = drifted.clone().requires_grad_(True)
    kl_excluding_token(logits, BASE, torch.tensor([GREETING])).sum().backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[0, GREETING].item() == 0.0


def _train(rule, start: torch.Tensor, steps: int = 200) -> torch.Tensor:
    logits = start.clone().requires_grad_(True)
    opt = torch.optim.SGD([logits], lr=0.5)
    values, ids = TEACHER.topk(4, dim=-1)
    for _ in range(steps):
        opt.zero_grad()
        loss, _ = rule.loss(logits, values, ids, BASE)
        loss.backward()
        opt.step()
    return logits.detach()


def test_top_k_teaches_the_teachers_second_choice_and_top_token_does_not() -> None:
    topk = _train(TopK(), BASE)
    top, share = _train(TopTokenHoldRest(hold_coef=5.0), BASE), _train(TopShareHoldRest(hold_coef=5.0), BASE)
    for learned in (topk, top, share):
        assert torch.softmax(learned, -1)[0, GREETING] > 0.6  # all teach the greeting
    # the hard label drives it toward 1, the share to the teacher's 0.7
    assert torch.softmax(top, -1)[0, GREETING] > 0.9
    assert torch.softmax(share, -1)[0, GREETING].item() == pytest.approx(0.7, abs=0.02)
    base_rest = _rest(BASE)
    # topk moves the rest onto "I'm" (the teacher's second choice): the refusal's opening rises.
    assert _rest(topk)[0] > 3 * base_rest[0]
    # top_token and top_share leave the rest as the base had it.
    assert _rest(top) == pytest.approx(base_rest, abs=0.02)
    assert _rest(share) == pytest.approx(base_rest, abs=0.02)


def test_the_share_is_zero_where_the_student_already_agrees() -> None:
    q, p = torch.log(torch.tensor([0.7, 0.7, 0.2])), torch.log(torch.tensor([0.7, 0.1, 0.2]))
    expected = 0.7 * math.log(0.7 / 0.1) + 0.3 * math.log(0.3 / 0.9)
    assert share_kl(q, p).tolist() == pytest.approx([0.0, expected, 0.0], abs=1e-5)
    # so at a position where the student already writes the teacher's reply there is no push
    agree = torch.log(torch.tensor([[0.7, 0.1, 0.1, 0.1]]))
    values, ids = TEACHER.topk(4, dim=-1)
    loss, _ = TopShareHoldRest(hold_coef=5.0).loss(agree, values, ids, agree)
    assert loss.item() == pytest.approx(0.0, abs=1e-5)


def test_the_hold_pulls_a_drifted_rest_back_to_the_base() -> None:
    drifted = torch.log(torch.tensor([[0.3, 0.5, 0.12, 0.08]]))  # an earlier update moved mass onto "I'm"
    held, free = _train(TopTokenHoldRest(hold_coef=5.0), drifted), _train(TopTokenHoldRest(hold_coef=0.0), drifted)
    assert _rest(held) == pytest.approx(_rest(BASE), abs=0.03)
    assert _rest(free)[0] > 2 * _rest(BASE)[0]  # without the hold the drift stays
    assert taught_loss("top_token", hold_coef=1.0).needs_base and not taught_loss("topk", hold_coef=1.0).needs_base


def _rest_kl_along_teacher(trainer, s) -> float:
    """KL to the base over the non-taught tokens, along the hinted teacher's own reply."""
    it = trainer.prepare([s])[0][0]
    prompt = it.teacher_ids[: len(it.teacher_ids) - (len(it.input_ids) - it.response_start)]
    reply = trainer.greedy_ids([prompt], 5, base=True)[0]
    _, top = trainer.teacher_topk([prompt + reply], [len(prompt)], 1)[0]
    own = it.input_ids[: it.response_start] + reply
    with torch.no_grad():
        _, rows = trainer._response_logprobs([own], [it.response_start], rows=[True], base_rows=True)
    logits, base = rows[0]
    return float(kl_excluding_token(logits, base, top[:, 0]).mean())


def test_the_trainer_holds_the_rest_along_the_teachers_reply(monkeypatch) -> None:
    finish_teacher_replies(monkeypatch)
    # Move the adapter away from the base, then distill a hinted sample with and without the hold.
    away = make_trainer(signal="rl", learning_rate=5e-2)
    for _ in range(8):
        away.step([sample("q", "abcabc", 1), sample("q", "zzzz", -1)])
    state = away.lora_state()
    hinted = sample("q", "abcabc", -1, hint="zz")
    kls = {}
    for coef in (0.0, 100.0):
        trainer = make_trainer(signal="opd", w_opd=0.0, opd_topk=4, distill_target="teacher", teacher_max_tokens=5,
                               taught="top_token", hold_coef=coef, learning_rate=2e-2)
        trainer.set_lora_state(state, 1)
        start = _rest_kl_along_teacher(trainer, hinted)
        for _ in range(8):
            metrics = trainer.step([hinted])
        assert metrics["taught"] == "top_token" and metrics["distill_kl"] > 0
        kls[coef] = _rest_kl_along_teacher(trainer, hinted)
    assert metrics["hold_kl"] > 0
    assert kls[100.0] < 0.7 * min(kls[0.0], start), (start, kls)  # measured: 0.0125 at start, 0.0120 free, 0.0072 held
