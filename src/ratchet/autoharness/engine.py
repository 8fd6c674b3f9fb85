"""``ratchet autoharness`` as a configuration of the improvement engine, its one search.

:func:`engine_config` turns an :class:`AutoHarnessConfig` (one game, one harness mode, the
method and its ideas) into an :class:`EvolveConfig`: the Thompson selector over every scored
version (rejected children are nodes too, as in the search's tree: no smoke stage cuts a child
before it is scored on held-in); the critic + refiner proposer
:class:`~ratchet.autoharness.proposer.HarnessRefinerProposer` (the ``grammar`` idea, ``novelty``'s
hotter retry, requests cut to the model's context window) with a refiner: the paper's request
(:class:`~ratchet.autoharness.refine.HarnessRefiner`, with ``helper_library`` and ``few_shot``),
with the ``scaffold`` idea :class:`~ratchet.autoharness.refine.ScaffoldRefiner` (``body_prefix``
where the request is long, ``short_examples``, ``aliases``; ``whole_fallback`` as the
``HarnessRefiner`` behind it); ``fresh_roots`` and ``restarts`` as :class:`~ratchet.autoharness.proposer.FreshRootProposer`; the
proposers that ask no model (``induce``: :class:`~ratchet.autoharness.rules.InducedRulesProposer`;
``repair``: :class:`~ratchet.autoharness.screened.ScreenedMutationProposer`, mutants screened
on the dense checks first; ``autofix``: ``autofix``); the legality suite on the search and held-out
seeds, scored as the search scores (h = 0.5·legal + 0.5·dense with the ``transitions`` and
``scaffold`` checks, ``dense.harness_value``; ``explain_failures`` an option of its check; the
``policy`` mode's value); ``hide_failure_types`` as the refiners' option; ``novelty`` as
``static.novelty``; the paired gate; the search's budget and its stop at h = 1.0 (``stop_at_score``).
:func:`run_on_engine` writes the starting workspace
(``library_seed``: the library's best harness) into the run and runs
:class:`~ratchet.evolve.loop.Engine` on it; with :func:`heldout_options` the legality suite's
report stage runs in the engine on the best harness what follows the dedicated search (the
code-alone held-out check, the held-out protocol with the model, the adoption verdict with the
gate's paired test, the harness library: :mod:`ratchet.autoharness.heldout`), and
:func:`synthesize_on_engine` writes the same per-game report from the engine's.

The search's seeds split in two: the first half is the refiner's evidence (``search``) and the
dense checks' exploration, the rest the gate's (``heldin``), so a child is kept only when it plays
games it was not refined on better; the held-out seeds are the report's untouched ``test`` split.

The held-out protocol and the adoption verdict are the engine's report stage, so a run killed
during them resumes into them without redoing the search. A restart asks from other example states
(``refine.Restartable``), a repeated sample is asked again hotter without using up a sample
(``proposer``), and the repair idea's mutants are screened on the dense checks (``screened``), as
in the search.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.heldout import HeldoutOptions, judge, stage_of
from ratchet.autoharness.library import HarnessLibrary
from ratchet.envs.harness.protocol import ProtocolConfig
from ratchet.envs.harness.runtime import RuntimeFactory
from ratchet.contracts import FORMAT_VERSION, Model
from ratchet.envs.harness.failure_types import FailureType
from ratchet.envs import harnesslib
from ratchet.envs.registry import env_factory_for
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.evolve.report_tables import step_events

LEGALITY_SUITE = "ratchet.autoharness.legality:LegalitySuite"
INDUCED_RULES = "ratchet.autoharness.rules:InducedRulesProposer"
HARNESS_REFINER = "ratchet.autoharness.refine:HarnessRefiner"
SCAFFOLD_REFINER = "ratchet.autoharness.refine:ScaffoldRefiner"
HARNESS_PROPOSER = "ratchet.autoharness.proposer:HarnessRefinerProposer"
FRESH_ROOT = "ratchet.autoharness.proposer:FreshRootProposer"
SCREENED_MUTATION = "ratchet.autoharness.screened:ScreenedMutationProposer"
#: The helper library's names, each with its import: a harness that reads one unimported gets it (autofix).
LIB_IMPORTS = {name: f"from harnesslib import {name}" for name in harnesslib.__all__}

#: The starting harness when nothing is known of the game: it proposes no real move and believes
#: every move legal, so its failures are the refiner's first evidence (the search's first request).
BLANK_HARNESS = '''"""A starting harness that knows nothing of the game yet: the refiner writes its rules."""


def propose_action(board):
    return "[0]"


def is_legal_action(board, action):
    return True
'''

MANIFEST = """# The workspace of an AutoHarness run on the engine: the engine may edit harness.py only.
name: autoharness
editable: ["harness.py"]
protected: []
"""


def game_description(game: str) -> str:
    """The game's own rules text (what the refiner is told the game is), empty when it has none."""
    return probe_game(game)[0]


