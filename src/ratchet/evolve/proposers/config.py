"""Options of every proposer, one pydantic model each (the ``options:`` of a run config's entry)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ratchet.config import Settings
from ratchet.evolve.config import ComponentSpec


class ModelProposerOptions(Settings):
    """What every proposer that asks the model shares."""

    surfaces: list[str] = Field(default_factory=lambda: ["*"])
    """Glob patterns of the parent's files this proposer may pick to change (``*`` = any editable
    file, the proposers' own prompt files included, so a run can evolve how it proposes)."""
    template: str | None = None
    """A workspace surface holding this proposer's prompt template (e.g. ``proposer/reflective.md``):
    read from the parent candidate first, then the workspace, else the packaged default."""
    split: str = "search"
    """The split whose per-task results (traces) of the parent the model is shown."""
    max_traces: int = Field(default=4, ge=0)
    """Most failing tasks shown, the lowest-scoring first."""
    max_trace_chars: int = Field(default=1500, ge=100)
    """Longest trace shown per task (its head and tail are kept)."""
    max_rejected: int = Field(default=5, ge=0)
    """Most rejected attempts shown with the gate's reason, so the model does not repeat them."""
    max_tokens: int = Field(default=1500, ge=16)
    """Reply budget of one model call."""
    temperature: float = Field(default=0.7, ge=0.0)
    """Sampling temperature of the model calls."""
    fit_context: bool = True
    """A request that, with its reply's ``max_tokens``, does not fit the model's context window
    shows fewer failing tasks, down to none (a model that does not say its window is never cut);
    when even that does not fit, a clear error names the window and the fix. Without it a long
    request leaves the reply the window's remainder and a file is cut off mid-way."""


class SurfaceProposerOptions(ModelProposerOptions):
    """What the proposers that change one surface share: how they ask again after an unusable reply."""

    format_retries: int = Field(default=1, ge=0, le=3)
    """When a reply holds no usable edit (only the claim, no block, a block cut off, the file
    unchanged), ask again at most this many times: the same conversation plus a reminder that
    shows the target file and the answer's format (one model call each, paid from the run's
    budget). 0 gives up at once."""
    retry_template: str | None = None
    """Workspace surface of that reminder (default: the packaged ``retry_rewrite.md``, or
    ``retry_diff.md`` for the diff proposer)."""


class ReflectiveOptions(SurfaceProposerOptions):
    """Reflective rewrite of one surface from the parent's failure traces (GEPA)."""


class DiffOptions(SurfaceProposerOptions):
    """SEARCH/REPLACE edits of one surface (OpenEvolve), with a whole-file fallback."""

    fallback: bool = True
    """When a block does not apply, ask once more for the whole file instead of giving up."""
    fallback_template: str | None = None
    """Workspace surface of the fallback prompt (default: the packaged ``rewrite_after_diff.md``)."""


class MergeOptions(ModelProposerOptions):
    """Merge of two accepted candidates' surfaces (GEPA merge)."""

    mode: Literal["ancestor", "llm"] = "ancestor"
    """``ancestor``: per surface take the version that changed since the common ancestor (both
    changed: the parent that won more tasks); ``llm``: ask the model to merge one surface both changed."""
    pool: str = "accepted"
    """Archive status of the candidates the second parent is drawn from."""


class AgenticOptions(ModelProposerOptions):
    """A tool-using agent that reads raw traces and edits the workspace's files (Meta-Harness)."""

    runtime: str | None = None
    """Import path ``module:factory`` of the tool-using runtime; ``factory(options, ctx)`` returns an
    :class:`~ratchet.evolve.proposers.agentic.AgentRuntime`. None: ``ctx.extra["agent_runtime"]``
    if given, else Ratchet's agent runtime (``ratchet.runtime.proposer:RuntimeProposerAgent``)."""
    max_tool_calls: int = Field(default=40, ge=1)
    """Most tool calls the agent may make in one proposal (Ratchet's runtime: its step limit)."""
    harness: str | None = None
    """Ratchet's runtime: the harness workspace the agent runs with, a directory inside the
    candidate (the parent's own copy is used, so evolving it evolves the proposer) or absolute.
    None: the shipped default."""
    fallback: ComponentSpec | None = None
    """Another proposer asked when the agent changed no editable file, e.g. ``{name: reflective,
    options: {surfaces: [system_prompt.md]}}``: a whole-file rewrite of one surface from the
    failures, one model call, which a small model that cannot drive the tools may still manage
    (the 0.5B answered the proposer's task with no tool call at all). None: the step gives up."""


