"""The executor config (YAML, overrides, bad values), the default executor, and the evaluation
cache's budget on a pool: the same results and the same stop as one after another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.config import ConfigError, load_config
from ratchet.contracts import BudgetExceeded, Candidate, RatchetError
from ratchet.evolve.cache import EVALS, CachedEvaluator
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.evolve.suites.synthetic import NoisyOptions, NoisySuite
from ratchet.executors import ExecutorConfig, LocalExecutor, build_executor
from ratchet.models import ScriptedModel
from ratchet.store import RunStore


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir(parents=True)
    (ws / "manifest.yaml").write_text("name: noisy\neditable: ['harness.json']\n")
    (ws / "harness.json").write_text(json.dumps({"default": 0.5}))
    return ws


def test_the_executor_loads_from_yaml_and_takes_overrides(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"workspace": str(_workspace(tmp_path)), "suite": {"name": "noisy"},
                                    "executor": {"kind": "ray", "address": "auto"}}))
    cfg = load_config(EvolveConfig, path, ["executor.workers=4", "executor.max_retries=5"])
    assert cfg.executor == ExecutorConfig(kind="ray", address="auto", workers=4, max_retries=5)
    with pytest.raises(ConfigError, match=r"executor\.kind = 'slurm'"):
        load_config(EvolveConfig, path, ["executor.kind=slurm"])
    with pytest.raises(ConfigError, match=r"executor\.retries: unknown key"):
        load_config(EvolveConfig, path, ["executor.retries=5"])


def test_the_default_executor_runs_in_this_process() -> None:
    executor = build_executor(ExecutorConfig())
    assert isinstance(executor, LocalExecutor) and executor.in_process
    assert not build_executor(ExecutorConfig(workers=2)).in_process


@pytest.mark.parametrize("limit", [5, 12])
def test_a_pool_evaluates_like_one_after_another_and_stops_at_the_same_budget(tmp_path: Path, limit: int) -> None:
    suite = NoisySuite(NoisyOptions(tasks=10))
    candidate = Candidate("c1", "harness", {"harness.json": json.dumps({"default": 0.5})})
    kept = {}
    for name, executor in (("inline", None), ("pool", LocalExecutor(2))):
        run = RunStore(tmp_path / name).create_run("evolve", {})
        evaluator = CachedEvaluator(suite, run, executor=executor)

        def charge(n: int, evaluator=evaluator) -> None:
            if evaluator.paid + n > limit:
                raise BudgetExceeded(f"limit {limit}")

        evaluator.on_paid = charge
        try:
            evaluator.evaluate(candidate, suite.tasks(), 0)
            evaluator.evaluate(candidate, suite.tasks(), 1)
        except BudgetExceeded:
            pass
        finally:
            if executor is not None:
                executor.close()
        kept[name] = [(r["task_id"], r["seed"], r["score"]) for r in run.read_jsonl(EVALS)]
        assert evaluator.paid == len(kept[name]) == limit  # the admitted ones ran and were kept, no more
    assert kept["pool"] == kept["inline"]


class NoWayBack:
    """An executor of other processes with no way to serve the driver's model to them."""

    in_process = False

    def map(self, fn, items, **_):
        return map(fn, items)

    def close(self) -> None:
        pass


def test_a_suite_that_calls_the_model_is_refused_on_an_executor_that_cannot_serve_it(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    cfg = EvolveConfig.model_validate({"workspace": str(_workspace(tmp_path)), "model": "scripted:",
                                       "suite": {"name": "slow_suite:ModelSuite"}, "canaries": {"enabled": False}})
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    with pytest.raises(RatchetError, match="calls the model inside its evaluations") as err:
        Engine(cfg, run, ScriptedModel(["0.5"]), executor=NoWayBack())
    assert "--executor local or ray" in str(err.value)
    with LocalExecutor(2) as pool:  # a local pool serves it (tests/executors/test_local_gateway.py)
        Engine(cfg, run, ScriptedModel(["0.5"]), executor=pool)


def test_the_evolve_command_takes_the_executor_flags(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"workspace": str(_workspace(tmp_path)), "suite": {"name": "noisy", "options": {"tasks": 12}},
                                    "iterations": 0, "seeds": [0], "canaries": {"enabled": False},
                                    "static": {"load_entry": False}}))
    root = tmp_path / "runs"
    result = CliRunner().invoke(app, ["evolve", "run", str(path), "--workers", "2", "--root", str(root)])
    assert result.exit_code == 0, result.output
    [run_id] = RunStore(root).run_ids()
    run = RunStore(root).open_run(run_id)
    saved = yaml.safe_load(run.path("evolve/config.yaml").read_text())
    assert saved["executor"]["workers"] == 2 and saved["executor"]["kind"] == "local"
    keys = [(r["candidate"], r["task_id"], r["seed"]) for r in run.read_jsonl(EVALS)]
    assert run.status()["status"] == "done" and len(keys) >= 12 and len(set(keys)) == len(keys)  # each once
    bad = CliRunner().invoke(app, ["evolve", "resume", run_id, "--executor", "slurm", "--root", str(root)])
    assert isinstance(bad.exception, ConfigError) and "executor.kind = 'slurm'" in str(bad.exception)
