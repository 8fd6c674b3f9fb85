"""The trainer: a LoRA on the served model, one update per batch of judged samples, on CPU.

What lives where: :mod:`~ratchet.online.trainer_config` (the settings), :mod:`~ratchet.online.weights`
(the served GGUF loaded into torch), :mod:`~ratchet.online.scoring` (forward passes: log-probs, the
frozen base's top-k, greedy replies, KL), :mod:`~ratchet.online.preparation` (what each sample
teaches, as token ids), this module (one update in named stages, with the hinted teacher's
choice and targets it consults, which is why it runs to ~510 lines) and
:mod:`~ratchet.online.trainer_loop` (the loop that feeds it and publishes versions).
peft puts a LoRA on the seven projections of every block; each update becomes a peft adapter plus
its GGUF LoRA conversion, which the serving process hot-swaps.

The teacher for hindsight-hint distillation is a frozen model shown the hint
(:mod:`~ratchet.online.teacher`): the base through ``model.disable_adapter()`` (no second copy of
the weights), or ``teacher_model``, another model of the student's tokenizer.

Log-probs used in the objective (see :mod:`ratchet.online.losses` for the full reasoning):

* behaviour: the serving log-probs stored on the turn (quantized model, raw logits);
* proximal: the trainer's own log-probs before the update; the OPD advantage is
  ``teacher − proximal`` so both sides come from the same fp32 numerics and differ only by the hint
  (using the quantized serving log-probs there would add the quantization gap to every token). Its
  teacher is the hinted base whatever ``teacher_model`` says, for the same reason.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ratchet.contracts import RatchetError
from ratchet.online.batching import Usable
from ratchet.online.credit import reward_credit
from ratchet.online.preparation import Prepared, assess_sample, prepare_samples
from ratchet.online.scoring import ScoredPolicy
from ratchet.online.targets import target_filter
from ratchet.online.taught import taught_loss
from ratchet.online.teacher import (HintedTeacher, TeacherChoice, TeacherTargets, choose_teacher, hinted_teacher,
                                    replies_within, teacher_budgets, teacher_gguf)
from ratchet.online.trainer_config import TrainerConfig
from ratchet.online.versions import Lineage
from ratchet.online.weights import load_policy, resolve_gguf

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _BatchPlan:
    """What every micro-batch of one update shares: the token counts its per-token means divide
    by, and the distillation and credit rules."""

    total_tokens: float
    distill_tokens: float
    kl_tokens: float
    rule: Any
    credit: Any


@dataclass
class _Tally:
    """Sums gathered over an update's micro-batches for its record."""

    stats: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("loss", "objective", "kl", "clip", "ratio", "weight", "distill", "hold"), 0.0))
    gap_sum: float = 0.0
    gap_abs: float = 0.0
    gap_n: int = 0
    adv_sum: float = 0.0
    rl_tokens: float = 0.0  # reply tokens the Binary RL reward landed on (rl_credit)
    grad_norm: float = 0.0


