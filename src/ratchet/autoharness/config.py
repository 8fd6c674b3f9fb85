"""Settings of one AutoHarness synthesis run (and of its evaluation protocol)."""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import Field, model_validator

from ratchet.config import ConfigError, Settings
from ratchet.envs.harness.failure_types import TypeNames
from ratchet.models.budget import BudgetConfig

#: Keys that only the dedicated search read (removed: the engine is the one search). A saved run's
#: config that has them still loads: they are dropped with a DeprecationWarning.
DROPPED = {"eval_envs": "the engine evaluates one env per task"}
#: Ideas removed, with why; a config that switches one still loads, with a DeprecationWarning.
DROPPED_IDEAS = {"decompose": "the decomposed request (parse_board + legal_moves) was removed: measured with the "
                              "0.5B it lowered the score (bench/results/autoharness_ablation.md)"}
#: Budget keys renamed to the engine's :class:`BudgetConfig` names.
RENAMED_BUDGET = {"max_seconds": "max_wall_s"}


def default_budget() -> BudgetConfig:
    """The limits a synthesis runs under unless told otherwise: 40 refiner calls, 200,000 tokens, an hour."""
    return BudgetConfig(max_calls=40, max_tokens=200_000, max_wall_s=3600.0)


class RatchetIdeas(Settings):
    """The small-model ideas that the ``ratchet`` method adds to the paper's loop; each switch
    chooses a proposer, a refiner or a suite option of the engine's configuration
    (``autoharness/engine.py::engine_config``) and can be switched off on its own for the ablation."""

    transitions: bool = True
    """Harvest labelled transitions (board, action, legal?, reason) by exploring the env before any
    LLM call and score candidates on them as unit tests (dense score + counterexamples)."""
    helper_library: bool = True
    """Let harness code import ``harnesslib`` (board block, grid, bracketed actions) and document it
    in the prompt, with its output on a real board."""
    few_shot: bool = False
    """Show one complete worked harness for a different game in the prompt (off by default: the
    0.5B model copied the example verbatim instead of adapting it)."""
    scaffold: bool = True
    """Ask for one function, ``legal_actions(board)``, inside a fixed template from which
    ``propose_action`` and ``is_legal_action`` follow, and show what it must return on a real
    board (programming by example)."""
    samples_per_step: int = 4
    """Candidates sampled per refinement (temperature > 0); the best by score enters the tree.
    Measured with the 0.5B on TicTacToe: 2 to 3 samples in 10 of the first request were a correct
    general function, so a few samples per step matter more than deeper refinement."""
    grammar: bool = False
    """Constrain the response to one ```python block with a GBNF grammar (backends that cannot do
    grammars raise; keep off for remote endpoints)."""
    library_seed: bool = True
    """Start the search from the harness library's best harness for the same or a similar game."""
    induce: bool = True
    """Seed the search with legal-move rules fitted to the listed states without a model (``envs.rules``); kept only at h = 1.0."""
    fresh_roots: bool = False
    """Let the Thompson draw also choose "sample a fresh root from the first request", an arm
    whose Beta posterior pools the scores of the roots sampled so far (``evolve.selectors.pooled_arm``),
    so a search stuck under a bad root can start over; fresh roots sample at ``temperature``."""
    explain_failures: bool = False
    """Name two common ``legal_actions`` mistakes plainly in the refiner's feedback: an inverted
    condition (it returns exactly the illegal moves) and a hard-coded answer (the same list on
    boards whose legal moves differ, e.g. a doctest example's)."""
    novelty: bool = True
    """Do not judge a sample that is a program already judged (normalized: comments and layout
    ignored), e.g. its parent copied back; ask again, hotter and told not to repeat it (up to
    ``samples_per_step`` repeats per refinement)."""
    repair: bool = True
    """Program repair without the model: single-point AST mutants of each new node's own functions,
    screened on the dense checks, the two best judged; one that scores higher enters as a child."""
    autofix: bool = True
    """Also judge each sample with unimported module aliases imported, bare action words bracketed (``roll``: ``[roll]``)."""
    aliases: bool = True
    """Listed actions the harvest shows are one move (``envs.aliases``) added by the scaffold's legal_actions to legal_moves' answer."""
    short_examples: bool = True
    """Where the one-function request is long (over ``prompts.LONG_REQUEST`` characters: long text
    boards, big grids), show two doctest examples instead of three, a text board's without the
    opening every observation shares. Tic Tac Toe's request is short and unchanged."""
    body_prefix: bool = True
    """Where the one-function request is long, give ``legal_moves``' signature and docstring as the
    reply's prefix (an assistant prefix the model continues) so only the body is asked for: the
    1.5B copied long docstrings back without a body."""
    whole_fallback: bool = True
    """After two replies to a node's one-function request that have no body for ``legal_moves``
    (none, a copied docstring, no code at all), ask that node (the root, or the node being refined)
    for the whole harness instead."""
    restarts: bool = False
    """After two refinements without a better best h, sample a fresh root, its scaffold examples
    drawn from other states of the game."""

    @model_validator(mode="before")
    @classmethod
    def _dropped_ideas(cls, data: Any) -> Any:
        """A config that still switches a removed idea loads: the switch is dropped with a DeprecationWarning."""
        if isinstance(data, dict) and any(key in data for key in DROPPED_IDEAS):
            data = dict(data)
            for key, why in DROPPED_IDEAS.items():
                if key in data:
                    data.pop(key)
                    warnings.warn(f"RatchetIdeas.{key} is ignored ({why}); remove it from the config",
                                  DeprecationWarning, stacklevel=2)
        return data


