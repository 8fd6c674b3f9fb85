"""``ratchet evolve`` on a TextArena one-player game with the embedded 0.5B: before/after on held-out seeds.

Runs ``examples/guess-the-number/evolve.yaml`` (GuessTheNumber-v0, numbers 1-20, 10 guesses)
through the engine, as ``ratchet evolve`` does. The harness the model plays through is the system
prompt (``prompts/system.md``, rewritten by the reflective proposer) and the workflow's move
function (``workflow.py``, ``legal_move``: SEARCH/REPLACE edits by the diff proposer); the grader is
the game, played by the suite outside the candidate; the paired gate with the run-wise alpha
decides. Splits are game seeds fixed by index in the YAML: search 0-1, held-in 2-9, test 10-17
(untouched until the report). Score: the game's reward (1 guessed; otherwise 1 - the last
guess's distance / 19).

Replies go through a cache next to the results, one for every result name
(``evolve_textarena.replies.jsonl``, the proposer's in ``evolve.proposer.replies.jsonl``; greedy
decoding, so the seed is left out of the key, see ``bench.evolve_humaneval.SeedFreeAtGreedy``), and
the engine's run store (``--root``/``--run-id``) resumes a cut-short run paying nothing twice: run it
in chunks (``timeout 1200 python -m bench.evolve_textarena ...``) and then ``--partial`` writes what
an unfinished run measured so far.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

from bench._results import RESULTS, machine, write_json, write_markdown
from bench._setup import MODEL, ROOT, proposer_model, shared_model
from ratchet.evolve.archive import Archive
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.evolve.report_tables import arms_table, calls_line, candidates_table, step_events, steps_table
from ratchet.store import RunStore

CONFIG = ROOT / "examples" / "guess-the-number" / "evolve.yaml"
REPLIES = RESULTS / "evolve_textarena.replies.jsonl"
TITLE = f"`ratchet evolve` on TextArena GuessTheNumber-v0 ({MODEL})"


def open_or_create(args: argparse.Namespace, config: EvolveConfig) -> Any:
    store = RunStore(args.root)
    try:
        return store.open_run(args.run_id)
    except Exception:  # noqa: BLE001 - no such run yet: start it
        return store.create_run("evolve", config, name="guess-the-number", run_id=args.run_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evolve_textarena", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default=MODEL, help="model spec (scripted: checks the plumbing, no results)")
    parser.add_argument("--root", default=str(ROOT / "runs"))
    parser.add_argument("--run-id", default="bench-evolve-textarena")
    parser.add_argument("--out", default="evolve_textarena")
    parser.add_argument("--iterations", type=int, default=None, help="override the YAML's iterations")
    parser.add_argument("--proposer-model", default=None,
                        help="a model the proposers ask instead of --model (the YAML's proposer_model), e.g. "
                             "local:qwen2.5-coder-1.5b proposing for the 0.5B that plays")
    parser.add_argument("--test-games", type=int, default=None,
                        help="test seeds 10 .. 10+N-1 instead of the YAML's eight (a narrower interval; more games)")
    parser.add_argument("--partial", action="store_true", help="write what the run store holds so far; run nothing")
    args = parser.parse_args(argv)
    raw = yaml.safe_load(CONFIG.read_text())  # the results keep its relative workspace (no machine path)
    if args.iterations is not None:
        raw["iterations"] = args.iterations
    if args.proposer_model is not None:
        raw["proposer_model"] = args.proposer_model
    if args.test_games is not None:
        game = raw["suite"]["options"]["games"][0]
        raw["splits"]["ids"]["test"] = [f"{game}#{i}" for i in range(10, 10 + args.test_games)]
        raw["suite"]["options"]["episodes"] = 10 + args.test_games
    config = EvolveConfig.model_validate({**raw, "workspace": str(CONFIG.parent), "model": args.model})
    run = open_or_create(args, config)
    if args.partial:
        write_partial(args, run, raw)
        return 0
    # One play cache whatever the result's name: a run that only changes the proposer replays the
    # games its original already paid for (the key holds the model's name).
    replies = REPLIES if args.model == MODEL else Path(args.root) / "scripted.replies.jsonl"
    started = time.perf_counter()
    proposer = proposer_model(args.proposer_model if args.model == MODEL else None, args.threads)
    summary = Engine(config, run, shared_model(args.model, args.threads, replies=replies), proposer_model=proposer,
                     on_event=lambda e: print(json.dumps(e, default=str)[:300], flush=True)).execute()
    report = summary.get("report")
    if report is None or args.model != MODEL:
        print(json.dumps({k: v for k, v in summary.items() if k != "report"}, default=str))
        return 0 if report is not None else 1
    write(args, run, raw, config, report, summary, time.perf_counter() - started)
    return 0


def write_partial(args: argparse.Namespace, run: Any, raw: dict[str, Any]) -> None:
    out = {"finished": False, "model": MODEL, "config": raw, "events": run.read_jsonl("evolve/events.jsonl"),
           "failed_proposals": Archive(run).unusable(),
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(args.out, out, default=str)
    lines = [f"# An unfinished {TITLE}", "",
             "Written by `python -m bench.evolve_textarena --partial` from the run store: the run has not reached its "
             "final report, so there is no test-seed comparison here yet. The same command without `--partial` "
             "resumes it.", "", *candidates_table(run), "", calls_line(run), "", *steps_table(run)]
    write_markdown(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))


def write(args: argparse.Namespace, run: Any, raw: dict[str, Any], config: EvolveConfig, report: dict[str, Any],
          summary: dict[str, Any], wall_s: float) -> None:
    out = {"finished": True, "model": MODEL, "config": raw, "report": report,
           "totals": {k: v for k, v in summary.items() if k != "report"},
           "steps": [{k: e.get(k) for k in ("step", "proposer", "status", "reason", "child", "model_calls")}
                     for e in step_events(run)],
           "failed_proposals": Archive(run).unusable(),
           "wall_s_this_chunk": round(wall_s, 1),
           "machine": machine(load=os.getloadavg()),
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(args.out, out, default=str)

    r = report
    n = r["original_best_of_n"]
    p = r["proposals"]
    lines = [f"# {TITLE}", "",
             "Produced by `python -m bench.evolve_textarena` from `examples/guess-the-number/evolve.yaml` (see the "
             f"bench's docstring): {config.iterations} steps, the system prompt (reflective proposer) and the move "
             "function `legal_move` in `workflow.py` (diff proposer) as the surfaces, greedy selector, paired gate "
             "with run-wise alpha 0.05; greedy decoding, one seed; score = the game's reward. Seeds by index: "
             f"search 0-1, held-in 2-9, test 10-{9 + len(raw['splits']['ids']['test'])}."
             + (f" The proposers ask {raw['proposer_model']}; the games are played by {MODEL}."
                if raw.get("proposer_model") else ""), "",
             *arms_table(r, "mean reward", "games"),
             "## The search", "",
             f"Proposals evaluated: {p['total']}, accepted {p['accepted']} (static rejects {p['static_rejects']}, "
             f"smoke rejects {p['smoke_rejects']}); failed proposals (no usable edit after the retries): "
             f"{p.get('failed', 0)}, {p.get('failed_model_calls', 0)} model calls. "
             f"Model calls in all: {r['budget']['calls']} ({n['search_spend']} {n['budget_unit']} in the search).", "",
             calls_line(run), "", *candidates_table(run), "", *steps_table(run), "",
             f"Best-of-N: the original's own (greedy) pass plus {n['attempts'] - 1} attempts sampled at temperature "
             f"{n.get('temperature')}, each at its own seed; N = 1 + search spend // one pass over the test seeds "
             f"({n['pass_cost']} {n['budget_unit']}) = {n['uncapped_attempts']}, capped at {config.report.max_best_of_n}."]
    write_markdown(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
