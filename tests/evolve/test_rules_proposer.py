"""The ``induced_rules`` proposer (autoharness/rules.py) on real offline TextArena games, judged
by the real ``legality`` suite with the harness run in-process: its first proposal for Tic Tac Toe
plays every seed legally; Connect Four's first fit (every column: the harvest never fills one) is
fixed by a later proposal from the moves the game rejected; a game no shape fits gives None with a
reason. And ``Engine`` (what ``ratchet evolve run`` runs) on the example's ``evolve-rules.yaml``
keeps the fitted harness, which plays every test seed legally, with no model call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ratchet.autoharness.legality import LegalityOptions, LegalitySuite
from ratchet.autoharness.rules import InducedRulesProposer
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.contracts import Candidate, Proposal, Skip
from ratchet.evolve.components import build
from ratchet.evolve.config import ComponentSpec, EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.loop import Engine
from ratchet.evolve.manifest import load_manifest
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

from doubles import Archive

pytest.importorskip("textarena")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoharness-engine"
STARTING = (EXAMPLE / "harness.py").read_text()
RULES = "ratchet.autoharness.rules:InducedRulesProposer"


def suite(game: str, seeds: list[int], steps: int = 30) -> LegalitySuite:
    ctx = EngineContext(load_manifest(EXAMPLE), EXAMPLE, extra={"harness_runtime": InProcessHarness})
    return LegalitySuite(LegalityOptions(game=game, seeds=seeds, steps_per_env=steps), ctx)


def proposer(**options) -> InducedRulesProposer:
    ctx = EngineContext(load_manifest(EXAMPLE), EXAMPLE)
    return build("proposer", ComponentSpec(name=RULES, options=options), ctx)


def child_of(parent: Candidate, proposal) -> Candidate:
    return Candidate.from_files(parent.kind, {**parent.files, **proposal.files}, parent.id, proposer=proposal.proposer)


def test_the_first_proposal_for_tic_tac_toe_plays_every_seed_legally() -> None:
    judge = suite("TicTacToe-v0", list(range(12)) + [1000, 1001])
    search = judge.tasks()[:4]
    root = Candidate.from_files("h", {"harness.py": STARTING})
    archive = Archive()
    archive.record(root, "search", judge.evaluate(root, search, 0))
    assert any(r.score < 1.0 for r in archive.results(root.id, "search"))
    rules = proposer()  # the game and the harvest's seeds: the search tasks' ids
    proposal = rules.propose(root, archive, None)
    assert isinstance(proposal, Proposal) and rules.asks == 0
    assert list(proposal.files) == ["harness.py"] and "def legal_moves(cells)" in proposal.files["harness.py"]
    assert rules.harvested.game == "TicTacToe-v0" and {t.seed for t in rules.harvested.transitions} <= {0, 1, 2, 3}
    assert proposal.meta["rule"] == "cells" and "labelled states" in proposal.claim.root_cause
    failing = {r.task_id for r in archive.results(root.id, "search") if r.score < 1.0}
    assert failing and all(t in proposal.claim.target for t in failing)
    # Flips are what the claim check counts (a mean below 0.5 reaching 0.5): the random root plays mostly legally.
    assert set(proposal.claim.predicted_flips) == {r.task_id for r in archive.results(root.id, "search") if r.score < 0.5}
    child = child_of(root, proposal)
    for seed in (0, 1):
        assert all(r.score == 1.0 for r in judge.evaluate(child, judge.tasks(), seed))
    # The same evidence again: nothing new learned.
    skip = rules.propose(root, archive, None)
    assert isinstance(skip, Skip) and "nothing new learned" in skip.reason


def test_connect_four_is_fitted_again_with_the_moves_the_game_rejected() -> None:
    judge = suite("ConnectFour-v0", [0, 1, 2, 3, 20, 21, 22, 23], steps=60)
    search, held = judge.tasks()[:4], judge.tasks()[4:]
    root = Candidate.from_files("h", {"harness.py": STARTING})
    archive = Archive()
    archive.record(root)  # no results: the game and seeds come from the options
    rules = proposer(game="ConnectFour-v0", seeds=[0, 1, 2, 3])
    first = rules.propose(root, archive, None)
    # The harvest never fills a column: every column fits it, and the game rejects drops into a full one.
    assert isinstance(first, Proposal) and first.meta["rule"] == "constant" and first.meta["rejected_labels"] == 0
    child = archive.record(child_of(root, first), "search", judge.evaluate(child_of(root, first), search, 0))
    failed = [f for r in archive.results(child.id, "search") for f in r.failures]
    assert failed and all(f.kind == "rejected_by_env" and f.detail["board"] and f.detail["action"] for f in failed)
    # Its own last child's rejected moves count whoever the parent is; here the child is the parent.
    second = rules.propose(child, archive, None)
    assert isinstance(second, Proposal) and second.meta["rule"] == "cells" and second.meta["rejected_labels"] == len(failed)
    assert second.claim.predicted_flips == tuple(r.task_id for r in archive.results(child.id, "search") if r.score < 0.5)
    fixed = child_of(child, second)
    assert all(r.score == 1.0 for r in judge.evaluate(fixed, search + held, 0))
    # Nothing rejected since: the same rules, no proposal.
    skip = rules.propose(child, archive, None)
    assert isinstance(skip, Skip) and "already proposed" in skip.reason


def test_a_resumed_run_fits_to_the_harvest_it_started_with(tmp_path: Path, monkeypatch) -> None:
    """The harvest is kept in the run store: a proposer built again (a resumed run) reads it rather
    than walking the game again, whose wall-clock limit could cut it elsewhere."""
    run = RunStore(tmp_path / "runs").create_run("evolve", {}, name="rules")
    root = Candidate.from_files("h", {"harness.py": STARTING})
    archive = Archive()
    archive.record(root)
    ctx = EngineContext(load_manifest(EXAMPLE), EXAMPLE, run=run)
    options = ComponentSpec(name=RULES, options={"game": "ConnectFour-v0", "seeds": [0, 1]})
    first = build("proposer", options, ctx).propose(root, archive, None)
    assert isinstance(first, Proposal) and run.read_json("evolve/induced_rules_harvest.json")["made_with"]["seeds"] == [0, 1]

    def no_walks(*args, **kwargs):
        raise AssertionError("the game was walked again")

    monkeypatch.setattr("ratchet.autoharness.rules.harvest", no_walks)
    again = build("proposer", options, ctx)
    assert again.propose(root, archive, None).files == first.files
    assert len(again.harvested.transitions) == len(run.read_json("evolve/induced_rules_harvest.json")["transitions"])
    other = ComponentSpec(name=RULES, options={"game": "ConnectFour-v0", "seeds": [2]})
    with pytest.raises(AssertionError, match="walked again"):  # harvested with other settings: not this run's
        build("proposer", other, ctx).propose(root, archive, None)


def test_a_game_no_shape_fits_gives_no_proposal_and_says_why() -> None:
    root = Candidate.from_files("h", {"harness.py": STARTING})
    archive = Archive()
    archive.record(root)
    rules = proposer(game="Othello-v0", seeds=[0, 1, 2, 3])  # legality depends on lines of discs, not one cell
    skip = rules.propose(root, archive, None)
    assert isinstance(skip, Skip)
    assert "no rule shape fits Othello-v0" in skip.reason and skip.reason == skip.reason
    # Without results naming the game and no option: no harvest, and it says so.
    blind = proposer()
    skip = blind.propose(root, archive, None)
    assert isinstance(skip, Skip) and "set the proposer's game and seeds" in skip.reason


def rules_config(**overrides) -> EvolveConfig:
    raw = yaml.safe_load((EXAMPLE / "evolve-rules.yaml").read_text())
    raw.update(workspace=str(EXAMPLE), model="scripted:", **overrides)
    return EvolveConfig.model_validate(raw)


def test_the_engine_keeps_the_fitted_harness_and_it_plays_every_test_seed_legally(tmp_path: Path) -> None:
    cfg = rules_config(iterations=2)
    assert [p.name for p in cfg.proposers] == [RULES, "critic_refiner"]
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    model = ScriptedModel(["no code here"])  # the refiner's reply, should it be drawn
    summary = Engine(cfg, run, model, extra={"harness_runtime": InProcessHarness}).execute()
    report = summary["report"]
    assert summary["state"] == "done" and summary["accepted"] == 2 and report["proposals"]["accepted"] == 1
    assert report["split"] == "test" and report["tasks"] == 8
    assert report["best"]["id"] != report["original"]["id"]
    assert report["best"]["mean"] == 1.0 > report["original"]["mean"]
    # The fit asked nothing; its next step found nothing new to propose, which is not counted as one
    # of the run's two (Skip.exhausted), so the second is the refiner's, its one model call.
    assert len(model.calls) == 1
    failed = report["proposals"]["failed_steps"]
    assert [s["proposer"] for s in failed] == ["induced_rules", "critic_refiner"], failed
    assert "nothing new learned" in failed[0]["reason"]


def test_the_proposer_imports_nothing_of_the_cli() -> None:
    code = ("import sys, ratchet.autoharness.rules\n"
            "assert not [m for m in sys.modules if m.startswith('ratchet.cli')], 'ratchet.cli imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stderr
