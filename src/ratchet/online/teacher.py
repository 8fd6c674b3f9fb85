"""The hinted teacher: whose frozen weights, shown the correction's hint, give the distillation targets.

Two kinds, chosen by ``trainer.teacher_model`` (:func:`hinted_teacher`; ``auto``, the default, is
resolved by :func:`choose_teacher`: the catalog's larger model of the served model's tokenizer where
it is pulled, else the base):

* :class:`BaseTeacher` (``None``): the student's own frozen base, scored through the
  peft model with its adapter off: no second copy of the weights.
* :class:`ModelTeacher` (``local:NAME`` or ``local:/path/file.gguf``): another model's frozen weights,
  loaded like the trainer's base (:func:`~ratchet.online.weights.load_policy`), never trained, no
  LoRA. Its token ids and top-k must be over the student's vocabulary, so its tokenizer must be the
  student's (:func:`check_same_tokenizer`; qwen2.5-coder-1.5b shares the 0.5B's). A difference in
  the number of logit rows (padding past the tokenizer's last token) is cut to the shared range.

What the teacher gives (:class:`HintedTeacher`): its top-k along a reply and its own greedy replies
(so also where ``rl_credit=parting`` and the KL mask part from it). The sampled-token term
``teacher − proximal`` (``w_opd``) is not asked of it: the trainer scores that one with its own
hinted base. Why: that term is read on every token of the served reply, and between two models it
would be mostly their difference (the larger model's confidence on ordinary words), not the hint's,
pushing the student toward the other model everywhere; the base under the hint against the student
without it differs only by the hint (and what the adapter has learned). The top-k and the own
replies are targets to move to, where a stronger model's reading of the hint is what is wanted.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ratchet.contracts import RatchetError
from ratchet.online.scoring import GreedyReply, ScoredPolicy, chat_ids
from ratchet.online.weights import load_policy, resolve_gguf

log = logging.getLogger("ratchet.online.trainer")


@dataclass
class TeacherTargets:
    """What the hinted teacher gave an update: the texts of its own replies taught, refused by
    ``teacher_filter`` and cut at their limit (``teacher_length``; kept in the version's record)."""

    hinted: int = 0
    taught: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)

#: Texts both tokenizers must encode identically: prose, German with umlauts, code, CJK, a list,
#: emoji and a name with a leading space (the kinds of text the hints ask for).
PROBES = (
    "Hello, world! How are you today?",
    "Antworte bitte auf Deutsch: Wie spät ist es? Grüße aus München.",
    "def add(a, b):\n    return a + b  # 加法",
    "1. First item\n2. Second item\n\n- a bullet",
    " Noor, here you go 🙂",
)


class HintedTeacher(Protocol):
    """The frozen model that, shown the hint, says what the student should have written."""

    #: What the version's record names as the teacher (``base`` or the configured spec).
    name: str

    def topk(self, sequences: Sequence[list[int]], starts: Sequence[int], k: int) -> list[tuple[Any, Any]]:
        """The teacher's k most likely tokens at each reply position: (log-probs, ids) per sample,
        ids within the student's vocabulary."""
        ...

    def replies(self, prompts: Sequence[list[int]], max_tokens: int) -> list[GreedyReply]:
        """The teacher's greedy replies to these prompt ids (the student's token ids)."""
        ...


