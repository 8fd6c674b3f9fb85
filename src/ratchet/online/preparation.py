"""What an update makes of each judged sample: whether it teaches, by which signal, as which token ids.

The trainer's first stage, apart from the update itself: :func:`assess_sample` decides from the
configured signal (Binary RL's reward, the hindsight hint's distillation, both) and the sample's
staleness whether an update would learn from it, keep it only as an anchor for the KL to the base,
or drop it and why; the training loop asks it of every claimed sample on every poll, so it never
tokenizes. :func:`prepare_samples` turns the kept ones into the token ids the update scores: the
served prompt and reply cut to ``max_seq_len``, and for a hinted sample the teacher's prompt, the
same conversation with the hint appended (:func:`with_hint`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ratchet.online.scoring import chat_ids
from ratchet.online.trainer_config import TrainerConfig


@dataclass
class Prepared:
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
    #: distill_target=teacher: the hinted teacher's greedy reply ids, taught or not, with the token it
    #: stopped on when it stopped (the KL mask and the parting token read it).
    teacher_reply: list[int] | None = None
    #: distill_target=teacher: student ids (prompt + the teacher's reply) and where its reply starts.
    distill_ids: list[int] | None = None
    distill_start: int = 0
    #: No learning signal of its own, kept (``kl_coef`` > 0) only for the KL to base on its reply.
    anchor_only: bool = False
    #: 0/1 per reply token: where the KL-to-base penalty applies (:func:`~ratchet.online.losses.untaught_positions`).
    kl_mask: Any = None


@dataclass(frozen=True)
class Assessment:
    """What the configured signal makes of one sample, worked out once for
    :meth:`~ratchet.online.trainer.Trainer.usable` and :func:`prepare_samples` alike."""

    #: Why an update would not learn from the sample: a drop reason of ``prepare`` (``stale``,
    #: ``no_signal``, ``empty``), ``anchor`` (kept only for the KL to the base), or None when it learns.
    unused: str | None
    reward: float = 0.0
    #: The hint the teacher is shown; None without one or when the student had already been told it.
    hint: str | None = None
    #: The sample's hint was set aside because its last user message already states it.
    hint_already_asked: bool = False


#: How the hint joins the last user message (``trainer.hint_frame``), ``{request}`` and ``{hint}``
#: filled in. Each keeps the conversation's messages and roles as served, so the hinted teacher and
#: the student differ by the hint's words alone (a system message in its place would also drop the
#: chat template's default one). ``append``: the hint after the request, as OpenClaw-RL shows it;
#: a teacher may then answer the hint, not the request ("Hello Noor! How can I assist you today?").
#: ``before``: the hint first, so the request is what the message ends on. ``aside``: after the
#: request, marked as an instruction about the answer.
HINT_FRAMES: dict[str, str] = {
    "append": "{request}\n\n{hint}",
    "before": "{hint}\n\n{request}",
    "aside": "{request}\n\n(When you answer, follow this instruction: {hint})",
}


def with_hint(messages: Sequence[dict[str, Any]], hint: str, frame: str = "append") -> list[dict[str, Any]]:
    """The messages with the hindsight hint joined to the last user message as ``frame`` says
    (:data:`HINT_FRAMES`); a conversation without a user message gets the hint as one."""
    template = HINT_FRAMES[frame]
    out = [dict(m) for m in messages]
    for message in reversed(out):
        if message.get("role") == "user":
            message["content"] = template.format(request=message.get("content") or "", hint=hint)
            return out
    return [*out, {"role": "user", "content": hint}]


def already_asked(messages: Sequence[dict[str, Any]], hint: str) -> bool:
    """Whether the last user message already contains the hint (case and spacing aside)."""
    def norm(text: str) -> str:
        return " ".join(text.lower().split())

    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    content = last.get("content") if last else None
    return isinstance(content, str) and norm(hint) in norm(content)


def assess_sample(sample: Any, cfg: TrainerConfig, staleness: Callable[[int], int]) -> Assessment:
    """What an update would make of ``sample`` with the signal ``cfg`` configures, ``staleness``
    giving the updates from a serving version to the trainer's. Cheap (no tokenizing): the
    loop asks it of every sample on every poll."""
    if staleness(sample.turn.policy_version) > cfg.max_staleness:
        return Assessment("stale")
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
    return Assessment(unused, reward, hint, asked)


def prepare_samples(samples: Sequence[Any], cfg: TrainerConfig, tokenizer: Any,
                    staleness: Callable[[int], int]) -> tuple[list[Prepared], dict[str, int]]:
    """Filter samples by signal and staleness (:func:`assess_sample`), and turn them into token ids
    with ``tokenizer``.

    Returns the kept samples (anchors included) and counts of what was dropped and why.
    """
    kept: list[Prepared] = []
    dropped = {"stale": 0, "no_signal": 0, "empty": 0, "hint_already_asked": 0}
    for sample in samples:
        turn = sample.turn
        verdict = assess_sample(sample, cfg, staleness)
        why, reward, hint = verdict.unused, verdict.reward, verdict.hint
        if verdict.hint_already_asked:
            dropped["hint_already_asked"] += 1  # a hint ignored; the sample may still teach by its reward
        if why in dropped:
            dropped[why] += 1
            continue
        anchor = why == "anchor"
        response = list(turn.response_token_ids)
        prompt = list(turn.prompt_token_ids) or chat_ids(tokenizer, turn.messages, turn.tools)
        keep_prompt = max(cfg.max_seq_len - len(response), 1)
        prompt = prompt[-keep_prompt:]
        response = response[: cfg.max_seq_len - len(prompt)]
        item = Prepared(
            turn_id=turn.turn_id,
            input_ids=prompt + response,
            response_start=len(prompt),
            reward=reward,
            serving_logprobs=list(turn.response_logprobs)[: len(response)],
            anchor_only=anchor,
        )
        if hint:
            # Rendered with the turn's tools, as its served prompt was: without them the teacher
            # judged a reply to a prompt that never offered the tools the reply calls.
            hinted = chat_ids(tokenizer, with_hint(turn.messages, hint, cfg.hint_frame), turn.tools)
            hinted = hinted[-max(cfg.max_seq_len - len(response), 1):]
            item.teacher_ids = hinted + response
        kept.append(item)
    return kept, dropped


__all__ = ["HINT_FRAMES", "Assessment", "Prepared", "already_asked", "assess_sample", "prepare_samples", "with_hint"]
