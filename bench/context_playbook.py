"""Reward or pass@1 on an untouched test split with an empty playbook, after offline and after
online learning, for each way of learning (arm), beside best-of-N of the original — on any suite
the engine evolves (``ratchet.context.trial``, ``ratchet.context.trial_suites``).

Suites (``--suite``), each the workspace the engine evolves, the playbook appended to its prompt
file per task, and its split, chosen before anything ran:

- ``humaneval`` (default; ``examples/humaneval-coder``, ``prompts/system.md``): problems
  ``--offset`` .. ``+--train`` (default 0..39) teach, the next ``--test`` (40..79) judge. The
  workspace's ``evolve.yaml`` uses only problems 0..39, so 40..79 are untouched by every search.
- ``guess-the-number`` (``examples/guess-the-number``, ``prompts/system.md``; TextArena's
  GuessTheNumber-v0, one episode per game seed, reward per episode): its ``evolve.yaml``'s splits,
  seeds 0..9 teach (search + held-in), its test split, seeds 10..17, judges.
- ``coding`` (``examples/coding-agent``, ``system_prompt.md``; the 45 tasks of coding-basics +
  coding-fixes that ``evolve-choices.yaml`` evolves): its splits (seed 0), the 24 search + held-in
  tasks teach, its 20-task test split judges.

For ``guess-the-number`` and ``coding``, ``--train``/``--test`` take the first that many of each
split (small trials).

The gate (``--gate``, on for new runs): after offline learning, the playbook and the empty one are
evaluated on held-in problems and the engine's gate from the workspace's run config judges them
paired per problem (HumanEval: ``paired``, alpha 0.05 spent as the engine spends it, so a first
test at 0.025; each arm's playbook is its gate's first test). ``test-offline`` uses the playbook
only when the gate keeps it, else the empty one; the table says which, with the gate's numbers.
HumanEval's held-in problems are the ``--heldin`` (40) after the test ones: HumanEval/80-119 by
default, used by no trial phase and by no search (``evolve.yaml`` lists problems 0-39 only).
``guess-the-number`` and ``coding`` use every task of their config in train or test, so there the
gate has no held-in task and refuses every playbook (run them with ``--no-gate`` to measure the
playbook unchecked). A run made before the gate resumes without it. Arms (``--arms``): ``ratchet`` (de-duplication, token budget, pruning) and
``ace-add-only`` (the official ACE code's curation: ADD only, no de-duplication, no pruning, no
budget) learn with the same solver, learner model and calls; ``ace-framework`` (HumanEval only)
runs ace-framework 0.13.0 in its own environment (``scripts/setup-bench.sh --only ace``) against
the same train and test problems, its answers graded here by the suite's sandboxed grader
(``bench/_peers/ace_run.py``, :func:`run_ace_framework`). The playbook's size (items, tokens)
after every learning step is recorded for every arm.

Everything is written to a ``context-trial`` run in ``--store`` as it happens: rerun with
``--resume RUN_ID`` and the phases continue where they stopped; a resumed run keeps the suite,
models, split and context settings it was created with (a run made before ``--suite`` existed is
a HumanEval run). The table is rewritten at the end of every phase.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from bench._ace_peer import run_ace_framework
from bench._results import machine, write_json, write_markdown
from ratchet.config import load_config
from ratchet.context.config import ContextConfig
from ratchet.context.offline import default_embedder
from ratchet.context.trial import ARM_SETTINGS, DEFAULT_ARM, PlaybookTrial
from ratchet.context.trial_suites import LeadingSplits, TrialSuite
from ratchet.envs.runner import wilson
from ratchet.models.budget import Accountant, AccountedModel
from ratchet.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PHASES = ("empty", "offline", "online", "best-of")
PEER_ARMS = ("ace-framework",)
ARMS = (*ARM_SETTINGS, *PEER_ARMS)
#: What a run measures: a resumed run keeps the values it was created with.
MEASURED = ("suite", "model", "learner_model", "offset", "train", "test", "best_of", "sampling_temperature", "gate",
            "heldin")


def trial_suite(name: str, offset: int = 0, heldin: int = 0) -> TrialSuite:
    """The suite strategies (see the module docstring for their splits); ``heldin``: HumanEval's
    problems after the test ones for the gate."""
    if name == "humaneval":
        return TrialSuite("humaneval", EXAMPLES / "humaneval-coder", "evolve.yaml", "prompts/system.md",
                          LeadingSplits(offset=offset, heldin_count=heldin))
    if name == "guess-the-number":
        return TrialSuite("guess-the-number", EXAMPLES / "guess-the-number", "evolve.yaml", "prompts/system.md")
    if name == "coding":
        return TrialSuite("coding", EXAMPLES / "coding-agent", "evolve-choices.yaml", "system_prompt.md")
    raise SystemExit(f"unknown suite {name!r}: use humaneval, guess-the-number or coding")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.context_playbook", description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default=None, choices=["humaneval", "guess-the-number", "coding"],
                        help="the suite (default humaneval; a resumed run keeps its own)")
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b", help="solver model spec")
    parser.add_argument("--learner-model", default=None, help="reflector + curator model spec (default: --model)")
    parser.add_argument("--store", required=True, help="run store for the trial run")
    parser.add_argument("--resume", default=None, help="a context-trial run id to continue")
    parser.add_argument("--offset", type=int, default=0, help="humaneval: the first train problem")
    parser.add_argument("--train", type=int, default=None, help="train tasks (humaneval default 40; else the split's)")
    parser.add_argument("--test", type=int, default=None, help="test tasks (humaneval default 40; else the split's)")
    parser.add_argument("--best-of", type=int, default=2, help="N of the best-of-N baseline (0: skip)")
    parser.add_argument("--gate", action=argparse.BooleanOptionalAction, default=True,
                        help="judge an offline playbook on held-in problems with the engine's gate before the test "
                             "phase uses it (a resumed run keeps its own; a run made before the gate: off)")
    parser.add_argument("--heldin", type=int, default=40, help="humaneval: the gate's held-in problems, after the test ones")
    parser.add_argument("--sampling-temperature", type=float, default=0.7)
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma list of {', '.join(PHASES)}")
    parser.add_argument("--arms", default=None, help=f"comma list of {', '.join(ARMS)} "
                        "(default: ratchet,ace-add-only; a run made before arms: ratchet)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--config", default=None, help="YAML of context settings (ContextConfig)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="context setting key=value")
    parser.add_argument("--ace-timeout-s", type=float, default=6 * 3600, help="ace-framework: wall-clock limit of its run")
    parser.add_argument("--out", default=None, help="result name under bench/results/ (default context_playbook_SUITE)")
    args = parser.parse_args(argv)
    unknown = sorted({p for p in args.phases.split(",") if p} - set(PHASES))
    if unknown:
        parser.error(f"unknown phases {unknown}; use {', '.join(PHASES)}")
    if args.arms is not None and sorted({a for a in args.arms.split(",") if a} - set(ARMS)):
        parser.error(f"unknown arms in {args.arms!r}; use {', '.join(ARMS)}")
    return args


def settle(args: argparse.Namespace, stored: dict[str, Any] | None, arms: list[str] | None = None) -> None:
    """A resumed run's own settings win over the command line's for what it measures; its arms are
    the command line's, else those it last ran (``arms``), else those it was made with."""
    if stored is not None:
        for key in MEASURED:
            if key in stored:
                setattr(args, key, stored[key])
        if "gate" not in stored:
            args.gate = False  # made before the gate: its offline test phase ran the playbook unchecked
        args.suite = stored.get("suite") or "humaneval"  # runs from before --suite were HumanEval runs
        if args.arms is None:
            args.arms = ",".join(arms or stored.get("arms") or [DEFAULT_ARM])
    args.suite = args.suite or "humaneval"
    args.arms = args.arms or "ratchet,ace-add-only"
    args.out = args.out or f"context_playbook_{args.suite.replace('-', '_')}"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from ratchet.models import load_model

    store = RunStore(args.store)
    run = store.open_run(args.resume) if args.resume else None
    settle(args, run.config if run is not None else None, run.read_json("trial/arms.json") if run is not None else None)
    config = (ContextConfig.stored(run.config["context"]) if run is not None and "context" in run.config
              else load_config(ContextConfig, args.config, args.overrides))
    arms = [a for a in args.arms.split(",") if a]
    spec = trial_suite(args.suite, args.offset, args.heldin if args.gate else 0)
    overrides = {"n_threads": args.threads} if args.model.startswith("local:") else {}
    solver = load_model(args.model, **overrides)
    learner = load_model(args.learner_model, **overrides) if args.learner_model else solver
    solver_tally, learner_tally = Accountant(), Accountant()
    solver_model = AccountedModel(solver, solver_tally, "solver")
    greedy = spec.build(solver_model, train=args.train, test=args.test)
    tasks = greedy.tasks()
    train, test = spec.split(tasks, args.train, args.test)
    heldin = spec.heldin(tasks, args.train, args.test) if args.gate else []
    if run is None:
        settings = {**vars(args), "arms": arms, "context": config.model_dump(mode="json"),
                    "train_ids": [t.id for t in train], "test_ids": [t.id for t in test],
                    "heldin_ids": [t.id for t in heldin]}
        run = store.create_run("context-trial", settings)
    else:
        run.set_status("running")
    run.write_json("trial/arms.json", arms)  # arms added to a resumed run stay in its table
    trial = PlaybookTrial(greedy, spec.files(), spec.prompt_file, run, AccountedModel(learner, learner_tally, "learner"),
                          config, embedder=default_embedder(config),
                          sampling_suite=spec.build(solver_model, temperature=args.sampling_temperature,
                                                    train=args.train, test=args.test) if args.best_of else None,
                          progress=lambda phase, r: print(phase, r.task_id, round(r.score, 3), flush=True),
                          calls=lambda: solver_tally.snapshot()["calls"], gate=spec.gate() if args.gate else None)
    print(f"trial run {run.id} in {store.root}: {args.suite}, {len(train)} train, {len(test)} test, "
          f"{len(heldin)} held-in for the gate{'' if args.gate else ' (no gate)'}, arms {arms}", flush=True)
    learners = [trial.arm(a) for a in arms if a in ARM_SETTINGS]
    steps = {"empty": lambda: trial.empty(train, test),
             "offline": lambda: [trial.offline(train, test, arm, heldin) for arm in learners],
             "online": lambda: [trial.online(train, test, arm) for arm in learners],
             "best-of": lambda: args.best_of and trial.best_of(args.best_of, test)}
    with run.marks_failure():
        for phase in [p for p in args.phases.split(",") if p]:
            steps[phase]()
            write(args, arms, trial, run, solver_tally, learner_tally)
        if "ace-framework" in arms:
            run_ace_framework(args, spec, trial, train, test)
            write(args, arms, trial, run, solver_tally, learner_tally)
        run.set_status("done")
    return 0