def teacher_budgets(served_lengths: Sequence[int], config: Any) -> list[int]:
    """Per hinted sample, the most tokens the teacher's own reply may take
    (``trainer.teacher_length``): ``teacher_max_tokens`` each, or with ``served`` the served
    reply's length and a quarter more, within ``teacher_max_tokens`` .. ``teacher_max_tokens_cap``,
    rounded up to 16 so that replies of similar length are written in one batch."""
    floor, cap = config.teacher_max_tokens, max(config.teacher_max_tokens, config.teacher_max_tokens_cap)
    if config.teacher_length == "fixed":
        return [floor] * len(served_lengths)
    return [min(cap, max(floor, -(-math.ceil(1.25 * n) // 16) * 16)) for n in served_lengths]


def replies_within(teacher: HintedTeacher, prompts: Sequence[list[int]],
                   budgets: Sequence[int]) -> list[GreedyReply]:
    """The teacher's greedy replies, each within its own budget: prompts of one budget asked together."""
    replies: list[GreedyReply | None] = [None] * len(prompts)
    for budget in sorted(set(budgets)):
        at = [i for i, b in enumerate(budgets) if b == budget]
        for i, reply in zip(at, teacher.replies([prompts[i] for i in at], budget), strict=True):
            replies[i] = reply
    return [r for r in replies if r is not None]


class BaseTeacher:
    """The student's own frozen base with the hint: ``policy`` scored with its adapter off."""

    name = "base"

    def __init__(self, policy: ScoredPolicy) -> None:
        self.policy = policy

    def topk(self, sequences: Sequence[list[int]], starts: Sequence[int], k: int) -> list[tuple[Any, Any]]:
        return self.policy.teacher_topk(sequences, starts, k)

    def replies(self, prompts: Sequence[list[int]], max_tokens: int) -> list[GreedyReply]:
        return self.policy.greedy_replies(prompts, max_tokens, base=True)


class ModelTeacher(ScoredPolicy):
    """Another model's frozen weights as the hinted teacher, read over the student's tokenizer.

    Build it with :meth:`over`, which checks the tokenizer and cuts the vocabulary to the shared range.
    """

    def __init__(self, name: str, model: Any, tokenizer: Any, pad_id: int, config: Any) -> None:
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.pad_id = pad_id
        self.config = config  # read for micro_batch_size only

    @classmethod
    def over(cls, student: ScoredPolicy, name: str, model: Any, tokenizer: Any, *, student_name: str) -> ModelTeacher:
        """``model`` (a transformers causal LM with its own ``tokenizer``) as the teacher of
        ``student``: refused unless the tokenizers agree and the teacher has a row for every token;
        frozen; its output rows cut to the student's when it has more."""
        check_same_tokenizer(student.tokenizer, tokenizer, student=student_name, teacher=name)
        student_rows, teacher_rows = _rows(student._causal_lm()), _rows(model)
        if teacher_rows < student_rows:
            # The student's rows past the teacher's are padding unless its tokenizer reaches them.
            size = len(student.tokenizer)
            if size > teacher_rows:
                raise _refuse(name, student_name, f"the teacher has {teacher_rows} token rows, the tokenizer "
                                                  f"{size} tokens")
        elif teacher_rows > student_rows:
            # Rows past the student's are padding (the tokenizers agree): cut there, so the teacher's
            # top-k and greedy replies never name an id the student has no logit for.
            model.resize_token_embeddings(student_rows)
        model.requires_grad_(False)
        model.eval()
        # The student's tokenizer decodes and stops the teacher's replies: they are the same tokens.
        return cls(name, model, student.tokenizer, student.pad_id, student.config)

    def _frozen(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()  # no adapter: the whole model is frozen

    def _causal_lm(self) -> Any:
        return self.model

    def topk(self, sequences: Sequence[list[int]], starts: Sequence[int], k: int) -> list[tuple[Any, Any]]:
        return self.teacher_topk(sequences, starts, k)

    def replies(self, prompts: Sequence[list[int]], max_tokens: int) -> list[GreedyReply]:
        return self.greedy_replies(prompts, max_tokens)


def _refuse(teacher: str, student: str, why: str) -> RatchetError:
    return RatchetError(
        f"trainer.teacher_model {teacher!r} cannot teach the served model {student!r}: {why}. The teacher's "
        "token ids and top-k must be over the student's vocabulary",
        hint="name a teacher that shares the served model's tokenizer (local:qwen2.5-coder-1.5b for "
             "qwen2.5-coder-0.5b), or unset trainer.teacher_model to teach with the served model's own base")


def check_same_tokenizer(student_tokenizer: Any, teacher_tokenizer: Any, *, student: str, teacher: str) -> None:
    """Refuse (:class:`RatchetError` naming ``trainer.teacher_model``, both models and the fix) unless
    the teacher's tokenizer encodes the :data:`PROBES` and a chat-templated prompt as the student's
    does and their eos, pad and bos ids agree."""
    for text in PROBES:
        a = [int(i) for i in student_tokenizer.encode(text, add_special_tokens=False)]
        b = [int(i) for i in teacher_tokenizer.encode(text, add_special_tokens=False)]
        if a != b:
            raise _refuse(teacher, student, f"the tokenizers encode {text!r} differently ({a[:6]}... vs {b[:6]}...)")
    probe = [{"role": "user", "content": "Hi"}]
    if chat_ids(student_tokenizer, probe) != chat_ids(teacher_tokenizer, probe):
        raise _refuse(teacher, student, "their chat templates render a prompt as different token ids")
    for attr in ("eos_token_id", "pad_token_id", "bos_token_id"):
        a, b = getattr(student_tokenizer, attr, None), getattr(teacher_tokenizer, attr, None)
        if a != b:
            raise _refuse(teacher, student, f"their {attr} differ ({a} vs {b})")


def _rows(model: Any) -> int:
    """How many token rows the model's logits have (the vocabulary, padding included)."""
    return int(model.get_output_embeddings().weight.shape[0])


def teacher_gguf(spec: str) -> Path:
    """The GGUF a ``trainer.teacher_model`` spec names (``local:NAME``, ``local:/path.gguf`` or either
    without ``local:``); an absent one is refused naming the setting and how to get it."""
    try:
        return resolve_gguf(spec.removeprefix("local:"))
    except RatchetError as exc:
        raise RatchetError(f"trainer.teacher_model {spec!r}: {exc.args[0]}", hint=exc.hint) from None


def load_teacher(student: ScoredPolicy, spec: str, *, student_name: str, cache_dir: Path | None = None,
                 dtype: str = "float32") -> ModelTeacher:
    """The teacher ``spec`` names, loaded as the trainer loads its base (fp32, cached), cast to
    ``dtype`` (``float32`` or ``bfloat16``) and checked against ``student``."""
    import torch

    model, tokenizer, info = load_policy(teacher_gguf(spec), cache_dir)
    log.info("loaded the hinted teacher %s in %.1fs (cache hit: %s)", spec, info["load_s"], info["cache_hit"])
    model.to({"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype])
    return ModelTeacher.over(student, spec, model, tokenizer, student_name=student_name)


AUTO = "auto"


@dataclass(frozen=True)
class TeacherChoice:
    """Which hinted teacher a trainer uses and how it treats a reply cut at the limit, and why
    (``trainer.teacher_model`` / ``teacher_unfinished`` as configured, ``auto`` resolved)."""

    configured: str | None
    spec: str | None
    """``local:NAME`` (or a GGUF) of a separate teacher; None: the served model's own base."""
    unfinished: str
    """``drop`` or ``prefix`` (``teacher_unfinished``, resolved)."""
    reason: str = "configured"

    @property
    def name(self) -> str:
        return self.spec or "base"

    def record(self) -> dict[str, Any]:
        return {"teacher": self.name, "teacher_unfinished": self.unfinished, "teacher_choice": self.reason}


def choose_teacher(teacher_model: str | None, teacher_unfinished: str, served: str | Path | None) -> TeacherChoice:
    """Resolve ``auto`` in ``trainer.teacher_model`` and ``trainer.teacher_unfinished``.

    ``teacher_model: auto`` is the catalog's teacher of the ``served`` model (``local:NAME`` or its
    GGUF file; :attr:`~ratchet.models.registry.CatalogEntry.teacher`, the 1.5B for the 0.5B) where
    that model is pulled and verified and the memory a trainer with it takes (``teach_gb``) is available,
    else the served model's own base; ``served`` None (a trainer
    built around weights in memory, as tests do) is taught by its base. Nothing is downloaded.
    Why a larger teacher where there is one: with its own base as teacher the 0.5B learned none of
    the preferences it never shows first (German, the user's name, numbered lists: 0.00 at every
    version, also with four passes), since a hinted 0.5B rarely writes the target (it role-plays the
    name, writes English, or a list cut before its items); the 1.5B's targets taught numbered lists
    (0.75) and German (0.92) through ``ratchet serve`` (``bench/results/online_personalization.md``).

    ``teacher_unfinished: auto`` is ``prefix`` for a separate teacher and ``drop`` for the base: the
    1.5B rarely finishes a German or numbered answer within ``teacher_max_tokens``, so dropping cut
    replies leaves it almost nothing to teach, while the base's cut replies taught with ``prefix``
    made a "shorter" student's replies longer (``bench/results/online_teacher_stop_*``)."""
    if teacher_model == AUTO:
        spec, reason = _catalog_teacher(served)
    elif teacher_model in (None, "base"):
        spec, reason = None, "configured: the served model's own base"
    else:
        spec, reason = teacher_model, "configured"
    unfinished = teacher_unfinished if teacher_unfinished != AUTO else ("prefix" if spec else "drop")
    return TeacherChoice(teacher_model, spec, unfinished, reason)


def _catalog_teacher(served: str | Path | None) -> tuple[str | None, str]:
    from ratchet.models.registry import CATALOG, is_verified

    if served is None:
        return None, "auto: weights given in memory, taught by their own base"
    name = str(served).removeprefix("local:")
    name = Path(name).stem if name.endswith(".gguf") else name
    entry = CATALOG.get(name)
    if entry is None or entry.teacher is None:
        return None, f"auto: the catalog names no teacher for {name}, taught by its own base"
    if not is_verified(entry.teacher):
        return None, (f"auto: {entry.teacher} would teach {name} but is not pulled (ratchet models pull "
                      f"{entry.teacher}); taught by its own base")
    need, free = CATALOG[entry.teacher].teach_gb, available_gb()
    if need is not None and free is not None and free < need:
        # Loaded beside the served model and the student, a teacher the machine cannot hold gets
        # the trainer killed for memory mid-run (seen: a probe loading the 1.5B beside a training
        # run was killed by the kernel); the base costs nothing more.
        return None, (f"auto: {entry.teacher} would teach {name} but a trainer with it needs about {need:g} GB and "
                      f"{free:.1f} GB is available; taught by its own base (set trainer.teacher_model to insist)")
    return f"local:{entry.teacher}", f"auto: {entry.teacher} is pulled and verified and teaches {name}"


def available_gb() -> float | None:
    """Memory available to a new process now (``MemAvailable``, GB); None where it cannot be read."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        return None
    return None


def hinted_teacher(student: ScoredPolicy, spec: str | None, *, student_name: str, cache_dir: Path | None = None,
                   dtype: str = "float32") -> HintedTeacher:
    """``trainer.teacher_model``'s teacher for ``student``: its own base when ``spec`` is None."""
    if spec is None:
        return BaseTeacher(student)
    return load_teacher(student, spec, student_name=student_name, cache_dir=cache_dir, dtype=dtype)


__all__ = ["AUTO", "PROBES", "BaseTeacher", "HintedTeacher", "ModelTeacher", "TeacherChoice", "TeacherTargets",
           "check_same_tokenizer", "choose_teacher", "hinted_teacher", "load_teacher", "teacher_gguf"]
