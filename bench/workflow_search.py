"""A searched workflow vs the original vs the original's best-of-k at the same calls per task (0.5B),
on HumanEval (``--domain humaneval``, the default, described first) or one-player games (``--domain games``).

The embedded qwen2.5-coder-0.5b solves; it (or ``--proposer-model``, e.g. the 1.5B) proposes. One
call into ``ratchet.workflows.headline`` (its docstring defines the arms):

- **original**: ``examples/humaneval-coder`` (generate -> run the docstring's examples -> repair,
  greedy, at most 3 calls: its own ``evolve.yaml``), the harness the workflow search starts from;
- **evolved**: the best candidate of a ``ratchet evolve`` run from that original (operator-level
  proposer 3 : AFlow proposer 1, AFlow's soft mixed selector, the paired gate; every spec capped at
  4 calls per task; sampled at temperature 0.7, one seed), exported to the run's ``headline/evolved``;
- **best-of-k**: the original's request sampled k times, the code passing most visible examples
  answered (the best-of-k example's operators), k = the evolved arm's measured mean calls per task
  rounded up (the baseline never gets fewer calls than the evolved workflow).

Splits, fixed by index before anything was run:

- search (proposers see its failures) HumanEval/100-115 and held-in (the gate decides) 134-163: the
  problems earlier benches developed on (``bench/_setup.py``'s SPLITS; the workflow examples'
  smoke ran 100-102), so the search reuses them and spends none of the untouched ones;
- **test: HumanEval/20-99 and 116-133, 98 problems**, the rest of the file minus HumanEval/0-19,
  where the humaneval-coder harness was measured while it was being written
  (``evolve_humaneval_baseline``). No workflow search or example ran on them: the workflow
  examples' configs, which named the first 40 problems without ever being run on them, name the
  development problems above instead. HumanEval/40-79 were the test problems of the playbook
  bench (``context_playbook``: the greedy original there, no workflow chosen by them).

``--size small``: search 100-101, held-in 134-137, test 20-24, one search step: a smoke that the
pieces run together with the real model, not a result.

Resumable: ``--store`` holds the search's run (the engine resumes it from its journal), and each
arm's per-task rows are appended to that run's ``headline/arms.jsonl`` as they are graded, so a
killed bench redoes nothing it scored. Progress goes to stderr. The table gives each arm's pass@1
with its Wilson 95% interval and its mean model calls, tokens and test runs per task, then the
evolved arm paired with best-of-k on the same problems (exact McNemar), and whether the evolved
workflow is itself a best-of-k spec (then the search only rediscovered the baseline).

**Games** (``--domain games``; ``ratchet.workflows.games``): a task is one (game, seed) episode
of GuessTheNumber-v0, FrozenLake-v0, Secretary-v0 or Blackjack-v0 (one-player games whose random
episodes take 1-18 moves, all with bracketed moves whose legal rate the random-legal bench measured:
``bench/results/envs_random_legal.md``), scored by its reward clipped to [0, 1]. The original is
``examples/games-workflows`` (one greedy call per move, the move read from the reply's last
``[...]``); the search runs at 4 calls per move at most, temperature 0.7, with the move menu
(think, sample, vote, avoid_refused, review) and the AFlow proposer's move prompt; best-of-k is the
original's move request sampled k times and the majority move played, k = the evolved arm's mean
calls per *move*, rounded up. Calls and tokens in the table are per episode. Splits, fixed by
index before anything was run, the same seeds for each of the four games:

- search: game seeds 20-21 (8 episodes); held-in: 22-27 (24 episodes); ``--size wide``: held-in
  22-33 (48 episodes; seeds 28-33 chosen after the first full run, whose held-in noise was the size
  of any one-step change, and used by nothing before), the rest as ``full``;
- **test: game seeds 100-119, 80 episodes**, untouched by any search or example
  (``examples/guess-the-number`` uses GuessTheNumber seeds 0-17, ``examples/games-workflows`` 20-27).

``--domain games --size small``: search GuessTheNumber-v0#20 and FrozenLake-v0#20, held-in seeds
22-23 of both, test seed 100 of every game (4 episodes), one search step: a smoke, not a result.
The mean reward's interval is a percentile bootstrap (2,000 resamples); the paired comparison is
the sign-flip test on the reward differences and exact McNemar on solved.
Estimated full games run (docs/workflows.md, "Not done yet", from the measured smoke and a timed
4-call plan): about 2,500-5,000 model calls, 45-90 minutes on one niced thread of a 2-core machine,
up to twice that if better play lengthens the episodes.

GEPA, the prompt-only reference at the same budget (HumanEval), is not an arm here: it runs in the separate
bench environment, ``python -m bench.evolve_peers --size workflow --arm gepa`` once this bench has
written its result: the same search, held-in and test problems (``bench/_setup.py``'s
``WORKFLOW_SPLITS``), as many model calls as this search spent, the original's workflow with GEPA's
best system prompt graded on the test split, and a table beside this one's arms.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import Any

from bench._results import machine, write_json, write_markdown
from bench._setup import ROOT, WORKFLOW_SPLITS, WORKSPACE
from ratchet.store import RunStore
from ratchet.workflows.headline import Headline, HeadlineConfig

MODEL = "local:qwen2.5-coder-0.5b"


def ids(*spans: range) -> list[str]:
    return [f"HumanEval/{i}" for span in spans for i in span]


GAMES = ("GuessTheNumber-v0", "FrozenLake-v0", "Secretary-v0", "Blackjack-v0")
GAMES_WORKSPACE = ROOT / "examples" / "games-workflows"


def episodes(seeds: range, games: tuple[str, ...] = GAMES) -> list[str]:
    return [f"{game}#{seed}" for game in games for seed in seeds]


SIZES: dict[str, dict[str, Any]] = {
    "full": {"search_ids": WORKFLOW_SPLITS["search"], "heldin_ids": WORKFLOW_SPLITS["heldin"],
             "test_ids": WORKFLOW_SPLITS["test"], "iterations": 8},
    "small": {"search_ids": ids(range(100, 102)), "heldin_ids": ids(range(134, 138)),
              "test_ids": ids(range(20, 25)), "iterations": 1},
}
GAME_SIZES: dict[str, dict[str, Any]] = {
    "full": {"search_ids": episodes(range(20, 22)), "heldin_ids": episodes(range(22, 28)),
             "test_ids": episodes(range(100, 120)), "iterations": 8},
    "small": {"search_ids": episodes(range(20, 21), GAMES[:2]), "heldin_ids": episodes(range(22, 24), GAMES[:2]),
              "test_ids": episodes(range(100, 101)), "iterations": 1},
    # the first full run's held-in noise was the size of any one-step change: twice the episodes
    "wide": {"search_ids": episodes(range(20, 22)), "heldin_ids": episodes(range(22, 34)),
             "test_ids": episodes(range(100, 120)), "iterations": 8},
}


def load(spec: str, threads: int, n_ctx: int = 4096) -> Any:
    from ratchet.models import load_model  # llama.cpp loads only here

    return load_model(spec, **({"n_ctx": n_ctx, "n_threads": threads} if spec.startswith("local:") else {}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workflow_search", description=__doc__)
    parser.add_argument("--domain", choices=("humaneval", "games"), default="humaneval",
                        help="HumanEval problems, or one-player game episodes (the docstring: splits, arms)")
    parser.add_argument("--size", choices=sorted(SIZES.keys() | GAME_SIZES.keys()), default="full",
                        help="full (the docstring's splits), small (a smoke); wide: games only, 48 held-in episodes")
    parser.add_argument("--store", default=str(ROOT / "runs"), help="run store of the search (resumed when its run exists)")
    parser.add_argument("--model", default=MODEL, help="the solving model (scripted: checks the plumbing, no model)")
    parser.add_argument("--proposer-model", default=None,
                        help="the proposers' model (default: --model), loaded with an 8,192-token window: a "
                             "whole-file AFlow request and its reply need more than 4,096")
    parser.add_argument("--iterations", type=int, default=None, help="search steps (default: 8 full, 1 small)")
    parser.add_argument("--cost-gate", action="store_true", help="the gate also asks for no more calls per task than the parent")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="result name under bench/results/ (default: by size)")
    args = parser.parse_args(argv)
    games = args.domain == "games"
    if args.size not in (GAME_SIZES if games else SIZES):
        parser.error(f"--size {args.size} is for --domain games only")
    size = {**(GAME_SIZES if games else SIZES)[args.size],
            **({"iterations": args.iterations} if args.iterations is not None else {})}
    # local:qwen2.5-coder-1.5b?n_ctx=8192 -> _proposer-qwen2.5-coder-1.5b-n_ctx-8192 (a run id and a file name)
    suffix = (f"_proposer-{re.sub(r'[^A-Za-z0-9._-]+', '-', args.proposer_model.split(':', 1)[-1])}"
              if args.proposer_model else "")
    name = "workflow_search_games" if games else "workflow_search"
    out = args.out or f"{name}{ {'full': '', 'small': '_smoke'}.get(args.size, '_' + args.size)}{suffix}"
    run_id = f"workflow-search-games-{args.size}{suffix}" if games else f"workflow-search-{args.size}{suffix}"
    config = HeadlineConfig(original=GAMES_WORKSPACE if games else WORKSPACE, domain=args.domain, model=args.model,
                            proposer_model=args.proposer_model, cost_gate=args.cost_gate, run_id=run_id, **size)
    headline = Headline(config, RunStore(args.store), load(args.model, args.threads),
                        # an AFlow request (~3,400 tokens) and its whole-file reply (2,500) need more than 4,096
                        load(args.proposer_model or args.model, args.threads, n_ctx=8192),
                        progress=lambda line: print(line, file=sys.stderr, flush=True))
    summary = headline.run()
    spent = headline.spent()  # every session's, this one's included: a long run spans several
    wall = spent["wall_s"]
    write_json(out, {**summary, "size": args.size, "threads": args.threads, "wall_s": wall, "sessions": spent["sessions"],
                     "machine": machine(load=os.getloadavg()),
                     "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, default=str)
    write_markdown(out, (games_table if games else table)(summary, args, wall))
    return 0


def found_text(evolved: dict[str, Any], what: str) -> str:
    """Whether the search found anything beyond the original or the baseline, and its plan."""
    if evolved["is_original"]:
        found = "The search accepted nothing: the evolved arm is the original workflow, run at the search's settings."
    elif evolved["best_of_k"] is not None:
        found = f"The evolved workflow is {what}-{evolved['best_of_k']} itself: the search only rediscovered the baseline."
    else:
        found = f"The evolved workflow is not a {what} spec."
    plan = " -> ".join(f"{st['op']}" + "".join(f" {k}={v}" for k, v in st.items() if k != "op") for st in evolved["plan"] or [])
    return found + (f" Its plan: {plan}." if plan else " It is hand-written code (see the run's headline/evolved).")


def search_text(s: dict[str, Any], args: argparse.Namespace, wall: float) -> str:
    search = s["search"]
    return (f"Search: {search.get('proposals', {}).get('total', '?')} proposals, "
            f"{search.get('proposals', {}).get('accepted', '?')} accepted; {search.get('budget', {}).get('calls', '?')} "
            f"model calls. Wall time {wall / 60:.1f} min (every session of the run) on {os.cpu_count()} CPUs, "
            f"{args.threads} model threads.")


def steps_text(s: dict[str, Any]) -> str:
    """The search's steps: proposer, what it aimed at, held-in gain and p, or why none was made."""
    steps = s["search"].get("steps") or []
    if not steps:
        return ""
    rows = ["| step | proposer | aimed at | held-in gain | p | verdict |", "|---|---|---|---|---|---|"]
    for st in steps:
        gain = "—" if st["heldin_gain"] is None else f"{st['heldin_gain']:+.3f}"
        p = "—" if st["p_value"] is None else f"{st['p_value']:.3f}"
        verdict = "accepted" if st["accepted"] else ("no candidate: " if st["candidate"] is None else "") + st["reason"]
        rows.append(f"| {st['step']} | {st['proposer']} | {st['aimed_at'][:80].replace('|', '/')} | {gain} | {p} | "
                    f"{verdict[:120].replace('|', '/')} |")
    return "\n".join(rows)


