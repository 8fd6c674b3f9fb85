"""The trainer's mechanics on a tiny random Llama (built in memory, no model file, a few ms per step)."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from ratchet.online.evaluation import EvaluationHook, HeldOutCase  # noqa: E402
from ratchet.online.preparation import with_hint  # noqa: E402
from ratchet.online.queue import TurnQueue  # noqa: E402
from ratchet.online.records import Judgement, Sample, Turn  # noqa: E402
from ratchet.online.trainer import Trainer, TrainerConfig  # noqa: E402
from ratchet.online.trainer_loop import run_trainer_loop  # noqa: E402
from ratchet.online.versions import VersionStore  # noqa: E402


class CharTokenizer:
    """A byte-level tokenizer with a trivial chat template: enough for the trainer's needs."""

    pad_token_id = 0
    eos_token_id = 1

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [2 + (b % 60) for b in text.encode()]

    def decode(self, ids, skip_special_tokens=True) -> str:
        return "".join(chr(96 + int(i) % 26) for i in ids)

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True):
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + ("<assistant>" if add_generation_prompt else "")
        return self.encode(text)


def tiny_model():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    )
    return transformers.AutoModelForCausalLM.from_config(cfg).float()


def make_trainer(**overrides) -> Trainer:
    settings = dict(lora_r=4, lora_alpha=8, learning_rate=5e-3, batch_size=4, micro_batch_size=4,
                    convert_gguf=False, kl_samples=1, num_threads=1)
    settings.update(overrides)
    return Trainer(TrainerConfig(**settings), tiny_model(), CharTokenizer())


TOK = CharTokenizer()


def finish_teacher_replies(monkeypatch) -> None:
    """The random tiny model rarely writes its end-of-turn, and a teacher reply cut at the limit is
    not taught; for tests about what happens to a reply the teacher ended, the greedy reply it
    wrote up to the limit is taken as ended there."""
    from ratchet.online.scoring import GreedyReply

    real = Trainer.greedy_replies

    def finished(self, prompts, max_tokens, *, base=False):
        return [r if r.stop is not None else GreedyReply(r.ids, TOK.eos_token_id)
                for r in real(self, prompts, max_tokens, base=base)]

    monkeypatch.setattr(Trainer, "greedy_replies", finished)


def sample(prompt: str, response: str, reward: int, *, version: int = 0, hint: str | None = None,
           serving: list[float] | None = None, turn_id: str | None = None) -> Sample:
    messages = [{"role": "user", "content": prompt}]
    prompt_ids = TOK.apply_chat_template(messages)
    response_ids = TOK.encode(response)
    turn = Turn(
        turn_id=turn_id or f"t-{prompt}-{response}-{version}",
        session_id="s", session_inferred=False, turn_type="main", messages=messages,
        response_text=response, prompt_token_ids=prompt_ids, response_token_ids=response_ids,
        response_logprobs=serving if serving is not None else [-4.0] * len(response_ids),
        policy_version=version,
    )
    judgement = Judgement(turn_id=turn.turn_id, reward=reward, votes=[reward], hint=hint, next_state="...", judge="rule")
    return Sample(turn, judgement)


def logp(trainer: Trainer, prompt: str, response: str) -> float:
    return trainer.sequence_logprob([{"role": "user", "content": prompt}], response)


def test_binary_rl_raises_rewarded_and_lowers_corrected_responses() -> None:
    trainer = make_trainer(signal="rl")
    before_good, before_bad = logp(trainer, "q1", "ahoy"), logp(trainer, "q1", "hello")
    batch = [sample("q1", "ahoy", +1), sample("q1", "hello", -1), sample("q2", "ahoy", +1), sample("q2", "hello", -1)]
    for _ in range(4):
        metrics = trainer.step(batch)
    assert metrics["updated"] and metrics["samples"] == 4 and len(metrics["trained"]) == 4
    assert logp(trainer, "q1", "ahoy") > before_good
    assert logp(trainer, "q1", "hello") < before_bad
    # The adapter was the only thing trained: the base (adapter disabled) is untouched.
    assert trainer.sequence_logprob([{"role": "user", "content": "q1"}], "ahoy", base=True) == pytest.approx(before_good)


