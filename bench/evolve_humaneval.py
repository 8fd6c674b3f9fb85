"""A real ``ratchet evolve`` run on HumanEval with the embedded 0.5B: held-out pass@1 before and after.

The harness is ``examples/humaneval-coder`` (a system prompt and a generate -> run the visible
examples -> repair workflow). The run evolves its system prompt (``prompts/system.md``) with the
reflective proposer and the paired gate; the workflow stays as it is, so the same run can be
repeated by the peers (``bench/evolve_peers.py``) on the same surface.

Splits are fixed slices of the problem file, chosen by index before anything was run (never by
results): the first 20 problems had no headroom (the starting harness passed 0.90 of them,
``evolve_humaneval_baseline``), so every split comes from the second half of the file:
search = HumanEval/100-103, held-in = HumanEval/104-115, test = HumanEval/134-163 (untouched until
the final report). Decoding is greedy (temperature 0), one seed; only the report's best-of-N
baseline samples (its extra attempts at ``report.best_of_n_temperature``, each with its own seed).

All model replies go through one reply cache next to the results
(``NAME.replies.jsonl``, shared with the peers' bench): at temperature 0 the embedded decoder is
greedy, so the request's seed is left out of the cache key (``bench._setup.SeedFreeAtGreedy``) and a
request any arm already made is answered from the cache. Model calls are still counted per arm
(the budget equality is on calls asked for, cached or not). The engine's own run store
(``runs/bench-evolve-humaneval`` under the checkout) makes a killed run resume where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from bench._results import machine, write_json, write_markdown
from bench._setup import (
    MODEL,
    PROPOSER_MAX_TOKENS,
    PROPOSER_TEMPERATURE,
    REPLIES,
    ROOT,
    SMALL_SPLITS,
    SPLITS,
    WORKSPACE,
    proposer_model,
    proposer_suffix,
    shared_model,
    span,
    suite_options,
)
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.evolve.report_tables import arms_table, step_events
from ratchet.store import RunStore


def run_config(iterations: int, splits: dict[str, list[str]] = SPLITS, max_search_s: float | None = None,
               max_best_of_n: int = 4, template: str | None = None,
               proposer_max_tokens: int = PROPOSER_MAX_TOKENS) -> EvolveConfig:
    return EvolveConfig.model_validate({
        "budget": {"max_wall_s": max_search_s},
        "workspace": str(WORKSPACE),
        "model": MODEL,
        "suite": {"name": "humaneval", "options": suite_options(splits)},
        "splits": {"search": 0, "heldin": 0, "heldout": 0, "test": 0, "ids": splits},
        "seeds": [0],
        "selector": {"name": "greedy"},
        "proposers": [{"name": "reflective", "options": {
            "surfaces": ["prompts/system.md"], "max_tokens": proposer_max_tokens, "template": template,
            "temperature": PROPOSER_TEMPERATURE, "max_traces": 3, "max_trace_chars": 900}}],
        "gate": {"name": "paired", "options": {"alpha": 0.05, "correction": "spending"}},
        "smoke": {"tasks": min(4, len(splits["heldin"]) // 2), "margin": 0.25},
        "iterations": iterations,
        "report": {"max_best_of_n": max_best_of_n},
    })


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evolve_humaneval", description=__doc__)
    parser.add_argument("--iterations", type=int, default=4, help="proposal steps of the run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default=MODEL, help="model spec (scripted: checks the plumbing, no model)")
    parser.add_argument("--root", default=str(ROOT / "runs"), help="run store of the engine's run")
    parser.add_argument("--run-id", default=None, help="the run's id (resumed when it exists; default: "
                        "bench-evolve-humaneval, -small for --size small, and the proposer model's suffix)")
    parser.add_argument("--out", default=None, help="result name under bench/results/ (default: by size)")
    parser.add_argument("--size", choices=["full", "small"], default="full",
                        help="full: search 4 / held-in 12 / test 30; small: 2 / 6 / 8 (the same slices' first problems)")
    parser.add_argument("--max-search-s", type=float, default=None,
                        help="stop the search (then report) after this many seconds of the run's wall clock")
    parser.add_argument("--max-best-of-n", type=int, default=None,
                        help="cap on the best-of-N baseline's attempts (default: 4 full, 2 small: each sampled "
                             "attempt is one more pass of the model over the test split)")
    parser.add_argument("--proposer-model", default=None,
                        help="a model the proposer asks instead of --model (the run's proposer_model, e.g. "
                             "local:qwen2.5-coder-1.5b proposing for the 0.5B that writes the code); its results "
                             "and run are named apart (NAME_proposer-MODEL), its replies cached beside them")
    parser.add_argument("--template", default=None,
                        help="the reflective proposer's prompt template, a surface of the workspace (e.g. "
                             "proposer/reflective.md, written for instructions; default: the packaged one)")
    parser.add_argument("--proposer-max-tokens", type=int, default=PROPOSER_MAX_TOKENS,
                        help="the proposer's reply budget (the peers' bench caps theirs the same: pass it there too)")
    parser.add_argument("--partial", action="store_true",
                        help="run nothing: write what the run store has measured so far (a run the machine time did not finish)")
    args = parser.parse_args(argv)
    args.max_best_of_n = args.max_best_of_n or (4 if args.size == "full" else 2)
    args.splits = SPLITS if args.size == "full" else SMALL_SPLITS
    args.out = args.out or ("evolve_humaneval" if args.size == "full" else "evolve_humaneval_small") + proposer_suffix(args)
    # The default id names the size and the proposer, as the result's name does; one given is kept as is.
    args.run_id = args.run_id or ("bench-evolve-humaneval" + ("-small" if args.size == "small" else "")
                                  + proposer_suffix(args))

    config = run_config(args.iterations, args.splits, args.max_search_s, args.max_best_of_n, args.template,
                        args.proposer_max_tokens).model_copy(
        update={"model": args.model, "proposer_model": args.proposer_model})
    store = RunStore(args.root)
    try:
        run = store.open_run(args.run_id)
    except Exception:  # noqa: BLE001 - no such run yet: start it
        run = store.create_run("evolve", config, name="humaneval-coder", run_id=args.run_id)
    if args.partial:
        write_partial(args, run)
        return 0
    started = time.perf_counter()

    def line(event: dict[str, Any]) -> None:
        print(json.dumps({k: v for k, v in event.items() if k not in ("numbers",)}, default=str)[:400], flush=True)

    replies = REPLIES if args.model == MODEL else Path(args.root) / f"{args.run_id}.replies.jsonl"
    proposer = proposer_model(args.proposer_model if args.model == MODEL else None, args.threads)
    summary = Engine(config, run, shared_model(args.model, args.threads, replies=replies), on_event=line,
                     proposer_model=proposer).execute()
    report = summary.get("report")
    if report is None:
        print(json.dumps(summary, indent=2, default=str))
        return 1
    write(args, report, summary, time.perf_counter() - started, run)
    return 0


def write_partial(args: argparse.Namespace, run: Any) -> None:
    """The measurements of an unfinished run, read from its store: each candidate's pass rate per
    split so far, each finished step's decision, and the model calls with their tokens and latency."""
    fingerprint = (run.read_json("evolve/pins.json") or {}).get("evaluator")
    split_of = {i: name for name, ids in args.splits.items() for i in ids}
    scores: dict[str, dict[str, list[float]]] = {}
    for r in run.read_jsonl("evolve/evals.jsonl"):
        if fingerprint is None or r["fingerprint"] == fingerprint:
            scores.setdefault(r["candidate"], {}).setdefault(split_of.get(r["task_id"], "?"), []).append(r["score"])
    calls = run.read_jsonl("llm_calls.jsonl")
    events = run.read_jsonl("evolve/events.jsonl")
    measured = {
        "finished": False, "model": MODEL, "splits": args.splits, "suite_options": suite_options(args.splits),
        "candidates": {c: {split: {"passed": sum(v), "of": len(v)} for split, v in per.items()} for c, per in scores.items()},
        "events": [{k: v for k, v in e.items() if k != "numbers"} for e in events],
        "calls": {"n": len(calls), "ok": sum(1 for c in calls if c.get("ok")),
                  "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
                  "completion_tokens": sum(c["completion_tokens"] for c in calls),
                  "latency_s": round(sum(c["latency_s"] for c in calls), 1)},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(args.out, measured, default=str)
    c = measured["calls"]
    lines = [f"# An unfinished `ratchet evolve` run on HumanEval ({MODEL})", "",
             "Written by `python -m bench.evolve_humaneval --partial` from the run store: the run did not reach its "
             "final report in the machine time it had, so there is no test-split comparison here yet. "
             "Resume it with the same command without `--partial`.", "",
             "| candidate | " + " | ".join(args.splits) + " |", "|---|" + "---|" * len(args.splits)]
    for cand, per in measured["candidates"].items():
        cells = [f"{per[s]['passed']:g}/{per[s]['of']}" if s in per else "–" for s in args.splits]
        lines.append(f"| {cand[:12]} | " + " | ".join(cells) + " |")
    lines += ["", f"Model calls: {c['n']} ({c['ok']} completed), {c['prompt_tokens']} prompt + {c['completion_tokens']} "
              f"completion tokens, {c['latency_s']} s of model latency (replies from the shared cache count with the "
              "latency they had when first made).", "", "| event | detail |", "|---|---|"]
    for e in measured["events"]:
        detail = {k: v for k, v in e.items() if k not in ("kind", "at", "format_version")}
        lines.append(f"| {e['kind']} | {json.dumps(detail, default=str).replace('|', '/')[:300]} |")
    write_markdown(args.out, "\n".join(lines) + "\n")


def write(args: argparse.Namespace, report: dict[str, Any], summary: dict[str, Any], wall_s: float, run: Any) -> None:
    steps = step_events(run)
    out = {
        "model": MODEL, "proposer_model": args.proposer_model, "template": args.template,
        "proposer_max_tokens": args.proposer_max_tokens, "splits": args.splits,
        "suite_options": suite_options(args.splits), "iterations": args.iterations,
        "threads": args.threads,
        "report": report, "steps": [{k: e.get(k) for k in ("step", "status", "reason", "child")} for e in steps],
        "totals": {k: v for k, v in summary.items() if k != "report"},
        "wall_s": round(wall_s, 1),
        "machine": machine(load=os.getloadavg()),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(args.out, out, default=str)

    r = report
    lines = [
        f"# A real `ratchet evolve` run on HumanEval ({MODEL}"
        + (f", {args.proposer_model} proposing)" if args.proposer_model else ")"), "",
        "Produced by `python -m bench.evolve_humaneval` (see its docstring for the splits and the cache). "
        f"The run evolved `prompts/system.md` of `examples/humaneval-coder` for {args.iterations} steps "
        f"(reflective proposer{f' with the template {args.template}' if args.template else ''}, greedy selector, paired gate: run-wise alpha 0.05, the k-th test at 0.05/2^k); greedy decoding, one seed.", "",
        f"Splits (by index, fixed before any run): search {len(args.splits['search'])} "
        f"({span(args.splits['search'])}), held-in {len(args.splits['heldin'])} ({span(args.splits['heldin'])}), "
        f"test {len(args.splits['test'])} ({span(args.splits['test'])}, untouched until this report).", "",
        *arms_table(r, "pass@1", "problems"),
        "## The search", "",
        f"Proposals: {r['proposals']['total']}, accepted {r['proposals']['accepted']}, "
        f"smoke rejects {r['proposals']['smoke_rejects']}, static rejects {r['proposals']['static_rejects']}. "
        f"Model calls: {r['budget']['calls']} in all ({r['original_best_of_n']['search_spend']} in the search, "
        f"the rest in this report), {r['budget']['tokens']} tokens ({r['budget']['completion_tokens']} completion); "
        f"task evaluations run: {r['task_evals']}.", "",
        "| step | status | reason |", "|---|---|---|",
    ]
    for e in steps:
        lines.append(f"| {'' if e.get('step') is None else e['step'] + 1} | {e.get('status')} | {str(e.get('reason', '')).replace('|', '/')[:160]} |")
    n = r["original_best_of_n"]
    lines += ["", f"Best-of-N: the original's own (greedy) pass plus {n['attempts'] - 1} attempts sampled at temperature "
              f"{n.get('temperature')} (seeds {', '.join(str(s) for s in n.get('attempt_seeds', [])[1:]) or 'none'}); "
              "a problem counts as solved if any attempt solves it. The search's spend buys "
              f"1 + {n['search_spend']} // {n.get('pass_cost')} = {n.get('uncapped_attempts')} attempts "
              f"({n['budget_unit']}; one pass of the original over the test split costs {n.get('pass_cost')}); "
              f"N is capped at {args.max_best_of_n} (`--max-best-of-n`) to fit the machine time."]
    write_markdown(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