def _row(records: list[dict]) -> dict:
    n = len(records)
    passed = sum(r["score"] >= 1.0 for r in records)
    low, high = wilson(passed, n)
    mean = sum(r["score"] for r in records) / n if n else None
    calls = sum(r.get("model_calls") or 0 for r in records)
    return {"n": n, "passed": passed, "pass_at_1": passed / n if n else None, "mean_score": mean, "ci95": [low, high],
            "solver_calls": calls}


def phase_rows(arms: list[str], trial: PlaybookTrial, best_of: int) -> dict[str, dict]:
    names = ["test-empty"]
    for arm in arms:
        if arm in ARM_SETTINGS:
            names += [f"test-{trial.arm(arm).learner_name(mode)}" for mode in ("offline", "online")]
        else:
            names.append(f"test-{arm}")
    for arm in arms:  # the gate's evidence, where it ran
        if arm in ARM_SETTINGS and trial.phase(f"heldin-{trial.arm(arm).learner_name('offline')}"):
            names += ["heldin-empty", f"heldin-{trial.arm(arm).learner_name('offline')}"]
    rows = {name: _row(trial.phase(name)) for name in dict.fromkeys(names)}
    if best_of:
        samples = [{r["task_id"]: r for r in trial.phase(f"test-best-of-{best_of}-sample-{k}")} for k in range(best_of)]
        ids = set.intersection(*(set(s) for s in samples)) if samples else set()
        # pass@N with the hidden tests choosing: an upper bound on any best-of-N selector.
        rows[f"test-best-of-{best_of} (oracle)"] = _row(
            [{"score": max(s[i]["score"] for s in samples), "model_calls": sum(s[i].get("model_calls") or 0 for s in samples)}
             for i in sorted(ids)])
    return rows


