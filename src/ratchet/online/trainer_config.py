"""How the online trainer learns: one documented field per setting, loadable from YAML.

Each field says what it does and why its default is what it is, in a line or two. The
measurements behind the defaults (what else was tried, on which model and user, with what result)
are in ``bench/results/online_hyperparameters.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ratchet.config import Settings
from ratchet.online.credit import CreditName
from ratchet.online.evaluation import GateConfig
from ratchet.online.targets import TargetFilterName
from ratchet.online.taught import TaughtName


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
    """Which tokens of a judged reply carry its reward (:mod:`ratchet.online.credit`): ``reply``
    every token; ``parting`` (default) a corrected reply only where it parts from the hinted
    teacher's own reply, so the answer the user did not object to is not pushed down with it."""
    w_opd: float = 0.0
    """Weight of the sampled-token distillation term ``teacher − old``. 0: along the served reply it
    pushes the student's usual opening down with no target to move the mass to; the top-k term teaches."""
    opd_clip: float | None = 5.0
    """Bound on |teacher − old| per token, so one token the teacher finds absurd cannot dominate."""
    opd_topk: int = Field(default=16, ge=0)
    """With a hint: also distill the hinted teacher's k most likely tokens at every reply position,
    which reaches behaviour the student never samples. 0 turns the term off (the original OPD)."""
    w_distill: float = Field(default=1.0, ge=0)
    """Weight of the top-k distillation term (per reply token, like the policy objective)."""
    distill_target: Literal["served", "teacher"] = "teacher"
    """The reply the distillation runs along: ``served`` (what the user saw; the teacher disagrees
    almost only at its first token) or ``teacher`` (default: the hinted teacher's own greedy reply,
    end-of-turn included, so the whole reply the hint leads to is taught, its end too)."""
    teacher_model: str | None = "auto"
    """The hinted teacher's weights. ``auto`` (default): the catalog's larger model of the served
    model's tokenizer where it is pulled and verified and its load fits in the memory available
    (``local:qwen2.5-coder-1.5b`` for the 0.5B: a trainer with it peaked at 18 GB resident in the
    teacher probe, 14.4 GB in a training run), else the served model's own frozen base; resolved
    once when the trainer loads and recorded on every version (``teacher``, ``teacher_choice``);
    why, with the runs: :func:`ratchet.online.teacher.choose_teacher`. None (or ``base``): the base. Else a model that
    shares the served model's tokenizer (``local:NAME`` or ``local:/path/file.gguf``), loaded like the
    base at the first hinted sample, frozen, no LoRA, refused at load if its tokenizer is not the
    served model's. It gives the top-k and its own greedy replies (so also where
    ``rl_credit=parting`` and the KL mask part from it); the sampled-token term ``teacher − proximal``
    (``w_opd``) stays on the hinted base, where it differs from the student only by the hint, not by
    the two models' difference. Memory: the 1.5B's weights are 3.3 GB in bf16 (``teacher_dtype``),
    kept for the trainer's life; its first load dequantizes and caches them as for the base (114 s
    here, 6.7 GB on disk). Measured (``bench/results/online_teacher_probe.md``): on the German, name
    and numbered hints the 1.5B meets the preference more often than the 0.5B but rarely finishes
    within ``teacher_max_tokens``, hence ``teacher_unfinished: auto`` teaches its cut replies."""
    teacher_dtype: Literal["float32", "bfloat16"] = "bfloat16"
    """A separate ``teacher_model``'s weights in memory: ``bfloat16`` (default; cast after loading:
    half the memory, 3.3 GB for the 1.5B) or ``float32`` (as loaded). Measured on the 1.5B, 8 hinted
    prompts (``bench/results/online_teacher_probe_dtype.md``): the same 32-token greedy replies, the
    same top token at 254 of 256 positions, the top-k pass 3-4x faster and greedy as fast or faster
    (two runs on a shared machine). The base teacher is the student's own weights and stays fp32."""
    teacher_max_tokens: int = Field(default=48, ge=1)
    """Length limit of the hinted teacher's own reply (``distill_target=teacher``): the limit with
    ``teacher_length: fixed``, the least one with ``served``. 48 keeps the greedy pass a few
    seconds. What becomes of a reply cut at its limit is ``teacher_unfinished``."""
    teacher_length: Literal["served", "fixed"] = "served"
    """How long the hinted teacher may write. ``served`` (default): as long as the served reply it
    stands in for, with a quarter more room, at least ``teacher_max_tokens`` and at most
    ``teacher_max_tokens_cap``; ``fixed``: ``teacher_max_tokens`` for every reply. Why: at a fixed
    48 tokens what a preference puts at the end of an answer was never in a target (the sign-off:
    15 of 19 taught targets cut before their end with 160-token replies served), and the longer
    answers a hint leads to (a numbered list, German) were cut and dropped (23 of 28 numbered-list
    samples); a target cut before its end teaches the student not to stop. The served reply's length
    bounds the cost: a teacher's pass is as long as the answers the user was already given.
    Measured through ``ratchet serve`` (sign-off, 160-token replies, the 1.5B teacher, one run):
    5 of 11 taught targets cut (fixed 48: 15 of 19), update steps about twice as long, and the
    preference still 0.00: the teacher's finished answers did not end with the sign-off
    (``bench/results/online_personalization.md``)."""
    teacher_max_tokens_cap: int = Field(default=256, ge=1)
    """Most tokens a hinted teacher's reply may take under ``teacher_length: served``."""
    teacher_unfinished: Literal["auto", "drop", "prefix"] = "auto"
    """A hinted teacher's reply cut at ``teacher_max_tokens`` before it ended: ``drop`` teaches none
    of it (its end is unknown); ``prefix`` teaches the part written, without an end; ``auto``
    (default): ``prefix`` with a separate ``teacher_model``, ``drop`` with the base (why:
    :func:`ratchet.online.teacher.choose_teacher`).
    A finished reply is taught with its stop either way. Measured on the 0.5B, one update after
    four "shorter" corrections (``bench/results/online_teacher_stop_*``): held-out replies 9.7 → 13
    tokens with ``drop``, → 31.3 with ``prefix``, → 57 before the stop fix; through ``ratchet
    serve`` the bullets preference reached 7 of 8 held-out prompts with either (``drop`` at the
    third version, ``prefix`` at the second; one run each)."""
    hint_frame: Literal["append", "before", "aside"] = "append"
    """How the hindsight hint joins the last user message the teacher is shown
    (:data:`ratchet.online.preparation.HINT_FRAMES`): ``append`` (default: after the request),
    ``before`` (first, the request last) or ``aside`` (after it, marked as an instruction about
    the answer). Measured with ``bench.online_teacher_probe --frames``."""
    teacher_filter: TargetFilterName = "answers"
    """Which of the hinted teacher's own replies are taught (:mod:`ratchet.online.targets`):
    ``answers`` (default) drops one that hands the question back or refuses; ``none`` keeps all."""
    taught: TaughtName = "top_share"
    """What the distillation teaches at each position (:mod:`ratchet.online.taught`): ``top_share``
    (default; the only rule that reached the preference with the guard in its band), ``top_token``, ``topk``."""
    hold_coef: float = Field(default=1.0, ge=0)
    """Weight of the hold of the non-taught tokens at the base (``top_token``/``top_share``): 1 let
    the preference come with the guard kept; 5 held the preference back too."""
    lora_r: int = Field(default=16, ge=1)
    """LoRA rank."""
    lora_alpha: float = 32.0
    """LoRA alpha; the adapter is scaled by alpha / r (in peft and in llama.cpp alike)."""
    target_modules: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    """Projections that get a LoRA (the GGUF converter supports exactly these)."""
    learning_rate: float = Field(default=3e-4, gt=0)
    """Adam learning rate for the LoRA weights: 1e-4 moved nothing in two versions, 2e-3 collapsed
    the model, 1e-3 collapsed it at the second update."""
    batch_size: int = Field(default=8, ge=1)
    """Samples per update (one version per update): a version every ~4 conversations of a
    correcting user, ~1 min of the 0.5B on one core per pass over the batch (``ppo_epochs`` passes an update)."""
    micro_batch_size: int = Field(default=4, ge=1)
    """Samples per forward/backward pass; gradients accumulate to the whole batch's token mean."""
    ppo_epochs: int = Field(default=4, ge=1)
    """Optimization passes over each batch, one optimizer step each. 4: with one, a version (a batch
    of ~4-8 samples, one step at lr 3e-4) hardly moved the LoRA, numbered lists stayed at 0.00
    held-out through v5 with either teacher; with four (1.5B teacher, ``teacher_unfinished=prefix``)
    0.00 -> 0.50 at v2 -> 0.75 at v4, guard in its band, KL to base 0.18-0.49
    (``bench/results/online_personalization.md``, ``default_gate_paced_teacher15_epochs4``; one
    paced run). Cost: ~4x the forward/backward and optimizer work per update; π_prox comes from the
    first pass's forward, so no extra pass. ``max_staleness`` counts updates, not steps."""
    eps_low: float = 0.2
    """PPO clip below 1 (ratio floor 1 − eps_low)."""
    eps_high: float = 0.28
    """PPO clip above 1 (ratio ceiling 1 + eps_high), wider to leave room for exploration."""
    kl_coef: float = Field(default=0.0, ge=0)
    """Weight of an exact KL(policy ‖ base) per-token penalty at the reply positions the feedback
    does not teach (costs one base forward per micro-batch). 0: at 5 it kept the guard and stopped
    the preference; where it left the feedback's positions free it changed nothing."""
    is_cap: float = Field(default=2.0, gt=0)
    """Cap c of the truncated importance weight min(π_trainer / π_serve, c) that corrects staleness."""
    # Updates, not optimizer steps. Serving only ever has published versions, so a sample's lag
    # comes in whole updates: counted in steps, the nearest older sample is already ppo_epochs
    # behind, and a limit under that drops every sample but those of the trainer's own weights.
    # The PPO clip around π_prox (ratio within 1 ± eps) holds back how far one update moves the
    # policy on its batch however many passes it makes. A limit of 2 * ppo_epochs steps instead
    # would measure every edge of the tree with the ppo_epochs running now (wrong across a restart
    # that changed it) and would tighten every explicit setting, all written when steps and
    # updates were the same (ppo_epochs 1); counted in updates they keep their meaning. The
    # importance weight (is_cap) corrects what lag is left within the limit.
    max_staleness: int = Field(default=2, ge=0)
    """Samples served by weights more than this many updates (versions, of ``ppo_epochs`` optimizer
    steps each) behind the trainer's are dropped; counted along the versions' parent links, so a
    refused version or a rollback adds none. 1 keeps those served by the trainer's parent version,
    the usual case (serving swaps to a version only once it is published); 0 only its own."""
    max_grad_norm: float = Field(default=1.0, gt=0)
    """Gradient clipping (global L2 norm)."""
    max_seq_len: int = Field(default=1024, ge=16)
    """Longest prompt + response trained on; longer prompts lose their oldest tokens."""
    gradient_checkpointing: bool = False
    """Trade compute for memory (needed for the 1.5B model on 24 GB)."""
    seed: int = 0
    """Seed for the LoRA initialization."""
    min_batch: int = Field(default=4, ge=1)
    """Fewest usable samples a partial batch is trained on, however long it waited (capped at
    ``batch_size``): an idle period never makes the trainer step on one sample."""
    max_wait_s: float = Field(default=120.0, ge=0)
    """How long after a batch's first sample to wait for a full batch before training on what is
    there (at least ``min_batch``)."""
    poll_interval_s: float = 2.0
    """Pause between queue polls when there is nothing to train on."""
    heldout_path: Path | None = None
    """JSONL of held-out cases ({messages, preferred, dispreferred}) scored before each promotion."""
    eval_tolerance: float = 0.5
    """A version whose held-out margin is worse than the current one's by more than this is not served."""
    gate: GateConfig = Field(default_factory=GateConfig)
    """The other promotion checks (guard score, tasks, KL to base, floor of the preferred replies'
    log-prob); without ``heldout_path`` the built-in tasks and the KL bound still apply."""
    claim_lease_s: float = Field(default=300.0, gt=0)
    """How long the trainer's claim on queued samples lasts; renewed every third of that while held,
    so only a trainer that hangs or vanishes loses it."""
    max_reclaims: int = Field(default=3, ge=1)
    """A sample taken back from a crashed or failed trainer this many times is marked failed, so a
    sample that crashes training cannot stop it for good."""
    kl_samples: int = Field(default=4, ge=0)
    """Sequences on which KL to the base is measured for each version's record (0 = skip)."""
    convert_gguf: bool = True
    """Convert each version to a GGUF LoRA for llama.cpp (off only for tests without a GGUF base)."""
    weights_cache_dir: Path | None = None
    """Where dequantized weights are cached; default: the user cache dir (``…/ratchet/torch``)."""

    @field_validator("teacher_model")
    @classmethod
    def _local_teacher(cls, value: str | None) -> str | None:
        # The teacher's logits are read in torch from a GGUF's weights: a served model (http, openai)
        # gives no top-k over the whole vocabulary, and a weight version is not a frozen base.
        if value is None:
            return None
        rest = value.removeprefix("local:")
        if not rest.strip():
            raise ValueError("empty; name a local model, e.g. local:qwen2.5-coder-1.5b")
        if "@" in rest or (":" in rest and not rest.startswith(("/", ".", "~"))):
            raise ValueError("the teacher must be a local model's frozen weights: local:NAME (see `ratchet "
                             "models list`) or local:/path/file.gguf, without a @version")
        return value


__all__ = ["TrainerConfig"]
