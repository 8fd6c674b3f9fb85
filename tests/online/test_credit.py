"""Where the Binary RL reward lands (``trainer.rl_credit``): every token, or only where a corrected
reply parts from the hinted teacher's own reply."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from test_trainer import make_trainer, sample  # noqa: E402  (the tiny random Llama and its samples)

from ratchet.online.credit import PartingToken, WholeReply, reward_credit  # noqa: E402


def test_parting_puts_a_correction_on_the_token_where_the_replies_part() -> None:
    rule = PartingToken()
    assert rule.mask(-1, [5, 2, 3], [1, 2, 3]).tolist() == [1, 0, 0]  # the opening, not the answer after it
    assert rule.mask(-1, [1, 2, 9, 4], [1, 2, 3, 4]).tolist() == [0, 0, 1, 0]
    assert rule.mask(-1, [1, 2], [1, 2, 3]).tolist() == [0, 0]  # the teacher writes the same: nothing to blame
    assert rule.mask(-1, [1, 2, 3, 4], [1, 2]).tolist() == [0, 0, 0, 0]  # the teacher stopped: no parting known
    assert rule.mask(-1, [1, 2, 3], None).tolist() == [1, 1, 1]  # no teacher reply: the whole reply
    assert rule.mask(1, [5, 2, 3], [1, 2, 3]).tolist() == [1, 1, 1]  # praise: the user wants all of it
    assert WholeReply().mask(-1, [5, 2, 3], [1, 2, 3]).tolist() == [1, 1, 1]
    assert reward_credit("parting").name == "parting" and reward_credit("reply").name == "reply"


def _teacher_reply(trainer, s, tokens: int) -> list[int]:
    it = trainer.prepare([s])[0][0]
    prompt = it.teacher_ids[: len(it.teacher_ids) - (len(it.input_ids) - it.response_start)]
    return trainer.greedy_ids([prompt], tokens, base=True)[0]


def _with_response(s, response: list[int]):
    turn = dataclasses.replace(s.turn, response_token_ids=response, response_logprobs=[-4.0] * len(response))
    return dataclasses.replace(s, turn=turn)


@pytest.mark.parametrize("credit", ["reply", "parting"])
def test_the_trainer_applies_the_reward_only_where_the_rule_says(credit: str) -> None:
    # Only the RL term of combine (no distillation, no sampled-token OPD), so a zero mask is no update.
    settings = dict(signal="combine", w_opd=0.0, w_distill=0.0, opd_topk=4, distill_target="teacher",
                    teacher_max_tokens=6, teacher_filter="none", rl_credit=credit)
    probe = make_trainer(**settings)
    corrected = sample("q", "abcabc", -1, hint="zz")
    reply = _teacher_reply(probe, corrected, 6)
    assert len(reply) >= 4, reply
    # A served reply the teacher, told the correction, writes too: under parting nothing to blame.
    same = make_trainer(**settings)
    before = {k: v.clone() for k, v in same.lora_state().items()}
    metrics = same.step([_with_response(corrected, list(reply))])
    moved = any(not torch.equal(before[k], v) for k, v in same.lora_state().items())
    assert metrics["rl_credit"] == credit
    assert metrics["rl_tokens"] == (0 if credit == "parting" else len(reply))
    assert moved == (credit == "reply")
    # One that parts at its third token: the correction lands there alone.
    other = (reply[2] + 1) % 60 + 2
    parted = reply[:2] + [other] + reply[3:]
    metrics = make_trainer(**settings).step([_with_response(corrected, parted)])
    assert metrics["rl_tokens"] == (1 if credit == "parting" else len(parted))
    # Praise keeps every token under both.
    praised = sample("q", "abcabc", 1)
    assert make_trainer(**settings).step([praised])["rl_tokens"] == len(praised.turn.response_token_ids)
