"""AutoHarness reliability across search seeds: how often does the small model succeed?

One search is one draw: the Thompson draws, the critic's sampling and the model's sampling seeds all
follow ``rng_seed``. The real-model CI test pins one seed, so it shows the pipeline works, not how
often it does. This benchmark repeats the CI test's search (TicTacToe-v0, 0.5B, at most 24 refiner
calls, 4 samples per refinement) over several search seeds for each configuration, and reports the
success rate (h = 1.0 in the search, with its Wilson 95% interval) next to each run's held-out check
of the code alone.

Each run is one call of :func:`ratchet.api.synthesize_harness`, what ``ratchet autoharness`` runs:
the improvement engine (path ``engine``). The held-out protocol with the model is off
(``protocol="none"``): the held-out columns are the code alone on 5 held-out seeds × 200 steps.

    python -m bench.autoharness_seeds --seeds 0 1 2 --configs default no_induce --threads 1

Writes bench/results/autoharness_seeds.json and .md after every run; ``--resume`` keeps the runs
already there (same configuration and seed). Rows of path ``search`` (and rows with no path, made
before the column existed) ran the dedicated search, since removed: they stay in the results as
history, beside the engine's. ``autoharness_seeds.notes.md``, when present, is kept at the end of the
.md (what earlier runs showed, in words).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from bench._autoharness import first_solved, row  # noqa: F401 - first_solved: the bench's reading, tested here
from bench._results import RESULTS, machine, write_json, write_markdown

CONFIGS: dict[str, dict] = {
    "default": {},
    "no_novelty": {"novelty": False},
    "no_repair": {"repair": False},
    "no_autofix": {"autofix": False},
    # Rules off: rules fitted to the explored states solve TicTacToe before any call, so this is the model's own code.
    "no_induce": {"induce": False},
    # Measured before induce existed, the aliases row is the model's search: its ablation keeps induce off too.
    "no_aliases": {"aliases": False, "induce": False},
    "neither (the previous default)": {"novelty": False, "repair": False},
    "restarts": {"restarts": True},
    "fresh_roots": {"fresh_roots": True},
    "explain_failures": {"explain_failures": True},
    "fresh_roots+explain_failures": {"fresh_roots": True, "explain_failures": True},
}
#: The path new rows run on; ``search`` rows in an existing results file are the removed search's.
PATH = "engine"


def config(env: str, model: str, name: str, seed: int, max_calls: int, library_dir: Path):
    """The real-model CI test's settings (tests/autoharness/test_real_model.py) with search seed
    ``seed`` and the ideas of ``name``. The library is the run's own, empty one: with a shared one,
    ``library_seed`` would start each seed from the harness an earlier seed kept."""
    from ratchet.autoharness.config import AutoHarnessConfig

    cfg = AutoHarnessConfig(env=env, method="ratchet", model=model, iterations=8, eval_steps=50,
                            search_seeds=list(range(10)), heldout_seeds=list(range(1000, 1005)), rng_seed=seed,
                            ideas=CONFIGS[name], library_dir=str(library_dir))
    cfg.budget.max_calls = max_calls
    return cfg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.autoharness_seeds", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    parser.add_argument("--env", default="TicTacToe-v0")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3], help="search seeds (rng_seed) to run")
    parser.add_argument("--configs", nargs="*", default=["default"], choices=list(CONFIGS),
                        help="ratchet-method idea switches to compare (default = the shipped defaults)")
    parser.add_argument("--max-calls", type=int, default=24, help="refiner calls per search (the CI test's budget)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--name", default="autoharness_seeds")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the results files")
    parser.add_argument("--store", type=Path, default=None,
                        help="run store to keep each run's archive, replies and traces in (default: a temporary one)")
    args = parser.parse_args(argv)

    import json
    import tempfile

    from ratchet.api import synthesize_harness

    out = args.out / f"{args.name}.json"
    store = args.store or Path(tempfile.mkdtemp(prefix="ratchet-seeds-"))
    rows: list[dict] = json.loads(out.read_text())["rows"] if args.resume and out.exists() else []
    for r in rows:
        r.setdefault("path", "search")  # rows from before the column ran the dedicated search (removed)
    have = {(r["path"], r["config"], r["seed"]) for r in rows}
    for name in args.configs:
        for seed in args.seeds:
            if (PATH, name, seed) in have:
                continue
            load_before = os.getloadavg()[0]
            cfg = config(args.env, args.model, name, seed, args.max_calls,
                         store / "libraries" / f"{PATH}-{name}-s{seed}".replace(" ", "_"))
            started = time.perf_counter()
            result = synthesize_harness(config=cfg, protocol="none", store=store, threads=args.threads)
            rows.append({"path": PATH, "config": name, "seed": seed, **row(result.report, result.run_dir),
                         "total_wall_s": round(time.perf_counter() - started, 1),
                         "load": [round(load_before, 2), round(os.getloadavg()[0], 2)], "threads": args.threads})
            print(json.dumps(rows[-1]), flush=True)
            _write(args, rows)
    _write(args, rows)
    return 0


def summary(rows: list[dict]) -> list[dict[str, Any]]:
    """Per path and configuration: solved k/n with its Wilson 95% interval, mean best h, mean calls."""
    from ratchet.stats import wilson

    out = []
    for path, name in dict.fromkeys((r["path"], r["config"]) for r in rows):
        mine = [r for r in rows if (r["path"], r["config"]) == (path, name)]
        solved = sum(r["best_h"] >= 1.0 for r in mine)
        low, high = wilson(solved, len(mine))
        out.append({"path": path, "config": name, "solved": solved, "n": len(mine), "wilson95": [round(low, 3), round(high, 3)],
                    "mean_best_h": sum(r["best_h"] for r in mine) / len(mine),
                    "mean_calls": sum(r["calls"] for r in mine) / len(mine)})
    return out


def _write(args, rows: list[dict]) -> None:
    loads = [x for r in rows if "load" in r for x in r["load"]]
    load = {"load_avg_1min_range": [min(loads), max(loads)]} if loads else {}
    table = summary(rows)
    write_json(args.name, {"model": args.model, "env": args.env, "max_calls": args.max_calls,
                           "machine": machine(**load), "summary": table, "rows": rows}, out=args.out)
    f = lambda v: "–" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
    lines = [
        f"# AutoHarness across search seeds: {args.env}, {args.model}, at most {args.max_calls} refiner calls per search",
        "",
        "The real-model CI test's search (8 iterations, 4 samples per refinement, 5 envs × 50 steps, search seeds 0-9),",
        "repeated with different `rng_seed`s, each one `ratchet.api.synthesize_harness` call on the engine (`engine`);",
        "rows of path `search` ran the dedicated search, since removed, and stay as history. Held-out = the best harness",
        "alone on 5 held-out seeds × 200 steps, and its verifier's accuracy on transitions harvested from them. Written by",
        "= what made the first harness at h = 1 (the engine step's proposer, `+ repair` when its step repaired the sample it",
        "proposed; on the search: refiner, repair, or library or",
        "induced rules). Load = the 1-minute load average before and after the run (2 cores shared with other jobs).",
        "",
        "| path | configuration | solved (h = 1.0) | Wilson 95% | mean best h | mean calls |",
        "|---|---|---|---|---|---|",
    ]
    for s in table:
        lines.append(f"| {s['path']} | {s['config']} | {s['solved']}/{s['n']} | {s['wilson95'][0]:.2f}–{s['wilson95'][1]:.2f} | "
                     f"{s['mean_best_h']:.3f} | {s['mean_calls']:.1f} |")
    lines += ["", "| path | configuration | seed | best h | calls | call that first reached h = 1 | written by | held-out legal rate | "
                  "held-out verifier accuracy | wall s | load | stop | run |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        load = " → ".join(f"{x:.1f}" for x in r["load"]) if "load" in r else "–"
        lines.append(f"| {r['path']} | {r['config']} | {r['seed']} | {f(r['best_h'])} | {r['calls']} | {f(r['calls_to_h1'])} | {f(r.get('solved_by'))} | "
                     f"{f(r['heldout_legal_rate'])} | {f(r['heldout_verifier_accuracy'])} | {r['wall_s']} | {load} | "
                     f"{r['stop']} | {r.get('run', '–')} |")
    notes = args.out / f"{args.name}.notes.md"
    if notes.exists():
        lines += ["", notes.read_text().rstrip()]
    write_markdown(args.name, "\n".join(lines) + "\n", out=args.out)


if __name__ == "__main__":
    raise SystemExit(main())
