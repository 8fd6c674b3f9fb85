"""The final report's best-of-N arm on a suite that calls the model: its extra attempts are sampled.

A double of the model answers every problem wrongly when decoding is greedy, and with the
problem's canonical solution when it samples with an odd evaluation seed. The original therefore
fails every test problem; given the search's budget as N sampled attempts it solves them, and
with sampling turned off (``best_of_n_temperature: null``) the arm falls back to the original.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ratchet.contracts import Completion, Usage
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.evolve.report import BEST_OF_N_SEED, final_report, paired_comparison
from ratchet.evolve.suites.humaneval import package_data_file, read_problems
from ratchet.store import RunStore

WORKSPACE = Path(__file__).resolve().parents[2] / "examples" / "humaneval-coder"
SPLITS = {"search": ["HumanEval/0"], "heldin": ["HumanEval/2", "HumanEval/3"],
          "test": ["HumanEval/4", "HumanEval/7"]}


class RightOnlyWhenSampled:
    """Greedy: a wrong answer; sampled with an odd evaluation seed: the canonical solution."""

    name = "sampling-double"

    def __init__(self) -> None:
        self.problems = {p["entry_point"]: p for p in read_problems(package_data_file())}
        self.calls: list[dict[str, Any]] = []

    def complete(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        self.calls.append(params)
        entry = next(name for name in re.findall(r"def (\w+)\(", messages[1]["content"]) if name in self.problems)
        problem = self.problems[entry]
        # The workflow seeds call k of a task evaluated at seed s with s * 1000 + k.
        sampled_odd = params.get("temperature", 0.0) > 0 and (params["seed"] // 1000) % 2 == 1
        code = problem["prompt"] + problem["canonical_solution"] if sampled_odd else f"def {entry}(*args):\n    return None\n"
        return Completion(f"```python\n{code}```", Usage(10, 10), 0.0, self.name, "stop")

    async def acomplete(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        return self.complete(messages, **params)


def config(temperature: float | None) -> EvolveConfig:
    """No search (iterations 0): the report alone, on HumanEval problems that call the model."""
    return EvolveConfig.model_validate({
        "workspace": str(WORKSPACE),
        "suite": {"name": "humaneval", "options": {
            "ids": [i for ids in SPLITS.values() for i in ids], "grade_timeout_s": 5,
            "workflow": {"max_model_calls": 2, "max_test_runs": 2, "temperature": 0.0}}},
        "splits": {"search": 0, "heldin": 0, "heldout": 0, "test": 0, "ids": SPLITS},
        "seeds": [0],
        "proposers": [{"name": "noop"}],
        "iterations": 0,
        "report": {"best_of_n_temperature": temperature, "max_best_of_n": 4, "bootstrap": 200},
    })


def run_report(tmp_path: Path, temperature: float | None) -> tuple[dict[str, Any], RightOnlyWhenSampled]:
    cfg = config(temperature)
    model = RightOnlyWhenSampled()
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    summary = Engine(cfg, run, model).execute()
    return summary["report"], model


def test_best_of_n_samples_its_extra_attempts_each_with_its_own_seed(tmp_path: Path) -> None:
    report, model = run_report(tmp_path, 0.7)
    arm = report["original_best_of_n"]
    # 3 search/held-in problems at 2 calls each were spent; one pass over the 2 test problems costs 4
    assert arm["budget_unit"] == "model calls" and arm["search_spend"] == 6 and arm["attempts"] == 2
    assert arm["pass_cost"] == 4 and arm["uncapped_attempts"] == 2
    assert arm["temperature"] == 0.7 and arm["attempt_seeds"] == [0, BEST_OF_N_SEED + 1]
    assert report["original"]["mean"] == 0.0 and report["best"]["mean"] == 0.0
    assert arm["mean"] == 1.0  # every test problem solved by the sampled attempt
    assert arm["distinct_attempts"] == 2
    assert report["comparison"]["best_minus_best_of_n"]["mean"] == -1.0
    sampled = [c for c in model.calls if c["temperature"] == 0.7]
    assert sampled and {c["seed"] // 1000 for c in sampled} == {BEST_OF_N_SEED + 1}
    # the greedy evaluations (search, held-in, the original on test) stayed greedy
    assert all(c["temperature"] == 0.0 for c in model.calls if c["seed"] // 1000 == 0)


@pytest.mark.parametrize("temperature", [None, 0.0])
def test_best_of_n_without_sampling_repeats_the_original(tmp_path: Path, temperature: float | None) -> None:
    report, model = run_report(tmp_path, temperature)
    arm = report["original_best_of_n"]
    assert arm["attempts"] == 2 and arm["temperature"] == 0.0 and arm["mean"] == report["original"]["mean"] == 0.0
    assert arm["distinct_attempts"] == 1  # greedy: two attempts, one sample, and the report says so
    assert all(c["temperature"] == 0.0 for c in model.calls)


def test_best_of_n_counts_model_calls_when_the_originals_pass_is_cached(tmp_path: Path) -> None:
    """A report made again (as after a resume) finds the original's test pass in the cache, paying
    no call for it; the pass's cost comes from the journal, so the unit stays model calls."""
    cfg = config(0.7)
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    engine = Engine(cfg, run, RightOnlyWhenSampled())
    first = engine.execute()["report"]["original_best_of_n"]
    again = final_report(engine)["original_best_of_n"]
    assert first["budget_unit"] == again["budget_unit"] == "model calls"
    assert again["attempts"] >= first["attempts"] > 1


def test_paired_comparison_pools_shared_seeds_and_tests_with_the_gates_sign_flips() -> None:
    rows = [{"candidate": c, "task": t, "seed": s, "score": v} for c, t, s, v in [
        ("orig", "t1", 0, 0.0), ("new", "t1", 0, 1.0),
        ("orig", "t2", 0, 0.0), ("orig", "t2", 1, 0.0), ("new", "t2", 0, 1.0), ("new", "t2", 1, 1.0),
        ("orig", "t3", 0, 1.0), ("new", "t3", 0, 0.0),
        ("new", "t3", 5, 1.0),    # a seed the original did not run: left out
        ("new", "t4", 0, 1.0),    # a task the original did not run: left out
    ]]
    c = paired_comparison(rows, "new", "orig")
    # Differences +1, +1, -1: 4 of the 8 sign assignments reach a mean of 1/3 (counted by hand).
    assert c == {"tasks": 3, "mean_difference": pytest.approx(1 / 3), "better": 2, "worse": 1, "p_value": 0.5,
                 "exact": True, "resamples": 20_000}
    assert paired_comparison(rows, "orig", "elsewhere") is None
