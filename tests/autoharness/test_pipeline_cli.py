"""End to end with a scripted model: the search on the engine (the real TicTacToe, the harness run
in-process), protocol (with vs without harness), report, library, the CLI's export command."""

from __future__ import annotations

import pytest
from fakes import GOOD, FakeTicTacToe, fenced
from typer.testing import CliRunner

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.library import HarnessLibrary
from ratchet.autoharness.engine import synthesize_on_engine
from ratchet.envs.harness.protocol import ProtocolConfig
from ratchet.autoharness.report import markdown_table
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.models import ScriptedModel
from ratchet.store import RunStore


pytest.importorskip("textarena")


def respond(messages) -> str:
    text = messages[-1]["content"]
    if "Python function" in text:
        return fenced(GOOD)
    return "Step 1: the centre is best.\n<move>[4]</move>"  # a player that always says [4]


def small(tmp_path, method: str = "ratchet", **fields) -> AutoHarnessConfig:
    """Twelve search seeds (six held-in games: the fewest on which the engine's gate keeps a child)."""
    settings = {"eval_steps": 20, "search_seeds": list(range(12)), "heldout_seeds": [100, 101],
                "transitions_per_seed": 20, "library_dir": str(tmp_path / "lib")}
    return AutoHarnessConfig(method=method, **{**settings, **fields})


def synthesized(cfg, run, protocol=None, library=None) -> dict:
    return synthesize_on_engine(cfg, ScriptedModel(respond), run, protocol=protocol, play_model=ScriptedModel(respond),
                                runtime_factory=InProcessHarness, extra={"harness_runtime": InProcessHarness},
                                library=library, description="Tic Tac Toe")


def test_pipeline_reports_before_and_after_and_fills_the_library(tmp_path):
    store = RunStore(tmp_path / "runs")
    cfg = small(tmp_path)
    run = store.create_run("autoharness", cfg.model_dump(), "pipe")
    proto = ProtocolConfig(legal_seeds=2, legal_steps=6, reward_games=2, matches=2, step_cap=20)
    report = synthesized(cfg, run, proto)
    assert report["search"]["best_h"] == 1.0
    before, after = report["before"], report["after"]
    # Always answering [4] is illegal once the centre is taken; the verifier catches it and the
    # harness's own move stands in, so the harnessed player stays legal.
    assert before["legal_rate"] < 1.0 and after["legal_rate"] == 1.0
    assert after["rejections"] > 0 and after["fallbacks"] > 0
    assert report["harness_alone"]["legal_rate"] == 1.0 and report["harness_alone"]["verifier_accuracy"] == 1.0
    assert report["adoption"]["verdict"] == "adopted"  # legal rate up, reward no lower
    entry = HarnessLibrary(tmp_path / "lib").lookup("TicTacToe-v0-large", "verifier")[0]
    assert entry["score"] == 1.0 and entry["adoption"] == "adopted"
    table = markdown_table([report, {"env": "Chess-v0", "status": "not run", "reason": "time"}], "t")
    assert "| TicTacToe-v0 |" in table and "| Chess-v0 |" in table and "not run" in table and "| adopted |" in table
    assert report["engine"]["best"]["mean"] == 1.0 and report["search"]["on"] == "engine"


