"""``ratchet evolve`` on the coding agent's own workspace, judged on coding-basics tasks it never saw.

Runs (or resumes) ``examples/coding-agent/evolve.yaml`` through the engine, as ``ratchet evolve``
does: the agentic proposer on the runtime with the candidate's own harness, DGM selector, paired
gate; splits of the 15 tasks as the YAML says (search 3, held-in 9, test 3, the test split
untouched until the report), or ``--split SEARCH,HELDIN,TEST`` in task counts for a new run. The
results say how many held-in flips the run's gate could accept at that size (its own test: with
5 held-in tasks only a sweep of all 5 passes the first test). Then it
reads the run store and writes ``bench/results/evolve_coding_agent.{json,md}``: the before/after on
the test split with the report's bootstrap CIs, each proposal (the proposer agent's tool calls,
its claim, the diff), the gate's decision and its numbers, and every task evaluation. Before the
run has its report it writes what it has so far (``finished: false``).

The run store pays nothing twice, so run it in chunks under the CPU lock (``timeout -s INT 1140
python -m bench.evolve_coding_agent ...``), or drive the run with ``ratchet evolve run/resume
--root R`` and write its results with ``--write-only --root R --run-id ID`` (how the committed
results were made: ``ratchet evolve run examples/coding-agent/evolve.yaml --set iterations=1 --set
report.max_best_of_n=1 --threads 1``, then ``ratchet evolve resume ID --set iterations=2``, with
the YAML of that time: splits 5/5/5, no proposer fallback; its config copy in the run keeps them).

    python -m bench.evolve_coding_agent --threads 1 --iterations 2 --split 3,9,3 --set report.max_best_of_n=4

``--config examples/coding-agent/evolve-choices.yaml`` is the 45-task run (coding-basics and
coding-fixes, 20 held-in, 20 test, declared alternatives of the settings); ``--out`` names the
results' files.

The best-of-N baseline's extra attempts sample (the suite's ``sampled``: temperature 0.7, the
evaluation seed as sampling seed); each is one more pass of the agent over the test tasks, so
cap N to what the CPU time allows; the results say how many attempts were distinct.

``--post-hoc CANDIDATE`` (with ``--write-only``, after the run's report) runs a candidate the
gate rejected on the test split as well, to see whether what it did on held-in holds on tasks the
search never saw: a measurement made after the run had decided, so nothing was selected with it.
Its results go to the run's ``bench/post_hoc.jsonl`` (a killed measurement resumes), never to the
run's own evaluations, and the results list them apart. Given more than once (the original and
the best, say) with ``--post-hoc-seeds``, it adds samples at seeds the report did not run: the
results then pool every test run per task and test the best's per-task rate differences with the
gate's sign-flip test, which three seeds on twenty tasks may be too few to decide.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from bench._results import write_json, write_markdown
from bench._setup import MODEL, ROOT
from ratchet.config import load_config
from ratchet.evolve.archive import Archive
from ratchet.evolve.cache import EVALS
from ratchet.evolve.components import build
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.loop import Engine, split_tasks
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.preflight import CONFIG_COPY
from ratchet.evolve.report import POST_HOC, candidates_by_prefix, measure_post_hoc
from ratchet.evolve.report_tables import (
    arms_table,
    calls_line,
    candidates_table,
    post_hoc_lines,
    rate_lines,
    step_events,
    steps_table,
)
from ratchet.runtime.config import CodingSuiteOptions
from ratchet.runtime.engine_suite import CodingAgentSuite
from ratchet.store import RunStore
from ratchet.store.files import write_bytes_atomic

TITLE = "`ratchet evolve` on the coding agent's workspace"
CONFIG = ROOT / "examples" / "coding-agent" / "evolve.yaml"


def proposer_runs(run: Any) -> list[dict[str, Any]]:
    """Each proposer agent's run in the store: its tool calls (name, ok, first line of the result)."""
    out = []
    root = Path(run.dir) / "proposer-agent"
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        trace = d / "trace.jsonl"
        records = [json.loads(line) for line in trace.read_text().splitlines()] if trace.is_file() else []
        calls = [{"step": r["step"], "name": r["name"], "ok": r["ok"],
                  "arguments": json.dumps(r["arguments"])[:300],
                  "result": (r["result"].strip().splitlines() or [""])[0][:200]}
                 for r in records if r["type"] == "tool_call"]
        replies = [r for r in records if r["type"] == "model_call"]
        out.append({"run": d.name, "model_calls": len(replies),
                    "prompt_tokens": sum(r["prompt_tokens"] for r in replies),
                    "completion_tokens": sum(r["completion_tokens"] for r in replies),
                    "calls": calls, "replies": [r["text"][:600] for r in replies]})
    return out


