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


def run_with(tmp_path: Path, model: ScriptedModel, max_calls: int, repair: bool = True) -> tuple[dict, object]:
    """``repair``: the repair and autofix ideas (off: the samples are proposed as the model wrote them)."""
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="engine")
    cfg = config(tmp_path, max_calls)
    cfg.ideas.repair = cfg.ideas.autofix = repair
    return run_on_engine(cfg, model, run), run


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
    # step (its child was left "evaluating" when the run stopped). Without the repair, which would
    # fix the first sample in the step (see below).
    model = ScriptedModel([WRONG["blank_is_space"], WRONG["inverted"], WRONG["hard_coded"], KEPT])
    summary, run = run_with(tmp_path, model, max_calls=4, repair=False)
    assert kept_by_model(run, summary) == (1.0, "harness_refiner")
    assert len(model.calls) == 4 and not [c for c in run.candidates() if c["status"] == "evaluating"]


def test_samples_in_hand_are_proposed_when_the_budget_refuses_the_next(tmp_path: Path) -> None:
    # Two samples paid for, the third refused: the better of the two is still proposed and judged
    # (before, the refusal escaped the proposal and the step made no candidate).
    model = ScriptedModel([WRONG["blank_is_space"], WRONG["hard_coded"]])
    summary, run = run_with(tmp_path, model, max_calls=2, repair=False)
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e.get("kind") == "step" and e.get("child")]
    assert len(steps) == 1 and steps[0]["model_calls"] == 2 and steps[0]["status"] == "rejected"
    assert len(model.calls) == 2
    child = Archive(run).get(steps[0]["child"])
    assert 'return [["0"], ["2"], ["4"], ["5"], ["6"]]' in child.files["harness.py"]  # the hard-coded one
    # the starting harness stays the best: a negative control (a wrong harness is not kept)
    assert kept_by_model(run, summary) == (pytest.approx(0.56, abs=0.01), None)


def test_a_partly_right_child_is_refined_as_the_search_refines_its_best_sample(tmp_path: Path) -> None:
    """The model answers the first request with a legal_moves that tests free cells against ' '
    (h about 0.1, far below the blank harness's 0.56) and writes the right one only when shown that
    function to fix. Before, the smoke stage rejected the child before it was scored on held-in, so
    it never became a parent and every step asked the first request again: nothing was kept.
    (The repair ideas off: they would fix the first sample in its own step, below.)"""
    def responder(messages) -> str:
        return KEPT if "cells[i] == ' '" in messages[-1]["content"] else WRONG["blank_is_space"]

    model = ScriptedModel(responder)
    cfg = config(tmp_path, max_calls=12).model_copy(update={"iterations": 16})
    cfg.ideas.samples_per_step, cfg.ideas.repair, cfg.ideas.autofix = 1, False, False
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="engine")
    summary = run_on_engine(cfg, model, run)
    assert kept_by_model(run, summary) == (1.0, "harness_refiner")
    archive = Archive(run)
    best = archive.get(summary["report"]["best"]["id"])
    parent = archive.get(best.parent_id)
    assert "cells[i] == ' '" in parent.files["harness.py"] and archive.status(parent.id) == "rejected"
    assert archive.score(parent.id, "heldin") < 0.56 - 0.25  # what the smoke stage's margin cut


