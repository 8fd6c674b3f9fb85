"""The few contracts every part of Ratchet shares.

Everything else in the package depends on this module; this module depends on nothing of the
project. Messages are plain OpenAI-shaped dicts so they can be logged, replayed and sent over any
OpenAI-compatible wire unchanged. Data types are frozen dataclasses so that records written to the
run store cannot be mutated after the fact. Every shared Protocol and record is here, in one
place that depends on nothing, which is why the module runs to ~520 lines.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypedDict, TypeVar, runtime_checkable

#: Version of every JSON / JSONL record Ratchet writes. Bump when a record's shape changes.
FORMAT_VERSION = 1


# --------------------------------------------------------------------------------------------
# Errors: control flow by exceptions that carry a message a person (or a refiner model) can act on.
# --------------------------------------------------------------------------------------------


class RatchetError(Exception):
    """Base of every error Ratchet raises on purpose. ``hint`` says how to fix it."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        base = super().__str__()
        return f"{base}\n  hint: {self.hint}" if self.hint else base


class BudgetExceeded(RatchetError):
    """A run reached one of its budget limits (tokens, calls, wall time, dollars)."""


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class Message(TypedDict, total=False):
    """One chat message, shaped exactly as the OpenAI chat API shapes it."""

    role: str
    content: str
    name: str
    tool_call_id: str


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TokenLogprob:
    """Log-probability of one generated token under the model that generated it (raw logits)."""

    token: str
    logprob: float
    token_id: int | None = None


@dataclass(frozen=True)
class Completion:
    """What a model returned for one request."""

    text: str
    usage: Usage
    latency_s: float
    model: str
    finish_reason: str = "stop"
    logprobs: tuple[TokenLogprob, ...] | None = None


@runtime_checkable
class Model(Protocol):
    """A chat model. Backends: OpenAI-compatible HTTP, embedded llama.cpp, scripted/replay.

    ``grammar`` is a GBNF grammar for constrained output; backends that cannot honour it raise
    ``RatchetError`` rather than silently ignoring it. A last message with role ``assistant`` is a
    prefix of the answer: the reply continues it and holds only the continuation (join the two with
    ``ratchet.models.request.continued``); the embedded llama.cpp backend renders the chat template
    up to that prefix, the scripted model hands it to its script, and an HTTP endpoint gets it as
    the last message (servers differ on continuing it, which ``continued`` tolerates). ``logprobs=True`` asks for per-token
    log-probs; backends that cannot give them return ``Completion.logprobs = None``.
    """

    name: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        grammar: str | None = None,
    ) -> Completion: ...

    async def acomplete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        grammar: str | None = None,
    ) -> Completion: ...


@runtime_checkable
class ContextWindow(Protocol):
    """A model that knows how many tokens it can read and write at once (an embedded model's
    ``n_ctx``) and counts a request's tokens with its own tokenizer, so a caller can fit a prompt
    to it instead of meeting the backend's "exceeds context window" error. Wrappers need not
    implement it: ``ratchet.models.request.context_window`` looks through their ``inner``."""

    context_tokens: int

    def count_tokens(self, messages: Sequence[Message]) -> int: ...


@runtime_checkable
class ComputedElsewhere(Protocol):
    """A model wrapper with bookkeeping of its own (the budget's accounting) that keeps it when a
    copy of its model elsewhere (a node's model server) computes a reply: a caller handed such a
    copy asks through ``computed_by(copy)``, and through the copy alone for a model without this."""

    def computed_by(self, model: Model) -> Model: ...


@dataclass(frozen=True)
class LLMCall:
    """One model call as the budget accountant saw it; stored in the run index."""

    model: str
    purpose: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    ok: bool
    cost_usd: float | None = None
    error: str | None = None
    started_at: float = field(default_factory=time.time)


# --------------------------------------------------------------------------------------------
# Environments and episodes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """What the player to move sees."""

    player_id: int
    text: str


@dataclass(frozen=True)
class StepResult:
    """The outcome of one action.

    ``legal`` / ``illegal_reason`` come from the environment's own invalid-move signal, never from
    parsing text. ``ended_by_illegal`` is true when the game ended because of this invalid move.
    ``losing_not_illegal`` marks games where the environment calls a merely losing move "invalid"
    (a Minesweeper mine, a wrong Sudoku digit): reports count those as lost, not illegal.
    """

    observation: Observation | None
    done: bool
    legal: bool = True
    illegal_reason: str | None = None
    ended_by_illegal: bool = False
    losing_not_illegal: bool = False
    rewards: dict[int, float] | None = None
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    """A text environment: one or more players take turns submitting text actions."""

    env_id: str
    num_players: int

    def reset(self, seed: int) -> Observation: ...

    def step(self, action: str) -> StepResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class StepRecord:
    """One step of one episode, as written to the run store."""

    episode_id: str
    index: int
    player_id: int
    observation: str
    action: str
    legal: bool
    illegal_reason: str | None
    reward: float | None
    latency_s: float
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EpisodeSummary:
    """The outcome of one episode."""

    episode_id: str
    env_id: str
    seed: int
    agent: str
    steps: int
    illegal_steps: int
    rewards: dict[int, float]
    ended_by_illegal: bool
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Candidates and evaluations: anything that is proposed, judged and kept with its lineage.
# --------------------------------------------------------------------------------------------