def test_zero_reward_is_excluded_from_rl_and_hint_only_samples_from_opd() -> None:
    trainer = make_trainer(signal="rl")
    metrics = trainer.step([sample("q", "x", 0, hint="say ahoy")])
    assert not metrics["updated"] and metrics["dropped"]["no_signal"] == 1
    opd = make_trainer(signal="opd")
    items, dropped = opd.prepare([sample("q", "x", 1), sample("q", "x", 0, hint="say ahoy")])
    assert dropped["no_signal"] == 1 and len(items) == 1 and items[0].teacher_ids is not None
    # The hint is appended to the last user message of the teacher's prompt.
    assert with_hint([{"role": "user", "content": "q"}], "say ahoy")[-1]["content"] == "q\n\nsay ahoy"


def test_the_hint_frame_places_the_hint_and_changes_nothing_else() -> None:
    convo = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first {x}"},
             {"role": "assistant", "content": "a"}, {"role": "user", "content": "what is {x}?"}]
    before = with_hint(convo, "say ahoy", "before")
    aside = with_hint(convo, "say ahoy", "aside")
    assert before[-1]["content"] == "say ahoy\n\nwhat is {x}?"  # braces in a request are kept as written
    assert aside[-1]["content"].startswith("what is {x}?\n\n(") and "say ahoy" in aside[-1]["content"]
    for framed in (before, aside):
        assert framed[:-1] == convo[:-1] and [m["role"] for m in framed] == [m["role"] for m in convo]
    assert convo[-1]["content"] == "what is {x}?"  # the served conversation is not touched
    # The trainer frames its teacher's prompt as configured.
    trainer = make_trainer(signal="opd", hint_frame="before")
    item = trainer.prepare([sample("q", "x", 0, hint="zz")])[0][0]
    framed = TOK.apply_chat_template(with_hint([{"role": "user", "content": "q"}], "zz", "before"))
    assert item.teacher_ids == framed + TOK.encode("x")
    assert framed != TOK.apply_chat_template(with_hint([{"role": "user", "content": "q"}], "zz"))


def test_opd_moves_the_policy_toward_the_teacher_with_hint() -> None:
    # The sampled-token advantage alone, one pass per update: the hinted tiny teacher is ~0.01 nats
    # per token from the student, and four passes at lr 1e-2 overshoot a target that close (gap
    # 0.46 after one update, measured); the direction is what this test is about.
    trainer = make_trainer(signal="opd", learning_rate=1e-2, opd_topk=0, w_opd=1.0, ppo_epochs=1)
    s = sample("q", "abcabc", 0, hint="zz")
    items, _ = trainer.prepare([s])
    it = items[0]
    start = len(it.teacher_ids) - (len(it.input_ids) - it.response_start)
    teacher = trainer.score([it.teacher_ids], [start], base=True)[0]
    gap_before = float((teacher - trainer.score([it.input_ids], [it.response_start])[0]).abs().mean())
    for _ in range(5):
        trainer.step([s])
    gap_after = float((teacher - trainer.score([it.input_ids], [it.response_start])[0]).abs().mean())
    assert gap_after < gap_before


def test_topk_distillation_pulls_the_policy_toward_the_hinted_teachers_top_tokens() -> None:
    trainer = make_trainer(signal="opd", learning_rate=5e-3, opd_topk=4, w_opd=0.0, distill_target="served",
                           taught="topk")
    s = sample("q", "abcabc", 0, hint="zz")
    it = trainer.prepare([s])[0][0]
    start = len(it.teacher_ids) - (len(it.input_ids) - it.response_start)
    values, index = trainer.teacher_topk([it.teacher_ids], [start], 4)[0]
    q = torch.softmax(values, -1)

    def kl() -> float:
        _, picked = trainer._response_logprobs([it.input_ids], [it.response_start], gather=[index])
        return float((q * (torch.log_softmax(values, -1) - picked[0])).sum())

    before = kl()
    for _ in range(10):
        metrics = trainer.step([s])
    assert metrics["distill_kl"] > 0
    assert kl() < before - 0.5  # a tiny random model: its top-k is nearly flat, so the KL falls slowly
    # The teacher's tokens are its own top-k: the base with the hint, not the trained adapter.
    assert torch.equal(trainer.teacher_topk([it.teacher_ids], [start], 4)[0][1], index)


