"""Score and cost of these workflows on HumanEval problems, per task, through the engine's suite.

    python examples/humaneval-workflows/measure.py --ids HumanEval/100 HumanEval/101 HumanEval/102 \\
        --out examples/humaneval-workflows/results/smoke-0.5b.json

Each workspace runs under its own evolve.yaml's suite options (call caps, temperature); each row is
one task: pass, model calls, tokens, test runs. The summary gives the pass count and the mean calls
and tokens per task, the two axes of a score-vs-cost comparison. The file is written atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from ratchet.config import load_config
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.suites.config import HumanEvalOptions
from ratchet.evolve.suites.humaneval import HumanEvalSuite
from ratchet.evolve.workspace import snapshot
from ratchet.models.spec import load_model

HERE = Path(__file__).resolve().parent


def measure(workspace: Path, ids: list[str], seeds: list[int], model) -> dict:
    config = load_config(EvolveConfig, workspace / "evolve.yaml")
    options = HumanEvalOptions.model_validate({**config.suite.options, "limit": None, "ids": ids})
    suite = HumanEvalSuite(options, EngineContext(load_manifest(workspace), workspace, model=model))
    candidate = snapshot(workspace, load_manifest(workspace))
    rows = []
    for seed in seeds:
        start = time.perf_counter()
        for result in suite.evaluate(candidate, suite.tasks(), seed):
            rows.append({"task": result.task_id, "seed": seed, "passed": result.score == 1.0,
                         **{k: result.metrics.get(k) for k in ("model_calls", "tokens", "test_runs")},
                         "failures": [f.kind for f in result.failures]})
        print(f"{workspace.name} seed {seed}: {time.perf_counter() - start:.0f}s", flush=True)
    n = len(rows)
    return {"workspace": workspace.name, "suite_options": options.model_dump(), "tasks": rows,
            "passed": sum(r["passed"] for r in rows), "runs": n,
            "calls_per_task": sum(r["model_calls"] for r in rows) / n,
            "tokens_per_task": sum(r["tokens"] for r in rows) / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", nargs="+", default=["best-of-k", "sample-revise-vote"])
    parser.add_argument("--ids", nargs="+", required=True, help="HumanEval problem ids")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    model = load_model(args.model, threads=args.threads)
    report = {"model": args.model, "ids": args.ids, "seeds": args.seeds,
              "workflows": [measure(HERE / name, args.ids, args.seeds, model) for name in args.workspaces]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, args.out)
    for w in report["workflows"]:
        print(f"{w['workspace']}: {w['passed']}/{w['runs']} passed, {w['calls_per_task']:.2f} calls/task, "
              f"{w['tokens_per_task']:.0f} tokens/task")


if __name__ == "__main__":
    main()
