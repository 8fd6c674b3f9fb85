"""bench.workflow_search: its splits keep the test problems apart from every development split, and
its plumbing runs end to end with the scripted model, writing the table through the writer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench/ is a package of the checkout, not of the installed distribution

from bench import _setup, workflow_search
from bench._results import write_json, write_markdown


def test_the_test_split_is_untouched_by_every_development_split() -> None:
    full = workflow_search.SIZES["full"]
    test = set(full["test_ids"])
    assert len(test) >= 80 and len(test) == len(full["test_ids"])
    developed = {i for ids in _setup.SPLITS.values() for i in ids} | {f"HumanEval/{i}" for i in range(20)}
    developed |= set(full["search_ids"]) | set(full["heldin_ids"])
    for example in (ROOT / "examples" / "humaneval-workflows").glob("*/evolve.yaml"):
        import yaml

        options = yaml.safe_load(example.read_text())["suite"]["options"]
        assert "limit" not in options, example  # a limit would name the file's first problems
        developed |= set(options["ids"])
    assert test.isdisjoint(developed)
    small = workflow_search.SIZES["small"]
    assert set(small["test_ids"]) <= test and set(small["search_ids"]) <= set(full["search_ids"])


def test_the_bench_runs_with_the_scripted_model_and_writes_its_table(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(workflow_search, "write_json", lambda name, data, **kw: write_json(name, data, out=tmp_path, **kw))
    monkeypatch.setattr(workflow_search, "write_markdown", lambda name, text: write_markdown(name, text, out=tmp_path))
    assert workflow_search.main(["--size", "small", "--model", "scripted:", "--store", str(tmp_path / "runs"),
                                 "--out", "plumbing", "--threads", "1"]) == 0
    data = json.loads((tmp_path / "plumbing.json").read_text())
    assert set(data["arms"]) == {"original", "evolved", "best-of-k"} and all(a["n"] == 5 for a in data["arms"].values())
    text = (tmp_path / "plumbing.md").read_text()
    assert "SMOKE, not a result" in text and "| original (humaneval-coder, greedy) |" in text
    assert "evolved vs best-of-k on 5 (problem, seed) pairs" in text and "The search accepted nothing" in text
    assert "| step | proposer | aimed at | held-in gain | p | verdict |" in text and "\n| 0 | " in text


def test_the_games_test_episodes_are_untouched_by_the_search_and_the_examples() -> None:
    import yaml

    full = workflow_search.GAME_SIZES["full"]
    test = set(full["test_ids"])
    assert len(test) == len(full["test_ids"]) == 80
    developed = set(full["search_ids"]) | set(full["heldin_ids"])
    developed |= {f"GuessTheNumber-v0#{s}" for s in range(18)}  # examples/guess-the-number's seeds
    example = yaml.safe_load((ROOT / "examples" / "games-workflows" / "evolve.yaml").read_text())
    developed |= {i for ids in example["splits"]["ids"].values() for i in ids}
    assert test.isdisjoint(developed)
    assert set(example["splits"]["ids"]["search"]) == set(full["search_ids"])
    assert set(example["splits"]["ids"]["heldin"]) == set(full["heldin_ids"])
    small = workflow_search.GAME_SIZES["small"]
    assert set(small["test_ids"]) <= test and set(small["heldin_ids"]) <= set(full["heldin_ids"])
    # wide: the same search and test episodes, held-in twice as many, none of them a test episode
    wide = workflow_search.GAME_SIZES["wide"]
    assert wide["search_ids"] == full["search_ids"] and wide["test_ids"] == full["test_ids"]
    assert set(full["heldin_ids"]) < set(wide["heldin_ids"]) and len(wide["heldin_ids"]) == 48
    assert test.isdisjoint(wide["heldin_ids"]) and not set(wide["heldin_ids"]) & set(wide["search_ids"])


def test_a_games_only_size_asked_for_humaneval_is_a_clear_error(capsys) -> None:
    with pytest.raises(SystemExit):
        workflow_search.main(["--size", "wide", "--model", "scripted:"])
    assert "--size wide is for --domain games only" in capsys.readouterr().err


def test_the_games_bench_runs_with_the_scripted_model_and_writes_its_table(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(workflow_search, "write_json", lambda name, data, **kw: write_json(name, data, out=tmp_path, **kw))
    monkeypatch.setattr(workflow_search, "write_markdown", lambda name, text: write_markdown(name, text, out=tmp_path))
    assert workflow_search.main(["--domain", "games", "--size", "small", "--model", "scripted:", "--store",
                                 str(tmp_path / "runs"), "--out", "plumbing", "--threads", "1"]) == 0
    data = json.loads((tmp_path / "plumbing.json").read_text())
    assert data["run"] == "workflow-search-games-small" and data["config"]["domain"] == "games"
    assert set(data["arms"]) == {"original", "evolved", "best-of-k"} and all(a["n"] == 4 for a in data["arms"].values())
    text = (tmp_path / "plumbing.md").read_text()
    assert "one-player games" in text and "SMOKE, not a result" in text
    assert "| original (games-workflows, greedy, 1 call/move) |" in text and "evolved vs best-of-k on 4 episodes" in text
