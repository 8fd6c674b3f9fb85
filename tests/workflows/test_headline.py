"""The headline comparison with the scripted model: the search runs on the engine from the
humaneval-coder original, the evolved arm's calls set k of best-of-k, each arm's rows are written
as they are graded, a second run redoes nothing, and a searched best-of-k is recognized as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ratchet.contracts import RatchetError
from ratchet.models.scripted import ScriptedModel
from ratchet.store import RunStore
from ratchet.workflows import compile_spec, parse_spec
from ratchet.workflows.headline import (
    ARMS,
    Headline,
    HeadlineConfig,
    arm_summary,
    best_of_k_size,
    best_of_k_spec,
    paired,
    search_config,
)

ORIGINAL = Path(__file__).resolve().parents[2] / "examples" / "humaneval-coder"
SPEC = {"name": "three-and-revise", "steps": [{"op": "sample", "k": 3}, {"op": "strip_tests"},
                                              {"op": "select_by_examples"}, {"op": "revise", "rounds": 1}]}
# HumanEval/0..4's entry points: a right answer for HumanEval/2 (truncate_number), wrong for the rest
RIGHT_2 = "```python\ndef truncate_number(number: float) -> float:\n    return number % 1.0\n```"
WRONG = "```python\ndef f():\n    return None\n```"


def answer(messages) -> str:
    text = messages[0]["content"]
    if "You design a workflow" in text:
        return json.dumps(SPEC)
    return RIGHT_2 if "truncate_number" in messages[-1]["content"] or "truncate_number" in text else WRONG


def config(**extra) -> HeadlineConfig:
    return HeadlineConfig(original=ORIGINAL, model="scripted:", search_ids=["HumanEval/0"],
                          heldin_ids=["HumanEval/1", "HumanEval/3"], test_ids=["HumanEval/2", "HumanEval/4"],
                          iterations=1, proposers=[{"name": "ratchet.workflows.proposers:OperatorProposer"}], **extra)


def test_the_headline_runs_every_arm_and_resumes_without_asking_again(tmp_path) -> None:
    store = RunStore(tmp_path / "runs")
    model = ScriptedModel(answer)
    lines: list[str] = []
    summary = Headline(config(), store, model, progress=lines.append).run()
    arms = summary["arms"]
    assert set(arms) == {"original", "evolved", "best-of-k"} and all(a["n"] == 2 for a in arms.values())
    # The scripted answers pass HumanEval/2 only, whatever the workflow
    assert all(a["passed"] == 1 for a in arms.values()), arms
    assert summary["solved"] == {arm: ["HumanEval/2#0"] for arm in arms}
    # nothing beat the original on held-in (every code fails there): the evolved arm is the original, sampled
    assert summary["evolved"]["is_original"] and summary["evolved"]["best_of_k"] is None
    steps = [e for e in store.open_run("workflow-search").read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert [(e["proposer"], e["status"]) for e in steps] == [("operator", "rejected")]
    [step] = summary["search"]["steps"]  # the step as the report shows it, with the gate's numbers
    assert (step["step"], step["proposer"], step["accepted"]) == (0, "operator", False)
    assert step["candidate"] and step["heldin_gain"] is not None and step["reason"]
    evolved_calls = arms["evolved"]["calls_per_task"]
    assert summary["k"] == max(1, -(-evolved_calls // 1)) and arms["best-of-k"]["calls_per_task"] == summary["k"]
    assert arms["original"]["calls_per_task"] <= 3  # the original at its own settings (evolve.yaml: 3 calls)
    assert arms["original"]["wilson_low"] < 0.5 < arms["original"]["wilson_high"]
    assert summary["paired"]["evolved_vs_best_of_k"] == {"first": "evolved", "second": "best-of-k", "pairs": 2,
                                                          "only_first": 0, "only_second": 0, "mcnemar_p": 1.0}
    run = store.open_run("workflow-search")
    assert len(run.read_jsonl(ARMS)) == 6
    assert (run.path("headline/evolved") / "workflow.py").exists() and (run.path("headline/evolved") / "evolve.yaml").exists()
    assert any(line.startswith("search step") for line in lines) and any(line.startswith("best-of-k HumanEval/4") for line in lines)
    # Resumed: the engine replays its journal, the arms read their rows; the model is not asked again
    asked = len(model.calls)
    resumed = Headline(config(), store, ScriptedModel([]), progress=lines.append)
    again = resumed.run()
    assert again["arms"] == arms and len(model.calls) == asked
    # the wall time is every session's: the first's and the resumed one's
    assert resumed.spent()["sessions"] == 2 and resumed.spent()["wall_s"] > 0


def test_a_killed_arm_is_finished_not_redone(tmp_path) -> None:
    store = RunStore(tmp_path / "runs")
    first = Headline(config(), store, ScriptedModel(answer))
    run = first.open_run()
    best = first.search(run)
    first.score(run, "evolved", best, first.sampled_options.model_copy(update={"ids": ["HumanEval/2"]}))
    assert [r["task"] for r in run.read_jsonl(ARMS)] == ["HumanEval/2"]
    model = ScriptedModel(answer)
    rows = Headline(config(), store, model).score(run, "evolved", best, first.sampled_options)
    assert [r["task"] for r in rows] == ["HumanEval/2", "HumanEval/4"]
    assert all("truncate_number" not in c["messages"][-1]["content"] for c in model.calls)  # HumanEval/2 not rerun


def test_the_test_split_may_not_overlap_the_search() -> None:
    with pytest.raises(RatchetError, match="HumanEval/1"):
        search_config(config().model_copy(update={"test_ids": ["HumanEval/1", "HumanEval/2"]}))


def test_the_search_config_caps_the_operator_proposer_and_can_ask_for_no_more_cost() -> None:
    cfg = search_config(config(cost_gate=True))
    assert cfg.proposers[0].options["max_model_calls"] == cfg.suite.options["workflow"]["max_model_calls"] == 4
    assert cfg.gate.options["cost_metric"] == "model_calls"
    assert "cost_metric" not in search_config(config()).gate.options
    assert cfg.splits.ids == {"search": ["HumanEval/0"], "heldin": ["HumanEval/1", "HumanEval/3"]}
    # the AFlow proposer's whole-file reply gets room for humaneval-coder's workflow.py (1,292 tokens)
    assert cfg.gate.options["correction"] == "none"
    defaults = config().model_copy(update={"proposers": HeadlineConfig.model_fields["proposers"].default_factory()})
    [_, aflow] = search_config(defaults).proposers
    assert aflow.name.endswith(":AflowProposer") and aflow.options == {"max_tokens": 2500}


def test_best_of_k_is_recognized_however_it_is_written() -> None:
    def files(text: str) -> dict[str, str]:
        return compile_spec(parse_spec(text))

    assert best_of_k_size(compile_spec(best_of_k_spec(3))) == 3
    assert best_of_k_size(files("steps: [{op: sample, k: 4}, {op: test_examples}, {op: select_by_examples}]")) == 4
    assert best_of_k_size(files("steps: [{op: sample, k: 2}, {op: select_by_examples}, {op: strip_tests}]")) == 2
    assert best_of_k_size(files("steps: [{op: sample, k: 3}, {op: select_by_examples}, {op: revise}]")) is None
    assert best_of_k_size(files("steps: [{op: sample, k: 3}, {op: vote}]")) is None
    assert best_of_k_size(files("steps: [{op: sample, k: 3}, {op: filter_passing}, {op: select_by_examples}]")) is None
    assert best_of_k_size({"workflow.py": (ORIGINAL / "workflow.py").read_text()}) is None  # hand-written


def test_arm_summary_and_paired_counts() -> None:
    rows = [{"arm": a, "task": t, "seed": 0, "passed": p, "model_calls": c, "tokens": 10 * c, "test_runs": 1}
            for a, t, p, c in [("x", "a", True, 3), ("x", "b", True, 4), ("x", "c", False, 4),
                               ("y", "a", False, 4), ("y", "b", True, 4), ("y", "c", False, 4)]]
    x = arm_summary([r for r in rows if r["arm"] == "x"])
    assert x["passed"] == 2 and x["n"] == 3 and abs(x["calls_per_task"] - 11 / 3) < 1e-9 and x["tokens_per_task"] > 0
    assert paired(rows, "x", "y") == {"first": "x", "second": "y", "pairs": 3, "only_first": 1, "only_second": 0,
                                      "mcnemar_p": 1.0}
    assert paired(rows, "x", "z") is None


def test_the_headline_gate_tests_each_proposal_at_alpha_as_its_field_says() -> None:
    """What ``gate_correction`` says: on 30 held-in problems, one seed, the third test of a run under
    ``spending`` needs 8 flips and no loss; tested each at 0.05, 5."""
    from ratchet.evolve.config import GateOptions
    from ratchet.evolve.gate import PairedGate
    from tests.evolve.test_gate import ctx

    for correction, third in (("spending", 8), ("none", 5)):
        options = GateOptions.model_validate(search_config(config(gate_correction=correction)).gate.options)
        assert PairedGate(options, ctx()).smallest_accepted_flips(30, test_index=3) == third
