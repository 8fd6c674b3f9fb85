"""The seeds bench: one ``ratchet.api.synthesize_harness`` call per run, on the engine, its library
the run's own, rows keyed by path (the removed search's rows stay beside the engine's as history),
and the first call at h = 1 read from the engine's events."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench/ is a package of the checkout

import bench.autoharness_seeds as seeds  # noqa: E402
from ratchet.api import HarnessResult  # noqa: E402


def _engine_run(run_dir: Path, steps: list[tuple[int, float]], proposers: list[str] | None = None) -> None:
    (run_dir / "evolve").mkdir(parents=True)
    events = [{"kind": "original", "heldin": 0.5}]
    events += [{"kind": "step", "model_calls": calls, "best": best, "proposer": p}
               for (calls, best), p in zip(steps, proposers or ["harness_refiner"] * len(steps))]
    (run_dir / "evolve" / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_first_solved_counts_the_engines_calls_up_to_the_first_step_at_one(tmp_path):
    _engine_run(tmp_path / "a", [(4, 0.5), (0, 0.6), (4, 1.0), (4, 1.0)], proposers=["refiner", "rules", "critic", "x"])
    _engine_run(tmp_path / "b", [(4, 0.5), (4, 0.9)])
    assert seeds.first_solved(tmp_path / "a") == (8, "critic")
    assert seeds.first_solved(tmp_path / "b") == (None, None)


def test_summary_gives_wilson_intervals_per_path_and_configuration():
    rows = [{"path": "engine", "config": "default", "best_h": 1.0, "calls": 0}] * 10
    rows += [{"path": "search", "config": "default", "best_h": h, "calls": c} for h, c in ((1.0, 4), (0.5, 24))]
    table = {(s["path"], s["config"]): s for s in seeds.summary(rows)}
    engine, search = table[("engine", "default")], table[("search", "default")]
    assert (engine["solved"], engine["n"], engine["mean_calls"]) == (10, 10, 0.0)
    assert engine["wilson95"][1] == 1.0 and 0.6 < engine["wilson95"][0] < 0.75  # 10/10: about 0.72-1.0
    assert (search["solved"], search["n"], search["mean_calls"]) == (1, 2, 14.0)
    assert search["wilson95"][0] < 0.5 < search["wilson95"][1]


def test_main_runs_each_seed_through_the_api_on_the_engine_and_keeps_the_search_rows(tmp_path, monkeypatch):
    calls = []

    def synthesize(*, config, protocol, store, threads):
        calls.append({"seed": config.rng_seed, "induce": config.ideas.induce,
                      "library": config.library_dir, "protocol": protocol, "max_calls": config.budget.max_calls})
        run_dir = Path(store) / f"run-{config.rng_seed}"
        _engine_run(run_dir, [(4, 1.0 if config.rng_seed else 0.5)])
        report = {"search": {"best_h": 1.0 if config.rng_seed else 0.5, "llm_calls": 4, "tokens": 10,
                             "stop_reason": "done"},
                  "harness_alone": {"legal_rate": 1.0, "verifier_accuracy": 0.9}, "wall_s": 1.0, "run_id": run_dir.name}
        return HarnessResult(run_dir.name, run_dir, report)

    monkeypatch.setattr("ratchet.api.synthesize_harness", synthesize)
    # a row of the removed search, from before the path column: history, kept as it is
    old = {"rows": [{"config": "no_induce", "seed": 0, "best_h": 1.0, "calls": 4, "calls_to_h1": 4, "wall_s": 9.0,
                     "stop": "solved", "heldout_legal_rate": 1.0, "heldout_verifier_accuracy": 1.0, "run": "old",
                     "solved_by": "library or induced rules"}]}
    (tmp_path / "seeds.json").write_text(json.dumps(old))
    (tmp_path / "seeds.notes.md").write_text("## Earlier runs\n")
    argv = ["--configs", "no_induce", "--seeds", "0", "1", "--name", "seeds", "--out", str(tmp_path),
            "--store", str(tmp_path / "store"), "--resume", "--max-calls", "24"]
    assert seeds.main(argv) == 0
    assert [c["seed"] for c in calls] == [0, 1]
    assert all(c["induce"] is False and c["protocol"] == "none" and c["max_calls"] == 24 for c in calls)
    assert calls[0]["library"] != calls[1]["library"]  # each run its own library: no seed starts from another's harness
    data = json.loads((tmp_path / "seeds.json").read_text())
    assert [(r["path"], r["seed"]) for r in data["rows"]] == [("search", 0), ("engine", 0), ("engine", 1)]
    assert [(r["calls_to_h1"], r["solved_by"]) for r in data["rows"][1:]] == [(None, None), (4, "harness_refiner")]
    assert data["rows"][0]["solved_by"] == "library or induced rules"
    assert {(s["path"], s["solved"], s["n"]) for s in data["summary"]} == {("search", 1, 1), ("engine", 1, 2)}
    assert "load" in data["rows"][1] and "load_avg_1min_range" in data["machine"]
    md = (tmp_path / "seeds.md").read_text()
    assert "| engine | no_induce | 1/2 |" in md and md.rstrip().endswith("## Earlier runs")

    assert seeds.main(argv) == 0 and len(calls) == 2  # resumed: every engine row is there already
    with pytest.raises(SystemExit) as refused:  # the dedicated search is no path to run any more
        seeds.main([*argv, "--path", "search"])
    assert refused.value.code == 2 and len(calls) == 2
