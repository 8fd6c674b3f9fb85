"""bench/context_playbook.py end to end with scripted models, and how a resumed run keeps its settings."""

import argparse

import pytest

import bench.context_playbook as bench
from ratchet.store import RunStore


def _args(**kw):
    base = {"suite": None, "model": "m", "learner_model": None, "offset": 0, "train": None, "test": None, "best_of": 2,
            "sampling_temperature": 0.7, "arms": None, "out": None}
    return argparse.Namespace(**{**base, **kw})


def test_a_run_made_before_suites_and_arms_resumes_as_humaneval_with_its_one_arm():
    args = _args(suite="coding", train=3, model="other")
    stored = {"model": "local:qwen2.5-coder-0.5b", "learner_model": "local:qwen2.5-coder-1.5b", "offset": 0,
              "train": 40, "test": 40, "best_of": 2, "sampling_temperature": 0.7}  # no suite, no arms
    bench.settle(args, stored)
    assert (args.suite, args.arms, args.train, args.model) == ("humaneval", "ratchet", 40, "local:qwen2.5-coder-0.5b")
    assert args.out == "context_playbook_humaneval"  # the committed results' name
    args = _args()
    bench.settle(args, stored, ["ratchet", "ace-add-only"])  # arms added when it was resumed before
    assert args.arms == "ratchet,ace-add-only"


def test_a_new_run_defaults_to_humaneval_and_both_learner_arms():
    args = _args()
    bench.settle(args, None)
    assert (args.suite, args.arms) == ("humaneval", "ratchet,ace-add-only")
    args = _args(suite="guess-the-number", arms="ace-add-only")
    bench.settle(args, None)
    assert (args.arms, args.out) == ("ace-add-only", "context_playbook_guess_the_number")


def test_bench_runs_both_arms_and_records_sizes(tmp_path, monkeypatch):
    written = {}
    monkeypatch.setattr(bench, "write_json", lambda name, data: written.update(json=(name, data)))
    monkeypatch.setattr(bench, "write_markdown", lambda name, text: written.update(md=(name, text)))
    argv = ["--suite", "guess-the-number", "--model", "scripted:", "--store", str(tmp_path / "runs"),
            "--train", "1", "--test", "1", "--best-of", "1", "--phases", "empty,online,best-of"]
    assert bench.main(argv) == 0
    name, report = written["json"]
    assert name == "context_playbook_guess_the_number" and report["suite"] == "guess-the-number"
    assert set(report["rows"]) >= {"test-empty", "test-online", "test-ace-add-only-online", "test-best-of-1 (oracle)"}
    assert report["rows"]["test-empty"]["n"] == 1
    # the echoing scripted learner writes no usable lesson: one learning step each, an empty playbook
    assert [s["items"] for s in report["playbook_sizes"]["ace-add-only-online"]] == [0]
    assert "| ace-add-only-online | 1 | 0 | 0 |" in written["md"][1]
    store = RunStore(tmp_path / "runs")
    [run_id] = store.run_ids()
    run = store.open_run(run_id)
    assert run.config["suite"] == "guess-the-number" and run.config["arms"] == ["ratchet", "ace-add-only"]
    assert run.config["test_ids"] == ["GuessTheNumber-v0#10"]


def test_unknown_arm_stops_with_the_known_ones(tmp_path):
    with pytest.raises(SystemExit):
        bench.parse(["--store", str(tmp_path), "--arms", "ratchet,nope"])


def test_the_bench_gates_an_offline_playbook_and_its_table_says_so(tmp_path, monkeypatch):
    """GuessTheNumber's config puts every seed in train or test: the gate has no held-in task, refuses,
    and the table marks the offline test row as run without a playbook."""
    written = {}
    monkeypatch.setattr(bench, "write_json", lambda name, data: written.update(json=(name, data)))
    monkeypatch.setattr(bench, "write_markdown", lambda name, text: written.update(md=(name, text)))
    argv = ["--suite", "guess-the-number", "--model", "scripted:", "--store", str(tmp_path / "runs"),
            "--train", "1", "--test", "1", "--best-of", "0", "--phases", "empty,offline", "--arms", "ratchet"]
    assert bench.main(argv) == 0
    report = written["json"][1]
    assert report["gate"]["offline"]["kept"] is False and report["gate"]["offline"]["heldin"] == []
    assert report["gate"]["offline"]["reason"] == "no paired held-in results"
    md = written["md"][1]
    assert "| test-offline (gate refused: no playbook) |" in md and "**refused**" in md
    [run_id] = RunStore(tmp_path / "runs").run_ids()
    assert RunStore(tmp_path / "runs").open_run(run_id).config["gate"] is True