class Trainer(ScoredPolicy):
    """A peft LoRA policy with one update per batch of samples.

    ``version`` is the number of the weight version the trainer's adapter equals (0 = base).
    """

    def __init__(self, config: TrainerConfig, model: Any, tokenizer: Any, *, version: int = 0,
                 teacher: TeacherChoice | None = None) -> None:
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
        #: The version tree staleness is measured on; empty (version numbers as updates) until the
        #: training loop reads it from the version store.
        self.lineage = Lineage()
        #: The GGUF the policy was loaded from (the adapter's conversion target); None for in-memory models.
        self.base_gguf: Path | None = None
        self.load_info: dict[str, Any] = {}
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad if pad is not None else getattr(tokenizer, "eos_token_id", 0) or 0)
        #: ``teacher_model`` / ``teacher_unfinished`` resolved (:meth:`from_config` decides once, for the
        #: served file, before the student is loaded); weights given in memory are taught by their base.
        self.teacher_choice = teacher or choose_teacher(config.teacher_model, config.teacher_unfinished, None)
        #: The hinted teacher, loaded at the first hinted sample that needs it.
        self._teacher: HintedTeacher | None = None

    @classmethod
    def from_config(cls, config: TrainerConfig) -> Trainer:
        gguf = resolve_gguf(config.model)
        choice = choose_teacher(config.teacher_model, config.teacher_unfinished, gguf)
        if choice.spec is not None:  # its weights load at the first hinted sample; a missing file is said now
            teacher_gguf(choice.spec)
        model, tokenizer, info = load_policy(gguf, config.weights_cache_dir)
        log.info("loaded %s for training in %.1fs (cache hit: %s); hinted teacher %s (%s)", gguf.name, info["load_s"],
                 info["cache_hit"], choice.name, choice.reason)
        trainer = cls(config, model, tokenizer, teacher=choice)
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
        """Updates from the weights that served a sample to the trainer's (:class:`Lineage`)."""
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

    def usable(self, samples: Sequence[Any]) -> Usable:
        """Which of ``samples`` an update would learn from now, and why not the others: what the
        training loop counts against ``batch_size`` and ``min_batch`` before it steps."""
        unused = {s.turn.turn_id: why for s in samples
                  if (why := assess_sample(s, self.config, self.staleness).unused) is not None}
        return Usable(tuple(s for s in samples if s.turn.turn_id not in unused), unused)

    def prepare(self, samples: Sequence[Any]) -> tuple[list[Prepared], dict[str, int]]:
        """Filter samples by signal and staleness (:meth:`usable`), and turn them into token ids
        (:func:`~ratchet.online.preparation.prepare_samples`).

        Returns the kept samples (anchors included) and counts of what was dropped and why.
        """
        return prepare_samples(samples, self.config, self.tokenizer, self.staleness)

    # ------------------------------------------------------------------ the hinted teacher

    @property
    def teacher(self) -> HintedTeacher:
        """The hinted teacher :attr:`teacher_choice` names, loaded on first use: a trainer that
        never sees a hint never loads a second model."""
        if self._teacher is None:
            self._teacher = hinted_teacher(self, self.teacher_choice.spec, student_name=self.config.model,
                                           cache_dir=self.config.weights_cache_dir, dtype=self.config.teacher_dtype)
        return self._teacher

    def _teacher_replies(self, hinted: Sequence[Prepared], starts: Sequence[int]) -> tuple[list[str], list[str], list[str]]:
        """``distill_target=teacher``: the hinted teacher writes its own greedy reply, and its
        top-k along that reply, end-of-turn included, becomes the distillation target of the
        student without the hint. Returns the replies' text: those taught, those ``teacher_filter``
        refused, and those cut at their limit (``teacher_length``) before the teacher stopped (kept
        in the version's record; a sample whose target is refused or unfinished keeps its other signals).

        Why the end-of-turn is part of a finished reply's target: a reply is taught position by
        position, so where it ends is taught only if the position that predicts its end is.
        Without it a hint that asks for a shorter answer taught the short answer's words and never
        its stop (``bench/results/online_hyperparameters.md``). A reply cut at the limit is taught
        without an end, or not at all, as ``teacher_unfinished`` says.
        """
        cfg = self.config
        prompts = [it.teacher_ids[:start] for it, start in zip(hinted, starts, strict=True)]
        budgets = teacher_budgets([len(it.input_ids) - it.response_start for it in hinted], cfg)
        replies = replies_within(self.teacher, prompts, budgets)
        rule = target_filter(cfg.teacher_filter)
        keep, refused, unfinished = [], [], []
        for it, p, reply in zip(hinted, prompts, replies, strict=True):
            # The parting token and the KL mask read the reply with its stop: a served reply that
            # goes on where the teacher stopped parts from it there.
            it.teacher_reply = reply.with_stop if reply.ids else reply.ids
            text = str(self.tokenizer.decode(reply.ids, skip_special_tokens=True))
            if not reply.ids:
                continue
            if reply.stop is None:
                unfinished.append(text)
                if self.teacher_choice.unfinished == "prefix" and rule.keep(text):
                    keep.append((it, p, reply.ids))
            elif rule.keep(text):
                keep.append((it, p, reply.with_stop))
            else:
                refused.append(text)
        if not keep:
            return [], refused, unfinished
        topk = self.teacher.topk([p + r for _, p, r in keep], [len(p) for _, p, _ in keep], cfg.opd_topk)
        for (it, _, reply), pair in zip(keep, topk, strict=True):
            it.distill_ids = it.input_ids[: it.response_start] + reply
            it.distill_start = it.response_start
            it.teacher_topk = pair
        return [str(self.tokenizer.decode(r, skip_special_tokens=True)) for _, _, r in keep], refused, unfinished

    @staticmethod
    def _taught_term(rule: Any, rows: Sequence[tuple[Any, Prepared]], normalizer: float, stats: dict[str, float]) -> Any:
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

        Samples without a usable signal or more than ``max_staleness`` updates old are dropped
        and counted; a batch left empty makes no update (``updated`` is False). The stages, in
        order: :meth:`prepare` (token ids, what each sample teaches), :meth:`_consult_teacher` (the
        frozen base's scores and targets, before the weights move), :meth:`_mark_kl_positions`,
        then per micro-batch :meth:`_learn_from` (policy objective + distillation + KL) and
        :meth:`_hold_anchors`, one optimizer step per epoch, and :meth:`_step_metrics`.
        """
        import torch

        cfg = self.config
        started = time.perf_counter()
        items, dropped = self.prepare(samples)
        metrics: dict[str, Any] = {"samples": len(items), "dropped": dropped, "updated": False, "trained": []}
        if not items or all(it.anchor_only for it in items):
            # A batch with nothing to learn is no update: holding the model in place needs no step.
            return metrics
        anchors = [it for it in items if it.anchor_only]
        items = [it for it in items if not it.anchor_only]
        targets = self._consult_teacher(items)
        batch = _BatchPlan(
            total_tokens=float(sum(len(it.input_ids) - it.response_start for it in items)),
            distill_tokens=float(sum(len(it.distill_ids) - it.distill_start for it in items if it.distill_ids is not None)),
            kl_tokens=self._mark_kl_positions(items + anchors) if cfg.kl_coef else 0.0,
            rule=taught_loss(cfg.taught, hold_coef=cfg.hold_coef),
            credit=reward_credit(cfg.rl_credit),
        )
        tally = _Tally()
        self.model.train()
        for epoch in range(cfg.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            for i in range(0, len(items), cfg.micro_batch_size):
                self._learn_from(items[i : i + cfg.micro_batch_size], batch, tally, first_epoch=epoch == 0)
            self._hold_anchors(anchors, batch, tally)
            tally.grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm))
            self.optimizer.step()
        self.model.eval()
        metrics.update(self._step_metrics(items, anchors, batch, tally, targets, time.perf_counter() - started))
        return metrics

    # ------------------------------------------------------------------ the stages of one update

    def _consult_teacher(self, items: Sequence[Prepared]) -> TeacherTargets:
        """The hinted teacher (a frozen model shown the hint: :attr:`teacher`) gives, per
        ``distill_target``, its top-k along each hinted sample's served reply or its own reply to
        distill; the hinted base scores the served reply's tokens for the sampled-token term, even
        with a ``teacher_model`` (why: :mod:`ratchet.online.teacher`). Computed once, before the
        update moves the weights."""
        cfg = self.config
        hinted = [it for it in items if it.teacher_ids is not None]
        targets = TeacherTargets(hinted=len(hinted))
        if not hinted:
            return targets
        starts = [len(it.teacher_ids) - (len(it.input_ids) - it.response_start) for it in hinted]
        for it, lp in zip(hinted, self.score([it.teacher_ids for it in hinted], starts, base=True), strict=True):
            it.teacher_logprobs = lp
        if not cfg.opd_topk or cfg.signal == "rl":
            return targets
        if cfg.distill_target == "served":
            topk = self.teacher.topk([it.teacher_ids for it in hinted], starts, cfg.opd_topk)
            for it, pair in zip(hinted, topk, strict=True):
                it.teacher_topk = pair
            return targets
        targets.taught, targets.refused, targets.unfinished = self._teacher_replies(hinted, starts)
        return targets

    @staticmethod
    def _mark_kl_positions(items: Sequence[Prepared]) -> float:
        """Sets each sample's ``kl_mask`` (the reply positions the KL to the base covers) and
        returns how many positions that is over the batch."""
        from ratchet.online.losses import untaught_positions

        kl_tokens = 0.0
        for it in items:
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
        return kl_tokens

    def _learn_from(self, chunk: Sequence[Prepared], batch: _BatchPlan, tally: _Tally, *, first_epoch: bool) -> None:
        """One micro-batch's forward and backward: the clipped policy objective on its served
        replies, the distillation (along them or along the teacher's own replies) and the KL."""
        import torch

        from ratchet.online.losses import ppo_clipped_loss

        cfg = self.config
        # distill_target=served: the distillation runs along the served reply (same forward).
        along = [it.teacher_topk is not None and it.distill_ids is None for it in chunk]
        logps, student_rows, *penalty = self._response_logprobs(
            [it.input_ids for it in chunk], [it.response_start for it in chunk], rows=along,
            base_rows=batch.rule.needs_base, kl_masks=[it.kl_mask for it in chunk] if batch.kl_tokens else None)
        rows = [self._policy_terms(it, lp, batch, tally, first_epoch=first_epoch)
                for it, lp in zip(chunk, logps, strict=True)]
        # Concatenate the chunk's tokens: the token mean is over the whole batch anyway.
        cat = [torch.cat([r[k] for r in rows]) for k in range(4)]
        out = ppo_clipped_loss(cat[0], cat[1], cat[2], torch.ones_like(cat[0]), eps_low=cfg.eps_low,
                               eps_high=cfg.eps_high, weights=cat[3], normalizer=batch.total_tokens)
        loss = out.loss
        if penalty:
            # A per-token mean over every penalized position of the batch (anchors included).
            loss = loss + cfg.kl_coef * penalty[0] / batch.kl_tokens
            tally.stats["kl"] += float(penalty[0].detach()) / batch.kl_tokens
        served_rows = [(r, it) for r, it in zip(student_rows, chunk, strict=True) if r is not None]
        if served_rows:
            loss = loss + cfg.w_distill * self._taught_term(batch.rule, served_rows, batch.total_tokens, tally.stats)
        own = [it for it in chunk if it.distill_ids is not None]
        if own:
            # The teacher's own replies are other sequences than the served ones: a second
            # forward pass, its loss a per-token mean over all such replies of the batch.
            _, own_rows = self._response_logprobs([it.distill_ids for it in own], [it.distill_start for it in own],
                                                  rows=[True] * len(own), base_rows=batch.rule.needs_base)
            loss = loss + cfg.w_distill * self._taught_term(batch.rule, list(zip(own_rows, own, strict=True)),
                                                            batch.distill_tokens, tally.stats)
        loss.backward()
        share = out.tokens / batch.total_tokens
        tally.stats["loss"] += float(loss.detach())
        tally.stats["objective"] += out.objective
        tally.stats["clip"] += out.clip_fraction * share
        tally.stats["ratio"] += out.ratio_mean * share
        tally.stats["weight"] += out.weight_mean * share

    def _policy_terms(self, it: Prepared, lp: Any, batch: _BatchPlan, tally: _Tally, *, first_epoch: bool) -> tuple:
        """(log-probs, proximal log-probs, advantages, importance weights) of one served reply."""
        import torch

        from ratchet.online.losses import combined_advantages, truncated_importance_weights

        cfg = self.config
        if it.proximal_logprobs is None:
            # First pass: the weights are still θ_old, so the detached log-probs ARE π_prox.
            it.proximal_logprobs = lp.detach()
        prox = it.proximal_logprobs
        n = lp.shape[0]
        serving = torch.tensor(it.serving_logprobs, dtype=torch.float32)
        if serving.shape[0] == n:
            weights = truncated_importance_weights(prox, serving, cfg.is_cap)
            if first_epoch:
                diff = prox - serving
                tally.gap_sum += float(diff.sum())
                tally.gap_abs += float(diff.abs().sum())
                tally.gap_n += n
        else:
            weights = torch.ones(n)
        rl_mask = batch.credit.mask(it.reward, it.input_ids[it.response_start:], it.teacher_reply)
        if first_epoch and it.reward:
            tally.rl_tokens += float(rl_mask.sum())
        adv = combined_advantages(
            it.reward, it.teacher_logprobs, prox,
            w_rl=cfg.w_rl if cfg.signal != "opd" else 0.0,
            w_opd=cfg.w_opd if cfg.signal != "rl" else 0.0,
            opd_clip=cfg.opd_clip,
            rl_mask=rl_mask,
        )
        if first_epoch:
            tally.adv_sum += float(adv.sum())
        return lp, prox, adv, weights

    def _hold_anchors(self, anchors: Sequence[Prepared], batch: _BatchPlan, tally: _Tally) -> None:
        """Samples with no signal of their own (a neutral turn, a retry the correction already
        instructed): ordinary replies of this user's, held where the base had them (``kl_coef``)."""
        cfg = self.config
        for i in range(0, len(anchors) if batch.kl_tokens else 0, cfg.micro_batch_size):
            chunk = anchors[i : i + cfg.micro_batch_size]
            _, _, penalty = self._response_logprobs([it.input_ids for it in chunk], [it.response_start for it in chunk],
                                                   kl_masks=[it.kl_mask for it in chunk])
            (cfg.kl_coef * penalty / batch.kl_tokens).backward()
            tally.stats["kl"] += float(penalty.detach()) / batch.kl_tokens
            tally.stats["loss"] += float(cfg.kl_coef * penalty.detach() / batch.kl_tokens)

    def _step_metrics(self, items: Sequence[Prepared], anchors: Sequence[Prepared], batch: _BatchPlan,
                      tally: _Tally, targets: TeacherTargets, elapsed: float) -> dict[str, Any]:
        """What the version's record says about the update (per-epoch means of the tallies)."""
        epochs = self.config.ppo_epochs
        stats = tally.stats
        sequence_tokens = sum(len(it.input_ids) for it in items)
        metrics: dict[str, Any] = {
            "updated": True,
            "trained": [it.turn_id for it in [*items, *anchors]],
            "loss": stats["loss"] / epochs,
            "objective": stats["objective"] / epochs,
            "kl_penalty": stats["kl"] / epochs,
            "kl_tokens": int(batch.kl_tokens),
            "anchors": len(anchors),
            "distill_kl": stats["distill"] / epochs,
            "taught": batch.rule.name,
            "hold_kl": stats["hold"] / epochs,
            "clip_fraction": stats["clip"] / epochs,
            "ratio_mean": stats["ratio"] / epochs,
            "is_weight_mean": stats["weight"] / epochs,
            "advantage_mean": tally.adv_sum / batch.total_tokens,
            "rl_credit": batch.credit.name,
            "rl_tokens": int(tally.rl_tokens),
            "grad_norm": tally.grad_norm,
            "optimizer_steps": epochs,
            "tokens": int(batch.total_tokens),
            "sequence_tokens": int(sequence_tokens),
            "hinted": targets.hinted,
            **self.teacher_choice.record(),
            "teacher_targets": targets.taught,
            "teacher_targets_refused": targets.refused,
            "teacher_targets_unfinished": targets.unfinished,
            "step_s": round(elapsed, 3),
            "tokens_per_s": round(sequence_tokens * epochs / elapsed, 2),
        }
        if tally.gap_n:
            # The served model is a quantized GGUF, the trainer fp32: this gap is never exactly 0.
            metrics["serving_gap_mean"] = tally.gap_sum / tally.gap_n
            metrics["serving_gap_abs_mean"] = tally.gap_abs / tally.gap_n
        return metrics


def __getattr__(name: str) -> Any:
    # Configs written before the split name the loop ``ratchet.online.trainer:run_trainer_loop``.
    if name == "run_trainer_loop":
        from ratchet.online.trainer_loop import run_trainer_loop

        return run_trainer_loop
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Trainer", "TrainerConfig"]
