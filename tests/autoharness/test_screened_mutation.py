"""The ``repair`` idea on the engine: mutants screened on the dense checks before one is proposed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fakes import GOOD, LOOSE

from ratchet.autoharness.engine import write_workspace
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.autoharness.screened import ScreenedMutationOptions, ScreenedMutationProposer
from ratchet.contracts import Candidate, Proposal, Skip
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.proposers.mutation import mutants

pytest.importorskip("textarena")

INVERTED = GOOD.replace("if c.isdigit()", "if not c.isdigit()")  # one mutation away from GOOD


def screened(tmp_path: Path, **options) -> ScreenedMutationProposer:
    ws = write_workspace(tmp_path / "ws")
    ctx = EngineContext(load_manifest(ws), ws, extra={"harness_runtime": InProcessHarness})
    return ScreenedMutationProposer(ScreenedMutationOptions(game="TicTacToe-v0", checks=["transitions"], seeds=[0, 1],
                                                            transitions_per_seed=30, **options), ctx)


def harness(code: str) -> Candidate:
    return Candidate.from_files("autoharness.harness", {"harness.py": code})


def test_the_mutant_the_dense_checks_prefer_is_proposed(tmp_path: Path) -> None:
    proposer = screened(tmp_path, max_mutants=200)
    parent = harness(INVERTED)
    proposal = proposer.propose(parent, None, random.Random(0))
    assert isinstance(proposal, Proposal)
    assert proposal.meta["dense_mutant"] == 1.0 > proposal.meta["dense_parent"]
    assert proposer.score(proposal.files["harness.py"]) == 1.0
    # Screening chose: some of the same mutants score below the parent, and none above the one proposed.
    scores = [proposer.score(m.code) or 0.0 for m in mutants(INVERTED, rng=random.Random(0), limit=200)]
    assert min(scores) < proposal.meta["dense_parent"] and max(scores) == 1.0


def test_no_mutant_better_than_the_parent_is_a_skip(tmp_path: Path) -> None:
    proposer = screened(tmp_path, max_mutants=200)
    assert proposer.score(GOOD) == 1.0
    skipped = proposer.propose(harness(GOOD), None, random.Random(0))
    assert isinstance(skipped, Skip) and "scores above the parent's 1.000" in skipped.reason
    assert isinstance(proposer.propose(harness(LOOSE), None, random.Random(0)), (Proposal, Skip))
