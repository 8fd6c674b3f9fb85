"""Legal-move rules fitted with no model, as an engine proposer: the dedicated search's ``induce``
idea, with the engine's evaluations as its judge. A run config names it by import path:
``{name: "ratchet.autoharness.rules:InducedRulesProposer", options: {...}}``.

On its first proposal it harvests labelled transitions of the game (``envs.explore.harvest``:
random walks whose states are replayed with every listed action, plus illegal ones), chooses how
``legal_moves`` sees a state (:func:`ratchet.envs.harness.views.choose_view`) and fits rules to the states the
game listed its legal actions in (``envs.rules.induce``: one list everywhere, a cell that tells an
action, a marker, the moves not yet played). The rules, inside the one-function scaffold
(``autoharness.prompts.scaffold_for``), are the whole new ``harness.py``.

Every later proposal adds the moves the game rejected on the split the proposer may read (the
parent's, and those of the versions this proposer made before: each failure of kind
``rejected_by_env`` carries its board and action, an illegal label) and fits again: the
counterexample loop of ``envs.rules.fit``, one round per engine step, judged by the engine's own
evaluation and gate. Connect Four's harvest never fills a column (every column fits), and the
first version's rejected drops teach the top cells.

It gives up (a :class:`~ratchet.contracts.Skip` with its reason) when no shape fits, when the fit is the parent's own
file, and when the labels give rules it already proposed: nothing new was learned. Each such skip
is ``exhausted`` (no model call, a function of the archive): the engine does not count it toward the
run's iterations, which a round of every proposer's steps sizes, so a game it cannot fit leaves the
steps to the refiner (Bandit on the 15-game table ended by the step count with half its calls unspent). It never asks
the model and never runs candidate code (the suite does, in its sandbox); the harvest plays the
game in this process, as the legality suite's envs do. The harvest is kept in the run store
(``evolve/induced_rules_harvest.json``): a resumed run fits to the transitions the run started with
rather than walking the game again, whose wall-clock limit could cut a second harvest elsewhere.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from ratchet.envs.harness.player import ENV_REJECTED
from ratchet.autoharness.prompts import scaffold_for
from ratchet.envs.harness.views import BoardView, choose_view
from ratchet.config import Settings
from ratchet.contracts import ArchiveView, Candidate, Claim, Proposal, Skip, TaskResult
from ratchet.envs.explore import Transition, harvest, listed_states
from ratchet.envs.grammar import ActionGrammar, infer_grammar
from ratchet.envs.registry import env_factory_for
from ratchet.envs.rules import Label, State, harvest_inputs, induce, rejected_labels
from ratchet.evolve.archive import per_task_means
from ratchet.evolve.context import EngineContext
from ratchet.evolve.proposers.base import BaseProposer


class InducedRulesOptions(Settings):
    """Legal-move rules fitted with no model (``envs.rules.induce``) to a game's harvested states
    and the moves the game rejected, proposed as a whole harness (for the ``legality`` suite)."""

    surface: str = "harness.py"
    """The file the fitted harness replaces."""
    split: str = "search"
    """The split whose results are read: the parent's (and this proposer's earlier children's)
    moves the game rejected there become labels, its tasks not solved become the claim's targets,
    and its task ids (``GAME#SEED``, as the legality suite names them) give the game and the
    harvest's seeds when the two options below are unset."""
    game: str | None = None
    """The game to harvest (a TextArena id, e.g. ``TicTacToe-v0``); None: the one the split's
    task ids name, which is the legality suite's ``game``."""
    seeds: list[int] | None = None
    """Env seeds to walk random games from for the harvest; None: the split's task seeds (states
    the proposer may see: never a held-in or test game's)."""
    transitions_per_seed: int = Field(default=60, ge=1)
    """Most labelled transitions harvested per seed (``envs.explore.harvest``'s ``per_seed``)."""
    harvest_seconds: float = Field(default=60.0, gt=0)
    """Wall-clock limit of the harvest, run once, on the first proposal."""
    rng_seed: int = 0
    """Seed of the harvest's random walks (its own generator: the engine's draws are untouched)."""


@dataclass
class Harvest:
    """What exploring a game gives the fit: its states as ``legal_moves``' arguments, labels, the
    scaffold the rules go into."""

    game: str
    transitions: list[Transition]
    grammar: ActionGrammar
    view: BoardView
    states: list[State]
    """The states the game listed its legal actions in, as (arguments, legal actions)."""
    labels: list[Label]
    """Every harvested (arguments, action, legal?)."""
    universe: list[str] | None
    """For a game that lists no state: its grammar's every action (None otherwise, or too many)."""

    @property
    def template(self) -> str:
        return scaffold_for(self.view, self.grammar.form)

    def harness(self, source: str) -> str:
        """The whole harness: the scaffold (``propose_action``, ``is_legal_action`` over
        ``legal_moves``) and the fitted ``legal_moves``, as the dedicated search judges it."""
        return self.template + "\n\n" + source


HARVEST_FILE = "evolve/induced_rules_harvest.json"
"""The run's harvest: its transitions and what they were harvested with."""


def harvest_game(game: str, seeds: Sequence[int], per_seed: int = 60, rng_seed: int = 0, max_seconds: float = 60.0) -> Harvest:
    """Labelled transitions of ``game`` from ``seeds`` (the env the harness sees, and the same game
    with its legal lists kept to read them from), as :func:`harvest_of` reads them."""
    transitions = harvest(env_factory_for(game), env_factory_for(game, hints=True), list(seeds), per_seed,
                          random.Random(rng_seed), max_seconds)
    return harvest_of(game, transitions)


def harvest_of(game: str, transitions: list[Transition]) -> Harvest:
    """A harvest's transitions with the action grammar the game's rules and error messages show and
    the view its listed states call for."""
    probe = env_factory_for(game)()
    try:
        description = probe.game_description() if hasattr(probe, "game_description") else ""
    finally:
        probe.close()
    grammar = infer_grammar([description, *dict.fromkeys(t.reason for t in transitions if t.reason)],
                            [t.action for t in transitions if t.legal][:20])
    view = choose_view(listed_states(transitions) or [(t.board, []) for t in transitions[:5]])
    states, labels, universe = harvest_inputs(transitions, view.args, grammar)
    return Harvest(game, transitions, grammar, view, states, labels, universe)


def _game_and_seed(task_id: str) -> tuple[str, int] | None:
    game, sep, seed = task_id.rpartition("#")
    return (game, int(seed)) if sep and game and seed.lstrip("-").isdigit() else None


class InducedRulesProposer(BaseProposer):
    """Proposes a harness whose ``legal_moves`` is fitted to the game's harvested states and the
    moves the game rejected so far, with no model call (see the module's docstring)."""

    name = "induced_rules"
    Options = InducedRulesOptions
    deterministic = True
    """Its proposal is a function of the archive alone (the harvest has its own seed): the loop
    does not draw it again for a parent it gave up on until the archive gains a candidate."""

    def __init__(self, options: InducedRulesOptions, ctx: EngineContext | None = None) -> None:
        self.options = options
        self.ctx = ctx
        self.asks = 0
        """Model calls made: none, ever."""
        self.harvested: Harvest | None = None
        """The harvest, made on the first proposal and kept."""
        self.proposed: set[str] = set()
        """The harness files this proposer has proposed (a refit that gives one back learned nothing)."""

    # -- evidence ------------------------------------------------------------------------------

    def _harvest(self, results: Sequence[TaskResult]) -> Harvest | str:
        """The game's harvest (made once), or why there is none."""
        if self.harvested is not None:
            return self.harvested
        named = [g for g in (_game_and_seed(r.task_id) for r in results) if g is not None]
        game = self.options.game or (named[0][0] if named else None)
        seeds = self.options.seeds if self.options.seeds is not None else list(dict.fromkeys(s for g, s in named if g == game))
        if not game or not seeds:
            return (f"no game or seeds to harvest: the parent has no {self.options.split} results whose task ids name "
                    "GAME#SEED (the legality suite's); set the proposer's game and seeds")
        made_with = {"game": game, "seeds": list(seeds), "per_seed": self.options.transitions_per_seed,
                     "rng_seed": self.options.rng_seed}
        run = self.ctx.run if self.ctx is not None else None
        stored = run.read_json(HARVEST_FILE) if run is not None else None
        if stored is not None and stored.get("made_with") == made_with:
            self.harvested = harvest_of(game, [Transition.from_json(t) for t in stored["transitions"]])
            return self.harvested
        self.harvested = harvest_game(game, seeds, self.options.transitions_per_seed, self.options.rng_seed, self.options.harvest_seconds)
        if run is not None:
            run.write_json(HARVEST_FILE, {"format_version": 1, "made_with": made_with,
                                          "transitions": [t.to_json() for t in self.harvested.transitions]})
        return self.harvested

    def _own(self, archive: ArchiveView) -> list[Candidate]:
        return [c for c in archive.candidates() if c.meta.get("proposer") == self.name]

    # -- the proposal --------------------------------------------------------------------------

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any = None) -> Proposal | Skip:
        surface, split = self.options.surface, self.options.split
        if surface not in parent.files:
            return self.skip(parent, f"the parent has no {surface}", exhausted=True)
        results = list(archive.results(parent.id, split))
        found = self._harvest(results)
        if isinstance(found, str):
            return self.skip(parent, found, exhausted=True)
        h = found
        # The counterexamples: the parent's rejected moves, and those of every version this
        # proposer made (the last child's, even one the gate turned down).
        seen = results + [r for c in self._own(archive) if c.id != parent.id for r in archive.results(c.id, split)]
        rejected = rejected_labels(((f.detail.get("board"), f.detail.get("action")) for r in seen for f in r.failures
                                    if f.kind == ENV_REJECTED), h.view.args)
        labels = h.labels + rejected
        fit = induce(h.states, h.view.params, labels, h.universe)
        states = len({repr(args) for args, _ in h.states} | {repr(args) for args, _, _ in labels})
        if fit is None:
            return self.skip(parent, f"no rule shape fits {h.game}'s {states} labelled states ({len(h.states)} with the "
                                     f"game's legal list, {len(rejected)} moves it rejected): not one list, no cell "
                                     "rule, no filter of the actions", exhausted=True)
        rule, source = fit
        code = h.harness(source)
        if code == parent.files[surface]:
            return self.skip(parent, f"nothing new learned: the rules fitted to {states} labelled states are the parent's own",
                             exhausted=True)
        earlier = next((c.id for c in self._own(archive) if c.files.get(surface) == code), None)
        if earlier is not None or code in self.proposed:
            where = f" (candidate {earlier})" if earlier else ""
            return self.skip(parent, f"nothing new learned: {len(rejected)} rejected moves give the rules already proposed{where}",
                             exhausted=True)
        self.proposed.add(code)
        means = per_task_means(results)
        failing = [t for t, m in means.items() if m < 1.0]
        target = (f"{len(failing)} of {len(means)} {split} tasks the parent fails: {', '.join(failing[:8])}"
                  if failing else f"the {split} tasks (the parent fails none recorded)")
        # Predicted to flip: the tasks the parent fails as the claim check counts a failure (mean
        # below 0.5); one it plays mostly legally already cannot flip, only rise.
        claim = Claim(target=target, root_cause=f"rules fitted to {states} labelled states ({rule} rule, no model)",
                      predicted_flips=tuple(t for t in failing if means[t] < 0.5))
        return Proposal(files={surface: code}, claim=claim, proposer=self.name, parents=(parent.id,),
                        meta={"surfaces": [surface], "rule": rule, "listed_states": len(h.states), "labelled_states": states,
                              "rejected_labels": len(rejected), "view": h.view.name, "game": h.game})