def test_greedy_generation_for_the_gate_follows_the_adapter_and_can_use_the_base() -> None:
    trainer = make_trainer(learning_rate=5e-2)
    messages = [{"role": "user", "content": "q"}]
    before = trainer.generate(messages, 6)
    assert isinstance(before, str) and trainer.generate(messages, 6) == before  # greedy: deterministic
    for _ in range(3):
        trainer.step([sample("q", "ahoy", 1)])
    assert trainer.generate(messages, 6, base=True) == before


def test_stale_samples_are_dropped_and_recent_ones_kept() -> None:
    trainer = make_trainer(max_staleness=2)
    trainer.version = 5
    metrics = trainer.step([sample("q", "a", 1, version=2), sample("q", "b", 1, version=3), sample("q", "c", 1, version=5)])
    assert metrics["dropped"]["stale"] == 1 and metrics["samples"] == 2


def test_importance_weight_corrects_toward_the_serving_policy_and_is_capped() -> None:
    trainer = make_trainer(is_cap=2.0)
    # Serving log-probs far below the trainer's: the weight π_trainer/π_serve is huge, so capped at 2.
    metrics = trainer.step([sample("q", "abc", 1, serving=[-30.0, -30.0, -30.0])])
    assert metrics["is_weight_mean"] == pytest.approx(2.0)
    assert metrics["serving_gap_mean"] > 20
    # Serving log-probs far above: weight e^(prox - serve) < 1 shrinks the update.
    trainer2 = make_trainer(is_cap=2.0)
    metrics2 = trainer2.step([sample("q", "abc", 1, serving=[0.0, 0.0, 0.0])])
    assert 0 < metrics2["is_weight_mean"] < 0.2
    # The weight scales the objective itself: same sample, same start, smaller weight, smaller |objective|.
    assert abs(metrics2["objective"]) < abs(metrics["objective"])


def test_micro_batches_accumulate_to_the_whole_batch_token_mean() -> None:
    batch = [sample("q1", "ahoy there", 1), sample("q2", "no", -1), sample("q333", "hello", -1)]
    whole, split = make_trainer(micro_batch_size=4), make_trainer(micro_batch_size=1)
    whole.step(batch)
    split.step(batch)
    a, b = whole.lora_state(), split.lora_state()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5), key


def test_every_pass_of_an_update_takes_its_ratio_against_the_weights_before_it(monkeypatch) -> None:
    # ppo_epochs > 1: π_prox stays the log-probs of the weights the update started from, not those
    # the passes move to. Two micro-batches: the first pass runs both before the optimizer steps.
    batch = [sample("q1", "ahoy there", 1), sample("q2", "no", -1), sample("q333", "hello", -1)]
    trainer = make_trainer(ppo_epochs=3, micro_batch_size=2, learning_rate=5e-2)
    items, _ = trainer.prepare(batch)
    before = dict(zip([it.turn_id for it in items],
                      trainer.score([it.input_ids for it in items], [it.response_start for it in items]), strict=True))
    seen = []
    real = trainer._policy_terms

    def recording(it, lp, plan, tally, *, first_epoch):
        terms = real(it, lp, plan, tally, first_epoch=first_epoch)
        seen.append((it.turn_id, first_epoch, lp.detach().clone(), terms[1].clone()))
        return terms

    monkeypatch.setattr(trainer, "_policy_terms", recording)
    assert trainer.step(batch)["optimizer_steps"] == 3 and len(seen) == 9
    for turn_id, first, lp, prox in seen:
        assert torch.allclose(prox, before[turn_id], atol=1e-5), turn_id
        assert torch.allclose(lp, prox, atol=1e-5) == first  # the later passes see moved weights


