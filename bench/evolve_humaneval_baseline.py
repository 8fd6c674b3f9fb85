"""HumanEval pass@1 of the starting humaneval-coder harness vs a single-call harness, same model.

Both harnesses run through the engine's ``humaneval`` suite (workflow and grading in the sandbox)
on the same first N problems, with the same embedded model, greedy decoding and seed. The
single-call baseline is the same system prompt and request, answered with the first reply's code
(no examples run, no repair), so the ratio is what generate -> run the visible examples -> repair
adds before any evolution. Model calls and tokens are counted by the budget accountant, per
harness. Replies are recorded next to the results (``NAME.replies.jsonl``) and replayed on a rerun
(``--fresh`` asks the model again); results are rewritten after every problem.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench._results import RESULTS, machine, write_json, write_markdown
from ratchet.contracts import Candidate
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.suites.config import HumanEvalOptions, WorkflowOptions
from ratchet.evolve.suites.humaneval import HumanEvalSuite
from ratchet.models.budget import AccountedModel, Accountant

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
    parser.add_argument("--fresh", action="store_true", help="ask the model again instead of replaying recorded replies")
    parser.add_argument("--out", default="evolve_humaneval_baseline", help="result name under bench/results/")
    args = parser.parse_args(argv)

    from ratchet.models import load_model
    from ratchet.models.replay import ReplayModel

    overrides = {"n_ctx": args.n_ctx, "n_threads": args.threads} if args.model.startswith("local:") else {}
    replies = RESULTS / f"{args.out}.replies.jsonl"
    if args.fresh and replies.exists():
        replies.unlink()
    # Greedy replies are recorded as they come: the coder's first request is the single-call
    # harness's, so it is answered once; a rerun replays them (the measured quantity is pass@1).
    model = ReplayModel(load_model(args.model, **overrides), replies, mode="auto")
    files = workspace_files()
    arms = {
        "single-call": {"workflow.py": SINGLE_CALL, "workflow_base.py": files["workflow.py"],
                        "prompts/system.md": files["prompts/system.md"]},
        "humaneval-coder": files,
    }
    options = HumanEvalOptions(limit=args.problems, workflow=WorkflowOptions(temperature=0.0))
    suites, accountants = {}, {}
    for name in arms:
        accountants[name] = Accountant()
        ctx = EngineContext(load_manifest(WORKSPACE), WORKSPACE, model=AccountedModel(model, accountants[name], name))
        suites[name] = HumanEvalSuite(options, ctx)
    results: dict[str, list] = {name: [] for name in arms}
    walls = {name: 0.0 for name in arms}
    for task in suites["single-call"].tasks():
        for name, arm_files in arms.items():
            started = time.perf_counter()
            results[name] += suites[name].evaluate(Candidate.from_files("humaneval-coder", arm_files), [task], seed=0)
            walls[name] += time.perf_counter() - started
        print(task.id, {name: rs[-1].score for name, rs in results.items()}, flush=True)
        write(args, results, accountants, walls, model.hits)  # after every problem: a cut-short run keeps its part
    return 0


def write(args: argparse.Namespace, results: dict[str, list], accountants: dict[str, Accountant],
          walls: dict[str, float], replayed: int) -> None:
    rows = {}
    for name, rs in results.items():
        tally = accountants[name].snapshot()
        rows[name] = {
            "pass_at_1": sum(r.score for r in rs) / len(rs),
            "passed": [r.task_id for r in rs if r.score >= 1.0],
            "failure_kinds": sorted({f.kind for r in rs for f in r.failures}),
            "model_calls": tally["calls"],
            "tokens": tally["tokens"],
            "wall_s": round(walls[name], 1),
        }
    done = len(results["single-call"])
    base = rows["single-call"]["pass_at_1"]
    report = {
        "model": args.model, "problems_asked": args.problems, "problems_done": done, "threads": args.threads,
        "temperature": 0.0, "replayed_replies": replayed,
        "arms": rows, "ratio_vs_single_call": (rows["humaneval-coder"]["pass_at_1"] / base) if base else None,
        "machine": machine(load=os.getloadavg()),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(args.out, report)
    lines = [f"# HumanEval pass@1 of the starting humaneval-coder harness ({args.model})", "",
             f"The first {done} problems (of {args.problems} asked), greedy (temperature 0, seed 0), "
             f"{args.threads} threads; workflow and grading in the sandbox. "
             "Produced by `python -m bench.evolve_humaneval_baseline`; wall times include a loaded machine "
             "and replayed replies, so they are not speed measurements.", "",
             "| harness | pass@1 | passed | model calls | tokens | wall s |", "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['pass_at_1']:.3f} | {len(row['passed'])}/{done} | "
                     f"{row['model_calls']} | {row['tokens']} | {row['wall_s']} |")
    ratio = report["ratio_vs_single_call"]
    lines += ["", f"Ratio humaneval-coder / single-call: {ratio:.2f}" if ratio is not None else
              "Ratio: undefined (the single-call harness passed nothing)."]
    write_markdown(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