def content_id(files: dict[str, str]) -> str:
    """A candidate's id is the hash of its files, so the same code is never stored twice."""
    digest = hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()
    return digest[:16]


@dataclass(frozen=True)
class Candidate:
    """A proposed artifact (harness code, prompt, playbook…) with its lineage.

    ``files`` maps relative paths to contents; ``meta`` keeps how it was made (the prompt, the
    model's raw response, the failures it was shown) so rejected candidates teach later ones.
    """

    id: str
    kind: str
    files: dict[str, str]
    parent_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)

    @classmethod
    def from_files(
        cls, kind: str, files: dict[str, str], parent_id: str | None = None, **meta: Any
    ) -> Candidate:
        return cls(id=content_id(files), kind=kind, files=files, parent_id=parent_id, meta=meta)


@dataclass(frozen=True)
class Evaluation:
    """A judgement of one candidate on one split of tasks (``search``, ``heldout``, …)."""

    candidate_id: str
    split: str
    score: float
    metrics: dict[str, float] = field(default_factory=dict)
    per_task: dict[str, float] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Evaluation:
        """An evaluation back from its stored JSON form (``id`` and ``format_version`` ignored);
        failures stored as untyped dicts by earlier versions are read with :meth:`Failure.from_record`."""
        return cls(str(record["candidate_id"]), str(record["split"]), float(record["score"]),
                   dict(record.get("metrics") or {}), dict(record.get("per_task") or {}),
                   [Failure.from_record(f) for f in record.get("failures") or ()],
                   float(record.get("created_at") or time.time()))