def test_cli_export_writes_a_loadable_file(tmp_path):
    from ratchet.autoharness.export import load_harness
    from ratchet.cli import app

    store = RunStore(tmp_path / "runs")
    cfg = small(tmp_path, "faithful", eval_steps=10)
    run = store.create_run("autoharness", cfg.model_dump(), "cli")
    synthesized(cfg, run, library=HarnessLibrary(tmp_path / "lib"))
    out = tmp_path / "harness_tictactoe.py"
    result = CliRunner().invoke(app, ["autoharness", "export", run.id, "-o", str(out), "--store", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert f"# run_id: {run.id}" in out.read_text()
    with load_harness(out, trusted=True) as h:
        board = FakeTicTacToe().reset(0).text
        assert h.is_legal_action(board, "[4]") is True


def test_filter_and_policy_modes_play_legally_with_a_good_harness():
    from ratchet.envs.harness.protocol import run_protocol

    proto = ProtocolConfig(legal_seeds=2, legal_steps=8, reward_games=2, matches=2, step_cap=20)
    for mode in ("filter", "policy"):
        model = ScriptedModel(respond)
        out = run_protocol(lambda: FakeTicTacToe(), model, "TicTacToe-v0", mode, InProcessHarness({"harness.py": GOOD}),
                           [5, 6], proto)
        assert out["harness"]["legal"]["legal_rate"] == 1.0 and out["harness"]["legal"]["steps"] == 16
        assert out["baseline"]["legal"]["legal_rate"] < 1.0
        if mode == "policy":
            assert out["harness"]["work"]["calls"] == 0  # no LLM at play time


def test_protocol_can_run_after_the_search_on_the_stored_best_harness(tmp_path):
    """The batch's two-pass order: search alone first, then the protocol on the run's best code."""
    from ratchet.envs.harness.protocol import play_protocol, protocol_sides
    from ratchet.autoharness.pipeline import best_code

    store = RunStore(tmp_path / "runs")
    cfg = small(tmp_path)
    run = store.create_run("autoharness", cfg.model_dump(), "two-pass")
    report = synthesized(cfg, run)
    assert report["before"] is None and report["after"] is None
    code, _ = best_code(store.open_run(run.id))
    proto = ProtocolConfig(legal_seeds=2, legal_steps=6, reward_games=2, matches=2, step_cap=20)
    evaluation = play_protocol(run, code, ScriptedModel(respond), cfg.env, cfg.mode, cfg.heldout_seeds, proto,
                               InProcessHarness, env_factory=lambda: FakeTicTacToe())
    sides = protocol_sides(evaluation)
    assert sides["before"]["legal_rate"] < 1.0 and sides["after"]["legal_rate"] == 1.0
    # Seed by seed and game by game, the same seeds and games on both sides: what the verdict pairs.
    for side in ("before", "after"):
        assert len(sides[side]["legal_per_seed"]) == 2 and len(sides[side]["reward_per_game"]) == sides[side]["reward_games"]
    assert sides["after"]["legal_per_seed"] == [1.0, 1.0] and min(sides["before"]["legal_per_seed"]) < 1.0
    assert run.read_json("protocol.json") == evaluation


def test_the_adoption_gate_judges_the_held_out_sides():
    from ratchet.autoharness.heldout import judge
    from ratchet.autoharness.config import AdoptionConfig

    assert judge({"legal_rate": 0.8, "reward": 0.2}, {"legal_rate": 1.0, "reward": 0.2})["verdict"] == "adopted"
    hurt = judge({"legal_rate": 0.9, "reward": 0.0}, {"legal_rate": 0.0, "reward": 0.0})
    # Sides without per-seed numbers (reports written before they were kept): point estimates.
    assert hurt["verdict"] == "rejected" and hurt["reasons"][0].startswith("legal rate 0.90 without the harness, 0.00 with it")
    assert hurt["legal_delta"] == -0.9
    worse_reward = judge({"legal_rate": 1.0, "reward": 0.5}, {"legal_rate": 1.0, "reward": 0.0})
    assert worse_reward["verdict"] == "rejected" and "reward" in worse_reward["reasons"][0]
    # A margin lets a drop within it pass; the drop just beyond it still rejects.
    loose = AdoptionConfig(legal_margin=0.1)
    assert judge({"legal_rate": 1.0, "reward": 0}, {"legal_rate": 0.9, "reward": 0}, loose)["verdict"] == "adopted"
    assert judge({"legal_rate": 1.0, "reward": 0}, {"legal_rate": 0.85, "reward": 0}, loose)["verdict"] == "rejected"
    assert judge(None, {"legal_rate": 1.0})["verdict"] == "unchecked"


def side(legal: list[float], rewards: list[float]) -> dict:
    return {"legal_rate": sum(legal) / len(legal), "reward": sum(rewards) / len(rewards),
            "legal_per_seed": legal, "reward_per_game": rewards}


def test_the_adoption_verdict_is_a_paired_test_on_the_held_out_seeds():
    from ratchet.autoharness.heldout import judge
    from ratchet.autoharness.config import AdoptionConfig

    flat = [0.0] * 10
    # Worse on every one of 10 seeds: the exact sign-flip p is 1/1024.
    hurt = judge(side([0.9] * 10, flat), side([0.0] * 10, flat))
    assert hurt["verdict"] == "rejected" and hurt["tests"]["legal_rate"]["worse_p"] == pytest.approx(1 / 1024, abs=1e-4)
    assert "worse over 10 paired seeds at p = 0.000977 < 0.05" in hurt["reasons"][0]
    # One seed of ten a little worse, the rest the same: the point estimate drops (the old verdict
    # rejected it), the paired test finds no evidence of harm (p = 0.5).
    noise = judge(side([1.0] * 10, flat), side([0.9] + [1.0] * 9, flat))
    assert noise["legal_delta"] < 0 and noise["verdict"] == "adopted"
    assert noise["tests"]["legal_rate"]["worse_p"] == 0.5
    # Better on every seed: adopted, and the record says it helped.
    helped = judge(side([0.5] * 6, flat), side([1.0] * 6, flat))
    assert helped["verdict"] == "adopted" and helped["tests"]["legal_rate"]["better_p"] == pytest.approx(1 / 64, abs=1e-4)
    # Reward game by game (40 games: resampled sign flips), worse in 12 games, never better.
    lost = judge(side([1.0] * 4, [1.0] * 40), side([1.0] * 4, [0.0] * 12 + [1.0] * 28))
    assert lost["verdict"] == "rejected" and "reward" in lost["reasons"][0] and "40 paired games" in lost["reasons"][0]
    # A margin as large as the loss lets it pass; the bootstrap test judges the same way.
    assert judge(side([1.0] * 8, flat), side([0.8] * 8, flat), AdoptionConfig(legal_margin=0.2))["verdict"] == "adopted"
    boot = judge(side([0.9] * 10, flat), side([0.0] * 10, flat), AdoptionConfig(test="bootstrap"))
    assert boot["verdict"] == "rejected" and boot["tests"]["legal_rate"]["test"] == "bootstrap"
    # Too few seeds for the test ever to reject (4: p >= 1/16): the point estimates judge.
    few = judge(side([1.0] * 4, flat), side([0.0] * 4, flat))
    assert few["verdict"] == "rejected" and "too few for the test" in few["reasons"][0]
    assert judge(side([1.0] * 4, flat), side([1.0] * 4, flat))["verdict"] == "adopted"
    # Sides measured on different seeds are not paired: their point estimates are compared.
    assert "point estimates" in judge(side([1.0] * 3, flat), side([0.0] * 2, flat))["reasons"][0]


def _searched_run(tmp_path, **cfg_fields):
    store = RunStore(tmp_path / "runs")
    cfg = small(tmp_path, **cfg_fields)
    run = store.create_run("autoharness", cfg.model_dump(), "gate")
    report = synthesized(cfg, run)
    return store, cfg, run, report


def adopt(cfg, run, report, code, candidate_id) -> dict:
    """What a batch's second pass does after the protocol: judge the report's sides, record the
    verdict, and let the library follow it (``heldout.judge``, ``heldout.keep_in_library``)."""
    from ratchet.autoharness.heldout import judge, keep_in_library

    report["adoption"] = verdict = judge(report.get("before"), report.get("after"), cfg.adoption)
    run.write_json("report.json", report)
    keep_in_library(HarnessLibrary(cfg.library_dir), verdict, cfg.env, cfg.mode, code, report["search"]["best_h"],
                    gate=cfg.adoption.gate, run_id=run.id, candidate_id=candidate_id, model=report.get("model"),
                    method=cfg.method)
    return verdict


def test_a_harness_the_held_out_check_rejects_leaves_the_library_and_is_not_exported(tmp_path):
    from ratchet.autoharness.pipeline import best_code
    from ratchet.cli import app

    store, cfg, run, report = _searched_run(tmp_path)
    library = HarnessLibrary(tmp_path / "lib")
    # Searched with no protocol: kept, marked unchecked.
    assert report["adoption"]["verdict"] == "unchecked"
    assert library.lookup("TicTacToe-v0", "verifier")[0]["adoption"] == "unchecked"
    # The protocol, run later, finds the model alone better on held-out seeds: the harness is withdrawn.
    report.update(before={"legal_rate": 1.0, "reward": 0.5}, after={"legal_rate": 0.8, "reward": 0.5})
    code, provenance = best_code(run)
    assert adopt(cfg, run, report, code, provenance["candidate_id"])["verdict"] == "rejected"
    assert library.lookup("TicTacToe-v0", "verifier") == []
    assert store.open_run(run.id).read_json("report.json")["adoption"]["verdict"] == "rejected"

    out = tmp_path / "h.py"
    refused = CliRunner().invoke(app, ["autoharness", "export", run.id, "-o", str(out), "--store", str(tmp_path / "runs")])
    assert refused.exit_code != 0 and not out.exists()
    assert "legal rate 1.00 without the harness, 0.80 with it" in str(refused.exception)
    assert "--force" in refused.exception.hint
    forced = CliRunner().invoke(app, ["autoharness", "export", run.id, "-o", str(out), "--force", "--store", str(tmp_path / "runs")])
    assert forced.exit_code == 0, forced.output
    assert "# adoption: rejected" in out.read_text()


def test_the_gate_switched_off_keeps_a_rejected_harness(tmp_path):
    from ratchet.autoharness.config import AdoptionConfig
    from ratchet.autoharness.pipeline import best_code

    _, cfg, run, report = _searched_run(tmp_path, adoption=AdoptionConfig(gate=False))
    report.update(before={"legal_rate": 1.0, "reward": 0.5}, after={"legal_rate": 0.8, "reward": 0.5})
    code, provenance = best_code(run)
    assert adopt(cfg, run, report, code, provenance["candidate_id"])["verdict"] == "rejected"
    assert library_entry(tmp_path)["adoption"] == "rejected"
    out = tmp_path / "h.py"
    from ratchet.cli import app

    result = CliRunner().invoke(app, ["autoharness", "export", run.id, "-o", str(out), "--store", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output


def library_entry(tmp_path):
    return HarnessLibrary(tmp_path / "lib").lookup("TicTacToe-v0", "verifier")[0]


def test_protocol_sizes_by_name():
    from ratchet.api import protocol_config
    from ratchet.config import ConfigError

    demo, full = protocol_config("demo", []), protocol_config("full", ["matches=6"])
    assert (demo.legal_seeds, demo.legal_steps, demo.play_max_tokens) == (2, 5, 64)
    assert full.legal_steps == ProtocolConfig().legal_steps and full.matches == 6
    with pytest.raises(ConfigError, match="unknown protocol 'tiny'"):
        protocol_config("tiny", [])


def test_runs_list_counts_the_held_out_model_calls(tmp_path):
    """The demo's shape: fitted rules solve TicTacToe without a model call, then the held-out
    protocol asks the model; those calls are the run's and `ratchet runs list` counts them."""
    from ratchet import api

    result = api.synthesize_harness("TicTacToe-v0", model="scripted:", protocol="demo", store=tmp_path / "runs",
                                    overrides=["search_seeds=[0]", "heldout_seeds=[9]", f"library_dir={tmp_path / 'lib'}"])
    run = RunStore(tmp_path / "runs").open_run(result.run_id)
    heldout = [c for c in run.read_jsonl("llm_calls.jsonl") if c["purpose"] == "autoharness.heldout"]
    assert heldout, "the held-out games asked the model"
    [row] = RunStore(tmp_path / "runs").list_runs(kind="autoharness")
    assert row["llm_calls"] == len(run.read_jsonl("llm_calls.jsonl")) >= len(heldout) > 0
    listing = CliRunner().invoke(_cli(), ["runs", "list", "--store", str(tmp_path / "runs")], terminal_width=200)
    assert listing.exit_code == 0, listing.output
    assert f" {row['llm_calls']} " in listing.output


def _cli():
    from ratchet.cli import app

    return app


def test_the_cli_prints_a_line_per_phase_and_who_wrote_the_harness(tmp_path):
    """Both rows of `make demo`: with the fitted rules on they write the harness without a model
    call and the output says so; switched off, no line may claim the rules wrote it."""
    runs, lib = tmp_path / "runs", tmp_path / "lib"
    base = ["autoharness", "--env", "TicTacToe-v0", "--model", "scripted:", "--store", str(runs),
            "--set", "ideas.library_seed=false", "--set", f"library_dir={lib}", "--set", "heldout_seeds=[1000]"]
    fitted = CliRunner().invoke(_cli(), [*base, "--protocol", "demo"], terminal_width=250)
    assert fitted.exit_code == 0, fitted.output
    lines = [line.strip() for line in fitted.output.splitlines()]
    for phase in ("explore:", "propose:", "evaluate:", "held-out:", "export:"):
        assert sum(line.startswith(phase) for line in lines) == 1, (phase, fitted.output)
    assert "written by rules fitted to the explored states, no model call" in fitted.output
    assert "(rules fitted to them: on)" in fitted.output and "propose:  1 steps, 1 harnesses kept, 0 model calls" in fitted.output
    run_id = RunStore(runs).list_runs(kind="autoharness")[0]["id"]
    heldout = [c for c in RunStore(runs).open_run(run_id).read_jsonl("llm_calls.jsonl") if c["purpose"] == "autoharness.heldout"]
    assert f"({len(heldout)} model calls; adopted)" in fitted.output and heldout

    own = CliRunner().invoke(_cli(), [*base, "--protocol", "none", "--set", "ideas.induce=false", "--iterations", "2"],
                             terminal_width=250)
    assert own.exit_code == 0, own.output
    assert "(rules fitted to them: off)" in own.output and "written by rules fitted" not in own.output
    assert "written by the model" in own.output or "written by the starting harness" in own.output, own.output