def split_of(config: dict[str, Any]) -> dict[str, str]:
    """task id -> the split the engine put it in (recomputed from the run's config, as the engine does)."""
    cfg = EvolveConfig.model_validate(config)
    suite = CodingAgentSuite(CodingSuiteOptions.model_validate(cfg.suite.options), None)
    return {t.id: name for name, tasks in split_tasks(suite.tasks(), cfg.splits).items() for t in tasks}


def per_task(run: Any, splits: dict[str, str]) -> list[dict[str, Any]]:
    """Every task evaluation paid so far (the engine's cache, finished ones only): candidate,
    task, its split, seed, score, how the agent's run ended."""
    return [{"candidate": r["candidate"], "task": r["task_id"], "split": splits.get(r["task_id"], "?"),
             "seed": r["seed"], "score": r["score"], "agent": agent_line(r["trace"]),
             "tokens": r.get("metrics", {}).get("tokens")} for r in run.read_jsonl(EVALS)]


def agent_line(trace: str) -> str:
    """How the agent's run ended: the second line of the coding suite's task trace."""
    lines = trace.splitlines()
    return lines[1] if len(lines) > 1 else ""


def load_spec(spec: str | None, threads: int) -> Any:
    """The model a run config names (an embedded one on ``threads`` threads); None for none.
    llama.cpp loads only here, when the bench runs the model."""
    if spec is None:
        return None
    from ratchet.models import load_model

    return load_model(spec, n_threads=threads) if spec.startswith("local:") else load_model(spec)


def post_hoc(run: Any, candidate_ids: list[str], threads: int, seeds: list[int] | None = None) -> None:
    """The candidates (ids or their prefixes) on the run's test split, task by task at each seed
    (default: the run's first), appended to the run's ``bench/post_hoc.jsonl``
    (:func:`ratchet.evolve.report.measure_post_hoc`): the engine's suite with the run's model and
    options, not its evaluator."""
    config = load_config(EvolveConfig, run.path(CONFIG_COPY))
    try:
        candidates = candidates_by_prefix(Archive(run), candidate_ids)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    suite = CodingAgentSuite(CodingSuiteOptions.model_validate(config.suite.options),
                             SimpleNamespace(model=load_spec(config.model, threads)))
    measure_post_hoc(run, suite, candidates, split_tasks(suite.tasks(), config.splits)["test"],
                     seeds if seeds is not None else config.seeds[:1], describe=lambda r: agent_line(r.trace),
                     default_seed=config.seeds[0], on_row=lambda r: print(
                         f"post hoc {r['candidate'][:12]} {r['task']} seed {r['seed']}: {r['score']:.0f} ({r['agent']})",
                         flush=True))



def proposals(archive: Archive) -> list[dict[str, Any]]:
    out = []
    for c in archive.candidates():
        if c.parent_id is None:
            continue
        decision = archive.decision(c.id)
        out.append({"id": c.id, "parent": c.parent_id, "status": archive.status(c.id),
                    "proposer": c.meta.get("proposer"), "claim": c.meta.get("claim"),
                    "decision": None if decision is None else
                    {"accepted": decision.accepted, "reason": decision.reason, "numbers": decision.numbers},
                    "claim_check": archive.claim_check(c.id), "diff": archive.diff(c.id)})
    return out


