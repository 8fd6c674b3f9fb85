"""The legality suite's report stage (autoharness/heldout.py) run by the engine: the code-alone
held-out check, the held-out protocol with the play model and the adoption verdict land in the
engine's report (``evolve/report.json``, the run's summary); a harness that makes the model worse
is rejected and kept out of the library; ``--protocol none`` is ``unchecked``; a run killed during
the stage resumes into it without redoing the search or the part of the stage it finished."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ratchet.autoharness import heldout
from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import heldout_options, run_on_engine, synthesize_on_engine
from ratchet.autoharness.legality import LegalitySuite
from ratchet.autoharness.library import HarnessLibrary
from ratchet.envs.harness.protocol import ProtocolConfig
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.evolve.report import ReportingSuite
from fakes import FIXED
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

pytest.importorskip("textarena")

#: Plays the centre by code alone (legal on a game's first move, so h > 0) and believes no other
#: move legal, so the model's legal moves give way to the centre, taken after the first move.
HARMFUL = '''def propose_action(board):
    return "[4]"


def is_legal_action(board, action):
    return action.strip() == "[4]"
'''

PROTOCOL = ProtocolConfig(legal_seeds=2, legal_steps=6, reward_games=2, matches=2, step_cap=20)


def free_cell_player(messages) -> str:
    """A player that always names a free cell of the board it was shown (legal on its own)."""
    text = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    board = text.rsplit("Current Board:", 1)[-1]
    free = re.findall(r"\b([0-8])\b", board.split("Available Moves")[0])
    return f"Step 1: a free cell.\n<move>[{free[0] if free else 4}]</move>"


def small(tmp_path: Path, **overrides) -> AutoHarnessConfig:
    settings = {"env": "TicTacToe-v0", "model": "scripted:", "method": "faithful", "search_seeds": [0, 1, 2, 3],
                "heldout_seeds": [1000, 1001], "eval_steps": 20, "iterations": 0,
                "library_dir": str(tmp_path / "library")}
    return AutoHarnessConfig(**{**settings, **overrides})


def test_the_legality_suite_declares_a_report_stage() -> None:
    assert isinstance(LegalitySuite.__new__(LegalitySuite), ReportingSuite)


def test_a_harness_worse_than_the_model_alone_is_rejected_in_the_engines_report_and_kept_out_of_the_library(tmp_path: Path) -> None:
    # Six held-out seeds: enough pairs for the gate's paired test to reject (at best p = 1/64 < 0.05).
    cfg = small(tmp_path, heldout_seeds=list(range(1000, 1006)))
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="harmful")
    library = HarnessLibrary(cfg.library_dir)
    player = ScriptedModel(free_cell_player)
    summary = run_on_engine(cfg, ScriptedModel(["unused"]), run, harness=HARMFUL, library=library,
                            heldout=heldout_options(cfg, PROTOCOL.model_copy(update={"legal_seeds": 6})),
                            extra={"harness_runtime": InProcessHarness, "play_model": player,
                                   "harness_library": library})
    stored = run.read_json("evolve/report.json")
    assert stored["suite_report"] == summary["report"]["suite_report"]
    stage = stored["suite_report"]
    assert stage["name"] == "heldout" and stage["detail"]["best_h"] > 0
    before, after = stage["detail"]["before"], stage["detail"]["after"]
    assert before["legal_rate"] == 1.0 > after["legal_rate"]  # the model alone is legal; the harness's centre is not
    adoption = stage["detail"]["adoption"]
    assert adoption["verdict"] == "rejected" and adoption["tests"]["legal_rate"]["test"] == "sign_flip"
    assert adoption["tests"]["legal_rate"]["worse_p"] == pytest.approx(1 / 64, abs=1e-4)  # worse on all 6 seeds
    assert "worse over 6 paired seeds at p = 0.0156 < 0.05" in adoption["reasons"][0]
    assert stage["summary"].startswith("adoption rejected: legal rate 1.00 without the harness")
    assert run.status()["summary"]["report_stage"] == stage["summary"]  # what `ratchet runs show` prints
    assert stage["detail"]["library"] == "withdrawn: rejected" and library.lookup("TicTacToe-v0", "verifier") == []
    assert player.calls  # the protocol played the play model, not the refiner
    # where people read the engine's report: `ratchet evolve status` and the dashboard's run page
    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    from ratchet.cli import app
    from ratchet.ui import UIConfig, create_app

    shown = CliRunner().invoke(app, ["evolve", "status", run.id, "--store", str(tmp_path / "runs")])
    assert shown.exit_code == 0, shown.output
    assert "heldout: adoption rejected: legal rate 1.00 without the harness" in " ".join(shown.output.split())
    store = RunStore(tmp_path / "runs")
    page = TestClient(create_app(UIConfig(root=store.root), store=store)).get(f"/evolution/{run.id}")
    assert page.status_code == 200 and "heldout: adoption rejected: legal rate 1.00 without the harness" in page.text


def test_a_harness_that_helps_is_adopted_and_kept(tmp_path: Path) -> None:
    """The negative control of the test above: the same stage, a harness that only lets legal moves through."""
    cfg = small(tmp_path)
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="fixed")
    library = HarnessLibrary(cfg.library_dir)
    summary = run_on_engine(cfg, ScriptedModel(["unused"]), run, harness=FIXED, heldout=heldout_options(cfg, PROTOCOL),
                            extra={"harness_runtime": InProcessHarness, "harness_library": library,
                                   "play_model": ScriptedModel(free_cell_player)})
    detail = summary["report"]["suite_report"]["detail"]
    assert detail["adoption"]["verdict"] == "adopted" and detail["library"] == "kept"
    assert library.lookup("TicTacToe-v0", "verifier")[0]["code"] == FIXED


def test_without_a_protocol_the_verdict_is_unchecked_and_the_harness_kept_as_such(tmp_path: Path) -> None:
    cfg = small(tmp_path)
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="unchecked")
    report = synthesize_on_engine(cfg, ScriptedModel(["unused"]), run, protocol=None, runtime_factory=InProcessHarness,
                                  extra={"harness_runtime": InProcessHarness}, description="Tic Tac Toe")
    assert report["adoption"]["verdict"] == "unchecked" and report["before"] is None and report["after"] is None
    assert report["engine"]["suite_report"]["detail"]["adoption"]["verdict"] == "unchecked"
    assert report["harness_alone"]["steps"] > 0  # the code-alone check runs without the protocol
    assert run.read_json("report.json")["adoption"]["verdict"] == "unchecked"
    assert HarnessLibrary(cfg.library_dir).lookup("TicTacToe-v0", "verifier")[0]["adoption"] == "unchecked"


class Killed(Exception):
    """Stands in for a kill in the middle of the held-out protocol."""


def test_a_run_killed_in_the_report_stage_resumes_into_it_without_redoing_the_search(tmp_path: Path, monkeypatch) -> None:
    cfg = small(tmp_path, search_seeds=list(range(12)), iterations=1)
    store = RunStore(tmp_path / "runs")
    run = store.create_run("autoharness", {}, name="killed")
    refiner = ScriptedModel(["The harness, fixed:\n```python\n" + FIXED + "```\n"])
    alone_checks = []
    real_check = heldout.code_heldout
    monkeypatch.setattr(heldout, "code_heldout", lambda *a, **k: alone_checks.append(1) or real_check(*a, **k))

    def dies(messages):
        raise Killed("killed during the held-out protocol")

    with pytest.raises(Killed):
        synthesize_on_engine(cfg, refiner, run, protocol=PROTOCOL, play_model=ScriptedModel(dies),
                             extra={"harness_runtime": InProcessHarness}, description="Tic Tac Toe")
    assert len(refiner.calls) == 1 and alone_checks == [1]
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e.get("kind") == "step"]
    evaluations = len(run.read_jsonl("evolve/evals.jsonl"))
    assert len(steps) == 1 and not run.read_json("report.json")

    resumed = store.open_run(run.id)
    no_more = ScriptedModel([])  # a search step asked again would find no reply
    report = synthesize_on_engine(cfg, no_more, resumed, protocol=PROTOCOL, play_model=ScriptedModel(free_cell_player),
                                  extra={"harness_runtime": InProcessHarness}, description="Tic Tac Toe")
    assert no_more.calls == [] and alone_checks == [1]  # neither the search nor the finished code-alone check again
    assert [e for e in resumed.read_jsonl("evolve/events.jsonl") if e.get("kind") == "step"] == steps
    assert len(resumed.read_jsonl("evolve/evals.jsonl")) == evaluations  # the report's arms came from the cache
    assert report["search"]["best_h"] == 1.0 and report["adoption"]["verdict"] == "adopted"
    assert resumed.read_json("report.json")["adoption"] == report["adoption"]
