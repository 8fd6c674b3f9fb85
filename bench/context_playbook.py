"""HumanEval pass@1 on held-out problems with an empty playbook, after offline and after online
learning, beside best-of-N of the original — the humaneval-coder harness, the playbook appended
to its system prompt per problem (``ratchet.context.trial``).

Problems ``--offset`` .. ``+--train`` teach, the next ``--test`` are judged. The solver and the
learner (reflector + curator) are embedded models; the workflow and grading run in the sandbox.
Everything is written to a ``context-trial`` run in ``--store`` as it happens: rerun with
``--resume RUN_ID`` and the phases continue where they stopped. The table is rewritten at the
end of every phase. Not yet run at scale: see docs/context.md.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench._results import machine, write_json, write_markdown
from ratchet.config import load_config
from ratchet.context.config import ContextConfig
from ratchet.context.offline import default_embedder
from ratchet.context.playbook import Playbook
from ratchet.context.trial import PlaybookTrial
from ratchet.envs.runner import wilson
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.suites.config import HumanEvalOptions, WorkflowOptions
from ratchet.evolve.suites.humaneval import HumanEvalSuite
from ratchet.models.budget import AccountedModel, Accountant
from ratchet.store import RunStore

WORKSPACE = Path(__file__).resolve().parents[1] / "examples" / "humaneval-coder"
PHASES = ("empty", "offline", "online", "best-of")


def workspace_files() -> dict[str, str]:
    manifest = load_manifest(WORKSPACE)
    return {str(p.relative_to(WORKSPACE)): p.read_text() for p in sorted(WORKSPACE.rglob("*"))
            if p.is_file() and manifest.is_editable(str(p.relative_to(WORKSPACE)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.context_playbook", description=__doc__)
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b", help="solver model spec")
    parser.add_argument("--learner-model", default=None, help="reflector + curator model spec (default: --model)")
    parser.add_argument("--store", required=True, help="run store for the trial run")
    parser.add_argument("--resume", default=None, help="a context-trial run id to continue")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--train", type=int, default=40)
    parser.add_argument("--test", type=int, default=40)
    parser.add_argument("--best-of", type=int, default=2, help="N of the best-of-N baseline (0: skip)")
    parser.add_argument("--sampling-temperature", type=float, default=0.7)
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma list of {', '.join(PHASES)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--config", default=None, help="YAML of context settings (ContextConfig)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="context setting key=value")
    parser.add_argument("--out", default="context_playbook_humaneval", help="result name under bench/results/")
    args = parser.parse_args(argv)
    phases = [p for p in args.phases.split(",") if p]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        parser.error(f"unknown phases {unknown}; use {', '.join(PHASES)}")

    from ratchet.models import load_model

    config = load_config(ContextConfig, args.config, args.overrides)
    overrides = {"n_threads": args.threads} if args.model.startswith("local:") else {}
    solver = load_model(args.model, **overrides)
    learner = load_model(args.learner_model, **overrides) if args.learner_model else solver
    solver_tally, learner_tally = Accountant(), Accountant()
    manifest = load_manifest(WORKSPACE)

    def suite(temperature: float) -> HumanEvalSuite:
        ctx = EngineContext(manifest, WORKSPACE, model=AccountedModel(solver, solver_tally, "solver"))
        return HumanEvalSuite(HumanEvalOptions(limit=args.offset + args.train + args.test,
                                               workflow=WorkflowOptions(temperature=temperature)), ctx)

    store = RunStore(args.store)
    settings = {**vars(args), "context": config.model_dump(mode="json")}
    run = store.open_run(args.resume) if args.resume else store.create_run("context-trial", settings)
    greedy = suite(0.0)
    tasks = greedy.tasks()[args.offset:]
    train, test = tasks[: args.train], tasks[args.train: args.train + args.test]
    trial = PlaybookTrial(greedy, workspace_files(), "prompts/system.md", run,
                          AccountedModel(learner, learner_tally, "learner"), config, embedder=default_embedder(config),
                          sampling_suite=suite(args.sampling_temperature),
                          progress=lambda phase, r: print(phase, r.task_id, r.score, flush=True))
    print(f"trial run {run.id} in {store.root}", flush=True)
    steps = {"empty": lambda: trial.empty(train, test), "offline": lambda: trial.offline(train, test),
             "online": lambda: trial.online(train, test), "best-of": lambda: args.best_of and trial.best_of(args.best_of, test)}
    with run.marks_failure():
        for phase in phases:
            steps[phase]()
            write(args, trial, run, solver_tally, learner_tally)
        run.set_status("done")
    return 0


def _row(records: list[dict]) -> dict:
    n = len(records)
    passed = sum(r["score"] >= 1.0 for r in records)
    low, high = wilson(passed, n)
    calls = sum(r.get("model_calls") or 0 for r in records)
    return {"n": n, "passed": passed, "pass_at_1": passed / n if n else None, "ci95": [low, high], "solver_calls": calls}


def write(args: argparse.Namespace, trial: PlaybookTrial, run, solver_tally: Accountant, learner_tally: Accountant) -> None:
    rows = {name: _row(trial.phase(name)) for name in ("test-empty", "test-offline", "test-online")}
    if args.best_of:
        samples = [{r["task_id"]: r for r in trial.phase(f"test-best-of-{args.best_of}-sample-{k}")}
                   for k in range(args.best_of)]
        ids = set.intersection(*(set(s) for s in samples)) if samples else set()
        # pass@N with the hidden tests choosing: an upper bound on any best-of-N selector.
        rows[f"test-best-of-{args.best_of} (oracle)"] = _row(
            [{"score": max(s[i]["score"] for s in samples), "model_calls": sum(s[i].get("model_calls") or 0 for s in samples)}
             for i in sorted(ids)])
    sizes = {}
    for name in ("offline", "online"):
        path = run.path(f"trial/{name}.md")
        sizes[name] = len(Playbook.load(path)) if path.exists() else None
    report = {"model": args.model, "learner_model": args.learner_model or args.model, "run": run.id,
              "offset": args.offset, "train": args.train, "test": args.test, "rows": rows, "playbook_items": sizes,
              "solver": solver_tally.snapshot(), "learner": learner_tally.snapshot(),
              "machine": machine(load=os.getloadavg()), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(args.out, report)
    lines = [f"# HumanEval pass@1 with a learned playbook ({args.model}; learner {args.learner_model or args.model})", "",
             f"Train problems {args.offset}..{args.offset + args.train - 1}, test the next {args.test}; trial run "
             f"`{run.id}`. Produced by `python -m bench.context_playbook`.", "",
             "| arm (test split) | pass@1 | 95% CI (Wilson) | passed | solver calls |", "|---|---|---|---|---|"]
    for name, row in rows.items():
        if row["n"]:
            lines.append(f"| {name} | {row['pass_at_1']:.3f} | {row['ci95'][0]:.3f}–{row['ci95'][1]:.3f} | "
                         f"{row['passed']}/{row['n']} | {row['solver_calls']:.0f} |")
    lines += ["", f"Playbook items at the end: offline {sizes['offline']}, online {sizes['online']}."]
    write_markdown(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
