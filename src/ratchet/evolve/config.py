"""Every setting of an improvement run and of the engine's own components, in one module.

A run is configured by one YAML file (``ratchet evolve CONFIG.yaml``) read into
:class:`EvolveConfig`; components are named, with their own options, and built as
``Cls(options, ctx)`` (see :mod:`ratchet.evolve.components`)::

    workspace: examples/humaneval-coder
    suite: {name: humaneval, options: {limit: 40}}
    splits: {search: 0.4, heldin: 0.3, heldout: 0.3, seed: 0}
    selector: {name: dgm}
    proposers: [{name: reflective, weight: 2}, {name: diff}]
    gate: {name: paired, options: {alpha: 0.05}}
    budget: {max_calls: 200}
    approval: {required: false}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ratchet.config import Settings
from ratchet.executors.config import ExecutorConfig
from ratchet.models.budget import BudgetConfig


class ComponentSpec(Settings):
    """One named component and its options."""

    name: str
    """The component's registered name (see ``ratchet.evolve.components``)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Its own settings; checked against the component's options class when it is built."""
    weight: float = Field(default=1.0, gt=0)
    """For proposers: how often this one is picked relative to the others."""


class SplitsConfig(Settings):
    """How a suite's tasks are divided. Fractions are of the tasks left after explicit lists."""

    search: float = Field(default=0.4, ge=0, le=1)
    """Fraction of tasks whose failures proposers see (never used to accept a change)."""
    heldin: float = Field(default=0.3, ge=0, le=1)
    """Fraction on which the gate's paired test decides acceptance."""
    heldout: float = Field(default=0.3, ge=0, le=1)
    """Fraction on which a change must not regress beyond the parent's noise."""
    test: float = Field(default=0.0, ge=0, le=1)
    """Fraction kept untouched until the final report; 0 reports on held-out (then not untouched)."""
    seed: int = 0
    """Seed of the shuffle that assigns tasks to splits."""
    ids: dict[str, list[str]] = Field(default_factory=dict)
    """Explicit task ids per split (``search``, ``heldin``, ``heldout``, ``test``); override fractions."""
    guard: list[str] = Field(default_factory=list)
    """Task ids that no accepted change may regress on (taken out of the other splits)."""

    @model_validator(mode="after")
    def _fractions_fit(self) -> SplitsConfig:
        total = self.search + self.heldin + self.heldout + self.test
        if total > 1 + 1e-9:
            raise ValueError(f"search + heldin + heldout + test = {total:g}: the fractions must add up to at most 1")
        return self


class SmokeConfig(Settings):
    """The cheap first stage of evaluation: a few held-in tasks at the first seed."""

    tasks: int = Field(default=4, ge=0)
    """How many held-in tasks the smoke stage runs (0 skips it)."""
    margin: float = Field(default=0.25, ge=0, le=1)
    """A child survives the smoke stage unless it scores this much below its parent there."""


class FutilityConfig(Settings):
    """Stop evaluating a child on held-in once the gate could no longer accept it."""

    enabled: bool = False
    """Evaluate held-in task by task (all seeds of a task, then the next) and stop as soon as the
    gate's held-in test fails even with every remaining task at the most it can gain (score 1):
    the child is rejected as ``futility`` and the rest is never paid for. For suites whose tasks
    are expensive (an agent's run each); it needs a gate with ``could_accept`` (``paired``). Off by
    default: one task at a time leaves a pool or a Ray executor one task to run at once."""


class ApprovalConfig(Settings):
    """Human approval of accepted candidates (``ratchet evolve approve|reject RUN CAND``, or the
    dashboard's Evolution view)."""

    required: bool = False
    """Hold every candidate the gate accepts until a person approves it."""
    wait: Literal["poll", "end"] = "end"
    """``poll``: the loop waits for the approval; ``end``: the run stops as waiting and is resumed."""
    poll_s: float = Field(default=2.0, gt=0)
    """Seconds between looks for an approval while polling."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Stop polling (the run ends as waiting) after this many seconds; None waits forever."""