def test_reply_only_projection_matches_full_logits() -> None:
    trainer = make_trainer()
    trainer.step([sample("q", "ahoy", 1)])  # a non-zero adapter, so LoRA layers take part
    seqs, starts = [[5, 6, 7, 8, 9, 10], [3, 4, 5, 6]], [3, 2]
    assert trainer._head_split()[0] is not None
    fast = trainer._response_logprobs(seqs, starts)
    trainer._head_split = lambda: (None, None)  # type: ignore[method-assign]
    full = trainer._response_logprobs(seqs, starts)
    assert [x.shape[0] for x in fast] == [3, 2]
    for a, b in zip(fast, full, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_adapter_save_load_and_reset_round_trip(tmp_path) -> None:
    trainer = make_trainer()
    trainer.step([sample("q", "ahoy", 1)])
    trained = logp(trainer, "q", "ahoy")
    trainer.save_adapter(tmp_path / "a")
    trainer.reset_to_base()
    assert trainer.version == 0
    assert logp(trainer, "q", "ahoy") == pytest.approx(trainer.sequence_logprob([{"role": "user", "content": "q"}], "ahoy", base=True))
    trainer.load_adapter(tmp_path / "a", 7)
    assert trainer.version == 7 and logp(trainer, "q", "ahoy") == pytest.approx(trained, abs=1e-5)


def test_trainer_loop_publishes_versions_follows_rollback_and_gates_regressions(tmp_path) -> None:
    trainer = make_trainer(signal="rl", batch_size=2, min_batch=2, poll_interval_s=0.05, learning_rate=2e-2)
    queue = TurnQueue(tmp_path / "queue.sqlite")
    store = VersionStore(tmp_path / "versions")
    cases = [HeldOutCase([{"role": "user", "content": "held"}], preferred="ahoy", dispreferred="hello")]

    def feed(pairs):
        for s in pairs:
            queue.add_turn(s.turn)
            queue.set_next_state(s.turn.turn_id, "thanks")
            queue.add_judgement(s.judgement)

    records: list[dict] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=run_trainer_loop, args=(trainer.config, queue.path, store.root, stop, records.append),
        kwargs={"trainer": trainer, "hook": EvaluationHook(cases, tolerance=0.0)}, daemon=True,
    )
    thread.start()
    try:
        # Good feedback: the version improves the held-out margin and is promoted.
        feed([sample("a", "ahoy", 1, turn_id="g1"), sample("b", "hello", -1, turn_id="g2")])
        _wait(lambda: len(records) >= 1)
        assert records[0]["promoted"] and store.current_number() == records[0]["version"] == 1
        assert records[0]["evaluation"]["score"] > records[0]["evaluation"]["baseline"]
        assert "kl_to_base" in records[0] and records[0]["kl_to_base"] >= 0
        assert queue.stats()["trained"] == 2
        # Adversarial feedback: the update hurts the held-out margin, so it is kept but not served.
        feed([sample("a", "ahoy", -1, turn_id="b1"), sample("b", "hello", 1, turn_id="b2")])
        _wait(lambda: len(records) >= 2)
        assert not records[1]["promoted"] and store.current_number() == 1
        assert not store.get(2).promoted and trainer.version == 1
        # A rollback to the base is followed by the trainer before its next update.
        store.rollback(0)
        _wait(lambda: trainer.version == 0)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