@pytest.mark.parametrize("wrong, change", [("blank_is_space", "`cells[i] == ' '` → "), ("inverted", "`in` → `not in`")])
def test_a_sample_one_mutant_from_right_is_proposed_repaired_in_its_own_step(tmp_path: Path, wrong: str, change: str) -> None:
    """The search repairs every sample it judges; the engine's refiner step now repairs each of its
    samples (screened single-point mutants, no model call) before it ranks them. One call, a reply
    one comparison from right: the step proposes it repaired, kept at h = 1.0 after that one call.
    Before, the step proposed the sample as written (h about 0.1), and a repair came only if a
    later step drew the screened mutation for that parent."""
    model = ScriptedModel([WRONG[wrong]], cycle=True)
    summary, run = run_with(tmp_path, model, max_calls=8)
    assert kept_by_model(run, summary) == (1.0, "harness_refiner") and len(model.calls) == 1
    assert summary["state"] == "done"
    archive = Archive(run)
    best = archive.get(summary["report"]["best"]["id"])
    assert best.parent_id == archive.candidates()[0].id  # the starting harness: no other step
    repaired = best.meta["proposal"]["repaired"]
    assert repaired["after"] == 1.0 > repaired["before"] and change in repaired["changes"][0]
    # the step's record keeps the model's own sample and what the repair did to it
    [record] = run.read_jsonl("evolve/samples.jsonl")
    [sample] = record["samples"]
    assert sample["screen"] == repaired["before"] and sample["repair"]["after"] == 1.0
    assert record["kept"] == sample["repair"]["code"] != sample["code"]
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e.get("kind") == "step"]
    assert [e["model_calls"] for e in steps] == [1]  # the repair's screens cost no call
    # the command's phase line says the model's sample was repaired without a model call
    from ratchet.cli.autoharness import written_by

    said = written_by(run, {"engine": summary["report"]})
    assert said.startswith("the model (proposer harness_refiner), repaired without a model call (")
    assert change in said and "-> 1.0" in said


def test_without_the_repair_the_same_sample_is_proposed_as_written(tmp_path: Path) -> None:
    """The negative control: the repair ideas off, the same reply is proposed as the model wrote it and rejected."""
    model = ScriptedModel([WRONG["blank_is_space"]])
    summary, run = run_with(tmp_path, model, max_calls=1, repair=False)
    [record] = run.read_jsonl("evolve/samples.jsonl")
    assert "repair" not in record["samples"][0] and record["kept"] == record["samples"][0]["code"]
    assert kept_by_model(run, summary)[1] is None  # the starting harness stays the best


def test_once_the_calls_are_spent_a_separate_repair_step_still_fixes_an_archived_child(tmp_path: Path) -> None:
    """One call, its reply testing free cells against ' ', with the repair as a step of its own (as
    where the refiner cannot screen) instead of inside the refiner's: the search repairs such a
    sample with no model call after its last one, and the engine's proposers that call no model go
    on once the calls are spent (up to ``iterations``), so the screened mutation makes it right."""
    from ratchet.autoharness.engine import SCREENED_MUTATION, engine_config, write_workspace
    from ratchet.evolve.loop import Engine

    model = ScriptedModel([WRONG["blank_is_space"]])
    cfg = config(tmp_path, max_calls=1)
    cfg.ideas.samples_per_step = 1
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="engine")
    evolve = engine_config(cfg, write_workspace(Path(run.dir) / "workspace"), "Tic Tac Toe")
    [critic] = evolve.proposers
    critic.options.pop("repair")
    mutation = critic.model_copy(update={"name": SCREENED_MUTATION, "options": {
        "game": "TicTacToe-v0", "seeds": cfg.search_seeds[: len(cfg.search_seeds) // 2], "rng_seed": cfg.rng_seed}})
    evolve = evolve.model_copy(update={"proposers": [critic, mutation], "iterations": 40})
    summary = Engine(evolve, run, model).execute()
    assert kept_by_model(run, summary) == (1.0, "screened_mutation") and len(model.calls) == 1
    archive = Archive(run)
    parent = archive.get(archive.get(summary["report"]["best"]["id"]).parent_id)
    assert "cells[i] == ' '" in parent.files["harness.py"] and parent.meta.get("proposer") == "harness_refiner"
    # the command's phase line says the model's harness was changed without a model call
    from ratchet.cli.autoharness import written_by

    assert written_by(run, {"engine": summary["report"]}) == (
        "a mechanical mutation screened on the dense checks, no model call, of the model's harness "
        "(proposer harness_refiner)")
