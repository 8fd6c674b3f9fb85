"""``trainer.teacher_model``: another model's frozen weights as the hinted teacher.

``auto`` (the default) picks the catalog's larger model of the served model's tokenizer where it
is pulled, else the student's own base, which also teaches weights given in memory. With a teacher the top-k and the teacher's own
replies come from that model (loaded at the first hinted sample, frozen, no LoRA), the sampled-token
term stays on the hinted base, a tokenizer that is not the student's is refused with a message
naming the setting, and a difference in vocabulary rows (padding) is cut to the shared range.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from test_trainer import CharTokenizer, make_trainer, sample

import ratchet.online.teacher as teacher_module
from ratchet.config import ConfigError, load_config
from ratchet.contracts import RatchetError
from ratchet.online.trainer_config import TrainerConfig

SPEC = "local:tiny-teacher"
HINT = "zz"


def other_model(vocab: int = 64, seed: int = 1):
    """A tiny random Llama with other weights than the student's (``tiny_model`` is seed 0)."""
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    )
    return transformers.AutoModelForCausalLM.from_config(cfg).float().eval()


class SizedTokenizer(CharTokenizer):
    """The student's tokenizer with a size: ids 2..61 are its tokens."""

    def __len__(self) -> int:
        return 62


class ShiftedTokenizer(CharTokenizer):
    """Another tokenizer: every text becomes other ids."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [2 + (b + 7) % 60 for b in text.encode()]


class OtherEosTokenizer(CharTokenizer):
    eos_token_id = 5


def serve_teacher(monkeypatch, model, tokenizer=None) -> list[Path]:
    """``SPEC`` resolves to ``model`` (as ``load_policy`` would return it); returns the loads made."""
    loads: list[Path] = []

    def load(gguf, cache_dir=None):
        loads.append(gguf)
        return model, tokenizer or CharTokenizer(), {"load_s": 0.0, "cache_hit": True}

    monkeypatch.setattr(teacher_module, "resolve_gguf", lambda name: Path(f"/models/{name}.gguf"))
    monkeypatch.setattr(teacher_module, "load_policy", load)
    return loads


def hinted_items(trainer, prompt: str = "q", reply: str = "abcabc"):
    items, _ = trainer.prepare([sample(prompt, reply, -1, hint=HINT)])
    return items


def full_topk(model, ids: list[int], start: int, k: int, rows: int | None = None):
    """The top-k at the reply positions from a plain full forward (no trainer code): the reference."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, start - 1 : len(ids) - 1].float()
    if rows is not None:
        logits = logits[:, :rows]
    return torch.log_softmax(logits, -1).topk(k, dim=-1)


def reply_start(it) -> int:
    return len(it.teacher_ids) - (len(it.input_ids) - it.response_start)


def test_without_a_teacher_model_the_students_base_teaches_and_nothing_is_loaded(monkeypatch) -> None:
    def no_load(*args, **kwargs):
        raise AssertionError("no teacher model may be loaded without trainer.teacher_model")

    monkeypatch.setattr(teacher_module, "load_policy", no_load)
    trainer = make_trainer(signal="opd", opd_topk=4, distill_target="served", learning_rate=5e-2)
    trainer.step([sample("r", "abab", -1, hint=HINT)])  # the adapter moves: the base is no longer the policy
    it = hinted_items(trainer)[0]
    trainer._consult_teacher([it])
    start = reply_start(it)
    with trainer.model.disable_adapter():
        base = full_topk(trainer.model, it.teacher_ids, start, 4)
    adapted = full_topk(trainer.model, it.teacher_ids, start, 4)
    assert trainer.teacher.name == "base"
    assert torch.allclose(it.teacher_topk[0], base.values, atol=1e-5)
    assert torch.equal(it.teacher_topk[1], base.indices)
    assert not torch.allclose(it.teacher_topk[0], adapted.values, atol=1e-5)  # it is the base, not the policy