def probe_game(game: str) -> tuple[str, int | None]:
    """The game's rules text (empty when it has none) and its number of players (None: unknown)."""
    probe = env_factory_for(game)()
    try:
        return probe.game_description() if hasattr(probe, "game_description") else "", getattr(probe, "num_players", None)
    finally:
        probe.close()


def task_ids(game: str, seeds: list[int]) -> list[str]:
    """The legality suite's task ids for ``seeds``."""
    return [f"{game}#{seed}" for seed in seeds]


def engine_config(cfg: AutoHarnessConfig, workspace: Path, description: str = "") -> EvolveConfig:
    """The engine configuration that runs ``cfg``'s synthesis (see the module's docstring)."""
    half = max(1, len(cfg.search_seeds) // 2)
    search, heldin = cfg.search_seeds[:half], cfg.search_seeds[half:] or cfg.search_seeds[:half]
    ratchet = cfg.method == "ratchet"
    ideas = cfg.ideas
    on = (lambda idea: ratchet and getattr(ideas, idea))
    refiner: dict[str, Any] = {"game": cfg.env, "description": description, "mode": cfg.mode,
                               "helper_library": on("helper_library"), "few_shot": on("few_shot")}
    critic: dict[str, Any] = {
        "surface": "harness.py", "max_failures_shown": cfg.max_failures_shown, "refiner": HARNESS_REFINER,
        "refiner_options": refiner, "max_tokens": cfg.max_new_tokens, "temperature": cfg.first_temperature,
        "samples": 1, "grammar": on("grammar"), "hotter_retry": 0.3 if on("novelty") else 0.0,
        "hide_failure_types": [t.value for t in cfg.hide_failure_types]}
    explored = {"game": cfg.env, "description": description, "seeds": search,
                "transitions_per_seed": cfg.transitions_per_seed, "call_timeout_s": cfg.call_timeout_s}
    if on("scaffold"):
        critic.update(refiner=SCAFFOLD_REFINER, samples=min(8, ideas.samples_per_step), temperature=cfg.temperature,
                      # The grammar forces a reply that opens a ```python block, which a continuation must not.
                      refiner_options={**explored, "body_only": ideas.body_prefix and not ideas.grammar, "long_only": True,
                                       "short_examples": ideas.short_examples, "aliases": ideas.aliases,
                                       # as the search's scaffold shows a node's wrong states first: wrong legal
                                       # lists, none shown while illegal moves are hidden
                                       "counterexamples": 0 if FailureType.ILLEGAL_MOVE in cfg.hide_failure_types else 2})
        if ideas.whole_fallback:
            critic.update(fallback_refiner=HARNESS_REFINER, fallback_refiner_options=refiner)
    elif ratchet:
        critic.update(samples=min(8, ideas.samples_per_step), temperature=cfg.temperature)
    # The search's repair and autofix act on every sample of a refinement as it is judged; here the
    # refiner's step climbs each sample on its own screen (evolve.proposers.repair) before it ranks
    # them, where the refiner screens (scaffold) and the ideas are on.
    in_step = bool((on("repair") or on("autofix")) and on("scaffold"))
    if in_step:
        critic["repair"] = {"rounds": 3 if on("repair") else 0, "autofix": bool(on("autofix")), "game": cfg.env,
                            "imports": LIB_IMPORTS,  # the helpers the requests offer, read unimported
                            # every function, the template's few sites among them, so a helper the model wrote is repaired too
                            "mutants": 32}
    proposers: list[dict[str, Any]] = [{"name": HARNESS_PROPOSER, "weight": 1.0, "options": critic}]
    if on("induce"):  # no model call: drawn first and often, as the search seeds with it
        proposers.insert(0, {"name": INDUCED_RULES, "weight": 4.0, "options": {
            "surface": "harness.py", "game": cfg.env, "seeds": search,
            "transitions_per_seed": cfg.transitions_per_seed, "rng_seed": cfg.rng_seed}})
    if on("fresh_roots"):  # the search's fresh-root arm: a proposer drawn beside refining
        proposers.append({"name": FRESH_ROOT, "weight": 0.5, "options": {**critic, "temperature": cfg.temperature}})
    if on("restarts"):  # a fresh root once two candidates in a row were rejected
        proposers.append({"name": FRESH_ROOT, "weight": 1.0,
                          "options": {**critic, "temperature": cfg.temperature, "after_stall": 2}})
    # With the repair in the refiner's step, the separate repair and autofix steps leave the mix:
    # the search has no such step (its repair and autofix are offspring of a refinement's samples
    # only), every refined child was already climbed when it was proposed, and drawn by weight on
    # the selected parent they mostly skipped (the parent already climbed) while taking steps from
    # the refiner. The fallback refiner's whole-harness samples (it has no screen) get the autofix alone.
    if on("autofix") and not in_step:
        proposers.append({"name": "autofix", "weight": 1.0, "options": {"surfaces": ["harness.py"], "game": cfg.env,
                                                                       "imports": LIB_IMPORTS}})
    if on("repair") and not in_step:  # the search's repair: mutants screened on the dense checks before one is judged
        checks = [name for idea, name in (("transitions", "transitions"), ("scaffold", "legal_actions")) if on(idea)]
        proposers.append({"name": SCREENED_MUTATION, "weight": 1.0, "options": {
            "game": cfg.env, "seeds": search, "transitions_per_seed": cfg.transitions_per_seed,
            "rng_seed": cfg.rng_seed, "call_timeout_s": cfg.call_timeout_s,
            **({"checks": checks} if checks else {})}})
    return EvolveConfig.model_validate({
        "workspace": str(workspace), "model": cfg.model, "seed": cfg.rng_seed,
        "suite": {"name": LEGALITY_SUITE, "options": {
            "game": cfg.env, "seeds": [*cfg.search_seeds, *cfg.heldout_seeds], "steps_per_env": cfg.eval_steps,
            "step_cap": cfg.step_cap, "call_timeout_s": cfg.call_timeout_s, "mode": cfg.mode,
            # h = 0.5·legal + 0.5·dense where the search scores so: the same checks, the same formula.
            "dense": [name for idea, name in (("transitions", "transitions"), ("scaffold", "legal_actions")) if on(idea)],
            "explain_failures": bool(on("explain_failures")),
            "harvest_seeds": search, "transitions_per_seed": cfg.transitions_per_seed, "rng_seed": cfg.rng_seed}},
        "splits": {"search": 0, "heldin": 0, "heldout": 0, "test": 0,
                   "ids": {"search": task_ids(cfg.env, search), "heldin": task_ids(cfg.env, heldin),
                           "test": task_ids(cfg.env, cfg.heldout_seeds)}},
        "seeds": [0, 1],  # seed 0 plays each env's own games, seed 1 others: the parent's spread is its noise
        "selector": {"name": "thompson", "options": {"c": cfg.thompson_c, "pool": "scored"}},
        "proposers": proposers,
        # Each proposal tested at alpha, not alpha / 2^k: the search's default seeds leave the gate
        # 5 held-in tasks, whose best p (a sweep, 1/32) never passes the spending gate's first level
        # (0.025; measured: the induced rules took all 5 TicTacToe held-in games from 0.56 to 1.0
        # and were rejected at p = 0.031). The dedicated search keeps any better h with no test at
        # all; the held-out protocol and the adoption verdict judge the result after the run.
        # The dominance gate, as the legality suite is deterministic per (code, task, seed): a child
        # losing no pair and winning one is kept (ConnectFour's rules at 0.9975 → 1.0 gained on one
        # seed of one task, a gain equal to the parent's spread over seeds, and the paired gate
        # refused it; the search kept it).
        "gate": {"name": "dominance", "options": {"alpha": 0.05, "correction": "none"}},
        "static": {"novelty": bool(on("novelty"))},
        # No smoke stage: every child is scored on held-in and stays a node the selector may refine,
        # as the search refines the best sample of a request whatever its h. With it, a child that
        # is partly right (e.g. one wrong condition in legal_moves, h 0.1) fell more than its margin
        # below the blank harness's 0.56 and was never refined. A legality evaluation is cheap.
        "smoke": {"tasks": 0},
        # One search iteration is a refinement with the repair and the fix of its samples; on the
        # engine those are steps of their own, drawn by weight. Counted as the search counts them,
        # a run has a round of steps per iteration, so the model's calls stay the binding limit
        # (measured with one step per iteration: 5 of 10 seeds solved with the rules off, most runs
        # ended by the step count with calls left, against the search's 10 of 10).
        # With the repair in the refiner's step, an iteration is a step per sample the refinement
        # may ask and one of each other proposer: a step ends at the first sample that screens 1.0
        # (repaired or not) even when its child is then rejected, where a search iteration ends only
        # at h = 1.0, so its unasked samples' calls go to later steps and the calls stay the limit.
        # The fitted rules' skips (nothing new to fit) are not counted (``Skip.exhausted``): on a game
        # they cannot fit, the round's steps go to the refiner (measured: Bandit ended by the step
        # count with 12 of its 24 calls unspent when they were).
        "iterations": cfg.iterations * (critic["samples"] + len(proposers) - 1 if in_step else len(proposers)),
        "stop_at_score": 1.0,  # the search's stop at h = 1.0: every held-in game played legally
        "budget": cfg.budget.model_dump(),
        "approval": {"required": False},
    })


def write_workspace(dest: Path, harness: str = BLANK_HARNESS) -> Path:
    """The starting workspace (``manifest.yaml``, ``harness.py``) at ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.yaml").write_text(MANIFEST)
    if not (dest / "harness.py").exists():  # a resumed run keeps the workspace it started from
        (dest / "harness.py").write_text(harness)
    return dest


def starting_harness(cfg: AutoHarnessConfig, library: HarnessLibrary | None = None) -> str:
    """The harness a run starts from: with the ``library_seed`` idea, the library's best for this
    game or a similar one (as the search seeds its tree; ``library``: another than ``cfg``'s); else
    the blank harness."""
    if cfg.method == "ratchet" and cfg.ideas.library_seed:
        found = (library or HarnessLibrary(cfg.library_dir)).lookup(cfg.env, cfg.mode, limit=1)
        if found:
            return found[0]["code"]
    return BLANK_HARNESS


def heldout_options(cfg: AutoHarnessConfig, protocol: ProtocolConfig | None) -> HeldoutOptions:
    """The legality suite's report stage for ``cfg``: the held-out seeds, ``protocol`` (None: the
    verdict is ``unchecked``), the adoption rules and the library."""
    return HeldoutOptions(seeds=cfg.heldout_seeds, max_seconds=cfg.heldout_seconds, protocol=protocol,
                          adoption=cfg.adoption, library_dir=cfg.library_dir, method=cfg.method)


def run_on_engine(cfg: AutoHarnessConfig, model: Model, run: Any, *, description: str = "",
                  harness: str | None = None, extra: dict[str, Any] | None = None,
                  on_event: Any = None, library: HarnessLibrary | None = None,
                  heldout: HeldoutOptions | None = None) -> dict[str, Any]:
    """Synthesize ``cfg``'s harness on the engine in ``run`` (its workspace under the run's
    directory, starting from ``harness``, by default :func:`starting_harness`); returns the
    engine's summary, its report included when the run finished. ``extra``: the engine's
    ``ctx.extra`` (a test's in-process harness runtime). ``heldout``: the legality suite's report
    stage (:mod:`ratchet.autoharness.heldout`), run by the engine on its best harness; None: none."""
    workspace = write_workspace(Path(run.dir) / "workspace", harness if harness is not None else starting_harness(cfg, library))
    config = engine_config(cfg, workspace, description)
    if heldout is not None:
        config.suite.options["heldout"] = heldout.model_dump()
    return Engine(config, run, model, on_event=on_event, extra=extra).execute()


def synthesize_on_engine(cfg: AutoHarnessConfig, model: Model, run: Any, *, protocol: ProtocolConfig | None = None,
                         play_model: Model | None = None, runtime_factory: RuntimeFactory | None = None,
                         extra: dict[str, Any] | None = None, on_phase: Callable[[str], None] | None = None,
                         description: str | None = None, library: HarnessLibrary | None = None) -> dict[str, Any]:
    """One game on the engine, end to end: the engine's run with its report stage (the code-alone
    held-out check, the held-out protocol with ``play_model`` (default: ``model``, its calls
    accounted as held-out) when ``protocol`` is given, the adoption verdict and the library
    (``library``: another than ``cfg``'s, as a batch's worker keeps one)); returns the per-game
    report (``report.json``, the dedicated search's shape, with the engine's own report under
    ``engine``). ``runtime_factory``: where the stage runs the harness when ``extra`` names none."""
    started = time.perf_counter()
    note = on_phase or (lambda phase: None)
    note("search on the engine")
    rules, players = probe_game(cfg.env)
    description = rules if description is None else description
    extra = {**(extra or {}), "harness_library": library if library is not None else HarnessLibrary(cfg.library_dir),
             "on_phase": note}
    if play_model is not None:
        extra["play_model"] = play_model
    if runtime_factory is not None:
        extra.setdefault("harness_runtime", runtime_factory)
    summary = run_on_engine(cfg, model, run, description=description, extra=extra, library=library,
                            heldout=heldout_options(cfg, protocol))
    found = summary.get("report")
    stage = stage_of(found)
    # one per step, a step redone after a kill counted once, an exhausted skip (not counted by the engine) not at all
    steps = [e for e in step_events(run) if e.get("counted", True)]
    wall_s = round(time.perf_counter() - started, 1)
    report = {
        "format_version": FORMAT_VERSION, "env": cfg.env, "mode": cfg.mode, "method": cfg.method,
        "model": model.name, "run_id": run.id, "players": stage.get("players") or players,
        "search": {"best_h": stage.get("best_h", 0.0), "iterations": len(steps), "llm_calls": summary.get("model_calls", 0),
                   "tokens": search_tokens(run), "wall_s": round(wall_s - stage.get("wall_s", 0.0), 1),
                   "stop_reason": summary["state"], "nodes": summary.get("accepted", 0) + summary.get("rejected", 0),
                   "on": "engine"},
        **{side: stage.get(side) for side in ("before", "after", "protocol")},
        "wall_s": wall_s,
        "harness_alone": stage.get("harness_alone"),
        "adoption": stage.get("adoption") or judge(None, None),
        "engine": found,
    }
    run.write_json("report.json", report)
    return report


def search_tokens(run: Any) -> int | None:
    """The run's tokens less the held-out protocol's (purpose ``autoharness.heldout``): the search's."""
    total = run.llm_totals().get("total_tokens")
    heldout = (run.llm_breakdown().get("autoharness.heldout") or {}).get("total_tokens") or 0
    return None if total is None else total - heldout