def split_overrides(split: str | None, config: EvolveConfig) -> list[str]:
    """``--split SEARCH,HELDIN,TEST`` (task counts) as ``splits.*`` fractions of the suite's tasks."""
    if not split:
        return []
    try:
        counts = [int(part) for part in split.split(",")]
    except ValueError:
        counts = []
    if len(counts) != 3 or min(counts) < 0:
        raise SystemExit(f"--split {split!r}: give three task counts SEARCH,HELDIN,TEST, e.g. --split 3,9,3")
    total = len(CodingAgentSuite(CodingSuiteOptions.model_validate(config.suite.options), None).tasks())
    if sum(counts) > total:
        raise SystemExit(f"--split {split!r} asks for {sum(counts)} tasks; the suite has {total}")
    search, heldin, test = (c / total for c in counts)
    return [f"splits.search={search!r}", f"splits.heldin={heldin!r}", "splits.heldout=0.0", f"splits.test={test!r}"]


def gate_power(config: dict[str, Any]) -> dict[str, Any]:
    """How many held-in tasks a child must flip (losing none) for the run's gate to accept it, at
    the run's held-in size: the gate's own paired test and correction, its first and second test
    of the run (later ones are stricter under alpha spending)."""
    cfg = EvolveConfig.model_validate(config)
    held_in = sum(1 for split in split_of(config).values() if split == "heldin")
    gate = build("gate", cfg.gate, EngineContext(load_manifest(CONFIG.parent), CONFIG.parent))
    if not hasattr(gate, "smallest_accepted_flips"):
        return {"heldin_tasks": held_in, "gate": cfg.gate.name, "smallest_accepted_flips": None}
    return {"heldin_tasks": held_in, "gate": cfg.gate.name, "seeds": len(cfg.seeds),
            "smallest_accepted_flips": {"test 1": gate.smallest_accepted_flips(held_in, 1),
                                        "test 2": gate.smallest_accepted_flips(held_in, 2)}}


def power_line(power: dict[str, Any]) -> str:
    flips = power["smallest_accepted_flips"]
    n = power["heldin_tasks"]
    if flips is None:
        return f"Held-in: {n} tasks (gate `{power['gate']}` states no smallest number of flips)."

    def needs(k: int | None, which: str) -> str:
        return (f"at the run's {which} test no child can pass, not even one that flips all {n}" if k is None else
                f"at the run's {which} test a child must flip at least {k} of the {n} from fail to pass, losing none")

    line = (f"Held-in: {n} tasks. For the gate (`{power['gate']}`, its own paired test, computed by "
            f"`PairedGate.smallest_accepted_flips`): {needs(flips['test 1'], 'first')}; "
            f"{needs(flips['test 2'], 'second')}.")
    seeds = power.get("seeds", 1)
    if seeds > 1:  # the flip counts are one seed's; with several the test is on per-task rates
        line += (f" Each held-in task runs at {seeds} seeds and the gate tests the per-task differences of solve "
                 f"rates (the mean over seeds): a flip above is a task the child solves at every seed and the "
                 f"parent at none; gains at some seeds on more tasks can pass too, and the mean gain must also "
                 f"clear the parent's spread over seeds (its noise band).")
    return line


