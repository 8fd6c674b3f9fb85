"""``ratchet evolve`` on a TextArena one-player game with the embedded 0.5B: before/after on held-out seeds.

Runs ``examples/guess-the-number/evolve.yaml`` (GuessTheNumber-v0; the system prompt of a player
that asks the model for each guess is evolved by the reflective proposer, the paired gate with
run-wise alpha decides) through the engine, as ``ratchet evolve`` does, with the replies in a
cache next to the results (``evolve_textarena.replies.jsonl``; greedy decoding, so the seed is
left out of the key, see ``bench.evolve_humaneval.SeedFreeAtGreedy``). Splits are game seeds
fixed by index in the YAML: search 0-1, held-in 2-7, test 8-12 (untouched until the report).
The engine's run store (``runs/bench-evolve-textarena``) resumes a cut-short run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import yaml

from bench.evolve_humaneval import MODEL, RESULTS, ROOT, shared_model, steps_of
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.store import RunStore

CONFIG = ROOT / "examples" / "guess-the-number" / "evolve.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evolve_textarena", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default=MODEL, help="model spec (scripted: checks the plumbing, no results)")
    parser.add_argument("--root", default=str(ROOT / "runs"))
    parser.add_argument("--run-id", default="bench-evolve-textarena")
    parser.add_argument("--out", default="evolve_textarena")
    args = parser.parse_args(argv)
    raw = yaml.safe_load(CONFIG.read_text())
    raw["workspace"] = str(CONFIG.parent)
    config = EvolveConfig.model_validate({**raw, "model": args.model})
    store = RunStore(args.root)
    try:
        run = store.open_run(args.run_id)
    except Exception:  # noqa: BLE001 - no such run yet: start it
        run = store.create_run("evolve", config, name="guess-the-number", run_id=args.run_id)
    replies = RESULTS / f"{args.out}.replies.jsonl" if args.model == MODEL else Path(args.root) / "scripted.replies.jsonl"
    started = time.perf_counter()
    summary = Engine(config, run, shared_model(args.model, args.threads, replies=replies),
                     on_event=lambda e: print(json.dumps(e, default=str)[:300], flush=True)).execute()
    report = summary.get("report")
    if report is None or args.model != MODEL:
        print(json.dumps({k: v for k, v in summary.items() if k != "report"}, default=str))
        return 0 if report is not None else 1
    steps = steps_of(run)
    out = {"model": MODEL, "config": raw, "report": report, "totals": {k: v for k, v in summary.items() if k != "report"},
           "steps": [{k: e.get(k) for k in ("step", "status", "reason", "child")} for e in steps],
           "wall_s": round(time.perf_counter() - started, 1),
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(out, indent=2, default=str) + "\n")

    def arm(row: dict[str, Any]) -> str:
        return f"{row['mean']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"

    r = report
    same = " (= original)" if r["best"]["id"] == r["original"]["id"] else ""
    lines = [f"# `ratchet evolve` on TextArena GuessTheNumber-v0 ({MODEL})", "",
             "Produced by `python -m bench.evolve_textarena` from `examples/guess-the-number/evolve.yaml`: the player's "
             f"system prompt evolved for {config.iterations} steps (reflective proposer, paired gate with run-wise "
             "alpha 0.05); greedy decoding; score = the game's reward (1 solved). Seeds by index: search 0-1, "
             "held-in 2-7, test 8-12.", "",
             f"## Test seeds ({r['tasks']} episodes), mean reward with 95% bootstrap CIs", "",
             "| arm | mean reward [95% CI] |", "|---|---|",
             f"| original | {arm(r['original'])} |", f"| best{same} | {arm(r['best'])} |",
             f"| original, best-of-{r['original_best_of_n']['attempts']} | {arm(r['original_best_of_n'])} |", "",
             f"best - original: {arm(r['comparison']['best_minus_original'])}", "",
             f"Proposals {r['proposals']['total']}, accepted {r['proposals']['accepted']}; model calls "
             f"{r['budget']['calls']} ({r['original_best_of_n']['search_spend']} in the search).", "",
             "| step | status | reason |", "|---|---|---|"]
    for e in steps:
        lines.append(f"| {e.get('step')} | {e.get('status')} | {str(e.get('reason', '')).replace('|', '/')[:160]} |")
    n = r["original_best_of_n"]
    lines += ["", f"Best-of-N: the original's own (greedy) pass plus {n['attempts'] - 1} attempts sampled at temperature "
              f"{n.get('temperature')}, each at its own seed."]
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
