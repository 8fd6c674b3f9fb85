"""The headline's second domain with the scripted model: one-player game episodes from
examples/games-workflows, searched with the move menu, every arm scored by episode reward, k of
best-of-k from the evolved arm's calls per move, a second run redoing nothing, and the summary's
numbers recomputed from the rows; the operator proposer driven by the move menu."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from statistics import fmean

import pytest

from ratchet.contracts import Proposal, RatchetError, Skip
from ratchet.models.scripted import ScriptedModel
from ratchet.stats import mcnemar_exact, sign_flip_p, wilson
from ratchet.store import RunStore
from ratchet.workflows.games import episode, game_paired, game_summary
from ratchet.workflows.headline import ARMS, Headline, HeadlineConfig, search_config
from ratchet.workflows.movespec import MOVE_LIBRARIES, compile_move_spec, parse_move_spec
from ratchet.workflows.proposers import OperatorOptions, OperatorProposer, plan_of, spec_grammar
from tests.workflows.test_proposers import Archive, ctx_with

ORIGINAL = Path(__file__).resolve().parents[2] / "examples" / "games-workflows"
SPEC = {"name": "think-vote", "steps": [{"op": "think"}, {"op": "sample", "k": 2}, {"op": "vote"}]}
HISTORY = re.compile(r"\[Player\] \[(\d+)\]\s*\n+\[GAME\] The target number is (higher|lower)")


def player(messages) -> str:
    """A proposer's request gets SPEC; a think request a plan; a move request a binary-search guess
    from the game so far when the plan is in the conversation, else always [10] (which the game
    refuses as a repeat, ending the episode short of the number): so the thinking workflow wins
    where the original and its vote do not."""
    first, last = messages[0]["content"], messages[-1]["content"]
    if "You design a workflow" in first:
        return json.dumps(SPEC)
    if "Think step by step" in last:
        return "Halve what is left."
    if not any("Halve" in m["content"] for m in messages):
        return "[10]"
    low, high = 1, 20
    for guess, hint in HISTORY.findall("\n".join(m["content"] for m in messages)):
        low, high = (max(low, int(guess) + 1), high) if hint == "higher" else (low, min(high, int(guess) - 1))
    return f"[{(low + high) // 2}]"


def config(**extra) -> HeadlineConfig:
    ids = lambda *seeds: [f"GuessTheNumber-v0#{s}" for s in seeds]  # noqa: E731
    return HeadlineConfig(**{"original": ORIGINAL, "domain": "games", "model": "scripted:", "search_ids": ids(20),
                             "heldin_ids": ids(*range(22, 30)), "test_ids": ids(100, 101), "iterations": 1,
                             "proposers": [{"name": "ratchet.workflows.proposers:OperatorProposer"}], **extra})


def test_the_games_search_config_names_the_move_menu_suite_and_libraries() -> None:
    cfg = search_config(config())
    assert cfg.suite.name == "textarena"
    assert cfg.suite.options["games"] == ["GuessTheNumber-v0"]
    assert (cfg.suite.options["first_seed"], cfg.suite.options["episodes"]) == (20, 10)  # spans 20-29; splits pick
    assert cfg.suite.options["workflow"]["libraries"] == MOVE_LIBRARIES
    assert cfg.proposers[0].options == {"max_model_calls": 4, "menu": "ratchet.workflows.movespec:MOVE_MENU"}
    aflow = search_config(config(proposers=[{"name": "ratchet.workflows.proposers:AflowProposer"}])).proposers[0]
    assert aflow.options == {"prompt": "aflow_moves.md"}
    with pytest.raises(RatchetError, match="GuessTheNumber-v0#22"):
        search_config(config(test_ids=["GuessTheNumber-v0#22"]))
    with pytest.raises(RatchetError, match="not a game episode id"):
        episode("GuessTheNumber-v0")
    with pytest.raises(ValueError, match="ratchet.workflows.moveops"):
        config(workflow={"max_model_calls": 4})  # the default libraries: flowops alone


def test_the_games_headline_scores_every_arm_by_reward_and_resumes_without_asking_again(tmp_path) -> None:
    store = RunStore(tmp_path / "runs")
    model = ScriptedModel(player)
    lines: list[str] = []
    summary = Headline(config(), store, model, progress=lines.append).run()
    run = store.open_run("workflow-search")
    rows = run.read_jsonl(ARMS)
    assert len(rows) == 6 and {r["arm"] for r in rows} == {"original", "evolved", "best-of-k"}
    assert all({"reward", "solved", "model_calls", "tokens", "moves", "illegal"} <= set(r) for r in rows)
    # the summary is the rows' numbers
    for arm, a in summary["arms"].items():
        mine = [r for r in rows if r["arm"] == arm]
        assert a["n"] == 2 and a["mean_reward"] == pytest.approx(fmean(r["reward"] for r in mine))
        assert a["solved"] == sum(r["solved"] for r in mine)
        assert (a["wilson_low"], a["wilson_high"]) == pytest.approx(wilson(a["solved"], 2))
        assert a["calls_per_move"] == pytest.approx(sum(r["model_calls"] for r in mine) / sum(r["moves"] for r in mine))
        assert a["reward_low"] <= a["mean_reward"] <= a["reward_high"]
    # the search kept think -> sample 2 -> vote (held-in: binary search beats [10] on the eight episodes)
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert [(e["proposer"], e["status"]) for e in steps] == [("operator", "accepted")]
    assert summary["evolved"]["plan"] == SPEC["steps"] and summary["evolved"]["best_of_k"] is None
    arms = summary["arms"]
    assert arms["evolved"]["solved"] == 2 and arms["evolved"]["mean_reward"] == 1.0
    assert arms["best-of-k"]["solved"] == arms["original"]["solved"] == 0
    assert len(summary["solved"]["evolved"]) == 2 and summary["solved"]["best-of-k"] == summary["solved"]["original"] == []
    evolved = [r for r in rows if r["arm"] == "evolved"]
    k = math.ceil(sum(r["model_calls"] for r in evolved) / sum(r["moves"] for r in evolved) - 1e-9)
    assert summary["k"] == k == 3  # think + 2 samples on every move
    assert arms["best-of-k"]["calls_per_move"] == 3.0  # k samples every move
    assert arms["original"]["calls_per_move"] == 1.0  # its own settings: one greedy call per move
    pair = summary["paired"]["evolved_vs_best_of_k"]
    assert pair["pairs"] == 2 and pair["first_higher"] == 2 and pair["only_first"] == 2
    assert pair["mean_reward_diff"] == pytest.approx(1.0 - arms["best-of-k"]["mean_reward"])
    assert pair["sign_flip_p_first_better"] == 0.25  # two pairs cannot be beyond noise
    assert any(line.startswith("evolved GuessTheNumber-v0#101 seed 0: reward 1.00, solved") for line in lines)
    # Resumed: the engine replays its journal, the arms read their rows; the model is not asked again
    asked = len(model.calls)
    again = Headline(config(), store, ScriptedModel([])).run()
    assert again["arms"] == summary["arms"] and len(model.calls) == asked


def test_the_best_of_k_arm_votes_over_the_originals_move_request(tmp_path) -> None:
    headline = Headline(config(), RunStore(tmp_path / "runs"), ScriptedModel(player))
    files = headline.domain.baseline_files(3, headline.original)
    assert plan_of(files["workflow.py"]) == [{"op": "sample", "k": 3, "max_tokens": 16}, {"op": "vote"}]
    assert headline.original_options.workflow.temperature == 0.0 and headline.original_options.workflow.max_model_calls == 1
    assert headline.sampled_options.workflow.temperature == 0.7 and headline.sampled_options.workflow.libraries == MOVE_LIBRARIES


def test_game_summary_and_paired_statistics_from_rows() -> None:
    def row(arm, task, reward, calls, moves):
        return {"arm": arm, "task": task, "seed": 0, "reward": reward, "solved": reward >= 1.0, "model_calls": calls,
                "tokens": 10 * calls, "moves": moves, "illegal": 0}

    rows = [row("x", "a", 1.0, 6, 3), row("x", "b", 0.5, 4, 2), row("x", "c", 1.0, 2, 1),
            row("y", "a", 0.5, 3, 3), row("y", "b", 0.5, 2, 2), row("y", "c", 0.0, 1, 1)]
    x = game_summary([r for r in rows if r["arm"] == "x"])
    assert x["mean_reward"] == pytest.approx(2.5 / 3) and x["solved"] == 2 and x["calls_per_move"] == 2.0
    assert x["calls_per_episode"] == 4.0 and x["reward_low"] <= x["mean_reward"] <= x["reward_high"] <= 1.0
    p = game_paired(rows, "x", "y")
    # differences 0.5, 0, 1: of the 8 sign flips, those with a mean >= 0.5 are (+,·,+) twice (the zero's sign is free)
    assert p["mean_reward_diff"] == pytest.approx(0.5) and p["sign_flip_p_first_better"] == sign_flip_p([0.5, 0.0, 1.0]) == 0.25
    assert p["sign_flip_p_second_better"] == 1.0 and p["sign_flip_p_two_sided"] == 0.5
    assert (p["only_first"], p["only_second"], p["mcnemar_p"]) == (2, 0, mcnemar_exact(2, 0))
    assert game_paired(rows, "x", "z") is None


def test_the_operator_proposer_drives_the_move_menu(tmp_path) -> None:
    reply = json.dumps({"name": "think-vote", "steps": [{"op": "think"}, {"op": "sample", "k": 2}, {"op": "vote"}]})
    model = ScriptedModel([reply, '{"name": "x", "steps": [{"op": "sample", "k": 2}, {"op": "strip_tests"}]}'])
    archive = Archive()
    parent = archive.add(compile_move_spec(parse_move_spec("[{op: sample, k: 1, max_tokens: 16}]")), score=0.5,
                         **{"GuessTheNumber-v0#20": 1.0, "GuessTheNumber-v0#21": 0.4})
    proposer = OperatorProposer(OperatorOptions(max_model_calls=3, menu="ratchet.workflows.movespec:MOVE_MENU", retries=0),
                                ctx_with(tmp_path, model))
    out = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(out, Proposal)
    prompt = model.calls[0]["messages"][0]["content"]
    assert "plays one-player text games" in prompt and "- avoid_refused:" in prompt and "- strip_tests" not in prompt
    assert "at most 3 model calls per move" in prompt
    assert model.calls[0]["params"]["grammar"] == spec_grammar(3, proposer.menu)
    first = next(line for line in model.calls[0]["params"]["grammar"].splitlines() if line.startswith("first ::= "))
    assert '\\"op\\": \\"think\\"' in first and '\\"op\\": \\"vote\\"' not in first  # a plan starts with think or sample
    assert plan_of(out.files["workflow.py"]) == [{"op": "think"}, {"op": "sample", "k": 2}, {"op": "vote"}]
    assert "from moveops import run_move_plan" in out.files["workflow.py"] and out.meta["max_model_calls"] == 3
    skipped = proposer.propose(parent, archive, random.Random(0))  # a code op is not on the move menu
    assert isinstance(skipped, Skip) and "unknown op 'strip_tests'" in skipped.reason
    with pytest.raises(RatchetError, match="not a Menu"):
        OperatorProposer(OperatorOptions(menu="ratchet.workflows.movespec:MOVE_OPS"), ctx_with(tmp_path, model))