class CanaryConfig(Settings):
    """Known-answer checks of the grader (see :mod:`ratchet.evolve.canary`)."""

    enabled: bool = True
    """Run the suite's canaries at start and on resume; a failed canary stops the run."""
    every: int = Field(default=0, ge=0)
    """Also run them every this many steps (0: only at start)."""
    required: bool = False
    """Refuse a suite that declares no canaries."""


class StaticCheckConfig(Settings):
    """What a proposal must pass before anything is evaluated."""

    load_entry: bool = True
    """Load the manifest's Python entry file in the sandbox (it must import without error)."""
    load_timeout_s: float = Field(default=20.0, gt=0)
    """Seconds the sandboxed load may take."""
    novelty: bool = False
    """Refuse, before any evaluation, a child that is a program already in the archive once its
    Python files are normalized (comments and layout dropped; other files byte for byte): the
    search's ``novelty`` idea, against a small model that hands its parent back reformatted. Off
    by default: the A/A benchmark's cosmetic controls are meant to reach the gate."""


class ReportConfig(Settings):
    """The final report on the untouched test split."""

    bootstrap: int = Field(default=2000, ge=100)
    """Bootstrap resamples of the test tasks for the confidence intervals."""
    confidence: float = Field(default=0.95, gt=0, lt=1)
    """Level of the confidence intervals."""
    max_best_of_n: int = Field(default=16, ge=1)
    """Cap on N for the original-with-the-same-extra-budget (best-of-N) baseline."""
    best_of_n_temperature: float | None = Field(default=0.7, ge=0.0)
    """Sampling temperature of the best-of-N baseline's extra attempts (each has its own seed), set as
    the suite's ``workflow.temperature`` for them: under greedy decoding resampling would repeat the
    original's answers. ``null`` keeps the suite's own decoding; suites that drive no workflow (the
    synthetic one, whose draws already differ by seed) ignore it."""


class EvolveConfig(Settings):
    """One improvement run."""

    workspace: Path
    """The harness directory holding ``manifest.yaml`` (its editable files are the original)."""
    suite: ComponentSpec
    """The evaluator (a task suite) and its options."""
    splits: SplitsConfig = Field(default_factory=SplitsConfig)
    """How tasks are split into search / held-in / held-out / test, plus guard tasks."""
    selector: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="dgm"))
    """Which accepted candidate becomes the next parent."""
    proposers: list[ComponentSpec] = Field(default_factory=lambda: [ComponentSpec(name="reflective")])
    """The proposers; ``proposer_schedule`` says which one a step asks."""
    proposer_schedule: Literal["weighted", "round_robin"] = "weighted"
    """``weighted``: each step draws a proposer at random by its ``weight``; ``round_robin``: the
    proposers in the order listed, one a step (weights unused), so each is measured as often."""
    gate: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="paired"))
    """Decides whether a child is kept."""
    model: str | None = None
    """Model spec for proposers and model-calling suites (``local:NAME``, ``openai:MODEL``…)."""
    proposer_model: str | None = None
    """Model spec the proposers call instead of ``model``: a larger model proposing the changes
    while the suite's agents keep the small one (GEPA's ``reflection_lm``). Its calls count against
    the same budget and are journaled apart (a resumed run replays them). None: ``model``."""
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    """Limits on model use, shared by proposers and evaluators (one accountant)."""
    max_task_evals: int | None = Field(default=None, ge=0)
    """Most task evaluations actually run (cache hits are free); None is unlimited."""
    iterations: int = Field(default=10, ge=0)
    """Most proposal steps; a deterministic proposer's step that proposed nothing and said so
    (``Skip.exhausted``, no model call) is not counted while another proposer is left to draw."""
    stop_at_score: float | None = Field(default=None, ge=0, le=1)
    """Stop before ``iterations`` once an accepted candidate's mean held-in score reaches this
    (AutoHarness's stop at h = 1.0: a harness that plays every held-in game legally has nothing
    left to gain there); None: take every step."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """Evaluation seeds: parent and child run on all of them (the parent's spread is its noise band)."""
    smoke: SmokeConfig = Field(default_factory=SmokeConfig)
    """The cheap first evaluation stage."""
    futility: FutilityConfig = Field(default_factory=FutilityConfig)
    """The held-in stage stopped early for a child that can no longer pass the gate."""
    static: StaticCheckConfig = Field(default_factory=StaticCheckConfig)
    """Checks a proposal must pass before evaluation."""
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)
    """Optional human approval of accepted candidates."""
    canaries: CanaryConfig = Field(default_factory=CanaryConfig)
    """Known-answer checks of the grader."""
    report: ReportConfig = Field(default_factory=ReportConfig)
    """The final report."""
    seed: int = 0
    """Seed of the loop's own random choices (selector draws, proposer picks)."""
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    """Where task evaluations run: in this process (the default), a local pool, or Ray tasks
    (``--executor ray --address auto``). Results are the same wherever they run."""