def games_table(s: dict[str, Any], args: argparse.Namespace, wall: float) -> str:
    c, evolved = s["config"], s["evolved"]
    what = ("= the original, sampled" if evolved["is_original"]
            else f"= vote-of-{evolved['best_of_k']}" if evolved["best_of_k"] is not None else "not vote-of-k")
    name = {"original": "original (games-workflows, greedy, 1 call/move)", "evolved": f"evolved ({evolved['id'][:12]}; {what})",
            "best-of-k": f"original's move sampled {s['k']}x, majority vote"}
    lines = [f"# Workflow search on one-player games ({c['model']}" + (f", {c['proposer_model']} proposing)" if c["proposer_model"] else ")")
             + (" — SMOKE, not a result" if args.size == "small" else ""), "",
             (f"Produced by `python -m bench.workflow_search --domain games --size {args.size}` (its docstring: games, "
              f"splits, arms). Search run `{s['run']}`: {c['iterations']} steps on {len(c['search_ids'])} search + "
              f"{len(c['heldin_ids'])} held-in episodes; test split {len(c['test_ids'])} episodes, seed(s) "
              f"{', '.join(map(str, c['test_seeds']))}. Reward clipped to [0, 1]; its interval a percentile bootstrap; "
              "calls, tokens and moves per episode."), "",
             "| arm | mean reward | 95% CI | solved | Wilson 95% | calls / episode | calls / move | tokens / episode | moves / episode |",
             "|---|---|---|---|---|---|---|---|---|"]
    for arm, a in s["arms"].items():
        lines.append(f"| {name[arm]} | {a['mean_reward']:.3f} | {a['reward_low']:.3f}–{a['reward_high']:.3f} | "
                     f"{a['solved']}/{a['n']} | {a['wilson_low']:.3f}–{a['wilson_high']:.3f} | {a['calls_per_episode']:.2f} | "
                     f"{a['calls_per_move']:.2f} | {a['tokens_per_episode']:.0f} | {a['moves_per_episode']:.1f} |")
    lines.append("")
    for p in s["paired"].values():
        if p is not None:
            lines.append(f"- {p['first']} vs {p['second']} on {p['pairs']} episodes: mean reward difference "
                         f"{p['mean_reward_diff']:+.3f} ({p['first_higher']} higher, {p['second_higher']} lower); sign-flip "
                         f"p = {p['sign_flip_p_two_sided']:.3f} two-sided ({p['sign_flip_p_first_better']:.3f} for "
                         f"{p['first']} better); solved only by {p['first']} {p['only_first']}, only by {p['second']} "
                         f"{p['only_second']}, exact McNemar p = {p['mcnemar_p']:.3f}.")
    lines += ["", found_text(evolved, "vote-of"), "", search_text(s, args, wall), "", steps_text(s)]
    return "\n".join(lines).rstrip("\n") + "\n"


