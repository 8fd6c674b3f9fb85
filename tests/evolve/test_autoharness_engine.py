"""AutoHarness as one configuration of the engine (examples/autoharness-engine): the shipped config
loads as Thompson + critic_refiner + the legality suite, and ``Engine`` (what ``ratchet evolve``
runs) plays real TicTacToe-v0 through it with the scripted refiner. A reply that fixes the starting
harness is kept and plays every test seed legally; a reply that gives the parent's code back is no
proposal. The legality suite runs harness code in the sandbox unless a test hands in a runtime."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from ratchet.autoharness.legality import LegalityOptions, LegalitySuite
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.contracts import Candidate, Evaluator
from ratchet.evolve.components import build
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.loop import Engine
from ratchet.evolve.manifest import load_manifest
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

pytest.importorskip("textarena")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoharness-engine"
STARTING = (EXAMPLE / "harness.py").read_text()

FIXED = '''import random
import re


def free_cells(board):
    # The last board in the observation is the current one; free cells show their number.
    return re.findall(r"\\b([0-8])\\b", board.rsplit("Current Board:", 1)[-1])


def propose_action(board):
    return "[" + random.choice(free_cells(board)) + "]"


def is_legal_action(board, action):
    return action.strip().strip("[]").strip() in free_cells(board)
'''


def fenced(code: str) -> str:
    return "The harness, fixed:\n```python\n" + code + "```\n"


def config(**overrides) -> EvolveConfig:
    raw = yaml.safe_load((EXAMPLE / "evolve.yaml").read_text())
    raw.update(workspace=str(EXAMPLE), model="scripted:", **overrides)
    return EvolveConfig.model_validate(raw)


def run_engine(tmp_path: Path, reply: str, **overrides) -> tuple[dict, ScriptedModel]:
    cfg = config(**overrides)
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    model = ScriptedModel([reply])
    summary = Engine(cfg, run, model, extra={"harness_runtime": InProcessHarness}).execute()
    return summary, model


def test_the_shipped_config_is_thompson_critic_refiner_and_the_legality_suite() -> None:
    cfg = config()
    assert cfg.selector.name == "thompson" and cfg.selector.options["pool"] == "scored"
    assert [p.name for p in cfg.proposers] == ["critic_refiner"] and cfg.suite.name == "ratchet.autoharness.legality:LegalitySuite"
    ids = cfg.splits.ids
    assert not set(ids["search"]) & set(ids["heldin"]) and not set(ids["heldin"]) & set(ids["test"])
    suite = build("suite", cfg.suite, EngineContext(load_manifest(EXAMPLE), EXAMPLE))
    assert isinstance(suite, Evaluator)
    assert {t.id for t in suite.tasks()} == {i for split in ids.values() for i in split}


def test_a_reply_that_fixes_the_harness_is_kept_and_plays_every_test_seed_legally(tmp_path: Path) -> None:
    summary, model = run_engine(tmp_path, fenced(FIXED), iterations=1)
    report = summary["report"]
    assert summary["state"] == "done" and summary["accepted"] == 2
    assert report["split"] == "test" and report["tasks"] == 8
    assert report["best"]["id"] != report["original"]["id"]
    assert report["best"]["mean"] == 1.0 > report["original"]["mean"]
    assert report["proposals"]["accepted"] == 1
    [ask] = model.calls
    # the critic showed the refiner the starting harness's failures on the search seeds
    assert "is_legal_action" in ask["messages"][-1]["content"] and "occupied" in ask["messages"][-1]["content"]


def test_a_reply_that_returns_the_parents_code_is_no_proposal(tmp_path: Path) -> None:
    summary, model = run_engine(tmp_path, fenced(STARTING), iterations=1)
    proposals = summary["report"]["proposals"]
    assert summary["accepted"] == 1 and proposals["total"] == 0 and proposals["failed"] == 1
    [step] = proposals["failed_steps"]
    assert step["proposer"] == "critic_refiner" and "identical to the parent" in step["reason"]


def test_harness_code_runs_in_the_sandbox_unless_a_runtime_is_handed_in() -> None:
    options = LegalityOptions(seeds=[0], steps_per_env=3)
    telling = Candidate.from_files("t", {"harness.py": (
        "import os\n\n\ndef propose_action(board):\n    raise RuntimeError(f'pid {os.getpid()}')\n\n\n"
        "def is_legal_action(board, action):\n    return True\n")})
    ctx = EngineContext(load_manifest(EXAMPLE), EXAMPLE, extra={"harness_runtime": InProcessHarness})
    sandboxed, in_process = LegalitySuite(options, None), LegalitySuite(options, ctx)
    pids = {}
    for label, suite in (("sandbox", sandboxed), ("in-process", in_process)):
        [result] = suite.evaluate(telling, suite.tasks(), seed=0)
        assert result.score == 0.0 and result.failures[0].kind == "code_error"
        pids[label] = result.failures[0].message
    assert f"pid {os.getpid()}" in pids["in-process"] and f"pid {os.getpid()}" not in pids["sandbox"]
    # what runs the code decides scores (time limits): the fingerprint says which
    assert sandboxed.fingerprint() != in_process.fingerprint()
    assert sandboxed.fingerprint() == LegalitySuite(options).fingerprint() != LegalitySuite(
        LegalityOptions(seeds=[0], steps_per_env=4)).fingerprint()


@pytest.mark.slow
def test_the_same_run_with_the_harness_in_the_sandbox_keeps_the_fix(tmp_path: Path) -> None:
    cfg = config(iterations=1)
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    summary = Engine(cfg, run, ScriptedModel([fenced(FIXED)])).execute()  # no runtime handed in: the sandbox
    report = summary["report"]
    assert summary["accepted"] == 2 and report["best"]["mean"] == 1.0 > report["original"]["mean"]


def test_the_one_function_request_is_a_refiner_swapped_in_and_its_reply_is_built_into_the_template(tmp_path: Path) -> None:
    raw = yaml.safe_load((EXAMPLE / "evolve-scaffold.yaml").read_text())
    raw.update(workspace=str(EXAMPLE), model="scripted:", iterations=1)
    cfg = EvolveConfig.model_validate(raw)
    assert [p.name for p in cfg.proposers] == ["critic_refiner"]
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    model = ScriptedModel(["```python\ndef legal_moves(cells):\n    return [c for c in cells if c.isdigit()]\n```"])
    summary = Engine(cfg, run, model, extra={"harness_runtime": InProcessHarness}).execute()
    [request] = [m["content"] for m in model.calls[0]["messages"] if m["role"] == "user"]
    # The starting harness has no legal_moves: the first request, three distinct explored states as examples.
    examples = [line.strip() for line in request.splitlines() if line.strip().startswith(">>> legal_moves(")]
    assert len(examples) == len(set(examples)) == 3 and "This attempt is wrong" not in request
    assert summary["accepted"] == 2
    best = summary["report"]["best"]
    assert best["mean"] == 1.0 and "legal_moves(cells(parse_grid(current_board(board))))" in run.get_candidate(best["id"]).files["harness.py"]


def scaffold_config(refiner_options: dict | None = None, **critic_options) -> EvolveConfig:
    """evolve-scaffold.yaml's run with the critic_refiner's options changed."""
    raw = yaml.safe_load((EXAMPLE / "evolve-scaffold.yaml").read_text())
    options = raw["proposers"][0]["options"]
    options["refiner_options"].update(refiner_options or {})
    options.update(critic_options)
    raw.update(workspace=str(EXAMPLE), model="scripted:")
    return EvolveConfig.model_validate(raw)


def test_with_body_only_the_request_ends_in_the_functions_head_and_the_body_alone_is_built_in(tmp_path: Path) -> None:
    cfg = scaffold_config({"body_only": True}).model_copy(update={"iterations": 1})
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    model = ScriptedModel(["    return [c for c in cells if c.isdigit()]\n```"])  # the continuation only
    summary = Engine(cfg, run, model, extra={"harness_runtime": InProcessHarness}).execute()
    last = model.calls[0]["messages"][-1]
    assert last["role"] == "assistant" and last["content"].startswith("```python\ndef legal_moves(cells")
    best = summary["report"]["best"]
    assert summary["accepted"] == 2 and best["mean"] == 1.0
    assert "return [c for c in cells if c.isdigit()]" in run.get_candidate(best["id"]).files["harness.py"]


def test_after_two_unusable_replies_for_a_parent_the_fallback_refiner_asks_for_the_whole_harness(tmp_path: Path) -> None:
    cfg = scaffold_config(fallback_refiner="ratchet.autoharness.refine:HarnessRefiner",
                          fallback_refiner_options={"game": "TicTacToe-v0"}).model_copy(update={"iterations": 3})
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    model = ScriptedModel(["I would check the cells.", "Skip the taken cells.", fenced(FIXED)])
    summary = Engine(cfg, run, model, extra={"harness_runtime": InProcessHarness}).execute()
    requests = [next(m["content"] for m in call["messages"] if m["role"] == "user") for call in model.calls]
    assert all(">>> legal_moves(" in r for r in requests[:2]) and ">>> legal_moves(" not in requests[2]
    assert "propose_action" in requests[2]  # the paper's request: the whole harness
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert [e["status"] for e in steps] == ["no_proposal", "no_proposal", "accepted"]
    best = run.get_candidate(summary["report"]["best"]["id"])
    assert best.meta["proposal"]["refiner"] == "fallback" and summary["report"]["best"]["mean"] == 1.0


def test_counterexamples_put_the_states_the_parents_legal_moves_gets_wrong_first_among_the_examples() -> None:
    from ratchet.autoharness.refine import ScaffoldRefiner

    refiner = ScaffoldRefiner("TicTacToe-v0", counterexamples=2)
    refiner.runtime_factory = InProcessHarness  # the shipped one is the sandbox (the engine's runs use it)
    half_right, _ = refiner.new_code("```python\ndef legal_moves(cells):\n    return [c for c in cells if c != 'O']\n```",
                                     refiner.harvest().template)  # free cells, but also the ones X took
    wrong = refiner.wrong_states(half_right)
    assert len(wrong) == 2 and all("X" in board for board, _ in wrong)
    doctests = lambda messages: [l.strip() for l in messages[-1]["content"].splitlines() if l.strip().startswith(">>> legal_moves(")]
    asked = doctests(refiner.request(half_right, [], []))
    plain = doctests(ScaffoldRefiner("TicTacToe-v0").request(half_right, [], []))
    assert len(asked) == 5 and len(plain) == 3 and all("'X'" in d for d in asked[:2]) and asked[2:] == plain
    # a parent without legal_moves (the workspace's harness) gets the first request, no sandbox run
    assert doctests(refiner.request(STARTING, [], [])) == doctests(ScaffoldRefiner("TicTacToe-v0").request(STARTING, [], []))


def test_with_samples_the_best_screened_reply_of_a_step_is_proposed(tmp_path: Path) -> None:
    """samples=3: replies to one request; the refiner's screen (legal_actions against the explored
    states, in the sandbox) ranks them and the right one is the child, though sampled second; no
    third reply is asked for once one screens 1.0 (none could rank higher)."""
    cfg = scaffold_config(samples=3).model_copy(update={"iterations": 1})
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    half = "```python\ndef legal_moves(cells):\n    return [c for c in cells if c != 'O']\n```"
    right = "```python\ndef legal_moves(cells):\n    return [c for c in cells if c not in 'XO']\n```"
    model = ScriptedModel([half, right, half])
    summary = Engine(cfg, run, model, extra={"harness_runtime": InProcessHarness}).execute()
    assert len(model.calls) == 2 and model.calls[0]["messages"] == model.calls[1]["messages"]
    step = next(e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step")
    child = run.get_candidate(step["child"])
    assert "c not in 'XO'" in child.files["harness.py"] and step["status"] == "accepted"
    screened = child.meta["proposal"]["screened"]
    assert screened == [screened[0], 1.0] and screened[0] < 1.0
    assert summary["report"]["best"]["mean"] == 1.0


def test_a_refiner_that_cannot_build_its_request_hands_the_step_to_the_fallback_at_once(tmp_path: Path) -> None:
    """The scaffold's one-function request needs examples from the game's legal lists; where
    exploring finds none (here: no seeds explored; in the table, Bandit) it cannot ask at all, so
    the step's request is the fallback's whole-harness one from the first step, not after two
    failed steps for the same parent (which a selector that spreads its steps may never repeat)."""
    cfg = scaffold_config({"seeds": []}, fallback_refiner="ratchet.autoharness.refine:HarnessRefiner",
                          fallback_refiner_options={"game": "TicTacToe-v0"}).model_copy(update={"iterations": 1})
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    model = ScriptedModel([fenced(FIXED)])
    summary = Engine(cfg, run, model, extra={"harness_runtime": InProcessHarness}).execute()
    [request] = [next(m["content"] for m in call["messages"] if m["role"] == "user") for call in model.calls]
    assert "propose_action" in request and ">>> legal_moves(" not in request  # the whole harness, asked once
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert [e["status"] for e in steps] == ["accepted"]
    best = run.get_candidate(summary["report"]["best"]["id"])
    assert best.meta["proposal"]["refiner"] == "fallback" and summary["report"]["best"]["mean"] == 1.0