class AdoptionConfig(Settings):
    """When a harness counts as doing no harm on the held-out seeds."""

    gate: bool = True
    """Keep a harness the held-out check rejected out of the harness library, and refuse to export
    it without ``--force``. Off: every harness with h > 0 is kept, as the paper's loop would."""
    legal_margin: float = 0.0
    """How much lower the legal rate with the harness may be than without it before it counts as a
    loss (0: any measured drop rejects; over a short protocol one illegal step moves the rate a lot)."""
    reward_margin: float = 0.0
    """How much lower the mean reward (1 player) or win rate (2 players) may be, likewise."""
    alpha: float = Field(0.05, gt=0.0, lt=1.0)
    """The paired test's level: a harness is rejected when the held-out seeds show it worse than the
    model alone (per seed legal rate, per game reward, less the margins) at one-sided p < alpha."""
    test: Literal["sign_flip", "bootstrap"] = "sign_flip"
    """The paired test (:mod:`ratchet.stats`): ``sign_flip`` (exact over every sign assignment up to
    2^14 pairs) or ``bootstrap`` (resampled paired differences)."""


class AutoHarnessConfig(Settings):
    """One AutoHarness run: which game, which harness mode, which method and model, what budget."""

    env: str = "TicTacToe-v0"
    """TextArena environment id."""
    mode: Literal["verifier", "filter", "policy"] = "verifier"
    """Harness kind: the LLM proposes and code verifies; code proposes candidates and the LLM
    chooses; or code alone plays (value 0 if any illegal move, else 0.5 + 0.5·reward)."""
    method: Literal["faithful", "ratchet"] = "ratchet"
    """``faithful``: the paper's loop only; ``ratchet``: plus the small-model ideas in ``ideas``."""
    model: str = "local:qwen2.5-coder-0.5b"
    """Refiner model spec (local:NAME, openai:MODEL, http://HOST:PORT/v1#MODEL, scripted)."""
    ideas: RatchetIdeas = Field(default_factory=RatchetIdeas)
    """Switches for the ratchet method's additions (ignored by the faithful method)."""
    iterations: int = 20
    """Most refinement iterations (tree expansions) after the root."""
    thompson_c: float = 1.0
    """C in Beta(1 + C·h, 1 + C·(1−h) + refinements): how strongly h steers the node choice."""
    eval_steps: int = 100
    """Steps per environment during the search (the paper uses 1,000; auto-reset between games)."""
    step_cap: int = 200
    """Most steps of a single game before it is cut and reset (games can loop on invalid moves)."""
    max_failures_shown: int = 5
    """Failed steps the critic samples and shows the refiner (the paper: at most 5)."""
    temperature: float = 0.7
    """Refiner temperature for sampled candidates after the first of a refinement."""
    first_temperature: float = 0.2
    """Temperature of the first sample of every refinement (the others use ``temperature``)."""
    max_new_tokens: int = 400
    """Most tokens of one refiner response."""
    search_seeds: list[int] = Field(default_factory=lambda: list(range(0, 10)))
    """Env seeds used during the search (evaluation and transition harvesting)."""
    heldout_seeds: list[int] = Field(default_factory=lambda: list(range(1000, 1010)))
    """Env seeds used only by the final protocol; must be disjoint from ``search_seeds``."""
    heldout_seconds: float = 300.0
    """Most wall-clock seconds of the held-out check of the code alone; past it the check stops at
    the step it is on and reports the steps it measured (``cut_after_s``). Needed where a game's
    reset is slow: Sokoban generates each room by a depth-first search, seconds per game, and a
    harness that fails often resets hundreds of times in 5 x 200 steps (measured: over 20 minutes)."""
    transitions_per_seed: int = 60
    """Labelled transitions harvested per search seed (ratchet method)."""
    call_timeout_s: float = 1.0
    """Seconds one harness function call may take in the sandbox before it counts as a failure."""
    rng_seed: int = 0
    """Seed of the search's own randomness (Thompson draws, critic sampling, model seeds)."""
    budget: BudgetConfig = Field(default_factory=default_budget)
    """Limits of the search, the engine's (``max_calls``: refiner calls, rejected samples included;
    ``max_tokens``; ``max_wall_s``: seconds of the whole search, a resumed run counting only its own
    time); the first one reached stops it. Default: 40 calls, 200,000 tokens, 3,600 s; a limit not
    named keeps its default."""
    library_dir: str | None = None
    """Harness library directory (default: the user data dir); read for seeding, written on success."""
    adoption: AdoptionConfig = Field(default_factory=AdoptionConfig)
    """The gate a harness passes before it is kept in the library or exported."""
    hide_failure_types: TypeNames = Field(default_factory=list)
    """Failure types (``envs.harness.failure_types``: ``code_error``, ``illegal_move``, …) kept out of every
    request (failed steps, summary, counterexamples, function to fix, previous reply), still scored; a parent
    whose every failure is hidden is asked, saying so, for a higher score (docs/curriculum.md)."""

    @model_validator(mode="before")
    @classmethod
    def _old_keys(cls, data: Any) -> Any:
        """A config saved before the engine became the one search (a run's ``run.json``, a YAML
        file) still loads: the search's own keys are dropped and ``budget.max_seconds`` is read as
        ``budget.max_wall_s``, each with a DeprecationWarning naming the key and its replacement."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key, why in DROPPED.items():
            if key in data:
                data.pop(key)
                warnings.warn(f"AutoHarnessConfig.{key} is ignored ({why}); remove it from the config",
                              DeprecationWarning, stacklevel=2)
        budget = data.get("budget")
        if isinstance(budget, dict):
            budget = dict(budget)
            for old, new in RENAMED_BUDGET.items():
                if old in budget:
                    value = budget.pop(old)
                    budget.setdefault(new, value)
                    warnings.warn(f"AutoHarnessConfig.budget.{old} is now budget.{new}; rename it in the config",
                                  DeprecationWarning, stacklevel=2)
            # A budget that names one limit keeps the default of the others (not unlimited).
            data["budget"] = {**default_budget().model_dump(exclude_none=True), **budget}
        return data

    @model_validator(mode="after")
    def _seeds_disjoint(self) -> AutoHarnessConfig:
        overlap = set(self.search_seeds) & set(self.heldout_seeds)
        if overlap:
            raise ConfigError(
                f"search and held-out seeds overlap: {sorted(overlap)[:5]}",
                hint="held-out seeds must never be seen during synthesis; pick disjoint ranges",
            )
        return self
