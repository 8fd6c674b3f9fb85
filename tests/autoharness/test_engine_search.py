"""The synthesis loop on the engine with a scripted refiner, the real TicTacToe and in-process
harness code: it stops at h = 1.0 and keeps every judged candidate, a crash or an env rejection is
fed back to the refiner, and the step and call limits stop it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import CRASHING, GOOD, LOOSE, fenced

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import run_on_engine
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.evolve.archive import Archive
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

pytest.importorskip("textarena")


def config(tmp_path: Path, **fields) -> AutoHarnessConfig:
    """The paper's loop alone; twelve search seeds leave the gate six held-in games, the fewest on
    which it can keep a child."""
    settings = {"env": "TicTacToe-v0", "model": "scripted:", "method": "faithful", "eval_steps": 30,
                "iterations": 6, "search_seeds": list(range(12)), "heldout_seeds": [100],
                "library_dir": str(tmp_path / "lib")}
    return AutoHarnessConfig.model_validate({**settings, **fields})


def synthesize(tmp_path: Path, model: ScriptedModel, **fields) -> tuple[dict, object]:
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, "engine")
    summary = run_on_engine(config(tmp_path, **fields), model, run, description="Tic Tac Toe",
                            extra={"harness_runtime": InProcessHarness})
    return summary, run


def by_code(run) -> dict[str, dict]:
    archive = Archive(run)
    return {archive.get(c["id"]).files["harness.py"]: c for c in run.candidates()}


def request(model: ScriptedModel, index: int) -> str:
    return model.calls[index]["messages"][-1]["content"]


def test_stops_at_h_one_and_stores_every_candidate(tmp_path):
    model = ScriptedModel([fenced(LOOSE), fenced(CRASHING), fenced(GOOD), fenced(LOOSE)])
    summary, run = synthesize(tmp_path, model)
    assert summary["state"] == "done" and summary["report"]["best"]["mean"] == 1.0  # stop_at_score
    assert summary["model_calls"] == 3 and len(model.calls) == 3  # nothing asked after h = 1.0
    kept = by_code(run)
    assert set(kept) >= {LOOSE, CRASHING, GOOD} and len(kept) == 4  # the starting harness and the three replies
    assert kept[GOOD]["score"] == 1.0 and kept[GOOD]["status"] == "accepted"
    assert kept[CRASHING]["parent_id"] is not None and kept[CRASHING]["score"] < kept[LOOSE]["score"]


def test_code_failures_are_fed_back_to_the_refiner(tmp_path):
    model = ScriptedModel([fenced(CRASHING), fenced(GOOD)], cycle=True)
    synthesize(tmp_path, model, iterations=2)
    crashed = [i for i in range(len(model.calls)) if CRASHING.strip() in request(model, i)]
    assert crashed, "a request refined the crashing harness"
    shown = request(model, crashed[0])
    assert "IndexError" in shown and "Traceback" in shown
    assert "Fix propose_action" in shown  # a crash in propose_action refines propose_action


def test_env_rejections_refine_both_functions_with_the_env_reason(tmp_path):
    model = ScriptedModel([fenced(GOOD)])
    synthesize(tmp_path, model, iterations=1)
    first = request(model, 0)  # the starting harness believes every move legal and always plays [0]
    assert "Fix both functions" in first and "rejected" in first


def test_the_step_and_call_limits_stop_the_search(tmp_path):
    summary, _ = synthesize(tmp_path / "steps", ScriptedModel([fenced(LOOSE)], cycle=True), iterations=2)
    assert summary["model_calls"] == 2 and summary["state"] == "done"
    model = ScriptedModel([fenced(LOOSE)], cycle=True)
    summary, _ = synthesize(tmp_path / "calls", model, iterations=50, budget={"max_calls": 4})
    assert summary["model_calls"] == 4 == len(model.calls) and summary["state"] != "done", summary["state"]


@pytest.mark.parametrize("fits", [False, True])
def test_a_game_the_rules_cannot_fit_leaves_the_steps_to_the_refiner(tmp_path, monkeypatch, fits):
    """The fitted-rules proposer's steps that propose nothing (``Skip.exhausted``) are not counted as
    iterations, a round of every proposer's steps: the refiner's calls are spent before the steps.
    (Bandit on the 15-game table ended by the step count with 12 of its 24 calls unspent.)"""
    from ratchet.autoharness import rules

    if not fits:
        monkeypatch.setattr(rules, "induce", lambda *args, **kwargs: None)  # a game no rule shape fits
    model = ScriptedModel([fenced(LOOSE)], cycle=True)
    ideas = {"induce": True, "transitions": False, "helper_library": False, "scaffold": False, "samples_per_step": 1,
             "library_seed": False, "novelty": False, "repair": False, "autofix": False}
    summary, run = synthesize(tmp_path, model, method="ratchet", iterations=2, ideas=ideas, budget={"max_calls": 4})
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    if fits:  # the rules solve the game at the first step: nothing else is asked
        assert summary["state"] == "done" and summary["model_calls"] == 0 and len(steps) == 1
        return
    # two iterations of the two proposers: four counted steps, each the refiner's, each a call
    assert summary["model_calls"] == 4 == len(model.calls)
    assert [e["proposer"] for e in steps if e.get("counted", True)] == ["harness_refiner"] * 4
    skipped = [e for e in steps if e["proposer"] == "induced_rules"]
    assert skipped and all("no rule shape fits" in e["reason"] and e["counted"] is False for e in skipped)
