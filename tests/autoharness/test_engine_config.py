"""``ratchet autoharness``'s settings as an engine configuration (autoharness/engine.py): the
ratchet method's ideas become proposers and refiners, the faithful method is the paper's loop
alone, and a run on the engine with the scripted refiner keeps a harness that plays the held-out
seeds legally where the blank starting harness does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratchet.autoharness.config import AutoHarnessConfig, RatchetIdeas
from ratchet.autoharness.engine import (
    BLANK_HARNESS,
    HARNESS_PROPOSER,
    HARNESS_REFINER,
    INDUCED_RULES,
    LEGALITY_SUITE,
    SCAFFOLD_REFINER,
    SCREENED_MUTATION,
    engine_config,
    run_on_engine,
    starting_harness,
)
from ratchet.autoharness.library import HarnessLibrary
from ratchet.autoharness.pipeline import best_code
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.evolve.components import build
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.preflight import gate_reach_warning
from fakes import FIXED
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

pytest.importorskip("textarena")


def small(**overrides) -> AutoHarnessConfig:
    settings = {"env": "TicTacToe-v0", "model": "scripted:", "search_seeds": [0, 1, 2, 3],
                "heldout_seeds": [1000, 1001], "eval_steps": 20, "iterations": 1}
    return AutoHarnessConfig(**{**settings, **overrides})


def test_the_ratchet_method_is_thompson_the_scaffold_refiner_and_the_no_model_proposers(tmp_path: Path) -> None:
    cfg = engine_config(small(), tmp_path, "Tic Tac Toe")
    assert cfg.suite.name == LEGALITY_SUITE and cfg.suite.options["seeds"] == [0, 1, 2, 3, 1000, 1001]
    assert cfg.selector.name == "thompson" and cfg.selector.options == {"c": 1.0, "pool": "scored"}
    # the repair and autofix ideas act inside the refiner's step (its samples), not as steps of their own
    assert [p.name for p in cfg.proposers] == [INDUCED_RULES, HARNESS_PROPOSER]
    critic = cfg.proposers[1].options
    assert critic["repair"] == {"rounds": 3, "autofix": True, "game": "TicTacToe-v0", "mutants": 32,
                                "imports": {"parse_grid": "from harnesslib import parse_grid", **critic["repair"]["imports"]}}
    assert cfg.gate.name == "dominance"  # the legality suite is deterministic per (code, task, seed)
    assert critic["refiner"] == SCAFFOLD_REFINER and critic["fallback_refiner"] == HARNESS_REFINER
    assert critic["samples"] == 4 and critic["refiner_options"]["seeds"] == [0, 1]
    # every child is scored on held-in, a node to refine (no smoke stage), shown its wrong states first
    assert cfg.smoke.tasks == 0 and critic["refiner_options"]["counterexamples"] == 2
    # the refiner's evidence, the gate's and the report's seeds never meet
    assert cfg.splits.ids == {"search": ["TicTacToe-v0#0", "TicTacToe-v0#1"], "heldin": ["TicTacToe-v0#2", "TicTacToe-v0#3"],
                              "test": ["TicTacToe-v0#1000", "TicTacToe-v0#1001"]}
    # an iteration = a step per sample the refinement may ask (4) and one of the rules (the calls stay the binding limit)
    assert cfg.static.novelty and cfg.budget.max_calls == 40 and cfg.iterations == 1 * (4 + 1)
    off = engine_config(small(ideas=RatchetIdeas(induce=False, autofix=False, repair=False, scaffold=False)), tmp_path)
    assert [p.name for p in off.proposers] == [HARNESS_PROPOSER] and off.proposers[0].options["refiner"] == HARNESS_REFINER
    assert off.iterations == 1 and "repair" not in off.proposers[0].options
    # a refiner that cannot screen (no scaffold): the repair and autofix stay steps of their own, a round of them an iteration
    whole = engine_config(small(ideas=RatchetIdeas(scaffold=False)), tmp_path)
    assert [p.name for p in whole.proposers] == [INDUCED_RULES, HARNESS_PROPOSER, "autofix", SCREENED_MUTATION]
    assert "repair" not in whole.proposers[1].options and whole.iterations == 1 * 4


def test_the_faithful_method_is_the_papers_loop_alone(tmp_path: Path) -> None:
    cfg = engine_config(small(method="faithful"), tmp_path)
    [critic] = cfg.proposers
    assert critic.name == HARNESS_PROPOSER and critic.options["refiner"] == HARNESS_REFINER
    assert not critic.options["grammar"] and not critic.options["hotter_retry"] and not cfg.suite.options["dense"]
    assert critic.options["samples"] == 1 and critic.options["temperature"] == 0.2 and not cfg.static.novelty


def test_every_component_of_the_configuration_builds(tmp_path: Path) -> None:
    """A negative control for the names: each one resolves and its options validate."""
    from ratchet.autoharness.engine import write_workspace

    ws = write_workspace(tmp_path / "ws")
    cfg = engine_config(small(), ws, "Tic Tac Toe")
    ctx = EngineContext(load_manifest(ws), ws)
    built = [build("proposer", spec, ctx) for spec in cfg.proposers]
    assert [p.name for p in built] == ["induced_rules", "harness_refiner"] and built[1].repair is not None
    every = engine_config(small(ideas=RatchetIdeas(fresh_roots=True, restarts=True, grammar=True, few_shot=True)), ws)
    assert [build("proposer", spec, ctx).name for spec in every.proposers] == [
        "induced_rules", "harness_refiner", "fresh_root", "fresh_root"]
    whole = engine_config(small(ideas=RatchetIdeas(scaffold=False)), ws)
    assert [build("proposer", spec, ctx).name for spec in whole.proposers] == [
        "induced_rules", "harness_refiner", "autofix", "screened_mutation"]
    # the default seeds leave the gate 5 held-in tasks: a change that wins all of them must pass
    default = engine_config(AutoHarnessConfig(env="TicTacToe-v0", heldout_seeds=[1000]), ws)
    assert len(default.splits.ids["heldin"]) == 5
    assert gate_reach_warning(build("gate", default.gate, ctx), 5) is None
    assert gate_reach_warning(build("gate", default.gate.model_copy(update={"options": {"correction": "spending"}}), ctx), 5)
    # a removed idea a saved config still switches on loads, with a warning, and changes nothing
    with pytest.warns(DeprecationWarning, match="decompose"):
        old = small(ideas=RatchetIdeas.model_validate({"decompose": True}))
    assert engine_config(old, ws).proposers[1].options["refiner"] == SCAFFOLD_REFINER
    assert build("suite", cfg.suite, ctx).name == "legality"


def test_a_faithful_run_on_the_engine_keeps_the_fixed_harness(tmp_path: Path) -> None:
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="engine")
    model = ScriptedModel(["The harness, fixed:\n```python\n" + FIXED + "```\n"])
    # six held-in seeds: the fewest on which the paired gate can accept at all (p = 1/64)
    cfg = small(method="faithful", search_seeds=list(range(12)))
    summary = run_on_engine(cfg, model, run, description="Tic Tac Toe", extra={"harness_runtime": InProcessHarness})
    report = summary["report"]
    assert summary["state"] == "done" and summary["accepted"] == 2 and len(model.calls) == 1
    assert report["split"] == "test" and report["tasks"] == 2
    assert report["best"]["mean"] == 1.0 > report["original"]["mean"]
    assert (Path(run.dir) / "workspace" / "harness.py").read_text() == BLANK_HARNESS


def test_the_command_runs_the_engine_and_refuses_the_removed_search(tmp_path: Path) -> None:
    """``ratchet autoharness``: the blank harness evaluated in the sandbox on every split (no step:
    no model call), then the per-game report; ``--search`` (the dedicated search, removed) is
    refused with exit 2 and the reason, and a run that search started is not resumed but named
    with the fix, from the library and from the command."""
    from typer.testing import CliRunner

    from ratchet import api
    from ratchet.cli import app
    from ratchet.contracts import RatchetError

    options = ["--env", "TicTacToe-v0", "--model", "scripted:", "--iterations", "0",
               "--set", "search_seeds=[0,1]", "--set", "heldout_seeds=[1000]", "--set", "eval_steps=5",
               "--set", f"library_dir={tmp_path / 'library'}", "--protocol", "none", "--store", str(tmp_path / "runs")]
    result = CliRunner().invoke(app, ["autoharness", *options])
    assert result.exit_code == 0, result.output
    assert "after 0 iterations, 0 LLM calls" in " ".join(result.output.split())
    store = RunStore(tmp_path / "runs")
    [row] = store.list_runs()
    run = store.open_run(row["id"])
    assert (Path(run.dir) / "workspace" / "harness.py").read_text() == BLANK_HARNESS
    report = run.read_json("report.json")
    assert report["search"]["on"] == "engine" and report["adoption"]["verdict"] == "unchecked"

    searched = CliRunner().invoke(app, ["autoharness", "--search", *options])
    assert searched.exit_code == 2 and len(store.list_runs()) == 1
    assert "the dedicated search was removed; the engine is the one search" in " ".join(searched.output.split())

    # A run the dedicated search started: its checkpoint holds the search's tree.
    old = store.create_run("autoharness", small().model_dump(), "searched")
    old.checkpoint("autoharness", {"tree": [{"candidate_id": "c1", "parent_id": None, "h": 0.5}], "codes": {"c1": FIXED}})
    old.set_status("stopped")
    with pytest.raises(RatchetError, match=f"run {old.id} was started by the dedicated search") as refused:
        api.synthesize_harness(resume=old.id, protocol="none", store=tmp_path / "runs")
    assert "start a new run" in refused.value.hint and not (Path(old.dir) / "workspace").exists()
    assert store.open_run(old.id).status()["status"] == "stopped"  # not marked running, nor failed
    resumed = CliRunner().invoke(app, ["autoharness", "--resume", old.id, "--store", str(tmp_path / "runs")])
    assert resumed.exit_code != 0 and "Traceback" not in resumed.output
    assert f"run {old.id} was started by the dedicated search" in " ".join((resumed.output + str(resumed.exception)).split())
    assert best_code(store.open_run(old.id))[0] == FIXED  # its harness can still be exported


def test_the_held_out_protocol_and_the_adoption_verdict_follow_the_engine(tmp_path: Path) -> None:
    from ratchet.autoharness.engine import synthesize_on_engine
    from ratchet.envs.harness.protocol import ProtocolConfig

    cfg = small(method="faithful", search_seeds=list(range(12)), library_dir=str(tmp_path / "library"))
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="engine")
    proto = ProtocolConfig(legal_seeds=2, legal_steps=6, reward_games=2, matches=2, step_cap=20)
    refiner = ScriptedModel(["The harness, fixed:\n```python\n" + FIXED + "```\n"])
    player = ScriptedModel(lambda messages: "Step 1: the centre.\n<move>[4]</move>")
    report = synthesize_on_engine(cfg, refiner, run, protocol=proto, play_model=player, runtime_factory=InProcessHarness,
                                  extra={"harness_runtime": InProcessHarness}, description="Tic Tac Toe")
    assert report["search"]["best_h"] == 1.0 and report["engine"]["best"]["mean"] == 1.0
    assert report["harness_alone"]["legal_rate"] == 1.0  # the code alone on the held-out seeds
    # Always answering [4] is illegal once the centre is taken; the harness's check and move keep it legal.
    assert report["before"]["legal_rate"] < 1.0 == report["after"]["legal_rate"]
    assert report["adoption"]["verdict"] == "adopted" and run.read_json("report.json")["adoption"]["verdict"] == "adopted"
    entry = HarnessLibrary(cfg.library_dir).lookup("TicTacToe-v0", "verifier")[0]
    assert entry["code"] == FIXED and entry["adoption"] == "adopted"
    code, provenance = best_code(run)  # what `ratchet autoharness export` writes
    assert code == FIXED and provenance["score"] == 1.0 and provenance["adoption"] == "adopted"


def test_library_seed_starts_from_the_librarys_harness_and_a_solved_start_takes_no_step(tmp_path: Path) -> None:
    cfg = small(library_dir=str(tmp_path / "library"), iterations=3)
    assert starting_harness(cfg) == BLANK_HARNESS  # an empty library
    HarnessLibrary(cfg.library_dir).add("TicTacToe-v0", "verifier", FIXED, 1.0, run_id="earlier")
    assert starting_harness(cfg) == FIXED
    assert starting_harness(cfg.model_copy(update={"method": "faithful"})) == BLANK_HARNESS  # the paper's loop: no seed
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="seeded")
    model = ScriptedModel(["unused"])
    summary = run_on_engine(cfg, model, run, extra={"harness_runtime": InProcessHarness})
    # every held-in game played legally from the start: the stop at h = 1.0 comes before any step
    assert summary["state"] == "done" and summary["report"]["original"]["mean"] == 1.0 and model.calls == []
    assert not [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]


def test_a_config_saved_before_the_engine_was_the_one_search_still_loads() -> None:
    """A run's ``run.json`` from the dedicated search's time: its ``eval_envs`` (read only by that
    search) is dropped and its ``budget.max_seconds`` read as ``max_wall_s``, each with a warning
    naming the key; a budget that names one limit keeps the others' defaults."""
    saved = {**small().model_dump(), "eval_envs": 5,
             "budget": {"max_calls": 24, "max_tokens": 200_000, "max_seconds": 420.0}}  # as the search wrote it
    with pytest.warns(DeprecationWarning) as warned:
        cfg = AutoHarnessConfig.model_validate(saved)
    assert (cfg.budget.max_calls, cfg.budget.max_tokens, cfg.budget.max_wall_s) == (24, 200_000, 420.0)
    assert {str(w.message).split(" ")[0] for w in warned} == {"AutoHarnessConfig.eval_envs", "AutoHarnessConfig.budget.max_seconds"}
    assert engine_config(cfg, Path("/tmp/ws")).budget.max_wall_s == 420.0
    partial = AutoHarnessConfig.model_validate({"budget": {"max_calls": 3}})
    assert (partial.budget.max_calls, partial.budget.max_tokens, partial.budget.max_wall_s) == (3, 200_000, 3600.0)
    with pytest.raises(Exception, match="budget.max_secs"):  # any other unknown key is still an error naming it
        AutoHarnessConfig.model_validate({"budget": {"max_secs": 3}})