class SampleRepairOptions(Settings):
    """How a screening refiner's samples are repaired before the step ranks them, no model call
    (``evolve.proposers.repair``: the search's ``repair`` and ``autofix`` of every sample)."""

    mutants: int = Field(default=24, ge=1)
    """Most single-point mutants screened per round (a random subset, the search's 24)."""
    rounds: int = Field(default=3, ge=0, le=10)
    """Most rounds of hill-climbing: each round's best mutant is kept only when it screens higher,
    and the next round mutates it (the search's 3); 0: only the ``autofix``."""
    functions: list[str] | None = None
    """Top-level functions a mutant may change (the ones the model writes, e.g. ``legal_moves``
    inside a fixed template); None: every function of the file."""
    autofix: bool = True
    """Fix the slips with one reading first (a module used but not imported, an action word
    without its brackets: ``mutation.fixed``), kept unless the fix screens lower."""
    game: str | None = None
    """A TextArena game whose rules text says how its word actions are written (for ``autofix``);
    None: ``spelled``, else only missing imports are fixed."""
    spelled: dict[str, str] = Field(default_factory=dict)
    """Bare action words and how the game writes each (``{"roll": "[roll]"}``); empty: from ``game``."""
    imports: dict[str, str] = Field(default_factory=dict)
    """For ``autofix``: names a sample may read without binding them, each with the line that binds
    it (the helpers the request offers: ``{"parse_grid": "from harnesslib import parse_grid"}``).
    A refiner that cannot screen gets only this autofix, unscreened: a missing import has one reading."""


class CriticRefinerOptions(ModelProposerOptions):
    """The critic + refiner (AutoHarness): a few of the parent's failures, one per error type
    first, shown to the run's refiner (``ctx.extra["refiner"]``), which rewrites one file."""

    surface: str = "harness.py"
    """The file the refiner rewrites."""
    max_failures_shown: int = Field(default=5, ge=1)
    """Most failures the critic shows the refiner (the AutoHarness paper: 5)."""
    refiner: str | None = None
    """Import path ``module:Class`` of the refiner, built as ``Class(**refiner_options)`` (e.g.
    ``ratchet.autoharness.refine:HarnessRefiner``); None: ``ctx.extra["refiner"]``."""
    refiner_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the refiner (``HarnessRefiner``: ``game``, ``description``, ``mode``)."""
    samples: int = Field(default=1, ge=1, le=8)
    """Replies asked for per step (one model call each, the same request at new sampling seeds):
    the search's ``samples`` idea. With a refiner that has ``screen`` (``ScaffoldRefiner``: the
    share of explored states where ``legal_actions`` is right, run in the sandbox), the best
    screened one is proposed, and no sample is asked for after one that screens 1.0; without, the
    first usable one (the rest are not asked for). When the budget refuses a sample, the usable
    ones already paid for are still proposed."""
    fallback_refiner: str | None = None
    """Import path ``module:Class`` of a refiner asked instead once the refiner's replies for one
    parent were unusable ``fallback_after`` times (the search's whole-harness fallback:
    ``ratchet.autoharness.refine:HarnessRefiner`` behind the ``ScaffoldRefiner``, whose one
    function a small model may answer with its docstring alone). None: no fallback."""
    fallback_refiner_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the fallback refiner."""
    fallback_after: int = Field(default=2, ge=1)
    """Unusable replies to this proposer for one parent (counted in the archive's failed
    proposals, so a resumed run counts the same) before that parent gets the fallback refiner.
    Two, as the search's: with the 1.5B, falling back on the first empty reply sent Guess the
    Number nodes to whole-harness samples that all scored 0.0."""
    tell_previous_reply: bool = True
    """Tell the model, at the end of its request, what was wrong with this proposer's previous reply
    for the same parent (:class:`~ratchet.evolve.proposers.critic.PreviousReply`): its step's reason
    when it was unusable (no code, a syntax error…), or the failures of the child it made when that
    child scored 0 on every task (e.g. missing functions). False: every request as the refiner builds it."""
    repair: SampleRepairOptions | None = None
    """Repair every usable sample that screens below 1.0 by its autofix and screened single-point
    mutants before the step ranks them (a refiner with ``screen`` and ``samples`` > 1 only);
    the step then proposes the best screen, repaired or not. None: samples as the model wrote them."""


class ControlOptions(Settings):
    """Control proposers (noop, cosmetic) for A/A benchmarks: they change nothing that matters."""

    surfaces: list[str] = Field(default_factory=lambda: ["*"])
    """Glob patterns of the files a cosmetic change may touch."""


class Setting(Settings):
    """One fixed change: a top-level key of a YAML surface, or a whole file."""

    file: str
    """The surface."""
    key: str | None = None
    """A top-level key of that YAML file; None: ``value`` is the file's whole new text."""
    value: Any
    """The key's value, or the file's text."""


class Choice(Settings):
    """One setting of a surface and the values a search may give it."""

    file: str
    """The surface (a YAML file of the workspace, e.g. ``context.yaml``, or any text file when
    ``key`` is None)."""
    key: str | None = None
    """A top-level key of that YAML file (``opening``, ``temperature``, ``middleware``…); None:
    each value is the file's whole new text (another system prompt)."""
    values: list[Any] = Field(min_length=1)
    """The values to try, each a whole YAML value (a list or a mapping replaces the key's whole
    block) or a whole text; the parent's own value is skipped."""
    also: list[Setting] = Field(default_factory=list)
    """Changes made together with any of the values: an idea that needs two files (a prompt that
    asks for a format and the setting that reads it) is one proposal."""


class ChoicesOptions(Settings):
    """Declared alternatives of a workspace's settings, tried one at a time with no model call."""

    choices: list[Choice] = Field(min_length=1)
    """The settings a child may change and their values; a proposal changes one."""