def table(s: dict[str, Any], args: argparse.Namespace, wall: float) -> str:
    c, evolved = s["config"], s["evolved"]
    what = ("= the original, sampled" if evolved["is_original"]
            else f"= best-of-{evolved['best_of_k']}" if evolved["best_of_k"] is not None else "not best-of-k")
    name = {"original": "original (humaneval-coder, greedy)", "evolved": f"evolved ({evolved['id'][:12]}; {what})",
            "best-of-k": f"original's best-of-{s['k']}, selected by the visible examples"}
    lines = [f"# Workflow search on HumanEval ({c['model']}" + (f", {c['proposer_model']} proposing)" if c["proposer_model"] else ")")
             + (" — SMOKE, not a result" if args.size == "small" else ""), "",
             (f"Produced by `python -m bench.workflow_search --size {args.size}` (its docstring: splits, arms). Search run "
              f"`{s['run']}`: {c['iterations']} steps on {len(c['search_ids'])} search + {len(c['heldin_ids'])} held-in "
              f"problems; test split {len(c['test_ids'])} problems, seed(s) {', '.join(map(str, c['test_seeds']))}."), "",
             "| arm | pass@1 | Wilson 95% | passed | calls / task | tokens / task | test runs / task |",
             "|---|---|---|---|---|---|---|"]
    for arm, a in s["arms"].items():
        lines.append(f"| {name[arm]} | {a['pass_at_1']:.3f} | {a['wilson_low']:.3f}–{a['wilson_high']:.3f} | {a['passed']}/{a['n']} | "
                     f"{a['calls_per_task']:.2f} | {a['tokens_per_task']:.0f} | {a['test_runs_per_task']:.2f} |")
    lines.append("")
    for p in s["paired"].values():
        if p is not None:
            lines.append(f"- {p['first']} vs {p['second']} on {p['pairs']} (problem, seed) pairs: only {p['first']} solved "
                         f"{p['only_first']}, only {p['second']} {p['only_second']}; exact McNemar p = {p['mcnemar_p']:.3f}.")
    lines += ["", found_text(evolved, "best-of"), "", search_text(s, args, wall), "", steps_text(s)]
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
