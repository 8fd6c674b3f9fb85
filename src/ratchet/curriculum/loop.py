"""The curriculum's rounds, resumable: searches on the training games with the current version,
their samples trained on, the new version judged on the held-out games, promoted only if better.

Everything is in the store as it happens (``curriculum/state.json`` in the curriculum's run,
written atomically after every step): each search's run id as it starts and its result as it ends,
the round's failures by type and the feedback policy's decision per type (before anything is fed,
so a resumed round feeds as it decided), the types the round's training searches hide from their
refiner (``hidden``: those the last round left to the weights, fixed when the round begins),
the samples fed, the version each round published and the games gate's decision. Each search is a
run of its own in the same store; the queue and the versions are the run's ``online/``. A killed
curriculum resumes where it stopped: a search started is resumed by the engine, a finished one read,
a feed done again adds nothing, a version published while the state had not recorded it is found
in the version store (the newest above the round's ``versions_before``), a gate decided again from
the stored results decides the same.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ratchet.curriculum import gate
from ratchet.curriculum.config import CurriculumConfig
from ratchet.curriculum.failures import counts, typed_samples
from ratchet.curriculum.games import check_playable, split
from ratchet.curriculum.policy import Action, left_to_weights, make_policy
from ratchet.curriculum.searches import SearchModels, run_search, search_config
from ratchet.curriculum.training import Training
from ratchet.online.status import VERSIONS_NAME, online_dir
from ratchet.online.versions import VersionStore

RUN_KIND = "curriculum"
STATE = "curriculum/state.json"
#: Who promoted a version, as its record says.
PROMOTED_BY = "games gate (ratchet autoharness learn)"


def key(game: str, seed: int) -> str:
    return f"{game}#{seed}"


class Curriculum:
    """One curriculum in ``run`` (a run of ``store``): see the module. ``models`` gives each
    version's model, ``training`` makes versions; ``runtime_factory`` runs the harnesses (a test's
    in-process runtime; default: the sandbox); ``say`` hears one progress line per step."""

    def __init__(self, config: CurriculumConfig, run: Any, store: Any, models: SearchModels, training: Training, *,
                 runtime_factory: Any = None, say: Callable[[str], None] = print) -> None:
        self.config, self.run, self.store = config, run, store
        self.models, self.training, self.runtime_factory, self.say = models, training, runtime_factory, say
        self.versions = VersionStore(online_dir(Path(run.dir)) / VERSIONS_NAME)
        self.state: dict[str, Any] = run.read_json(STATE) or {}
        if not self.state:
            train, heldout = split(config.train_suite, config.heldout_suite)
            self.state = {"train_games": train, "heldout_games": heldout, "rounds": [], "heldout": {}}
            self._save()

    def _save(self) -> None:
        self.run.write_json(STATE, self.state)
        from ratchet.curriculum.report import write_report

        write_report(self.run, self.state, self.versions)

    # -------------------------------------------------------------------------------- searches

    def _search(self, slot: dict[str, Any], version: int, game: str, seed: int, role: str,
                hidden: list[str] | None = None) -> dict[str, Any]:
        """The result of one search, recorded in ``slot`` (a dict of the state) as it starts and ends;
        ``hidden``: the failure types its refiner is not shown, recorded with it (a training search's)."""
        k = key(game, seed)
        entry = slot.setdefault(k, {})
        if "result" in entry:
            return entry["result"]

        def started(run_id: str) -> None:
            entry["run_id"] = run_id
            if hidden is not None:
                entry["hidden"] = hidden
            self._save()

        # A search started before a kill goes on with the setting it started with (its run's config, read
        # by run_search); the entry's copy says so too.
        hide = entry.get("hidden", hidden or [])
        cfg = search_config(self.config.search, game, seed, self.models.spec(version), Path(self.run.dir) / "library", hide)
        resumed = " (resumed)" if entry.get("run_id") else ""
        result = run_search(self.store, cfg, lambda: self.models(version), run_id=entry.get("run_id"),
                            name=f"{role}-{game}-v{version}-s{seed}", started=started, runtime_factory=self.runtime_factory)
        entry.update(run_id=result["run_id"], result=result)
        self._save()
        self.say(f"  {role} {game} seed {seed} (v{version}){resumed}: best h {result['best_h']:.3f}, "
                 f"{result['calls']} calls" + (f", solved at call {result['calls_to_solve']}" if result["solved"] else "")
                 + f"  [run {result['run_id']}]")
        return result

    def heldout(self, version: int) -> dict[str, dict[str, Any]]:
        """Version ``version``'s held-out results (per ``game#seed``), searched where missing."""
        slot = self.state["heldout"].setdefault(f"v{version}", {})
        for game in self.state["heldout_games"]:
            for seed in self.config.heldout_seeds:
                self._search(slot, version, game, seed, "heldout")
        return {k: v["result"] for k, v in slot.items()
                if "result" in v and k in {key(g, s) for g in self.state["heldout_games"] for s in self.config.heldout_seeds}}

    # -------------------------------------------------------------------------------- rounds

    def _round(self, number: int) -> dict[str, Any]:
        rounds = self.state["rounds"]
        if len(rounds) <= number:
            # The types the last round left to the weights: this round's training searches do not
            # show them to the refiner, so only a weight update can remove them. Recorded once, here.
            hidden = left_to_weights(rounds[number - 1].get("decisions")) if number else []
            rounds.append({"round": number, "incumbent": self.versions.current_number(), "hidden": hidden,
                           "train": {}, "failures": None,
                           "samples": None, "decisions": None, "fed": None, "withheld": None,
                           "versions_before": None, "version": None, "training": None, "gate": None})
            self._save()
        return rounds[number]

    def _decide(self, r: dict[str, Any], runs: list[Any]) -> None:
        """The round's failures by type and the feedback policy's decision per type, recorded before
        anything is fed (a resumed round keeps them, the model strategy is not asked again)."""
        from ratchet.online.verdicts import verdict_turns

        r["failures"] = counts([s for run in runs for s in typed_samples(run)])
        r["samples"] = sum(len(verdict_turns(run)) for run in runs)
        policy = make_policy(self.config.feedback, lambda: self.models(r["incumbent"]))
        r["decisions"] = {t: d.record() for t, d in policy.decide(r["failures"], r["samples"]).items()}
        self._save()
        if r["failures"]:
            self.say(f"round {r['round'] + 1}: failed samples " + ", ".join(
                f"{t} {n} -> {r['decisions'][t]['action']}" for t, n in r["failures"].items()) + f" (of {r['samples']})")

    def execute(self) -> dict[str, Any]:
        """Run (or resume) every round; returns the state. Stops early, saying why, when a round's
        training publishes no version (a resumed curriculum trains that round again)."""
        for number in range(self.config.rounds):
            r = self._round(number)
            if r["gate"] is not None:
                continue
            incumbent = r["incumbent"]
            self.say(f"round {number + 1}/{self.config.rounds}: v{incumbent} held out on "
                     f"{len(self.state['heldout_games'])} games x {len(self.config.heldout_seeds)} seeds")
            self.heldout(incumbent)
            seeds = [number * self.config.train_seeds + i for i in range(self.config.train_seeds)]
            hidden = r.get("hidden") or []  # a round recorded before the setting hid nothing
            self.say(f"round {number + 1}: v{incumbent} searches {len(self.state['train_games'])} training games, seeds {seeds}"
                     + (f", hiding {', '.join(hidden)} from the refiner (left to the weights)" if hidden else ""))
            for game in self.state["train_games"]:
                for seed in seeds:
                    self._search(r["train"], incumbent, game, seed, "train", hidden)
            if r["fed"] is None:
                runs = [self.store.open_run(e["run_id"]) for e in r["train"].values()]
                if r.get("decisions") is None:  # decided once: a resumed round feeds as it decided
                    self._decide(r, runs)
                skip = withheld(runs, r["decisions"])
                r["fed"] = self.training.feed(runs, incumbent, skip=skip)
                r["withheld"] = len(skip)
                self._save()
                self.say(f"round {number + 1}: fed {r['fed']} judged turns from {len(runs)} searches"
                         + (f", {len(skip)} failed samples left to the harness" if skip else ""))
            if r["fed"] == 0 and r.get("withheld") and r["version"] is None:
                # Every sample went to the harness: no update to make, nothing for the gate to judge.
                r["training"] = "no weight update: the feedback policy left every failed sample to the harness"
                r["gate"] = {"promote": False, "reason": r["training"]}
                self._save()
                self.say(f"round {number + 1}: {r['training']}")
                continue
            if r["version"] is None:
                if r["versions_before"] is None:
                    r["versions_before"] = self.versions.latest_number()
                    self._save()
                found = self.versions.latest_number()
                if found > r["versions_before"]:  # published before a kill, not yet recorded
                    r["version"], r["training"] = found, f"v{found} (published before the curriculum stopped)"
                else:
                    self.say(f"round {number + 1}: training from v{incumbent} …")
                    r["version"], r["training"] = self.training.train(incumbent)
                self._save()
                if r["version"] is None:
                    self.say(f"round {number + 1}: no version: {r['training']}")
                    return self.state
                self.say(f"round {number + 1}: published {r['training']}")
            candidate = r["version"]
            self.say(f"round {number + 1}: v{candidate} held out against v{incumbent}")
            decision = gate.decide(self.heldout(incumbent), self.heldout(candidate), alpha=self.config.gate_alpha)
            if decision["promote"]:
                self.versions.promote(candidate, by=PROMOTED_BY)
            r["gate"] = decision
            self._save()
            self.say(f"round {number + 1}: v{candidate} {'promoted' if decision['promote'] else 'refused'}: {decision['reason']}")
        return self.state


def withheld(runs: list[Any], decisions: dict[str, dict[str, Any]]) -> set[str]:
    """The judged turns not to feed: the failed samples of the types the policy left to the harness."""
    harness = {t for t, d in decisions.items() if d["action"] == Action.HARNESS}
    return {s.turn_id for run in runs for s in typed_samples(run) if s.type in harness} if harness else set()


def open_curriculum(store: Any, config: CurriculumConfig | None, resume: str | None) -> tuple[Any, CurriculumConfig]:
    """A new curriculum run for ``config`` (its games split first: an overlap is refused before
    any run is made), or the run ``resume`` with the config it started with (``config``, when
    given, may only raise ``rounds``: anything else would change what the stored results mean)."""
    if resume:
        run = store.open_run(resume)
        if run.kind != RUN_KIND:
            from ratchet.contracts import RatchetError

            raise RatchetError(f"run {run.id} is not a curriculum (its kind: {run.kind})",
                               hint="resume a run `ratchet autoharness learn` made (see `ratchet runs list`)")
        saved = CurriculumConfig.model_validate(run.config)
        if config is not None and config.rounds > saved.rounds:
            saved = saved.model_copy(update={"rounds": config.rounds})
            run.write_json("curriculum/config.json", saved.model_dump())
        else:
            stored = run.read_json("curriculum/config.json")
            saved = CurriculumConfig.model_validate(stored) if stored else saved
        run.set_status("running")
        return run, saved
    assert config is not None
    train, heldout = split(config.train_suite, config.heldout_suite)
    check_playable(train + heldout)
    return store.create_run(RUN_KIND, config.model_dump(mode="json"), "learn"), config


def learn(config: CurriculumConfig | None, store: Any, *, resume: str | None = None,
          say: Callable[[str], None] = print) -> tuple[Any, dict[str, Any]]:
    """``ratchet autoharness learn``: open (or resume) the curriculum run and run its rounds with
    the real models (``local:NAME@vN`` of its version store) and the online trainer; returns the
    run and the report (``learn.json``)."""
    from ratchet.curriculum.report import JSON_NAME
    from ratchet.curriculum.searches import VersionedModels
    from ratchet.curriculum.training import LoopTraining

    run, config = open_curriculum(store, config, resume)
    say(f"curriculum run {run.id} ({run.dir})")
    versions = online_dir(Path(run.dir)) / VERSIONS_NAME
    trainer = config.trainer.model_copy(update={"model": config.base_name()})
    with run.marks_failure():
        models = VersionedModels(config.base_name(), versions, config.threads)
        curriculum = Curriculum(config, run, store, models, LoopTraining(trainer, Path(run.dir), config.train_timeout_s),
                                say=say)
        state = curriculum.execute()
        finished = sum(r.get("gate") is not None for r in state["rounds"]) >= config.rounds
        run.set_status("done" if finished else "stopped")
    return run, run.read_json(JSON_NAME)
