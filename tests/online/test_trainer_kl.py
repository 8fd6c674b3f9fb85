"""The KL-to-base penalty (``kl_coef``): which tokens it covers, its reference, and that it holds."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from test_trainer import TOK, finish_teacher_replies, make_trainer, sample  # noqa: E402  (the tiny random Llama and its samples)  (the tiny random Llama and its samples)

from ratchet.online.losses import exact_kl_per_token, untaught_positions  # noqa: E402


def test_exact_kl_is_the_full_vocabulary_sum_and_zero_at_the_reference() -> None:
    logits = torch.tensor([[math.log(0.5), math.log(0.5)], [0.0, 0.0]])
    ref = torch.tensor([[math.log(0.25), math.log(0.75)], [0.0, 0.0]])
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert exact_kl_per_token(logits, ref).tolist() == pytest.approx([expected, 0.0], abs=1e-6)


def test_the_penalty_skips_the_positions_the_distillation_teaches() -> None:
    # Served "x y z w", taught "x y q": positions 0..2 predict from contexts the teacher's reply
    # shares (prompt, prompt+x, prompt+x y: the last is where they part); 3 is the model's own.
    assert untaught_positions([1, 2, 3, 4], [1, 2, 9]).tolist() == [0, 0, 0, 1]
    assert untaught_positions([5, 2, 3], [1, 2, 3]).tolist() == [0, 1, 1]  # part at once: only the opening
    assert untaught_positions([1, 2, 3], None).tolist() == [1, 1, 1]  # nothing distilled: all held
    assert untaught_positions([1, 2, 3], [1, 2, 3]).tolist() == [0, 0, 0]  # distilled along the reply itself
    assert untaught_positions([1, 2], [1, 2, 3, 4]).tolist() == [0, 0]


def test_samples_without_signal_are_kept_for_the_penalty_only() -> None:
    ambiguous = sample("q", "hello there", 0)
    items, dropped = make_trainer(signal="opd").prepare([ambiguous])
    assert items == [] and dropped["no_signal"] == 1
    items, dropped = make_trainer(signal="opd", kl_coef=1.0).prepare([ambiguous])
    assert len(items) == 1 and items[0].anchor_only and dropped["no_signal"] == 0
    # A batch of them alone is no update: nothing asked for a change.
    metrics = make_trainer(signal="opd", kl_coef=1.0).step([ambiguous])
    assert not metrics["updated"]
    # A praised reply is no anchor (the user wants all of it) and carries no penalty under rl either.
    praised = sample("q", "ahoy there", 1)
    items, dropped = make_trainer(signal="opd", kl_coef=1.0).prepare([praised])
    assert items == [] and dropped["no_signal"] == 1
    metrics = make_trainer(signal="rl", kl_coef=1.0).step([praised])
    assert metrics["updated"] and metrics["kl_tokens"] == 0


def _kl_on(trainer, s) -> float:
    prompt = list(s.turn.prompt_token_ids)
    return trainer.kl_to_base([prompt + list(s.turn.response_token_ids)], [len(prompt)])


def test_the_penalty_pulls_toward_the_base_with_the_adapter_off() -> None:
    # Move the adapter away from the base, then take the same updates with and without the
    # penalty. Were the reference scored with the adapter on, the KL would be 0 and both would match.
    learn = sample("q1", "abcabc", 1)
    anchor = sample("q2", "hello there", 0)  # no signal: an anchor
    hint = sample("q1", "abcabc", -1, hint="zz")
    away = make_trainer(signal="rl", learning_rate=5e-2)
    for _ in range(8):
        away.step([learn, sample("q2", "hello there", -1)])
    state = away.lora_state()
    kls = {}
    for coef in (0.0, 50.0):
        # taught=topk: top_share's hold also pulls toward the base (measured here: the anchor's KL
        # 0.015 -> 0.010 without the penalty), which is not what this test isolates.
        trainer = make_trainer(signal="opd", opd_topk=4, w_opd=0.0, learning_rate=2e-2, kl_coef=coef,
                               taught="topk")
        trainer.set_lora_state(state, 1)
        start = _kl_on(trainer, anchor)
        for _ in range(8):
            metrics = trainer.step([hint, anchor])
        kls[coef] = _kl_on(trainer, anchor)
        if coef:
            assert metrics["anchors"] == 1 and metrics["kl_penalty"] > 0
            # The hinted sample's served reply is distilled along itself (distill_target default
            # "teacher" re-targets it; either way its taught prefix is skipped) and the anchor counts whole.
            assert 0 < metrics["kl_tokens"] <= len(anchor.turn.response_token_ids) + len(hint.turn.response_token_ids)
    # Without it the distillation of q1 leaves q2's reply about where it was; with it, q2 goes home.
    assert kls[50.0] < 0.6 * min(kls[0.0], start), (start, kls)


def test_a_refused_teacher_reply_still_marks_where_the_correction_speaks(monkeypatch) -> None:
    finish_teacher_replies(monkeypatch)
    import ratchet.online.trainer as trainer_module

    class Refuse:
        name = "refuse"

        def keep(self, target: str) -> bool:
            return False

    monkeypatch.setattr(trainer_module, "target_filter", lambda name: Refuse())
    trainer = make_trainer(signal="opd", opd_topk=4, w_opd=1.0, distill_target="teacher", teacher_max_tokens=5,
                           kl_coef=1.0)
    s = sample("q", "abcabc", -1, hint="zz")
    metrics = trainer.step([s])
    it = trainer.prepare([s])[0][0]
    prompt = it.teacher_ids[: len(it.teacher_ids) - (len(it.input_ids) - it.response_start)]
    reply = trainer.greedy_ids([prompt], 5, base=True)[0] + [TOK.eos_token_id]  # with the stop it ended on
    served = list(s.turn.response_token_ids)
    assert metrics["teacher_targets"] == [] and len(metrics["teacher_targets_refused"]) == 1
    assert metrics["kl_tokens"] == int(untaught_positions(served, reply).sum()) < len(served)