def drive(args: argparse.Namespace) -> Any:
    """Start or resume the run ``args.run_id`` of the example config (as ``ratchet evolve run`` /
    ``resume`` do: the run's config copy, with the overrides); returns the run."""
    store = RunStore(args.root)
    overrides = [*([f"iterations={args.iterations}"] if args.iterations else []), *args.set]
    if (Path(args.root) / args.run_id).is_dir():
        if args.split:  # the splits are part of what the run pinned; a resume cannot move tasks between them
            raise SystemExit(f"--split applies to a new run; {args.run_id} exists (resume it without --split)")
        run = store.open_run(args.run_id)
        config = load_config(EvolveConfig, run.path(CONFIG_COPY), overrides)
    else:
        config = load_config(EvolveConfig, args.config, [f"model={args.model}", *overrides])
        # --split is in task counts; its fractions need the suite's size, known from the config above
        config = load_config(EvolveConfig, args.config, [f"model={args.model}", *overrides,
                                                         *split_overrides(args.split, config)])
        config = config.model_copy(update={"workspace": CONFIG.parent})
        run = store.create_run("evolve", config, name="coding-agent", run_id=args.run_id)
    write_bytes_atomic(run.path(CONFIG_COPY), yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False).encode())
    Engine(config, run, load_spec(config.model, args.threads),
           proposer_model=load_spec(config.proposer_model, args.threads),
           on_event=lambda e: print(json.dumps(e, default=str)[:300], flush=True)).execute()
    return run