def test_a_teacher_model_gives_the_topk_and_the_base_keeps_the_sampled_token_term(monkeypatch) -> None:
    teacher = other_model()
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    loads = serve_teacher(monkeypatch, teacher)
    # float32: the targets are compared with the teacher's own fp32 logits (bf16 is the default).
    trainer = make_trainer(signal="combine", opd_topk=4, distill_target="served", teacher_model=SPEC, w_opd=1.0,
                           teacher_dtype="float32")
    assert loads == []  # loaded at the first hinted sample, not with the trainer
    it = hinted_items(trainer)[0]
    trainer._consult_teacher([it])
    start = reply_start(it)
    expected = full_topk(teacher, it.teacher_ids, start, 4)
    with trainer.model.disable_adapter():
        base = full_topk(trainer.model, it.teacher_ids, start, 4)
    assert torch.allclose(it.teacher_topk[0], expected.values, atol=1e-5)
    assert torch.equal(it.teacher_topk[1], expected.indices)
    assert not torch.allclose(it.teacher_topk[0], base.values, atol=1e-3)
    # The sampled-token term reads the hinted base, not the other model.
    base_lp = trainer.score([it.teacher_ids], [start], base=True)[0]
    assert torch.allclose(it.teacher_logprobs, base_lp, atol=1e-6)

    metrics = trainer.step([sample("q", "abcabc", -1, hint=HINT), sample("r", "abab", 1)])
    assert metrics["updated"] and metrics["teacher"] == SPEC
    assert loads == [Path("/models/tiny-teacher.gguf")]  # once, and not again for the step
    assert all(torch.equal(v, before[k]) for k, v in teacher.state_dict().items())  # never trained
    assert not any(p.requires_grad for p in teacher.parameters())
    assert not any("lora" in name for name, _ in teacher.named_parameters())


def test_the_teachers_own_replies_are_the_teacher_models(monkeypatch) -> None:
    teacher = other_model()
    serve_teacher(monkeypatch, teacher)
    settings = {"signal": "opd", "opd_topk": 4, "distill_target": "teacher", "teacher_max_tokens": 6,
                    "teacher_filter": "none", "teacher_unfinished": "prefix"}
    trainer = make_trainer(teacher_model=SPEC, **settings)
    plain = make_trainer(**settings)
    it, base_it = hinted_items(trainer)[0], hinted_items(plain)[0]
    trainer._consult_teacher([it])
    plain._consult_teacher([base_it])
    prompt = it.teacher_ids[: reply_start(it)]
    with torch.no_grad():
        wanted = teacher.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                  max_new_tokens=6, do_sample=False, pad_token_id=0)[0, len(prompt):].tolist()
    cut = next((i for i, t in enumerate(wanted) if t in trainer.teacher._stop_ids()), len(wanted))
    assert it.teacher_reply[:cut] == wanted[:cut] and it.teacher_reply
    assert it.teacher_reply != base_it.teacher_reply
    assert it.distill_ids[it.distill_start:] == it.teacher_reply[: len(it.distill_ids) - it.distill_start]


def test_a_bfloat16_teacher_holds_half_precision_weights_and_gives_nearly_the_same_topk(monkeypatch) -> None:
    serve_teacher(monkeypatch, other_model())
    trainer = make_trainer(signal="opd", opd_topk=4, distill_target="served", teacher_model=SPEC,
                           teacher_dtype="bfloat16")
    it = hinted_items(trainer)[0]
    trainer._consult_teacher([it])
    assert {p.dtype for p in trainer.teacher.model.parameters()} == {torch.bfloat16}
    expected = full_topk(other_model(), it.teacher_ids, reply_start(it), 4)  # the same weights in fp32
    assert it.teacher_topk[0].dtype == torch.float32
    assert torch.allclose(it.teacher_topk[0], expected.values, atol=0.05)
    assert not torch.allclose(it.teacher_topk[0], expected.values, atol=1e-7)  # it did run in bf16