def _wait(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def test_distillation_on_the_hinted_teachers_own_reply(monkeypatch) -> None:
    finish_teacher_replies(monkeypatch)
    # distill_target=teacher: the base with the hint writes its greedy reply, and the student
    # (no hint) is pulled toward the teacher's top-k along THAT reply, not along the served one.
    trainer = make_trainer(signal="opd", learning_rate=5e-3, opd_topk=4, w_opd=0.0, distill_target="teacher",
                           teacher_max_tokens=5, taught="topk")
    s = sample("q", "abcabc", -1, hint="zz")
    it = trainer.prepare([s])[0][0]
    teacher_prompt = it.teacher_ids[: len(it.teacher_ids) - (len(it.input_ids) - it.response_start)]
    reply = trainer.greedy_ids([teacher_prompt], 5, base=True)[0]
    assert 0 < len(reply) <= 5
    own = it.input_ids[: it.response_start] + reply
    values, index = trainer.teacher_topk([teacher_prompt + reply], [len(teacher_prompt)], 4)[0]
    q = torch.softmax(values, -1)

    def kl() -> float:
        with torch.no_grad():
            _, picked = trainer._response_logprobs([own], [it.response_start], gather=[index])
        return float((q * (torch.log_softmax(values, -1) - picked[0])).sum())

    before = kl()
    for _ in range(10):
        metrics = trainer.step([s])
    assert metrics["updated"] and metrics["distill_kl"] > 0
    assert kl() < before - 0.5


def test_a_hint_the_turn_already_states_is_not_distilled() -> None:
    # A retry after a correction: the user's last message already says what the hint says, so the
    # hinted teacher knows nothing the student does not; distilling it would only pull the student
    # toward the base's own reply there (measured on the 0.5B: a refusal).
    correction = "No, that's not how I asked. Always start with 'Ahoy!'. Please answer again."
    base = sample("q", "x", -1, hint="Always start with 'Ahoy!'.")
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"},
                {"role": "user", "content": correction}]
    retry = Sample(dataclasses.replace(base.turn, messages=messages, prompt_token_ids=TOK.apply_chat_template(messages)),
                   base.judgement)
    first = sample("q", "x", -1, hint="Always start with 'Ahoy!'.")
    items, dropped = make_trainer(signal="opd").prepare([retry, first])
    assert dropped["no_signal"] == 1 and dropped["hint_already_asked"] == 1
    assert len(items) == 1 and items[0].teacher_ids is not None
    # Combine keeps the retry for its reward, without a teacher.
    items, dropped = make_trainer(signal="combine").prepare([retry])
    assert dropped["no_signal"] == 0 and items[0].teacher_ids is None and items[0].reward == -1.0


def test_prepare_works_out_each_samples_signal_once(monkeypatch) -> None:
    # Whether the hint was already asked decides both the drop count and the teacher: one look.
    from ratchet.online import preparation

    looks: list[str] = []

    def counting(messages, hint):
        looks.append(hint)
        return already_asked(messages, hint)

    already_asked = preparation.already_asked
    monkeypatch.setattr(preparation, "already_asked", counting)
    items, dropped = make_trainer(signal="combine").prepare([sample("q", "x", -1, hint="say ahoy")])
    assert looks == ["say ahoy"]
    assert dropped["hint_already_asked"] == 0 and items[0].teacher_ids is not None


def test_answers_only_refuses_a_teacher_reply_that_hands_the_turn_back() -> None:
    from ratchet.online.targets import AnswersOnly, KeepAll

    rule = AnswersOnly()
    # The hinted 0.5B's non-answers, as measured.
    assert not rule.keep("Ahoy! How can I reverse a string in Python?")
    assert not rule.keep("Ahoy! I'm here to help you with any questions or tasks you might have. What do you need "
                         "assistance with?")
    assert not rule.keep("  ")
    assert rule.keep("Ahoy! HTTP stands for Hypertext Transfer Protocol.")
    assert rule.keep("Ahoy! A Python list is a collection of items that are ordered and can contain")  # cut mid-answer
    assert KeepAll().keep("Ahoy! How can I help?")


def test_answers_only_refuses_a_teacher_reply_that_refuses_behind_the_greeting() -> None:
    from ratchet.online.targets import AnswersOnly

    rule = AnswersOnly()
    # Passed the rule (and was taught) before it read past the greeting, as measured on the 0.5B.
    assert not rule.keep("Ahoy! I'm sorry, but I can't assist with that.")
    assert not rule.keep("Ahoy! I\u2019m sorry, but I can\u2019t help with that")  # curly apostrophes, no stop
    assert not rule.keep("I cannot help with that request.")
    assert not rule.keep("Ahoy!\n\nSorry, I am unable to answer.")
    # An answer that mentions an apology mid-sentence still teaches.
    assert rule.keep("Ahoy! In French, \"I'm sorry\" is \"je suis désolé\".")
    assert rule.keep("Ahoy! A Python list is a collection of items that are ordered")


