"""What every model-asking proposer shares: its prompt template, the evidence it shows, its model
call, and how it gives up (a :class:`~ratchet.contracts.Skip` with its reason, recorded, never an
exception that stops the loop).

Templates are plain files (``prompts/*.md``) rendered with :class:`string.Template` (``$name``),
so code with braces in a template or a surface never breaks rendering. A workspace may provide its
own version as a surface (``options.template``, e.g. ``proposer/reflective.md``): the parent's copy
wins, then the workspace's, then the packaged one, so a run can evolve how it proposes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from fnmatch import fnmatch
from pathlib import Path
from string import Template
from typing import Any

from ratchet.contracts import ArchiveView, Candidate, Claim, Failure, Message, Proposal, RatchetError, Skip, TaskResult
from ratchet.evolve.context import EngineContext
from ratchet.evolve.proposers.config import ModelProposerOptions
from ratchet.evolve.proposers.parsing import CLAIM_FORMAT, ELIDED, closed, parse_claim
from ratchet.models.request import context_window, continued

PROMPTS = Path(__file__).with_name("prompts")
#: What a proposal's claim says when the reply stated none (the change itself was usable).
NO_CLAIM = "(the reply stated no claim)"
#: Where proposers record the replies they could not use (run store, JSONL).
SKIPS_FILE = "proposer_skips.jsonl"


def pick(rng: Any, items: list[Any]) -> Any:
    """A uniform choice with any rng that has ``random()`` (``random.Random`` or numpy's)."""
    return items[min(int(rng.random() * len(items)), len(items) - 1)]


def surfaces_of(candidate: Candidate, patterns: list[str]) -> list[str]:
    """The candidate's files that match one of ``patterns``, sorted."""
    return sorted(p for p in candidate.files if any(fnmatch(p, pattern) for pattern in patterns))


def clip(text: str, limit: int) -> str:
    """Head and tail of a long text (the end of a trace is usually where it failed)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n{ELIDED.format(len(text) - limit)}\n{text[-half:]}"


class BaseProposer:
    """What every proposer shares: ``deterministic`` (False unless a subclass says its proposal is
    a function of the archive alone) and how it gives up (:meth:`skip`)."""

    name = "proposer"
    deterministic = False
    ctx: EngineContext | None = None

    def skip(self, parent: Candidate, reason: str, claim: Claim | None = None,
             attempts: list[dict[str, Any]] | None = None, exhausted: bool = False, **meta: Any) -> Skip:
        """No proposal this time: the :class:`Skip` the loop keeps in the archive as a failed
        proposal, also recorded with ``meta`` (the reply…) in the run's ``proposer_skips.jsonl``.
        ``exhausted``: see :attr:`Skip.exhausted` (a deterministic proposer's only)."""
        run = self.ctx.run if self.ctx is not None else None
        if run is not None:
            run.append_jsonl(SKIPS_FILE, {"proposer": self.name, "parent": parent.id, "reason": reason,
                                          "at": time.time(), **{k: str(v)[:4000] for k, v in meta.items()}})
        return Skip(reason, None if claim is None else claim.target, tuple(attempts or ()), exhausted)


class ModelProposer(BaseProposer):
    """Base of the proposers that ask the model. Subclasses set ``name`` and ``default_template``."""

    name = "model"
    default_template = "reflective.md"

    def __init__(self, options: ModelProposerOptions, ctx: EngineContext) -> None:
        self.options = options
        self.ctx = ctx
        self.asks = 0
        """Model calls this proposer has made (every ask, retries and fallbacks included)."""

    # -- evidence ------------------------------------------------------------------------------

    def results(self, archive: Any, candidate_id: str) -> list[TaskResult]:
        return list(archive.results(candidate_id, self.options.split))

    def failures_text(self, results: list[TaskResult], limit: int | None = None) -> str:
        """The lowest-scoring tasks' traces and failures, as the model reads them: ``limit`` of
        them (default ``max_traces``)."""
        limit = self.options.max_traces if limit is None else limit
        worst: dict[str, TaskResult] = {}  # one trace per task: its worst seed
        for result in results:
            if result.score < 1.0 and (result.task_id not in worst or result.score < worst[result.task_id].score):
                worst[result.task_id] = result
        failing = sorted(worst.values(), key=lambda r: (r.score, r.task_id))
        if not failing:
            return "(no failing task was recorded for this version)"
        parts = []
        for result in failing[:limit]:
            lines = [f"### task {result.task_id} (score {result.score:.2f})"]
            lines += [f"- {f.kind}: {f.message}" for f in result.failures[:5]]
            if result.trace:
                lines.append(clip(result.trace, self.options.max_trace_chars))
            parts.append("\n".join(lines))
        if len(failing) > limit:
            parts.append(f"({len(failing) - limit} more failing tasks not shown)")
        return "\n\n".join(parts)

    def rejected_text(self, archive: ArchiveView) -> str:
        """Earlier attempts the gate rejected, with its reasons, so the model tries something else."""
        rows = []
        for candidate, decision in archive.rejected(self.options.max_rejected)[: self.options.max_rejected]:
            claim = candidate.meta.get("claim") or {}
            target = claim.get("target", "?") if isinstance(claim, dict) else "?"
            changed = ", ".join((candidate.meta.get("proposal") or {}).get("surfaces", [])) or "?"
            rows.append(f"- changed {changed}; aimed at: {target}; rejected: {decision.reason}")
        # then failed proposals (no candidate was made), in the room the rejections left
        room = self.options.max_rejected - len(rows)
        for failed in (archive.unusable(room) if room > 0 else []):
            aimed = f"aimed at: {failed['claim']}; " if failed.get("claim") else ""
            rows.append(f"- {aimed}no usable change ({failed['proposer']}): {clip(failed['reason'], 160)}")
        return "\n".join(rows) or "(none yet)"

    # -- prompt --------------------------------------------------------------------------------

    def template(self, parent: Candidate, surface: str | None = None, default: str | None = None) -> tuple[str, str]:
        """``(template text, where it came from)``."""
        surface = surface if surface is not None else self.options.template
        if surface:
            if surface in parent.files:
                return parent.files[surface], f"candidate:{surface}"
            local = Path(self.ctx.workspace) / surface
            if local.is_file():
                return local.read_text(), f"workspace:{surface}"
        name = default or self.default_template
        return (PROMPTS / name).read_text(), f"package:{name}"

    def render(self, template: str, **values: Any) -> list[Message]:
        text = Template(template).safe_substitute(claim_format=CLAIM_FORMAT, **values)
        return [{"role": "user", "content": text}]

    def fitted(self, build: Callable[[int], list[Message]], shown: int) -> list[Message]:
        """``build(n)``: the request showing ``n`` failures, for the largest ``n`` up to ``shown``
        whose request fits the model's window with the reply's ``max_tokens`` (``fit_context``)."""
        window = context_window(self.ctx.model) if self.options.fit_context and self.ctx is not None else None
        messages = build(shown)
        if window is None:
            return messages
        for n in range(shown, -1, -1):
            messages = build(n) if n != shown else messages
            if window.count_tokens(messages) + self.options.max_tokens <= window.context_tokens:
                return messages
        name = getattr(self.ctx.model, "name", "the model")
        raise RatchetError(f"proposer {self.name!r}: its shortest request is {window.count_tokens(messages)} "
                           f"tokens, and {name} reads {window.context_tokens} with {self.options.max_tokens} of "
                           "them for the reply",
                           hint="give the proposer model a larger context window (e.g. "
                                "local:qwen2.5-coder-1.5b?n_ctx=8192) or lower the proposer's max_tokens")

    def fitted_request(self, template: str, results: list[TaskResult], **values: Any) -> list[Message]:
        """``template`` rendered with ``values`` and as many of ``results``' failing tasks
        (``$failures``) as fit the model's window (:meth:`fitted`)."""
        return self.fitted(lambda n: self.render(template, failures=self.failures_text(results, n), **values),
                           self.options.max_traces)

    # -- the model -----------------------------------------------------------------------------

    def ask(self, messages: list[Message], rng: Any) -> str:
        """One model call; a budget stop propagates (it ends the run), nothing else is caught here.
        Messages that end in the assistant's prefix (a refiner's ``body_only`` request) get the
        whole answer back: the prefix and its continuation (:func:`ratchet.models.request.continued`)."""
        if self.ctx.model is None:
            raise RatchetError(f"proposer {self.name!r} needs a model and the run has none",
                               hint="give the run a model (model: local:qwen2.5-coder-0.5b), or use noop/cosmetic")
        seed = int(rng.random() * 2**31)
        self.asks += 1
        completion = self.ctx.model.complete(messages, temperature=self.options.temperature,
                                             max_tokens=self.options.max_tokens, seed=seed)
        text = continued(messages, completion.text)
        return closed(text) if completion.finish_reason == "stop" else text  # "length": really cut off

    # -- outcome -------------------------------------------------------------------------------

    def claim(self, reply: str, known_ids: list[str]) -> tuple[Claim, bool]:
        """The reply's claim and whether it was stated (a usable change without one still counts)."""
        claim = parse_claim(reply, known_ids)
        return (claim, True) if claim is not None else (Claim(target=NO_CLAIM), False)

    def proposal(self, files: dict[str, str], claim: Claim, parents: tuple[str, ...],
                 evidence: Sequence[Failure] = (), **meta: Any) -> Proposal:
        """``evidence``: the failures the request showed the model (the child keeps the first few)."""
        return Proposal(files=files, claim=claim, proposer=self.name, parents=parents,
                        meta={"surfaces": sorted(files), **meta}, shown=tuple(evidence))