# ------------------------------------------------------------------------------------------
# Options of the engine's own components (built as Cls(options, ctx)).
# ------------------------------------------------------------------------------------------


class ScoredSelectorOptions(Settings):
    """Options shared by selectors that rank candidates by a split's score."""

    split: str = "heldin"
    """The split whose score ranks candidates."""
    pool: Literal["accepted", "scored"] = "accepted"
    """``accepted``: parents are kept candidates; ``scored``: any candidate scored on ``split``, rejected
    ones too (the AutoHarness tree, where every evaluated version is a node)."""


class DgmOptions(ScoredSelectorOptions):
    """DGM parent choice: p ∝ sigmoid(λ(score − midpoint)) × 1 / (1 + children)."""

    sharpness: float = Field(default=10.0, gt=0)
    """λ: how strongly a higher score raises the chance of being picked."""
    midpoint: float = 0.5
    """The score at which the sigmoid is one half."""


class ThompsonOptions(ScoredSelectorOptions):
    """REx: θ ~ Beta(1 + C·h, 1 + C·(1 − h) + children) per candidate; the argmax is the parent."""

    c: float = Field(default=1.0, gt=0)
    """C: how much a candidate's score counts against the prior."""


class ParetoOptions(ScoredSelectorOptions):
    """GEPA: sample among the candidates best on at least one task, weighted by how many."""


class IslandsOptions(ScoredSelectorOptions):
    """Islands (round robin, ring migration) each holding a MAP-Elites grid over features."""

    islands: int = Field(default=3, ge=1)
    """How many islands evolve apart."""
    migrate_every: int = Field(default=6, ge=1)
    """Every this many steps each island receives its neighbour's best candidate."""
    bins: int = Field(default=4, ge=1)
    """Cells per feature in the MAP-Elites grid."""
    features: list[str] | None = None
    """Feature names to bin on; None takes the manifest's ``features`` (``length`` is built in)."""
    explore: float = Field(default=0.5, ge=0, le=1)
    """Chance of picking a random cell's elite instead of the island's best."""


class GateOptions(Settings):
    """The honest gate's thresholds."""

    alpha: float = Field(default=0.05, gt=0, lt=1)
    """Significance level of the paired test on held-in: of the whole run under ``correction:
    spending``, of each proposal under ``correction: none``."""
    correction: Literal["spending", "none"] = "spending"
    """Multiple comparisons over a run's proposals (:mod:`ratchet.evolve.gate`): ``spending`` tests
    the k-th proposal that reaches the gate at alpha / 2^k, so the chance that a run keeps any change
    that is no better than its parent is at most alpha however many proposals it makes; ``none``
    tests every proposal at alpha (a run of n null proposals then keeps one with up to 1-(1-alpha)^n)."""
    resamples: int = Field(default=2000, ge=100)
    """Random sign flips (permutation) or bootstrap resamples of the paired test."""
    noise_k: float = Field(default=1.0, ge=0)
    """The held-in gain must exceed this many parent noise bands."""
    heldout_k: float = Field(default=1.0, ge=0)
    """Held-out may drop by at most this many parent noise bands."""
    guard_tolerance: float = Field(default=0.0, ge=0, le=1)
    """A guard task regresses when its mean score drops by more than this."""
    cost_metric: str | None = None
    """With a per-task metric that measures cost (``model_calls``, ``tokens``), the child must also
    cost no more per task on held-in than its parent: "better at no more cost". None: score only."""
    cost_tolerance: float = Field(default=0.0, ge=0)
    """Share by which the child's mean cost per task may exceed the parent's under ``cost_metric``
    (0.05: 5%), for costs that vary from run to run (sampled reply lengths)."""
