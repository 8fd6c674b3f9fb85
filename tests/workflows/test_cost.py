"""Cost on the same footing as score: per-task model calls and tokens in the jsonl and textarena
suites (as in HumanEval's), the score-vs-cost frontier, and the gate's "no more cost" option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ratchet.contracts import Candidate
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.suites.config import JsonlOptions, TextArenaOptions
from ratchet.evolve.suites.jsonl import JsonlSuite
from ratchet.evolve.suites.textarena import TextArenaSuite
from ratchet.models.request import estimate_tokens, prompt_text
from ratchet.models.scripted import ScriptedModel

WORKSPACE = Path(__file__).resolve().parents[2] / "examples" / "humaneval-coder"
#: Asks the model once per turn and answers its reply.
ASKING = ("def step(state):\n"
          "    if not state['events']:\n"
          "        text = state['task'].get('prompt') or state['task'].get('observation')\n"
          "        return {'call_model': [{'role': 'user', 'content': text}]}\n"
          "    return {'answer': state['events'][-1]['reply']}\n")


def spent(model: ScriptedModel, replies: list[str]) -> int:
    """The tokens the scripted model reported: prompt and reply of each call."""
    return sum(estimate_tokens(prompt_text(c["messages"])) + estimate_tokens(r) for c, r in zip(model.calls, replies))


def test_jsonl_suite_records_calls_and_tokens_per_task(tmp_path) -> None:
    row = {"id": "echo", "prompt": "Say yes.", "metadata": {"kind": "text"},
           "verifier": {"command": ["{python}", "-c", "import sys; sys.exit(open('answer.txt').read().strip() != 'yes')"]}}
    (tmp_path / "suite.jsonl").write_text(json.dumps(row) + "\n")
    model = ScriptedModel(["yes"])
    suite = JsonlSuite(JsonlOptions(path="suite.jsonl"), EngineContext(load_manifest(WORKSPACE), tmp_path, model=model))
    [result] = suite.evaluate(Candidate.from_files("t", {"workflow.py": ASKING}), suite.tasks(), 0)
    assert result.score == 1.0
    assert result.metrics["model_calls"] == 1 and result.metrics["tokens"] == spent(model, ["yes"]) > 0


def test_textarena_suite_records_calls_and_tokens_per_task() -> None:
    pytest.importorskip("textarena")
    replies = ["[A C]", "[A B]", "[C B]", "[A C]", "[B A]", "[B C]", "[A C]"]
    model = ScriptedModel(replies)
    suite = TextArenaSuite(TextArenaOptions(games=["TowerOfHanoi-v0"], episodes=1),
                           EngineContext(load_manifest(WORKSPACE), WORKSPACE, model=model))
    [result] = suite.evaluate(Candidate.from_files("t", {"workflow.py": ASKING}), suite.tasks(), 0)
    assert result.score == 1.0 and result.metrics["model_calls"] == 7.0
    assert result.metrics["tokens"] == spent(model, replies) > 0


def held_in(scores: list[float], calls: float) -> list:
    from ratchet.contracts import TaskResult

    return [TaskResult(f"t{i}", 0, s, metrics={"model_calls": calls}) for i, s in enumerate(scores)]


def gate(tmp_path, **options):
    from ratchet.evolve.config import GateOptions
    from ratchet.evolve.gate import PairedGate
    from ratchet.evolve.manifest import Manifest

    return PairedGate(GateOptions(correction="none", resamples=500, **options),
                      EngineContext(Manifest(name="wf", editable=["workflow.py"]), tmp_path))


def test_gate_can_ask_for_better_at_no_more_cost_per_task(tmp_path) -> None:
    parent, better = held_in([0.0] * 12, 4.0), [0.0] * 2 + [1.0] * 10
    costlier, same = {"heldin": held_in(better, 5.0)}, {"heldin": held_in(better, 4.0)}
    assert gate(tmp_path).decide({"heldin": parent}, costlier, {}).accepted  # score only: the default
    refused = gate(tmp_path, cost_metric="model_calls").decide({"heldin": parent}, costlier, {})
    assert not refused.accepted and "costs more per task: model_calls 5.00 > parent's 4.00" in refused.reason
    assert refused.numbers["cost_child"] == 5.0 and refused.numbers["cost_parent"] == 4.0
    assert gate(tmp_path, cost_metric="model_calls").decide({"heldin": parent}, same, {}).accepted
    assert gate(tmp_path, cost_metric="model_calls", cost_tolerance=0.25).decide({"heldin": parent}, costlier, {}).accepted
    missing = gate(tmp_path, cost_metric="tokens").decide({"heldin": parent}, same, {})
    assert not missing.accepted and "records the cost metric 'tokens'" in missing.reason


def test_frontier_keeps_the_points_no_other_beats_on_score_and_cost() -> None:
    from ratchet.evolve.report_tables import frontier

    points = {"cheap": (0.4, 1.0), "dear": (0.6, 4.0), "worse": (0.4, 2.0), "tie": (0.6, 4.0), "mid": (0.5, 2.0)}
    assert frontier(points) == {"cheap", "dear", "tie", "mid"}


def test_frontier_table_shows_score_calls_and_tokens_per_candidate(tmp_path) -> None:
    from ratchet.contracts import TaskResult
    from ratchet.evolve.archive import Archive
    from ratchet.evolve.report_tables import frontier_table
    from ratchet.store import RunStore

    run = RunStore(tmp_path).create_run("evolve", {}, run_id="r")
    cheap = Candidate.from_files("wf", {"workflow.py": "1"})
    dear = Candidate.from_files("wf", {"workflow.py": "4"}, parent_id=cheap.id)
    waste = Candidate.from_files("wf", {"workflow.py": "5"}, parent_id=cheap.id)
    for c, score, calls in ((cheap, 0.5, 1.0), (dear, 1.0, 4.0), (waste, 0.5, 5.0)):
        Archive(run).add(c, "accepted")
        Archive(run).record_results(c.id, "heldin", [TaskResult(t, 0, score, metrics={"model_calls": calls, "tokens": 100 * calls})
                                                     for t in ("a", "b")])
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[3:] for line in frontier_table(run)[2:]}
    assert rows[cheap.id[:12]] == ["0.500", "1.0", "100.0", "yes |"]
    assert rows[dear.id[:12]] == ["1.000", "4.0", "400.0", "yes |"]
    assert rows[waste.id[:12]] == ["0.500", "5.0", "500.0", " |"]


def test_the_report_markdown_draws_the_frontier_when_the_suite_records_cost(tmp_path) -> None:
    from ratchet.contracts import TaskResult
    from ratchet.evolve.archive import Archive
    from ratchet.evolve.report_tables import report_markdown
    from ratchet.store import RunStore

    def arm(mean: float) -> dict:
        return {"mean": mean, "low": mean - 0.1, "high": mean + 0.1}

    store = RunStore(tmp_path)
    run = store.create_run("evolve", {}, run_id="r")
    cheap = Candidate.from_files("wf", {"workflow.py": "1"})
    dear = Candidate.from_files("wf", {"workflow.py": "4"}, parent_id=cheap.id)
    for c, score, calls in ((cheap, 0.5, 1.0), (dear, 1.0, 4.0)):
        Archive(run).add(c, "accepted")
        Archive(run).record_results(c.id, "heldin", [TaskResult("a", 0, score, metrics={"model_calls": calls})])
    report = {"split": "test", "tasks": 1, "stop_reason": "iterations", "original": {"id": cheap.id, **arm(0.5)},
              "best": {"id": dear.id, **arm(1.0)}, "original_best_of_n": {"attempts": 1, **arm(0.5)},
              "comparison": {"best_minus_original": arm(0.5), "best_minus_best_of_n": arm(0.5)}}
    text = report_markdown(run, report)
    assert "## Score vs cost per task (held-in)" in text
    assert f"| {dear.id[:12]} | original | accepted | 1.000 | 4.0 | – | yes |" in text
    assert f"| {cheap.id[:12]} | original | accepted | 0.500 | 1.0 | – | yes |" in text
    assert "## Candidates" in text and "## Steps" in text and "best - original: 0.500" in text

    plain = store.create_run("evolve", {}, run_id="p")  # a suite that records no cost: no frontier section
    Archive(plain).add(cheap, "accepted")
    Archive(plain).record_results(cheap.id, "heldin", [TaskResult("a", 0, 0.5)])
    assert "Score vs cost" not in report_markdown(plain, report)
    assert "were not scored here" in report_markdown(plain, {**report, "tasks": 0})