def test_a_trainer_without_hints_never_loads_the_teacher(monkeypatch) -> None:
    loads = serve_teacher(monkeypatch, other_model())
    trainer = make_trainer(signal="combine", teacher_model=SPEC)
    metrics = trainer.step([sample("q", "abc", 1), sample("r", "abab", -1)])
    assert metrics["updated"] and loads == []
    rl = make_trainer(signal="rl", teacher_model=SPEC)
    assert rl.step([sample("q", "abc", -1, hint=HINT)])["updated"] and loads == []  # Binary RL reads no teacher


@pytest.mark.parametrize("tokenizer, why", [(ShiftedTokenizer(), "encode"), (OtherEosTokenizer(), "eos_token_id")])
def test_a_teacher_with_another_tokenizer_is_refused_naming_the_setting_both_models_and_the_fix(
        monkeypatch, tokenizer, why) -> None:
    serve_teacher(monkeypatch, other_model(), tokenizer)
    trainer = make_trainer(signal="opd", opd_topk=4, distill_target="served", teacher_model=SPEC)
    with pytest.raises(RatchetError) as caught:
        trainer.step([sample("q", "abc", -1, hint=HINT)])
    text = str(caught.value) + " " + (caught.value.hint or "")
    for part in ("trainer.teacher_model", SPEC, trainer.config.model, why, "unset trainer.teacher_model"):
        assert part in text


def test_extra_vocabulary_rows_of_the_teacher_are_cut_to_the_students(monkeypatch) -> None:
    teacher = other_model(vocab=80)
    reference = other_model(vocab=80)  # the same weights (same seed), left uncut
    serve_teacher(monkeypatch, teacher)
    trainer = make_trainer(signal="opd", opd_topk=4, distill_target="teacher", teacher_model=SPEC,
                           teacher_filter="none", teacher_unfinished="prefix", teacher_max_tokens=6,
                           teacher_dtype="float32")
    metrics = trainer.step([sample("q", "abcabc", -1, hint=HINT)])
    assert metrics["updated"]
    assert teacher.get_output_embeddings().weight.shape[0] == 64
    it = hinted_items(trainer)[0]
    trainer._consult_teacher([it])
    assert max(it.teacher_reply) < 64 and int(it.teacher_topk[1].max()) < 64
    prompt = it.teacher_ids[: reply_start(it)]
    sequence = prompt + it.distill_ids[it.distill_start:]
    expected = full_topk(reference, sequence, len(prompt), 4, rows=64)
    assert torch.allclose(it.teacher_topk[0], expected.values, atol=1e-5)


def test_a_teacher_with_fewer_rows_teaches_while_every_token_has_one_and_is_refused_otherwise(monkeypatch) -> None:
    serve_teacher(monkeypatch, other_model(vocab=62), SizedTokenizer())
    trainer = make_trainer(signal="opd", opd_topk=4, distill_target="served", teacher_model=SPEC)
    trainer.tokenizer = SizedTokenizer()
    assert trainer.step([sample("q", "abc", -1, hint=HINT)])["updated"]

    serve_teacher(monkeypatch, other_model(vocab=40), SizedTokenizer())
    small = make_trainer(signal="opd", opd_topk=4, distill_target="served", teacher_model=SPEC)
    small.tokenizer = SizedTokenizer()
    with pytest.raises(RatchetError, match="40 token rows, the tokenizer 62 tokens"):
        small.step([sample("q", "abc", -1, hint=HINT)])


def test_the_setting_takes_local_models_only(tmp_path) -> None:
    assert load_config(TrainerConfig, overrides=["teacher_model=local:qwen2.5-coder-1.5b"]).teacher_model == \
        "local:qwen2.5-coder-1.5b"
    assert TrainerConfig().teacher_model == "auto" and TrainerConfig().teacher_unfinished == "auto"
    for bad in ("openai:gpt-4o", "http://localhost:8000/v1#m", "local:qwen2.5-coder-1.5b@v3", "local:"):
        with pytest.raises(ConfigError, match="teacher_model"):
            load_config(TrainerConfig, overrides=[f"teacher_model={bad}"])