@pytest.mark.parametrize("refuse", [True, False])
def test_a_refused_teacher_target_is_not_distilled(monkeypatch, refuse) -> None:
    finish_teacher_replies(monkeypatch)
    import ratchet.online.trainer as trainer_module

    class Rule:
        name = "test"

        def keep(self, target: str) -> bool:
            return not refuse

    monkeypatch.setattr(trainer_module, "target_filter", lambda name: Rule())
    trainer = make_trainer(signal="opd", opd_topk=4, w_opd=0.0, distill_target="teacher", teacher_max_tokens=5)
    before = trainer.lora_state()
    metrics = trainer.step([sample("q", "abcabc", -1, hint="zz")])
    moved = any(not torch.equal(before[k], v) for k, v in trainer.lora_state().items())
    if refuse:  # nothing else to learn from (w_opd=0): the weights stay where they were
        assert metrics["teacher_targets"] == [] and len(metrics["teacher_targets_refused"]) == 1
        assert metrics["distill_kl"] == 0 and not moved
    else:
        assert len(metrics["teacher_targets"]) == 1 and metrics["teacher_targets_refused"] == []
        assert metrics["distill_kl"] > 0 and moved


class ToolTokenizer(CharTokenizer):
    """A chat template that renders the offered tools first and closes each assistant message with
    its own end-of-turn token (62), as Qwen's closes with ``<|im_end|>`` rather than its eos."""

    END = 62

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True, tools=None):
        ids = self.encode("<tools>" + ",".join(t["function"]["name"] for t in tools)) if tools else []
        for m in messages:
            ids += self.encode(f"<{m['role']}>{m['content']}") + ([self.END] if m["role"] == "assistant" else [])
        return ids + (self.encode("<assistant>") if add_generation_prompt else [])


def tool_trainer(**overrides) -> Trainer:
    settings = {"lora_r": 4, "lora_alpha": 8, "batch_size": 4, "micro_batch_size": 4, "convert_gguf": False,
                "kl_samples": 1, "num_threads": 1, **overrides}
    model = tiny_model()
    model.generation_config.eos_token_id = [ToolTokenizer.eos_token_id, ToolTokenizer.END]
    return Trainer(TrainerConfig(**settings), model, ToolTokenizer())


TOOLS = [{"type": "function", "function": {"name": "run_tests", "description": "", "parameters": {"type": "object"}}}]


def test_the_hinted_teacher_sees_the_tools_the_served_prompt_showed() -> None:
    tok = ToolTokenizer()
    messages = [{"role": "user", "content": "fix it"}]
    served = sample("fix it", "call", -1, hint="Run the tests first.")
    turn = dataclasses.replace(served.turn, tools=TOOLS, finish_reason="tool_calls",
                               prompt_token_ids=tok.apply_chat_template(messages, tools=TOOLS))
    (item,), _ = tool_trainer(signal="opd").prepare([Sample(turn, served.judgement)])
    start = len(item.teacher_ids) - (len(item.input_ids) - item.response_start)
    assert item.input_ids[: item.response_start] == turn.prompt_token_ids  # the student: the served prompt
    assert item.teacher_ids[:start] == tok.apply_chat_template(with_hint(messages, "Run the tests first."), tools=TOOLS)
    assert item.teacher_ids[:start] != tok.apply_chat_template(with_hint(messages, "Run the tests first."))


def test_a_reply_that_stopped_is_scored_with_the_templates_end_of_turn_token() -> None:
    trainer = tool_trainer()
    tok = trainer.tokenizer
    assert trainer.end_of_turn_id() == ToolTokenizer.END  # the template's, not the eos (1)
    messages = [{"role": "user", "content": "q"}]
    prompt = tok.apply_chat_template(messages, tools=TOOLS)
    words = tok.encode("ab")
    ended = trainer.score([prompt + words + [ToolTokenizer.END]], [len(prompt)])[0]
    assert trainer.mean_token_logprob(messages, "ab", end_of_turn=True, tools=TOOLS) == pytest.approx(float(ended.mean()))
    assert trainer.mean_token_logprob(messages, "ab", tools=TOOLS) == pytest.approx(float(ended[:-1].mean()))
    plain = make_trainer()
    assert plain.end_of_turn_id() == CharTokenizer.eos_token_id  # a template with no stop token: the eos
