"""HumanEval pass@1 of the starting humaneval-coder harness vs a single-call harness, same model.

Both harnesses run through the engine's ``humaneval`` suite (workflow and grading in the sandbox)
on the same first N problems, with the same embedded model, greedy decoding and seed. The
single-call baseline is the same system prompt and request, answered with the first reply's code
(no examples run, no repair), so the ratio is what generate -> run the visible examples -> repair
adds before any evolution. Model calls and tokens are counted by the budget accountant.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from ratchet.contracts import Candidate
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.suites.config import HumanEvalOptions, WorkflowOptions
from ratchet.evolve.suites.humaneval import HumanEvalSuite
from ratchet.models.budget import AccountedModel, Accountant

RESULTS = Path(__file__).resolve().parent / "results"
WORKSPACE = Path(__file__).resolve().parents[1] / "examples" / "humaneval-coder"

#: The baseline's workflow: the starting harness's own request, answered with the first reply.
SINGLE_CALL = '''
from workflow_base import generate_prompt, solution


def step(state):
    task, events = state["task"], state["events"]
    if not events:
        return {"call_model": [{"role": "system", "content": state["files"].get("prompts/system.md", "")},
                               {"role": "user", "content": generate_prompt(task)}]}
    return {"answer": solution(events[-1]["reply"], task) or ""}
'''


def workspace_files() -> dict[str, str]:
    manifest = load_manifest(WORKSPACE)
    return {str(p.relative_to(WORKSPACE)): p.read_text() for p in sorted(WORKSPACE.rglob("*"))
            if p.is_file() and manifest.is_editable(str(p.relative_to(WORKSPACE)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evolve_humaneval_baseline", description=__doc__)
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b", help="model spec")
    parser.add_argument("--problems", type=int, default=20, help="the first N HumanEval problems")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--out", default="evolve_humaneval_baseline", help="result name under bench/results/")
    args = parser.parse_args(argv)

    from ratchet.models import load_model

    overrides = {"n_ctx": args.n_ctx, "n_threads": args.threads} if args.model.startswith("local:") else {}
    inner = load_model(args.model, **overrides)
    files = workspace_files()
    arms = {
        "single-call": {"workflow.py": SINGLE_CALL, "workflow_base.py": files["workflow.py"],
                        "prompts/system.md": files["prompts/system.md"]},
        "humaneval-coder": files,
    }
    options = HumanEvalOptions(limit=args.problems, workflow=WorkflowOptions(temperature=0.0))
    rows = {}
    for name, arm_files in arms.items():
        accountant = Accountant()
        ctx = EngineContext(load_manifest(WORKSPACE), WORKSPACE, model=AccountedModel(inner, accountant, name))
        suite = HumanEvalSuite(options, ctx)
        started = time.perf_counter()
        results = suite.evaluate(Candidate.from_files("humaneval-coder", arm_files), suite.tasks(), seed=0)
        wall = time.perf_counter() - started
        tally = accountant.snapshot()
        rows[name] = {
            "pass_at_1": sum(r.score for r in results) / len(results),
            "passed": [r.task_id for r in results if r.score >= 1.0],
            "failure_kinds": sorted({f.kind for r in results for f in r.failures}),
            "model_calls": tally["calls"],
            "tokens": tally["tokens"],
            "wall_s": round(wall, 1),
        }
        print(f"{name}: pass@1 {rows[name]['pass_at_1']:.3f} ({len(rows[name]['passed'])}/{len(results)}), "
              f"{tally['calls']} calls, {wall:.0f} s", flush=True)
    base = rows["single-call"]["pass_at_1"]
    report = {
        "model": args.model, "problems": args.problems, "threads": args.threads, "temperature": 0.0,
        "arms": rows, "ratio_vs_single_call": (rows["humaneval-coder"]["pass_at_1"] / base) if base else None,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [f"# HumanEval pass@1 of the starting humaneval-coder harness ({args.model})", "",
             f"First {args.problems} problems, greedy (temperature 0, seed 0), {args.threads} threads; "
             "workflow and grading in the sandbox. Produced by `python -m bench.evolve_humaneval_baseline`.", "",
             "| harness | pass@1 | passed | model calls | tokens | wall s |", "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['pass_at_1']:.3f} | {len(row['passed'])}/{args.problems} | "
                     f"{row['model_calls']} | {row['tokens']} | {row['wall_s']} |")
    ratio = report["ratio_vs_single_call"]
    lines += ["", f"Ratio humaneval-coder / single-call: {ratio:.2f}" if ratio is not None else
              "Ratio: undefined (the single-call harness passed nothing)."]
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