# --------------------------------------------------------------------------------------------
# The improvement engine: one loop (select -> propose -> check -> evaluate -> gate -> archive)
# whose every idea is a small class behind one of these four Protocols.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """One thing that went wrong, typed once for every producer and reader.

    ``kind`` is a short stable tag (``illegal_action``, ``test_failed``, ``exception``,
    ``timeout``, ``wrong_answer``, ``static_check``…); ``message`` is what a person or a refiner
    model reads; ``detail`` holds kind-specific data (the observation, the expected output…).
    """

    kind: str
    message: str
    task_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        """The JSON form every store writes (run store, evaluation cache, journals)."""
        return {"kind": self.kind, "message": self.message, "task_id": self.task_id, "detail": dict(self.detail)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | Failure) -> Failure:
        """A failure back from its JSON form (:meth:`to_record`). Runs stored before failures were
        typed hold plain dicts (``{"kind", "feedback", "board", "action", ...}``): their
        ``feedback`` (or ``message``) is read as the message and every other key as detail, so an
        old run still resumes and reports."""
        if isinstance(record, Failure):
            return record
        if set(record) <= _FAILURE_KEYS:
            return cls(str(record.get("kind") or "failure"), str(record.get("message") or ""),
                       record.get("task_id"), dict(record.get("detail") or {}))
        detail = {k: v for k, v in record.items() if k not in _FAILURE_KEYS and k != "feedback"}
        message = record.get("feedback", record.get("message"))
        return cls(str(record.get("kind") or "failure"), "" if message is None else str(message),
                   record.get("task_id"), detail)


_FAILURE_KEYS = frozenset({"kind", "message", "task_id", "detail"})


@dataclass(frozen=True)
class Task:
    """One unit of evaluation in a suite: ``input`` is whatever the grader and the candidate need."""

    id: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskResult:
    """A candidate's outcome on one task at one seed.

    ``score`` is in [0, 1] (1 = solved). ``trace`` is what happened, as text a reflective proposer
    can read (the model's reply, the test output, the game log). An evaluator never raises for a
    failing candidate: it returns score 0 with the failure.
    """

    task_id: str
    seed: int
    score: float
    trace: str = ""
    failures: tuple[Failure, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    """What a proposal says it fixes (AHE): checked against what actually flipped."""

    target: str
    root_cause: str = ""
    predicted_flips: tuple[str, ...] = ()


@dataclass(frozen=True)
class Proposal:
    """A change to a parent candidate: the full new text of each changed file, plus its claim.

    ``parents`` names every candidate the change was made from (two for a merge).
    """

    files: dict[str, str]
    claim: Claim
    proposer: str
    parents: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    shown: tuple[Failure, ...] = ()
    """The failures the proposer showed the model for this change (the evidence it answered): the
    child keeps them as ``failures_shown`` (the first few), which the dashboard's node page lists."""


@dataclass(frozen=True)
class Decision:
    """The gate's verdict, with the numbers behind it."""

    accepted: bool
    reason: str
    numbers: dict[str, float] = field(default_factory=dict)


class ArchiveView(Protocol):
    """What selectors and proposers may read of the archive (never write)."""

    def candidates(self, status: str | None = None) -> list[Candidate]: ...

    def results(self, candidate_id: str, split: str) -> list[TaskResult]: ...

    def score(self, candidate_id: str, split: str) -> float | None: ...

    def children(self, candidate_id: str) -> list[str]: ...

    def rejected(self, limit: int = 10) -> list[tuple[Candidate, Decision]]: ...

    def unusable(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Failed proposals (steps that made no candidate), newest first: each a mapping with the
        step's ``proposer``, ``reason`` and ``claim`` (None when it stated none)."""
        ...


@runtime_checkable
class Selector(Protocol):
    """Picks the parent of the next proposal from the accepted candidates."""

    name: str
    last: Mapping[str, Any]
    """What decided the last ``select`` (a Thompson draw, an island…; empty when nothing to
    say): the loop stores it with the child, as the selection that made it."""

    def select(self, archive: ArchiveView, rng: Any) -> Candidate: ...


@dataclass(frozen=True)
class Skip:
    """A proposer's answer when it has no change to offer this time, and why: the loop keeps it in
    the archive as a failed proposal (paid like any other step) that later proposals are shown."""

    reason: str
    claim: str | None = None
    """What the reply said it would fix, when it said that much (None: it stated no claim)."""
    attempts: tuple[dict[str, Any], ...] = ()
    """Each model ask of the proposal and its outcome (``ask``, ``error``…), oldest first."""
    exhausted: bool = False
    """A deterministic proposer's word that it has nothing to propose for this parent until the
    archive gains a candidate (its rules already fitted and tried, nothing new to learn from), and
    that saying so cost no model call: the loop does not count the step toward ``iterations``
    while another proposer is left to draw for the parent, so the run's steps go to proposers that can propose."""


@runtime_checkable
class Proposer(Protocol):
    """Makes one change to ``parent``, or says with a :class:`Skip` why it has none this time."""

    name: str
    deterministic: bool
    """True when the proposal is a function of the archive alone (no model sampling): such a
    proposer that skipped a parent is not drawn again for it until the archive gains a candidate
    (asked again, it would skip again), and the loop spends that step on another proposer."""

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any) -> Proposal | Skip: ...


@runtime_checkable
class Evaluator(Protocol):
    """Runs a candidate on tasks; lives outside the loop and never runs candidate code in-process.

    ``fingerprint`` is a hash of everything that decides a score (grader files, data, settings):
    it keys the evaluation cache and is pinned at run start.
    """

    name: str

    def fingerprint(self) -> str: ...

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]: ...


@runtime_checkable
class Gate(Protocol):
    """Accepts a child over its parent only on evidence: paired per-task results on the same tasks.

    ``parent`` and ``child`` map a split name (``heldin``, ``guard``, ``heldout``…) to results on
    the same tasks and seeds; ``noise`` maps a split to the parent's measured noise band there.
    """

    name: str

    def decide(
        self,
        parent: Mapping[str, Sequence[TaskResult]],
        child: Mapping[str, Sequence[TaskResult]],
        noise: Mapping[str, float],
    ) -> Decision: ...

    def could_accept(self, diffs: Sequence[float], noise: float) -> bool:
        """Whether the gate could still accept a child whose held-in gains (child minus parent, one
        per task in the gate's order) are at best ``diffs``, against the parent's ``noise`` band:
        what lets the loop stop paying for a child that can no longer pass (``futility``)."""
        ...


def to_record(obj: Any) -> dict[str, Any]:
    """A dataclass as a JSON-able dict carrying the format version."""
    record = asdict(obj)
    record["format_version"] = FORMAT_VERSION
    return record


# --------------------------------------------------------------------------------------------
# Executors: where rollouts and evaluations run (local processes now; Ray later).
# --------------------------------------------------------------------------------------------

T = TypeVar("T")
R = TypeVar("R")


@runtime_checkable
class Executor(Protocol):
    """Runs a picklable function over items, possibly in parallel; yields results in input order."""

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]: ...

    def close(self) -> None: ...
