"""The training loop of learning from use: judged turns in, LoRA weight versions out, on CPU.

The policy trained here is the SAME model llama.cpp serves: transformers dequantizes the served
GGUF to fp32 (cached as safetensors, keyed by the GGUF's SHA-256, so only the first load pays the
25–80 s), peft puts a LoRA on the seven projections of every block, and each update is published as
a peft adapter plus its GGUF LoRA conversion that the serving process hot-swaps.

The teacher for hindsight-hint distillation is the frozen base model, scored through
``model.disable_adapter()``: no second copy of the weights.

Log-probs used in the objective (see :mod:`ratchet.online.losses` for the full reasoning):

* behaviour: the serving log-probs stored on the turn (quantized model, raw logits);
* proximal: the trainer's own log-probs before the update; the OPD advantage is
  ``teacher − proximal`` so both sides come from the same fp32 numerics and differ only by the hint
  (using the quantized serving log-probs there would add the quantization gap to every token).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ratchet.config import Settings
from ratchet.contracts import RatchetError
from ratchet.online.batching import BatchClock, Usable
from ratchet.online.credit import CreditName, reward_credit
from ratchet.online.evaluation import GateConfig
from ratchet.online.targets import TargetFilterName, target_filter
from ratchet.online.taught import TaughtName, taught_loss
from ratchet.online.versions import Lineage

log = logging.getLogger(__name__)


class TrainerConfig(Settings):
    """How the online trainer learns from judged turns."""

    model: str = "qwen2.5-coder-0.5b"
    """The served model to train: a catalog name (``ratchet models list``) or a path to its GGUF."""
    num_threads: int = Field(default=1, ge=1)
    """torch threads. Keep 1 while llama.cpp serves on the same cores: oversubscription slows both ~8x."""
    signal: Literal["rl", "opd", "combine"] = "combine"
    """Learning signal: Binary RL from the judged reward, hindsight-hint distillation, or both."""
    w_rl: float = 1.0
    """Weight of the Binary RL term of the advantage (combine)."""
    rl_credit: CreditName = "parting"
    """Which tokens of a judged reply carry its Binary RL reward (:mod:`ratchet.online.credit`):
    ``reply``: every token (Binary RL as published); ``parting``: a corrected reply whose hinted
    teacher wrote its own reply (``distill_target=teacher``) gets −1 only on the token where it parts
    from the teacher's, so the answer the user did not object to is not pushed down with the
    opening they did; praised replies keep +1 on every token. ``parting`` by default: with it
    ``combine`` reached the greeting as ``opd`` did (``bench/results/online_inner_loop.md``: held-out
    preference 0.92 with guard 9 of 12 at update 3, then 1.00 with guard 7 at update 4, against
    ``opd``'s 1.00 with guard 10). ``reply`` was not run with the current distillation rules, so the
    two are not compared; −1 on every token of a corrected answer is what the guard tasks check."""
    w_opd: float = 0.0
    """Weight of the sampled-token distillation term ``teacher − old`` of the advantage (opd, combine).
    0 by default: along the served reply that term is strongly negative at its first token (the
    hinted teacher wants the preferred opening there) and pushes the student's usual openings down
    with no target to move the mass to; the top-k distillation below already teaches the opening.
    Measured on the 0.5B with the greeting user (``bench/results/online_inner_loop.md``): after
    two updates, 1.0 gave held-out preference 0.00, guard 0.83 → 0.42, log p("Ahoy!") −3.9; 0 gave
    0.17, 0.67, −2.5 (both at KL 0.26). 0 did not remove the refusals, only fewer of them."""
    opd_clip: float | None = 5.0
    """Bound on |teacher − old| per token, so one token the teacher finds absurd cannot dominate."""
    opd_topk: int = Field(default=16, ge=0)
    """With a hint (opd, combine): also distill the hinted teacher's k most likely tokens at every
    reply position (forward KL, :func:`~ratchet.online.losses.topk_distill_loss`). The sampled-token
    advantage alone only reweights tokens the model already wrote, so a behaviour it never samples
    gets no push up. 0 turns the term off (the original OPD)."""
    w_distill: float = Field(default=1.0, ge=0)
    """Weight of the top-k distillation term (per reply token, like the policy objective)."""
    distill_target: Literal["served", "teacher"] = "teacher"
    """Which reply the top-k distillation runs along. ``served``: the reply the user saw, so the
    hinted teacher disagrees with the student almost only at its first token (the rest is scored
    under a prefix the teacher would not have written). ``teacher``: the hinted teacher's own greedy
    reply (context distillation): the student, without the hint, is taught the whole reply the hint
    leads to; costs one greedy generation of ``teacher_max_tokens`` per hinted sample. Measured
    through ``ratchet serve`` on the 0.5B (docs/online.md): the held-out preference margin rose
    −24.6 → −15.3 → −9.1 nats in two updates of 5 and 4 samples (``served``, the old hint: −24.6 →
    −20.4 in one update of 8), though greedy replies did not yet start with the greeting. On the
    trainer alone (``bench/online_inner_loop.py``) they did: 8 of 12 held-out replies after the 3rd
    update, 12 of 12 after the 4th, while the guard tasks fell 0.83 → 0.42."""
    teacher_max_tokens: int = Field(default=48, ge=1)
    """Length limit of the hinted teacher's own reply (``distill_target=teacher``)."""
    teacher_filter: TargetFilterName = "answers"
    """Which of the hinted teacher's own replies are taught (``distill_target=teacher``; see
    :mod:`ratchet.online.targets`): ``answers`` drops a reply that ends with a question back to the
    user instead of an answer ("Ahoy! How can I reverse a string in Python?") or that refuses, behind
    a greeting or not ("Ahoy! I'm sorry, but I can't assist with that.", taught once before the rule
    looked for it); ``none`` keeps all.
    Measured on the 0.5B (the greeting user, ``w_opd=0``, ``bench/results/online_inner_loop.md``):
    the hinted base hands the question back on 6 of 12 training prompts, all six caught by this
    rule; with it the held-out replies stopped echoing "I'm here to help" and the 2nd update's
    guard kept 8 of 12 tasks (without it also 8, with one refusal more among the held-out replies);
    the preference reached 1.00 at the 3rd update, but the guard fell to 0.50 there all the same."""
    taught: TaughtName = "top_share"
    """What the distillation teaches at each position it distills (:mod:`ratchet.online.taught`):
    ``topk``: the hinted teacher's top ``opd_topk`` tokens (forward KL), its second choices taught
    with its first; ``top_token``: only its most likely token (a hard label), the rest of the
    vocabulary held where the base had it (``hold_coef`` × KL to the base over the other tokens,
    renormalized), so the opening may move onto the greeting but not onto a refusal's "I'm";
    ``top_share``: the same hold, the top token taught the probability the teacher gives it (0
    where the student already agrees, so the update goes to the opening). The two holds cost one
    forward of the base (adapter off) per micro-batch of distilled replies.
    ``top_share`` by default: measured on the 0.5B (``bench/results/online_inner_loop.md``,
    ``w_opd=0``, ``teacher_filter=answers``, ``hold_coef=1``), it is the only rule that reached
    held-out preference ≥ 0.8 with the guard inside its band (at least 8 of 12 neutral tasks), and
    it did in all four runs: the greeting with ``signal=opd`` (0.92 / 1.00 at updates 3 / 4, guard
    9 / 10 of 12), the greeting with ``combine`` in two question orders (0.92, guard 9, at update 3
    in both; updates 2 and 4 fell to 7 of 12 in the shuffled order, update 4 in the other: the
    promotion gate is there to refuse those), and bullets with ``opd`` (0.83 at update 5, guard 10
    of 12 at every update, the base's level). Through ``ratchet serve`` with these defaults the
    greeting reached 12 of 12 held-out replies at v8, the gate refusing four versions on the way,
    and bullets 10 of 12 at v3 (12 conversations) and 11 at v5, none refused
    (``bench/results/online_personalization.md``). Every ``topk`` run at the same KL (0.46–0.72)
    had guard 5–7 of 12. ``hold_coef=5`` (with ``kl_coef=5``) kept the guard and stalled the greeting
    (preference 0.00 after 3–4 updates, log p("Ahoy!") −4.2 to −4.4)."""
    hold_coef: float = Field(default=1.0, ge=0)
    """Weight of the hold on the non-taught tokens (``taught=top_token``/``top_share``), per distilled
    position. 1 is the measured value that let the greeting come with the guard in its band; 5 held
    the greeting back too (see ``taught``)."""
    lora_r: int = Field(default=16, ge=1)
    """LoRA rank."""
    lora_alpha: float = 32.0
    """LoRA alpha; the adapter is scaled by alpha / r (in peft and in llama.cpp alike)."""
    target_modules: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    """Projections that get a LoRA (the GGUF converter supports exactly these)."""
    learning_rate: float = Field(default=3e-4, gt=0)
    """Adam learning rate for the LoRA weights. Measured on the 0.5B with a correcting user
    (docs/online.md): 1e-4 with the sampled-token signals alone moved nothing in two versions; 2e-3
    collapsed the model; with top-k distillation one update at 3e-4 raised the held-out preference
    margin by 4.6 nats (KL 0.04), at 1e-3 by 8 nats, but the second update at 1e-3 collapsed the
    replies into one greeting for every prompt (refused by the gate's KL check), so 3e-4 is the
    default. Through the server the held-out preference did not yet rise by generated text at either
    rate; the trainer alone at 3e-4 flips it in 3–4 updates (``bench/results/online_inner_loop.md``).
    1.5e-4 (answer-only targets, distillation alone) walked the same path of preference against
    guard in more updates (0.92 with guard 0.58 at the 4th; 3e-4: 1.00 with 0.50 at the 3rd): the
    guard follows the KL to base (intact at ≤ 0.05, falling past 0.2), not the step size."""
    batch_size: int = Field(default=8, ge=1)
    """Samples per update (one version per update). 8 publishes a version every ~4 conversations of a
    correcting user; an update of 8 short replies takes ~1 min on one core of the 0.5B."""
    micro_batch_size: int = Field(default=4, ge=1)
    """Samples per forward/backward pass; gradients accumulate to the whole batch's token mean."""
    ppo_epochs: int = Field(default=1, ge=1)
    """Optimization passes over each batch. 1 keeps the ratio at 1 and needs no extra forward pass."""
    eps_low: float = 0.2
    """PPO clip below 1 (ratio floor 1 − eps_low)."""
    eps_high: float = 0.28
    """PPO clip above 1 (ratio ceiling 1 + eps_high), wider to leave room for exploration."""
    kl_coef: float = Field(default=0.0, ge=0)
    """Weight of a KL(policy ‖ base) penalty, a per-token mean added to the loss; 0 turns it off.
    Exact over the vocabulary (not the sampled-token k3: that sees only the served token, so mass
    moving onto tokens nobody sampled, a refusal's "I'm", goes unseen), along the served replies of
    every sample of the batch, including those with no signal of their own (kept for this term
    only), and only at positions whose context the feedback does not teach: not where the
    distillation teaches (:func:`~ratchet.online.losses.untaught_positions`), nor anywhere along a
    reply the user praised; there the penalty would only argue with the feedback. Everywhere else
    it holds the model where the base had it.
    Costs one forward of the base (adapter off) per micro-batch. Its gradient is 0 at the base, so
    it acts from the second update on. 0 by default: measured on the 0.5B with the greeting user
    (``bench/results/online_inner_loop.md``, docs/online.md "What keeps the guard?"), at 5 held
    over the openings it kept the guard at 10 of 12 for five updates and the preference at 0.00;
    with the openings the feedback speaks about left free it changed nothing (preference 1.00,
    guard 0.50 at update 3, as without it)."""
    is_cap: float = Field(default=2.0, gt=0)
    """Cap c of the truncated importance weight min(π_trainer / π_serve, c) that corrects staleness."""
    max_staleness: int = Field(default=2, ge=0)
    """Samples served by weights more than this many optimizer steps behind the trainer's are dropped.
    Steps are counted along the versions' parent links (see ``versions.Lineage``), so a refused
    version or a rollback makes no sample stale; only updates the trainer's weights actually took do."""
    max_grad_norm: float = Field(default=1.0, gt=0)
    """Gradient clipping (global L2 norm)."""
    max_seq_len: int = Field(default=1024, ge=16)
    """Longest prompt + response trained on; longer prompts lose their oldest tokens."""
    gradient_checkpointing: bool = False
    """Trade compute for memory (needed for the 1.5B model on 24 GB)."""
    seed: int = 0
    """Seed for the LoRA initialization."""
    min_batch: int = Field(default=4, ge=1)
    """Fewest samples a partial batch is trained on, however long it waited (capped at
    ``batch_size``): an idle period never makes the trainer step on one sample. Counted among the
    samples the update learns from (``Trainer.usable``): claimed samples it would drop (stale, no
    signal) or keep only as KL anchors do not count, and wait with the batch."""
    max_wait_s: float = Field(default=120.0, ge=0)
    """How long after the first sample of a batch arrives to wait for a full batch before training
    on what is there (at least ``min_batch``). The clock starts at that first sample, not when the
    trainer last stepped."""
    poll_interval_s: float = 2.0
    """Pause between queue polls when there is nothing to train on."""
    heldout_path: Path | None = None
    """JSONL of held-out cases ({messages, preferred, dispreferred}) scored before each promotion."""
    eval_tolerance: float = 0.5
    """A version whose held-out margin is worse than the current one's by more than this is not served."""
    gate: GateConfig = Field(default_factory=GateConfig)
    """The other promotion checks (guard score, tasks, KL to base, floor of the preferred replies'
    log-prob). Without ``heldout_path`` the built-in tasks and the KL bound still apply
    (``gate.builtin``)."""
    claim_lease_s: float = Field(default=300.0, gt=0)
    """How long the trainer's claim on queued samples lasts; it is renewed every third of that while
    held, so only a trainer that hangs or vanishes loses it (one of this host that dies loses it at once)."""
    max_reclaims: int = Field(default=3, ge=1)
    """A sample taken back from a crashed or failed trainer this many times is marked failed (kept,
    never trained again) so that a sample that crashes training cannot stop it for good."""
    kl_samples: int = Field(default=4, ge=0)
    """Sequences on which KL to the base is measured for each version's record (0 = skip)."""
    convert_gguf: bool = True
    """Convert each version to a GGUF LoRA for llama.cpp (off only for tests without a GGUF base)."""
    weights_cache_dir: Path | None = None
    """Where dequantized weights are cached; default: the user cache dir (``…/ratchet/torch``)."""


# --------------------------------------------------------------------------------------------
# Loading the served model into torch
# --------------------------------------------------------------------------------------------


def resolve_gguf(model: str) -> Path:
    """A catalog name or a GGUF path -> the GGUF file (verified when it comes from the catalog)."""
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise RatchetError(f"GGUF file not found: {path}")
        return path
    from ratchet.models.registry import model_path

    return model_path(model)


def _gguf_sha256(path: Path) -> str:
    """The file's SHA-256, read from the catalog's stamp when it is fresh (spares hashing 0.5–1 GB)."""
    stamp = path.with_name(path.name + ".verified")
    stat = path.stat()
    try:
        data = json.loads(stamp.read_text())
        if (data["size"], data["mtime_ns"]) == (stat.st_size, stat.st_mtime_ns):
            return str(data["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    from ratchet.models.registry import sha256_file

    return sha256_file(path)


def weights_cache_root(config_dir: Path | None = None) -> Path:
    if config_dir is not None:
        return Path(config_dir)
    root = os.environ.get("RATCHET_CACHE_DIR")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("ratchet")
    return Path(root) / "torch"


def load_policy(gguf: Path, cache_dir: Path | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """(model, tokenizer, info) for ``gguf`` in fp32; the first call caches a safetensors copy.

    ``info`` says whether the cache was hit and how long the load took.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    key = _gguf_sha256(gguf)[:16]
    cached = weights_cache_root(cache_dir) / f"{gguf.stem}-{key}"
    hit = (cached / "config.json").is_file()
    if hit:
        model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(cached)
    else:
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The weights are plain fp32 once dequantized; transformers still marks the model as a
        # (non-serializable) GGUF-quantized one, and the marker would also reach peft's configs.
        model.hf_quantizer = None
        for attr in ("quantization_config", "_pre_quantization_dtype"):
            if hasattr(model.config, attr):
                delattr(model.config, attr)
        model.is_quantized = False
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cached.parent, prefix=f".{cached.name}."))
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            os.rename(tmp, cached)
        except OSError:
            # Another process cached it first (rename onto a non-empty dir fails): keep theirs.
            log.info("weights cache %s already written by another process", cached)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    model.eval()
    info = {"cache_hit": hit, "load_s": round(time.perf_counter() - started, 2), "cache_dir": str(cached)}
    return model, tokenizer, info


# --------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------


@dataclass
class _Prepared:
    """One sample turned into token ids and the tensors its loss needs."""

    turn_id: str
    input_ids: list[int]
    response_start: int
    reward: float
    serving_logprobs: list[float]
    teacher_ids: list[int] | None = None
    teacher_logprobs: Any = None
    proximal_logprobs: Any = None
    teacher_topk: Any = None
    #: distill_target=teacher: the hinted teacher's greedy reply ids, taught or refused (the KL mask reads it).
    teacher_reply: list[int] | None = None
    #: distill_target=teacher: student ids (prompt + the teacher's reply) and where its reply starts.
    distill_ids: list[int] | None = None
    distill_start: int = 0
    #: No learning signal of its own, kept (``kl_coef`` > 0) only for the KL to base on its reply.
    anchor_only: bool = False
    #: 0/1 per reply token: where the KL-to-base penalty applies (:func:`~ratchet.online.losses.untaught_positions`).
    kl_mask: Any = None


@dataclass(frozen=True)
class _Assessment:
    """What the configured signal makes of one sample, worked out once for :meth:`Trainer.usable`
    and :meth:`Trainer.prepare` alike."""

    #: Why an update would not learn from the sample: a drop reason of ``prepare`` (``stale``,
    #: ``no_signal``, ``empty``), ``anchor`` (kept only for the KL to the base), or None when it learns.
    unused: str | None
    reward: float = 0.0
    #: The hint the teacher is shown; None without one or when the student had already been told it.
    hint: str | None = None
    #: The sample's hint was set aside because its last user message already states it.
    hint_already_asked: bool = False


def _chat_ids(tokenizer: Any, messages: Sequence[dict[str, Any]]) -> list[int]:
    out = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
    if hasattr(out, "keys"):
        out = out["input_ids"]
    return [int(i) for i in out]


def with_hint(messages: Sequence[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    """The messages with the hindsight hint appended to the last user message."""
    out = [dict(m) for m in messages]
    for message in reversed(out):
        if message.get("role") == "user":
            message["content"] = f"{message.get('content') or ''}\n\n{hint}"
            return out
    return [*out, {"role": "user", "content": hint}]


def already_asked(messages: Sequence[dict[str, Any]], hint: str) -> bool:
    """Whether the last user message already contains the hint (case and spacing aside)."""
    def norm(text: str) -> str:
        return " ".join(text.lower().split())

    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    content = last.get("content") if last else None
    return isinstance(content, str) and norm(hint) in norm(content)


class Trainer:
    """A peft LoRA policy with one update per batch of samples.

    ``version`` is the number of the weight version the trainer's adapter equals (0 = base).
    """

    def __init__(self, config: TrainerConfig, model: Any, tokenizer: Any, *, version: int = 0) -> None:
        import torch
        from peft import LoraConfig, get_peft_model

        self.config = config
        self.tokenizer = tokenizer
        torch.set_num_threads(config.num_threads)
        torch.manual_seed(config.seed)
        lora = LoraConfig(
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=0.0,
            target_modules=list(config.target_modules),
            bias="none",
            task_type="CAUSAL_LM",
        )
        self.model = get_peft_model(model, lora)
        if config.gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
            self.model.enable_input_require_grads()
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(self.params, lr=config.learning_rate)
        self._initial = self.lora_state()
        self.version = version
        #: The version tree staleness is measured on; empty (version numbers as steps) until the
        #: training loop reads it from the version store.
        self.lineage = Lineage()
        #: The GGUF the policy was loaded from (the adapter's conversion target); None for in-memory models.
        self.base_gguf: Path | None = None
        self.load_info: dict[str, Any] = {}
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad if pad is not None else getattr(tokenizer, "eos_token_id", 0) or 0)

    @classmethod
    def from_config(cls, config: TrainerConfig) -> Trainer:
        gguf = resolve_gguf(config.model)
        model, tokenizer, info = load_policy(gguf, config.weights_cache_dir)
        log.info("loaded %s for training in %.1fs (cache hit: %s)", gguf.name, info["load_s"], info["cache_hit"])
        trainer = cls(config, model, tokenizer)
        trainer.base_gguf = gguf
        trainer.load_info = info
        return trainer

    # ------------------------------------------------------------------ adapter state

    def lora_state(self) -> dict[str, Any]:
        """A copy of the LoRA weights (small: a few MB)."""
        return {k: v.detach().clone() for k, v in self.model.named_parameters() if v.requires_grad}

    def set_lora_state(self, state: dict[str, Any], version: int, *, reset_optimizer: bool = True) -> None:
        import torch

        with torch.no_grad():
            for name, param in self.model.named_parameters():
                if param.requires_grad:
                    param.copy_(state[name])
        if reset_optimizer:
            self.optimizer = torch.optim.Adam(self.params, lr=self.config.learning_rate)
        self.version = version

    def snapshot(self) -> tuple[int, dict[str, Any], dict[str, Any]]:
        """(version, LoRA weights, optimizer state): what :meth:`restore` returns to."""
        return self.version, self.lora_state(), copy.deepcopy(self.optimizer.state_dict())

    def restore(self, snapshot: tuple[int, dict[str, Any], dict[str, Any]]) -> None:
        """Back to a :meth:`snapshot`, weights and Adam moments alike, as if no step happened since."""
        version, state, optimizer = snapshot
        self.set_lora_state(state, version, reset_optimizer=False)
        self.optimizer.load_state_dict(optimizer)

    def staleness(self, served_version: int) -> int:
        """Optimizer steps from the weights that served a sample to the trainer's (:class:`Lineage`)."""
        return self.lineage.staleness(served_version, self.version)

    def reset_to_base(self) -> None:
        """Back to the initial LoRA (B = 0, i.e. exactly the base model) and a fresh optimizer."""
        self.set_lora_state(self._initial, 0)

    def load_adapter(self, adapter_dir: str | Path, version: int) -> None:
        """Load a saved peft adapter's weights (a version from the store) into the trainer."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        state = load_file(str(Path(adapter_dir) / "adapter_model.safetensors"))
        result = set_peft_model_state_dict(self.model, state)
        missing = [k for k in getattr(result, "unexpected_keys", []) if "lora" in k]
        if missing:
            raise RatchetError(f"adapter {adapter_dir} does not match the model: {missing[:3]}")
        self.set_lora_state(self.lora_state(), version)

    def save_adapter(self, out_dir: str | Path) -> Path:
        """Save the adapter as a peft directory (config + safetensors)."""
        out_dir = Path(out_dir)
        self.model.save_pretrained(str(out_dir), safe_serialization=True)
        return out_dir

    # ------------------------------------------------------------------ preparing samples

    def _assess(self, sample: Any) -> _Assessment:
        """What an update would make of ``sample`` with the configured signal. Cheap (no
        tokenizing): the loop asks it of every sample on every poll."""
        cfg = self.config
        if self.staleness(sample.turn.policy_version) > cfg.max_staleness:
            return _Assessment("stale")
        hint = sample.judgement.hint if cfg.signal in ("opd", "combine") else None
        asked = bool(hint) and already_asked(sample.turn.messages, hint)
        if asked:
            # The student already saw this instruction (a retry after the correction that
            # states it): a teacher told it again knows nothing the student does not, and
            # distilling it only pulls the student toward the base's own reply there.
            hint = None
        reward = float(sample.judgement.reward) if cfg.signal in ("rl", "combine") else 0.0
        anchor = not reward and not hint
        # A praised reply is not an anchor: the user endorsed all of it, and holding it to the
        # base pulled first replies that already greeted back to the base's opening (measured
        # on the 0.5B: preference 0.25 → 0.00 in one update whose batch had two of them).
        if anchor and (not cfg.kl_coef or sample.judgement.reward > 0):
            unused: str | None = "no_signal"
        elif not sample.turn.response_token_ids:
            unused = "empty"
        else:
            unused = "anchor" if anchor else None
        return _Assessment(unused, reward, hint, asked)

    def usable(self, samples: Sequence[Any]) -> Usable:
        """Which of ``samples`` an update would learn from now, and why not the others: what the
        training loop counts against ``batch_size`` and ``min_batch`` before it steps."""
        unused = {s.turn.turn_id: why for s in samples if (why := self._assess(s).unused) is not None}
        return Usable(tuple(s for s in samples if s.turn.turn_id not in unused), unused)

    def prepare(self, samples: Sequence[Any]) -> tuple[list[_Prepared], dict[str, int]]:
        """Filter samples by signal and staleness (:meth:`usable`), and turn them into token ids.

        Returns the kept samples (anchors included) and counts of what was dropped and why.
        """
        cfg = self.config
        kept: list[_Prepared] = []
        dropped = {"stale": 0, "no_signal": 0, "empty": 0, "hint_already_asked": 0}
        for sample in samples:
            turn = sample.turn
            verdict = self._assess(sample)
            why, reward, hint = verdict.unused, verdict.reward, verdict.hint
            if verdict.hint_already_asked:
                dropped["hint_already_asked"] += 1  # a hint ignored; the sample may still teach by its reward
            if why in dropped:
                dropped[why] += 1
                continue
            anchor = why == "anchor"
            response = list(turn.response_token_ids)
            prompt = list(turn.prompt_token_ids) or _chat_ids(self.tokenizer, turn.messages)
            keep_prompt = max(cfg.max_seq_len - len(response), 1)
            prompt = prompt[-keep_prompt:]
            response = response[: cfg.max_seq_len - len(prompt)]
            item = _Prepared(
                turn_id=turn.turn_id,
                input_ids=prompt + response,
                response_start=len(prompt),
                reward=reward,
                serving_logprobs=list(turn.response_logprobs)[: len(response)],
                anchor_only=anchor,
            )
            if hint:
                hinted = _chat_ids(self.tokenizer, with_hint(turn.messages, hint))
                hinted = hinted[-max(cfg.max_seq_len - len(response), 1):]
                item.teacher_ids = hinted + response
            kept.append(item)
        return kept, dropped

    # ------------------------------------------------------------------ scoring

    def _batch(self, sequences: Sequence[list[int]]):
        import torch

        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            attn[row, : len(seq)] = 1
        return ids, attn

    def _response_logits(self, sequences: Sequence[list[int]], starts: Sequence[int]):
        """Forward pass -> (logits at the reply positions ``[tokens, vocab]``, targets, per-sample lengths)."""
        import torch

        ids, attn = self._batch(sequences)
        # Position p predicts token p+1: response tokens start..len-1 come from positions start-1..len-2.
        spans = [(row, start - 1, len(seq) - 1) for row, (seq, start) in enumerate(zip(sequences, starts, strict=True))]
        targets = torch.cat([ids[row, a + 1 : b + 1] for row, a, b in spans])
        backbone, head = self._head_split()
        if backbone is not None:
            # Only reply positions go through the vocabulary projection (a quarter of a 0.5B
            # model's weights): prompt positions need no logits.
            hidden = backbone(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state
            logits = head(torch.cat([hidden[row, a:b] for row, a, b in spans]))
        else:
            full = self.model(input_ids=ids, attention_mask=attn, use_cache=False).logits
            logits = torch.cat([full[row, a:b] for row, a, b in spans])
        return logits, targets, [b - a for _, a, b in spans]

    def _response_logprobs(self, sequences: Sequence[list[int]], starts: Sequence[int], gather: Sequence[Any] | None = None,
                           kl_masks: Sequence[Any] | None = None, rows: Sequence[bool] | None = None,
                           base_rows: bool = False):
        """Forward pass -> per-sample tensor of log-probs of the response tokens (with grad if enabled).

        With ``gather`` (one ``[tokens, k]`` index tensor or None per sample) or ``rows`` (one bool
        per sample) it returns a pair: the log-probs, and per sample either the log-probs of those
        k token ids at each reply position (``gather``) or the pair (logits ``[tokens, vocab]``, the
        base's logits there when ``base_rows``, else None) for the samples ``rows`` marks (None for
        the others). With ``kl_masks`` (one 0/1 mask per sample) it returns a triple, the third item
        the summed exact KL(π_θ ‖ π_base) at the masked-in reply positions, from the same forward
        pass. The base is scored at most once (adapter off, no gradient) for both.
        """
        import torch

        from ratchet.online.losses import exact_kl_per_token, token_logprobs

        logits, targets, lengths = self._response_logits(sequences, starts)
        flat = token_logprobs(logits, targets)
        per_sample = list(torch.split(flat, lengths))
        if gather is None and rows is None and kl_masks is None:
            return per_sample
        mask = torch.cat(list(kl_masks)) if kl_masks is not None else None
        ref = None
        if (mask is not None and float(mask.sum())) or (rows is not None and base_rows and any(rows)):
            with torch.no_grad(), self.model.disable_adapter():
                ref, _, _ = self._response_logits(sequences, starts)
        picked: list[Any] = []
        split = list(torch.split(logits, lengths))
        if gather is not None:
            for row, index in zip(split, gather, strict=True):
                picked.append(None if index is None else torch.log_softmax(row.float(), -1).gather(-1, index))
        elif rows is not None:
            ref_split = list(torch.split(ref, lengths)) if ref is not None and base_rows else [None] * len(split)
            for row, ref_row, want in zip(split, ref_split, rows, strict=True):
                picked.append((row, ref_row) if want else None)
        if mask is None:
            return per_sample, picked
        if ref is None:
            return per_sample, picked, logits.sum() * 0.0
        return per_sample, picked, (exact_kl_per_token(logits, ref) * mask).sum()

    def teacher_topk(self, sequences: Sequence[list[int]], starts: Sequence[int], k: int) -> list[tuple[Any, Any]]:
        """The frozen base model's k most likely tokens at each reply position: (log-probs, ids) per sample."""
        import torch

        out = []
        mb = self.config.micro_batch_size
        with torch.no_grad(), self.model.disable_adapter():
            for i in range(0, len(sequences), mb):
                logits, _, lengths = self._response_logits(sequences[i : i + mb], starts[i : i + mb])
                values, index = torch.log_softmax(logits.float(), -1).topk(k, dim=-1)
                out.extend(zip(torch.split(values, lengths), torch.split(index, lengths), strict=True))
        return out

    def _teacher_replies(self, hinted: Sequence[_Prepared], starts: Sequence[int]) -> tuple[list[str], list[str]]:
        """``distill_target=teacher``: the hinted base model writes its own greedy reply, and its
        top-k along that reply becomes the distillation target of the student without the hint.
        Returns the replies' text, those taught and those ``teacher_filter`` refused (a refused one
        leaves its sample with its other signals), kept in the version's record."""
        cfg = self.config
        prompts = [it.teacher_ids[:start] for it, start in zip(hinted, starts, strict=True)]
        replies = self.greedy_ids(prompts, cfg.teacher_max_tokens, base=True)
        rule = target_filter(cfg.teacher_filter)
        keep, refused = [], []
        for it, p, r in zip(hinted, prompts, replies, strict=True):
            it.teacher_reply = r
            text = str(self.tokenizer.decode(r, skip_special_tokens=True))
            if r and rule.keep(text):
                keep.append((it, p, r))
            elif r:
                refused.append(text)
        if not keep:
            return [], refused
        topk = self.teacher_topk([p + r for _, p, r in keep], [len(p) for _, p, _ in keep], cfg.opd_topk)
        for (it, _, reply), pair in zip(keep, topk, strict=True):
            it.distill_ids = it.input_ids[: it.response_start] + reply
            it.distill_start = it.response_start
            it.teacher_topk = pair
        return [str(self.tokenizer.decode(r, skip_special_tokens=True)) for _, _, r in keep], refused

    def greedy_ids(self, prompts: Sequence[list[int]], max_tokens: int, *, base: bool = False) -> list[list[int]]:
        """Greedy reply token ids (end-of-turn excluded, as the server records them) for a batch of
        prompt ids, left-padded so they decode together."""
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            attn[row, width - len(prompt):] = 1
        adapter = self.model.disable_adapter() if base else contextlib.nullcontext()
        with torch.no_grad(), adapter:
            out = self.model.generate(input_ids=ids, attention_mask=attn, max_new_tokens=max_tokens,
                                      do_sample=False, pad_token_id=self.pad_id)
        stops = self._stop_ids()
        replies = []
        for row in out[:, width:].tolist():
            cut = next((i for i, t in enumerate(row) if t in stops), len(row))
            replies.append([int(t) for t in row[:cut]])
        return replies

    def _stop_ids(self) -> set[int]:
        stops = {self.pad_id}
        for source in (getattr(self.tokenizer, "eos_token_id", None),
                       getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)):
            if isinstance(source, int):
                stops.add(source)
            elif source:
                stops.update(int(t) for t in source)
        return stops

    def _head_split(self) -> tuple[Any, Any]:
        """(decoder backbone, lm_head) when logits are a plain projection of the last hidden state."""
        model = self.model.get_base_model()
        config = getattr(model, "config", None)
        plain = not getattr(config, "final_logit_softcapping", None) and not getattr(config, "logit_scale", None)
        backbone, head = getattr(model, "model", None), getattr(model, "lm_head", None)
        if plain and backbone is not None and head is not None:
            return backbone, head
        return None, None

    def score(self, sequences: Sequence[list[int]], starts: Sequence[int], *, base: bool = False) -> list[Any]:
        """Per-token response log-probs without gradient; ``base=True`` scores the frozen base model."""
        import torch

        out: list[Any] = []
        mb = self.config.micro_batch_size
        with torch.no_grad():
            for i in range(0, len(sequences), mb):
                chunk, chunk_starts = sequences[i : i + mb], starts[i : i + mb]
                if base:
                    with self.model.disable_adapter():
                        out.extend(self._response_logprobs(chunk, chunk_starts))
                else:
                    out.extend(self._response_logprobs(chunk, chunk_starts))
        return out

    def sequence_logprob(self, messages: Sequence[dict[str, Any]], response: str, *, base: bool = False) -> float:
        """Sum of log p(response tokens | chat prompt) under the current (or base) policy."""
        prompt = _chat_ids(self.tokenizer, messages)
        response_ids = self.tokenizer.encode(response, add_special_tokens=False)
        return float(self.score([prompt + response_ids], [len(prompt)], base=base)[0].sum())

    def mean_token_logprob(self, messages: Sequence[dict[str, Any]], response: str, *, base: bool = False) -> float:
        """Mean per-token log p(response | chat prompt): comparable across replies of any length."""
        prompt = _chat_ids(self.tokenizer, messages)
        response_ids = self.tokenizer.encode(response, add_special_tokens=False)
        return float(self.score([prompt + response_ids], [len(prompt)], base=base)[0].mean())

    def generate(self, messages: Sequence[dict[str, Any]], max_tokens: int, *, base: bool = False) -> str:
        """Greedy reply of the current (or base) policy, for the gate's checkable tasks."""
        import torch

        ids = torch.tensor([_chat_ids(self.tokenizer, messages)], dtype=torch.long)
        adapter = self.model.disable_adapter() if base else contextlib.nullcontext()
        with torch.no_grad(), adapter:
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_tokens,
                                      do_sample=False, pad_token_id=self.pad_id)
        return str(self.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))

    def response_kl_to_base(self, pairs: Sequence[tuple[Sequence[dict[str, Any]], str]]) -> float:
        """Exact KL(π_θ ‖ π_base) per token at the reply positions of (messages, reply) pairs."""
        sequences, starts = [], []
        for messages, response in pairs:
            prompt = _chat_ids(self.tokenizer, messages)
            sequences.append(prompt + self.tokenizer.encode(response, add_special_tokens=False))
            starts.append(len(prompt))
        mb = self.config.micro_batch_size
        total = 0.0
        for i in range(0, len(sequences), mb):
            chunk = sequences[i : i + mb]
            total += self.kl_to_base(chunk, starts[i : i + mb]) * sum(len(q) - st for q, st in zip(chunk, starts[i : i + mb]))
        return total / max(sum(len(q) - st for q, st in zip(sequences, starts)), 1)

    def kl_to_base(self, sequences: Sequence[list[int]], starts: Sequence[int]) -> float:
        """Mean exact KL(π_θ ‖ π_base) over the full vocabulary at the response positions."""
        import torch

        if not sequences:
            return 0.0
        ids, attn = self._batch(sequences)
        with torch.no_grad():
            cur = torch.log_softmax(self.model(input_ids=ids, attention_mask=attn).logits.float(), -1)
            with self.model.disable_adapter():
                ref = torch.log_softmax(self.model(input_ids=ids, attention_mask=attn).logits.float(), -1)
        total, count = 0.0, 0
        for row, (seq, start) in enumerate(zip(sequences, starts, strict=True)):
            c, r = cur[row, start - 1 : len(seq) - 1], ref[row, start - 1 : len(seq) - 1]
            total += float((c.exp() * (c - r)).sum())
            count += c.shape[0]
        return total / max(count, 1)

    @staticmethod
    def _taught_term(rule: Any, rows: Sequence[tuple[Any, _Prepared]], normalizer: float, stats: dict[str, float]) -> Any:
        """The distillation rule's loss over these samples' distilled positions, a per-token mean
        over ``normalizer`` positions; its parts are added to ``stats`` the same way."""
        import torch

        logits = torch.cat([r[0] for r, _ in rows])
        base = torch.cat([r[1] for r, _ in rows]) if rule.needs_base else None
        values = torch.cat([it.teacher_topk[0] for _, it in rows])
        ids = torch.cat([it.teacher_topk[1] for _, it in rows])
        term, parts = rule.loss(logits, values, ids, base)
        norm = max(float(normalizer), 1.0)
        for key, value in parts.items():
            stats[key] += value / norm
        return term / norm

    # ------------------------------------------------------------------ one update

    def step(self, samples: Sequence[Any]) -> dict[str, Any]:
        """One update on a batch of samples; returns its metrics (``trained`` = turn ids used).

        Samples without a usable signal or more than ``max_staleness`` steps old are dropped
        and counted; a batch left empty makes no update (``updated`` is False).
        """
        import torch

        from ratchet.online.losses import (
            combined_advantages,
            ppo_clipped_loss,
            truncated_importance_weights,
            untaught_positions,
        )

        cfg = self.config
        started = time.perf_counter()
        items, dropped = self.prepare(samples)
        metrics: dict[str, Any] = {"samples": len(items), "dropped": dropped, "updated": False, "trained": []}
        if not items or all(it.anchor_only for it in items):
            # A batch with nothing to learn is no update: holding the model in place needs no step.
            return metrics
        anchors = [it for it in items if it.anchor_only]
        items = [it for it in items if not it.anchor_only]
        # Teacher and reference scores come from the frozen base: computed once, before the update.
        hinted = [it for it in items if it.teacher_ids is not None]
        teacher_targets: list[str] = []
        refused_targets: list[str] = []
        if hinted:
            starts = [len(it.teacher_ids) - (len(it.input_ids) - it.response_start) for it in hinted]
            for it, lp in zip(hinted, self.score([it.teacher_ids for it in hinted], starts, base=True), strict=True):
                it.teacher_logprobs = lp
            if cfg.opd_topk and cfg.signal != "rl" and cfg.distill_target == "served":
                topk = self.teacher_topk([it.teacher_ids for it in hinted], starts, cfg.opd_topk)
                for it, pair in zip(hinted, topk, strict=True):
                    it.teacher_topk = pair
            elif cfg.opd_topk and cfg.signal != "rl":
                teacher_targets, refused_targets = self._teacher_replies(hinted, starts)
        kl_tokens = 0.0
        if cfg.kl_coef:
            for it in items + anchors:
                reply = it.input_ids[it.response_start:]
                # Where the feedback speaks in this reply's context: up to where the hinted teacher's
                # reply parts from it (taught or refused by teacher_filter: a refused one still says
                # the correction was about the opening, measured: holding the opening of 3 such
                # replies of 4 took a greeting the previous update had taught back to the base's),
                # all of it (distilled along it, or praised: the user asked for all of it), or nowhere.
                taught = (it.teacher_reply if it.teacher_reply is not None
                          else reply if it.teacher_topk is not None or it.reward > 0 else None)
                it.kl_mask = untaught_positions(reply, taught)
                kl_tokens += float(it.kl_mask.sum())
        kl_masks = bool(kl_tokens)
        total_tokens = float(sum(len(it.input_ids) - it.response_start for it in items))
        distilled_own = [it for it in items if it.distill_ids is not None]
        distill_tokens = float(sum(len(it.distill_ids) - it.distill_start for it in distilled_own))
        self.model.train()
        stats = {"loss": 0.0, "objective": 0.0, "kl": 0.0, "clip": 0.0, "ratio": 0.0, "weight": 0.0, "distill": 0.0,
                 "hold": 0.0}
        rule = taught_loss(cfg.taught, hold_coef=cfg.hold_coef)
        credit = reward_credit(cfg.rl_credit)
        gap_sum, gap_abs, gap_n = 0.0, 0.0, 0
        adv_sum = 0.0
        rl_tokens = 0.0  # reply tokens the Binary RL reward landed on (rl_credit)
        for epoch in range(cfg.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            for i in range(0, len(items), cfg.micro_batch_size):
                chunk = items[i : i + cfg.micro_batch_size]
                # distill_target=served: the distillation runs along the served reply (same forward).
                along = [it.teacher_topk is not None and it.distill_ids is None for it in chunk]
                logps, student_rows, *penalty = self._response_logprobs(
                    [it.input_ids for it in chunk], [it.response_start for it in chunk], rows=along,
                    base_rows=rule.needs_base, kl_masks=[it.kl_mask for it in chunk] if kl_masks else None)
                rows = []
                for it, lp in zip(chunk, logps, strict=True):
                    if it.proximal_logprobs is None:
                        # First pass: the weights are still θ_old, so the detached log-probs ARE π_prox.
                        it.proximal_logprobs = lp.detach()
                    prox = it.proximal_logprobs
                    n = lp.shape[0]
                    serving = torch.tensor(it.serving_logprobs, dtype=torch.float32)
                    if serving.shape[0] == n:
                        weights = truncated_importance_weights(prox, serving, cfg.is_cap)
                        if epoch == 0:
                            diff = prox - serving
                            gap_sum += float(diff.sum())
                            gap_abs += float(diff.abs().sum())
                            gap_n += n
                    else:
                        weights = torch.ones(n)
                    rl_mask = credit.mask(it.reward, it.input_ids[it.response_start:], it.teacher_reply)
                    if epoch == 0 and it.reward:
                        rl_tokens += float(rl_mask.sum())
                    adv = combined_advantages(
                        it.reward, it.teacher_logprobs, prox,
                        w_rl=cfg.w_rl if cfg.signal != "opd" else 0.0,
                        w_opd=cfg.w_opd if cfg.signal != "rl" else 0.0,
                        opd_clip=cfg.opd_clip,
                        rl_mask=rl_mask,
                    )
                    if epoch == 0:
                        adv_sum += float(adv.sum())
                    rows.append((lp, prox, adv, weights))
                # Concatenate the chunk's tokens: the token mean is over the whole batch anyway.
                cat = [torch.cat([r[k] for r in rows]) for k in range(4)]
                out = ppo_clipped_loss(
                    cat[0], cat[1], cat[2], torch.ones_like(cat[0]),
                    eps_low=cfg.eps_low, eps_high=cfg.eps_high, weights=cat[3], normalizer=total_tokens,
                )
                loss = out.loss
                if penalty:
                    # A per-token mean over every penalized position of the batch (anchors included).
                    loss = loss + cfg.kl_coef * penalty[0] / kl_tokens
                    stats["kl"] += float(penalty[0].detach()) / kl_tokens
                served_rows = [(r, it) for r, it in zip(student_rows, chunk, strict=True) if r is not None]
                if served_rows:
                    loss = loss + cfg.w_distill * self._taught_term(rule, served_rows, total_tokens, stats)
                own = [it for it in chunk if it.distill_ids is not None]
                if own:
                    # The teacher's own replies are other sequences than the served ones: a second
                    # forward pass, its loss a per-token mean over all such replies of the batch.
                    _, own_rows = self._response_logprobs([it.distill_ids for it in own],
                                                          [it.distill_start for it in own],
                                                          rows=[True] * len(own), base_rows=rule.needs_base)
                    loss = loss + cfg.w_distill * self._taught_term(rule, list(zip(own_rows, own, strict=True)),
                                                                    distill_tokens, stats)
                loss.backward()
                share = out.tokens / total_tokens
                stats["loss"] += float(loss.detach())
                stats["objective"] += out.objective
                stats["clip"] += out.clip_fraction * share
                stats["ratio"] += out.ratio_mean * share
                stats["weight"] += out.weight_mean * share
            for i in range(0, len(anchors) if kl_masks else 0, cfg.micro_batch_size):
                # Samples with no signal of their own (a neutral turn, a retry the correction
                # already instructed): ordinary replies of this user's, held where the base had them.
                chunk = anchors[i : i + cfg.micro_batch_size]
                _, _, penalty = self._response_logprobs([it.input_ids for it in chunk],
                                                       [it.response_start for it in chunk],
                                                       kl_masks=[it.kl_mask for it in chunk])
                (cfg.kl_coef * penalty / kl_tokens).backward()
                stats["kl"] += float(penalty.detach()) / kl_tokens
                stats["loss"] += float(cfg.kl_coef * penalty.detach() / kl_tokens)
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
            self.optimizer.step()
        self.model.eval()
        elapsed = time.perf_counter() - started
        epochs = cfg.ppo_epochs
        metrics.update(
            updated=True,
            trained=[it.turn_id for it in items + anchors],
            loss=stats["loss"] / epochs,
            objective=stats["objective"] / epochs,
            kl_penalty=stats["kl"] / epochs,
            kl_tokens=int(kl_tokens),
            anchors=len(anchors),
            distill_kl=stats["distill"] / epochs,
            taught=rule.name,
            hold_kl=stats["hold"] / epochs,
            clip_fraction=stats["clip"] / epochs,
            ratio_mean=stats["ratio"] / epochs,
            is_weight_mean=stats["weight"] / epochs,
            advantage_mean=adv_sum / total_tokens,
            rl_credit=credit.name,
            rl_tokens=int(rl_tokens),
            grad_norm=float(grad_norm),
            optimizer_steps=epochs,
            tokens=int(total_tokens),
            sequence_tokens=int(sum(len(it.input_ids) for it in items)),
            hinted=len(hinted),
            teacher_targets=teacher_targets,
            teacher_targets_refused=refused_targets,
            step_s=round(elapsed, 3),
            tokens_per_s=round(sum(len(it.input_ids) for it in items) * epochs / elapsed, 2),
        )
        if gap_n:
            # The served model is a quantized GGUF, the trainer fp32: this gap is never exactly 0.
            metrics["serving_gap_mean"] = gap_sum / gap_n
            metrics["serving_gap_abs_mean"] = gap_abs / gap_n
        return metrics


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


def run_trainer_loop(
    config: TrainerConfig,
    queue_path: str | Path,
    versions_dir: str | Path,
    stop_event: threading.Event,
    metrics_sink: Callable[[dict[str, Any]], None] | None = None,
    *,
    trainer: Trainer | None = None,
    hook: Any = None,
) -> None:
    """Train until ``stop_event`` is set: take judged samples, update, evaluate, publish versions.

    Each update becomes a new version (peft adapter + GGUF LoRA). The evaluation hook decides
    whether it is promoted (made current, hence served); a refused version is kept on disk but the
    trainer returns to the weights AND the optimizer state it had before that update, so a refused
    update leaves no trace. A rollback done by someone else (the ``current`` pointer moving to
    another version) is noticed between updates and the trainer reloads that version with a fresh
    optimizer (Adam's moments describe the path to the weights it leaves, not to those it goes to);
    an update that was training when the rollback came is kept unpromoted (it would undo the
    rollback) and its batch trains again from the weights rolled back to.
    A partial batch waits ``max_wait_s`` from its first sample and needs ``min_batch`` samples,
    counted among those the trainer would learn from (:meth:`Trainer.usable`,
    :class:`~ratchet.online.batching.BatchClock`); staleness is counted in optimizer steps on the
    version tree (:class:`~ratchet.online.versions.Lineage`). ``metrics_sink`` receives one dict
    per version. ``trainer`` and ``hook`` (an :class:`~ratchet.online.evaluation.EvaluationHook`)
    default to ones built from ``config``.
    """
    from ratchet.online.claims import Claimer, LeaseKeeper
    from ratchet.online.evaluation import EvaluationHook
    from ratchet.online.lora_gguf import convert_adapter
    from ratchet.online.queue import open_queue
    from ratchet.online.versions import TooStale, open_versions

    # Paths, or the serving machine's stores relayed to this one (ratchet.online.relayed).
    store = open_versions(versions_dir)
    queue = open_queue(queue_path)
    trainer = trainer or Trainer.from_config(config)
    if hook is None:
        # Without a held-out file, the gate holds out and scores a share of the queue's conversations.
        hook = EvaluationHook.from_config(config.heldout_path, config.eval_tolerance, gate=config.gate, queue=queue)
    pending: list[Any] = []
    batch: list[Any] = []
    clock = BatchClock(config.batch_size, config.min_batch, config.max_wait_s)

    scratch = Path(tempfile.mkdtemp(prefix="ratchet-train-"))
    # Claims are leases: a claimer of its own (a loop restarted in this process starts afresh) and
    # a thread renewing them while samples wait for a full batch or go through a long step.
    claimer = Claimer.new()
    keeper = LeaseKeeper(queue, claimer, config.claim_lease_s).start()
    try:
        while not stop_event.is_set():
            batch = []
            _follow_current(trainer, store)
            trainer.lineage = store.lineage()
            # Batches count the samples the update would learn from, not those claimed: the others
            # (stale since a rollback, a retry with nothing to teach) ride along with the batch, are
            # dropped by the step and counted in its record, and take no usable sample's place.
            # Assessed once per poll: the trainer's version and lineage stay put until the step.
            usable = trainer.usable(pending)
            room = config.batch_size - len(usable.samples)
            if room > 0:
                taken = queue.take_batch(room, claimer=claimer, lease_s=config.claim_lease_s,
                                         max_reclaims=config.max_reclaims,
                                         stale=TooStale(trainer.lineage, trainer.version, config.max_staleness))
                pending.extend(taken)
                usable = usable.plus(trainer.usable(taken))
            if not clock.due(len(usable.samples)):
                stop_event.wait(config.poll_interval_s)
                continue
            pending = _still_held(queue, claimer, pending)
            if not clock.due(len(usable.among(pending).samples)):
                continue  # a lost lease took some: the rest wait for more
            batch, pending = pending, []
            clock.reset()
            baseline = None
            if hook is not None:
                # The current version, measured before the update (the hook caches by version and
                # reads the held-out turns that came in since).
                baseline = hook.score(trainer)
            # Only a hook can refuse an update; without one there is nothing to return to.
            before = trainer.snapshot() if hook is not None else None
            metrics = trainer.step(batch)
            if not metrics["updated"]:
                queue.mark_trained([s.turn.turn_id for s in batch], trainer.version)
                continue
            record = _version_record(trainer, config, metrics, batch)
            promote = True
            if hook is not None and baseline is not None:
                verdict = hook.evaluate(trainer, baseline)
                record["evaluation"] = verdict
                promote = bool(verdict["promote"])
            adapter = trainer.save_adapter(scratch / "adapter")
            gguf = None
            if config.convert_gguf and trainer.base_gguf is not None:
                gguf = convert_adapter(adapter, trainer.base_gguf, scratch / "adapter.gguf")
            version = store.publish(adapter, record, promote=promote, lora_gguf=gguf, if_current=trainer.version)
            shutil.rmtree(adapter, ignore_errors=True)
            if promote and not version.promoted:
                # Someone rolled back while this update trained: it stays on disk, unserved, and
                # its batch, which no served weights learned from, trains again from the weights
                # rolled back to (loaded with a fresh optimizer at the top of the loop).
                log.warning("v%d not promoted: %s; its %d samples train again", version.number,
                            version.metrics.get("not_promoted"), len(batch))
                pending, batch = batch, []
                record.update(version=version.number, promoted=False,
                              not_promoted=version.metrics.get("not_promoted"))
                if metrics_sink is not None:
                    metrics_sink(record)
                continue
            queue.mark_trained([s.turn.turn_id for s in batch], version.number)
            if promote:
                trainer.version = version.number
            elif before is not None:
                trainer.restore(before)
            record.update(version=version.number, promoted=promote)
            if metrics_sink is not None:
                metrics_sink(record)
    except Exception as exc:
        if batch:
            # Counted as a reclaim with the error as its reason: a sample that fails every step it
            # is in ends up failed instead of crashing every trainer that takes it.
            queue.abandon([s.turn.turn_id for s in batch], f"training step failed: {type(exc).__name__}: {exc}",
                          claimer=claimer, max_reclaims=config.max_reclaims)
        raise
    finally:
        keeper.stop()
        if pending:
            queue.release([s.turn.turn_id for s in pending], claimer=claimer)
        shutil.rmtree(scratch, ignore_errors=True)


def _still_held(queue: Any, claimer: Any, samples: list[Any]) -> list[Any]:
    """The samples whose claim this trainer still holds; one it lost may be in another's batch already."""
    held = queue.held(claimer)
    kept = [s for s in samples if s.turn.turn_id in held]
    if len(kept) < len(samples):
        log.warning("%d claimed samples were reclaimed before training (lease lost); training without them",
                    len(samples) - len(kept))
    return kept


def _version_record(trainer: Trainer, config: TrainerConfig, metrics: dict[str, Any], batch: Sequence[Any]) -> dict:
    record = {k: v for k, v in metrics.items() if k != "trained"}
    record["parent_version"] = trainer.version
    record["signal"] = config.signal
    if config.kl_samples:
        items, _ = trainer.prepare(batch[: config.kl_samples])
        record["kl_to_base"] = trainer.kl_to_base([it.input_ids for it in items], [it.response_start for it in items])
    return record


def _load_version(trainer: Trainer, store: Any, number: int) -> None:
    version = store.get(number)
    if version.adapter_dir is None:
        trainer.reset_to_base()
    else:
        trainer.load_adapter(version.adapter_dir, number)


def _follow_current(trainer: Trainer, store: Any) -> None:
    current = store.current_number()
    if current != trainer.version:
        log.info("current version moved to %d (rollback or another writer): reloading it", current)
        _load_version(trainer, store, current)


__all__ = ["TrainerConfig", "Trainer", "load_policy", "resolve_gguf", "run_trainer_loop", "with_hint"]