@pytest.fixture
def pulled(monkeypatch):
    """Which catalog models count as pulled and verified (a set the test fills)."""
    present: set[str] = set()
    monkeypatch.setattr("ratchet.models.registry.is_verified", lambda name, **_: name in present)
    monkeypatch.setattr(teacher_module, "available_gb", lambda: 64.0)  # memory is not what these tests vary
    return present


def test_auto_keeps_the_base_where_the_teacher_would_not_fit_in_memory(pulled, monkeypatch) -> None:
    pulled.add("qwen2.5-coder-1.5b")
    monkeypatch.setattr(teacher_module, "available_gb", lambda: 6.0)
    chosen = teacher_module.choose_teacher("auto", "auto", "local:qwen2.5-coder-0.5b")
    assert chosen.spec is None and chosen.unfinished == "drop"
    assert "needs about 18 GB and 6.0 GB is available" in chosen.reason
    # Configured, it is not second-guessed.
    assert teacher_module.choose_teacher("local:qwen2.5-coder-1.5b", "auto", "qwen2.5-coder-0.5b").spec
    monkeypatch.setattr(teacher_module, "available_gb", lambda: None)  # unreadable: not a reason to refuse
    assert teacher_module.choose_teacher("auto", "auto", "qwen2.5-coder-0.5b").spec == "local:qwen2.5-coder-1.5b"


def test_auto_picks_the_catalog_teacher_only_where_it_is_pulled(pulled) -> None:
    choose = teacher_module.choose_teacher
    absent = choose("auto", "auto", "local:qwen2.5-coder-0.5b")
    assert (absent.spec, absent.unfinished) == (None, "drop")
    assert "ratchet models pull qwen2.5-coder-1.5b" in absent.reason  # says how to get the stronger one

    pulled.add("qwen2.5-coder-1.5b")
    for served in ("local:qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b", "/models/qwen2.5-coder-0.5b.gguf"):
        chosen = choose("auto", "auto", served)
        assert (chosen.spec, chosen.unfinished) == ("local:qwen2.5-coder-1.5b", "prefix"), served
        assert chosen.record() == {"teacher": "local:qwen2.5-coder-1.5b", "teacher_unfinished": "prefix",
                                   "teacher_choice": chosen.reason}
    # No larger model of its tokenizer in the catalog, or weights given in memory: the base teaches.
    assert choose("auto", "auto", "local:qwen2.5-coder-1.5b").spec is None
    assert choose("auto", "auto", "local:smollm2-135m").spec is None
    assert choose("auto", "auto", None).spec is None
    # What is configured is kept, auto or not, whatever is pulled.
    assert choose(None, "auto", "qwen2.5-coder-0.5b").name == "base"
    assert choose("base", "prefix", "qwen2.5-coder-0.5b").unfinished == "prefix"
    assert choose("auto", "drop", "qwen2.5-coder-0.5b").unfinished == "drop"
    assert choose("local:other", "auto", "qwen2.5-coder-0.5b").spec == "local:other"


def test_a_trainer_built_around_weights_in_memory_is_taught_by_its_base(pulled) -> None:
    pulled.add("qwen2.5-coder-1.5b")  # even with the 0.5B's teacher pulled: these are not the 0.5B's weights
    trainer = make_trainer()
    assert trainer.config.teacher_model == "auto" and trainer.teacher_choice.spec is None
    assert trainer.teacher.name == "base" and trainer.teacher_choice.unfinished == "drop"