def size_series(arms: list[str], trial: PlaybookTrial) -> dict[str, list[dict]]:
    """Each playbook's size after every learning step (the peer's from its own record)."""
    out: dict[str, list[dict]] = {}
    for arm in arms:
        if arm in ARM_SETTINGS:
            for mode in ("offline", "online"):
                name = trial.arm(arm).learner_name(mode)
                out[name] = trial.sizes(name)
        else:
            out[arm] = trial.run.read_jsonl(f"peers/{arm}/sizes.jsonl")
    return out


def gate_verdicts(arms: list[str], trial: PlaybookTrial) -> dict[str, dict]:
    """The gate's verdict on each arm's offline playbook, where one was made."""
    names = [trial.arm(a).learner_name("offline") for a in arms if a in ARM_SETTINGS]
    return {name: v for name in names if (v := trial.verdict(name)) is not None}


def gate_lines(verdicts: dict[str, dict]) -> list[str]:
    lines = []
    for name, v in verdicts.items():
        n = v["numbers"]
        held = v["heldin"]
        span = f"{held[0]}..{held[-1]}" if held else "none"
        lines.append(f"- `{name}` ({v['items']} items, held-in {len(held)} tasks, {span}): "
                     f"**{'kept' if v['kept'] else 'refused'}**; `test-{name}` used {v['test_uses']}. "
                     f"Held-in mean {n.get('heldin_parent', 0):.3f} empty, {n.get('heldin_child', 0):.3f} with the playbook, "
                     f"p = {n.get('p_value', 1):.4f} at level {n.get('alpha', 0):.4g}. Gate: {v['reason']}.")
    return lines


