"""The hinted teacher's own reply as a distillation target says where it ends: a reply the teacher
finished is taught with its end-of-turn; one cut at ``teacher_max_tokens`` is not taught at all
(``teacher_unfinished=drop``, the default) or without an end (``prefix``).

Why it matters: a correction asking for shorter answers had made held-out answers longer. The
target was the teacher's reply without its end-of-turn, so the short answer's words were taught and
its stop never was, and a reply cut at the limit was taught as if the hint led to it.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from test_trainer import TOK, CharTokenizer, sample, tiny_model  # noqa: E402

from ratchet.online.trainer import Trainer, TrainerConfig  # noqa: E402

HINT = "zz"
EOS = CharTokenizer.eos_token_id


def _ids(messages: list[dict], reply: str) -> list[int]:
    return TOK.apply_chat_template(messages) + TOK.encode(reply)


def short_when_hinted_model():
    """A tiny base model that answers "abcabcabc" and stops, and, told the hint, answers "abc" and stops."""
    model = tiny_model()
    plain = [{"role": "user", "content": q} for q in ("q", "r", "s")]
    hinted = {"role": "user", "content": f"q\n\n{HINT}"}
    rows = [_ids([m], "abcabcabc") + [EOS] for m in plain] + [_ids([hinted], "abc") + [EOS]]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        loss = 0.0
        for row in rows:
            ids = torch.tensor([row])
            loss = loss + model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return model


def make(**overrides) -> Trainer:
    settings = {"lora_r": 4, "lora_alpha": 8, "learning_rate": 5e-3, "batch_size": 4, "micro_batch_size": 4,
                "convert_gguf": False, "kl_samples": 0, "num_threads": 1, "signal": "combine",
                "distill_target": "teacher", "opd_topk": 4, "teacher_max_tokens": 12, "teacher_filter": "none"}
    settings.update(overrides)
    return Trainer(TrainerConfig(**settings), short_when_hinted_model(), CharTokenizer())


def eos_logprob(trainer: Trainer, prompt: str, prefix: str) -> float:
    """log p(end-of-turn | prompt, reply so far) under the student."""
    ids = _ids([{"role": "user", "content": prompt}], prefix) + [EOS]
    return float(trainer.score([ids], [len(ids) - 1])[0][-1])


def test_the_tiny_teacher_stops_where_the_hint_says() -> None:
    # The setting the tests below rely on: the hinted teacher finishes "abc"; the student goes on.
    trainer = make()
    hinted = TOK.apply_chat_template([{"role": "user", "content": f"q\n\n{HINT}"}])
    plain = TOK.apply_chat_template([{"role": "user", "content": "q"}])
    teacher, student = trainer.greedy_replies([hinted, plain], 12, base=True)
    assert (teacher.ids, teacher.stop) == (TOK.encode("abc"), EOS)
    assert student.ids[:9] == TOK.encode("abcabcabc")
    cut = trainer.greedy_replies([plain], 5, base=True)[0]
    assert cut.stop is None and len(cut.ids) == 5


def test_a_finished_teacher_reply_is_taught_with_its_end_of_turn() -> None:
    trainer = make()
    s = sample("q", "abcabcabc", -1, hint=HINT)
    items, _ = trainer.prepare([s])
    hinted = [it for it in items if it.teacher_ids is not None]
    starts = [len(it.teacher_ids) - (len(it.input_ids) - it.response_start) for it in hinted]
    taught, refused, unfinished = trainer._teacher_replies(hinted, starts)
    it = hinted[0]
    assert len(taught) == 1 and refused == [] and unfinished == []
    assert it.distill_ids[it.distill_start:] == TOK.encode("abc") + [EOS]
    assert it.teacher_reply == TOK.encode("abc") + [EOS]
    # The teacher's own top token at the end of its reply is the end-of-turn it wrote.
    assert int(it.teacher_topk[1][-1, 0]) == EOS


def test_a_teacher_reply_cut_at_the_limit_is_not_taught_by_default() -> None:
    trainer = make(teacher_max_tokens=2, teacher_length="fixed")  # "ab", then the limit: the teacher never got to its end
    metrics = trainer.step([sample("q", "abcabcabc", -1, hint=HINT)])
    assert metrics["teacher_targets"] == [] and len(metrics["teacher_targets_unfinished"]) == 1
    assert metrics["updated"]  # the sample still teaches by its reward


def test_a_teacher_reply_cut_at_the_limit_is_taught_without_an_end_as_a_prefix() -> None:
    trainer = make(teacher_max_tokens=2, teacher_unfinished="prefix", teacher_length="fixed")  # "ab", then the limit
    items, _ = trainer.prepare([sample("q", "abcabcabc", -1, hint=HINT)])
    hinted = [it for it in items if it.teacher_ids is not None]
    starts = [len(it.teacher_ids) - (len(it.input_ids) - it.response_start) for it in hinted]
    taught, refused, unfinished = trainer._teacher_replies(hinted, starts)
    assert len(taught) == 1 and len(unfinished) == 1 and refused == []
    [it] = hinted
    # The target is the part the teacher wrote: no end-of-turn where the teacher did not stop.
    assert it.distill_ids[it.distill_start:] == TOK.encode("ab")


def test_the_teacher_may_write_as_long_as_the_served_reply_by_default() -> None:
    # The same least limit of 2 tokens: the served reply "abcabcabc" gives the teacher room to
    # finish "abc" with its end-of-turn, which a fixed limit cut (the test above).
    trainer = make(teacher_max_tokens=2)
    items, _ = trainer.prepare([sample("q", "abcabcabc", -1, hint=HINT)])
    hinted = [it for it in items if it.teacher_ids is not None]
    starts = [len(it.teacher_ids) - (len(it.input_ids) - it.response_start) for it in hinted]
    taught, refused, unfinished = trainer._teacher_replies(hinted, starts)
    assert (len(taught), refused, unfinished) == (1, [], [])
    assert hinted[0].distill_ids[hinted[0].distill_start:] == TOK.encode("abc") + [EOS]


def test_a_correction_asking_for_shorter_teaches_the_stop_and_never_lengthens() -> None:
    # The served reply runs on where the hinted teacher stops; the update must raise the student's
    # end-of-turn there (the target's end and the token the served reply parts at), and a held-out
    # prompt's greedy reply must not grow.
    trainer = make()
    heldout = TOK.apply_chat_template([{"role": "user", "content": "r"}])
    before_len = len(trainer.greedy_ids([heldout], 12)[0])
    before, before_heldout = eos_logprob(trainer, "q", "abc"), eos_logprob(trainer, "r", "abc")
    s = sample("q", "abcabcabc", -1, hint=HINT)
    for _ in range(8):
        metrics = trainer.step([s])
        assert metrics["updated"] and len(metrics["teacher_targets"]) == 1
    after, after_heldout = eos_logprob(trainer, "q", "abc"), eos_logprob(trainer, "r", "abc")
    assert after > before + 1.0, (before, after)
    assert after_heldout >= before_heldout, (before_heldout, after_heldout)
    assert len(trainer.greedy_ids([heldout], 12)[0]) <= before_len


def test_the_served_reply_parts_from_the_teacher_where_the_teacher_stopped() -> None:
    # Parting credit: the correction's -1 lands on the token that went on past the teacher's stop
    # (without the stop in the teacher's reply the served one never parted from it: no reward at all).
    metrics = make().step([sample("q", "abcabcabc", -1, hint=HINT)])
    assert metrics["rl_credit"] == "parting" and metrics["rl_tokens"] == 1


@pytest.mark.real_model
def test_smollm2_a_shorter_correction_does_not_lower_the_stop_where_the_teacher_stopped() -> None:
    # The real small model, its hinted teacher asked for one sentence: after one update on the
    # corrected turns the student's end-of-turn where the teacher ended must not fall.
    from ratchet.models.registry import is_verified
    from ratchet.online.records import Judgement, Sample, Turn
    from ratchet.online.scoring import chat_ids

    if not is_verified("smollm2-135m", rehash=False):
        pytest.skip("smollm2-135m is not pulled (ratchet models pull smollm2-135m)")
    trainer = Trainer.from_config(TrainerConfig(model="smollm2-135m", convert_gguf=False, kl_samples=0, num_threads=1))
    hint = "One sentence only, please."
    questions = ["What is JSON?", "What is a for loop?", "What does HTTP stand for?", "What is an integer?"]
    plain = [chat_ids(trainer.tokenizer, [{"role": "user", "content": q}]) for q in questions]
    hinted = [chat_ids(trainer.tokenizer, [{"role": "user", "content": f"{q}\n\n{hint}"}]) for q in questions]
    served = trainer.greedy_replies(plain, 64)
    teacher = trainer.greedy_replies(hinted, trainer.config.teacher_max_tokens, base=True)
    ended = [(p, r) for p, r in zip(plain, teacher, strict=True) if r.stop is not None]
    assert ended, "the hinted SmolLM2 ended none of its replies within the limit"
    logps = trainer.score([p + r.ids for p, r in zip(plain, served, strict=True)], [len(p) for p in plain])
    samples = [Sample(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": q}], "", p, r.ids,
                           [float(x) for x in lp], 0), Judgement(f"t{i}", -1, [-1], hint, "Too long.", "rule"))
               for i, (q, p, r, lp) in enumerate(zip(questions, plain, served, logps, strict=True))]

    def eos() -> float:
        seqs = [p + r.ids + [r.stop] for p, r in ended]
        return sum(float(row[-1]) for row in trainer.score(seqs, [len(s) - 1 for s in seqs])) / len(seqs)

    before = eos()
    metrics = trainer.step(samples)
    assert metrics["updated"] and len(metrics["teacher_targets"]) + len(metrics["teacher_targets_refused"]) == len(ended)
    assert eos() >= before, (before, eos())


@pytest.mark.parametrize(("length", "served", "budgets"), [
    ("fixed", [3, 40, 500], [48, 48, 48]),
    # a quarter more than the served reply, rounded up to 16, within 48 .. 256
    ("served", [3, 40, 100, 500], [48, 64, 128, 256]),
])
def test_the_teachers_limit_per_reply(length: str, served: list[int], budgets: list[int]) -> None:
    from ratchet.online.teacher import teacher_budgets

    config = TrainerConfig(teacher_length=length)
    assert teacher_budgets(served, config) == budgets