def test_from_config_resolves_auto_for_the_served_file_before_loading_it(monkeypatch, tmp_path, pulled) -> None:
    from ratchet.online.trainer import Trainer

    asked: list[str] = []

    def no_policy(*args, **kwargs):
        raise AssertionError("the student must not be loaded before the teacher's file is found")

    def find(spec):
        asked.append(spec)
        raise RatchetError("GGUF file not found", hint="pull it")

    pulled.add("qwen2.5-coder-1.5b")
    monkeypatch.setattr("ratchet.online.trainer.resolve_gguf", lambda model: tmp_path / "qwen2.5-coder-0.5b.gguf")
    monkeypatch.setattr("ratchet.online.trainer.load_policy", no_policy)
    monkeypatch.setattr(teacher_module, "resolve_gguf", find)
    with pytest.raises(RatchetError, match=r"trainer.teacher_model 'local:qwen2.5-coder-1.5b'"):
        Trainer.from_config(TrainerConfig(convert_gguf=False))
    assert asked == ["qwen2.5-coder-1.5b"]


def test_a_teacher_model_that_is_not_there_is_refused_when_the_trainer_starts(monkeypatch, tmp_path) -> None:
    from ratchet.online.trainer import Trainer

    def no_policy(*args, **kwargs):
        raise AssertionError("the student must not be loaded before the teacher's file is found")

    monkeypatch.setattr("ratchet.online.trainer.resolve_gguf", lambda model: tmp_path / "student.gguf")
    monkeypatch.setattr("ratchet.online.trainer.load_policy", no_policy)
    config = TrainerConfig(teacher_model=f"local:{tmp_path / 'missing.gguf'}", convert_gguf=False)
    with pytest.raises(RatchetError, match=r"trainer.teacher_model .*missing.gguf.*GGUF file not found"):
        Trainer.from_config(config)



@pytest.mark.real_model
def test_the_real_coder_1_5b_teaches_the_0_5b_and_smollm_is_refused() -> None:
    """The pair the setting is for: the 1.5B's tokenizer passes the check and its own reply is the
    0.5B's target; SmolLM2's tokenizer is refused."""
    from ratchet.models.registry import is_verified
    from ratchet.online.records import Judgement, Sample, Turn
    from ratchet.online.scoring import chat_ids
    from ratchet.online.trainer import Trainer
    from ratchet.online.weights import load_policy, resolve_gguf

    student, teacher, other = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m"
    missing = [m for m in (student, teacher, other) if not is_verified(m, rehash=False)]
    if missing:
        pytest.skip(f"not pulled: {missing} (ratchet models pull NAME)")
    trainer = Trainer.from_config(TrainerConfig(
        model=student, teacher_model=f"local:{teacher}", teacher_dtype="bfloat16", convert_gguf=False, kl_samples=0,
        teacher_max_tokens=12, teacher_unfinished="prefix", teacher_filter="none"))
    messages = [{"role": "user", "content": "What is a Python list?"}]
    prompt = chat_ids(trainer.tokenizer, messages)
    served = trainer.tokenizer.encode("A list holds items.", add_special_tokens=False)
    turn = Turn("t0", "s", False, "main", messages, "A list holds items.", prompt, served, [-1.0] * len(served), 0)
    it = trainer.prepare([Sample(turn, Judgement("t0", -1, [-1], "Answer in German.", "Deutsch!", "rule"))])[0][0]
    trainer._consult_teacher([it])
    assert trainer.teacher.name == f"local:{teacher}" and it.teacher_topk is not None
    own = trainer.greedy_replies([it.teacher_ids[: reply_start(it)]], 12, base=True)[0]
    assert it.teacher_reply and it.teacher_reply != own.with_stop  # the 1.5B wrote it, not the 0.5B's base

    _, smollm_tokenizer, _ = load_policy(resolve_gguf(other))
    with pytest.raises(RatchetError, match=f"trainer.teacher_model 'local:{other}' cannot teach"):
        teacher_module.check_same_tokenizer(trainer.tokenizer, smollm_tokenizer, student=student,
                                            teacher=f"local:{other}")