def shown_path(path: str | Path) -> str:
    """``path`` as the results show it: relative to the repository when inside it (a result keeps
    no machine path), else its last two parts."""
    path = Path(path)
    if not path.is_absolute():
        return path.as_posix()
    inside = path.resolve()
    return inside.relative_to(ROOT).as_posix() if inside.is_relative_to(ROOT) else Path(*path.parts[-2:]).as_posix()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evolve_coding_agent", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(ROOT / "runs"), help="the run store's root (ratchet evolve --root)")
    parser.add_argument("--run-id", default="bench-evolve-coding-agent")
    parser.add_argument("--config", type=Path, default=CONFIG,
                        help="the run config of a new run (default: examples/coding-agent/evolve.yaml; "
                             "evolve-choices.yaml is the 45-task one)")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=None, help="override the YAML's iterations")
    parser.add_argument("--set", action="append", default=[], help="another EvolveConfig override (KEY=VALUE)")
    parser.add_argument("--split", default=None, metavar="SEARCH,HELDIN,TEST",
                        help="task counts of the splits for a new run (default: the YAML's, 3,9,3)")
    parser.add_argument("--write-only", action="store_true", help="write the results of the run in the store; run nothing")
    parser.add_argument("--config-name", default=None,
                        help="the config file the results name (default: --config's path in the repository)")
    parser.add_argument("--out", default="evolve_coding_agent")
    parser.add_argument("--note", default="", help="a paragraph of what happened, put under the tables")
    parser.add_argument("--post-hoc", action="append", default=[], metavar="CANDIDATE",
                        help="with --write-only: run this candidate of the finished run on its test split "
                             "first (a measurement after the run's decisions; see above); give it again for "
                             "more candidates, which take turns task by task")
    parser.add_argument("--post-hoc-seeds", default=None, metavar="S,S,...",
                        help="the seeds --post-hoc runs each test task at (default: the run's first seed); "
                             "seeds the report did not run add samples to its test-split rates")
    args = parser.parse_args(argv)
    if args.post_hoc_seeds and not args.post_hoc:
        raise SystemExit("--post-hoc-seeds says which seeds --post-hoc runs: name the candidates with --post-hoc too")
    if args.config_name is None:
        config_path = args.config.resolve()
        args.config_name = str(config_path.relative_to(ROOT)) if config_path.is_relative_to(ROOT) else str(config_path)
    run = RunStore(args.root).open_run(args.run_id) if args.write_only else drive(args)
    if args.post_hoc:
        if not args.write_only or run.read_json("evolve/report.json") is None:
            raise SystemExit("--post-hoc measures a finished run: give --write-only and the run's id after its report")
        try:
            seeds = None if args.post_hoc_seeds is None else [int(x) for x in args.post_hoc_seeds.split(",")]
        except ValueError:
            raise SystemExit(f"--post-hoc-seeds {args.post_hoc_seeds!r}: give integers separated by commas, e.g. 3,4")
        post_hoc(run, args.post_hoc, args.threads, seeds)
    archive = Archive(run)
    report = run.read_json("evolve/report.json")
    status = run.read_json("status.json") or {}
    copy = run.path(CONFIG_COPY)  # the config as last resumed (run.json keeps the one it started with)
    config = yaml.safe_load(copy.read_text()) if copy.is_file() else (run.read_json("run.json") or {}).get("config") or {}
    config["workspace"] = shown_path(config.get("workspace") or CONFIG.parent)  # the run holds the full path
    out = {"finished": report is not None, "run_id": args.run_id, "status": status,
           "config": config, "report": report,
           "steps": [{k: e.get(k) for k in ("step", "proposer", "status", "reason", "child", "numbers", "model_calls")}
                     for e in step_events(run)],
           "proposals": proposals(archive), "failed_proposals": archive.unusable(),
           "proposer_runs": proposer_runs(run), "per_task": per_task(run, split_of(config)),
           "gate_power": gate_power(config), "post_hoc": run.read_jsonl(POST_HOC),
           "note": args.note, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(args.out, out, default=str)

    suites = (config.get("suite") or {}).get("options", {}).get("suite", "coding-basics")
    suites = ", ".join(suites) if isinstance(suites, list) else suites
    lines = [f"# {TITLE} ({suites})" if report else f"# An unfinished {TITLE} ({suites})", "",
             f"`{args.config_name or 'examples/coding-agent/evolve.yaml'}` with {config.get('model')} as the agent"
             + (f" and {config['proposer_model']} as the proposers' model" if config.get("proposer_model") else "")
             + f" ({config.get('iterations')} step{'' if config.get('iterations') == 1 else 's'}, engine seed {config.get('seed', 0)}); "
             f"written by `python -m bench.evolve_coding_agent` from the run store (run "
             f"`{args.run_id}`). Score: the suite's grader (the original tests, in the sandbox) per task.", "",
             power_line(out["gate_power"]), ""]
    if report:
        lines += arms_table(report, "solve rate")
    else:
        lines += ["The run has no report yet: no test-split comparison here.", ""]
    lines += rate_lines(out["per_task"])
    lines += ["## Every task evaluation", "", "| candidate | split | task | seed | solved | the agent's run |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r['candidate'][:12]} | {r['split']} | {r['task']} | {r['seed']} | {r['score']:.0f} | {r['agent']} |"
              for r in sorted(out["per_task"], key=lambda r: (r["split"], r["task"], r["candidate"]))]
    lines += ["", *(post_hoc_lines(out["post_hoc"], out["per_task"], report["original"]["id"]) if report else [])]
    lines += ["## The search", "", calls_line(run), "", *candidates_table(run), "", *steps_table(run), ""]
    for p in out["proposals"]:
        d = p["decision"] or {}
        lines += [f"### Proposal {p['id'][:12]} ({p['status']})", "",
                  f"Claim: {json.dumps(p['claim'])[:600]}", "",
                  f"Gate: {d.get('reason')} (numbers: {json.dumps(d.get('numbers'))})", "",
                  "```diff", p["diff"].rstrip()[:3000], "```", ""]
    for r in out["proposer_runs"]:
        lines += [f"Proposer agent run `{r['run']}`: {r['model_calls']} model calls, {r['prompt_tokens']} prompt + "
                  f"{r['completion_tokens']} completion tokens; its tool calls:", ""]
        lines += [f"- step {c['step']} `{c['name']}` {c['arguments'][:160]} -> {'ok' if c['ok'] else 'FAILED'}: "
                  f"{c['result'][:160]}" for c in r["calls"]] or ["- (none)"]
        if r["replies"]:
            first = r["replies"][0].replace("\n", " / ")[:300]
            lines += ["", f"Its first reply: `{first}`"]
        lines.append("")
    if args.note:
        lines += ["## What happened", "", args.note, ""]
    write_markdown(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