def _series_text(series: list[dict], key: str) -> str:
    values = [s.get(key) for s in series]
    return " ".join("?" if v is None else str(v) for v in values) or "-"


def write(args: argparse.Namespace, arms: list[str], trial: PlaybookTrial, run, solver_tally: Accountant,
          learner_tally: Accountant) -> None:
    rows = phase_rows(arms, trial, args.best_of)
    sizes = size_series(arms, trial)
    peers = {arm: run.read_jsonl(f"peers/{arm}/spent.jsonl") for arm in arms if arm in PEER_ARMS}
    verdicts = gate_verdicts(arms, trial)
    report = {"suite": args.suite, "model": args.model, "learner_model": args.learner_model or args.model, "run": run.id,
              "offset": args.offset, "train": args.train, "test": args.test, "arms": arms, "rows": rows,
              "playbook_items": {name: (s[-1]["items"] if s else None) for name, s in sizes.items()},
              "playbook_sizes": sizes, "gate": verdicts, "peer_spent": peers, "solver": solver_tally.snapshot(), "learner": learner_tally.snapshot(),
              "machine": machine(load=os.getloadavg()), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(args.out, report)
    score = "pass@1" if args.suite != "guess-the-number" else "mean reward"
    lines = [f"# {args.suite}: {score} with a learned playbook ({args.model}; learner {args.learner_model or args.model})", "",
             (f"Trial run `{run.id}`; test tasks untouched by any search (see `bench/context_playbook.py`). "
              "Produced by `python -m bench.context_playbook`."), "",
             "| arm (test split) | pass@1 | 95% CI (Wilson) | passed | mean score | solver calls |", "|---|---|---|---|---|---|"]
    refused = {f"test-{name}" for name, v in verdicts.items() if not v["kept"]}
    for name, row in rows.items():
        if row["n"]:
            label = f"{name} (gate refused: no playbook)" if name in refused else name
            lines.append(f"| {label} | {row['pass_at_1']:.3f} | {row['ci95'][0]:.3f}–{row['ci95'][1]:.3f} | "
                         f"{row['passed']}/{row['n']} | {row['mean_score']:.3f} | {row['solver_calls']:.0f} |")
    if verdicts:
        lines += ["", "The gate on each offline playbook before its test phase (the engine's, paired per held-in task):", "",
                  *gate_lines(verdicts)]
    lines += ["", "Playbook size after each learning step (items; tokens of the whole playbook as a prompt shows it):", "",
              "| playbook | steps | items | tokens |", "|---|---|---|---|"]
    for name, series in sizes.items():
        if series:
            lines.append(f"| {name} | {len(series)} | {_series_text(series, 'items')} | {_series_text(series, 'tokens')} |")
    for arm, attempts in peers.items():
        if attempts:
            calls = {role: sum(a["calls"].get(role, 0) for a in attempts) for role in ("solver", "learner")}
            lines.append(f"\n{arm}: {calls['solver']} solver and {calls['learner']} learner calls in "
                         f"{sum(a['wall_s'] for a in attempts):.0f} s over {len(attempts)} attempt(s).")
    write_markdown(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
