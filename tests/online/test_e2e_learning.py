"""End to end with the real 0.5B: users praise one behaviour and correct another, the model learns it.

The fixed behaviour: replies that greet with "Ahoy!" are praised ("Thanks, perfect."), replies that
greet with "Hello!" are corrected ("No, I told you to always greet me with Ahoy! ..."). The answer
after the greeting is the served model's own greedy answer. Each reply is recorded as serving
would record it: llama.cpp's chat-template prompt ids, the reply's token ids and their log-probs
under the served (quantized) GGUF from raw logits, policy version 0. The serving side's rule judge
turns the users' next messages into rewards and hindsight hints. The trainer then runs a few
combined Binary-RL + distillation updates with torch on CPU, the adapter is converted to a GGUF
LoRA, and on HELD-OUT questions the served model (llama.cpp + adapter) and the trainer both give
the praised greeting ("Ahoy!") a higher log-probability and the corrected one ("Hello!") a lower
one than before. (The greeting is the behaviour; the answers after it are the model's own content,
and their log-probability may move either way.)

Settings, chosen to fit ~5 minutes on 2 cores: LoRA r=8, alpha=16 on all seven projections; lr 2e-3
(20x the default, to learn from 16 samples); 4 updates of 8 samples (two passes over the shuffled
samples, half of them per update); answers of at most 10 tokens; 2 torch threads. The samples stay at policy version 0 while the trainer moves,
so updates 2-4 are off-policy and corrected by the truncated importance weight.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
llama_cpp = pytest.importorskip("llama_cpp")

from ratchet.models.registry import cached_path, is_verified  # noqa: E402
from ratchet.online.judge import RuleJudge  # noqa: E402
from ratchet.online.llama_policy import LlamaPolicy  # noqa: E402
from ratchet.online.lora_gguf import convert_adapter  # noqa: E402
from ratchet.online.records import Sample, Turn  # noqa: E402
from ratchet.online.sampling import log_softmax  # noqa: E402
from ratchet.online.trainer import Trainer, TrainerConfig  # noqa: E402

MODEL = "qwen2.5-coder-0.5b"

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.slow,
    pytest.mark.skipif(not is_verified(MODEL, rehash=False), reason=f"{MODEL} not pulled (ratchet models pull {MODEL})"),
]

TRAIN = [
    "What is a Python list?", "How do I reverse a string in Python?", "What does git commit do?",
    "What is a for loop?", "What is JSON?", "How do I read a file in Python?",
    "What is a dictionary in Python?", "What does HTTP stand for?",
]
HELDOUT = ["What is a tuple in Python?", "How do I sort a list in Python?", "What is recursion?",
           "What is a variable?"]
PRAISED, CORRECTED = "Ahoy! ", "Hello! "


def user_next_message(reply: str) -> str:
    """The scripted user: happy with the pirate greeting, corrects anything else."""
    if reply.startswith("Ahoy"):
        return "Thanks, perfect."
    return "No, I told you to always greet me with Ahoy! Please start your replies with Ahoy!"


class ServedScorer:
    """log p(reply | prompt) under llama.cpp from raw logits, by teacher forcing (as serving records it)."""

    def __init__(self, gguf, lora=None) -> None:
        self.llm = llama_cpp.Llama(model_path=str(gguf), lora_path=str(lora) if lora else None, n_ctx=256,
                                   n_threads=2, n_batch=256, logits_all=True, verbose=False)

    def tokenize(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode(), add_bos=False, special=False)

    def token_logprobs(self, prompt_ids: list[int], reply_ids: list[int]) -> list[float]:
        self.llm.reset()
        self.llm.eval(prompt_ids + reply_ids)
        scores = np.asarray(self.llm.scores[: len(prompt_ids) + len(reply_ids)], dtype=np.float64)
        start = len(prompt_ids)
        return [float(log_softmax(scores[start - 1 + i])[tok]) for i, tok in enumerate(reply_ids)]

    def close(self) -> None:
        self.llm.close()


def _progress(label: str, since: float) -> float:
    # Visible with ``pytest -s``: where the minutes of this test go.
    now = time.perf_counter()
    print(f"[e2e] {label}: {now - since:.1f}s", flush=True)
    return now


def test_users_feedback_teaches_the_served_model_on_heldout_prompts(tmp_path) -> None:
    timings: dict[str, float] = {}
    gguf = cached_path(MODEL)
    t0 = time.perf_counter()
    policy = LlamaPolicy(gguf, n_ctx=512, n_threads=2)
    messages = {q: [{"role": "user", "content": q}] for q in TRAIN + HELDOUT}
    answers = {q: policy.generate(messages[q], max_tokens=10).text.strip() for q in TRAIN + HELDOUT}
    prompt_ids = {q: policy.prompt_tokens(messages[q]) for q in TRAIN + HELDOUT}
    policy.close()
    timings["generate_s"] = time.perf_counter() - t0

    served = ServedScorer(gguf)
    judge = RuleJudge(hint_style="followup")  # the hint these margins were measured with
    samples = []
    for i, q in enumerate(TRAIN):
        for greeting in (PRAISED, CORRECTED):
            reply = greeting + answers[q]
            reply_ids = served.tokenize(reply)
            turn = Turn(
                turn_id=f"e2e-{i}-{greeting.strip('! ')}", session_id=f"user-{i}", session_inferred=False,
                turn_type="main", messages=messages[q], response_text=reply, prompt_token_ids=prompt_ids[q],
                response_token_ids=reply_ids, response_logprobs=served.token_logprobs(prompt_ids[q], reply_ids),
                policy_version=0,
            )
            samples.append(Sample(turn, judge.judge(turn, user_next_message(reply))))
    assert sorted(s.judgement.reward for s in samples) == [-1] * 8 + [1] * 8
    assert all(s.judgement.hint for s in samples if s.judgement.reward < 0)

    def heldout_served(scorer) -> tuple[float, float]:
        # The behaviour is the greeting: score log p(greeting | prompt) on held-out questions.
        pref = [sum(scorer.token_logprobs(prompt_ids[q], scorer.tokenize(PRAISED.strip()))) for q in HELDOUT]
        disp = [sum(scorer.token_logprobs(prompt_ids[q], scorer.tokenize(CORRECTED.strip()))) for q in HELDOUT]
        return float(np.mean(pref)), float(np.mean(disp))

    served_before = heldout_served(served)
    served.close()
    _progress("served log-probs of 16 replies + held-out", t0)

    t0 = time.perf_counter()
    config = TrainerConfig(
        model=str(gguf), num_threads=2, signal="combine", lora_r=8, lora_alpha=16, learning_rate=2e-3,
        batch_size=8, micro_batch_size=4, max_staleness=4, convert_gguf=True,
        # The margins asserted below were measured with distillation along the served replies,
        # with the sampled-token term on, the teacher's top-k taught and Binary RL on every token.
        distill_target="served", w_opd=1.0, taught="topk", rl_credit="reply",
        # ... and with the 0.5B's own base as the hinted teacher, whatever else is pulled here.
        teacher_model=None,
    )
    trainer = Trainer.from_config(config)
    timings["trainer_load_s"] = time.perf_counter() - t0
    _progress("trainer load", t0)

    def heldout_trainer() -> tuple[float, float]:
        ids = lambda text: trainer.tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
        seqs_p = [prompt_ids[q] + ids(PRAISED.strip()) for q in HELDOUT]
        seqs_d = [prompt_ids[q] + ids(CORRECTED.strip()) for q in HELDOUT]
        starts = [len(prompt_ids[q]) for q in HELDOUT]
        pref = [float(x.sum()) for x in trainer.score(seqs_p, starts)]
        disp = [float(x.sum()) for x in trainer.score(seqs_d, starts)]
        return float(np.mean(pref)), float(np.mean(disp))

    trainer_before = heldout_trainer()
    order = np.random.default_rng(0).permutation(len(samples))
    t0 = time.perf_counter()
    steps = []
    for step in range(4):
        idx = order[(step % 2) * 8 : (step % 2) * 8 + 8]
        steps.append(trainer.step([samples[i] for i in idx]))
        _progress(f"update {step + 1}", t0)
    timings["train_s"] = time.perf_counter() - t0
    assert all(m["updated"] and m["samples"] == 8 for m in steps)
    # Update 1 is on-policy up to the quantization gap; later ones correct real staleness.
    assert 0.3 < steps[0]["is_weight_mean"] <= config.is_cap
    trainer_after = heldout_trainer()

    adapter = trainer.save_adapter(tmp_path / "adapter")
    lora = convert_adapter(adapter, gguf, tmp_path / "adapter.gguf")
    served_lora = ServedScorer(gguf, lora)
    served_after = heldout_served(served_lora)
    served_lora.close()
    _progress("convert + served held-out with the adapter", t0)

    report = {
        "served_before": served_before, "served_after": served_after,
        "trainer_before": trainer_before, "trainer_after": trainer_after,
        "steps": [{k: m[k] for k in ("loss", "is_weight_mean", "serving_gap_abs_mean", "clip_fraction", "step_s")}
                  for m in steps],
        **{k: round(v, 1) for k, v in timings.items()}, "load": trainer.load_info,
    }
    print(report)
    # Held-out questions: the praised greeting is now more likely, and more likely relative to the
    # corrected one, in the trainer (fp32 torch) and in the served model (quantized GGUF +
    # converted LoRA). With the distillation term toward the hinted teacher (the default signal)
    # the corrected greeting need not fall on its own: measured −10.6 → −8.6 while the praised one
    # went −20.6 → −4.9, a margin gain of about 14 nats.
    def margin(pair):
        return pair[0] - pair[1]

    assert trainer_after[0] > trainer_before[0] and margin(trainer_after) > margin(trainer_before) + 5, report
    assert served_after[0] > served_before[0] and margin(served_after) > margin(served_before) + 5, report
