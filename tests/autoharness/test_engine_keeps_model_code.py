"""The engine path keeps the harness the model wrote (``ratchet autoharness --engine`` with the
fitted rules off), fed the 0.5B's own replies through a scripted model.

Measured before these tests (bench/results/make_demo.md): with 8 and 16 calls the engine kept
nothing the 0.5B wrote where the dedicated search kept its 4th reply at h = 1.0. Fed that same
reply, the engine judged it 1.0 on the smoke tasks, yet kept nothing: a step whose sample had
screened 1.0 went on asking (the repeats' hotter retries) until the budget refused a call, which
threw away the samples in hand; and the child of the step that spent the budget's last call was
never judged (its evaluation was refused by the call limit: left ``evaluating``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import run_on_engine
from ratchet.evolve.archive import Archive
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

pytest.importorskip("textarena")

REPLIES = json.loads((Path(__file__).parent / "data" / "tictactoe_05b_replies.json").read_text())
KEPT, WRONG = REPLIES["kept"], REPLIES["wrong"]


def config(tmp_path: Path, max_calls: int) -> AutoHarnessConfig:
    """The demo's first row (ratchet method, fitted rules off, no library seed) on fewer steps:
    ten search seeds leave the gate the default five held-in games."""
    return AutoHarnessConfig.model_validate({
        "env": "TicTacToe-v0", "model": "scripted:", "heldout_seeds": [1000], "eval_steps": 20,
        "ideas": {"induce": False, "library_seed": False}, "library_dir": str(tmp_path / "lib"),
        "budget": {"max_calls": max_calls}})


def run_with(tmp_path: Path, model: ScriptedModel, max_calls: int) -> tuple[dict, object]:
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="engine")
    return run_on_engine(config(tmp_path, max_calls), model, run), run


def kept_by_model(run: object, summary: dict) -> tuple[float, str | None]:
    """The kept harness's held-in score and who wrote it (None: the starting harness)."""
    archive = Archive(run)
    best = summary["report"]["best"]["id"]
    return archive.score(best, "heldin"), archive.get(best).meta.get("proposer")


def test_the_reply_the_search_kept_is_kept_on_the_engine_after_one_call(tmp_path: Path) -> None:
    # Every call answered with the kept reply: before, the step's second sample (a repeat) was asked
    # again hotter until the 8-call budget refused, and the step's proposal was lost with it.
    model = ScriptedModel([KEPT], cycle=True)
    summary, run = run_with(tmp_path, model, max_calls=8)
    assert kept_by_model(run, summary) == (1.0, "harness_refiner")
    assert len(model.calls) == 1 and summary["state"] == "done"  # stop_at_score: h = 1.0


def test_the_proposal_that_spends_the_budgets_last_call_is_judged(tmp_path: Path) -> None:
    # Four samples, the right one last, with a budget of four calls: the make-demo run's second
    # step (its child was left "evaluating" when the run stopped).
    model = ScriptedModel([WRONG["blank_is_space"], WRONG["inverted"], WRONG["hard_coded"], KEPT])
    summary, run = run_with(tmp_path, model, max_calls=4)
    assert kept_by_model(run, summary) == (1.0, "harness_refiner")
    assert len(model.calls) == 4 and not [c for c in run.candidates() if c["status"] == "evaluating"]


def test_samples_in_hand_are_proposed_when_the_budget_refuses_the_next(tmp_path: Path) -> None:
    # Two samples paid for, the third refused: the better of the two is still proposed and judged
    # (before, the refusal escaped the proposal and the step made no candidate).
    model = ScriptedModel([WRONG["blank_is_space"], WRONG["hard_coded"]])
    summary, run = run_with(tmp_path, model, max_calls=2)
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e.get("kind") == "step" and e.get("child")]
    assert len(steps) == 1 and steps[0]["model_calls"] == 2 and steps[0]["status"] == "rejected"
    assert len(model.calls) == 2
    child = Archive(run).get(steps[0]["child"])
    assert 'return [["0"], ["2"], ["4"], ["5"], ["6"]]' in child.files["harness.py"]  # the hard-coded one
    # the starting harness stays the best: a negative control (a wrong harness is not kept)
    assert kept_by_model(run, summary) == (pytest.approx(0.56, abs=0.01), None)


@pytest.mark.parametrize("repair", [False, True])
def test_a_partly_right_child_is_refined_as_the_search_refines_its_best_sample(tmp_path: Path, repair: bool) -> None:
    """The model answers the first request with a legal_moves that tests free cells against ' '
    (h about 0.1, far below the blank harness's 0.56) and writes the right one only when shown that
    function to fix. Before, the smoke stage rejected the child before it was scored on held-in, so
    it never became a parent and every step asked the first request again: nothing was kept. With
    the ``repair`` idea, its mutants (``==`` to ``!=``) fix it first, without a model call."""
    def responder(messages) -> str:
        return KEPT if "cells[i] == ' '" in messages[-1]["content"] else WRONG["blank_is_space"]

    model = ScriptedModel(responder)
    cfg = config(tmp_path, max_calls=12).model_copy(update={"iterations": 16})
    cfg.ideas.samples_per_step, cfg.ideas.repair = 1, repair
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="engine")
    summary = run_on_engine(cfg, model, run)
    assert kept_by_model(run, summary) == (1.0, "screened_mutation" if repair else "harness_refiner")
    archive = Archive(run)
    best = archive.get(summary["report"]["best"]["id"])
    parent = archive.get(best.parent_id)
    assert "cells[i] == ' '" in parent.files["harness.py"] and archive.status(parent.id) == "rejected"
    assert archive.score(parent.id, "heldin") < 0.56 - 0.25  # what the smoke stage's margin cut


def test_once_the_calls_are_spent_the_repair_still_fixes_an_archived_child(tmp_path: Path) -> None:
    """One call, its reply testing free cells against ' ': the search repairs such a sample with no
    model call after its last one. Before, the engine stopped at the next step that drew the refiner;
    now the proposers that call no model go on (up to ``iterations``) and the repair makes it right."""
    model = ScriptedModel([WRONG["blank_is_space"]])
    cfg = config(tmp_path, max_calls=1)
    cfg.ideas.samples_per_step = 1
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="engine")
    summary = run_on_engine(cfg, model, run)
    assert kept_by_model(run, summary) == (1.0, "screened_mutation") and len(model.calls) == 1
    archive = Archive(run)
    parent = archive.get(archive.get(summary["report"]["best"]["id"]).parent_id)
    assert "cells[i] == ' '" in parent.files["harness.py"] and parent.meta.get("proposer") == "harness_refiner"
    # the command's phase line says the model's harness was changed without a model call
    from ratchet.cli.autoharness import written_by

    assert written_by(run, {"engine": summary["report"]}) == (
        "a mechanical mutation screened on the dense checks, no model call, of the model's harness "
        "(proposer harness_refiner)")
